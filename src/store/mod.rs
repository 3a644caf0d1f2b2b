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
pub mod engine;
pub mod keys;
mod kv;

use serde::{Deserialize, Serialize};

pub use self::kv::{KvStore, MemoryStore, SledStore};
use crate::error::{Error, Result};
use crate::memory::types::{
    AppendOutcome, PreparedAppend, Session, SessionFilter, SessionState, Turn,
};

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
pub trait Store: Send + Sync + 'static {
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
    fn append_turns(
        &self,
        ns: &str,
        session_id: &str,
        append: &PreparedAppend,
    ) -> Result<AppendOutcome>;

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

    /// Makes every write that returned before this call durable on disk.
    fn sync(&self) -> Result<()>;
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

/// Decides an append against the session's current state and the record
/// stored under its idempotency key (if any). Pure: no I/O.
pub fn plan_append(
    current: &Session,
    previous: Option<IdempotencyRecord>,
    append: &PreparedAppend,
) -> Result<AppendPlan> {
    if let Some(prev) = previous {
        if prev.fingerprint != append.fingerprint {
            return Err(Error::FailedPrecondition(format!(
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
        return Err(Error::FailedPrecondition(format!(
            "session {:?} is closed and accepts no more turns",
            current.session_id
        )));
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
