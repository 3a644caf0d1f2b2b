//! What listens beyond loopback (issue 44, findings 3, 4 and 12): a daemon
//! refuses API keys in clear off loopback unless the operator accepts the
//! risk by name, and a key reload cannot turn them on either; with auth
//! off off loopback the warning names every host on the network; `mnemo
//! mcp --http` and `mnemo inspect --http` serve a non-loopback address only
//! with `--allow-remote` and an explicit Host list, and refuse a forged
//! loopback Host from another machine.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{config_for, spawn_in_group, TestServer};
use mnemo::client::{connect, ClientOptions};
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Keys, Listener, Role};
use mnemo::server::Daemon;

fn one_key() -> AuthConfig {
    let (_, sha256) = new_key().expect("key");
    AuthConfig {
        required: None,
        keys: vec![KeyConfig {
            name: "agent".into(),
            namespace: "ns".into(),
            role: Role::Write,
            permissions: vec![],
            sha256,
        }],
    }
}

#[tokio::test]
async fn keys_in_clear_off_loopback_refuse_to_start_unless_accepted_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.listen = "0.0.0.0:0".parse().unwrap();
    config.auth = one_key();
    let e = match Daemon::open(config.clone()).await {
        Ok(_) => panic!("a daemon with keys in clear on 0.0.0.0 must not start"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("in clear")
            && e.contains("[tls]")
            && e.contains("allow_plaintext_keys_off_loopback"),
        "the refusal names the risk and the ways out: {e}"
    );
    config.allow_plaintext_keys_off_loopback = true;
    config.validate().expect("accepted by name");
    config.allow_plaintext_keys_off_loopback = false;
    config.tls = Some(mnemo::config::TlsConfig {
        cert: "cert.pem".into(),
        key: "key.pem".into(),
        client_ca: None,
    });
    config
        .validate()
        .expect("with TLS the keys are not in clear");
}

#[test]
fn a_key_reload_cannot_turn_on_keys_in_clear_off_loopback() {
    let open_on_the_network = AuthConfig {
        required: Some(false),
        keys: vec![],
    };
    let listener = Listener {
        loopback: false,
        tls: false,
        plaintext_keys_allowed: false,
    };
    let keys = Keys::for_listener(&open_on_the_network, listener).expect("auth off starts");
    let e = keys.reload(&one_key()).expect_err("keys in clear refused");
    assert!(e.to_string().contains("in clear"), "{e}");
    assert!(!keys.enabled(), "the table in force stays");
    let accepted = Keys::for_listener(
        &open_on_the_network,
        Listener {
            plaintext_keys_allowed: true,
            ..listener
        },
    )
    .unwrap();
    accepted.reload(&one_key()).expect("accepted by name");
}

#[test]
fn the_serve_command_refuses_keys_in_clear_and_says_how_to_accept() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, sha256) = new_key().unwrap();
    let data = tmp.path().to_str().unwrap().to_owned();
    let key = format!("agent:ns:write:{sha256}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    cmd.args(["serve", "--listen", "0.0.0.0:0", "--data-dir", &data])
        .args(["--auth-key", &key])
        .env_remove("MNEMO_CONFIG")
        .env_remove("MNEMO_LISTEN")
        .env_remove("MNEMO_ALLOW_PLAINTEXT_KEYS_OFF_LOOPBACK")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let (mut child, mut group) = spawn_in_group(&mut cmd);
    // A daemon that starts instead of refusing would run forever: wait
    // a bounded time, then fail (the group is ended either way).
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    group.end();
    let status = status.expect("the daemon started with keys in clear on 0.0.0.0");
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut err).unwrap();
    assert!(err.contains("--allow-plaintext-keys-off-loopback"), "{err}");
}

/// Starts `mnemo` with `args`, returns (group, the lines it logged until
/// one contained `until`).
fn run_until(args: &[&str], until: &str) -> (common::ProcessGroup, Vec<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    cmd.args(args)
        .env("MNEMO_LOG", "info")
        .env_remove("MNEMO_CONFIG")
        .env_remove("MNEMO_LISTEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let (mut child, group) = spawn_in_group(&mut cmd);
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lines.iter().any(|l: &String| l.contains(until)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => panic!("no line with {until:?}; logged: {lines:#?}"),
        }
    }
    (group, lines)
}

#[test]
fn auth_off_on_the_network_warns_that_any_host_may_read_write_and_erase() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().to_str().unwrap();
    let (mut group, lines) = run_until(
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
            data,
            "--auth-required",
            "false",
        ],
        "mnemo listening",
    );
    group.end();
    let warning = lines
        .iter()
        .find(|l| l.contains("auth is off"))
        .expect("a warning");
    assert!(
        warning.contains("ANY HOST") && warning.contains("erase"),
        "{warning}"
    );
    assert!(
        !warning.contains("any process on this machine"),
        "{warning}"
    );
    // The start-up line says who may resolve review items.
    let listening = lines
        .iter()
        .find(|l| l.contains("mnemo listening"))
        .expect("the start-up line");
    assert!(
        listening.contains("review=\"anyone who reaches the address\""),
        "{listening}"
    );
}

/// This machine's address on its network (not loopback), to reach a
/// server bound to 0.0.0.0 as another host would; `None` without one.
fn network_ip() -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("203.0.113.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn mcp_initialize(to: SocketAddr, host: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("http://{to}/mcp"))
        .header("host", host)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(INITIALIZE)
        .send()
        .await
        .expect("POST /mcp")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_refuses_a_forged_loopback_host_from_another_machine() {
    let Some(ip) = network_ip() else {
        eprintln!("skipped: this machine has no non-loopback address");
        return;
    };
    let server = TestServer::start().await;
    let client = connect(&ClientOptions {
        addr: server.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    let tools = mnemo::mcp::Tools::new(client, "ns", 4000);
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hosts = mnemo::hosts::HostPolicy::new(vec!["mcp.test".into()]);
    tokio::spawn(mnemo::mcp::serve_http(
        tools,
        listener,
        hosts,
        None,
        std::future::pending(),
    ));
    let remote = SocketAddr::new(ip, port);
    let local = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(
        mcp_initialize(remote, &format!("127.0.0.1:{port}")).await,
        421,
        "a loopback Host from another address is forged"
    );
    assert_eq!(mcp_initialize(remote, "evil.example").await, 421);
    assert_eq!(
        mcp_initialize(remote, &format!("mcp.test:{port}")).await,
        200
    );
    assert_eq!(
        mcp_initialize(local, &format!("127.0.0.1:{port}")).await,
        200,
        "from this machine a loopback Host is real"
    );
    server.stop().await;
}

#[test]
fn mcp_and_inspect_need_allow_remote_and_a_host_list_off_loopback() {
    for front in ["mcp", "inspect"] {
        let base: Vec<&str> = match front {
            "mcp" => vec!["mcp", "--namespace", "ns", "--http", "0.0.0.0:0"],
            _ => vec!["inspect", "--http", "0.0.0.0:0"],
        };
        let run = |extra: &[&str]| {
            let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
                .args(&base)
                .args(extra)
                .args(["--addr", "http://127.0.0.1:1"])
                .env_remove("MNEMO_INSPECT_HTTP")
                .env_remove("MNEMO_MCP_HTTP")
                .output()
                .expect("run mnemo");
            assert!(!out.status.success(), "{front} {extra:?}");
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let err = run(&[]);
        assert!(
            err.contains("non-loopback") && err.contains("--allow-remote"),
            "{front}: {err}"
        );
        let err = run(&["--allow-remote"]);
        assert!(err.contains("--allowed-host"), "{front}: {err}");
    }
}

#[test]
fn allow_remote_says_so_on_stderr() {
    let (mut group, lines) = run_until(
        &[
            "mcp",
            "--namespace",
            "ns",
            "--http",
            "0.0.0.0:0",
            "--allow-remote",
            "--allowed-host",
            "mcp.test",
            "--addr",
            "http://127.0.0.1:1",
        ],
        "warning",
    );
    group.end();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("warning") && l.contains("mcp.test")),
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_cannot_turn_on_keys_in_clear_off_loopback() {
    use std::sync::{Arc, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("mnemo.toml");
    std::fs::write(
        &config,
        "listen = \"0.0.0.0:0\"\n[auth]\nrequired = false\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    cmd.args(["serve", "--config", config.to_str().unwrap(), "--data-dir"])
        .arg(tmp.path().join("data"))
        .env("MNEMO_LOG", "info")
        .env_remove("MNEMO_LISTEN")
        .env_remove("MNEMO_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let (mut child, mut group) = spawn_in_group(&mut cmd);
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let lines = log.clone();
    let stderr = child.stderr.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
    });
    let wait_for = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(l) = log.lock().unwrap().iter().find(|l| l.contains(text)) {
                return l.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {text:?} in {:#?}",
                log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let listening = wait_for("mnemo listening on ");
    let port: u16 = listening
        .split("mnemo listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .expect("the port");
    let (_, sha256) = new_key().unwrap();
    std::fs::write(
        &config,
        format!(
            "listen = \"0.0.0.0:0\"\n[[auth.keys]]\nname = \"agent\"\nnamespace = \"ns\"\nrole = \"write\"\nsha256 = \"{sha256}\"\n"
        ),
    )
    .unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hup.success());
    let refused = wait_for("configuration not reloaded");
    assert!(refused.contains("in clear"), "{refused}");
    // Auth is still off as it was: no key was turned on in clear.
    let mut c = connect(&ClientOptions {
        addr: format!("http://127.0.0.1:{port}"),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    c.list_sessions(mnemo::pb::ListSessionsRequest {
        namespace: "ns".into(),
        ..Default::default()
    })
    .await
    .expect("the keys in force (none) stay");
    drop(c);
    group.end();
    let _ = child.wait();
}
