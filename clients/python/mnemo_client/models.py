"""The plain Python values `MnemoClient` returns.

Each dataclass mirrors one proto message field for field (the proto's names;
enums as short lower-case names such as ``"user"`` or ``"closed"``;
timestamps as aware UTC `datetime`s, ``None`` when unset), so the proto's
comments in ``proto/mnemo/v1/`` document them. Summaries are nested documents
and are returned as dicts with the same conventions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from google.protobuf.message import Message

from ._convert import message_to_dict

T = TypeVar("T")


@dataclass(frozen=True)
class SessionSettings:
    """Per-session settings with the server's defaults filled in."""

    summary_every_turns: int = 0
    context_limit_tokens: int = 0
    idle_timeout_seconds: int = 0
    encoding: str = "unspecified"  # "cl100k_base" | "o200k_base"
    risk_level: str = "unspecified"  # "normal" | "high"


@dataclass(frozen=True)
class Session:
    """A session with its counters."""

    namespace: str
    session_id: str
    subject_id: str = ""
    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    settings: SessionSettings = field(default_factory=SessionSettings)
    state: str = "active"  # "active" | "closed"
    turn_count: int = 0
    next_seq: int = 1
    total_tokens: int = 0
    create_time: datetime | None = None
    update_time: datetime | None = None
    summary_version: int = 0
    summarized_through_seq: int = 0


@dataclass(frozen=True)
class ToolCall:
    """A tool invocation, exactly as recorded (`arguments_json` is verbatim text)."""

    tool_name: str
    arguments_json: str = ""
    result: str = ""
    status: str = "unspecified"  # "success" | "failure" | "timeout" | "pending" | "unknown"
    error_details: str = ""


@dataclass(frozen=True)
class Turn:
    """A stored turn."""

    seq: int
    role: str  # "user" | "assistant" | "system" | "tool"
    speaker: str = ""
    content: str = ""
    client_time: datetime | None = None
    server_time: datetime | None = None
    tool_call: ToolCall | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    token_count: int = 0


@dataclass(frozen=True)
class AppendResult:
    """What an append wrote (or, with `replayed`, what an earlier identical append wrote)."""

    first_seq: int
    last_seq: int
    token_counts: list[int] = field(default_factory=list)
    total_tokens: int = 0
    replayed: bool = False


@dataclass(frozen=True)
class SummaryInfo:
    """Metadata of one stored summary version."""

    version: int
    covers_through_seq: int = 0
    trigger: str = "unspecified"
    create_time: datetime | None = None
    decisions: int = 0
    pending_actions: int = 0
    open_questions: int = 0


@dataclass(frozen=True)
class AuditRecord:
    """One record of a session's audit log (a summary attempt or a review resolution)."""

    audit_seq: int
    kind: str = "unspecified"  # "summary_attempt" | "review_resolved"
    create_time: datetime | None = None
    summary_version: int = 0
    trigger: str = "unspecified"
    covers_through_seq: int = 0
    pre_summary_tokens: int = 0
    post_summary_tokens: int = 0
    compression_ratio: float = 0.0
    summarizer: str = ""
    covered_turns_sha256: str = ""
    validation_passed: bool = False
    validation_errors: list[str] = field(default_factory=list)
    decisions: int = 0
    pending_actions: int = 0
    open_questions: int = 0
    health_flags: list[str] = field(default_factory=list)
    review_id: str = ""
    review_status: str = "unspecified"
    reviewer: str = ""
    comment: str = ""


@dataclass(frozen=True)
class ReviewItem:
    """A high-risk summary waiting for (or having had) human review."""

    review_id: str
    namespace: str = ""
    session_id: str = ""
    summary_version: int = 0
    items: list[str] = field(default_factory=list)
    status: str = "unspecified"  # "pending" | "approved" | "rejected"
    reviewer: str = ""
    comment: str = ""
    create_time: datetime | None = None
    resolve_time: datetime | None = None


def from_message(cls: type[T], message: Message) -> T:
    """Builds dataclass `cls` from the message it mirrors.

    Fields the dataclass does not know (added to the proto later) are left
    out rather than failing; nested messages become their dataclasses.
    """
    values = message_to_dict(message)
    return _build(cls, values)


_NESTED: dict[tuple[type, str], type] = {
    (Session, "settings"): SessionSettings,
    (Turn, "tool_call"): ToolCall,
}


def _build(cls: type[T], values: dict[str, Any]) -> T:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in values:
            continue
        value = values[f.name]
        nested = _NESTED.get((cls, f.name))
        if nested is not None and value is not None:
            value = _build(nested, value)
        kwargs[f.name] = value
    return cls(**kwargs)
