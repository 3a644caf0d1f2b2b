//! The rules of an append, decided against the stored session: closed
//! sessions take no turns, fencing by lease epoch, only the owner hands a
//! session off, `expected_next_seq`, idempotency replays. Pure: the store
//! runs [`plan`] under its lock and applies the plan it returns.

use crate::error::{Error, Precondition, Result};
use crate::model::{
    AppendOutcome, IdempotencyRecord, NewTurn, Session, SessionState, Turn, UnixNanos,
};
use crate::store::AppendPlan;

/// An append, validated and token-counted, ready to be decided.
#[derive(Debug, Clone)]
pub struct PreparedAppend {
    /// The turns, in order.
    pub turns: Vec<NewTurn>,
    /// Token count of each turn, same order.
    pub token_counts: Vec<u32>,
    /// Optional idempotency key.
    pub idempotency_key: Option<String>,
    /// Fingerprint of the request, to detect a key reused for other turns.
    pub fingerprint: [u8; 32],
    /// Optional optimistic-concurrency check on `next_seq`.
    pub expected_next_seq: Option<u64>,
    /// Optional fencing check: must equal the session's `lease_epoch`.
    pub lease_epoch: Option<u64>,
    /// Set when this append is a handoff's event turn: the ownership
    /// change is written atomically with it.
    pub handoff: Option<OwnerChange>,
    /// Server time to stamp on the turns.
    pub now: UnixNanos,
}

/// The ownership change a handoff makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerChange {
    /// Must be the current owner (or the session must be unclaimed).
    pub from_agent: String,
    /// The new owner.
    pub to_agent: String,
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
/// stored under its idempotency key (if any).
pub fn plan(
    current: &Session,
    previous: Option<&IdempotencyRecord>,
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
        let mut outcome = prev.outcome.clone();
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
        fingerprint: append.fingerprint,
    })
}

/// A request to remove a session's last turn (an undo, e.g. an agent
/// SDK's `pop_item`).
#[derive(Debug, Clone, Copy)]
pub struct Removal {
    /// Remove only if the last turn has this seq (`None`: whichever is).
    pub expected_last_seq: Option<u64>,
    /// Fencing, as for an append.
    pub lease_epoch: Option<u64>,
    /// Server time of the change.
    pub now: UnixNanos,
}

/// Whether the session's stored summary covers `turn`.
pub fn summary_covers(session: &Session, turn: &Turn) -> bool {
    session.summary.through_seq >= turn.seq
}

/// Decides a removal against the session and its last turn: the session
/// without that turn, or `None` when there is no turn to remove. Closed
/// sessions are not changed; fencing and `expected_last_seq` as for an
/// append.
pub fn plan_removal(
    current: &Session,
    last: Option<&Turn>,
    removal: &Removal,
) -> Result<Option<Box<Session>>> {
    if current.state == SessionState::Closed {
        return Err(Error::FailedPrecondition(
            Precondition::SessionClosed,
            format!(
                "session {:?} is closed; its turns can no longer be removed",
                current.session_id
            ),
        ));
    }
    if let Some(epoch) = removal.lease_epoch {
        check_lease(current, epoch)?;
    }
    let last_seq = last.map_or(0, |t| t.seq);
    if let Some(expected) = removal.expected_last_seq {
        if expected != last_seq {
            return Err(Error::Aborted(format!(
                "expected_last_seq is {expected} but session {:?} {}; re-read and retry",
                current.session_id,
                if last_seq == 0 {
                    "has no turns".to_owned()
                } else {
                    format!("ends at seq {last_seq}")
                }
            )));
        }
    }
    let Some(turn) = last else {
        return Ok(None);
    };
    let mut session = current.clone();
    session.turn_count = session.turn_count.saturating_sub(1);
    session.next_seq = turn.seq;
    session.removed_turns += 1;
    session.total_tokens = session
        .total_tokens
        .saturating_sub(u64::from(turn.token_count));
    session.updated_at = removal.now;
    session.last_active_at = removal.now;
    session.state = SessionState::Active;
    // The summary covered the removed turn: its recorded progress drops
    // below what the stored summary covers, which marks it for a refold
    // from turn 1 (`summary::is_rewound`).
    let covered = summary_covers(current, turn);
    let progress = &mut session.summary;
    if covered {
        progress.through_seq = turn.seq - 1;
        progress.through_tokens = progress.through_tokens.min(session.total_tokens);
        progress.attempted_through_seq = progress.attempted_through_seq.min(turn.seq - 1);
    }
    Ok(Some(Box::new(session)))
}
