//! The one mapping from the domain's [`Error`] to a gRPC `Status`, and the
//! names of the headers and trailers mnemo adds to responses. Nothing
//! below this layer knows about gRPC.

use crate::error::Error;

/// Response header of WatchSession: the seq of the first turn the stream
/// carries (for a live-only watch, the seq the next append gets).
pub const FIRST_SEQ_HEADER: &str = "mnemo-first-seq";

/// Metadata of a consistency token: set on the response of every write
/// that search can see, and honoured on a `Search` or `GetContextBundle`
/// request (the answer then sees that write, or the call fails with
/// UNAVAILABLE naming the index lag).
pub const CONSISTENCY_TOKEN: &str = "mnemo-consistency-token";

/// Longest status message sent. Messages quote what the client sent (an
/// id, a key); a huge one would not fit in the response's headers and the
/// client would see its call cancelled instead of the error.
pub const MAX_MESSAGE_BYTES: usize = 1024;

fn clipped(mut msg: String) -> String {
    if msg.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push_str("… (message shortened)");
    }
    msg
}

/// Trailer of a FAILED_PRECONDITION status: the [`Precondition`](crate::error::Precondition) reason.
pub const REASON: &str = "mnemo-reason";

/// Trailer of a lagged watcher's status: the seq to resume from.
pub const RESUME_FROM_SEQ: &str = "mnemo-resume-from-seq";

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        use tonic::Code;
        let code = match &e {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::FailedPrecondition(..) => Code::FailedPrecondition,
            Error::Aborted(_) => Code::Aborted,
            Error::ResourceExhausted(_) | Error::Lagged { .. } => Code::ResourceExhausted,
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::PermissionDenied(_) => Code::PermissionDenied,
            Error::Unavailable(_) => Code::Unavailable,
            Error::DataLoss(_) => Code::DataLoss,
            Error::Storage(_) => Code::Unavailable,
            Error::Internal(_) => Code::Internal,
        };
        let mut status = tonic::Status::new(code, clipped(e.to_string()));
        match e {
            Error::Lagged { resume_from_seq } => {
                status
                    .metadata_mut()
                    .insert(RESUME_FROM_SEQ, resume_from_seq.into());
            }
            Error::FailedPrecondition(reason, _) => {
                status.metadata_mut().insert(
                    REASON,
                    tonic::metadata::MetadataValue::from_static(reason.as_str()),
                );
            }
            _ => {}
        }
        status
    }
}
