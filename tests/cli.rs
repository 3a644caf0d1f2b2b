//! The `mnemo` command line end to end: the real binary as a client of the
//! real daemon (also the binary), driven like a person would.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Binary, Spawned};

fn mnemo(addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(args)
        .env("MNEMO_ADDR", addr)
        .output()
        .expect("run mnemo")
}

fn ok(addr: &str, args: &[&str]) -> String {
    let out = mnemo(addr, args);
    assert!(
        out.status.success(),
        "mnemo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs a command until its output satisfies `done` (at most 30 s); returns
/// the last output.
fn ok_until(addr: &str, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    for _ in 0..300 {
        out = ok(addr, args);
        if done(&out) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    out
}

#[test]
fn a_person_can_drive_a_session_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let daemon = Binary::start(&tmp.path().join("data"), &[]);
    let addr = daemon.url();
    let t = ["-n", "support", "-s", "case-7"];
    let id = ok(
        &addr,
        &[
            "session",
            "create",
            "-n",
            "support",
            "--id",
            "case-7",
            "--subject",
            "customer:ann",
            "--owner",
            "agent-a",
        ],
    );
    assert_eq!(id.trim(), "case-7");
    let out = ok(
        &addr,
        &[
            &["append"],
            &t[..],
            &[
                "--speaker",
                "ann",
                "I need a refund for order ORD-31, $12.00.",
            ],
        ]
        .concat(),
    );
    assert!(out.starts_with("seq 1 "), "{out}");
    ok(
        &addr,
        &[
            &["append"],
            &t[..],
            &[
                "--role",
                "assistant",
                "--speaker",
                "agent-a",
                "--lease-epoch",
                "1",
                "I will refund $12.00 for ORD-31 by 2026-12-09.",
            ],
        ]
        .concat(),
    );
    let show = ok(&addr, &[&["session", "show"], &t[..]].concat());
    assert!(
        show.contains("owner=\"agent-a\"") && show.contains("epoch=1") && show.contains("turns=2"),
        "{show}"
    );

    let summary = ok(&addr, &[&["summarize"], &t[..]].concat());
    assert!(summary.contains("ORD-31"), "{summary}");

    let bundle = ok(
        &addr,
        &[&["bundle"], &t[..], &["--budget", "1000"]].concat(),
    );
    assert!(
        bundle.starts_with("# Context bundle: session case-7"),
        "{bundle}"
    );
    assert!(bundle.contains("ORD-31"));
    let json = ok(
        &addr,
        &[&["bundle"], &t[..], &["--budget", "1000", "--json"]].concat(),
    );
    let v: serde_json::Value = serde_json::from_str(&json).expect("bundle JSON");
    assert_eq!(v["as_of_seq"], 2);
    assert!(v["token_count"].as_u64().unwrap() <= 1000);

    // A watcher started before the handoff sees the replay and the handoff.
    let watch = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_mnemo"))
            .args([&["watch"], &t[..], &["--from", "1"]].concat())
            .env("MNEMO_ADDR", &addr)
            .stdout(Stdio::piped()),
    );

    let handed = ok(
        &addr,
        &[
            &["handoff"],
            &t[..],
            &[
                "--from",
                "agent-a",
                "--to",
                "agent-b",
                "--lease-epoch",
                "1",
                "--reason",
                "shift end",
            ],
        ]
        .concat(),
    );
    assert!(handed.contains("Prepared for agent agent-b."), "{handed}");

    // The old owner is fenced: one line with the status, non-zero exit.
    let late = mnemo(
        &addr,
        &[&["append"], &t[..], &["--lease-epoch", "1", "late"]].concat(),
    );
    assert!(!late.status.success());
    let err = String::from_utf8_lossy(&late.stderr);
    assert!(
        err.contains("FailedPrecondition (STALE_LEASE_EPOCH)") && err.contains("agent-b"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // Bad input and unknown sessions fail the same way.
    let bad = mnemo(&addr, &[&["bundle"], &t[..], &["--budget", "10"]].concat());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("InvalidArgument"));
    let missing = mnemo(&addr, &["session", "show", "-n", "support", "-s", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("NotFound"));

    // Closing ends nothing for the watcher; deleting ends its stream.
    std::thread::sleep(Duration::from_millis(300));
    ok(&addr, &[&["session", "delete"], &t[..]].concat());
    let watched = watch.wait_with_output();
    assert!(!watched.status.success(), "the stream ends with NOT_FOUND");
    let lines = String::from_utf8_lossy(&watched.stdout);
    assert!(lines.contains("#1 user ann: I need a refund"), "{lines}");
    assert!(
        lines.contains("-- handed off from agent-a to agent-b (lease epoch 2): shift end"),
        "{lines}"
    );
    assert!(daemon.terminate().success());
}

#[test]
fn facts_search_episodes_and_reindex_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = Binary::start(&data, &[]);
    let addr = daemon.url();
    let put = ok(
        &addr,
        &[
            "fact",
            "put",
            "-n",
            "shop",
            "--subject",
            "ann",
            "--key",
            "size",
            "Wears size M.",
        ],
    );
    assert!(put.contains("(created)"), "{put}");
    let put = ok(
        &addr,
        &[
            "fact",
            "put",
            "-n",
            "shop",
            "--subject",
            "ann",
            "--key",
            "size",
            "Wears size L now.",
        ],
    );
    assert!(put.contains("(superseded "), "{put}");
    let list = ok(
        &addr,
        &["fact", "list", "-n", "shop", "--subject", "ann", "--json"],
    );
    assert_eq!(list.lines().count(), 1, "{list}");
    let fact: serde_json::Value = serde_json::from_str(list.trim()).unwrap();
    assert_eq!(fact["text"], "Wears size L now.");
    let history = ok(
        &addr,
        &[
            "fact",
            "list",
            "-n",
            "shop",
            "--subject",
            "ann",
            "--history",
        ],
    );
    assert_eq!(history.lines().count(), 2, "{history}");

    ok(
        &addr,
        &[
            "session",
            "create",
            "-n",
            "shop",
            "--id",
            "v1",
            "--subject",
            "ann",
        ],
    );
    ok(
        &addr,
        &[
            "append",
            "-n",
            "shop",
            "-s",
            "v1",
            "The parcel with the blue raincoat never arrived.",
        ],
    );
    ok(&addr, &["session", "close", "-n", "shop", "-s", "v1"]);
    // The index and the episode catch up shortly after the writes.
    let search = ["search", "-n", "shop", "--kind", "turn", "raincoat parcel"];
    let found = ok_until(&addr, &search, |o| o.contains("v1 #1"));
    assert!(found.contains("v1 #1"), "{found}");
    let list = ["episodes", "-n", "shop", "--subject", "ann", "--json"];
    let episodes = ok_until(&addr, &list, |o| !o.is_empty());
    assert!(episodes.contains("\"session_id\":\"v1\""), "{episodes}");
    let err = mnemo(&addr, &["search", "-n", "shop", "--limit", "101", "x"]);
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("InvalidArgument"));
    // The index committed, and tantivy's INFO line per commit stayed out
    // of the daemon's log (MNEMO_LOG=info does not name tantivy).
    let chatter = daemon
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("INFO tantivy"))
        .count();
    assert_eq!(chatter, 0, "tantivy's INFO lines reached the log");
    assert!(daemon.terminate().success());

    // Offline rebuild, then the daemon serves the rebuilt index.
    let out = ok(&addr, &["reindex", "--data-dir", data.to_str().unwrap()]);
    assert!(out.starts_with("reindexed "), "{out}");
    let daemon = Binary::start(&data, &[]);
    let addr = daemon.url();
    let found = ok(&addr, &["search", "-n", "shop", "raincoat"]);
    assert!(found.contains("v1 #1"), "{found}");
    assert!(daemon.terminate().success());
}

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(json_of).collect()
}

/// With auth on, the CLI sends `MNEMO_API_KEY`; without it every command
/// fails with one line naming the status. Every client command speaks
/// `--json` for scripts.
#[test]
fn the_cli_uses_the_api_key_and_speaks_json() {
    let tmp = tempfile::tempdir().unwrap();
    let key_out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args([
            "key",
            "create",
            "--namespace",
            "ops",
            "--role",
            "admin",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(key_out.status.success());
    let created = json_of(&String::from_utf8(key_out.stdout).unwrap());
    let key = created["key"].as_str().unwrap().to_owned();
    let entry = &created["config"];
    let config = tmp.path().join("mnemo.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth.keys]]\nname = {}\nnamespace = {}\nrole = {}\nsha256 = {}\n",
            entry["name"], entry["namespace"], entry["role"], entry["sha256"]
        ),
    )
    .unwrap();
    let daemon = Binary::start_with(
        &tmp.path().join("data"),
        &[],
        &["--config", config.to_str().unwrap()],
    );
    let addr = daemon.url();

    // No key: one line, the status and its message, exit non-zero.
    let out = mnemo(&addr, &["session", "list", "-n", "ops"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("Unauthenticated"), "{err}");

    let run = |args: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
            .args(args)
            .env("MNEMO_ADDR", &addr)
            .env("MNEMO_API_KEY", &key)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mnemo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let s = json_of(&run(&[
        "session", "create", "-n", "ops", "--id", "j1", "--owner", "agent-a", "--json",
    ]));
    assert_eq!(
        (s["session_id"].as_str(), s["state"].as_str()),
        (Some("j1"), Some("active"))
    );
    let t = ["-n", "ops", "-s", "j1"];
    let a = json_of(&run(&[
        &["append"],
        &t[..],
        &["--json", "I will restart the database at 5pm."],
    ]
    .concat()));
    assert_eq!(a["first_seq"], 1);
    let turns = json_lines(&run(&[&["turns"], &t[..], &["--json"]].concat()));
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["role"], "user");
    assert_eq!(
        json_of(&run(&[&["session", "show"], &t[..], &["--json"]].concat()))["turn_count"],
        1
    );
    assert_eq!(
        json_lines(&run(&["session", "list", "-n", "ops", "--json"])).len(),
        1
    );
    let summary = json_of(&run(&[&["summarize"], &t[..], &["--json"]].concat()));
    assert!(summary.is_object(), "{summary}");
    let fact = json_of(&run(&[
        "fact",
        "put",
        "-n",
        "ops",
        "--subject",
        "db",
        "--key",
        "window",
        "Maintenance is at 5pm.",
        "--json",
    ]));
    assert_eq!(fact["outcome"], "created");
    let id = fact["fact"]["fact_id"].as_str().unwrap().to_owned();
    assert_eq!(
        json_of(&run(&["fact", "delete", "-n", "ops", &id, "--json"]))["fact_id"],
        id.as_str()
    );
    let h = json_of(&run(&[
        &["handoff"],
        &t[..],
        &[
            "--from",
            "agent-a",
            "--to",
            "agent-b",
            "--lease-epoch",
            "1",
            "--json",
        ],
    ]
    .concat()));
    assert_eq!(h["lease_epoch"], 2);
    assert!(h["bundle"]["rendered_text"].is_string() || h["bundle"].is_object());
    let closed = json_of(&run(&[&["session", "close"], &t[..], &["--json"]].concat()));
    assert_eq!(closed["state"], "closed");
    assert_eq!(
        json_of(&run(&[&["session", "delete"], &t[..], &["--json"]].concat()))["deleted_turns"],
        2
    );
    daemon.terminate();
}

/// `append --file` sends a JSON-lines file in batches, in order; stdin
/// works too; a bad line is named and nothing is appended.
#[test]
fn append_takes_turns_from_a_json_lines_file_or_stdin() {
    let tmp = tempfile::tempdir().unwrap();
    let daemon = Binary::start(&tmp.path().join("data"), &[]);
    let addr = daemon.url();
    ok(&addr, &["session", "create", "-n", "ns", "--id", "f"]);
    let t = ["-n", "ns", "-s", "f"];

    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"role\":\"user\",\"content\":\"fine\"}\n{\"role\":\"robot\",\"content\":\"no\"}\n",
    )
    .unwrap();
    let out = mnemo(
        &addr,
        &[&["append"], &t[..], &["--file", bad.to_str().unwrap()]].concat(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));

    let file = tmp.path().join("turns.jsonl");
    let mut lines = String::new();
    for i in 0..300 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        lines.push_str(&format!(
            "{{\"role\":\"{role}\",\"speaker\":\"s{}\",\"content\":\"turn {i}\"}}\n",
            i % 2
        ));
    }
    lines.push_str("{\"role\":\"assistant\",\"content\":\"looked it up\",\"tool_call\":{\"tool_name\":\"lookup\",\"arguments_json\":\"{}\",\"result\":\"ok\",\"status\":\"success\"}}\n");
    std::fs::write(&file, lines).unwrap();
    let out = ok(
        &addr,
        &[
            &["append"],
            &t[..],
            &["--file", file.to_str().unwrap(), "--json"],
        ]
        .concat(),
    );
    let batches = json_lines(&out);
    assert_eq!(batches.len(), 2, "301 turns in batches of 256");
    assert_eq!(
        (
            batches[0]["first_seq"].as_u64(),
            batches[1]["last_seq"].as_u64()
        ),
        (Some(1), Some(301))
    );

    let mut child = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_mnemo"))
            .args([&["append"], &t[..], &["--file", "-"]].concat())
            .env("MNEMO_ADDR", &addr)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    use std::io::Write as _;
    child
        .take_stdin()
        .write_all(b"{\"role\":\"user\",\"content\":\"from stdin\"}\n")
        .unwrap();
    assert!(child.wait().success());

    let turns = json_lines(&ok(&addr, &[&["turns"], &t[..], &["--json"]].concat()));
    assert_eq!(
        turns.len(),
        302,
        "nothing from the bad file, all of the good one"
    );
    assert_eq!(turns[0]["content"], "turn 0");
    assert_eq!(turns[300]["tool_call"]["tool_name"], "lookup");
    assert_eq!(turns[301]["content"], "from stdin");
    daemon.terminate();
}
