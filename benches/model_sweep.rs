//! Model-backed summaries of real dev conversations against a real
//! OpenAI-compatible server with a real model (llama.cpp's server through
//! `llama-cpp-python`, small GGUF models), beside the rules' summary of the
//! same turns in the same run. Each conversation's first
//! `MNEMO_MODEL_SWEEP_TURNS` turns (default 24) are folded through the
//! real pipeline (`memory::summary::run`: fold, floor, validate, store) on
//! an in-process store, once with the rules and once with the model.
//!
//! Per model and corpus it prints: summaries, what was stored (the
//! model's own, merged with the rules' floor, or the rules' after a
//! fallback), summaries with fewer evidenced items than the rules' (the
//! target is 0), model calls (and the most in one summary), calls cut off
//! at `max_tokens` (each answered by sending the turns again in halves),
//! failed calls (no HTTP 200: time-outs, refusals; each retried at most
//! once), prompt and completion tokens per
//! summary, the most completion tokens of one call beside `max_tokens`,
//! seconds per summary (p50 / max), and the server's peak resident memory.
//! The fallback reasons follow the table.
//!
//! Needs `MNEMO_LLAMA_PYTHON` (a python with `llama_cpp.server`) and
//! `MNEMO_LLAMA_MODELS` (`name=path.gguf[:nosystem]`, comma separated), as
//! `tests/model_real.rs`; corpora as `summary_sweep` (`MNEMO_SWEEP_SETS`);
//! `MNEMO_MODEL_SWEEP_PER_SET` conversations per corpus (default: all),
//! `MNEMO_MODEL_MAX_TOKENS` (default 128), `MNEMO_MODEL_TIMEOUT_SECS` (one
//! call's limit, default 180; the retry budget is twice it) and
//! `MNEMO_LLAMA_THREADS` (default 2). Run: `cargo bench --bench model_sweep`.

#[path = "common/corpus.rs"]
mod corpus;
// The tests' support: its llama.cpp server launcher (process group, log).
#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use common::llama::{models, LlamaServer};

use mnemo::config::{ModelConfig, SummarizerKind, SummaryConfig};
use mnemo::llm::ModelSummarizer;
use mnemo::memory::summary::{run, Attempt};
use mnemo::model::{ActionStatus, SessionSummary, Trigger};
use mnemo::store::{MemoryStore, SummaryStore};
use mnemo::summarize::{RuleBased, Summarizer};

const NS: &str = "model-sweep";

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Evidenced items per kind: decisions, open pending actions, open
/// questions, errors, tool calls.
fn evidenced(s: &SessionSummary) -> [usize; 5] {
    [
        s.decisions
            .iter()
            .filter(|d| !d.evidence_seqs.is_empty())
            .count(),
        s.pending_actions
            .iter()
            .filter(|a| a.status != ActionStatus::Done && !a.evidence_seqs.is_empty())
            .count(),
        s.open_questions
            .iter()
            .filter(|q| !q.evidence_seqs.is_empty())
            .count(),
        s.errors_and_anomalies.len(),
        s.tool_calls.len(),
    ]
}

/// Folds the session of `store` with `summarizer`; the stored summary, or
/// why there is none.
fn fold(
    store: &MemoryStore,
    summarizer: &dyn Summarizer,
    id: &str,
) -> Result<SessionSummary, String> {
    let cfg = SummaryConfig::default();
    match run(
        store,
        summarizer,
        &cfg,
        (NS, id),
        Trigger::Requested,
        true,
        false,
    ) {
        Ok(Attempt::Stored(s)) => Ok(*s),
        Ok(Attempt::Refused(e)) => Err(format!("refused: {}", e.join("; "))),
        Ok(Attempt::Unchanged) => Err("unchanged".into()),
        Err(e) => Err(format!("error: {e}")),
    }
}

/// The figure `key=` in a call record.
fn figure(flag: &str, key: &str) -> u64 {
    flag.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Row {
    summaries: usize,
    model: usize,
    merged: usize,
    rules: usize,
    failed: usize,
    fewer: usize,
    calls: u64,
    cut_off: u64,
    failed_calls: u64,
    most_calls: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    most_completion: u64,
    max_tokens: u64,
    seconds: Vec<f64>,
    why: BTreeMap<String, usize>,
}

fn sweep_one(c: &corpus::Conversation, model: &ModelSummarizer, window: usize, row: &mut Row) {
    let turns = &c.turns[..c.turns.len().min(window)];
    let floor = fold(&corpus::session_with(NS, &c.id, turns), &RuleBased, &c.id);
    let store = corpus::session_with(NS, &c.id, turns);
    let started = Instant::now();
    let got = fold(&store, model, &c.id);
    row.seconds.push(started.elapsed().as_secs_f64());
    row.summaries += 1;
    let audit = store
        .list_audit(NS, &c.id, 0, 16)
        .expect("audit")
        .pop()
        .expect("an audit record");
    let calls: Vec<&String> = audit
        .health_flags
        .iter()
        .filter(|f| f.starts_with("model call:"))
        .collect();
    let n = calls.len() as u64;
    row.calls += n;
    row.cut_off += calls.iter().filter(|f| f.contains("finish=length")).count() as u64;
    row.failed_calls += calls.iter().filter(|f| !f.contains("status=200")).count() as u64;
    row.most_calls = row.most_calls.max(n);
    for f in &calls {
        row.prompt_tokens += figure(f, "prompt_tokens=");
        let completion = figure(f, "completion_tokens=");
        row.completion_tokens += completion;
        row.most_completion = row.most_completion.max(completion);
        row.max_tokens = row.max_tokens.max(figure(f, "max_tokens="));
    }
    let (s, floor) = match (got, floor) {
        (Ok(s), Ok(f)) => (s, f),
        (got, floor) => {
            row.failed += 1;
            let why = format!(
                "no summary to compare: model {:?}, rules {:?}",
                got.err(),
                floor.err()
            );
            *row.why.entry(why).or_default() += 1;
            return;
        }
    };
    if audit.summarizer.starts_with("mnemo-rules") {
        row.rules += 1;
    } else if audit.summarizer.ends_with("+rules") {
        row.merged += 1;
    } else {
        row.model += 1;
    }
    for f in audit.health_flags.iter().filter(|f| {
        f.starts_with("model_fallback")
            || f.starts_with("model_floor")
            || f.starts_with("model_answer_refused")
            || f.starts_with("model_cut_off")
    }) {
        // The kind of reason, without the per-session details.
        let kind: String = f.chars().take(72).collect();
        *row.why.entry(kind).or_default() += 1;
    }
    let (have, want) = (evidenced(&s), evidenced(&floor));
    if have.iter().zip(want).any(|(h, w)| *h < w) {
        row.fewer += 1;
        eprintln!("{}: {have:?} < the rules' {want:?}", c.id);
    }
}

fn main() {
    let (python, models) = match models() {
        Ok(m) => m,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let sets = corpus::sets(&[
        ("ELITR fixture", "tests/fixtures/meetings_elitr/dev.json"),
        ("BFCL memory", "tests/fixtures/memory_bfcl/dev.json"),
        ("summary fixtures", "tests/fixtures/summaries"),
    ]);
    let per_set = env_num("MNEMO_MODEL_SWEEP_PER_SET", usize::MAX);
    let window = env_num("MNEMO_MODEL_SWEEP_TURNS", 24);
    let max_tokens = env_num("MNEMO_MODEL_MAX_TOKENS", 128) as u32;
    let timeout_secs = env_num("MNEMO_MODEL_TIMEOUT_SECS", 180) as u64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| model | corpus | summaries | stored model / merged / rules | failed | fewer evidenced items than the rules | calls (most in one summary) | cut off at max_tokens | failed calls | prompt / completion tokens per summary | most completion tokens (max_tokens) | seconds p50 / max | server peak MiB |"
    );
    println!("|---|---|---:|---|---:|---:|---|---:|---:|---|---|---|---:|");
    let mut reasons = Vec::new();
    for m in &models {
        let server = rt.block_on(LlamaServer::start(
            &python,
            m,
            env_num("MNEMO_LLAMA_THREADS", 2),
        ));
        let config = ModelConfig {
            summarizer: SummarizerKind::Model,
            url: server.url.clone(),
            name: m.name.clone(),
            timeout_secs,
            retry_budget_secs: 2 * timeout_secs,
            max_output_tokens: max_tokens,
            system_role: m.system_role,
            ..ModelConfig::default()
        };
        let summarizer = ModelSummarizer::new(&config, rt.handle().clone()).unwrap();
        for (name, path) in &sets {
            let convs = corpus::load(Path::new(path));
            let mut row = Row::default();
            for c in convs.iter().filter(|c| !c.turns.is_empty()).take(per_set) {
                sweep_one(c, &summarizer, window, &mut row);
            }
            let k = row.summaries.max(1) as u64;
            row.seconds.sort_by(f64::total_cmp);
            let p50 = row
                .seconds
                .get(row.seconds.len() / 2)
                .copied()
                .unwrap_or(0.0);
            let most = row.seconds.last().copied().unwrap_or(0.0);
            println!(
                "| {} | {name} | {} | {} / {} / {} | {} | {} | {} ({}) | {} | {} | {} / {} | {} ({}) | {p50:.1} / {most:.1} | {} |",
                m.name,
                row.summaries,
                row.model,
                row.merged,
                row.rules,
                row.failed,
                row.fewer,
                row.calls,
                row.most_calls,
                row.cut_off,
                row.failed_calls,
                row.prompt_tokens / k,
                row.completion_tokens / k,
                row.most_completion,
                row.max_tokens,
                server.peak_mib()
            );
            reasons.extend(
                row.why
                    .into_iter()
                    .map(|(why, n)| format!("{} / {name}: {n}× {why}", m.name)),
            );
        }
    }
    for r in reasons {
        println!("  {r}");
    }
}
