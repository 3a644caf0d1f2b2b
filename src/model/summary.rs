//! The structured summary of a session, as stored and served. Field names
//! match the `SessionSummary` protobuf message one to one, so the JSON
//! rendering (serde) and the proto agree. Every item cites the turns
//! (`evidence_seqs` / `seq`) it came from; sections with nothing are empty,
//! never omitted or invented.

use serde::{Deserialize, Serialize};

use super::{Role, ToolCallStatus, UnixNanos};

/// How a session ended up, as far as the summarized turns show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// Work is still going on.
    #[default]
    InProgress,
    /// The user's issue was resolved.
    Resolved,
    /// Not resolved; someone must follow up.
    UnresolvedFollowUp,
    /// The task was completed.
    Completed,
}

/// What made mnemo write a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Trigger {
    /// `summary_every_turns` new turns arrived.
    EveryNTurns,
    /// Unsummarized tokens passed 80% of the context limit.
    TokenThreshold,
    /// A handoff between agents.
    Handoff,
    /// The session went idle.
    IdleTimeout,
    /// The session was closed.
    Close,
    /// A client called Summarize.
    Requested,
}

/// Status of a pending action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionStatus {
    /// Not started.
    Pending,
    /// Started, not done.
    InProgress,
    /// Reported done by a later turn or completed by a successful tool call.
    Done,
}

/// Priority of a pending action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Priority {
    /// Urgent or blocking.
    High,
    /// Normal.
    Medium,
    /// Nice to have.
    Low,
}

/// Status of an open question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum QuestionStatus {
    /// Nobody answered yet.
    Unanswered,
    /// A later turn answered part of it.
    PartiallyAnswered,
}

/// Severity of an error or anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Severity {
    /// Work cannot continue until it is fixed.
    Blocking,
    /// Work continues with reduced quality.
    Degraded,
    /// Worth knowing.
    Warning,
}

/// A decision made in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// What was decided, in the turn's own words.
    pub decision: String,
    /// Why, when a turn says so; else empty.
    pub rationale: String,
    /// Speakers who made or agreed to it.
    pub agreed_by: Vec<String>,
    /// Turns it came from.
    pub evidence_seqs: Vec<u64>,
    /// High-risk sessions: irreversible (refund, delete, pay, deploy...),
    /// so a human must review it. Always false in other sessions.
    #[serde(default)]
    pub requires_human_review: bool,
}

/// Something someone committed to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAction {
    /// The action, in the turn's own words.
    pub action: String,
    /// Who will do it, or "unassigned".
    pub owner: String,
    /// Absolute ISO date (YYYY-MM-DD) when a turn gives one; else empty.
    pub deadline: String,
    /// Progress.
    pub status: ActionStatus,
    /// Actions or artifacts this one waits for.
    pub depends_on: Vec<String>,
    /// Urgency.
    pub priority: Priority,
    /// Turns it came from (the commitment, and any progress report).
    pub evidence_seqs: Vec<u64>,
    /// High-risk sessions: irreversible (refund, delete, pay, deploy...),
    /// so a human must review it. Always false in other sessions.
    #[serde(default)]
    pub requires_human_review: bool,
}

/// A question nobody has fully answered yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenQuestion {
    /// The question, verbatim.
    pub question: String,
    /// Who asked.
    pub asked_by: String,
    /// How far it is answered.
    pub status: QuestionStatus,
    /// Turns it came from.
    pub evidence_seqs: Vec<u64>,
}

/// A fact stated in the session, with identifiers kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyFact {
    /// The fact, verbatim from the turn.
    pub fact: String,
    /// Who stated it.
    pub stated_by: String,
    /// Turns it came from.
    pub evidence_seqs: Vec<u64>,
}

/// One tool call, exactly as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallEntry {
    /// Exact tool name.
    pub tool_name: String,
    /// Exact arguments JSON.
    pub arguments_json: String,
    /// The result, shortened if long.
    pub result_summary: String,
    /// Outcome.
    pub status: ToolCallStatus,
    /// Error text, verbatim.
    pub error_details: String,
    /// The turn of the call.
    pub seq: u64,
    /// High-risk sessions: irreversible (refund, delete, pay, deploy...),
    /// so a human must review it. Always false in other sessions.
    #[serde(default)]
    pub requires_human_review: bool,
}

/// Something a tool produced that later turns may refer to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Identifier of the artifact (e.g. a file name, an order id).
    pub artifact_id: String,
    /// Tool that produced it.
    pub source_tool: String,
    /// What it is.
    pub summary: String,
    /// Turn that produced it.
    pub seq: u64,
    /// Turn from which it is stale (0 = still fresh).
    pub expiry_seq: u64,
}

/// How healthy the session's context is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ContextHealth {
    /// Ids of artifacts that went stale.
    pub stale_artifacts: Vec<String>,
    /// Pending actions whose dependencies are unknown or not done.
    pub missing_dependencies: Vec<String>,
    /// context_limit_tokens minus what a bundle of this session now needs.
    pub budget_remaining_tokens: i64,
}

/// An error or anomaly seen in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    /// What happened, with error text verbatim.
    pub description: String,
    /// How bad.
    pub severity: Severity,
    /// The turn.
    pub seq: u64,
}

/// Two turns that contradict each other and no later turn settles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// What conflicts.
    pub description: String,
    /// The turns in conflict.
    pub conflicting_seqs: Vec<u64>,
}

/// A speaker and their role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// Speaker id as given on the turns.
    pub speaker: String,
    /// Their role.
    pub role: Role,
}

/// A stretch of the session about one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSegment {
    /// First turn of the segment.
    pub first_seq: u64,
    /// Last turn of the segment.
    pub last_seq: u64,
    /// The topic.
    pub topic: String,
    /// Key points, verbatim from turns of the segment.
    pub key_points: Vec<String>,
    /// Turns the key points came from (sorted, distinct).
    #[serde(default)]
    pub evidence_seqs: Vec<u64>,
}

/// The structured running summary of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// What the user wants, from their first substantive turn.
    pub user_intent: String,
    /// The turn `user_intent` came from (0 when there is none).
    #[serde(default)]
    pub user_intent_seq: u64,
    /// Main topic.
    pub topic: String,
    /// How it stands.
    pub outcome: Outcome,
    /// Decisions made.
    pub decisions: Vec<Decision>,
    /// Commitments, including those now done.
    pub pending_actions: Vec<PendingAction>,
    /// Questions not (fully) answered.
    pub open_questions: Vec<OpenQuestion>,
    /// Facts with identifiers verbatim.
    pub key_facts: Vec<KeyFact>,
    /// Every tool call, exactly.
    pub tool_calls: Vec<ToolCallEntry>,
    /// Artifacts produced by tools.
    pub artifacts: Vec<Artifact>,
    /// Context health.
    pub context_health: ContextHealth,
    /// Why the summary could not cover every turn; empty when it did.
    pub truncated: String,
    /// Errors and anomalies.
    pub errors_and_anomalies: Vec<Anomaly>,
    /// Contradictions not settled.
    pub unresolved_conflicts: Vec<Conflict>,
    /// Who took part.
    pub participants: Vec<Participant>,
    /// Topic segments (more than one when the session changed topic).
    pub topics: Vec<TopicSegment>,
    /// 1 to 3 sentences built only from the items above.
    pub prose: String,
    /// The last turn this summary covers.
    pub covers_through_seq: u64,
    /// Summary version within the session, from 1.
    pub version: u64,
    /// What triggered it.
    pub trigger: Trigger,
    /// When it was written.
    pub created_at: UnixNanos,
    /// Seconds from the first to the last covered turn.
    pub duration_seconds: u64,
    /// Turns covered.
    pub total_turns: u64,
    /// High-risk sessions: some item needs human review.
    #[serde(default)]
    pub requires_human_review: bool,
}
