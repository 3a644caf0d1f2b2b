//! What the summary pipeline stores besides summaries: the fold state that
//! makes summaries incremental, the audit log and the review queue.

use serde::{Deserialize, Serialize};

use super::engine::FoldState;
use super::model::{SessionSummary, Trigger};
use crate::memory::types::UnixNanos;

/// Name and version of the summarizer, recorded in the audit log.
pub const SUMMARIZER: &str = concat!("mnemo-rules/", env!("CARGO_PKG_VERSION"));

/// The accumulator of a session's summaries, stored with the latest one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FoldRecord {
    /// Everything folded so far (turns 1..=through_seq).
    pub state: FoldState,
    /// Last folded seq.
    pub through_seq: u64,
    /// Tokens of the folded turns.
    pub through_tokens: u64,
    /// SHA-256 hash chain over the canonical encoding of the folded turns.
    pub chain_hash: [u8; 32],
}

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
    /// For review resolutions.
    pub reviewer: String,
    /// For review resolutions.
    pub comment: String,
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
}

/// Everything one summary attempt writes, atomically.
#[derive(Debug, Clone)]
pub struct SummaryWrite {
    /// The session's summary version the attempt started from; the write
    /// is refused (ABORTED) if another attempt got there first.
    pub base_version: u64,
    /// The summary to store; `None` when validation refused it.
    pub summary: Option<SessionSummary>,
    /// The new fold state (only with a stored summary).
    pub fold: Option<FoldRecord>,
    /// The audit record (its `audit_seq` is assigned by the store).
    pub audit: AuditRecord,
    /// A review item, for high-risk summaries that need one.
    pub review: Option<ReviewItem>,
    /// Last seq the attempt covered.
    pub attempted_through_seq: u64,
}
