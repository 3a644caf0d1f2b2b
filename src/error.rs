//! The one error type of mnemo's library, named after what the caller can do
//! about it. Every layer returns this type; the API layer's
//! `From<Error> for tonic::Status` (`api::status`) alone decides status
//! codes.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, grouped by what the caller should do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request is malformed or over a limit; fix it before retrying.
    #[error("{0}")]
    InvalidArgument(String),
    /// The named thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The named thing already exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// The target's state forbids the operation (e.g. a closed session);
    /// the reason is for programs, the message for people.
    #[error("{1}")]
    FailedPrecondition(Precondition, String),
    /// An optimistic-concurrency check failed; re-read and retry.
    #[error("{0}")]
    Aborted(String),
    /// A server resource or limit is exhausted; retry later or send less.
    #[error("{0}")]
    ResourceExhausted(String),
    /// A watcher fell behind its bounded buffer; it may reconnect from
    /// `resume_from_seq` and lose nothing.
    #[error(
        "the watcher fell behind and was disconnected; resume with from_seq={resume_from_seq}"
    )]
    Lagged {
        /// The first seq the watcher has not received.
        resume_from_seq: u64,
    },
    /// The caller sent no API key, or one the daemon does not know.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's key does not allow this namespace or operation.
    #[error("{0}")]
    PermissionDenied(String),
    /// The daemon is shutting down; retry against it once it is back.
    #[error("{0}")]
    Unavailable(String),
    /// Stored data failed verification (checksum or decoding). The message
    /// names the session; other sessions are unaffected.
    #[error("{0}")]
    DataLoss(String),
    /// The storage engine failed (I/O error, disk full); the operation may
    /// be retried once the cause is fixed.
    #[error("storage error: {0}")]
    Storage(String),
    /// A bug or an unexpected condition inside mnemo.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`] from anything displayable.
    pub fn invalid(msg: impl fmt::Display) -> Self {
        Error::InvalidArgument(msg.to_string())
    }

    /// A session that does not exist.
    pub fn session_not_found(namespace: &str, session_id: &str) -> Self {
        Error::NotFound(format!(
            "session {session_id:?} not found in namespace {namespace:?}"
        ))
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        match e {
            sled::Error::Corruption { at, .. } => {
                Error::DataLoss(format!("storage engine reports corruption at {at:?}"))
            }
            other => Error::Storage(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

/// Why a request met FAILED_PRECONDITION, sent to clients as the
/// `mnemo-reason` trailer so programs can branch without parsing messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// A write carried a lease epoch older than the session's: a handoff
    /// moved the session, and this writer must stop.
    StaleLeaseEpoch,
    /// A write carried a lease epoch newer than the session's.
    LeaseEpochAhead,
    /// A handoff named a `from_agent` that does not own the session.
    NotOwner,
    /// The session is closed and accepts no more turns.
    SessionClosed,
    /// An idempotency key was reused for a different append or handoff.
    IdempotencyKeyReused,
    /// The session has no turns to summarize.
    NoTurns,
    /// The review item was already resolved.
    AlreadyResolved,
    /// An import would overwrite data the target already holds.
    ImportConflict,
    /// The session's subject is being erased.
    SubjectErasing,
}

impl Precondition {
    /// The reason as sent in the trailer, e.g. `STALE_LEASE_EPOCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precondition::StaleLeaseEpoch => "STALE_LEASE_EPOCH",
            Precondition::LeaseEpochAhead => "LEASE_EPOCH_AHEAD",
            Precondition::NotOwner => "NOT_OWNER",
            Precondition::SessionClosed => "SESSION_CLOSED",
            Precondition::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            Precondition::NoTurns => "NO_TURNS",
            Precondition::AlreadyResolved => "ALREADY_RESOLVED",
            Precondition::ImportConflict => "IMPORT_CONFLICT",
            Precondition::SubjectErasing => "SUBJECT_ERASING",
        }
    }
}
