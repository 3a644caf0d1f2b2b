//! Records kept beside summaries and turns: the fold state that makes
//! summaries incremental (opaque to everyone but its summarizer), the audit
//! log, the review queue and the idempotency record of an append.

use serde::{Deserialize, Serialize};

use super::{AppendOutcome, Trigger, UnixNanos};

/// What an audit record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuditKind {
    /// A summary attempt (stored, or refused by validation).
    SummaryAttempt,
    /// A review item was resolved.
    ReviewResolved,
}

/// State of a review item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewStatus {
    /// Waiting for a human.
    Pending,
    /// Approved by a human.
    Approved,
    /// Rejected by a human.
    Rejected,
}

/// One record of a session's audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Position in the session's log, from 1 (assigned by the store).
    pub audit_seq: u64,
    /// What it is about.
    pub kind: AuditKind,
    /// When.
    pub created_at: UnixNanos,
    /// Stored summary version; 0 when refused.
    pub summary_version: u64,
    /// Trigger of the attempt.
    pub trigger: Option<Trigger>,
    /// Turns covered: 1..=covers_through_seq.
    pub covers_through_seq: u64,
    /// Tokens of the covered turns.
    pub pre_summary_tokens: u64,
    /// Tokens of the summary's Markdown rendering.
    pub post_summary_tokens: u64,
    /// pre / post.
    pub compression_ratio: f64,
    /// Summarizer name/version.
    pub summarizer: String,
    /// Hex SHA-256 hash chain of the covered turns.
    pub covered_turns_sha256: String,
    /// Whether the summary passed validation and was stored.
    pub validation_passed: bool,
    /// Why it failed.
    pub validation_errors: Vec<String>,
    /// Item counts.
    pub decisions: u32,
    /// Item counts.
    pub pending_actions: u32,
    /// Item counts.
    pub open_questions: u32,
    /// Health flags.
    pub health_flags: Vec<String>,
    /// For review resolutions.
    pub review_id: String,
    /// For review resolutions.
    pub review_status: Option<ReviewStatus>,
    /// For review resolutions: the name the reviewer gave (free text).
    pub reviewer: String,
    /// For review resolutions.
    pub comment: String,
    /// For review resolutions: the API key that acted (its configured
    /// name; "anyone" with auth off), which the caller cannot choose.
    /// Empty in records from before it was kept (format 5 and older).
    #[serde(default)]
    pub reviewer_key: String,
}

impl AuditRecord {
    /// A record of `kind` at `created_at` with every other field empty
    /// (its `audit_seq` is assigned by the store); callers set what the
    /// event has.
    pub fn new(kind: AuditKind, created_at: UnixNanos) -> AuditRecord {
        AuditRecord {
            audit_seq: 0,
            kind,
            created_at,
            summary_version: 0,
            trigger: None,
            covers_through_seq: 0,
            pre_summary_tokens: 0,
            post_summary_tokens: 0,
            compression_ratio: 0.0,
            summarizer: String::new(),
            covered_turns_sha256: String::new(),
            validation_passed: false,
            validation_errors: Vec::new(),
            decisions: 0,
            pending_actions: 0,
            open_questions: 0,
            health_flags: Vec::new(),
            review_id: String::new(),
            review_status: None,
            reviewer: String::new(),
            comment: String::new(),
            reviewer_key: String::new(),
        }
    }
}

/// A summary waiting for (or having had) human review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewItem {
    /// Unique, sortable by creation (ULID).
    pub review_id: String,
    /// Namespace.
    pub namespace: String,
    /// Session.
    pub session_id: String,
    /// Summary version under review.
    pub summary_version: u64,
    /// The irreversible items, one line each.
    pub items: Vec<String>,
    /// State.
    pub status: ReviewStatus,
    /// Who resolved it.
    pub reviewer: String,
    /// Their comment.
    pub comment: String,
    /// When queued.
    pub created_at: UnixNanos,
    /// When resolved (0 = not yet).
    pub resolved_at: UnixNanos,
    /// The API key that resolved it (see [`AuditRecord::reviewer_key`]).
    #[serde(default)]
    pub reviewer_key: String,
}

/// A summarizer's accumulated state for one session, stored with the
/// latest summary. The state is opaque bytes that only the summarizer named
/// here (at this format version) can read; the store never looks inside.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldRecord {
    /// The summarizer that wrote `state` (e.g. `mnemo-rules`).
    pub summarizer: String,
    /// That summarizer's version of its state layout. 0 marks a record
    /// written before fold states were opaque: `state` then holds the
    /// whole old record and the `through_*`/`chain_hash` fields are not
    /// set here (the rule-based summarizer's legacy decoder reads them).
    pub format: u32,
    /// The encoded state.
    pub state: Vec<u8>,
    /// Last folded seq.
    pub through_seq: u64,
    /// Tokens of the folded turns.
    pub through_tokens: u64,
    /// SHA-256 hash chain over the canonical encoding of the folded turns.
    pub chain_hash: [u8; 32],
}

/// The fold-record format that marks an old, whole-record payload.
pub const LEGACY_FOLD_FORMAT: u32 = 0;

/// What is stored under an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of the original request's turns.
    pub fingerprint: [u8; 32],
    /// The original outcome.
    pub outcome: AppendOutcome,
}

/// Something the search index must catch up with: an outbox entry. It
/// names what changed, not its content: a consumer reads the store, so
/// re-applying an entry is harmless and a deleted record leaves the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexChange {
    /// Turns were appended.
    Turns {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
        /// First new seq.
        first_seq: u64,
        /// Last new seq.
        last_seq: u64,
    },
    /// A session was deleted: everything of it leaves the index.
    SessionDeleted {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
    },
    /// A fact version was stored, superseded or deleted.
    Fact {
        /// Namespace.
        namespace: String,
        /// The version.
        fact_id: String,
    },
    /// A session's episode was written or changed.
    Episode {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
    },
    /// The last turn of a session was removed (its seq is free again).
    TurnRemoved {
        /// Namespace.
        namespace: String,
        /// Session.
        session_id: String,
        /// The removed turn's seq.
        seq: u64,
    },
}
