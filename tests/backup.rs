//! Backup and repair through the real binary: `mnemo export` then
//! `mnemo import` into a new data directory is lossless (a second export is
//! record-for-record the same, and the daemon serves the same data,
//! search included); import refuses truncated files and existing sessions
//! without writing; `mnemo verify` passes a sound store and fails (exit 1)
//! on a damaged record or a broken cross-reference.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{append_req, config_for, turn, user_turn, TestServer};
use mnemo::pb;
use mnemo::store::engine::{Engine, Read, Write};
use mnemo::store::{keys, SledStore};

fn mnemo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(args)
        .env_remove("MNEMO_CONFIG")
        .output()
        .expect("run mnemo")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "mnemo failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The records of an export (the header, with its timestamp, dropped).
fn records(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().skip(1).map(str::to_owned).collect()
}

/// A subject with a closed session (summary, episode, extracted facts), a
/// client fact and an open session with a tool call; in two namespaces.
async fn fill(dir: &Path) {
    let server = TestServer::start_with(config_for(dir)).await;
    let mut c = server.client().await;
    for ns in ["shop", "other"] {
        for (id, subject) in [("visit-1", "cust-42"), ("visit-2", "cust-42")] {
            c.create_session(pb::CreateSessionRequest {
                namespace: ns.into(),
                session_id: id.into(),
                subject_id: subject.into(),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        let mut tool = turn(pb::Role::Assistant, "agent-a", "Looking up the order.");
        tool.tool_call = Some(pb::ToolCall {
            tool_name: "orders.lookup".into(),
            arguments_json: r#"{"order":"ORD-77120"}"#.into(),
            result: "shipped 2026-11-30".into(),
            status: pb::ToolCallStatus::Success as i32,
            ..Default::default()
        });
        c.append_turns(append_req(
            ns,
            "visit-1",
            vec![
                user_turn("My charger for order ORD-77120 stopped working. I prefer email."),
                tool,
                turn(
                    pb::Role::Assistant,
                    "agent-a",
                    "I will ship a replacement charger for ORD-77120 by 2026-12-20.",
                ),
            ],
        ))
        .await
        .unwrap();
        c.close_session(pb::CloseSessionRequest {
            namespace: ns.into(),
            session_id: "visit-1".into(),
        })
        .await
        .unwrap();
        c.put_fact(pb::PutFactRequest {
            namespace: ns.into(),
            subject_id: "cust-42".into(),
            key: "plan".into(),
            text: "Customer is on the premium plan.".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        c.append_turns(append_req(
            ns,
            "visit-2",
            vec![user_turn("Any news on the espresso grinder?")],
        ))
        .await
        .unwrap();
    }
    // Wait for the closed session's episode, so the export holds one.
    common::episodes_until(&mut c, "shop", "cust-42", 1).await;
    server.stop().await;
}

#[tokio::test]
async fn export_then_import_is_lossless_and_verify_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    fill(&src).await;
    ok(mnemo(&["verify", "--data-dir", path(&src)]));

    let first = tmp.path().join("shop.jsonl");
    ok(mnemo(&[
        "export",
        "--namespace",
        "shop",
        "-o",
        path(&first),
        "--data-dir",
        path(&src),
    ]));
    let lines = records(&first);
    for kind in ["session", "turn", "summary", "audit", "fact", "episode"] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("\"kind\":\"{kind}\""))),
            "no {kind} in the export"
        );
    }
    assert!(
        lines.iter().all(|l| !l.contains("\"other\"")),
        "another namespace leaked"
    );
    assert!(
        lines.iter().any(|l| l.contains("orders.lookup")),
        "tool call exported"
    );

    ok(mnemo(&["import", path(&first), "--data-dir", path(&dst)]));
    let second = tmp.path().join("again.jsonl");
    ok(mnemo(&[
        "export",
        "--namespace",
        "shop",
        "-o",
        path(&second),
        "--data-dir",
        path(&dst),
    ]));
    assert_eq!(
        records(&first),
        records(&second),
        "the round trip changed records"
    );
    ok(mnemo(&["verify", "--data-dir", path(&dst)]));

    // The daemon on the restored directory serves the same memory.
    let server = TestServer::start_with(config_for(&dst)).await;
    let mut c = server.client().await;
    let turns = common::all_turns(&mut c, "shop", "visit-1").await;
    assert_eq!(turns.len(), 3);
    assert_eq!(
        turns[1].tool_call.as_ref().unwrap().tool_name,
        "orders.lookup"
    );
    let summary = c
        .get_summary(pb::GetSummaryRequest {
            namespace: "shop".into(),
            session_id: "visit-1".into(),
            ..Default::default()
        })
        .await
        .expect("the summary came back")
        .into_inner();
    assert!(summary.summary.is_some());
    let facts = c
        .list_facts(pb::ListFactsRequest {
            namespace: "shop".into(),
            subject_id: "cust-42".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(facts.facts.iter().any(|f| f.key == "plan"));
    // The search index was rebuilt from the imported records.
    common::search_until(&mut c, "shop", "", "espresso grinder", |h| !h.is_empty()).await;
    server.stop().await;
    ok(mnemo(&["verify", "--data-dir", path(&dst)]));

    // Importing the same sessions again is refused, and writes nothing.
    let again = mnemo(&["import", path(&first), "--data-dir", path(&dst)]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("already holds") && err.contains("nothing was imported"),
        "{err}"
    );
}

#[tokio::test]
async fn a_truncated_export_is_refused_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    fill(&src).await;
    let file = tmp.path().join("all.jsonl");
    ok(mnemo(&[
        "export",
        "-o",
        path(&file),
        "--data-dir",
        path(&src),
    ]));
    let text = std::fs::read_to_string(&file).unwrap();
    let cut: Vec<&str> = text.lines().collect();
    let truncated = tmp.path().join("cut.jsonl");
    std::fs::write(&truncated, cut[..cut.len() / 2].join("\n")).unwrap();
    let out = mnemo(&["import", path(&truncated), "--data-dir", path(&dst)]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
    let empty = tmp.path().join("empty.jsonl");
    ok(mnemo(&[
        "export",
        "-o",
        path(&empty),
        "--data-dir",
        path(&dst),
    ]));
    assert_eq!(
        records(&empty),
        vec![r#"{"end":true,"records":0}"#.to_owned()],
        "nothing written"
    );
}

#[tokio::test]
async fn verify_names_a_damaged_record_and_a_broken_count_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    fill(&dir).await;
    {
        let store = SledStore::open(&dir).unwrap();
        let mut damaged = store
            .engine()
            .get(&keys::turn("shop", "visit-1", 2))
            .unwrap()
            .unwrap();
        let last = damaged.len() - 1;
        damaged[last] ^= 0xff;
        store
            .engine()
            .apply(vec![
                Write::Put(keys::turn("shop", "visit-1", 2), damaged),
                // A turn the session does not count.
                Write::Delete(keys::turn("other", "visit-2", 1)),
            ])
            .unwrap();
        store.engine().sync().unwrap();
    }
    let out = mnemo(&["verify", "--data-dir", path(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shop/visit-1") && text.contains("checksum"),
        "{text}"
    );
    assert!(
        text.contains("other/visit-2") && text.contains("0 turns stored"),
        "{text}"
    );
    let json = ok_json(mnemo(&["verify", "--json", "--data-dir", path(&dir)]));
    assert_eq!(json["ok"], false);
    assert_eq!(json["problems"].as_array().unwrap().len(), 2, "{json}");
}

fn ok_json(out: Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// sled → PostgreSQL → sled through `mnemo export`/`import` is lossless
/// (every export record-for-record the same), `mnemo verify` passes on
/// the database, and a daemon already running on the database serves the
/// imported memory, search included (the import tells its index through
/// the outbox).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_to_postgres_and_back_is_lossless_and_verify_passes_on_postgres() {
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (src, back) = (tmp.path().join("src"), tmp.path().join("back"));
    fill(&src).await;
    let pg = ["--store", "postgres", "--postgres-url", url.as_str()];
    let with_pg = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(pg);
        mnemo(&all)
    };
    // A daemon on the (empty) database, running through the import.
    let mut config = config_for(&tmp.path().join("pg-daemon"));
    config.store = mnemo::config::StoreKind::Postgres;
    config.postgres.url = url.clone();
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    let from_sled = tmp.path().join("sled.jsonl");
    ok(mnemo(&[
        "export",
        "-o",
        path(&from_sled),
        "--data-dir",
        path(&src),
    ]));
    ok(with_pg(&["import", path(&from_sled)]));
    // The running daemon serves it, and its index learned of it.
    let turns = common::all_turns(&mut c, "shop", "visit-1").await;
    assert_eq!(turns.len(), 3);
    common::search_until(&mut c, "shop", "", "espresso grinder", |h| !h.is_empty()).await;
    server.stop().await;
    let report = ok(with_pg(&["verify"]));
    assert!(report.contains("ok"), "{report}");
    let from_pg = tmp.path().join("pg.jsonl");
    ok(with_pg(&["export", "-o", path(&from_pg)]));
    assert_eq!(records(&from_sled), records(&from_pg), "sled → PostgreSQL");
    ok(mnemo(&[
        "import",
        path(&from_pg),
        "--data-dir",
        path(&back),
    ]));
    let again = tmp.path().join("back.jsonl");
    ok(mnemo(&[
        "export",
        "-o",
        path(&again),
        "--data-dir",
        path(&back),
    ]));
    assert_eq!(records(&from_pg), records(&again), "PostgreSQL → sled");

    // Importing the same sessions again is refused, and writes nothing.
    let twice = with_pg(&["import", path(&from_sled)]);
    assert!(!twice.status.success());
    assert!(String::from_utf8_lossy(&twice.stderr).contains("nothing was imported"));
}
