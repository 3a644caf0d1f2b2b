//! Context bundles over gRPC: the budget is never exceeded (property test
//! over random sessions and budgets, measured with tiktoken-rs, the
//! reference tokenizer), every turn is accounted for, the Q&A compression
//! of older turns, transparency, freshness, request validation.

mod common;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

/// A small deterministic generator (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "refund",
    "order",
    "ORD-4411",
    "$19.99",
    "please",
    "check",
    "the",
    "status",
    "of",
    "my",
    "ticket",
    "deploy",
    "server",
    "failed",
    "because",
    "timeout",
    "we",
    "decided",
    "to",
    "retry",
    "tomorrow",
    "I",
    "will",
    "send",
    "email",
    "jane@example.com",
    "why",
    "is",
    "it",
    "slow",
    "naïve",
    "café",
    "日本語",
    "🙂",
    "emoji",
    "\n",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "12.50.",
];

fn sentence(rng: &mut Rng, words: u64) -> String {
    let mut out = String::new();
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    match rng.below(3) {
        0 => out.push('?'),
        1 => out.push('.'),
        _ => {}
    }
    out
}

fn random_turn(rng: &mut Rng) -> pb::NewTurn {
    let role = match rng.below(10) {
        0..=3 => pb::Role::User,
        4..=7 => pb::Role::Assistant,
        8 => pb::Role::System,
        _ => pb::Role::Tool,
    };
    let len = match rng.below(20) {
        0 => 400 + rng.below(2000),
        1..=4 => 40 + rng.below(80),
        _ => 3 + rng.below(25),
    };
    let mut t = pb::NewTurn {
        role: role as i32,
        speaker: format!("{:?}", role).to_lowercase(),
        content: sentence(rng, len),
        ..Default::default()
    };
    if role == pb::Role::Tool {
        t.tool_call = Some(pb::ToolCall {
            tool_name: "lookup_order".into(),
            arguments_json: format!(r#"{{"order_id": "ORD-{}"}}"#, rng.below(10_000)),
            result: {
                let n = 5 + rng.below(60);
                sentence(rng, n)
            },
            status: pb::ToolCallStatus::Success as i32,
            error_details: String::new(),
        });
    }
    t
}

async fn bundle(
    c: &mut Client,
    id: &str,
    budget: u32,
    encoding: pb::Encoding,
) -> Result<pb::ContextBundle, tonic::Status> {
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        budget_tokens: budget,
        encoding: encoding as i32,
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().bundle.expect("bundle"))
}

fn reference_count(encoding: pb::Encoding, text: &str) -> usize {
    static CL100K: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    static O200K: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    let bpe = match encoding {
        pb::Encoding::O200kBase => O200K.get_or_init(|| tiktoken_rs::o200k_base().unwrap()),
        _ => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().unwrap()),
    };
    bpe.encode_ordinary(text).len()
}

/// Every seq 1..=as_of is summarized, included, shortened or omitted.
fn assert_no_gap(b: &pb::ContextBundle) {
    let m = b.manifest.as_ref().expect("manifest");
    let mut seen = BTreeSet::new();
    if let Some(r) = &m.summarized {
        seen.extend(r.first_seq..=r.last_seq);
    }
    for e in &m.sections {
        for r in e
            .included_seqs
            .iter()
            .chain(&e.shortened_seqs)
            .chain(&e.omitted_seqs)
        {
            seen.extend(r.first_seq..=r.last_seq);
        }
    }
    for seq in 1..=b.as_of_seq {
        assert!(
            seen.contains(&seq),
            "turn {seq} is unaccounted for in {m:?}"
        );
    }
    // Structured turns are what the text shows: a transcript bundle
    // shows them in order under its one-line header, others cite seqs.
    let mut at = 0;
    for t in &b.recent_turns {
        if m.transcript {
            let found = b.rendered_text[at..].find(t.content.as_str());
            assert!(found.is_some(), "turn {} missing or out of order", t.seq);
            at += found.unwrap_or(0);
        } else {
            assert!(b.rendered_text.contains(&format!("[#{}]", t.seq)));
        }
    }
    for t in &b.earlier_turns {
        assert!(b.rendered_text.contains(&format!("[#{}]", t.seq)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_never_exceed_the_budget_and_account_for_every_turn() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut checked = 0;
    for s in 0..24 {
        let id = format!("prop-{s}");
        c.create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: id.clone(),
            subject_id: "user:prop".into(),
            settings: Some(pb::SessionSettings {
                summary_every_turns: 5 + rng.below(30) as u32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
        let n = rng.below(160);
        let mut turns: Vec<pb::NewTurn> = (0..n).map(|_| random_turn(&mut rng)).collect();
        while !turns.is_empty() {
            let k = turns.len().min(1 + rng.below(40) as usize);
            let batch: Vec<_> = turns.drain(..k).collect();
            c.append_turns(append_req("ns", &id, batch)).await.unwrap();
        }
        if rng.below(2) == 0 && n > 0 {
            c.summarize(pb::SummarizeRequest {
                namespace: "ns".into(),
                session_id: id.clone(),
                wait: true,
            })
            .await
            .unwrap();
        }
        for _ in 0..5 {
            let budget = match rng.below(4) {
                0 => 256 + rng.below(64) as u32,
                1 => 256 + rng.below(1500) as u32,
                2 => 2000 + rng.below(10_000) as u32,
                _ => 40_000,
            };
            let encoding = if rng.below(3) == 0 {
                pb::Encoding::O200kBase
            } else {
                pb::Encoding::Unspecified
            };
            let b = bundle(&mut c, &id, budget, encoding).await.unwrap();
            let measured = reference_count(encoding, &b.rendered_text);
            assert_eq!(
                measured, b.token_count as usize,
                "token_count is the real count"
            );
            assert!(
                measured <= budget as usize,
                "session {id}: {measured} tokens over a budget of {budget}"
            );
            assert_eq!(b.as_of_seq, n);
            assert_no_gap(&b);
            assert_offsets(&b);
            let m = b.manifest.as_ref().unwrap();
            let cut = m.sections.iter().any(|e| e.shortened > 0 || e.omitted > 0);
            assert_eq!(m.complete, !cut);
            assert_eq!(
                b.rendered_text.contains("Note: to fit"),
                cut,
                "{}",
                b.rendered_text
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 120);
    server.stop().await;
}

fn qa_pair(i: usize) -> Vec<pb::NewTurn> {
    let question = format!(
        "Question {i}: {} what should I do?",
        "I have a long preamble about my account history ".repeat(4)
    );
    let answer = if i % 2 == 0 {
        format!("Short answer {i}.")
    } else {
        format!(
            "First sentence of answer {i}. {}",
            "Then a lot more detail follows here. ".repeat(6)
        )
    };
    vec![
        pb::NewTurn {
            role: pb::Role::User as i32,
            speaker: "user:1".into(),
            content: question,
            ..Default::default()
        },
        pb::NewTurn {
            role: pb::Role::Assistant as i32,
            speaker: "agent".into(),
            content: answer,
            ..Default::default()
        },
    ]
}

async fn qa_session(c: &mut Client, id: &str, pairs: usize) {
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        // No automatic summary: every turn stays unsummarized.
        settings: Some(pb::SessionSettings {
            summary_every_turns: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..pairs {
        c.append_turns(append_req("ns", id, qa_pair(i)))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_question_answer_pairs_are_shortened_after_the_last_eight() {
    let server = TestServer::start().await;
    let mut c = server.client().await;

    // Eight interactions, and the whole session fits: its transcript.
    qa_session(&mut c, "eight", 8).await;
    let b = bundle(&mut c, "eight", 100_000, pb::Encoding::Unspecified)
        .await
        .unwrap();
    assert!(b.manifest.as_ref().unwrap().transcript);
    assert_eq!(b.recent_turns.len(), 16);
    assert!(b.earlier_turns.is_empty());
    assert!(!b.rendered_text.contains("Earlier conversation summary:"));
    assert!(b.manifest.unwrap().complete);
    assert!(!b.rendered_text.contains("Note: to fit"));

    // Twenty, at a budget just short of the whole transcript: the newest
    // turns whole, the ones before them shortened, in two blocks of the log.
    qa_session(&mut c, "twenty", 20).await;
    let session = c
        .get_session(pb::GetSessionRequest {
            namespace: "ns".into(),
            session_id: "twenty".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let tight = (session.total_tokens + 40 * 6) as u32;
    let b = bundle(&mut c, "twenty", tight, pb::Encoding::Unspecified)
        .await
        .unwrap();
    assert!(!b.manifest.as_ref().unwrap().transcript);
    let recent: Vec<u64> = b.recent_turns.iter().map(|t| t.seq).collect();
    let earlier: Vec<u64> = b.earlier_turns.iter().map(|t| t.seq).collect();
    // The verbatim block starts at a question and runs to the newest turn;
    // the shortened block runs up to it.
    let first = recent[0];
    assert!(first % 2 == 1 && recent.len() >= 4, "{recent:?}");
    assert_eq!(recent, (first..=40).collect::<Vec<_>>());
    assert_eq!(earlier.last(), Some(&(first - 1)), "{earlier:?}");
    let e0 = earlier[0];
    assert_eq!(earlier, (e0..first).collect::<Vec<_>>());
    let text = &b.rendered_text;
    assert!(text.contains("Earlier conversation summary:"));
    assert!(text.contains("Note: to fit"), "shortening is announced");
    // Q&A compression: a question keeps 150 characters; a short answer
    // stays whole; a long one keeps its first sentence.
    let q = b.earlier_turns.iter().find(|t| t.seq % 2 == 1).unwrap();
    let original = qa_pair(((q.seq - 1) / 2) as usize);
    let expected: String = original[0].content.chars().take(150).collect();
    assert_eq!(q.text, format!("{expected}..."));
    assert!(q.shortened);
    for a in b.earlier_turns.iter().filter(|t| t.seq % 2 == 0) {
        let i = (a.seq / 2 - 1) as usize;
        if i % 2 == 0 {
            assert_eq!(a.text, format!("Short answer {i}."));
            assert!(!a.shortened);
        } else {
            assert_eq!(a.text, format!("First sentence of answer {i}."));
            assert!(a.shortened);
            assert!(!text.contains(&format!("First sentence of answer {i}. Then")));
        }
    }
    // The recent pairs are verbatim in the text.
    for t in &b.recent_turns {
        assert!(text.contains(&t.content));
    }
    assert_no_gap(&b);

    // recent_interactions no longer moves the verbatim block (the block
    // rule does, so that successive bundles share their beginning).
    let b2 = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "twenty".into(),
            budget_tokens: tight,
            recent_interactions: 12,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert_eq!(b2.rendered_text, b.rendered_text);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_budget_keeps_the_newest_turns_and_lists_the_rest() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    qa_session(&mut c, "qa", 60).await;
    let b = bundle(&mut c, "qa", 300, pb::Encoding::Unspecified)
        .await
        .unwrap();
    assert!(b.token_count <= 300);
    assert!(b.rendered_text.contains("Note: to fit 300 tokens"));
    let m = b.manifest.clone().unwrap();
    assert!(!m.complete);
    // The newest turn is kept whole.
    assert_eq!(b.recent_turns.last().map(|t| t.seq), Some(120));
    // The newest interaction is the whole verbatim block.
    let recent = m
        .sections
        .iter()
        .find(|e| e.section == pb::BundleSection::RecentTurns as i32)
        .expect("recent section");
    assert!(recent.included >= 1 && recent.omitted == 0);
    let earlier = m
        .sections
        .iter()
        .find(|e| e.section == pb::BundleSection::EarlierTurns as i32)
        .expect("earlier section");
    assert!(earlier.omitted > 0);
    assert_no_gap(&b);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_is_never_stale_and_uses_the_summary() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let turns = vec![
        pb::NewTurn {
            role: pb::Role::User as i32,
            speaker: "customer".into(),
            content:
                "I was charged twice for order ORD-1234, $49.99 each time. Can you refund one?"
                    .into(),
            ..Default::default()
        },
        pb::NewTurn {
            role: pb::Role::Assistant as i32,
            speaker: "agent-a".into(),
            content: "I will refund $49.99 for ORD-1234 by Friday.".into(),
            ..Default::default()
        },
    ];
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        wait: true,
    })
    .await
    .unwrap();
    c.append_turns(append_req(
        "ns",
        "s",
        vec![user_turn("Also, is my address still 1 Main St?")],
    ))
    .await
    .unwrap();
    let b = bundle(&mut c, "s", 4000, pb::Encoding::Unspecified)
        .await
        .unwrap();
    assert_eq!(b.as_of_seq, 3);
    let m = b.manifest.clone().unwrap();
    assert_eq!(m.summary_version, 1);
    assert_eq!(
        m.summarized,
        Some(pb::SeqRange {
            first_seq: 1,
            last_seq: 2
        })
    );
    assert!(b
        .pending_actions
        .iter()
        .any(|a| a.action.contains("ORD-1234") && a.action.contains("$49.99")));
    assert!(b.rendered_text.contains("## Pending actions"));
    // The turn after the summary is there, verbatim.
    assert!(b
        .recent_turns
        .iter()
        .any(|t| t.seq == 3 && t.content.contains("1 Main St")));
    assert!(b.rendered_text.contains("1 Main St"));
    assert_no_gap(&b);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bundle_requests_get_clear_errors() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let err = bundle(&mut c, "nope", 1000, pb::Encoding::Unspecified)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    for budget in [0, 255, 1_000_001] {
        let err = bundle(&mut c, "s", budget, pb::Encoding::Unspecified)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{budget}");
        assert!(
            err.message().contains("256") && err.message().contains("1000000"),
            "{}",
            err.message()
        );
    }
    let err = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            budget_tokens: 1000,
            recent_interactions: 5000,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            budget_tokens: 1000,
            encoding: 99,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    // An empty session still gets a (tiny) bundle.
    let b = bundle(&mut c, "s", 256, pb::Encoding::Unspecified)
        .await
        .unwrap();
    assert_eq!(b.as_of_seq, 0);
    assert!(b.rendered_text.starts_with("# Context bundle: session s"));
    assert!(b.manifest.unwrap().complete);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_budget_still_fits_one_response_message() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.max_message_bytes = 1 << 20;
    config.limits.max_turn_bytes = 512 << 10;
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "big").await;
    // 20 turns of 100 KB: about 2 MB of text, far under a 1,000,000-token
    // budget but twice the message limit.
    for i in 0..20 {
        let text = format!("turn {i}: {}", "lorem ipsum dolor sit amet ".repeat(3800));
        c.append_turns(append_req("ns", "big", vec![user_turn(&text)]))
            .await
            .unwrap();
    }
    let b = bundle(&mut c, "big", 1_000_000, pb::Encoding::Unspecified)
        .await
        .expect("the bundle fits one message");
    assert!(
        b.rendered_text.len() <= (1 << 20) / 3,
        "{}",
        b.rendered_text.len()
    );
    assert!(!b.manifest.as_ref().unwrap().complete);
    assert!(b.rendered_text.contains("Note: to fit"));
    assert_eq!(
        b.recent_turns.last().map(|t| t.seq),
        Some(20),
        "newest kept"
    );
    assert_no_gap(&b);
    server.stop().await;
}

// ---- Layout for prompt caches: stable part, log, request's part ----

/// The text of a bundle up to a byte offset.
fn upto(b: &pb::ContextBundle, bytes: u32) -> &str {
    &b.rendered_text[..bytes as usize]
}

/// The offsets are exact: counting the text up to each gives its count.
fn assert_offsets(b: &pb::ContextBundle) {
    let enc = pb::Encoding::try_from(b.encoding).unwrap_or(pb::Encoding::Cl100kBase);
    assert!(b.stable_end_bytes <= b.log_end_bytes);
    assert!(b.log_end_bytes as usize <= b.rendered_text.len());
    assert_eq!(
        reference_count(enc, upto(b, b.stable_end_bytes)),
        b.stable_end_tokens as usize,
        "stable part offset in\n{}",
        b.rendered_text
    );
    assert_eq!(
        reference_count(enc, upto(b, b.log_end_bytes)),
        b.log_end_tokens as usize,
        "log offset in\n{}",
        b.rendered_text
    );
    assert!(b.stable_end_tokens <= b.log_end_tokens && b.log_end_tokens <= b.token_count);
    // What a request decides is in the third part only.
    let head = upto(b, b.log_end_bytes);
    assert!(!head.contains("Prepared for agent"), "{head}");
    assert!(!head.contains("Note: to fit"), "{head}");
    assert!(!head.contains("## Relevant memory"), "{head}");
    assert!(!head.contains("As of turn"), "{head}");
}

async fn layout_session(c: &mut Client, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        subject_id: subject.into(),
        settings: Some(pb::SessionSettings {
            // Folds only when asked, and nothing extracted behind the
            // test's back: what changes part 1 is what the test does.
            summary_every_turns: 10_000,
            fact_extraction: pb::FactExtraction::Disabled as i32,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
}

async fn fold(c: &mut Client, id: &str) {
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .unwrap();
}

async fn bundle_for(
    c: &mut Client,
    id: &str,
    budget: u32,
    query: &str,
    agent: &str,
) -> pb::ContextBundle {
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        budget_tokens: budget,
        query: query.into(),
        agent_id: agent.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .bundle
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successive_bundles_share_their_beginning_and_only_a_fold_or_a_fact_changes_it() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    layout_session(&mut c, "cache", "user:cache").await;
    for i in 0..20 {
        c.append_turns(append_req("ns", "cache", qa_pair(i)))
            .await
            .unwrap();
    }
    fold(&mut c, "cache").await;
    for i in 20..23 {
        c.append_turns(append_req("ns", "cache", qa_pair(i)))
            .await
            .unwrap();
    }
    let budget = 1500;
    let b1 = bundle_for(&mut c, "cache", budget, "", "").await;
    assert!(
        !b1.manifest.as_ref().unwrap().transcript,
        "{}",
        b1.rendered_text
    );
    assert_offsets(&b1);
    assert!(b1.stable_end_tokens > 0 && b1.log_end_tokens > b1.stable_end_tokens);
    assert!(upto(&b1, b1.stable_end_bytes).contains("## Summary"));

    // An append: part 1 byte for byte, part 2 up to the new exchange.
    let pair = qa_pair(23);
    c.append_turns(append_req("ns", "cache", pair.clone()))
        .await
        .unwrap();
    let b2 = bundle_for(&mut c, "cache", budget, "", "").await;
    assert_offsets(&b2);
    assert_eq!(b2.stable_end_bytes, b1.stable_end_bytes);
    assert_eq!(b2.stable_end_tokens, b1.stable_end_tokens);
    assert_eq!(
        upto(&b2, b2.stable_end_bytes),
        upto(&b1, b1.stable_end_bytes)
    );
    assert!(
        b2.rendered_text.starts_with(upto(&b1, b1.log_end_bytes)),
        "before:\n{}\nafter:\n{}",
        b1.rendered_text,
        b2.rendered_text
    );
    let appended = &b2.rendered_text[b1.log_end_bytes as usize..b2.log_end_bytes as usize];
    assert!(
        appended.starts_with("[#47] user user:1: Question 23"),
        "{appended}"
    );
    assert!(appended.contains(&pair[1].content), "{appended}");
    assert_no_gap(&b2);

    // Another reader changes only the third part.
    let b3 = bundle_for(&mut c, "cache", budget, "", "agent-x").await;
    assert_offsets(&b3);
    assert_eq!(upto(&b3, b3.log_end_bytes), upto(&b2, b2.log_end_bytes));
    assert!(b3.rendered_text[b3.log_end_bytes as usize..].contains("Prepared for agent agent-x."));
    // A query gives its retrieved memory room in a few fixed steps (the
    // stable part and the log give way): two similar requests choose the
    // same step and share both parts; only the third differs.
    let q1 = bundle_for(&mut c, "cache", budget, "answer 3 detail", "").await;
    let q2 = bundle_for(&mut c, "cache", budget, "answer 5 detail", "").await;
    assert_offsets(&q1);
    assert_offsets(&q2);
    assert_eq!(upto(&q1, q1.log_end_bytes), upto(&q2, q2.log_end_bytes));
    assert!(q1.rendered_text[q1.log_end_bytes as usize..].contains("## Relevant memory"));
    assert_ne!(
        q1.rendered_text[q1.log_end_bytes as usize..],
        q2.rendered_text[q2.log_end_bytes as usize..]
    );
    // The step follows the query, not what it found: a message that
    // retrieves nothing keeps the request's layout, so an agent passing
    // every message as the query keeps its cached beginning.
    let q3 = bundle_for(&mut c, "cache", budget, "zyzzyva quokka", "").await;
    assert_offsets(&q3);
    assert!(!q3.rendered_text.contains("## Relevant memory"));
    assert_eq!(upto(&q3, q3.log_end_bytes), upto(&q1, q1.log_end_bytes));
    // The manifest names the layout each was packed with.
    let layout = |b: &pb::ContextBundle| b.manifest.as_ref().unwrap().layout();
    assert_eq!(layout(&b2), pb::BundleLayout::State);
    assert_eq!(layout(&q1), pb::BundleLayout::Request);
    assert_eq!(layout(&q3), pb::BundleLayout::Request);

    // A fold changes part 1 (here, with a new pending action) and starts
    // the log afresh.
    c.append_turns(append_req(
        "ns",
        "cache",
        vec![turn(
            pb::Role::Assistant,
            "agent",
            "I will send the refund for ORD-4411 by 2026-12-10.",
        )],
    ))
    .await
    .unwrap();
    fold(&mut c, "cache").await;
    let b4 = bundle_for(&mut c, "cache", budget, "", "").await;
    assert_offsets(&b4);
    assert_ne!(
        upto(&b4, b4.stable_end_bytes),
        upto(&b2, b2.stable_end_bytes)
    );
    assert!(
        upto(&b4, b4.stable_end_bytes).contains("ORD-4411"),
        "{}",
        b4.rendered_text
    );
    assert!(upto(&b4, b4.log_end_bytes).contains("turns 1–49 are summarized above"));
    // ...and so does a new fact of the subject, which part 1 then shows.
    c.put_fact(pb::PutFactRequest {
        namespace: "ns".into(),
        subject_id: "user:cache".into(),
        key: "plan".into(),
        text: "The customer is on the gold plan.".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let b5 = bundle_for(&mut c, "cache", budget, "", "").await;
    assert_offsets(&b5);
    assert_ne!(
        upto(&b5, b5.stable_end_bytes),
        upto(&b4, b4.stable_end_bytes)
    );
    assert!(upto(&b5, b5.stable_end_bytes).contains("gold plan"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_cut_in_rare_big_steps_and_keeps_the_newest_interaction() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    layout_session(&mut c, "long", "").await;
    let budget = 1500;
    let mut prev: Option<pb::ContextBundle> = None;
    let (mut pairs, mut changes) = (0, 0);
    for i in 0..40 {
        c.append_turns(append_req("ns", "long", qa_pair(i)))
            .await
            .unwrap();
        let b = bundle_for(&mut c, "long", budget, "", "").await;
        assert_offsets(&b);
        assert_no_gap(&b);
        assert!(b.token_count <= budget);
        // The newest interaction is always in, verbatim.
        let newest = qa_pair(i);
        assert!(
            b.rendered_text.contains(&newest[0].content),
            "{}",
            b.rendered_text
        );
        if let Some(p) = &prev {
            if !b.rendered_text.starts_with(upto(p, p.log_end_bytes)) {
                changes += 1;
            }
            pairs += 1;
        }
        prev = Some(b);
    }
    let last = prev.unwrap();
    assert!(
        !last.manifest.as_ref().unwrap().complete,
        "the budget cut something"
    );
    // The log's start moved, but in blocks: most appends only append.
    assert!(changes > 0, "the start never moved");
    assert!(
        changes * 3 <= pairs,
        "{changes} changes of the log in {pairs} appends"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_keeps_the_exchange_a_fold_ended_on_and_only_appends_after_it() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    layout_session(&mut c, "tail", "").await;
    for i in 0..30 {
        c.append_turns(append_req("ns", "tail", qa_pair(i)))
            .await
            .unwrap();
    }
    // The fold covers the newest exchange: the log still shows it.
    fold(&mut c, "tail").await;
    let budget = 1500;
    let b1 = bundle_for(&mut c, "tail", budget, "", "").await;
    assert_offsets(&b1);
    assert_no_gap(&b1);
    let log1 = &b1.rendered_text[b1.stable_end_bytes as usize..b1.log_end_bytes as usize];
    assert!(log1.contains("turns 1–60 are summarized above"), "{log1}");
    assert!(log1.contains("[#59] user user:1: Question 29"), "{log1}");
    // The next exchanges only append to it: the first one after a fold
    // does not drop the exchange the fold ended on.
    let mut prev = b1;
    for i in 30..33 {
        c.append_turns(append_req("ns", "tail", qa_pair(i)))
            .await
            .unwrap();
        let b = bundle_for(&mut c, "tail", budget, "", "").await;
        assert_offsets(&b);
        assert_no_gap(&b);
        assert!(
            b.rendered_text.starts_with(upto(&prev, prev.log_end_bytes)),
            "before:\n{}\nafter:\n{}",
            prev.rendered_text,
            b.rendered_text
        );
        prev = b;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_never_folded_is_read_within_a_window() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // 400 turns and no summary: a bundle reads the newest 33-64 of them
    // (a window of 64 at this budget, moving by half), never all.
    qa_session(&mut c, "unfolded", 200).await;
    let b = bundle_for(&mut c, "unfolded", 1024, "", "").await;
    assert_no_gap(&b);
    let m = b.manifest.as_ref().unwrap();
    let first_omitted = m
        .sections
        .iter()
        .flat_map(|e| &e.omitted_seqs)
        .map(|r| (r.first_seq, r.last_seq))
        .min()
        .expect("older turns are left out");
    assert_eq!(first_omitted.0, 1);
    assert!(
        (400 - 64..=400 - 33).contains(&first_omitted.1),
        "turns 1–{} not read",
        first_omitted.1
    );
    assert!(b.rendered_text.contains("Question 199"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_set_between_folds_is_an_appended_line() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    layout_session(&mut c, "acts", "").await;
    c.append_turns(append_req(
        "ns",
        "acts",
        vec![
            turn(
                pb::Role::User,
                "customer",
                "My invoice INV-5521 is wrong, it says $120.00 instead of $100.00.",
            ),
            turn(
                pb::Role::Assistant,
                "agent-a",
                "I will send the corrected invoice INV-5521 by 2026-12-10.",
            ),
        ],
    ))
    .await
    .unwrap();
    fold(&mut c, "acts").await;
    // Enough turns after the fold that the session is no transcript.
    for i in 0..20 {
        c.append_turns(append_req("ns", "acts", qa_pair(i)))
            .await
            .unwrap();
    }
    let b1 = bundle_for(&mut c, "acts", 1200, "", "").await;
    assert!(!b1.manifest.as_ref().unwrap().transcript);
    let action = b1
        .pending_actions
        .iter()
        .find(|a| a.action.contains("INV-5521"))
        .unwrap_or_else(|| panic!("{}", b1.rendered_text))
        .clone();
    c.update_pending_action(pb::UpdatePendingActionRequest {
        namespace: "ns".into(),
        r#ref: Some(pb::PendingActionRef {
            session_id: "acts".into(),
            action_seq: action.evidence_seqs[0],
        }),
        status: pb::ActionStatus::Done as i32,
    })
    .await
    .unwrap();
    let b2 = bundle_for(&mut c, "acts", 1200, "", "").await;
    assert_offsets(&b2);
    assert_eq!(
        upto(&b2, b2.stable_end_bytes),
        upto(&b1, b1.stable_end_bytes)
    );
    assert!(b2.rendered_text.starts_with(upto(&b1, b1.log_end_bytes)));
    let log = &b2.rendered_text[b1.log_end_bytes as usize..b2.log_end_bytes as usize];
    assert!(log.contains("is now done"), "{}", b2.rendered_text);
    // The structured copy says how things stand now: not pending any more.
    assert!(
        b2.pending_actions
            .iter()
            .all(|a| !a.action.contains("INV-5521")),
        "{:?}",
        b2.pending_actions
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_and_resumed_session_bundles_follow_the_layout() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // A session of a subject, closed with an unfinished action and a fact.
    layout_session(&mut c, "visit-1", "cust-7").await;
    c.append_turns(append_req(
        "ns",
        "visit-1",
        vec![
            user_turn("Hi, my charger for order ORD-77120 stopped working."),
            turn(
                pb::Role::Assistant,
                "agent-a",
                "Sorry about that. I will ship a replacement charger for ORD-77120 by 2026-12-20.",
            ),
        ],
    ))
    .await
    .unwrap();
    c.put_fact(pb::PutFactRequest {
        namespace: "ns".into(),
        subject_id: "cust-7".into(),
        key: "language".into(),
        text: "Prefers Portuguese.".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: "ns".into(),
        session_id: "visit-1".into(),
    })
    .await
    .unwrap();
    episodes_until(&mut c, "ns", "cust-7", 1).await;

    // The resumed subject's next session: its memory is part 1.
    layout_session(&mut c, "visit-2", "cust-7").await;
    for i in 0..14 {
        c.append_turns(append_req("ns", "visit-2", qa_pair(i)))
            .await
            .unwrap();
    }
    let b = bundle_for(&mut c, "visit-2", 800, "", "").await;
    assert!(!b.manifest.as_ref().unwrap().transcript);
    assert_offsets(&b);
    let stable = upto(&b, b.stable_end_bytes);
    assert!(
        stable.contains("Prefers Portuguese."),
        "{}",
        b.rendered_text
    );
    assert!(
        stable.contains("## Earlier sessions"),
        "{}",
        b.rendered_text
    );
    c.append_turns(append_req("ns", "visit-2", qa_pair(14)))
        .await
        .unwrap();
    let b2 = bundle_for(&mut c, "visit-2", 800, "", "").await;
    assert!(b2.rendered_text.starts_with(upto(&b, b.log_end_bytes)));

    // A handoff's bundle: the same layout, the new owner in part 1 (a
    // handoff folds), the reader in part 3.
    let h = c
        .handoff(pb::HandoffRequest {
            namespace: "ns".into(),
            session_id: "visit-2".into(),
            from_agent: "agent-a".into(),
            to_agent: "agent-b".into(),
            reason: "shift change".into(),
            lease_epoch: b2.lease_epoch,
            budget_tokens: 800,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let hb = h.bundle.unwrap();
    assert_offsets(&hb);
    assert!(upto(&hb, hb.stable_end_bytes).contains("owner agent agent-b"));
    assert!(hb.rendered_text[hb.log_end_bytes as usize..].contains("Prepared for agent agent-b."));
    // The next bundle after the handoff shares its beginning.
    let after = bundle_for(&mut c, "visit-2", 800, "", "agent-b").await;
    assert_eq!(
        upto(&after, after.log_end_bytes),
        upto(&hb, hb.log_end_bytes)
    );
    server.stop().await;
}
