//! Domain types of working memory: sessions, turns, tool calls and the
//! settings and counters around them. Plain data with serde derives (the
//! store persists them); no gRPC types here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Nanoseconds since the Unix epoch (UTC).
pub type UnixNanos = i64;

/// The current server time.
pub fn now_nanos() -> UnixNanos {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    // i64 nanoseconds last until the year 2262.
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Tokenizer of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Encoding {
    /// OpenAI cl100k_base, the default.
    #[default]
    Cl100kBase,
    /// OpenAI o200k_base.
    O200kBase,
}

impl Encoding {
    /// The name tiktoken uses for this encoding.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }
}

/// Lifecycle state of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionState {
    /// Accepting turns.
    Active,
    /// Readable, accepts no appends.
    Closed,
    /// No append for the idle timeout; the next append reactivates it.
    /// (Added after `Closed`, so older records keep their variant index.)
    Idle,
}

/// Review policy of a session's summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RiskLevel {
    /// No review.
    #[default]
    Normal,
    /// Irreversible actions in a summary go to the review queue.
    High,
}

/// Per-session settings with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSettings {
    /// Turns between running summaries.
    pub summary_every_turns: u32,
    /// Context window of the consuming model, in tokens.
    pub context_limit_tokens: u64,
    /// Seconds without an append before the session counts as idle.
    pub idle_timeout_seconds: u32,
    /// Tokenizer for token counts.
    pub encoding: Encoding,
    /// Review policy for summaries.
    pub risk_level: RiskLevel,
    /// Whether facts are extracted from the session's summaries and turns.
    pub fact_extraction: bool,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            summary_every_turns: 10,
            context_limit_tokens: 128_000,
            idle_timeout_seconds: 1800,
            encoding: Encoding::Cl100kBase,
            risk_level: RiskLevel::Normal,
            fact_extraction: true,
        }
    }
}

/// A session and its counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Tenancy boundary.
    pub namespace: String,
    /// Unique within the namespace.
    pub session_id: String,
    /// The user/customer/project the session is about; may be empty.
    pub subject_id: String,
    /// Human-readable title; may be empty.
    pub title: String,
    /// Client key/value pairs.
    pub metadata: BTreeMap<String, String>,
    /// Settings, defaults filled in.
    pub settings: SessionSettings,
    /// Lifecycle state.
    pub state: SessionState,
    /// Turns stored. Invariant: `next_seq == turn_count + 1`.
    pub turn_count: u64,
    /// Seq of the next appended turn.
    pub next_seq: u64,
    /// Sum of the stored turns' token counts.
    pub total_tokens: u64,
    /// Creation time (server clock).
    pub created_at: UnixNanos,
    /// Last change (server clock).
    pub updated_at: UnixNanos,
    /// Progress of the session's running summaries.
    pub summary: SummaryProgress,
    /// The agent that owns the session (empty = unclaimed).
    pub owner_agent: String,
    /// Fencing token: 1 at creation, +1 per handoff.
    pub lease_epoch: u64,
    /// Last append (or creation); the idle timeout counts from here.
    pub last_active_at: UnixNanos,
    /// The summary version the session's episode was made from (0 = no
    /// episode yet). A stopped session whose summary is newer is due one.
    pub episode_version: u64,
    /// Turns removed from the end (`RemoveLastTurn`) over the session's
    /// life: a watcher on another daemon that re-reads the session learns
    /// of a removal by it, even when appends refilled the seqs since.
    pub removed_turns: u64,
}

impl Session {
    /// A new, empty, ACTIVE session created at `now`, with no subject,
    /// title or metadata.
    pub fn new(
        namespace: &str,
        session_id: &str,
        settings: SessionSettings,
        now: UnixNanos,
    ) -> Session {
        Session {
            namespace: namespace.to_owned(),
            session_id: session_id.to_owned(),
            subject_id: String::new(),
            title: String::new(),
            metadata: BTreeMap::new(),
            settings,
            state: SessionState::Active,
            turn_count: 0,
            next_seq: 1,
            total_tokens: 0,
            created_at: now,
            updated_at: now,
            summary: SummaryProgress::default(),
            owner_agent: String::new(),
            lease_epoch: 1,
            last_active_at: now,
            episode_version: 0,
            removed_turns: 0,
        }
    }

    /// Seq of the newest turn (0 when there is none).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// When an ACTIVE session becomes idle, in server nanoseconds.
    pub fn idle_deadline(&self) -> UnixNanos {
        self.last_active_at
            .saturating_add(i64::from(self.settings.idle_timeout_seconds) * 1_000_000_000)
    }
}

/// Where a session's running summaries stand. Updated atomically with each
/// stored summary, so triggers after a restart are derived from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryProgress {
    /// Latest stored summary version (0 = none).
    pub version: u64,
    /// Last seq the latest summary covers.
    pub through_seq: u64,
    /// Tokens of turns 1..=through_seq.
    pub through_tokens: u64,
    /// Last seq any attempt (stored or refused) covered: triggers count
    /// from here, so a refused summary is not retried on every append.
    pub attempted_through_seq: u64,
    /// Audit records written.
    pub audit_seq: u64,
}

/// Who produced a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// The person the agent serves.
    User,
    /// The agent.
    Assistant,
    /// System or orchestrator.
    System,
    /// A tool's output.
    Tool,
}

/// Outcome of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolCallStatus {
    /// Returned a result.
    Success,
    /// Reported an error.
    Failure,
    /// Did not answer in time.
    Timeout,
    /// Issued, outcome not known yet.
    Pending,
    /// Outcome not known.
    Unknown,
}

/// A tool invocation, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Exact tool name.
    pub tool_name: String,
    /// Arguments as JSON text, verbatim.
    pub arguments_json: String,
    /// Result text, verbatim.
    pub result: String,
    /// Outcome.
    pub status: ToolCallStatus,
    /// Error text, verbatim.
    pub error_details: String,
}

/// A turn as submitted by a client, before the server assigns anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTurn {
    /// Who produced it.
    pub role: Role,
    /// Agent or person id.
    pub speaker: String,
    /// Text.
    pub content: String,
    /// The client's time, if given.
    pub client_time: Option<UnixNanos>,
    /// Tool call, if any.
    pub tool_call: Option<ToolCall>,
    /// Client key/value pairs.
    pub metadata: BTreeMap<String, String>,
}

impl NewTurn {
    /// Bytes of text that count against the per-turn limit: the content and
    /// the tool call's text fields.
    pub fn text_bytes(&self) -> usize {
        self.content.len()
            + self.tool_call.as_ref().map_or(0, |t| {
                t.tool_name.len() + t.arguments_json.len() + t.result.len() + t.error_details.len()
            })
    }
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Position in the session, from 1, gap-free.
    pub seq: u64,
    /// Who produced it.
    pub role: Role,
    /// Agent or person id.
    pub speaker: String,
    /// Text, verbatim.
    pub content: String,
    /// The client's time, if given.
    pub client_time: Option<UnixNanos>,
    /// When the server stored it.
    pub server_time: UnixNanos,
    /// Tool call, if any.
    pub tool_call: Option<ToolCall>,
    /// Client key/value pairs.
    pub metadata: BTreeMap<String, String>,
    /// Tokens of content and tool-call text, in the session's encoding.
    pub token_count: u32,
}

/// What an append did. Stored under the idempotency key so a retry can
/// return it unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendOutcome {
    /// Seq of the first appended turn.
    pub first_seq: u64,
    /// Seq of the last appended turn.
    pub last_seq: u64,
    /// Token count per appended turn.
    pub token_counts: Vec<u32>,
    /// The session's total tokens after the append.
    pub total_tokens: u64,
    /// True when this outcome is a replay of an earlier append.
    pub replayed: bool,
}

/// Filter for listing sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only this subject, when set.
    pub subject_id: Option<String>,
    /// Only this state, when set.
    pub state: Option<SessionState>,
}

impl SessionFilter {
    /// Whether `s` passes the filter.
    pub fn matches(&self, s: &Session) -> bool {
        self.subject_id.as_ref().is_none_or(|x| *x == s.subject_id)
            && self.state.is_none_or(|x| x == s.state)
    }
}
