"""Exceptions raised by `MnemoClient`: one `MnemoError` subclass per gRPC status.

Every failed call raises a subclass named after the gRPC status code, so
callers catch what they can act on (`NotFound`, `Aborted`, ...) and still get
the code name and the server's message, which names the field or the limit.
This module does not decide what to retry; the client does.
"""

from __future__ import annotations

import grpc


class MnemoError(Exception):
    """A mnemo call failed. `code` is the gRPC status code name, e.g. ``"NOT_FOUND"``."""

    status_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.status_code.name

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Cancelled(MnemoError):
    """The call was cancelled, usually by the caller."""

    status_code = grpc.StatusCode.CANCELLED


class Unknown(MnemoError):
    """The server or the transport failed without a more precise code."""

    status_code = grpc.StatusCode.UNKNOWN


class InvalidArgument(MnemoError):
    """A field failed validation or a limit; the message names the field and the limit."""

    status_code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(MnemoError):
    """No answer within the call's deadline (the write may or may not have happened)."""

    status_code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(MnemoError):
    """No such session, summary version, review item, fact or pending action."""

    status_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(MnemoError):
    """The namespace already holds a session with that id."""

    status_code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(MnemoError):
    """The API key is valid but not for this namespace, or its role (read < write < admin)
    is below what the call needs."""

    status_code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(MnemoError):
    """A request or response over the server's message-size limit, too many open
    watches in the namespace, or a watch that fell behind.

    For a watch that fell behind, `resume_from_seq` is the ``from_seq`` that
    resumes it without losing a turn; otherwise it is None.
    """

    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    resume_from_seq: int | None = None


class FailedPrecondition(MnemoError):
    """The state forbids it: a closed session, a reused idempotency key, no turns yet,
    a stale lease epoch (the session was handed off; the message names the owner),
    a handoff not from the owner, or a review item already resolved.

    `reason` says which, for programs: ``"STALE_LEASE_EPOCH"``, ``"LEASE_EPOCH_AHEAD"``,
    ``"NOT_OWNER"``, ``"SESSION_CLOSED"``, ``"IDEMPOTENCY_KEY_REUSED"``, ``"NO_TURNS"``
    or ``"ALREADY_RESOLVED"`` (None from a daemon that does not send it).
    """

    status_code = grpc.StatusCode.FAILED_PRECONDITION
    reason: str | None = None


class Aborted(MnemoError):
    """Optimistic-concurrency conflict (`expected_next_seq`); re-read and retry."""

    status_code = grpc.StatusCode.ABORTED


class OutOfRange(MnemoError):
    """A value past the valid range."""

    status_code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(MnemoError):
    """The server does not offer this RPC (an older daemon)."""

    status_code = grpc.StatusCode.UNIMPLEMENTED


class Internal(MnemoError):
    """Server-side failure."""

    status_code = grpc.StatusCode.INTERNAL


class Unavailable(MnemoError):
    """The daemon cannot be reached or its storage is unavailable."""

    status_code = grpc.StatusCode.UNAVAILABLE


class DataLoss(MnemoError):
    """A stored record failed its checksum; the message names the session."""

    status_code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(MnemoError):
    """No API key, or one the daemon does not know (mistyped, revoked, or for another daemon)."""

    status_code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[MnemoError]] = {
    cls.status_code: cls for cls in MnemoError.__subclasses__()
}


# Trailer of a lagged watch's status: the seq to resume from.
RESUME_FROM_SEQ_TRAILER = "mnemo-resume-from-seq"
# Trailer of a FAILED_PRECONDITION status: why, as a stable name.
REASON_TRAILER = "mnemo-reason"


def error_from_rpc(error: grpc.RpcError) -> MnemoError:
    """The `MnemoError` subclass for a failed gRPC call."""
    # A failed call (unary or streaming) is both an RpcError and a grpc.Call.
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = error.details() if isinstance(error, grpc.Call) else str(error)
    message = details or code.name.lower().replace("_", " ")
    result = _BY_CODE.get(code, Unknown)(message, code.name)
    if isinstance(result, ResourceExhausted) and isinstance(error, grpc.Call):
        result.resume_from_seq = _resume_from_seq(error)
    if isinstance(result, FailedPrecondition) and isinstance(error, grpc.Call):
        result.reason = _trailer(error, REASON_TRAILER)
    return result


def _trailer(call: grpc.Call, name: str) -> str | None:
    for key, value in call.trailing_metadata() or ():
        if key == name:
            return value if isinstance(value, str) else None
    return None


def _resume_from_seq(call: grpc.Call) -> int | None:
    value = _trailer(call, RESUME_FROM_SEQ_TRAILER)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None  # a malformed trailer is no reason to hide the error itself
