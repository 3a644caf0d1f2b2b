//! `mnemo mcp --embedded` end to end: the real binary started as an MCP
//! host starts it (a child process speaking JSON-RPC lines over stdio),
//! with its store in its own process. Memory survives a restart; a second
//! process on the same directory is refused with a message naming the
//! holder; HTTP stays on loopback and needs a key; without --embedded
//! nothing falls back to an embedded store.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(60);

fn mnemo() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    // The test's environment must not point it elsewhere.
    c.env_remove("MNEMO_ADDR").env_remove("MNEMO_API_KEY");
    c
}

/// A running `mnemo mcp`, spoken to over its stdin and stdout.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    next_id: u64,
}

/// Lines of `from`, read on a thread so a test can wait with a timeout.
fn lines(from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

impl Mcp {
    fn start(args: &[&str], env: &[(&str, &Path)]) -> Mcp {
        let mut cmd = mnemo();
        cmd.arg("mcp").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mnemo mcp");
        let stdout = lines(child.stdout.take().expect("piped stdout"));
        let stderr = lines(child.stderr.take().expect("piped stderr"));
        Mcp {
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
            next_id: 1,
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{message}").expect("write to mnemo mcp");
        stdin.flush().expect("flush");
    }

    /// Sends a request and returns its response's `result`.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.stdout.recv_timeout(TIMEOUT).unwrap_or_else(|_| {
                panic!("no answer to {method}; stderr: {}", self.stderr_so_far())
            });
            let v: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method} failed: {v}");
                return v["result"].clone();
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let info = self.call(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mnemo-tests", "version": "0"},
            }),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        info
    }

    fn tool(&mut self, name: &str, arguments: Value) -> String {
        let r = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        let text: String = r["content"]
            .as_array()
            .expect("content")
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect();
        assert_ne!(r["isError"], json!(true), "{name}: {text}");
        text
    }

    /// The first stderr line (the embedded store's directory).
    fn first_stderr_line(&self) -> String {
        self.stderr.recv_timeout(TIMEOUT).expect("a line on stderr")
    }

    fn stderr_so_far(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Closes stdin, as a host does, and waits for a clean exit.
    fn close(mut self) {
        drop(self.stdin.take());
        for _ in 0..(TIMEOUT.as_millis() / 50) {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(
                    status.success(),
                    "mnemo mcp exited with {status}: {}",
                    self.stderr_so_far()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("mnemo mcp did not exit after stdin closed");
    }
}

#[test]
fn an_embedded_mcp_server_lists_its_tools_remembers_and_keeps_memory_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memory");
    let dir_s = dir.to_str().unwrap();
    let args = ["--namespace", "agents", "--embedded", "--data-dir", dir_s];

    let mut first = Mcp::start(&args, &[]);
    let said = first.first_stderr_line();
    assert!(
        said.contains(dir_s) && said.contains("embedded"),
        "stderr: {said}"
    );
    let info = first.initialize();
    assert!(info["capabilities"]["tools"].is_object(), "{info}");
    let tools = first.call("tools/list", json!({}));
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "get_context",
            "handoff",
            "list_facts",
            "list_pending_actions",
            "list_sessions",
            "put_fact",
            "remember",
            "search_memory",
            "update_pending_action",
        ]
    );
    let stored = first.tool(
        "remember",
        json!({"session_id": "trip-1", "subject_id": "ana", "turns": [
            {"role": "user", "speaker": "ana", "content": "Book the 7:40 train to Porto, seat 42A."},
        ]}),
    );
    assert!(stored.contains('1'), "{stored}");
    first.tool(
        "put_fact",
        json!({"subject_id": "ana", "key": "seat", "text": "Ana prefers window seats."}),
    );

    // A second process on the same directory: refused, naming the
    // directory and the holder's pid, and nothing is served.
    let second = mnemo()
        .args(["mcp"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run a second mnemo mcp");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "the second process started: {err}"
    );
    assert!(err.contains("in use by another process"), "{err}");
    assert!(err.contains(dir_s), "{err}");
    assert!(err.contains(&format!("pid {}", first.child.id())), "{err}");
    assert!(second.stdout.is_empty());

    first.close();
    assert!(
        !dir.join("mnemo.pid").exists(),
        "the holder file outlived its holder"
    );

    // Restarted on the same directory: the memory is still there.
    let mut again = Mcp::start(&args, &[]);
    again.initialize();
    let context = again.tool("get_context", json!({"session_id": "trip-1"}));
    assert!(context.contains("seat 42A"), "{context}");
    let facts = again.tool("list_facts", json!({"subject_id": "ana"}));
    assert!(facts.contains("window seats"), "{facts}");
    again.close();
}

#[test]
fn the_default_data_directory_is_the_per_user_data_home() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("data-home");
    let mut mcp = Mcp::start(
        &["--namespace", "agents", "--embedded"],
        &[("XDG_DATA_HOME", &home)],
    );
    let said = mcp.first_stderr_line();
    let expected = home.join("mnemo");
    assert!(said.contains(expected.to_str().unwrap()), "stderr: {said}");
    mcp.initialize();
    mcp.close();
    assert!(
        expected.join("db").exists(),
        "no store in {}",
        expected.display()
    );
}

#[test]
fn without_embedded_nothing_falls_back_and_http_stays_on_loopback_with_a_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memory");
    let dir_s = dir.to_str().unwrap();
    let run = |args: &[&str], key: Option<&str>| {
        let mut c = mnemo();
        c.arg("mcp").args(args).stdin(Stdio::null());
        if let Some(k) = key {
            c.env("MNEMO_API_KEY", k);
        }
        let out = c.output().expect("run mnemo mcp");
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // No daemon at the address: an error, never an embedded store.
    let err = run(&["--namespace", "a", "--addr", "http://127.0.0.1:9"], None);
    assert!(err.contains("cannot connect"), "{err}");
    let err = run(&["--namespace", "a", "--data-dir", dir_s], None);
    assert!(err.contains("--embedded"), "{err}");
    assert!(!dir.exists(), "a store was created without --embedded");

    let embedded = ["--namespace", "a", "--embedded", "--data-dir", dir_s];
    let err = run(
        &[&embedded[..], &["--http", "0.0.0.0:0"]].concat(),
        Some("k"),
    );
    assert!(err.contains("loopback only"), "{err}");
    let err = run(&[&embedded[..], &["--http", "127.0.0.1:0"]].concat(), None);
    assert!(err.contains("needs a key"), "{err}");

    // With a key: requests without it get 401, with it they reach MCP.
    let mut child = mnemo()
        .arg("mcp")
        .args(embedded)
        .args(["--http", "127.0.0.1:0"])
        .env("MNEMO_API_KEY", "s3cret-key")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mnemo mcp --http");
    let stderr = lines(child.stderr.take().unwrap());
    let addr = loop {
        let line = stderr.recv_timeout(TIMEOUT).expect("the listening line");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.trim_end_matches("/mcp").to_owned();
        }
    };
    let post = |auth: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
        .to_string();
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        BufReader::new(s).read_line(&mut status).unwrap();
        status
    };
    assert!(post("").contains(" 401 "), "no key");
    assert!(
        post("Authorization: Bearer wrong\r\n").contains(" 401 "),
        "a wrong key"
    );
    let ok = post("Authorization: Bearer s3cret-key\r\n");
    assert!(ok.contains(" 200 "), "with the key: {ok}");
    // SIGTERM: the store is synced and released.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!dir.join("mnemo.pid").exists());
}
