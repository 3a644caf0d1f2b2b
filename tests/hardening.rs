//! Low findings of the outside review (issue 44), through the real daemon
//! and CLI: a client's oversized values do not grow the log (6); a
//! subject's id is not logged in clear (7); a new data directory and
//! export files are private to their owner (8); a request body that does
//! not decode is INVALID_ARGUMENT, not INTERNAL (9).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{config_for, raw, Binary, TestServer};
use mnemo::client::{connect, ClientOptions};
use mnemo::pb;
use mnemo::server::auth::new_key;
use tonic::Code;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

fn log_bytes(bin: &Binary) -> usize {
    bin.log.lock().unwrap().iter().map(|l| l.len() + 1).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_namespaces_do_not_grow_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, sha256) = new_key().unwrap();
    let flag = format!("agent:ns:write:{sha256}");
    let bin = Binary::start_with(&tmp.path().join("data"), &[], &["--auth-key", &flag]);
    let mut c = connect(&ClientOptions {
        addr: bin.url(),
        api_key: Some(key),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    let before = log_bytes(&bin);
    let huge = "x".repeat(3 << 20);
    for _ in 0..5 {
        let e = c
            .create_session(pb::CreateSessionRequest {
                namespace: huge.clone(),
                session_id: "s".into(),
                ..Default::default()
            })
            .await
            .expect_err("another namespace");
        assert_eq!(e.code(), Code::PermissionDenied);
        assert!(e.message().len() < 1024, "the message is bounded too");
    }
    // The refusals are logged (one line each) before the log is read.
    bin.wait_for_log("key used outside its namespace", 5);
    let grown = log_bytes(&bin) - before;
    assert!(
        grown < 16 * 1024,
        "5 calls with a 3 MiB namespace added {grown} bytes of log"
    );
    drop(c);
    assert!(bin.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_id_is_logged_by_its_hash_only() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = Binary::start_with(&tmp.path().join("data"), &[], &[]);
    let mut c = connect(&ClientOptions {
        addr: bin.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    const SUBJECT: &str = "customer:jane.doe@example.org";
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        subject_id: SUBJECT.into(),
        ..Default::default()
    })
    .await
    .expect("create");
    c.append_turns(common::append_req(
        "ns",
        "s",
        vec![common::user_turn("Please refund order 1001.")],
    ))
    .await
    .expect("append");
    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
    })
    .await
    .expect("close");
    // Closing writes the session's episode, which is logged.
    bin.wait_for_log("episode written", 1);
    let hash = mnemo::model::subject_sha256("ns", SUBJECT);
    let log = bin.log.lock().unwrap().join("\n");
    assert!(!log.contains(SUBJECT), "the subject id in clear: {log}");
    assert!(
        log.contains(&hash),
        "the episode line names the hash: {log}"
    );
    drop(c);
    assert!(bin.terminate().success());
}

fn mnemo(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(args)
        .env_remove("MNEMO_CONFIG")
        .env_remove("MNEMO_API_KEY")
        .output()
        .expect("run mnemo");
    assert!(
        out.status.success(),
        "mnemo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_data_directory_and_exports_are_private() {
    let tmp = tempfile::tempdir().unwrap();
    // A world-readable parent, as under the usual umask.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.path().join("data");
    let bin = Binary::start_with(&dir, &[], &[]);
    assert_eq!(mode(&dir), 0o700, "the data directory");
    let mut c = connect(&ClientOptions {
        addr: bin.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        subject_id: "cust-1".into(),
        ..Default::default()
    })
    .await
    .expect("create");
    let subject_file = tmp.path().join("cust-1.jsonl");
    mnemo(&[
        "subject",
        "export",
        "-n",
        "ns",
        "--subject",
        "cust-1",
        "-o",
        subject_file.to_str().unwrap(),
        "--addr",
        &bin.url(),
    ]);
    assert_eq!(mode(&subject_file), 0o600, "the subject export");
    drop(c);
    assert!(bin.terminate().success());
    // An export over a file that was world-readable leaves it private.
    let export = tmp.path().join("all.jsonl");
    std::fs::write(&export, b"old").unwrap();
    std::fs::set_permissions(&export, std::fs::Permissions::from_mode(0o644)).unwrap();
    mnemo(&[
        "export",
        "--data-dir",
        dir.to_str().unwrap(),
        "-o",
        export.to_str().unwrap(),
    ]);
    assert_eq!(mode(&export), 0o600, "the export");
}

/// A CreateSessionRequest whose namespace (field 1) is `bytes`.
fn with_namespace_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut m = vec![0x0a, bytes.len() as u8];
    m.extend_from_slice(bytes);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_decode_is_invalid_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(config_for(&tmp.path().join("data"))).await;
    let ch = server.channel().await;
    let cases: [(&str, Vec<u8>); 4] = [
        (
            "invalid UTF-8 in a string",
            with_namespace_bytes(&[b'n', 0xff, 0xfe]),
        ),
        ("a truncated message", vec![0x0a, 0x10, b'n', b's']),
        ("a truncated varint", vec![0x18, 0xff]),
        ("a bad wire type", vec![0x0f, 0x00]),
    ];
    for (what, body) in cases {
        for (rpc, streaming) in [
            ("CreateSession", false),
            ("AppendTurns", false),
            ("WatchSession", true),
        ] {
            let s = raw::call(&ch, rpc, body.clone(), streaming).await;
            assert_eq!(s.code(), Code::InvalidArgument, "{rpc}, {what}: {s:?}");
            assert!(
                s.message().contains("decode"),
                "the message says why: {s:?}"
            );
        }
    }
    // A well-formed message still answers as before.
    let ok = raw::call(&ch, "CreateSession", with_namespace_bytes(b"ns"), false).await;
    assert_eq!(ok.code(), Code::Ok, "{ok:?}");
    server.stop().await;
}
