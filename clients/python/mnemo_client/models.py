"""The plain Python values `MnemoClient` returns.

Each dataclass mirrors one proto message field for field (the proto's names;
enums as short lower-case names such as ``"user"`` or ``"closed"``;
timestamps as aware UTC `datetime`s, ``None`` when unset), so the proto's
comments in ``proto/mnemo/v1/`` document them. Summaries are nested documents
and are returned as dicts with the same conventions; so are the summary items
(pending actions, open questions, decisions, key facts) a `ContextBundle`
carries, which have exactly the shape they have in a summary dict, and the
decisions and pending actions of an `Episode`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, Union

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
    fact_extraction: str = "unspecified"  # "enabled" | "disabled"


@dataclass(frozen=True)
class Session:
    """A session with its counters."""

    namespace: str
    session_id: str
    subject_id: str = ""
    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    settings: SessionSettings = field(default_factory=SessionSettings)
    state: str = "active"  # "active" | "idle" | "closed"
    turn_count: int = 0
    next_seq: int = 1
    total_tokens: int = 0
    create_time: datetime | None = None
    update_time: datetime | None = None
    summary_version: int = 0
    summarized_through_seq: int = 0
    owner_agent: str = ""  # empty when no agent claimed the session
    lease_epoch: int = 0  # the fencing token appends and handoffs must carry
    last_active_time: datetime | None = None
    turns_removed: TurnsRemoved | None = None  # GetSession/ListSessions: retention removed its first turns


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
    reviewer_key: str = ""  # the API key name that resolved it ("anyone" without auth)


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
    reviewer_key: str = ""  # the API key name that resolved it ("anyone" without auth)


@dataclass(frozen=True)
class TurnsRemoved:
    """Turns a retention policy removed from the start of a closed session: seqs
    1..through_seq are gone; what cites them can no longer be looked up."""

    through_seq: int = 0
    count: int = 0
    remove_time: datetime | None = None


@dataclass(frozen=True)
class SeqRange:
    """An inclusive range of turn seqs."""

    first_seq: int
    last_seq: int

    def seqs(self) -> range:
        """The seqs of the range, e.g. to pass to `list_turns` or to test membership."""
        return range(self.first_seq, self.last_seq + 1)


@dataclass(frozen=True)
class ManifestEntry:
    """What one section of a bundle held, shortened and left out (for the budget)."""

    section: str  # "header" | "pending_actions" | ... | "facts" | "episodes" | "recalled"
    available: int = 0
    included: int = 0
    shortened: int = 0
    omitted: int = 0
    included_seqs: list[SeqRange] = field(default_factory=list)
    shortened_seqs: list[SeqRange] = field(default_factory=list)
    omitted_seqs: list[SeqRange] = field(default_factory=list)  # read them with list_turns
    tokens: int = 0


@dataclass(frozen=True)
class RecalledRef:
    """Memory retrieved for a bundle that did not fit: a turn (`session_id`, `seq`) or a fact (`fact_id`)."""

    session_id: str = ""  # a turn's or an episode's session; empty for a fact
    seq: int = 0  # a turn's seq; 0 otherwise
    fact_id: str = ""  # a fact's id; empty otherwise
    rank: int = 0  # its rank among what was retrieved, from 1


@dataclass(frozen=True)
class BundleManifest:
    """The accounting of a bundle: every turn through `as_of_seq` is summarized,
    included (whole or shortened) or listed as omitted."""

    sections: list[ManifestEntry] = field(default_factory=list)  # in priority order
    summary_version: int = 0
    summarized: SeqRange | None = None  # None when there is no summary yet
    complete: bool = False  # nothing shortened or omitted
    recalled_left_out: list[RecalledRef] = field(default_factory=list)  # retrieved, but did not fit
    transcript: bool = False  # the whole session fitted: the bundle is its transcript, verbatim
    turns_removed: TurnsRemoved | None = None  # set when retention removed the session's first turns
    # how the budget was split: "state" (no query) | "request" (a query); bundles of one layout share their beginning
    layout: str = "unspecified"

    def section(self, name: str) -> ManifestEntry | None:
        """The entry of section `name` (e.g. ``"recent_turns"``); None when it had nothing to offer."""
        return next((e for e in self.sections if e.section == name), None)


@dataclass(frozen=True)
class CompressedTurn:
    """A turn shortened for a bundle."""

    seq: int
    role: str
    speaker: str = ""
    text: str = ""
    shortened: bool = False  # True when `text` is shorter than the turn


# Long-term memory (knowledge.proto): facts, episodes, carried actions, search.


@dataclass(frozen=True)
class FactSource:
    """Where a fact was stated: a turn of a session (`seq` 0 = the session as a whole)."""

    session_id: str
    seq: int = 0
    turn_removed: bool = False  # GetFact/ListFacts: a retention policy removed the cited turn


@dataclass(frozen=True)
class Fact:
    """A durable fact or preference about a subject; never changed in place.

    A new fact with the same key supersedes it: the old version stays
    readable with `superseded_by` set to the new version's id.
    """

    namespace: str
    fact_id: str
    subject_id: str = ""
    key: str = ""  # empty for an unkeyed fact
    text: str = ""
    sources: list[FactSource] = field(default_factory=list)  # the first is the original
    tags: list[str] = field(default_factory=list)
    origin: str = "unspecified"  # "client" | "extracted"
    supersedes: str = ""  # the version this one replaced; empty for a first version
    superseded_by: str = ""  # empty while it is current
    create_time: datetime | None = None
    update_time: datetime | None = None


@dataclass(frozen=True)
class PutFactResult:
    """What `put_fact` did: the fact as stored now and how it got there."""

    fact: Fact  # for "merged", the existing fact the put was merged into
    outcome: str  # "created" | "superseded" | "merged"
    superseded: Fact | None = None  # for "superseded": the previous version, now with superseded_by set


@dataclass(frozen=True)
class Episode:
    """A past session of a subject, as its final summary left it (one per session).

    `decisions` and `pending_actions` are dicts shaped as in a summary; the
    pending actions are those still open (done ones leave).
    """

    namespace: str
    episode_id: str  # the session id
    subject_id: str = ""
    session_id: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None
    topic: str = ""
    outcome: str = "unspecified"  # "in_progress" | "resolved" | "unresolved_follow_up" | "completed"
    prose: str = ""
    user_intent: str = ""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    pending_actions: list[dict[str, Any]] = field(default_factory=list)
    summary_version: int = 0
    last_seq: int = 0
    ended_as: str = "unspecified"  # "closed" | "idle"
    turns_removed: TurnsRemoved | None = None  # set when retention removed turns of its session


@dataclass(frozen=True)
class PendingActionRef:
    """A pending action: the session whose summary holds it and the seq of the turn that raised it
    (the action's first evidence seq). Pass both to `update_pending_action`."""

    session_id: str
    action_seq: int


@dataclass(frozen=True)
class CarriedAction:
    """A pending action carried over into a bundle from a past session of the subject."""

    ref: PendingActionRef
    action: dict[str, Any]  # shaped as a summary's pending action


@dataclass(frozen=True)
class SearchHit:
    """One search result; which id fields are set depends on `kind`."""

    kind: str  # "turn" | "fact" | "episode"
    score: float = 0.0  # BM25; comparable within one response only
    snippet: str = ""
    subject_id: str = ""
    session_id: str = ""  # turns and episodes
    seq: int = 0  # turns
    fact_id: str = ""  # facts
    episode_id: str = ""  # episodes
    role: str = "unspecified"  # turns: "user" | "assistant" | "system" | "tool"


@dataclass(frozen=True)
class SearchResult:
    """Search hits, best first, and how many writes the index had not caught up with yet."""

    hits: list[SearchHit] = field(default_factory=list)
    index_lag: int = 0  # 0 = the index was up to date; deleted sessions and facts never appear


@dataclass(frozen=True)
class RecalledMemory:
    """Memory retrieved for a bundle's request (its query; none without one), verbatim.

    One of: turns of this or an earlier session of the subject (`hit_seq` the
    one that matched, plus the neighbour completing its question/answer pair
    when it fitted), a current `fact`, or an `episode`.
    """

    session_id: str = ""  # the turns' or the episode's session; empty for a fact
    turns: list[Turn] = field(default_factory=list)  # oldest first
    hit_seq: int = 0  # the turn that matched; 0 for a fact or an episode
    fact: Fact | None = None
    episode: Episode | None = None
    rank: int = 0  # from 1


@dataclass(frozen=True)
class ContextBundle:
    """What an agent loads to continue a session, within a token budget.

    `rendered_text` is ready for a system prompt; the structured fields hold
    exactly what it shows. Summary items are dicts shaped as in `summarize()`.
    For a session with a subject, `carried_actions`, `facts` and `episodes`
    bring in what the subject's past sessions left (long-term memory).
    """

    namespace: str
    session_id: str
    subject_id: str = ""
    state: str = "active"
    owner_agent: str = ""
    lease_epoch: int = 0
    as_of_seq: int = 0
    encoding: str = "unspecified"
    budget_tokens: int = 0
    token_count: int = 0  # never above budget_tokens
    rendered_text: str = ""
    user_intent: str = ""
    prose: str = ""
    pending_actions: list[dict[str, Any]] = field(default_factory=list)
    open_questions: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    key_facts: list[dict[str, Any]] = field(default_factory=list)
    recent_turns: list[Turn] = field(default_factory=list)  # verbatim, oldest first
    earlier_turns: list[CompressedTurn] = field(default_factory=list)  # shortened, oldest first
    manifest: BundleManifest = field(default_factory=BundleManifest)
    carried_actions: list[CarriedAction] = field(default_factory=list)  # open actions of past sessions
    facts: list[Fact] = field(default_factory=list)  # the subject's current facts that fit
    episodes: list[Episode] = field(default_factory=list)  # the subject's past sessions that fit
    recalled: list[RecalledMemory] = field(default_factory=list)  # retrieved for the request, best first
    # `rendered_text` runs from the most stable to the most volatile: (1) header,
    # the subject's memory and the summary (the same until the session is folded
    # or the subject's memory changes), (2) the turns since the fold, append-only,
    # (3) what the request decides. Where parts 1 and 2 end, in tokens (exact, in
    # `encoding`) and in UTF-8 bytes; see `mnemo_client.prompt` for cache breakpoints.
    stable_end_tokens: int = 0
    stable_end_bytes: int = 0
    log_end_tokens: int = 0
    log_end_bytes: int = 0

    def parts(self) -> tuple[str, str, str]:
        """The text's three parts: stable, log (turns since the fold), request's."""
        raw = self.rendered_text.encode("utf-8")
        a, b = self.stable_end_bytes, self.log_end_bytes
        return raw[:a].decode("utf-8"), raw[a:b].decode("utf-8"), raw[b:].decode("utf-8")


@dataclass(frozen=True)
class HandoffResult:
    """What a handoff did: the session with its new owner and epoch, and the new owner's bundle."""

    session: Session
    lease_epoch: int  # pass it to the new owner's append_turns and next handoff
    event_seq: int  # the handoff event turn (role "system")
    summary: dict[str, Any] | None  # trigger "handoff"; None when validation refused it
    bundle: ContextBundle
    replayed: bool = False  # a retry with the same idempotency key: nothing was written


# Watch events: `MnemoClient.watch` yields `Turn`s and the three below.


@dataclass(frozen=True)
class SummaryWritten:
    """A summary version was written."""

    version: int
    covers_through_seq: int = 0
    trigger: str = "unspecified"


@dataclass(frozen=True)
class HandoffEvent:
    """The session changed owner; it follows its event turn (seq `seq`)."""

    from_agent: str
    to_agent: str
    reason: str = ""
    lease_epoch: int = 0
    seq: int = 0


@dataclass(frozen=True)
class StateChanged:
    """The session's state changed ("active" | "idle" | "closed"); live only, never replayed."""

    state: str
    at_seq: int = 0


WatchEvent = Union[Turn, SummaryWritten, HandoffEvent, StateChanged]


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
    (ManifestEntry, "included_seqs"): SeqRange,
    (ManifestEntry, "shortened_seqs"): SeqRange,
    (ManifestEntry, "omitted_seqs"): SeqRange,
    (BundleManifest, "sections"): ManifestEntry,
    (BundleManifest, "summarized"): SeqRange,
    (BundleManifest, "recalled_left_out"): RecalledRef,
    (ContextBundle, "recent_turns"): Turn,
    (ContextBundle, "earlier_turns"): CompressedTurn,
    (ContextBundle, "manifest"): BundleManifest,
    (ContextBundle, "carried_actions"): CarriedAction,
    (ContextBundle, "facts"): Fact,
    (ContextBundle, "episodes"): Episode,
    (ContextBundle, "recalled"): RecalledMemory,
    (RecalledMemory, "turns"): Turn,
    (RecalledMemory, "fact"): Fact,
    (RecalledMemory, "episode"): Episode,
    (Fact, "sources"): FactSource,
    (PutFactResult, "fact"): Fact,
    (PutFactResult, "superseded"): Fact,
    (CarriedAction, "ref"): PendingActionRef,
    (SearchResult, "hits"): SearchHit,
    (HandoffResult, "session"): Session,
    (HandoffResult, "bundle"): ContextBundle,
}


def _build(cls: type[T], values: dict[str, Any]) -> T:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in values:
            continue
        value = values[f.name]
        nested = _NESTED.get((cls, f.name))
        if nested is not None and isinstance(value, list):
            value = [_build(nested, v) for v in value]
        elif nested is not None and value is not None:
            value = _build(nested, value)
        kwargs[f.name] = value
    return cls(**kwargs)
