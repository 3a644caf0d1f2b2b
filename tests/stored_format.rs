//! Data written by an earlier release still opens. `tests/fixtures/stored_v3/`
//! holds a data directory written by the release before the layout change
//! (record format 3: fold states inline, outbox acknowledged by id) and
//! everything that release served from it, as Debug lines of the contract's
//! messages. The current daemon must serve exactly the same, continue the
//! stored fold states (an old state folded on equals a fold from scratch),
//! and `mnemo verify` must find nothing wrong.

mod common;

use std::path::Path;

use common::*;
use mnemo::memory::summary::{self, Attempt};
use mnemo::model::{Trigger, LEGACY_FOLD_FORMAT};
use mnemo::pb;
use mnemo::store::{SessionStore, SledStore, SummaryStore};
use mnemo::summarize::{rule_based, RuleBased, SummaryContext};

include!("fixtures/stored_v3/dump.rs");

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stored_v3");

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A private copy of the fixture's data directory.
fn fixture_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    copy_dir(&Path::new(FIXTURE).join("data"), &dir);
    (tmp, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_3_data_dir_serves_exactly_what_it_served() {
    let (_tmp, dir) = fixture_copy();
    let expected = std::fs::read_to_string(Path::new(FIXTURE).join("expected.txt")).unwrap();
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    let got = dump(&mut c, &["acme", "beta"]).await;
    let want: Vec<&str> = expected.lines().collect();
    assert_eq!(got.len(), want.len(), "record count");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // The search index (not in the fixture) was rebuilt from the store.
    let hits = search_until(&mut c, "acme", "user:ann", "refund duplicate", |h| {
        !h.is_empty()
    })
    .await;
    assert!(hits.iter().any(|h| h.session_id == "s1"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_fold_state_folds_on_like_a_fold_from_scratch() {
    let (_tmp, dir) = fixture_copy();
    {
        let store = SledStore::open(&dir).unwrap();
        let old = store.fold_record("acme", "s1").unwrap().unwrap();
        assert_eq!(
            old.format, LEGACY_FOLD_FORMAT,
            "the fixture holds an old record"
        );
    }
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    // s1 is idle: an append wakes it; then a summary folds on.
    c.append_turns(append_req(
        "acme",
        "s1",
        vec![
            user_turn("Actually, please also refund order ORD-2001."),
            turn(
                pb::Role::Assistant,
                "agent-b",
                "I will refund ORD-2001 by Monday.",
            ),
        ],
    ))
    .await
    .unwrap();
    let r = c
        .summarize(pb::SummarizeRequest {
            namespace: "acme".into(),
            session_id: "s1".into(),
            wait: true,
        })
        .await
        .unwrap()
        .into_inner();
    let s = r.summary.unwrap();
    assert_eq!(s.covers_through_seq, 13);
    drop(c);
    server.stop().await;

    let store = SledStore::open(&dir).unwrap();
    let fold = store.fold_record("acme", "s1").unwrap().unwrap();
    assert_eq!(
        (fold.summarizer.as_str(), fold.format, fold.through_seq),
        (rule_based::NAME, rule_based::FORMAT, 13)
    );
    let stored = store.get_summary("acme", "s1", 0).unwrap();
    let turns = store.list_turns("acme", "s1", 1, u64::MAX, 1000).unwrap();
    let ctx = SummaryContext {
        context_limit_tokens: 128_000,
        bundle_tokens: 0,
        trigger: stored.trigger,
        version: stored.version,
        now: stored.created_at,
        high_risk: false,
    };
    let scratch = mnemo::summarize::summarize(&turns, &ctx);
    assert_eq!(stored.decisions, scratch.decisions);
    assert_eq!(stored.pending_actions, scratch.pending_actions);
    assert_eq!(stored.open_questions, scratch.open_questions);
    assert_eq!(stored.key_facts, scratch.key_facts);
    assert_eq!(stored.tool_calls, scratch.tool_calls);
    assert_eq!(
        (&stored.user_intent, &stored.topic, &stored.prose),
        (&scratch.user_intent, &scratch.topic, &scratch.prose)
    );
    // The same through the pipeline: nothing new to fold now.
    let cfg = mnemo::config::SummaryConfig::default();
    let again = summary::run(
        &store,
        &RuleBased,
        &cfg,
        ("acme", "s1"),
        Trigger::Requested,
        true,
    )
    .unwrap();
    assert!(matches!(again, Attempt::Unchanged));
}

#[test]
fn verify_finds_nothing_wrong_in_the_old_data_dir() {
    let (_tmp, dir) = fixture_copy();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["verify", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
