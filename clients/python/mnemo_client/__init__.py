"""Python client for mnemo, a persistent memory daemon for AI agents.

    from mnemo_client import MnemoClient
    with MnemoClient("127.0.0.1:50051") as mnemo:
        s = mnemo.create_session("support", subject_id="customer:42")
        mnemo.append_turns("support", s.session_id, [{"role": "user", "content": "Hi"}])

The gRPC stubs in `mnemo_client._gen` are generated from the repository's
proto/ when the package is built; `MnemoClient` is the supported interface.
"""

from .client import MnemoClient, SessionWatch
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MnemoError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from .models import (
    AppendResult,
    AuditRecord,
    BundleManifest,
    CompressedTurn,
    ContextBundle,
    HandoffEvent,
    HandoffResult,
    ManifestEntry,
    ReviewItem,
    SeqRange,
    Session,
    SessionSettings,
    StateChanged,
    SummaryInfo,
    SummaryWritten,
    ToolCall,
    Turn,
    WatchEvent,
)

__all__ = [
    "Aborted",
    "AlreadyExists",
    "AppendResult",
    "AuditRecord",
    "BundleManifest",
    "Cancelled",
    "CompressedTurn",
    "ContextBundle",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "HandoffEvent",
    "HandoffResult",
    "Internal",
    "InvalidArgument",
    "ManifestEntry",
    "MnemoClient",
    "MnemoError",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "ReviewItem",
    "SeqRange",
    "Session",
    "SessionSettings",
    "SessionWatch",
    "StateChanged",
    "SummaryInfo",
    "SummaryWritten",
    "ToolCall",
    "Turn",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "WatchEvent",
]
