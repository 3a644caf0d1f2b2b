//! Erasing a subject: the durable job that drives an erase to its end, the
//! counts of what it removed, and the erasure record that stays behind.
//! The record proves when and by whom a subject was erased and holds no
//! content: the subject is named only by a SHA-256 hash.

use serde::{Deserialize, Serialize};

use super::UnixNanos;

/// What an erase removed, per kind of record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EraseCounts {
    /// Sessions.
    pub sessions: u64,
    /// Turns.
    pub turns: u64,
    /// Summary versions.
    pub summaries: u64,
    /// Fold states.
    pub fold_states: u64,
    /// Audit records.
    pub audit_records: u64,
    /// Review items.
    pub review_items: u64,
    /// Client-set pending-action statuses.
    pub action_statuses: u64,
    /// Idempotency records.
    pub idempotency_records: u64,
    /// Fact versions (current and superseded).
    pub facts: u64,
    /// Episodes.
    pub episodes: u64,
    /// Carried-over pending actions.
    pub carried_actions: u64,
}

impl EraseCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &EraseCounts) {
        self.sessions += other.sessions;
        self.turns += other.turns;
        self.summaries += other.summaries;
        self.fold_states += other.fold_states;
        self.audit_records += other.audit_records;
        self.review_items += other.review_items;
        self.action_statuses += other.action_statuses;
        self.idempotency_records += other.idempotency_records;
        self.facts += other.facts;
        self.episodes += other.episodes;
        self.carried_actions += other.carried_actions;
    }

    /// Every record counted.
    pub fn total(&self) -> u64 {
        self.sessions
            + self.turns
            + self.summaries
            + self.fold_states
            + self.audit_records
            + self.review_items
            + self.action_statuses
            + self.idempotency_records
            + self.facts
            + self.episodes
            + self.carried_actions
    }

    /// (kind, count) pairs, for metrics, logs and the API.
    pub fn by_kind(&self) -> [(&'static str, u64); 11] {
        [
            ("sessions", self.sessions),
            ("turns", self.turns),
            ("summaries", self.summaries),
            ("fold_states", self.fold_states),
            ("audit_records", self.audit_records),
            ("review_items", self.review_items),
            ("action_statuses", self.action_statuses),
            ("idempotency_records", self.idempotency_records),
            ("facts", self.facts),
            ("episodes", self.episodes),
            ("carried_actions", self.carried_actions),
        ]
    }
}

/// An erase in progress, stored before anything is removed. While it
/// exists the subject takes no new sessions, turns or facts; any daemon
/// (after a restart, or another daemon sharing the database) that finds it
/// drives it to its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EraseJob {
    /// Namespace.
    pub namespace: String,
    /// The subject being erased (the job is removed with its data).
    pub subject_id: String,
    /// Id of the erasure record it will leave (a ULID).
    pub erasure_id: String,
    /// When it was requested.
    pub requested_at: UnixNanos,
    /// Who asked (the API key's name, or "anyone" with auth off).
    pub requested_by: String,
    /// What was removed so far.
    pub counts: EraseCounts,
    /// When a daemon last made progress on it (another daemon sharing the
    /// database takes over a job whose heartbeat is old).
    pub heartbeat_at: UnixNanos,
}

/// What stays after an erase: when, by whom, how much, and a hash of the
/// subject (no content, no ids in the clear).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureRecord {
    /// A ULID.
    pub erasure_id: String,
    /// Namespace.
    pub namespace: String,
    /// Hex SHA-256 of `namespace 0x00 subject_id`.
    pub subject_sha256: String,
    /// When it was requested.
    pub requested_at: UnixNanos,
    /// When the last record was removed.
    pub completed_at: UnixNanos,
    /// Who asked.
    pub requested_by: String,
    /// What was removed.
    pub counts: EraseCounts,
}

/// The hash an erasure record names its subject by.
pub fn subject_sha256(namespace: &str, subject_id: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(namespace.as_bytes());
    h.update([0u8]);
    h.update(subject_id.as_bytes());
    hex::encode(h.finalize())
}
