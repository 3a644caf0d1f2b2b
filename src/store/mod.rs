//! Storage: the `Store` trait (domain types in, domain types out), one
//! implementation (`kv::KvStore`) over two engines (sled, the default, and
//! in-memory), the key layout, the checksummed record codec and group
//! commit.
//!
//! Durability contract: a write is visible to readers as soon as its method
//! returns, and durable (survives power loss) only after a later
//! [`Store::sync`] returns. Callers acknowledge writes to clients only after
//! a sync, normally through [`commit::GroupCommit`].

pub mod codec;
pub mod commit;
pub mod dump;
pub mod engine;
pub mod keys;
mod kv;
pub mod legacy;
pub mod long_term;

use serde::{Deserialize, Serialize};

pub use self::kv::{KvStore, MemoryStore, SledStore};
pub use self::long_term::{IndexChange, LongTermStore};
use crate::error::{Error, Precondition, Result};
use crate::memory::types::{
    AppendOutcome, PreparedAppend, Session, SessionFilter, SessionState, Turn,
};
use crate::summarize::records::{AuditRecord, FoldRecord, ReviewItem, ReviewStatus, SummaryWrite};
use crate::summarize::SessionSummary;

/// One page of sessions from [`Store::list_sessions`].
#[derive(Debug, Clone, Default)]
pub struct SessionPage {
    /// Sessions that passed the filter, in id order.
    pub sessions: Vec<Session>,
    /// When set, more sessions may follow: continue after this id.
    pub resume_after: Option<String>,
}

/// Persistent storage of sessions and turns. Implementations make each
/// method atomic: concurrent calls on one session never interleave
/// partially, and a failed call changes nothing.
pub trait Store: LongTermStore + Send + Sync + 'static {
    /// Stores a new session; `AlreadyExists` when the id is taken.
    fn create_session(&self, session: &Session) -> Result<()>;

    /// Reads a session; `NotFound` when absent, `DataLoss` when corrupt.
    fn get_session(&self, ns: &str, session_id: &str) -> Result<Session>;

    /// Lists sessions of a namespace with ids after `after`, in id order,
    /// returning at most `limit` matches and examining at most `scan_limit`
    /// candidates (so a selective filter cannot make one call unbounded).
    fn list_sessions(
        &self,
        ns: &str,
        filter: &SessionFilter,
        after: Option<&str>,
        limit: usize,
        scan_limit: usize,
    ) -> Result<SessionPage>;

    /// Applies `change` to a session atomically and returns the result. If
    /// `change` fails nothing is written.
    fn update_session(
        &self,
        ns: &str,
        session_id: &str,
        change: &mut dyn FnMut(&mut Session) -> Result<()>,
    ) -> Result<Session>;

    /// Removes a session and all its records; returns the turns removed.
    fn delete_session(&self, ns: &str, session_id: &str) -> Result<u64>;

    /// Appends turns atomically, assigning the next seqs (see
    /// [`plan_append`] for the rules every implementation follows).
    fn append_turns(&self, ns: &str, session_id: &str, append: &PreparedAppend)
        -> Result<Appended>;

    /// Turns with `from_seq <= seq <= to_seq`, oldest first, at most `limit`.
    /// `NotFound` when the session does not exist.
    fn list_turns(
        &self,
        ns: &str,
        session_id: &str,
        from_seq: u64,
        to_seq: u64,
        limit: usize,
    ) -> Result<Vec<Turn>>;

    /// The turns with the given seqs (absent ones are skipped), by point
    /// reads; the session record is not read.
    fn get_turns(&self, ns: &str, session_id: &str, seqs: &[u64]) -> Result<Vec<Turn>>;

    /// Makes every write that returned before this call durable on disk.
    fn sync(&self) -> Result<()>;

    /// Sessions of every namespace after `(ns, session_id)`, at most `limit`
    /// (the summary scheduler's restart scan).
    /// Corrupt records are reported in `unreadable`, not as an error, so
    /// one damaged session cannot stop the daemon from starting.
    fn scan_sessions(&self, after: Option<(&str, &str)>, limit: usize) -> Result<SessionScan>;

    /// The latest fold state of a session, if it has a summary.
    fn fold_record(&self, ns: &str, session_id: &str) -> Result<Option<FoldRecord>>;

    /// Stores one summary attempt atomically: summary, fold state, audit
    /// record, review item and the session's progress. `Aborted` when the
    /// session's summary version is no longer `write.base_version`.
    /// Returns the session after the write.
    fn save_summary(&self, ns: &str, session_id: &str, write: SummaryWrite) -> Result<Session>;

    /// Summary `version` of a session (0 = latest); `NotFound` if none.
    fn get_summary(&self, ns: &str, session_id: &str, version: u64) -> Result<SessionSummary>;

    /// Summaries with version `<= at_most`, newest first, at most `limit`.
    fn list_summaries(
        &self,
        ns: &str,
        session_id: &str,
        at_most: u64,
        limit: usize,
    ) -> Result<Vec<SessionSummary>>;

    /// Audit records with `audit_seq > after`, oldest first, at most `limit`.
    fn list_audit(
        &self,
        ns: &str,
        session_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>>;

    /// Review items of a namespace after `after` (a review id), oldest
    /// first; pending only unless `include_resolved`. Examines at most
    /// `scan_limit` items; the second value is where to resume, if more.
    fn list_review_items(
        &self,
        ns: &str,
        after: Option<&str>,
        include_resolved: bool,
        limit: usize,
        scan_limit: usize,
    ) -> Result<(Vec<ReviewItem>, Option<String>)>;

    /// Resolves a pending review item and appends the resolution to its
    /// session's audit log (stamping `audit.audit_seq`). `NotFound` for an
    /// unknown id, `FailedPrecondition` if already resolved.
    fn resolve_review_item(
        &self,
        ns: &str,
        review_id: &str,
        status: ReviewStatus,
        audit: AuditRecord,
    ) -> Result<ReviewItem>;
}

/// One page of [`Store::scan_sessions`].
#[derive(Debug, Clone, Default)]
pub struct SessionScan {
    /// Sessions that decoded.
    pub sessions: Vec<Session>,
    /// Why the others did not (DATA_LOSS messages naming the session).
    pub unreadable: Vec<String>,
    /// The last (namespace, session id) examined; `None` when the page
    /// was empty.
    pub resume_after: Option<(String, String)>,
}

/// What [`Store::append_turns`] did, and the session after it (so callers
/// need not read the session again).
#[derive(Debug, Clone)]
pub struct Appended {
    /// The result for the client (a replay when the key was seen).
    pub outcome: AppendOutcome,
    /// The session as stored after the append.
    pub session: Session,
    /// Its state before the append (an append wakes an IDLE session).
    pub previous_state: SessionState,
}

/// What is stored under an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// SHA-256 of the original request's turns.
    pub fingerprint: [u8; 32],
    /// The original outcome.
    pub outcome: AppendOutcome,
}

/// The decision for an append, shared by every store so they agree.
#[derive(Debug)]
pub enum AppendPlan {
    /// The idempotency key was seen: return this, write nothing.
    Replay(AppendOutcome),
    /// Write these turns and this session, and remember the outcome.
    Write {
        /// Turns to store, seqs assigned.
        turns: Vec<Turn>,
        /// The session after the append.
        session: Box<Session>,
        /// The result for the client.
        outcome: AppendOutcome,
    },
}

/// Fencing: a write carrying `epoch` is allowed only while it is the
/// session's current lease epoch.
pub fn check_lease(current: &Session, epoch: u64) -> Result<()> {
    let owner = if current.owner_agent.is_empty() {
        "no agent".to_owned()
    } else {
        format!("agent {:?}", current.owner_agent)
    };
    match epoch.cmp(&current.lease_epoch) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(Error::FailedPrecondition(
            Precondition::StaleLeaseEpoch,
            format!(
            "lease_epoch {epoch} is stale: session {:?} is now owned by {owner} at lease epoch {}; a handoff moved it, so this writer may no longer write",
            current.session_id, current.lease_epoch
        ))),
        std::cmp::Ordering::Greater => Err(Error::FailedPrecondition(
            Precondition::LeaseEpochAhead,
            format!(
            "lease_epoch {epoch} is ahead of session {:?}'s lease epoch {} (owned by {owner}); use the epoch from GetSession or Handoff",
            current.session_id, current.lease_epoch
        ))),
    }
}

/// Decides an append against the session's current state and the record
/// stored under its idempotency key (if any). Pure: no I/O.
pub fn plan_append(
    current: &Session,
    previous: Option<IdempotencyRecord>,
    append: &PreparedAppend,
) -> Result<AppendPlan> {
    if let Some(prev) = previous {
        if prev.fingerprint != append.fingerprint {
            return Err(Error::FailedPrecondition(
                Precondition::IdempotencyKeyReused,
                format!(
                "idempotency_key {:?} was already used for a different append to session {:?}; use a new key",
                append.idempotency_key.as_deref().unwrap_or_default(),
                current.session_id
            )));
        }
        let mut outcome = prev.outcome;
        outcome.replayed = true;
        return Ok(AppendPlan::Replay(outcome));
    }
    if current.state == SessionState::Closed {
        return Err(Error::FailedPrecondition(
            Precondition::SessionClosed,
            format!(
                "session {:?} is closed and accepts no more turns",
                current.session_id
            ),
        ));
    }
    if let Some(epoch) = append.lease_epoch {
        check_lease(current, epoch)?;
    }
    if let Some(change) = &append.handoff {
        if !current.owner_agent.is_empty() && current.owner_agent != change.from_agent {
            return Err(Error::FailedPrecondition(
                Precondition::NotOwner,
                format!(
                    "session {:?} is owned by agent {:?}, not {:?}; only the owner can hand it off",
                    current.session_id, current.owner_agent, change.from_agent
                ),
            ));
        }
    }
    if let Some(expected) = append.expected_next_seq {
        if expected != current.next_seq {
            return Err(Error::Aborted(format!(
                "expected_next_seq is {expected} but session {:?} has next_seq {}; re-read and retry",
                current.session_id, current.next_seq
            )));
        }
    }
    let first_seq = current.next_seq;
    let turns: Vec<Turn> = append
        .turns
        .iter()
        .zip(&append.token_counts)
        .enumerate()
        .map(|(i, (t, &tokens))| Turn {
            seq: first_seq + i as u64,
            role: t.role,
            speaker: t.speaker.clone(),
            content: t.content.clone(),
            client_time: t.client_time,
            server_time: append.now,
            tool_call: t.tool_call.clone(),
            metadata: t.metadata.clone(),
            token_count: tokens,
        })
        .collect();
    let added: u64 = append.token_counts.iter().map(|&c| u64::from(c)).sum();
    let mut session = current.clone();
    session.turn_count += turns.len() as u64;
    session.next_seq += turns.len() as u64;
    session.total_tokens += added;
    session.updated_at = append.now;
    session.last_active_at = append.now;
    // An append wakes an idle session.
    session.state = SessionState::Active;
    if let Some(change) = &append.handoff {
        session.owner_agent = change.to_agent.clone();
        session.lease_epoch += 1;
    }
    let outcome = AppendOutcome {
        first_seq,
        last_seq: session.next_seq - 1,
        token_counts: append.token_counts.clone(),
        total_tokens: session.total_tokens,
        replayed: false,
    };
    Ok(AppendPlan::Write {
        turns,
        session: Box::new(session),
        outcome,
    })
}
