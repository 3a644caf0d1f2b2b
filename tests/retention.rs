//! Retention policies through the real daemon, under a fake clock (the
//! retention clock of the daemon is moved by days; nothing sleeps): only
//! what is due goes, kind by kind, and nothing of a namespace without a
//! table; a summary, bundle and ListTurns of a session whose turns were
//! removed say so; a dry run counts exactly what a pass then removes; two
//! daemons on PostgreSQL remove each record once (their counts add up);
//! a bad table is a config error naming its key.
//!
//! The cases run on PostgreSQL too (`MNEMO_TEST_STORE=postgres`); the
//! two-daemon case only there.

mod common;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{all_turns, append_req, config_for, on_postgres, search_until, user_turn, TestServer};
use mnemo::config::{Config, RetentionRule};
use mnemo::model::RetentionCounts;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use mnemo::runtime::retention::Retention;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

const DAY: i64 = 86_400 * 1_000_000_000;

fn rules() -> Vec<RetentionRule> {
    vec![RetentionRule {
        namespace: "ret".into(),
        turns_days: Some(30),
        audit_days: Some(90),
        summaries_days: Some(365),
        facts_days: Some(730),
        summary_versions: None,
    }]
}

/// A daemon with the retention tables, its retention task reading `clock`.
async fn start(config: Config, clock: Arc<AtomicI64>) -> (TestServer, Arc<Retention>) {
    let slot: Arc<Mutex<Option<Arc<Retention>>>> = Arc::default();
    let s = slot.clone();
    let server = TestServer::start_with_hook(config, move |d| {
        let r = d.runtime().retention().expect("retention started");
        r.set_clock(Arc::new(move || clock.load(Ordering::SeqCst)));
        *s.lock().unwrap() = Some(r);
    })
    .await;
    let r = slot.lock().unwrap().take().unwrap();
    (server, r)
}

fn config(dir: &std::path::Path) -> Config {
    let mut c = config_for(dir);
    c.retention = rules();
    c
}

async fn session(c: &mut Client, ns: &str, id: &str, words: &str, close: bool) -> pb::Session {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        subject_id: "cust-7".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let turns = (0..10)
        .map(|i| {
            user_turn(&format!(
                "{words} turn {i}: please refund order {i}00 to my card"
            ))
        })
        .collect();
    c.append_turns(append_req(ns, id, turns)).await.unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .unwrap();
    if close {
        c.close_session(pb::CloseSessionRequest {
            namespace: ns.into(),
            session_id: id.into(),
        })
        .await
        .unwrap();
    }
    common::get_session(c, ns, id).await.unwrap()
}

/// The inspector's page at `path`, served over `server` on a loopback port.
async fn inspector_page(server: &TestServer, path: &str) -> String {
    use mnemo::inspect::{Inspector, Settings, MAX_LIVE_STREAMS};
    let client = mnemo::client::connect(&mnemo::client::ClientOptions {
        addr: server.url(),
        ..Default::default()
    })
    .await
    .unwrap();
    let settings = Settings {
        default_namespace: None,
        allowed_hosts: Vec::new(),
        max_live_streams: MAX_LIVE_STREAMS,
    };
    let inspector = Inspector::new(client, settings).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

fn nanos(ts: &Option<prost_types::Timestamp>) -> i64 {
    let t = ts.as_ref().unwrap();
    t.seconds * 1_000_000_000 + i64::from(t.nanos)
}

async fn list_turns(c: &mut Client, ns: &str, id: &str) -> pb::ListTurnsResponse {
    c.list_turns(pb::ListTurnsRequest {
        namespace: ns.into(),
        session_id: id.into(),
        from_seq: 1,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

async fn summary(
    c: &mut Client,
    ns: &str,
    id: &str,
) -> Result<pb::GetSummaryResponse, tonic::Status> {
    c.get_summary(pb::GetSummaryRequest {
        namespace: ns.into(),
        session_id: id.into(),
        format: pb::SummaryFormat::Markdown as i32,
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner())
}

async fn audit_len(c: &mut Client, ns: &str, id: &str) -> usize {
    common::audit_log(c, ns, id).await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_is_due_goes_and_readers_are_told() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(config(&tmp.path().join("d")), clock.clone()).await;
    let mut c = server.client().await;
    let old = session(&mut c, "ret", "s-old", "zqoldword", true).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let new = session(&mut c, "ret", "s-new", "zqnewword", true).await;
    let active = session(&mut c, "ret", "s-active", "zqactiveword", false).await;
    let _other = session(&mut c, "other", "o-old", "zqotherword", true).await;
    // Facts stated in a turn of each closed session.
    for (key, id) in [("refund-old", "s-old"), ("refund-new", "s-new")] {
        c.put_fact(pb::PutFactRequest {
            namespace: "ret".into(),
            subject_id: "cust-7".into(),
            key: key.into(),
            text: format!("asked for a refund in {id}"),
            source: Some(pb::FactSource {
                session_id: id.into(),
                seq: 3,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    c.put_fact(pb::PutFactRequest {
        namespace: "ret".into(),
        subject_id: "cust-7".into(),
        key: "card".into(),
        text: "pays with the blue card".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.put_fact(pb::PutFactRequest {
        namespace: "ret".into(),
        subject_id: "cust-7".into(),
        key: "card".into(),
        text: "pays with the red card".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.put_fact(pb::PutFactRequest {
        namespace: "other".into(),
        subject_id: "cust-7".into(),
        key: "card".into(),
        text: "pays with the green card".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    common::episodes_until(&mut c, "ret", "cust-7", 2).await;
    search_until(&mut c, "ret", "", "zqoldword", |h| !h.is_empty()).await;
    let (t_old, t_new) = (nanos(&old.last_active_time), nanos(&new.last_active_time));
    assert!(t_new > t_old);
    let audits_before = audit_len(&mut c, "ret", "s-old").await;
    assert!(audits_before > 0);

    // Nothing is due today.
    assert_eq!(retention.pass().await.unwrap(), RetentionCounts::default());

    // 30 days after the old session's last append, not yet the new one's.
    clock.store(t_old + 30 * DAY + (t_new - t_old) / 2, Ordering::SeqCst);
    let removed = retention.pass().await.unwrap();
    assert_eq!(
        removed,
        RetentionCounts {
            turns: 10,
            ..Default::default()
        }
    );
    let gone = list_turns(&mut c, "ret", "s-old").await;
    assert!(gone.turns.is_empty());
    let t = gone
        .turns_removed
        .expect("ListTurns says turns were removed");
    assert_eq!((t.through_seq, t.count), (10, 10));
    assert_eq!(all_turns(&mut c, "ret", "s-new").await.len(), 10);
    assert_eq!(all_turns(&mut c, "ret", "s-active").await.len(), 10);
    assert_eq!(all_turns(&mut c, "other", "o-old").await.len(), 10);
    assert!(list_turns(&mut c, "ret", "s-new")
        .await
        .turns_removed
        .is_none());
    // The session record keeps its seqs.
    let after = common::get_session(&mut c, "ret", "s-old").await.unwrap();
    assert_eq!(
        (after.turn_count, after.next_seq),
        (old.turn_count, old.next_seq)
    );
    // A fact keeps its source and says the cited turn is gone (GetFact
    // and ListFacts); a fact citing a kept turn does not.
    let cited = |key: &'static str| {
        let mut c = c.clone();
        async move {
            let f = c
                .list_facts(pb::ListFactsRequest {
                    namespace: "ret".into(),
                    subject_id: "cust-7".into(),
                    key: key.into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .facts
                .pop()
                .unwrap();
            let got = c
                .get_fact(pb::GetFactRequest {
                    namespace: "ret".into(),
                    fact_id: f.fact_id.clone(),
                })
                .await
                .unwrap()
                .into_inner()
                .fact
                .unwrap();
            assert_eq!(got.sources, f.sources);
            (f.sources[0].seq, f.sources[0].turn_removed)
        }
    };
    assert_eq!(cited("refund-old").await, (3, true));
    assert_eq!(cited("refund-new").await, (3, false));
    // The inspector's subject page says so too (no link to a gone turn),
    // and marks the episode of the session that lost its turns.
    let page = inspector_page(&server, "/ns/ret/subjects/cust-7").await;
    assert!(page.contains("s-old #3 (removed by retention)"), "{page}");
    assert!(page.contains("turns 1–10 removed by retention"), "{page}");
    assert!(!page.contains("s-new #3 (removed"), "{page}");
    // ...and GetSession and ListSessions say which turns are gone.
    let t = after.turns_removed.expect("GetSession says so");
    assert_eq!((t.through_seq, t.count), (10, 10));
    let listed = c
        .list_sessions(pb::ListSessionsRequest {
            namespace: "ret".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sessions;
    let removed: Vec<(&str, Option<u64>)> = listed
        .iter()
        .map(|s| {
            (
                s.session_id.as_str(),
                s.turns_removed.as_ref().map(|t| t.through_seq),
            )
        })
        .collect();
    assert_eq!(
        removed,
        [("s-active", None), ("s-new", None), ("s-old", Some(10))]
    );
    // The summary stays, cites the removed turns and says they are gone.
    let s = summary(&mut c, "ret", "s-old").await.unwrap();
    assert!(s.turns_removed.is_some());
    assert!(
        s.rendered.contains("removed by a retention policy"),
        "{}",
        s.rendered
    );
    assert!(summary(&mut c, "ret", "s-new")
        .await
        .unwrap()
        .turns_removed
        .is_none());
    // Its episode stays and says its session's turns are gone; the new
    // session's episode does not.
    let eps = c
        .list_episodes(pb::ListEpisodesRequest {
            namespace: "ret".into(),
            subject_id: "cust-7".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .episodes;
    let marked: Vec<(&str, Option<u64>)> = eps
        .iter()
        .map(|e| {
            (
                e.session_id.as_str(),
                e.turns_removed.as_ref().map(|t| t.through_seq),
            )
        })
        .collect();
    assert!(marked.contains(&("s-old", Some(10))), "{marked:?}");
    assert!(marked.contains(&("s-new", None)), "{marked:?}");
    // A bundle of it is served, without the removed turns, and says so.
    let b = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ret".into(),
            session_id: "s-old".into(),
            budget_tokens: 2000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert!(b.manifest.unwrap().turns_removed.is_some());
    assert!(b.recent_turns.is_empty());
    assert!(b.rendered_text.contains("removed by a retention policy"));
    assert!(b.token_count <= b.budget_tokens);
    // So do `mnemo turns` (once, beside the turns) and the inspector's page.
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["turns", "-n", "ret", "-s", "s-old"])
        .env("MNEMO_ADDR", server.url())
        .env_remove("MNEMO_API_KEY")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "(turns 1-10 (10) were removed by a retention policy)\n"
    );
    let page = inspector_page(&server, "/ns/ret/sessions/s-old").await;
    assert!(
        page.contains("Turns 1–10 (10) were removed by a retention policy"),
        "{page}"
    );
    // The search index forgot them; the other namespace's stay.
    search_until(&mut c, "ret", "", "zqoldword", |h| {
        h.iter()
            .all(|x| !(x.session_id == "s-old" && x.kind == pb::SearchKind::Turn as i32))
    })
    .await;
    search_until(&mut c, "other", "", "zqotherword", |h| !h.is_empty()).await;
    // A second pass at the same time finds nothing.
    assert_eq!(retention.pass().await.unwrap().total(), 0);

    // 91 days on: the new session's turns, and audit records of both.
    clock.store(t_new + 91 * DAY, Ordering::SeqCst);
    let removed = retention.pass().await.unwrap();
    assert_eq!(removed.turns, 10);
    assert_eq!(removed.summaries + removed.episodes + removed.facts, 0);
    assert!(
        removed.audit_records >= 2 * audits_before as u64 - 1,
        "{removed:?}"
    );
    assert_eq!(audit_len(&mut c, "ret", "s-old").await, 0);
    assert!(audit_len(&mut c, "other", "o-old").await > 0);
    // The active session keeps its turns whatever their age.
    assert_eq!(all_turns(&mut c, "ret", "s-active").await.len(), 10);

    // 366 days on: summaries of the closed sessions and episodes go; the
    // active session keeps its latest summary.
    clock.store(t_new + 366 * DAY, Ordering::SeqCst);
    let removed = retention.pass().await.unwrap();
    assert_eq!(removed.summaries, 2, "{removed:?}");
    assert_eq!(removed.episodes, 2, "{removed:?}");
    let e = summary(&mut c, "ret", "s-old").await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("retention"), "{}", e.message());
    assert!(summary(&mut c, "ret", "s-active").await.is_ok());
    assert!(summary(&mut c, "other", "o-old").await.is_ok());
    assert_eq!(all_turns(&mut c, "ret", "s-active").await.len(), 10);
    let eps = c
        .list_episodes(pb::ListEpisodesRequest {
            namespace: "ret".into(),
            subject_id: "cust-7".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .episodes;
    assert!(eps.is_empty(), "{eps:?}");

    // 731 days on: the facts (those written here and those extracted
    // from the turns), with the versions they superseded; not the other
    // namespace's.
    let facts = |ns: &'static str| {
        let mut c = c.clone();
        async move {
            c.list_facts(pb::ListFactsRequest {
                namespace: ns.into(),
                subject_id: "cust-7".into(),
                include_history: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .facts
            .len()
        }
    };
    let (ret_facts, other_facts) = (facts("ret").await, facts("other").await);
    assert!(ret_facts >= 2 && other_facts >= 1);
    clock.store(mnemo::model::now_nanos() + 731 * DAY, Ordering::SeqCst);
    let removed = retention.pass().await.unwrap();
    assert_eq!(removed.facts, ret_facts as u64, "{removed:?}");
    assert_eq!(facts("ret").await, 0);
    assert_eq!(facts("other").await, other_facts);
    // What this daemon removed, by kind (the metric's source).
    let by_kind: Vec<u64> = retention
        .stats()
        .deleted
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    assert_eq!(by_kind[0], 20);
    assert_eq!(by_kind[1], 2);
    assert_eq!(by_kind[4], ret_facts as u64);
    // Appends to the active session stay gap-free.
    let out = c
        .append_turns(append_req("ret", "s-active", vec![user_turn("one more")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(out.first_seq, active.next_seq);
    drop(retention);
    server.stop().await;
}

fn mnemo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(args)
        .env_remove("MNEMO_CONFIG")
        .env_remove("MNEMO_API_KEY")
        .env_remove("MNEMO_DATA_DIR")
        .output()
        .expect("run mnemo")
}

async fn closed_session_with(c: &mut Client, ns: &str, id: &str, turns: usize) {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut left = turns;
    while left > 0 {
        let n = left.min(200);
        let batch = (0..n)
            .map(|i| user_turn(&format!("line {i} of {id}")))
            .collect();
        c.append_turns(append_req(ns, id, batch)).await.unwrap();
        left -= n;
    }
    // Summarized through its last turn: retention takes the turns of a
    // closed session only once its final summary was folded from them.
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
    })
    .await
    .unwrap();
}

fn removed_so_far(r: &Retention) -> Vec<u64> {
    r.stats()
        .deleted
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_newest_summary_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config_for(&tmp.path().join("d"));
    cfg.retention = vec![RetentionRule {
        namespace: "ver".into(),
        summary_versions: Some(2),
        ..Default::default()
    }];
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(cfg, clock).await;
    let mut c = server.client().await;
    // Four versions, one per summarize; another namespace keeps all.
    for ns in ["ver", "all"] {
        session(&mut c, ns, "long", "zqfirst", false).await;
        for round in 0..3 {
            let turns = (0..4)
                .map(|i| {
                    user_turn(&format!(
                        "round {round} turn {i}: please refund order {round}{i}"
                    ))
                })
                .collect();
            c.append_turns(append_req(ns, "long", turns)).await.unwrap();
            c.summarize(pb::SummarizeRequest {
                namespace: ns.into(),
                session_id: "long".into(),
                wait: true,
            })
            .await
            .unwrap();
        }
    }
    let version = |c: &mut Client, ns: &'static str, v: u64| {
        let mut c = c.clone();
        async move {
            c.get_summary(pb::GetSummaryRequest {
                namespace: ns.into(),
                session_id: "long".into(),
                version: v,
                ..Default::default()
            })
            .await
        }
    };
    let latest = version(&mut c, "ver", 0).await.unwrap().into_inner();
    let latest = latest.summary.expect("a summary").version;
    assert_eq!(latest, 4);
    let removed = retention.pass().await.unwrap();
    assert_eq!(removed.summaries, 2, "{removed:?}");
    for v in 1..=2 {
        let e = version(&mut c, "ver", v).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
    }
    for v in 3..=4 {
        version(&mut c, "ver", v)
            .await
            .expect("a newest version stays");
    }
    // The session still folds on, from its latest version.
    c.append_turns(append_req("ver", "long", vec![user_turn("one more turn")]))
        .await
        .unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: "ver".into(),
        session_id: "long".into(),
        wait: true,
    })
    .await
    .unwrap();
    version(&mut c, "ver", 5).await.expect("version 5");
    // A namespace without the key keeps every version.
    for v in 1..=4 {
        version(&mut c, "all", v).await.expect("kept");
    }
    drop(retention);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_counts_what_a_pass_then_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let cfg = config(&dir);
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(cfg.clone(), clock.clone()).await;
    let mut c = server.client().await;
    // More turns than one batch, and summaries with their audit records.
    closed_session_with(&mut c, "ret", "long", 300).await;
    session(&mut c, "ret", "short", "zqshort", true).await;
    session(&mut c, "ret", "open", "zqopen", false).await;
    session(&mut c, "other", "x", "zqx", true).await;
    drop(retention);
    let tmp_keep = server.stop().await;
    // 400 days on: turns, audit records, summaries and episodes are due;
    // facts not yet.
    let at = mnemo::model::now_nanos() + 400 * DAY;
    let file = tmp.path().join("mnemo.toml");
    std::fs::write(&file, toml::to_string(&cfg).unwrap()).unwrap();
    let at_arg = format!("{}.{:09}", at / 1_000_000_000, at % 1_000_000_000);
    let out = mnemo(&[
        "retention",
        "--dry-run",
        "--json",
        "--at",
        &at_arg,
        "--config",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan["namespaces"].get("other").is_none(), "{plan}");
    let planned = |kind: &str| {
        plan["namespaces"]["ret"][kind]["count"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(planned("turns"), 310, "{plan}");
    assert!(
        planned("summaries") >= 1 && planned("audit_records") >= 1,
        "{plan}"
    );
    assert!(plan["namespaces"]["ret"]["turns"]["oldest"]
        .as_i64()
        .is_some());
    // The table form names the namespace and kinds.
    let table = mnemo(&[
        "retention",
        "--dry-run",
        "--at",
        &at_arg,
        "--config",
        file.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("ret") && text.contains("turns") && text.contains("310"),
        "{text}"
    );
    // Without --dry-run nothing is removed, and it says why.
    let refused = mnemo(&["retention", "--config", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--dry-run"));

    // A pass at that time removes exactly that.
    clock.store(at, Ordering::SeqCst);
    let (server, retention) = start(cfg.clone(), clock.clone()).await;
    retention.pass().await.unwrap();
    let done = removed_so_far(&retention);
    let kinds = ["turns", "summaries", "episodes", "audit_records", "facts"];
    for (kind, n) in kinds.iter().zip(&done) {
        assert_eq!(planned(kind), *n, "{kind}: {plan}");
    }
    // And a dry run now finds nothing left.
    drop(retention);
    let mut c = server.client().await;
    assert!(all_turns(&mut c, "ret", "long").await.is_empty());
    assert_eq!(all_turns(&mut c, "ret", "open").await.len(), 10);
    assert_eq!(all_turns(&mut c, "other", "x").await.len(), 10);
    drop(c);
    server.stop().await;
    let again = mnemo(&[
        "retention",
        "--dry-run",
        "--json",
        "--at",
        &at_arg,
        "--config",
        file.to_str().unwrap(),
    ]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["total"], 0, "{again}");
    if !on_postgres() {
        // The store is consistent: the marks account for the gaps.
        let v = mnemo(&["verify", "--data-dir", dir.to_str().unwrap()]);
        assert!(
            v.status.success(),
            "{}{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        );
    }
    drop(tmp_keep);
}

/// A store written before turns waited for the final summary can hold a
/// session whose unsummarized turns are gone. Its final summary finds
/// nothing to fold: the attempt is recorded once, with why, and the
/// session is not scheduled again (it used to be, forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_unsummarized_turns_are_gone_is_attempted_once() {
    if on_postgres() {
        return; // opens the sled files directly
    }
    use mnemo::store::RetentionStore;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    c.create_session(pb::CreateSessionRequest {
        namespace: "ret".into(),
        session_id: "old".into(),
        settings: Some(pb::SessionSettings {
            summary_every_turns: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    let turns = (0..20).map(|i| user_turn(&format!("line {i}"))).collect();
    c.append_turns(append_req("ret", "old", turns))
        .await
        .unwrap();
    drop(c);
    server.stop().await;
    {
        let store = mnemo::store::SledStore::open(&dir).unwrap();
        let cut = mnemo::model::SessionCut {
            turns_through_seq: 20,
            ..Default::default()
        };
        let n = store
            .retain_session("ret", "old", &cut, 256, mnemo::model::now_nanos())
            .unwrap();
        assert_eq!(n.turns, 20);
    }
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    c.close_session(pb::CloseSessionRequest {
        namespace: "ret".into(),
        session_id: "old".into(),
    })
    .await
    .unwrap();
    let audit = |c: &mut Client| {
        let mut c = c.clone();
        async move {
            c.get_audit_log(pb::GetAuditLogRequest {
                namespace: "ret".into(),
                session_id: "old".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .records
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while audit(&mut c).await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "no summary attempt");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Time for a loop to show itself: the scheduler would come back at once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let records = audit(&mut c).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(!records[0].validation_passed);
    assert!(
        records[0].validation_errors[0].contains("turns 1–20 were removed by retention"),
        "{records:?}"
    );
    let s = common::get_session(&mut c, "ret", "old").await.unwrap();
    assert_eq!(s.summary_version, 0);
    drop(c);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_on_postgres_remove_each_record_once() {
    if !on_postgres() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cfg_a = config(&tmp.path().join("a"));
    let mut cfg_b = config(&tmp.path().join("b"));
    cfg_b.postgres.url = cfg_a.postgres.url.clone();
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (a, ret_a) = start(cfg_a, clock.clone()).await;
    let (b, ret_b) = start(cfg_b, clock.clone()).await;
    let mut c = a.client().await;
    const SESSIONS: usize = 6;
    for i in 0..SESSIONS {
        closed_session_with(&mut c, "ret", &format!("s{i}"), 300).await;
    }
    clock.store(mnemo::model::now_nanos() + 31 * DAY, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let (ra, rb) = tokio::join!(ret_a.pass(), ret_b.pass());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    eprintln!(
        "daemon A removed {ra:?}, daemon B {rb:?}, in {:?}",
        started.elapsed()
    );
    assert_eq!(
        ra.turns + rb.turns,
        (SESSIONS * 300) as u64,
        "{ra:?} {rb:?}"
    );
    let mut cb = b.client().await;
    for i in 0..SESSIONS {
        let r = list_turns(&mut cb, "ret", &format!("s{i}")).await;
        assert!(r.turns.is_empty());
        let t = r.turns_removed.unwrap();
        assert_eq!((t.through_seq, t.count), (300, 300));
    }
    assert_eq!(
        ret_a.pass().await.unwrap().total() + ret_b.pass().await.unwrap().total(),
        0
    );
    drop((ret_a, ret_b, c, cb));
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_bad_table_is_a_config_error_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    for (table, needle) in [
        (
            "namespace = \"ret\"\nturns_days = 0",
            "retention[0].turns_days = 0",
        ),
        (
            "namespace = \"ret\"\naudit_days = -5",
            "retention[0].audit_days = -5",
        ),
        ("turns_days = 3", "retention[0].namespace is required"),
    ] {
        let file = tmp.path().join("bad.toml");
        std::fs::write(&file, format!("[[retention]]\n{table}\n")).unwrap();
        let out = mnemo(&["retention", "--dry-run", "--config", file.to_str().unwrap()]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{err}");
        // The daemon refuses to start with it.
        let mut cfg = Config::from_file(&file).unwrap();
        cfg.data_dir = tmp.path().join("d");
        let e = match mnemo::server::Daemon::open(cfg).await {
            Ok(_) => panic!("the daemon started with {table:?}"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(needle), "{e}");
    }
}

/// Figures (`cargo test --test retention figures -- --ignored --nocapture`):
/// a retention pass removing the turns of 50 closed sessions x 1000
/// turns, beside DeleteSession of 50 sessions of the same size in the same
/// run, and the dry run before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn figures_retention_pass() {
    const SESSIONS: usize = 50;
    const TURNS: usize = 1000;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let cfg = config(&dir);
    let clock = Arc::new(AtomicI64::new(mnemo::model::now_nanos()));
    let (server, retention) = start(cfg.clone(), clock.clone()).await;
    let mut c = server.client().await;
    let fill = std::time::Instant::now();
    for i in 0..SESSIONS {
        closed_session_with(&mut c, "ret", &format!("r{i}"), TURNS).await;
        closed_session_with(&mut c, "other", &format!("d{i}"), TURNS).await;
    }
    eprintln!(
        "filled {} turns in {:?}",
        2 * SESSIONS * TURNS,
        fill.elapsed()
    );
    let at = mnemo::model::now_nanos() + 31 * DAY;
    let file = tmp.path().join("mnemo.toml");
    std::fs::write(&file, toml::to_string(&cfg).unwrap()).unwrap();
    let at_arg = format!("{}.{:09}", at / 1_000_000_000, at % 1_000_000_000);
    let dry = if on_postgres() {
        let t = std::time::Instant::now();
        let out = mnemo(&[
            "retention",
            "--dry-run",
            "--json",
            "--at",
            &at_arg,
            "--config",
            file.to_str().unwrap(),
        ]);
        assert!(out.status.success());
        Some(t.elapsed())
    } else {
        None
    };
    clock.store(at, Ordering::SeqCst);
    let t = std::time::Instant::now();
    let removed = retention.pass().await.unwrap();
    let pass = t.elapsed();
    assert_eq!(removed.turns, (SESSIONS * TURNS) as u64);
    let t = std::time::Instant::now();
    for i in 0..SESSIONS {
        c.delete_session(pb::DeleteSessionRequest {
            namespace: "other".into(),
            session_id: format!("d{i}"),
        })
        .await
        .unwrap();
    }
    let delete = t.elapsed();
    eprintln!(
        "retention pass removing {} turns of {SESSIONS} sessions: {pass:?}; DeleteSession of {SESSIONS} sessions x {TURNS} turns: {delete:?}; dry run (PostgreSQL, daemon running): {dry:?}",
        removed.turns
    );
    drop(retention);
    server.stop().await;
}
