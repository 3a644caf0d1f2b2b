"""Python client for mnemo, a persistent memory daemon for AI agents.

    from mnemo_client import MnemoClient
    with MnemoClient("127.0.0.1:50051") as mnemo:
        s = mnemo.create_session("support", subject_id="customer:42")
        mnemo.append_turns("support", s.session_id, [{"role": "user", "content": "Hi"}])
        mnemo.put_fact("support", "customer:42", "Prefers email.", key="contact_channel")
        hits = mnemo.search("support", "email", subject_id="customer:42").hits

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
    CarriedAction,
    CompressedTurn,
    ContextBundle,
    Episode,
    Fact,
    FactSource,
    HandoffEvent,
    HandoffResult,
    ManifestEntry,
    PendingActionRef,
    PutFactResult,
    ReviewItem,
    SearchHit,
    SearchResult,
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
    "CarriedAction",
    "CompressedTurn",
    "ContextBundle",
    "DataLoss",
    "DeadlineExceeded",
    "Episode",
    "FailedPrecondition",
    "Fact",
    "FactSource",
    "HandoffEvent",
    "HandoffResult",
    "Internal",
    "InvalidArgument",
    "ManifestEntry",
    "MnemoClient",
    "MnemoError",
    "NotFound",
    "OutOfRange",
    "PendingActionRef",
    "PermissionDenied",
    "PutFactResult",
    "ResourceExhausted",
    "ReviewItem",
    "SearchHit",
    "SearchResult",
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
