//! What a model-backed fold costs mnemo itself, beside a rule-based fold in
//! the same run: the model is a scripted OpenAI-compatible server on
//! 127.0.0.1 that answers at once, so the difference is mnemo's own work
//! (prompt, redaction, HTTP round trip, JSON parsing, restoring), not the
//! model's. Folds 10 new turns of a support chat onto a 40-turn session
//! state, interleaved, `MNEMO_BENCH_FOLDS` times each (default 200).
//!
//! Run: `cargo bench --bench model_fold`. Prints a Markdown table.

use std::time::{Duration, Instant};

use axum::routing::post;
use mnemo::config::{ModelConfig, SummarizerKind};
use mnemo::llm::ModelSummarizer;
use mnemo::model::{FoldRecord, Role, Trigger, Turn};
use mnemo::summarize::{RuleBased, Summarizer, SummaryContext};

fn turns(from: u64, n: u64) -> Vec<Turn> {
    (from..from + n)
        .map(|seq| Turn {
            seq,
            role: if seq % 2 == 1 { Role::User } else { Role::Assistant },
            speaker: if seq % 2 == 1 { "cust-1".into() } else { "agent-a".into() },
            content: if seq % 2 == 1 {
                format!("Order ORD-{seq} arrived damaged; write to me at jane{seq}@example.com or call +1 415-555-01{:02}.", seq % 100)
            } else {
                format!("I'll send a replacement for ORD-{seq} by Friday and refund the shipping of $4.{:02}.", seq % 100)
            },
            client_time: None,
            server_time: 1_764_000_000_000_000_000 + seq as i64 * 60_000_000_000,
            tool_call: None,
            metadata: Default::default(),
            token_count: 30,
        })
        .collect()
}

fn ctx() -> SummaryContext {
    SummaryContext {
        namespace: "bench".into(),
        context_limit_tokens: 128_000,
        bundle_tokens: 0,
        trigger: Trigger::EveryNTurns,
        version: 2,
        // The run's start: the model's time budget counts from it.
        now: mnemo::model::now_nanos(),
        high_risk: false,
        wait_free: false,
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let folds: usize = std::env::var("MNEMO_BENCH_FOLDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let answer = serde_json::json!({
        "user_intent": "Order arrived damaged", "user_intent_turn": 41,
        "decisions": [], "open_questions": [], "key_facts": [], "conflicts": [],
        "pending_actions": [{"action": "send a replacement", "owner": "agent-a", "deadline": "", "turns": [42]}],
        "prose": "The customer's order arrived damaged; agent-a will send a replacement."
    })
    .to_string();
    let reply = serde_json::json!({
        "id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
    .to_string();
    let url = rt.block_on(async move {
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(move || {
                let r = reply.clone();
                async move { ([("content-type", "application/json")], r) }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        format!("http://{addr}")
    });
    let config = ModelConfig {
        summarizer: SummarizerKind::Model,
        url,
        name: "scripted".into(),
        ..ModelConfig::default()
    };
    let model = ModelSummarizer::new(&config, rt.handle().clone()).unwrap();
    let rules = RuleBased;
    let ctx = ctx();
    // A 40-turn session already folded by each, then 10 new turns.
    let base = |s: &dyn Summarizer| FoldRecord {
        summarizer: s.name().into(),
        format: s.format(),
        state: s.fold(None, &turns(1, 40), &ctx).unwrap().state,
        through_seq: 40,
        ..FoldRecord::default()
    };
    let (rules_base, model_base) = (base(&rules), base(&model));
    let new = turns(41, 10);
    let (mut r, mut m) = (Vec::with_capacity(folds), Vec::with_capacity(folds));
    for i in 0..folds + 10 {
        let t = Instant::now();
        std::hint::black_box(rules.fold(Some(&rules_base), &new, &ctx).unwrap());
        let rules_took = t.elapsed();
        let t = Instant::now();
        // Each fold is a run of its own (its time budget starts now).
        let run = self::ctx();
        let out = model.fold(Some(&model_base), &new, &run).unwrap();
        let model_took = t.elapsed();
        // `model:scripted+rules`: the rules' floor kept what the scripted
        // answer leaves out (part of the cost measured).
        assert!(
            out.label
                .as_deref()
                .is_some_and(|l| l.starts_with("model:scripted")),
            "the model fold fell back: {:?}",
            out.label
        );
        if i >= 10 {
            r.push(rules_took);
            m.push(model_took);
        }
    }
    let (r50, r99, m50, m99) = (
        percentile(&mut r, 0.5),
        percentile(&mut r, 0.99),
        percentile(&mut m, 0.5),
        percentile(&mut m, 0.99),
    );
    println!("| fold of 10 turns onto 40 ({folds} each, interleaved) | p50 | p99 |");
    println!("|---|---:|---:|");
    println!(
        "| rules | {:.0} µs | {:.0} µs |",
        r50.as_secs_f64() * 1e6,
        r99.as_secs_f64() * 1e6
    );
    println!(
        "| model (scripted server, instant answers) | {:.0} µs | {:.0} µs |",
        m50.as_secs_f64() * 1e6,
        m99.as_secs_f64() * 1e6
    );
    println!(
        "| mnemo's own added cost of a model fold | {:.0} µs ({:.2}×) | {:.0} µs |",
        (m50.as_secs_f64() - r50.as_secs_f64()) * 1e6,
        m50.as_secs_f64() / r50.as_secs_f64(),
        (m99.as_secs_f64() - r99.as_secs_f64()) * 1e6
    );
}
