//! The inspector's guards over plain HTTP (issue 44): review controls only
//! for keys that may resolve, bounded and same-site live streams, checked
//! arithmetic on page positions, a CSRF cookie per port, and the Host
//! check of a remote inspector. The browser suite is `inspector.rs`.

mod common;

use std::net::SocketAddr;

use common::{config_for, TestServer};
use mnemo::client::{connect, ClientOptions, MemoryClient};
use mnemo::inspect::{Inspector, Settings};
use mnemo::pb;
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Permission, Role};

const NS: &str = "ns";

struct Keys {
    agent: String,
    reviewer: String,
}

async fn daemon() -> (TestServer, Keys, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = config_for(&tmp.path().join("data"));
    let mut auth = AuthConfig::default();
    let mut make = |name: &str, role: Role, permissions: Vec<Permission>| {
        let (key, sha256) = new_key().expect("key");
        auth.keys.push(KeyConfig {
            name: name.into(),
            namespace: NS.into(),
            role,
            permissions,
            sha256,
        });
        key
    };
    let keys = Keys {
        agent: make("agent", Role::Write, vec![]),
        reviewer: make("reviewer", Role::Read, vec![Permission::Review]),
    };
    config.auth = auth;
    (TestServer::start_with(config).await, keys, tmp)
}

async fn client(server: &TestServer, key: &str) -> MemoryClient {
    connect(&ClientOptions {
        addr: server.url(),
        api_key: Some(key.to_owned()),
        ..ClientOptions::default()
    })
    .await
    .expect("connect")
}

/// Serves an inspector with `key` and `settings` on a loopback port of
/// this runtime.
async fn inspector(server: &TestServer, key: &str, settings: Settings) -> SocketAddr {
    let inspector = Inspector::new(client(server, key).await, settings).expect("inspector");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    addr
}

fn settings() -> Settings {
    Settings {
        default_namespace: Some(NS.into()),
        ..Settings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_controls_only_for_a_key_that_may_resolve() {
    let (server, keys, _tmp) = daemon().await;
    let mut agent = client(&server, &keys.agent).await;
    common::risky_session(&mut agent, NS, "s1", "the duplicate charge").await;
    let http = reqwest::Client::new();
    let page = |addr: SocketAddr| {
        let http = http.clone();
        async move {
            http.get(format!("http://{addr}/ns/{NS}/review"))
                .send()
                .await
                .expect("GET review")
                .text()
                .await
                .expect("body")
        }
    };
    let as_agent = page(inspector(&server, &keys.agent, settings()).await).await;
    assert!(
        as_agent.contains("review-"),
        "the item is listed: {as_agent}"
    );
    assert!(
        as_agent.contains("read-only") && !as_agent.contains("<form"),
        "an agent's write key gets no approve button: {as_agent}"
    );
    let as_reviewer = page(inspector(&server, &keys.reviewer, settings()).await).await;
    assert!(
        as_reviewer.contains("<form") && as_reviewer.contains("Approve"),
        "a reviewer's key gets the controls: {as_reviewer}"
    );
    server.stop().await;
}

async fn session(c: &mut MemoryClient, id: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .expect("create");
}

#[test]
fn live_streams_default_well_below_the_daemons_watch_limit() {
    let daemon = mnemo::config::Limits::default();
    assert!(
        mnemo::inspect::MAX_LIVE_STREAMS <= daemon.observer_watches() / 2,
        "the inspector's default ({}) leaves most of the observers' share ({}) of the daemon's {} watches",
        mnemo::inspect::MAX_LIVE_STREAMS,
        daemon.observer_watches(),
        daemon.max_watches_per_namespace
    );
    assert!(daemon.observer_watches() < daemon.max_watches_per_namespace);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_page_cannot_open_live_streams() {
    let (server, keys, _tmp) = daemon().await;
    let mut agent = client(&server, &keys.agent).await;
    session(&mut agent, "s").await;
    let addr = inspector(&server, &keys.reviewer, settings()).await;
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/ns/{NS}/sessions/s/events?after=0");
    let cross = http
        .get(&url)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .expect("GET");
    assert_eq!(cross.status(), 403);
    let same = http
        .get(&url)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .expect("GET");
    assert_eq!(same.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_inspector_streams_leave_the_agents_their_watches() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.max_watches_per_namespace = 4;
    let server = TestServer::start_with(config).await;
    let mut agent = connect(&ClientOptions {
        addr: server.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    session(&mut agent, "s").await;
    // An inspector allowed more streams than the daemon's whole limit.
    let inspector = Inspector::new(
        agent.clone(),
        Settings {
            max_live_streams: 10,
            ..settings()
        },
    )
    .expect("inspector");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/ns/{NS}/sessions/s/events?after=0");
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..6 {
        let r = http.get(&url).send().await.expect("GET events");
        if r.status() == 200 {
            open.push(r);
        } else {
            refused += 1;
        }
    }
    assert_eq!(open.len(), 2, "observers get half of the 4 watches");
    assert_eq!(refused, 4);
    // The agents' own watches still have room.
    let mut watches = Vec::new();
    for _ in 0..2 {
        let w = agent
            .watch_session(pb::WatchSessionRequest {
                namespace: NS.into(),
                session_id: "s".into(),
                ..Default::default()
            })
            .await
            .expect("an agent's watch with the inspector's streams open");
        watches.push(w);
    }
    drop((open, watches));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_position_past_u64_is_a_bad_request_not_a_wrap() {
    let (server, keys, _tmp) = daemon().await;
    let mut agent = client(&server, &keys.agent).await;
    session(&mut agent, "s").await;
    let addr = inspector(&server, &keys.reviewer, settings()).await;
    let http = reqwest::Client::new();
    let page = http
        .get(format!(
            "http://{addr}/ns/{NS}/sessions/s?from=18446744073709551615"
        ))
        .send()
        .await
        .expect("GET");
    assert_eq!(page.status(), 400);
    assert!(page.text().await.unwrap().contains("beyond any turn"));
    let live = http
        .get(format!(
            "http://{addr}/ns/{NS}/sessions/s/events?after=18446744073709551615"
        ))
        .send()
        .await
        .expect("GET");
    assert_eq!(live.status(), 400);
    let resumed = http
        .get(format!("http://{addr}/ns/{NS}/sessions/s/events?after=0"))
        .header("last-event-id", "18446744073709551615")
        .send()
        .await
        .expect("GET");
    assert_eq!(resumed.status(), 400);
    server.stop().await;
}

fn csrf_cookie_names(r: &reqwest::Response) -> Vec<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split('=').next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_inspectors_on_one_host_keep_their_own_csrf_cookies() {
    let (server, keys, _tmp) = daemon().await;
    let a = inspector(&server, &keys.reviewer, settings()).await;
    let b = inspector(&server, &keys.reviewer, settings()).await;
    let http = reqwest::Client::new();
    let get = |addr: SocketAddr| http.get(format!("http://{addr}/ns/{NS}/review")).send();
    let (ra, rb) = (get(a).await.unwrap(), get(b).await.unwrap());
    let (na, nb) = (csrf_cookie_names(&ra), csrf_cookie_names(&rb));
    assert_eq!(na, vec![format!("mnemo_csrf_{}", a.port())]);
    assert_eq!(nb, vec![format!("mnemo_csrf_{}", b.port())]);
    server.stop().await;
}

/// This machine's address on its network (not loopback); `None` without
/// one.
fn network_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("203.0.113.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_inspector_refuses_a_forged_loopback_host() {
    let Some(ip) = network_ip() else {
        eprintln!("skipped: this machine has no non-loopback address");
        return;
    };
    let (server, keys, _tmp) = daemon().await;
    let inspector = Inspector::new(
        client(&server, &keys.reviewer).await,
        Settings {
            allowed_hosts: vec!["inspect.test".into()],
            ..settings()
        },
    )
    .expect("inspector");
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    let http = reqwest::Client::new();
    let get = |to: SocketAddr, host: String| {
        http.get(format!("http://{to}/ns/{NS}/review"))
            .header("host", host)
            .send()
    };
    let remote = SocketAddr::new(ip, port);
    let forged = get(remote, format!("127.0.0.1:{port}")).await.unwrap();
    assert_eq!(forged.status(), 421, "a loopback Host from another address");
    assert!(
        csrf_cookie_names(&forged).is_empty(),
        "no CSRF token for a refused request"
    );
    let listed = get(remote, format!("inspect.test:{port}")).await.unwrap();
    assert_eq!(listed.status(), 200);
    let local = get(
        SocketAddr::from(([127, 0, 0, 1], port)),
        format!("127.0.0.1:{port}"),
    )
    .await
    .unwrap();
    assert_eq!(
        local.status(),
        200,
        "from this machine a loopback Host is real"
    );
    server.stop().await;
}
