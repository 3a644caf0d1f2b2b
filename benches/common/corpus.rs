//! The conversation corpora the summary benches read: meeting sets,
//! retrieval sets, conversation sets and directories of summary fixtures
//! (formats in `summary_sweep.rs`), and a session built from one of them
//! on an in-process store. Included by path from each bench.

use std::collections::BTreeMap;
use std::path::Path;

use mnemo::memory::append::{plan, PreparedAppend};
use mnemo::model::{Encoding, NewTurn, Role, Session, SessionSettings, ToolCall, ToolCallStatus};
use mnemo::store::{MemoryStore, SessionStore};
use serde::Deserialize;
use serde_json::Value;

/// Turns appended per batch.
const BATCH: usize = 256;

/// One conversation: an id and its turns.
pub struct Conversation {
    pub id: String,
    pub turns: Vec<NewTurn>,
    /// Turn labels people made, by seq (a labelled set's `labels`; see
    /// `scripts/labelled_to_sweep.py`): `Some` for a conversation that was
    /// labelled, even when no turn got a label (then every item listed is
    /// wrong), `None` for one that was not. Only the summary sweep reads
    /// them.
    #[allow(dead_code)]
    pub labels: Option<BTreeMap<u64, Vec<String>>>,
}

/// A conversation's `labels` object (`{"<seq>": ["commitment", ...]}`),
/// `None` when it has none.
fn labels_of(v: &Value) -> Option<BTreeMap<u64, Vec<String>>> {
    let labels = v["labels"].as_object()?.iter().filter_map(|(k, l)| {
        let kinds = l
            .as_array()?
            .iter()
            .filter_map(|x| x.as_str().map(String::from));
        Some((k.parse().ok()?, kinds.collect()))
    });
    Some(labels.collect())
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
pub fn load(path: &Path) -> Vec<Conversation> {
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
                labels: None,
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
                labels: None,
            });
        }
    }
    if let Some(convs) = v["conversations"].as_array() {
        for c in convs {
            out.push(Conversation {
                id: c["id"].as_str().unwrap_or("conversation").into(),
                turns: turns_of(c, Role::User),
                labels: labels_of(c),
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
                    labels: None,
                });
            }
        }
    }
    out
}

/// The named sets of `MNEMO_SWEEP_SETS` (`name=path,…`), else `default`.
pub fn sets(default: &[(&str, &str)]) -> Vec<(String, String)> {
    match std::env::var("MNEMO_SWEEP_SETS") {
        Ok(v) => v
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|p| match p.split_once('=') {
                Some((n, path)) => (n.to_string(), path.to_string()),
                None => (p.to_string(), p.to_string()),
            })
            .collect(),
        Err(_) => default
            .iter()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect(),
    }
}

/// A store holding one session `id` of namespace `ns` with `turns`.
pub fn session_with(ns: &str, id: &str, turns: &[NewTurn]) -> MemoryStore {
    let store = MemoryStore::default();
    let settings = SessionSettings {
        encoding: Encoding::default(),
        ..SessionSettings::default()
    };
    let session = Session::new(ns, id, settings, 1_773_741_600_000_000_000);
    store.create_session(&session).expect("create session");
    for chunk in turns.chunks(BATCH) {
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
            .append_turns(ns, id, None, &mut |s, prev| plan(s, prev, &prepared))
            .expect("append");
    }
    store
}
