//! Data written by earlier releases still opens.
//!
//! `tests/fixtures/stored_v3/` holds a data directory written by the release
//! before the layout change (record format 3: fold states inline, outbox
//! acknowledged by id) and everything that release served from it, as Debug
//! lines of the contract's messages. `tests/fixtures/stored_v4/` does the
//! same for the release before the storage records are restructured
//! (record format 4: opaque fold states), written by its binary through the
//! API (`fixtures/stored_v4/write.rs`, run by `make.sh`).
//!
//! For each, the current daemon must serve exactly the same, continue the
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

#[path = "fixtures/stored_v4/write.rs"]
mod write_v4;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stored_v3");

/// Fields the contract gained after the fixtures' releases, as Debug
/// renders them when they hold nothing (which the old records must give).
const ADDED_SINCE: [&str; 1] = [", reviewer_key: \"\""];

/// Served lines as the fixtures' releases rendered them: without the
/// fields added since, which must be empty for their records (an old
/// record read with a value there would still differ).
fn as_released(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|mut l| {
            for f in ADDED_SINCE {
                l = l.replace(f, "");
            }
            l
        })
        .collect()
}

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

/// A private copy of the format-3 fixture's data directory.
fn fixture_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    fixture_copy_of(FIXTURE)
}

/// A private copy of a fixture's data directory.
fn fixture_copy_of(fixture: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    copy_dir(&Path::new(fixture).join("data"), &dir);
    (tmp, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_3_data_dir_serves_exactly_what_it_served() {
    let (_tmp, dir) = fixture_copy();
    let expected = std::fs::read_to_string(Path::new(FIXTURE).join("expected.txt")).unwrap();
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    let got = as_released(dump(&mut c, &["acme", "beta"]).await);
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
        namespace: String::new(),
        context_limit_tokens: 128_000,
        bundle_tokens: 0,
        trigger: stored.trigger,
        version: stored.version,
        now: stored.created_at,
        high_risk: false,
        wait_free: false,
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
        false,
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

// ---------------------------------------------------------------------
// Record format 4: tests/fixtures/stored_v4, written by the release at
// commit 2102f3b (see its README.md).
// ---------------------------------------------------------------------

const FIXTURE_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stored_v4");
const V4_NAMESPACES: [&str; 2] = ["acme", "beta"];

/// Everything `dump` reads, plus what of the stored records only a
/// context bundle shows: the actions carried over from a subject's past
/// sessions (with the status set on them) and each session's pending
/// actions with the statuses stored beside its summary. The rest of a
/// bundle is packing and rendering, not stored data, and is left out.
async fn dump_v4(
    c: &mut mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>,
) -> Vec<String> {
    let mut out = dump(c, &V4_NAMESPACES).await;
    for ns in V4_NAMESPACES {
        let sessions = c
            .list_sessions(pb::ListSessionsRequest {
                namespace: ns.into(),
                page_size: 1000,
                ..Default::default()
            })
            .await
            .expect("list sessions")
            .into_inner()
            .sessions;
        for s in sessions {
            let b = c
                .get_context_bundle(pb::GetContextBundleRequest {
                    namespace: ns.into(),
                    session_id: s.session_id.clone(),
                    budget_tokens: 8000,
                    ..Default::default()
                })
                .await
                .expect("bundle")
                .into_inner()
                .bundle
                .expect("bundle in response");
            let id = &s.session_id;
            out.push(format!("bundle {ns}/{id} carried {:?}", b.carried_actions));
            out.push(format!("bundle {ns}/{id} actions {:?}", b.pending_actions));
        }
    }
    out
}

/// Line by line, naming the first line that differs and where in it (the
/// lines are long Debug renderings).
fn assert_same_records(got: &[String], want: &[&str]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let at = g.chars().zip(w.chars()).take_while(|(a, b)| a == b).count();
            let from = at.saturating_sub(80);
            let tail = |s: &str| s.chars().skip(from).take(240).collect::<String>();
            panic!(
                "record {} differs from char {at}:\n  served:   …{}\n  expected: …{}\n\nserved:   {g}\nexpected: {w}",
                i + 1,
                tail(g),
                tail(w)
            );
        }
    }
    assert_eq!(got.len(), want.len(), "record count");
}

fn expected_v4() -> String {
    std::fs::read_to_string(Path::new(FIXTURE_V4).join("expected.txt")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_4_data_dir_serves_exactly_what_it_served() {
    let (_tmp, dir) = fixture_copy_of(FIXTURE_V4);
    let expected = expected_v4();
    let want: Vec<&str> = expected.lines().collect();
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    assert_same_records(&as_released(dump_v4(&mut c).await), &want);

    // The stored idempotency keys still answer retries: the append and the
    // handoff replay, and write nothing.
    let r = c
        .append_turns(pb::AppendTurnsRequest {
            namespace: "acme".into(),
            session_id: "s1".into(),
            turns: write_v4::s1_first_batch(),
            idempotency_key: write_v4::S1_FIRST_KEY.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.replayed, "the keyed append replays");
    assert_eq!((r.first_seq, r.last_seq), (1, 4));
    let h = c
        .handoff(write_v4::s1_handoff())
        .await
        .unwrap()
        .into_inner();
    assert!(h.replayed, "the keyed handoff replays");
    assert_eq!(h.session.unwrap().lease_epoch, 2);
    assert_same_records(&as_released(dump_v4(&mut c).await), &want);

    // The search index (not in the fixture) was rebuilt from the store.
    let hits = search_until(&mut c, "acme", "user:ann", "refund duplicate", |h| {
        !h.is_empty()
    })
    .await;
    assert!(hits.iter().any(|h| h.session_id == "s1"));
    drop(c);
    server.stop().await;
}

/// `turns` as new turns with the same content and the same time (the
/// summarizer dates items by the client's clock, else the server's).
fn as_new_turns(turns: &[pb::Turn]) -> Vec<pb::NewTurn> {
    turns
        .iter()
        .map(|t| pb::NewTurn {
            role: t.role,
            speaker: t.speaker.clone(),
            content: t.content.clone(),
            client_time: t.client_time.or(t.server_time),
            tool_call: t.tool_call.clone(),
            metadata: t.metadata.clone(),
        })
        .collect()
}

async fn latest_summary(
    c: &mut mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>,
    ns: &str,
    id: &str,
) -> pb::SessionSummary {
    c.get_summary(pb::GetSummaryRequest {
        namespace: ns.into(),
        session_id: id.into(),
        version: 0,
        format: pb::SummaryFormat::Structured as i32,
    })
    .await
    .unwrap()
    .into_inner()
    .summary
    .unwrap()
}

/// A summary's content: what it says about the turns, without the version,
/// trigger and creation time, which say when and why it was written.
fn content(mut s: pb::SessionSummary) -> pb::SessionSummary {
    s.version = 0;
    s.trigger = 0;
    s.created_at = None;
    s
}

/// Appends `new` to an old (idle) session, asks for a summary, and checks
/// that it covers every turn and says what a fresh session given the same
/// turns (same settings, one append) summarizes from scratch.
async fn folds_on_like_a_fresh_session(
    c: &mut mnemo::pb::memory_service_client::MemoryServiceClient<tonic::transport::Channel>,
    ns: &str,
    id: &str,
    new: Vec<pb::NewTurn>,
) {
    let old = get_session(c, ns, id).await.unwrap();
    assert!(old.summary_version > 0, "{ns}/{id} has a stored fold state");
    c.append_turns(append_req(ns, id, new)).await.unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .unwrap();
    let turns = all_turns(c, ns, id).await;
    let folded = latest_summary(c, ns, id).await;
    let last = turns.last().unwrap().seq;
    assert_eq!(
        (folded.covers_through_seq, folded.total_turns),
        (last, turns.len() as u64),
        "{ns}/{id}: the new summary covers every turn"
    );

    let fresh_ns = format!("fresh-{ns}");
    c.create_session(pb::CreateSessionRequest {
        namespace: fresh_ns.clone(),
        session_id: id.into(),
        subject_id: old.subject_id.clone(),
        settings: old.settings,
        owner_agent: old.owner_agent.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.append_turns(append_req(&fresh_ns, id, as_new_turns(&turns)))
        .await
        .unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: fresh_ns.clone(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .unwrap();
    let scratch = latest_summary(c, &fresh_ns, id).await;
    assert_eq!(scratch.covers_through_seq, last);
    assert_eq!(
        content(folded),
        content(scratch),
        "{ns}/{id}: folding on from the stored state says what a fold from scratch says"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_format_4_fold_states_fold_on_like_a_fold_from_scratch() {
    let (_tmp, dir) = fixture_copy_of(FIXTURE_V4);
    {
        let store = SledStore::open(&dir).unwrap();
        for (ns, id) in [("acme", "s1"), ("acme", "risky"), ("beta", "b1")] {
            let old = store.fold_record(ns, id).unwrap().unwrap();
            assert_eq!(
                (old.summarizer.as_str(), old.format),
                // The rules' state layout 1: not read any more, so the
                // session is folded again from its first turn.
                (rule_based::NAME, 1),
                "{ns}/{id}: the fixture holds a format-4 fold record"
            );
        }
    }
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;

    // High risk: the new summary flags its irreversible action as well.
    folds_on_like_a_fresh_session(
        &mut c,
        "acme",
        "risky",
        vec![
            user_turn("And please refund the last invoice INV-90 to my card."),
            turn(
                pb::Role::Assistant,
                "agent-a",
                "I will refund INV-90 today.",
            ),
        ],
    )
    .await;
    folds_on_like_a_fresh_session(
        &mut c,
        "beta",
        "b1",
        vec![
            user_turn("Build 1234 passed on the rerun."),
            turn(
                pb::Role::Assistant,
                "agent-a",
                "Good. I will close ticket B-7 tomorrow.",
            ),
        ],
    )
    .await;

    // s1 holds a handoff event turn, which no client can append: its fold
    // is compared with the summarizer run from scratch on the stored turns.
    c.append_turns(pb::AppendTurnsRequest {
        lease_epoch: 2,
        ..append_req(
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
        )
    })
    .await
    .unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: "acme".into(),
        session_id: "s1".into(),
        wait: true,
    })
    .await
    .unwrap();
    let folded = latest_summary(&mut c, "acme", "s1").await;
    let last = all_turns(&mut c, "acme", "s1").await.last().unwrap().seq;
    assert_eq!(
        (folded.covers_through_seq, folded.total_turns),
        (last, last)
    );
    drop(c);
    server.stop().await;

    let store = SledStore::open(&dir).unwrap();
    let turns = store.list_turns("acme", "s1", 1, u64::MAX, 1000).unwrap();
    let ctx = SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 128_000,
        bundle_tokens: 0,
        trigger: Trigger::Requested,
        version: 0,
        now: 0,
        high_risk: false,
        wait_free: false,
    };
    let mut scratch = mnemo::summarize::summarize(&turns, &ctx);
    // As the pipeline does after every fold: the budget left is the
    // context limit minus the tokens of the summary as rendered.
    let rendered = mnemo::summarize::render::markdown(&scratch);
    scratch.context_health.budget_remaining_tokens =
        128_000 - mnemo::tokens::count(mnemo::model::Encoding::Cl100kBase, &rendered) as i64;
    assert_eq!(content(folded), content(pb::SessionSummary::from(scratch)));
    drop(store);

    // Data written by both releases verifies clean.
    verify_clean(&dir);
}

/// `mnemo verify` on a stopped data directory finds nothing wrong (the
/// fixture holds the search outbox's cursor record, which verify once
/// decoded as an outbox entry).
fn verify_clean(dir: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["verify", "--json", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify --json ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .expect("a list of problems")
        .iter()
        .map(|p| p.as_str().expect("a problem is a string"))
        .collect();
    assert!(problems.is_empty(), "verify: {report}");
    assert!(report["records"].as_u64().unwrap() > 0, "verify: {report}");
    assert!(out.status.success(), "verify: {report}");
}

#[test]
fn verify_finds_nothing_wrong_in_the_format_4_data_dir() {
    let (_tmp, dir) = fixture_copy_of(FIXTURE_V4);
    verify_clean(&dir);
}
