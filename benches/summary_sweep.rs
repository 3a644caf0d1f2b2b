//! Every conversation of every corpus at hand, folded through the real
//! summary pipeline (`memory::summary::run`: fold, validate against the
//! cited turns, drop what fails, store) on an in-process store, one
//! session per conversation. Per corpus it prints: conversations, turns,
//! refused summaries (the pipeline stored nothing), panics, items the
//! validator dropped, items whose text carries a transcription marker,
//! owners that are no person, and the fold's time (p50 / p99).
//!
//! - marker: a bracketed stretch shaped like a transcriber's note —
//!   `{word}`, `<word/>`, `<word>`, `[word …]` (not an all-capitals
//!   placeholder such as `[PERSON3]`), `(one or two lower-case words)`;
//!   checked in
//!   decisions, actions, questions, key facts, topic labels and key points
//!   and the user's intent (the prose only quotes these);
//! - non-person owner: an action's owner that is not `unassigned`, not a
//!   speaker of the session, and not addressed as a person in one of the
//!   action's cited turns (written `Name,` or `@name` or as a `[NAME]`
//!   placeholder), or that holds a number word.
//!
//! Corpora: `MNEMO_SWEEP_SETS`, comma-separated `name=path` pairs; each
//! file is a meeting set (`{"meetings": [{"id", "turns": [{"speaker",
//! "content"}]}]}`, every turn a person's), a retrieval set (`{"subjects":
//! [{"sessions": [{"session_id", "turns": [{"role", "speaker",
//! "content"}]}]}]}`, each session a conversation), a conversation set
//! (`{"conversations": [{"id", "turns": [...]}]}`, e.g. ToolBench runs
//! converted by `scripts/toolbench_runs_to_conversations.py`, task-oriented
//! dialogues by `scripts/task_dialogues_to_conversations.py`) or a directory of
//! summary fixtures (`{"turns": [{"role", "speaker", "content",
//! "tool_call"?}]}` per file). Without it, the committed ones: the ELITR
//! meetings, the BFCL memory conversations, the summary fixtures and the
//! Taskmaster dialogues.
//! `MNEMO_BENCH_SHOW_ITEMS=1` prints each finding (refusal, drop, marker,
//! owner); `MNEMO_BENCH_SHOW_ITEMS=all` also every decision and action.
//! Run: `cargo bench --bench summary_sweep`.

use std::path::Path;
use std::time::Instant;

use mnemo::config::SummaryConfig;
use mnemo::memory::append::{plan, PreparedAppend};
use mnemo::memory::summary::{run, Attempt};
use mnemo::model::{
    Encoding, NewTurn, Role, Session, SessionSettings, SessionSummary, ToolCall, ToolCallStatus,
    Trigger, Turn,
};
use mnemo::store::{MemoryStore, SessionStore};
use mnemo::summarize::RuleBased;
use serde::Deserialize;
use serde_json::Value;

const NS: &str = "sweep";

/// Turns appended per batch.
const BATCH: usize = 256;

/// One conversation: an id and its turns.
struct Conversation {
    id: String,
    turns: Vec<NewTurn>,
}

#[derive(Deserialize)]
struct RawTurn {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    speaker: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    tool_call: Option<RawCall>,
}

#[derive(Deserialize)]
struct RawCall {
    tool_name: String,
    #[serde(default)]
    arguments_json: String,
    #[serde(default)]
    result: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    error_details: String,
}

fn new_turn(t: RawTurn, default_role: Role) -> NewTurn {
    let role = match t.role.as_deref() {
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some("system") => Role::System,
        Some("user") => Role::User,
        _ => default_role,
    };
    NewTurn {
        role,
        speaker: t.speaker,
        content: t.content,
        client_time: None,
        tool_call: t.tool_call.map(|c| ToolCall {
            tool_name: c.tool_name,
            arguments_json: c.arguments_json,
            result: c.result,
            status: match c.status.as_str() {
                "success" => ToolCallStatus::Success,
                "failure" => ToolCallStatus::Failure,
                "timeout" => ToolCallStatus::Timeout,
                "pending" => ToolCallStatus::Pending,
                _ => ToolCallStatus::Unknown,
            },
            error_details: c.error_details,
        }),
        metadata: Default::default(),
    }
}

fn turns_of(v: &Value, default_role: Role) -> Vec<NewTurn> {
    let raw: Vec<RawTurn> = serde_json::from_value(v["turns"].clone()).unwrap_or_default();
    raw.into_iter()
        .map(|t| new_turn(t, default_role))
        .filter(|t| !t.content.is_empty() || t.tool_call.is_some())
        .collect()
}

/// The conversations of a set file or a fixture directory.
fn load(path: &Path) -> Vec<Conversation> {
    let read = |p: &Path| -> Value {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        return files
            .iter()
            .map(|p| Conversation {
                id: p.file_stem().unwrap_or_default().to_string_lossy().into(),
                turns: turns_of(&read(p), Role::User),
            })
            .collect();
    }
    let v = read(path);
    let mut out = Vec::new();
    if let Some(meetings) = v["meetings"].as_array() {
        for m in meetings {
            out.push(Conversation {
                id: m["id"].as_str().unwrap_or("meeting").into(),
                turns: turns_of(m, Role::User),
            });
        }
    }
    if let Some(convs) = v["conversations"].as_array() {
        for c in convs {
            out.push(Conversation {
                id: c["id"].as_str().unwrap_or("conversation").into(),
                turns: turns_of(c, Role::User),
            });
        }
    }
    if let Some(subjects) = v["subjects"].as_array() {
        for s in subjects.iter() {
            for (k, session) in s["sessions"].as_array().into_iter().flatten().enumerate() {
                out.push(Conversation {
                    id: session["session_id"]
                        .as_str()
                        .map_or_else(|| format!("session-{k}"), str::to_string),
                    turns: turns_of(session, Role::User),
                });
            }
        }
    }
    out
}

/// Whether `text` holds a bracketed stretch shaped like a transcriber's
/// note (see the module documentation).
fn marker_like(text: &str) -> bool {
    let b = text.as_bytes();
    for (i, &open) in b.iter().enumerate() {
        let close = match open {
            b'{' => b'}',
            b'<' => b'>',
            b'[' => b']',
            b'(' => b')',
            _ => continue,
        };
        let Some(len) = b[i + 1..].iter().take(48).position(|&c| c == close) else {
            continue;
        };
        let Ok(body) = std::str::from_utf8(&b[i + 1..i + 1 + len]) else {
            continue;
        };
        // A Markdown link's text (`[here](https://…)`) is no marker.
        if open == b'[' && b.get(i + 2 + len) == Some(&b'(') {
            continue;
        }
        let body = body.trim().trim_matches('/');
        if body.is_empty() || !body.chars().any(char::is_alphabetic) {
            continue;
        }
        let wordy = body
            .chars()
            .all(|c| c.is_alphabetic() || " _-.:".contains(c) || c.is_ascii_digit());
        let hit = match open {
            // Braces around words; angle brackets around one word.
            b'{' => wordy,
            b'<' => wordy && !body.contains(' '),
            b'[' => {
                wordy
                    && !body
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    && body.split_whitespace().count() <= 4
            }
            _ => {
                body.split_whitespace().count() <= 2
                    && body.chars().all(|c| c.is_lowercase() || " .".contains(c))
            }
        };
        if hit {
            return true;
        }
    }
    false
}

const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "first", "second",
    "third",
];

/// Whether an owner is no person (see the module documentation).
fn non_person(owner: &str, seqs: &[u64], turns: &[NewTurn], speakers: &[&str]) -> bool {
    if owner == "unassigned" || speakers.contains(&owner) {
        return false;
    }
    if owner
        .split_whitespace()
        .any(|w| NUMBER_WORDS.contains(&w.to_lowercase().as_str()))
    {
        return true;
    }
    let addressed = seqs.iter().any(|&q| {
        let Some(t) = usize::try_from(q).ok().and_then(|q| turns.get(q - 1)) else {
            return false;
        };
        let c = &t.content;
        c.contains(&format!("{owner},"))
            || c.contains(&format!("{owner} ,"))
            || c.to_lowercase()
                .contains(&format!("@{}", owner.to_lowercase()))
            || c.contains(&format!("[{owner}]"))
    });
    !addressed
}

fn item_texts(s: &SessionSummary) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    v.extend(s.decisions.iter().map(|d| d.decision.as_str()));
    v.extend(s.pending_actions.iter().map(|a| a.action.as_str()));
    v.extend(s.open_questions.iter().map(|q| q.question.as_str()));
    v.extend(s.key_facts.iter().map(|f| f.fact.as_str()));
    for t in &s.topics {
        v.push(&t.topic);
        v.extend(t.key_points.iter().map(String::as_str));
    }
    v.push(&s.user_intent);
    v
}

/// Items dropped, from the summary's own note ("N items dropped by the
/// faithfulness check: …" in `truncated`).
fn dropped_count(s: &SessionSummary) -> usize {
    let Some(at) = s.truncated.find(mnemo::summarize::validate::DROPPED_NOTE) else {
        return 0;
    };
    s.truncated[..at]
        .split_whitespace()
        .rev()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Row {
    conversations: usize,
    turns: usize,
    refused: usize,
    panics: usize,
    items: usize,
    dropped: usize,
    markers: usize,
    non_person: usize,
    times_ms: Vec<f64>,
    examples: Vec<String>,
}

fn fold_one(c: &Conversation, row: &mut Row) {
    let store = MemoryStore::default();
    let settings = SessionSettings {
        encoding: Encoding::default(),
        ..SessionSettings::default()
    };
    let session = Session::new(NS, &c.id, settings, 1_773_741_600_000_000_000);
    store.create_session(&session).expect("create session");
    for chunk in c.turns.chunks(BATCH) {
        let prepared = PreparedAppend {
            turns: chunk.to_vec(),
            token_counts: chunk
                .iter()
                .map(|t| mnemo::tokens::count_turn(Encoding::default(), t))
                .collect(),
            idempotency_key: None,
            fingerprint: [0; 32],
            expected_next_seq: None,
            lease_epoch: None,
            handoff: None,
            now: 1_773_741_600_000_000_000,
        };
        store
            .append_turns(NS, &c.id, None, &mut |s, prev| plan(s, prev, &prepared))
            .expect("append");
    }
    let cfg = SummaryConfig::default();
    let t0 = Instant::now();
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(
            &store,
            &RuleBased,
            &cfg,
            (NS, &c.id),
            Trigger::Requested,
            true,
            false,
        )
    }));
    row.times_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
    row.conversations += 1;
    row.turns += c.turns.len();
    let s = match attempt {
        Err(_) => {
            row.panics += 1;
            return;
        }
        Ok(Err(e)) => {
            row.refused += 1;
            row.examples.push(format!("{}: error {e}", c.id));
            return;
        }
        Ok(Ok(Attempt::Refused(errors))) => {
            row.refused += 1;
            row.examples
                .push(format!("{}: refused {}", c.id, errors.join("; ")));
            return;
        }
        Ok(Ok(Attempt::Unchanged)) => return,
        Ok(Ok(Attempt::Stored(s))) => s,
    };
    let speakers: Vec<&str> = c.turns.iter().map(|t| t.speaker.as_str()).collect();
    row.items += s.decisions.len() + s.pending_actions.len();
    if std::env::var("MNEMO_BENCH_SHOW_ITEMS").is_ok_and(|v| v == "all") {
        for d in &s.decisions {
            row.examples.push(format!(
                "{}: decision {:?} {:?}",
                c.id, d.decision, d.evidence_seqs
            ));
        }
        for a in &s.pending_actions {
            row.examples.push(format!(
                "{}: action {:?} owner {:?} {:?}",
                c.id, a.action, a.owner, a.evidence_seqs
            ));
        }
    }
    let dropped = dropped_count(&s);
    row.dropped += dropped;
    if dropped > 0 {
        row.examples.push(format!("{}: {}", c.id, s.truncated));
    }
    for text in item_texts(&s) {
        if marker_like(text) {
            row.markers += 1;
            row.examples.push(format!("{}: marker in {text:?}", c.id));
        }
    }
    for a in &s.pending_actions {
        if non_person(&a.owner, &a.evidence_seqs, &c.turns, &speakers) {
            row.non_person += 1;
            row.examples
                .push(format!("{}: owner {:?} of {:?}", c.id, a.owner, a.action));
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn main() {
    // Turn is named so the bench fails to build if the model moves.
    let _: Option<Turn> = None;
    let sets: Vec<(String, String)> = match std::env::var("MNEMO_SWEEP_SETS") {
        Ok(v) => v
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|p| match p.split_once('=') {
                Some((n, path)) => (n.to_string(), path.to_string()),
                None => (p.to_string(), p.to_string()),
            })
            .collect(),
        Err(_) => [
            ("ELITR fixture", "tests/fixtures/meetings_elitr/dev.json"),
            ("BFCL memory", "tests/fixtures/memory_bfcl/dev.json"),
            ("summary fixtures", "tests/fixtures/summaries"),
            (
                "Taskmaster dialogues",
                "tests/fixtures/dialogues_taskmaster/dev.json",
            ),
        ]
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect(),
    };
    let show = std::env::var_os("MNEMO_BENCH_SHOW_ITEMS").is_some();
    println!(
        "| corpus | conversations | turns | refused | panics | items | dropped by validator | marker-bearing items | non-person owners | fold p50 ms | fold p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failed = false;
    let mut all_examples = Vec::new();
    for (name, path) in &sets {
        let convs = load(Path::new(path));
        let mut row = Row::default();
        for c in &convs {
            if c.turns.is_empty() {
                continue;
            }
            fold_one(c, &mut row);
        }
        let (p50, p99) = (pct(&mut row.times_ms, 0.5), pct(&mut row.times_ms, 0.99));
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {p50:.1} | {p99:.1} |",
            row.conversations,
            row.turns,
            row.refused,
            row.panics,
            row.items,
            row.dropped,
            row.markers,
            row.non_person
        );
        failed |= row.refused > 0 || row.panics > 0;
        all_examples.extend(row.examples.into_iter().map(|e| format!("{name}: {e}")));
    }
    if show {
        for e in &all_examples {
            println!("  {e}");
        }
    }
    if failed {
        eprintln!("a summary was refused or a fold panicked (MNEMO_BENCH_SHOW_ITEMS=1 names it)");
        std::process::exit(1);
    }
}
