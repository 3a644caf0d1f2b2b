//! Retrieval quality on a fixed fixture (`tests/fixtures/retrieval/`): six
//! subjects, 24 sessions, 552 turns, 28 client facts and 49 questions whose
//! answers are known turns or facts. Everything goes through gRPC: the
//! sessions are appended and closed (so summaries, extracted facts and
//! episodes are written too, and compete in the ranking), then every
//! question is searched (TURN and FACT kinds, limit 5).
//!
//! A hit answers a question when it is an answer turn, the client fact with
//! the answer's key, or an extracted fact whose source is an answer turn.
//! The test prints recall@5 and MRR (and every miss with its top hits) and
//! holds floors at what this build reaches. The misses left are
//! vocabulary gaps BM25 cannot bridge ("when is the appointment" against
//! "May 14 at 9:40").

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use mnemo::pb;
use serde::Deserialize;

/// Floors one question below the figures reached when they were set
/// (recall@5 0.878 = 43/49, MRR 0.678): hits with equal scores may come
/// back in another order when the index is segmented differently.
const RECALL_AT_5_FLOOR: f64 = 0.85;
const MRR_FLOOR: f64 = 0.65;

#[derive(Deserialize)]
struct Corpus {
    namespace: String,
    subjects: Vec<Subject>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Subject {
    subject_id: String,
    facts: Vec<FixtureFact>,
    sessions: Vec<FixtureSession>,
}

#[derive(Deserialize)]
struct FixtureFact {
    key: String,
    text: String,
}

#[derive(Deserialize)]
struct FixtureSession {
    session_id: String,
    turns: Vec<FixtureTurn>,
}

#[derive(Deserialize)]
struct FixtureTurn {
    role: String,
    content: String,
}

#[derive(Deserialize)]
struct Question {
    id: String,
    query: String,
    #[serde(default)]
    subject_id: Option<String>,
    answers: Vec<Answer>,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    fact_key: Option<String>,
    #[serde(default)]
    fact_subject_id: Option<String>,
}

fn role(r: &str) -> pb::Role {
    match r {
        "user" => pb::Role::User,
        "assistant" => pb::Role::Assistant,
        _ => pb::Role::System,
    }
}

#[tokio::test]
async fn search_recall_and_mrr_on_the_retrieval_fixture() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/retrieval/corpus.json"
    );
    let corpus: Corpus = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ns = corpus.namespace.as_str();
    let server = TestServer::start().await;
    let mut c = server.client().await;

    // Client facts, by id -> (subject, key).
    let mut fact_keys: HashMap<String, (String, String)> = HashMap::new();
    let mut turns = 0usize;
    for s in &corpus.subjects {
        for f in &s.facts {
            let fact = c
                .put_fact(pb::PutFactRequest {
                    namespace: ns.into(),
                    subject_id: s.subject_id.clone(),
                    key: f.key.clone(),
                    text: f.text.clone(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .fact
                .unwrap();
            fact_keys.insert(fact.fact_id, (s.subject_id.clone(), f.key.clone()));
        }
        for sess in &s.sessions {
            c.create_session(pb::CreateSessionRequest {
                namespace: ns.into(),
                session_id: sess.session_id.clone(),
                subject_id: s.subject_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
            let new: Vec<pb::NewTurn> = sess
                .turns
                .iter()
                .map(|t| turn(role(&t.role), &t.role, &t.content))
                .collect();
            turns += new.len();
            c.append_turns(append_req(ns, &sess.session_id, new))
                .await
                .unwrap();
            c.close_session(pb::CloseSessionRequest {
                namespace: ns.into(),
                session_id: sess.session_id.clone(),
            })
            .await
            .unwrap();
        }
    }
    assert!(turns > 500 && corpus.subjects.len() >= 5 && corpus.questions.len() >= 40);

    // Wait for every episode, then for the index to catch up.
    let deadline = Instant::now() + Duration::from_secs(120);
    for s in &corpus.subjects {
        loop {
            let n = c
                .list_episodes(pb::ListEpisodesRequest {
                    namespace: ns.into(),
                    subject_id: s.subject_id.clone(),
                    page_size: 100,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .episodes
                .len();
            if n == s.sessions.len() {
                break;
            }
            assert!(Instant::now() < deadline, "episodes of {}", s.subject_id);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    loop {
        let lag = c
            .search(pb::SearchRequest {
                namespace: ns.into(),
                query: "warmup".into(),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner().index_lag);
        if matches!(lag, Ok(0)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the index never caught up: {lag:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut found_at: Vec<Option<usize>> = Vec::new();
    let mut report = String::new();
    for q in &corpus.questions {
        let hits = c
            .search(pb::SearchRequest {
                namespace: ns.into(),
                subject_id: q.subject_id.clone().unwrap_or_default(),
                query: q.query.clone(),
                kinds: vec![pb::SearchKind::Turn as i32, pb::SearchKind::Fact as i32],
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .hits;
        let subject_of_answer = |a: &Answer| {
            a.fact_subject_id
                .clone()
                .or_else(|| q.subject_id.clone())
                .unwrap_or_default()
        };
        let answers = |h: &pb::SearchHit| -> bool {
            q.answers
                .iter()
                .any(|a| match (&a.session_id, a.seq, &a.fact_key) {
                    (Some(sid), Some(seq), _) if h.kind == pb::SearchKind::Turn as i32 => {
                        h.session_id == *sid && h.seq == seq
                    }
                    (_, _, Some(key)) if h.kind == pb::SearchKind::Fact as i32 => fact_keys
                        .get(&h.fact_id)
                        .is_some_and(|(s, k)| *k == *key && *s == subject_of_answer(a)),
                    _ => false,
                })
        };
        // An extracted fact answers when its source is an answer turn.
        let mut rank = None;
        for (i, h) in hits.iter().enumerate() {
            let extracted_from_answer =
                if h.kind == pb::SearchKind::Fact as i32 && !fact_keys.contains_key(&h.fact_id) {
                    let f = c
                        .get_fact(pb::GetFactRequest {
                            namespace: ns.into(),
                            fact_id: h.fact_id.clone(),
                        })
                        .await
                        .unwrap()
                        .into_inner()
                        .fact
                        .unwrap();
                    f.sources.first().is_some_and(|src| {
                        q.answers.iter().any(|a| {
                            a.session_id.as_deref() == Some(src.session_id.as_str())
                                && a.seq == Some(src.seq)
                        })
                    })
                } else {
                    false
                };
            if answers(h) || extracted_from_answer {
                rank = Some(i);
                break;
            }
        }
        if rank.is_none() {
            report.push_str(&format!("  missed {} {:?}\n", q.id, q.query));
            for h in &hits {
                report.push_str(&format!(
                    "    {:?} {} #{} {} {:.2} {:?}\n",
                    h.kind,
                    h.session_id,
                    h.seq,
                    h.fact_id,
                    h.score,
                    h.snippet.chars().take(90).collect::<String>()
                ));
            }
        }
        found_at.push(rank);
    }
    let n = found_at.len() as f64;
    let recall = found_at.iter().filter(|r| r.is_some()).count() as f64 / n;
    let mrr = found_at
        .iter()
        .map(|r| r.map_or(0.0, |i| 1.0 / (i as f64 + 1.0)))
        .sum::<f64>()
        / n;
    println!(
        "retrieval fixture: {} questions, {turns} turns: recall@5 {recall:.3}, MRR {mrr:.3}\n{report}",
        found_at.len()
    );
    assert!(
        recall >= RECALL_AT_5_FLOOR,
        "recall@5 {recall:.3}\n{report}"
    );
    assert!(mrr >= MRR_FLOOR, "MRR {mrr:.3}\n{report}");
}
