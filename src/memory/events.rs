//! What the domain tells the rest of the process after a write is durable:
//! the [`Notifier`] port. The runtime implements it (watch streams, the
//! summary scheduler, idle tracking, the search indexer); the domain never
//! knows who listens, so nothing here points up. An event is a wake-up,
//! not a record: listeners re-read the store for what they need.

use crate::model::{Session, SessionState, SessionSummary};

/// Something that happened, announced after it is durable.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A session was created.
    Created {
        /// The session as stored.
        session: &'a Session,
    },
    /// Turns `first_seq..=last_seq` were appended.
    Appended {
        /// The session after the append.
        session: &'a Session,
        /// First new seq.
        first_seq: u64,
        /// Last new seq.
        last_seq: u64,
        /// Its state before (an append wakes an IDLE session).
        previous_state: SessionState,
    },
    /// A session was closed or went idle (`changed` is false when it
    /// already was).
    Stopped {
        /// The session after the change.
        session: &'a Session,
        /// Whether the state changed now.
        changed: bool,
    },
    /// A session and everything in it was deleted.
    Deleted {
        /// Namespace.
        namespace: &'a str,
        /// Session.
        session_id: &'a str,
    },
    /// A summary version was stored.
    SummaryWritten {
        /// Namespace.
        namespace: &'a str,
        /// Session.
        session_id: &'a str,
        /// The summary.
        summary: &'a SessionSummary,
    },
    /// Facts, episodes or actions changed (the search index has work).
    KnowledgeChanged {
        /// Namespace; `None` when they span namespaces.
        namespace: Option<&'a str>,
        /// The subject they belong to; `None` when not known (or several).
        subject_id: Option<&'a str>,
        /// The session, when they come from one.
        session_id: Option<&'a str>,
    },
    /// The session's last turn was removed; its seq is free again.
    TurnRemoved {
        /// The session after the removal.
        session: &'a Session,
        /// The removed turn's seq.
        seq: u64,
    },
}

/// Receives the domain's events. Implementations must not block: they
/// note the event and return.
pub trait Notifier: Send + Sync {
    /// Called after the write the event names is durable.
    fn notify(&self, event: &Event<'_>);
}

/// A notifier that tells nobody (tools that open the domain without a
/// runtime, and tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct Nobody;

impl Notifier for Nobody {
    fn notify(&self, _: &Event<'_>) {}
}
