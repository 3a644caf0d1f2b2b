//! Erasing a subject and exporting it, through the real daemon: an erase
//! removes every record of the subject and nothing of anyone else's
//! (another subject, the same subject id in another namespace); appends
//! to the subject during the erase are refused with SUBJECT_ERASING while
//! other subjects' appends go on, gap-free; `kill -9` in the middle of an
//! erase, then a restart, finishes it and `mnemo verify` is clean; after
//! the erase and `mnemo compact`, no file of the data directory holds a
//! canary the subject said; the export holds what the RPCs return.
//!
//! The daemon cases run on PostgreSQL too (`MNEMO_TEST_STORE=postgres`);
//! the kill, compaction and canary cases are about sled files.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{append_req, config_for, on_postgres, reason, user_turn, Binary, TestServer};
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

const CANARY: &str = "zqcanary7731xylophone";

fn mnemo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(args)
        .env_remove("MNEMO_CONFIG")
        .env_remove("MNEMO_API_KEY")
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

async fn make_session(c: &mut Client, ns: &str, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        subject_id: subject.into(),
        ..Default::default()
    })
    .await
    .unwrap();
}

async fn sessions_of(c: &mut Client, ns: &str, subject: &str) -> Vec<pb::Session> {
    let mut out = Vec::new();
    let mut token = String::new();
    loop {
        let r = c
            .list_sessions(pb::ListSessionsRequest {
                namespace: ns.into(),
                subject_id: subject.into(),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        out.extend(r.sessions);
        if r.next_page_token.is_empty() {
            return out;
        }
        token = r.next_page_token;
    }
}

async fn facts_of(c: &mut Client, ns: &str, subject: &str) -> Vec<pb::Fact> {
    c.list_facts(pb::ListFactsRequest {
        namespace: ns.into(),
        subject_id: subject.into(),
        include_history: true,
        page_size: 1000,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .facts
}

async fn erase(
    c: &mut Client,
    ns: &str,
    subject: &str,
) -> Result<pb::EraseSubjectResponse, tonic::Status> {
    c.erase_subject(pb::EraseSubjectRequest {
        namespace: ns.into(),
        subject_id: subject.into(),
    })
    .await
    .map(|r| r.into_inner())
}

async fn export(
    c: &mut Client,
    ns: &str,
    subject: &str,
) -> Result<Vec<serde_json::Value>, tonic::Status> {
    let mut stream = c
        .export_subject(pb::ExportSubjectRequest {
            namespace: ns.into(),
            subject_id: subject.into(),
        })
        .await?
        .into_inner();
    let mut out = Vec::new();
    while let Some(m) = stream.message().await? {
        out.push(serde_json::from_str(&m.json).expect("export records are JSON"));
    }
    Ok(out)
}

/// A subject with two sessions (one closed and summarized, so it has a
/// summary, audit records and an episode), a fact with history and an
/// append with an idempotency key; the canary in its turns and a fact.
async fn fill_subject(c: &mut Client, ns: &str, subject: &str, prefix: &str) {
    for i in 1..=2 {
        let id = format!("{prefix}-{i}");
        make_session(c, ns, &id, subject).await;
        let mut req =
            append_req(
                ns,
                &id,
                vec![
                user_turn(&format!("My order ORD-{i}77 never came; my code word is {CANARY}.")),
                common::turn(
                    pb::Role::Assistant,
                    "agent-a",
                    "I will send a replacement by 2026-12-20 and email you the tracking number.",
                ),
            ],
            );
        req.idempotency_key = format!("{id}-first");
        c.append_turns(req).await.unwrap();
    }
    let closed = format!("{prefix}-1");
    c.summarize(pb::SummarizeRequest {
        namespace: ns.into(),
        session_id: closed.clone(),
        wait: true,
    })
    .await
    .unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: ns.into(),
        session_id: closed,
    })
    .await
    .unwrap();
    for text in [
        "Prefers email.",
        &format!("Prefers email; code word {CANARY}."),
    ] {
        c.put_fact(pb::PutFactRequest {
            namespace: ns.into(),
            subject_id: subject.into(),
            key: "contact".into(),
            text: text.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn erase_removes_the_subject_everywhere_and_nothing_else_and_export_matches_the_rpcs() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    fill_subject(&mut c, "shop", "cust-42", "v").await;
    fill_subject(&mut c, "shop", "cust-7", "w").await;
    fill_subject(&mut c, "other", "cust-42", "v").await;
    // Every subject's closed session has its episode (written after the
    // close) before anything is compared.
    common::episodes_until(&mut c, "shop", "cust-42", 1).await;
    common::episodes_until(&mut c, "shop", "cust-7", 1).await;
    common::episodes_until(&mut c, "other", "cust-42", 1).await;
    common::search_until(&mut c, "shop", "cust-42", CANARY, |h| !h.is_empty()).await;

    // The export holds what the RPCs return.
    let records = export(&mut c, "shop", "cust-42").await.unwrap();
    assert_eq!(records.first().unwrap()["kind"], "header");
    let end = records.last().unwrap();
    assert_eq!(end["kind"], "end");
    assert_eq!(end["records"].as_u64().unwrap() as usize, records.len() - 2);
    let of_kind = |k: &str| {
        records
            .iter()
            .filter(move |r| r["kind"] == k)
            .collect::<Vec<_>>()
    };
    let sessions: BTreeSet<String> = sessions_of(&mut c, "shop", "cust-42")
        .await
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    let exported: BTreeSet<String> = of_kind("session")
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(exported, sessions);
    for id in &sessions {
        let turns: Vec<(u64, String)> = common::all_turns(&mut c, "shop", id)
            .await
            .into_iter()
            .map(|t| (t.seq, t.content))
            .collect();
        let exported: Vec<(u64, String)> = of_kind("turn")
            .iter()
            .filter(|r| r["session_id"] == id.as_str())
            .map(|r| {
                (
                    r["record"]["seq"].as_u64().unwrap(),
                    r["record"]["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(exported, turns, "turns of {id}");
        let in_export = |kind: &str, field: &str| -> Vec<u64> {
            let mut v: Vec<u64> = of_kind(kind)
                .iter()
                .filter(|r| r["session_id"] == id.as_str())
                .map(|r| r["record"][field].as_u64().unwrap())
                .collect();
            v.sort();
            v
        };
        let mut versions: Vec<u64> = c
            .list_summaries(pb::ListSummariesRequest {
                namespace: "shop".into(),
                session_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .summaries
            .iter()
            .map(|s| s.version)
            .collect();
        versions.sort();
        assert_eq!(
            in_export("summary", "version"),
            versions,
            "summaries of {id}"
        );
        let audit: Vec<u64> = common::audit_log(&mut c, "shop", id)
            .await
            .iter()
            .map(|a| a.audit_seq)
            .collect();
        assert_eq!(in_export("audit", "audit_seq"), audit, "audit of {id}");
    }
    let facts: BTreeSet<String> = facts_of(&mut c, "shop", "cust-42")
        .await
        .into_iter()
        .map(|f| f.fact_id)
        .collect();
    // The client's fact and its superseded version, and what was
    // extracted from the closed session.
    assert!(facts.len() >= 2, "{facts:?}");
    let exported: BTreeSet<String> = of_kind("fact")
        .iter()
        .map(|r| r["record"]["fact_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(exported, facts);
    assert_eq!(of_kind("episode").len(), 1);
    assert!(!of_kind("summary").is_empty() && !of_kind("audit").is_empty());
    let others_before = export(&mut c, "shop", "cust-7").await.unwrap();
    let other_ns_before = export(&mut c, "other", "cust-42").await.unwrap();

    let r = erase(&mut c, "shop", "cust-42").await.unwrap();
    let counts = r.counts.unwrap();
    assert_eq!(counts.sessions, 2);
    assert_eq!(counts.turns, 4);
    assert_eq!(counts.facts, facts.len() as u64);
    assert_eq!(counts.episodes, 1);
    assert_eq!(counts.idempotency_records, 2);
    assert!(counts.summaries >= 1 && counts.audit_records >= 1 && counts.fold_states >= 1);
    assert_eq!(r.requested_by, "anyone");
    assert_eq!(r.subject_sha256.len(), 64);
    assert!(!r.subject_sha256.contains("cust-42"));

    // Gone, by every way in.
    assert!(sessions_of(&mut c, "shop", "cust-42").await.is_empty());
    assert!(facts_of(&mut c, "shop", "cust-42").await.is_empty());
    for id in ["v-1", "v-2"] {
        let e = common::get_session(&mut c, "shop", id).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    }
    let eps = c
        .list_episodes(pb::ListEpisodesRequest {
            namespace: "shop".into(),
            subject_id: "cust-42".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .episodes;
    assert!(eps.is_empty());
    // The search index forgets it (every subject of the namespace).
    common::search_until(&mut c, "shop", "", CANARY, |h| {
        h.iter().all(|h| h.subject_id != "cust-42")
    })
    .await;
    assert_eq!(
        erase(&mut c, "shop", "cust-42").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(
        export(&mut c, "shop", "cust-42").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(
        erase(&mut c, "shop", "nobody").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(
        erase(&mut c, "shop", "").await.unwrap_err().code(),
        Code::InvalidArgument
    );

    // Everyone else's records are as they were (but the header's time).
    let strip = |v: Vec<serde_json::Value>| v.into_iter().skip(1).collect::<Vec<_>>();
    assert_eq!(
        strip(export(&mut c, "shop", "cust-7").await.unwrap()),
        strip(others_before)
    );
    assert_eq!(
        strip(export(&mut c, "other", "cust-42").await.unwrap()),
        strip(other_ns_before)
    );
    // The subject id can be used again afterwards.
    make_session(&mut c, "shop", "v-new", "cust-42").await;
    server.stop().await;
}

/// Appends (ms) of each call, sorted.
#[tokio::test]
async fn erasure_records_are_listed_in_pages_and_by_subject_hash() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut records = Vec::new();
    for subject in ["a-1", "b-2", "c-3"] {
        make_session(&mut c, "shop", &format!("s-{subject}"), subject).await;
        records.push(erase(&mut c, "shop", subject).await.unwrap());
    }
    make_session(&mut c, "other", "s-x", "a-1").await;
    erase(&mut c, "other", "a-1").await.unwrap();
    let list = |subject: &str, size: u32, token: String| {
        let mut c = c.clone();
        let subject = subject.to_owned();
        async move {
            c.list_erasures(pb::ListErasuresRequest {
                namespace: "shop".into(),
                subject_id: subject,
                page_size: size,
                page_token: token,
            })
            .await
            .map(|r| r.into_inner())
        }
    };
    // Two pages of two and one, oldest first, as EraseSubject returned.
    let first = list("", 2, String::new()).await.unwrap();
    assert_eq!(first.erasures.len(), 2);
    assert!(!first.next_page_token.is_empty());
    let second = list("", 2, first.next_page_token.clone()).await.unwrap();
    assert_eq!(second.erasures.len(), 1);
    assert!(second.next_page_token.is_empty());
    let all: Vec<_> = first.erasures.into_iter().chain(second.erasures).collect();
    assert_eq!(all, records);
    // By subject: matched by hash; another namespace's record of the same
    // id is not listed.
    let b = list("b-2", 0, String::new()).await.unwrap().erasures;
    assert_eq!(b, vec![records[1].clone()]);
    assert!(list("nobody", 0, String::new())
        .await
        .unwrap()
        .erasures
        .is_empty());
    // Bad input.
    assert_eq!(
        list("", 0, "zz".into()).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        list("", 100_000, String::new()).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    // The CLI.
    let out = ok(mnemo(&[
        "subject",
        "erasures",
        "-n",
        "shop",
        "--subject",
        "b-2",
        "--json",
        "--addr",
        &server.url(),
    ]));
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["erasure_id"], records[1].erasure_id.as_str());
    assert_eq!(
        lines[0]["subject_sha256"],
        records[1].subject_sha256.as_str()
    );
    assert!(!out.contains("b-2"));
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 * 0.99) as usize).min(v.len() - 1)]
}

/// Appends to `sessions` one turn at a time until `stop`; returns the
/// latencies (ms) and, per session, the turns acknowledged.
async fn append_loop(
    mut c: Client,
    ns: &'static str,
    sessions: Vec<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    refused: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> (Vec<f64>, Vec<(String, u64)>) {
    let mut lat = Vec::new();
    let mut acked = vec![0u64; sessions.len()];
    let mut i = 0usize;
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        let k = i % sessions.len();
        i += 1;
        let t = Instant::now();
        match c
            .append_turns(append_req(
                ns,
                &sessions[k],
                vec![user_turn("another line")],
            ))
            .await
        {
            Ok(_) => {
                lat.push(t.elapsed().as_secs_f64() * 1e3);
                acked[k] += 1;
            }
            Err(e) if e.code() == Code::FailedPrecondition => {
                assert_eq!(reason(&e), "SUBJECT_ERASING", "{e:?}");
                assert!(e.message().contains("erase"), "{e:?}");
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) if e.code() == Code::NotFound => {}
            Err(e) => panic!("append: {e:?}"),
        }
    }
    (lat, sessions.into_iter().zip(acked).collect())
}

#[tokio::test]
async fn appends_during_an_erase_are_refused_and_other_subjects_lose_nothing() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let (n_sessions, n_turns) = (40, 50);
    let mut big = Vec::new();
    for i in 0..n_sessions {
        let id = format!("big-{i:03}");
        make_session(&mut c, "shop", &id, "big").await;
        let turns = (0..n_turns)
            .map(|j| user_turn(&format!("line {j} of {id}")))
            .collect();
        c.append_turns(append_req("shop", &id, turns))
            .await
            .unwrap();
        big.push(id);
    }
    let others: Vec<String> = (0..4).map(|i| format!("small-{i}")).collect();
    for id in &others {
        make_session(&mut c, "shop", id, "small").await;
    }
    // Others' appends with no erase running.
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let quiet = tokio::spawn(append_loop(
        server.client().await,
        "shop",
        others.clone(),
        stop.clone(),
        refused.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Release);
    let (quiet_lat, quiet_acked) = quiet.await.unwrap();

    // Then during the erase, with appends to the erased subject too.
    let stop = Arc::new(AtomicBool::new(false));
    let to_others = tokio::spawn(append_loop(
        server.client().await,
        "shop",
        others.clone(),
        stop.clone(),
        refused.clone(),
    ));
    let to_big = tokio::spawn(append_loop(
        server.client().await,
        "shop",
        big.iter().rev().cloned().collect(),
        stop.clone(),
        refused.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let r = erase(&mut c, "shop", "big").await.unwrap();
    let took = started.elapsed();
    stop.store(true, Ordering::Release);
    let (busy_lat, busy_acked) = to_others.await.unwrap();
    let (_, big_acked) = to_big.await.unwrap();
    let counts = r.counts.unwrap();
    assert_eq!(counts.sessions, n_sessions as u64);
    let acked_big: u64 = big_acked.iter().map(|(_, n)| n).sum();
    // Every acknowledged append to the subject was erased with it.
    assert_eq!(counts.turns, (n_sessions * n_turns) as u64 + acked_big);
    assert!(sessions_of(&mut c, "shop", "big").await.is_empty());
    // The others kept every acknowledged turn, seqs 1..=n without a gap.
    for id in &others {
        let n: u64 = quiet_acked
            .iter()
            .chain(&busy_acked)
            .filter(|(s, _)| s == id)
            .map(|(_, n)| n)
            .sum();
        let seqs: Vec<u64> = common::all_turns(&mut c, "shop", id)
            .await
            .iter()
            .map(|t| t.seq)
            .collect();
        assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "{id}");
    }
    eprintln!(
        "erase of {n_sessions} sessions x {n_turns} turns: {:.0} ms; {} appends to it refused; others' append p99 {:.2} ms without an erase ({} appends), {:.2} ms during it ({} appends)",
        took.as_secs_f64() * 1e3,
        refused.load(Ordering::Relaxed),
        p99(quiet_lat.clone()),
        quiet_lat.len(),
        p99(busy_lat.clone()),
        busy_lat.len(),
    );
    server.stop().await;
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    out.push(p.strip_prefix(dir).unwrap().display().to_string());
                }
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn after_erase_and_compact_no_file_of_the_data_dir_holds_the_canary() {
    if on_postgres() {
        return; // about sled's files; PostgreSQL: see docs (VACUUM).
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    fill_subject(&mut c, "shop", "cust-42", "v").await;
    make_session(&mut c, "shop", "keep", "cust-7").await;
    c.append_turns(append_req(
        "shop",
        "keep",
        vec![user_turn("The espresso grinder is loud.")],
    ))
    .await
    .unwrap();
    common::episodes_until(&mut c, "shop", "cust-42", 1).await;
    common::search_until(&mut c, "shop", "cust-42", CANARY, |h| !h.is_empty()).await;
    server.stop().await;
    // The check can fail: the canary is in the files now.
    let before = files_holding(&dir, CANARY.as_bytes());
    assert!(
        !before.is_empty(),
        "the canary should be on disk before the erase"
    );

    let bin = Binary::start(&dir, &[]);
    let url = bin.url();
    // The access request through the CLI: JSON lines, header to end line.
    let file = tmp.path().join("cust-42.jsonl");
    ok(mnemo(&[
        "subject",
        "export",
        "-n",
        "shop",
        "--subject",
        "cust-42",
        "-o",
        file.to_str().unwrap(),
        "--addr",
        &url,
    ]));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "header");
    assert_eq!(lines.last().unwrap()["kind"], "end");
    assert!(lines
        .iter()
        .any(|l| l["kind"] == "turn" && l["record"]["content"].as_str().unwrap().contains(CANARY)));
    std::fs::remove_file(&file).unwrap();
    // Erase through the CLI: no terminal and no --yes refuses; --yes erases.
    let out = mnemo(&[
        "subject",
        "erase",
        "-n",
        "shop",
        "--subject",
        "cust-42",
        "--addr",
        &url,
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    let out = ok(mnemo(&[
        "subject",
        "erase",
        "-n",
        "shop",
        "--subject",
        "cust-42",
        "--yes",
        "--json",
        "--addr",
        &url,
    ]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["counts"]["sessions"], 2);
    assert!(bin.terminate().success());
    let after_erase = files_holding(&dir, CANARY.as_bytes());
    eprintln!("canary before the erase in {before:?}; after the erase, before compaction, in {after_erase:?}");

    let out = ok(mnemo(&["compact", "--data-dir", dir.to_str().unwrap()]));
    eprintln!("{out}");
    let after = files_holding(&dir, CANARY.as_bytes());
    assert!(after.is_empty(), "the canary is still in {after:?}");
    // Nor the subject's id in the clear (the erasure record hashes it).
    assert!(
        files_holding(&dir, b"cust-42").is_empty(),
        "{:?}",
        files_holding(&dir, b"cust-42")
    );
    ok(mnemo(&["verify", "--data-dir", dir.to_str().unwrap()]));

    // Everyone else's data is intact and served.
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    let turns = common::all_turns(&mut c, "shop", "keep").await;
    assert_eq!(turns.len(), 1);
    common::search_until(&mut c, "shop", "cust-7", "espresso grinder", |h| {
        !h.is_empty()
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn kill_9_in_the_middle_of_an_erase_then_a_restart_finishes_it_and_verify_is_clean() {
    if on_postgres() {
        return; // the binary here runs on sled.
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let bin = Binary::start(&dir, &[]);
    let mut c = MemoryServiceClient::connect(bin.url()).await.unwrap();
    let n = 150;
    for i in 0..n {
        let id = format!("s-{i:03}");
        make_session(&mut c, "shop", &id, "doomed").await;
        let turns = (0..10).map(|j| user_turn(&format!("line {j}"))).collect();
        c.append_turns(append_req("shop", &id, turns))
            .await
            .unwrap();
    }
    make_session(&mut c, "shop", "keep", "kept").await;
    c.append_turns(append_req("shop", "keep", vec![user_turn("stay")]))
        .await
        .unwrap();
    let mut eraser = c.clone();
    let call = tokio::spawn(async move { erase(&mut eraser, "shop", "doomed").await });
    // Kill once some, not all, of its sessions are gone.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = sessions_of(&mut c, "shop", "doomed").await.len();
        if left < n {
            assert!(
                left > 0,
                "the erase finished before the kill; make it bigger"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the erase never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bin.kill9();
    let _ = call.await;
    // The job is in the store, unfinished.
    let dump = ok(mnemo(&["export", "--data-dir", dir.to_str().unwrap()]));
    assert!(
        dump.contains("\"erase_job\""),
        "no erase job after the kill"
    );
    // Compaction waits for it: the job still names the subject.
    let out = mnemo(&["compact", "--data-dir", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("erase is unfinished"));

    // A restart resumes it by itself.
    let bin = Binary::start(&dir, &[]);
    let mut c = MemoryServiceClient::connect(bin.url()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match erase(&mut c, "shop", "doomed").await {
            Err(e) if e.code() == Code::NotFound => break,
            // The resumed job was still running: this call joined it.
            Ok(_) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bin.wait_for_log("resuming a subject erase", 1);
    assert!(sessions_of(&mut c, "shop", "doomed").await.is_empty());
    assert_eq!(common::all_turns(&mut c, "shop", "keep").await.len(), 1);
    assert!(bin.terminate().success());
    ok(mnemo(&["verify", "--data-dir", dir.to_str().unwrap()]));
}

/// The figures of docs/operations.md: a subject of `MNEMO_ERASE_SESSIONS`
/// sessions x `MNEMO_ERASE_TURNS` turns (default 100 x 200) on a store
/// holding `MNEMO_ERASE_STORE_TURNS` turns in all (default 200,000):
/// erase time, sled bytes reclaimed by `mnemo compact`, and the append
/// p99 of other subjects during the erase beside it without one, in one
/// run. Ignored by default (minutes); run with `--ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn figures_erase_of_a_large_subject() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (sessions, turns, store_turns) = (
        env("MNEMO_ERASE_SESSIONS", 100),
        env("MNEMO_ERASE_TURNS", 200),
        env("MNEMO_ERASE_STORE_TURNS", 200_000),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    let line = |i: usize| {
        user_turn(&format!("turn {i}: the order ORD-{i} shipped to 12 Elm Street, call back about the refund of the espresso grinder"))
    };
    let fill = |c: &mut Client, id: String, subject: &'static str, n: usize| {
        let mut c = c.clone();
        async move {
            make_session(&mut c, "shop", &id, subject).await;
            let mut left = n;
            while left > 0 {
                let k = left.min(256);
                c.append_turns(append_req("shop", &id, (0..k).map(line).collect()))
                    .await
                    .unwrap();
                left -= k;
            }
        }
    };
    let started = Instant::now();
    for i in 0..sessions {
        fill(&mut c, format!("doomed-{i:04}"), "doomed", turns).await;
    }
    let rest = store_turns.saturating_sub(sessions * turns);
    let per = 2000;
    for i in 0..rest.div_ceil(per) {
        fill(
            &mut c,
            format!("kept-{i:05}"),
            if i % 2 == 0 { "kept-a" } else { "kept-b" },
            per.min(rest - i * per),
        )
        .await;
    }
    let others: Vec<String> = (0..4).map(|i| format!("live-{i}")).collect();
    for id in &others {
        make_session(&mut c, "shop", id, "live").await;
    }
    eprintln!(
        "filled {} turns in {:.0} s",
        sessions * turns + rest,
        started.elapsed().as_secs_f64()
    );
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let quiet = tokio::spawn(append_loop(
        server.client().await,
        "shop",
        others.clone(),
        stop.clone(),
        refused.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Release);
    let (quiet_lat, _) = quiet.await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let busy = tokio::spawn(append_loop(
        server.client().await,
        "shop",
        others.clone(),
        stop.clone(),
        refused.clone(),
    ));
    let t = Instant::now();
    // A long erase outlives the request timeout: ask again, which waits
    // for the same job, until it is done.
    let r = loop {
        match erase(&mut c, "shop", "doomed").await {
            Ok(r) => break r,
            Err(e) if e.code() == Code::DeadlineExceeded || e.code() == Code::Cancelled => continue,
            Err(e) => panic!("{e:?}"),
        }
    };
    let took = t.elapsed();
    stop.store(true, Ordering::Release);
    let (busy_lat, _) = busy.await.unwrap();
    server.stop().await;
    let sled_before = mnemo::store::compact::size_of(&dir)
        - mnemo::store::compact::size_of(&dir.join("search-index"));
    let out = ok(mnemo(&["compact", "--data-dir", dir.to_str().unwrap()]));
    let sled_after = mnemo::store::compact::size_of(&dir)
        - mnemo::store::compact::size_of(&dir.join("search-index"));
    eprintln!("{out}");
    eprintln!(
        "FIGURES: erase of {sessions} sessions x {turns} turns ({} records) on a store of {} turns: {:.2} s; sled files {} MB before compact, {} MB after; others' append p99 {:.2} ms without an erase ({} appends), {:.2} ms during it ({} appends)",
        r.counts.unwrap().turns,
        sessions * turns + rest,
        took.as_secs_f64(),
        sled_before >> 20,
        sled_after >> 20,
        p99(quiet_lat.clone()),
        quiet_lat.len(),
        p99(busy_lat.clone()),
        busy_lat.len(),
    );
}

#[tokio::test]
async fn on_postgres_an_erase_left_by_a_killed_daemon_is_finished_by_another() {
    if on_postgres() {
        return; // it starts PostgreSQL daemons of its own: once is enough.
    }
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("mnemo.toml");
    std::fs::write(&config, "[limits]\nerase_take_over_secs = 2\n").unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let a = Binary::start_on_postgres(&tmp.path().join("a"), &url, &args);
    let b = Binary::start_on_postgres(&tmp.path().join("b"), &url, &args);
    let mut ca = MemoryServiceClient::connect(a.url()).await.unwrap();
    let mut cb = MemoryServiceClient::connect(b.url()).await.unwrap();
    let n = 150;
    for i in 0..n {
        let id = format!("s-{i:03}");
        make_session(&mut ca, "shop", &id, "doomed").await;
        let turns = (0..10).map(|j| user_turn(&format!("line {j}"))).collect();
        ca.append_turns(append_req("shop", &id, turns))
            .await
            .unwrap();
    }
    make_session(&mut ca, "shop", "keep", "kept").await;
    let mut eraser = ca.clone();
    let call = tokio::spawn(async move { erase(&mut eraser, "shop", "doomed").await });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = sessions_of(&mut cb, "shop", "doomed").await.len();
        if left < n {
            assert!(
                left > 0,
                "the erase finished before the kill; make it bigger"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the erase never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.kill9();
    let _ = call.await;
    // B refuses appends meanwhile and takes the job over once A's
    // heartbeat is 2 s old (its sweep looks every 10 s).
    let e = cb
        .append_turns(append_req("shop", "s-000", vec![user_turn("late")]))
        .await
        .unwrap_err();
    assert!(
        e.code() == Code::NotFound || reason(&e) == "SUBJECT_ERASING",
        "{e:?}"
    );
    b.wait_for_log("resuming a subject erase", 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match erase(&mut cb, "shop", "doomed").await {
            Err(e) if e.code() == Code::NotFound => break,
            Ok(_) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sessions_of(&mut cb, "shop", "doomed").await.is_empty());
    assert_eq!(sessions_of(&mut cb, "shop", "kept").await.len(), 1);
    assert!(b.terminate().success());
}
