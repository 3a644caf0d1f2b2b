"""`MnemoClient`: a small synchronous wrapper over mnemo's gRPC API.

Methods take and return plain Python values (dicts, dataclasses from
`mnemo_client.models`) and raise `MnemoError` subclasses. Every unary call
has a deadline; a watch has one only when asked, since it is meant to stay
open. Only calls that are safe to repeat are retried, with exponential
backoff and jitter, on UNAVAILABLE and DEADLINE_EXCEEDED: reads (context
bundles and searches included), appends that carry an idempotency key (the
server replays those instead of writing twice), fact puts (a repeated put
merges into the fact the first one stored) and pending-action updates
(setting a status twice changes nothing more). Everything else, handoffs
and fact deletions included, is tried once, so a lost answer surfaces as an
error instead of a duplicate write.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable, Literal, TypeVar, overload

import grpc
from google.protobuf.message import Message

from ._convert import enum_value_name, fill_message, message_to_dict
from .errors import error_from_rpc
from .models import (
    AppendResult,
    AuditRecord,
    ContextBundle,
    Episode,
    Fact,
    HandoffEvent,
    HandoffResult,
    PutFactResult,
    ReviewItem,
    SearchResult,
    Session,
    SessionSettings,
    StateChanged,
    SummaryInfo,
    SummaryWritten,
    Turn,
    WatchEvent,
    from_message,
)

try:
    from ._gen import context_pb2, knowledge_pb2, memory_service_pb2_grpc, session_pb2, summary_pb2
except ModuleNotFoundError as e:  # the source tree has no stubs; they are made at build time
    if not (e.name or "").startswith(f"{__package__}._gen"):
        raise
    raise ImportError(
        "mnemo_client's gRPC stubs are missing: they are generated when the package is "
        "built, so install it (pip install ./clients/python) instead of importing the source tree"
    ) from e

T = TypeVar("T")

SummaryFormat = Literal["structured", "json", "markdown"]

# Codes after which repeating an idempotent call can succeed.
# Response header of WatchSession: the seq of the first turn the stream carries.
FIRST_SEQ_HEADER = "mnemo-first-seq"
# Set on the response of every write search can see; sent back on a read,
# the read sees that write (or fails with UNAVAILABLE naming the lag).
CONSISTENCY_TOKEN_HEADER = "mnemo-consistency-token"
_READS_AFTER_TOKEN = frozenset({"Search", "GetContextBundle"})
_RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_BACKOFF_BASE_SECONDS = 0.1
_BACKOFF_MAX_SECONDS = 2.0
# The server bounds a waiting Summarize by its request timeout (30 s by
# default); the client waits a little longer so the server's answer wins.
_SUMMARIZE_WAIT_SECONDS = 35.0


class MnemoClient:
    """A connection to a mnemo daemon.

    `address` is ``host:port`` (an ``http://`` or ``https://`` prefix is
    accepted; ``https://`` implies TLS). `tls` trusts the system's
    certificate store, which `root_certificates` (PEM bytes or a path to a
    PEM file) replaces; `client_cert` and `client_key` (the same forms,
    given together) are the certificate chain and private key of mutual
    TLS. Any of these three implies `tls`. `api_key` is sent as
    ``authorization: Bearer <key>`` on every call: a daemon with keys
    configured answers a call without a key it knows with `Unauthenticated`,
    and one outside the key's namespace or above its role with
    `PermissionDenied`.
    `timeout` is the deadline of one attempt in seconds (each method also
    takes a `timeout` override); `retries` is how many times an idempotent
    call is repeated after UNAVAILABLE or DEADLINE_EXCEEDED.

    Use it as a context manager, or call `close()`, to release the channel.
    List methods return lazy iterators that fetch page after page, so their
    errors surface while iterating.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        api_key: str | None = None,
        tls: bool = False,
        root_certificates: bytes | str | os.PathLike[str] | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        *,
        client_cert: bytes | str | os.PathLike[str] | None = None,
        client_key: bytes | str | os.PathLike[str] | None = None,
        options: Iterable[tuple[str, Any]] = (),
    ) -> None:
        if address.startswith("https://"):
            address, tls = address[len("https://") :], True
        elif address.startswith("http://"):
            address = address[len("http://") :]
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if (client_cert is None) != (client_key is None):
            raise ValueError("client_cert and client_key go together")
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {api_key}"),) if api_key else ()
        )
        # The consistency token of this client's last write: sent with every
        # search and bundle, so they see that write whichever daemon answers
        # (a single daemon already answers reads after its own writes).
        self.consistency_token: str | None = None
        if tls or root_certificates is not None or client_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(root_certificates),
                private_key=_pem(client_key),
                certificate_chain=_pem(client_cert),
            )
            self._channel = grpc.secure_channel(address, credentials, options=list(options))
        else:
            self._channel = grpc.insecure_channel(address, options=list(options))
        self._stub = memory_service_pb2_grpc.MemoryServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> MnemoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Sessions

    def create_session(
        self,
        namespace: str,
        session_id: str = "",
        *,
        subject_id: str = "",
        title: str = "",
        metadata: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | SessionSettings | None = None,
        owner_agent: str = "",
        timeout: float | None = None,
    ) -> Session:
        """Starts a session; the server generates a ULID when `session_id` is empty.

        `settings` keys: summary_every_turns, context_limit_tokens,
        idle_timeout_seconds, encoding ("cl100k_base" | "o200k_base"),
        risk_level ("normal" | "high"), fact_extraction ("enabled" |
        "disabled": whether the session's summaries and the user's stated
        preferences become facts of its subject); missing or zero ones take
        defaults.
        `owner_agent` is the agent that owns the session at first (empty =
        unclaimed); the session starts at ``lease_epoch`` 1.
        """
        request = session_pb2.CreateSessionRequest(
            namespace=namespace,
            session_id=session_id,
            subject_id=subject_id,
            title=title,
            owner_agent=owner_agent,
        )
        request.metadata.update(metadata or {})
        if settings is not None:
            fill_message(request.settings, settings, path="settings")
        response = self._call("CreateSession", request, idempotent=False, timeout=timeout)
        return from_message(Session, response.session)

    def get_session(self, namespace: str, session_id: str, *, timeout: float | None = None) -> Session:
        """One session with its counters."""
        request = session_pb2.GetSessionRequest(namespace=namespace, session_id=session_id)
        response = self._call("GetSession", request, idempotent=True, timeout=timeout)
        return from_message(Session, response.session)

    def list_sessions(
        self,
        namespace: str,
        *,
        subject_id: str = "",
        state: str | None = None,
        page_size: int = 0,
        timeout: float | None = None,
    ) -> Iterator[Session]:
        """The namespace's sessions in id order, optionally by subject and state
        ("active" | "idle" | "closed")."""
        request = session_pb2.ListSessionsRequest(
            namespace=namespace,
            subject_id=subject_id,
            state=enum_value_name(session_pb2.SessionState.DESCRIPTOR, state or "unspecified"),
            page_size=page_size,
        )
        return self._pages("ListSessions", request, "sessions", lambda m: from_message(Session, m), timeout)

    def close_session(self, namespace: str, session_id: str, *, timeout: float | None = None) -> Session:
        """Closes a session (readable, no more appends); closing twice is a no-op."""
        request = session_pb2.CloseSessionRequest(namespace=namespace, session_id=session_id)
        response = self._call("CloseSession", request, idempotent=False, timeout=timeout)
        return from_message(Session, response.session)

    def delete_session(self, namespace: str, session_id: str, *, timeout: float | None = None) -> int:
        """Deletes a session with every turn; returns how many turns were removed."""
        request = session_pb2.DeleteSessionRequest(namespace=namespace, session_id=session_id)
        response = self._call("DeleteSession", request, idempotent=False, timeout=timeout)
        return int(response.deleted_turns)

    # Turns

    def append_turns(
        self,
        namespace: str,
        session_id: str,
        turns: Iterable[Mapping[str, Any]],
        *,
        idempotency_key: str = "",
        expected_next_seq: int = 0,
        lease_epoch: int = 0,
        timeout: float | None = None,
    ) -> AppendResult:
        """Appends turns atomically; returns once they are durable.

        Each turn is a dict with ``role`` ("user" | "assistant" | "system" |
        "tool"), and optionally ``speaker``, ``content``, ``client_time`` (a
        datetime), ``metadata`` (str -> str) and ``tool_call`` (a dict with
        ``tool_name``, ``arguments_json`` (JSON text, kept verbatim),
        ``result``, ``status`` ("success" | "failure" | "timeout" | "pending" |
        "unknown"), ``error_details``). Unknown keys raise ValueError.

        With `idempotency_key`, a repeat returns the first result with
        ``replayed=True`` and writes nothing, so the call is retried on
        transient errors. With `expected_next_seq`, a session whose next seq
        differs raises `Aborted`. With `lease_epoch` (fencing for agents that
        hand sessions to each other), an epoch other than the session's
        current one raises `FailedPrecondition` naming the current owner;
        0 skips the check.
        """
        request = session_pb2.AppendTurnsRequest(
            namespace=namespace,
            session_id=session_id,
            idempotency_key=idempotency_key,
            expected_next_seq=expected_next_seq,
            lease_epoch=lease_epoch,
        )
        for i, turn in enumerate(turns):
            if "role" not in turn:
                raise ValueError(f"turns[{i}]: role is required")
            fill_message(request.turns.add(), turn, path=f"turns[{i}]")
        response = self._call("AppendTurns", request, idempotent=bool(idempotency_key), timeout=timeout)
        return from_message(AppendResult, response)

    def list_turns(
        self,
        namespace: str,
        session_id: str,
        *,
        from_seq: int = 0,
        to_seq: int = 0,
        page_size: int = 0,
        timeout: float | None = None,
    ) -> Iterator[Turn]:
        """Turns oldest first, within `from_seq`..`to_seq` (inclusive; 0 = open end)."""
        request = session_pb2.ListTurnsRequest(
            namespace=namespace,
            session_id=session_id,
            from_seq=from_seq,
            to_seq=to_seq,
            page_size=page_size,
        )
        return self._pages("ListTurns", request, "turns", lambda m: from_message(Turn, m), timeout)

    def remove_last_turn(
        self,
        namespace: str,
        session_id: str,
        *,
        expected_last_seq: int = 0,
        lease_epoch: int = 0,
        timeout: float | None = None,
    ) -> Turn | None:
        """Removes the session's last turn atomically and returns it (None when it has none).

        Concurrent calls each remove a different turn; the seq goes to the next
        append. `expected_last_seq` (0 = any) makes it conditional (`Aborted`
        otherwise); `lease_epoch` fences as for appends. A summary that covered
        the turn is refolded from the remaining turns. Not retried (a retry
        would remove another turn) unless `expected_last_seq` is given.
        """
        request = session_pb2.RemoveLastTurnRequest(
            namespace=namespace,
            session_id=session_id,
            expected_last_seq=expected_last_seq,
            lease_epoch=lease_epoch,
        )
        response = self._call(
            "RemoveLastTurn", request, idempotent=expected_last_seq != 0, timeout=timeout
        )
        return from_message(Turn, response.turn) if response.HasField("turn") else None

    # Summaries

    def summarize(
        self, namespace: str, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """Folds the turns not yet summarized into a new summary version.

        With `wait`, returns the stored summary as a dict (the fields of
        ``SessionSummary`` in summary.proto); without, returns None once the
        work is queued (or the latest summary when no turn was new).
        """
        if timeout is None and wait:
            timeout = max(self.timeout, _SUMMARIZE_WAIT_SECONDS)
        request = summary_pb2.SummarizeRequest(namespace=namespace, session_id=session_id, wait=wait)
        response = self._call("Summarize", request, idempotent=False, timeout=timeout)
        return message_to_dict(response.summary) if response.HasField("summary") else None

    @overload
    def get_summary(
        self,
        namespace: str,
        session_id: str,
        *,
        version: int = ...,
        format: Literal["structured"] = ...,
        timeout: float | None = ...,
    ) -> dict[str, Any]: ...

    @overload
    def get_summary(
        self,
        namespace: str,
        session_id: str,
        *,
        version: int = ...,
        format: Literal["json", "markdown"],
        timeout: float | None = ...,
    ) -> str: ...

    def get_summary(
        self,
        namespace: str,
        session_id: str,
        *,
        version: int = 0,
        format: SummaryFormat = "structured",
        timeout: float | None = None,
    ) -> dict[str, Any] | str:
        """The latest summary (or `version`): a dict, or the server's JSON or Markdown text.

        Raises `NotFound` when the session has no summary yet.
        """
        request = summary_pb2.GetSummaryRequest(
            namespace=namespace,
            session_id=session_id,
            version=version,
            format=enum_value_name(summary_pb2.SummaryFormat.DESCRIPTOR, format),
        )
        response = self._call("GetSummary", request, idempotent=True, timeout=timeout)
        if format == "structured":
            return message_to_dict(response.summary)
        return str(response.rendered)

    def list_summaries(
        self, namespace: str, session_id: str, *, page_size: int = 0, timeout: float | None = None
    ) -> Iterator[SummaryInfo]:
        """The session's summary versions, newest first."""
        request = summary_pb2.ListSummariesRequest(
            namespace=namespace, session_id=session_id, page_size=page_size
        )
        return self._pages(
            "ListSummaries", request, "summaries", lambda m: from_message(SummaryInfo, m), timeout
        )

    def get_audit_log(
        self, namespace: str, session_id: str, *, timeout: float | None = None
    ) -> list[AuditRecord]:
        """The session's whole audit log, oldest first (one record per summary attempt
        and per review resolution)."""
        request = summary_pb2.GetAuditLogRequest(namespace=namespace, session_id=session_id)
        return list(
            self._pages("GetAuditLog", request, "records", lambda m: from_message(AuditRecord, m), timeout)
        )

    def list_review_items(
        self,
        namespace: str,
        *,
        include_resolved: bool = False,
        page_size: int = 0,
        timeout: float | None = None,
    ) -> Iterator[ReviewItem]:
        """The namespace's review queue, oldest first (pending items only unless `include_resolved`)."""
        request = summary_pb2.ListReviewItemsRequest(
            namespace=namespace, include_resolved=include_resolved, page_size=page_size
        )
        return self._pages(
            "ListReviewItems", request, "items", lambda m: from_message(ReviewItem, m), timeout
        )

    def resolve_review_item(
        self,
        namespace: str,
        review_id: str,
        status: Literal["approved", "rejected"],
        reviewer: str,
        comment: str = "",
        *,
        timeout: float | None = None,
    ) -> ReviewItem:
        """Approves or rejects a review item; `FailedPrecondition` if already resolved."""
        request = summary_pb2.ResolveReviewItemRequest(
            namespace=namespace,
            review_id=review_id,
            status=enum_value_name(summary_pb2.ReviewStatus.DESCRIPTOR, status),
            reviewer=reviewer,
            comment=comment,
        )
        response = self._call("ResolveReviewItem", request, idempotent=False, timeout=timeout)
        return from_message(ReviewItem, response.item)

    # Context bundles, handoffs and watches

    def get_context_bundle(
        self,
        namespace: str,
        session_id: str,
        budget_tokens: int,
        *,
        encoding: str | None = None,
        query: str = "",
        agent_id: str = "",
        recent_interactions: int = 0,
        skip_recall: bool = False,
        timeout: float | None = None,
    ) -> ContextBundle:
        """What an agent needs to continue the session, in at most `budget_tokens` tokens.

        `budget_tokens` is 256 to 1000000 (else `InvalidArgument`), measured
        with `encoding` ("cl100k_base" | "o200k_base"; None = the
        session's). The text runs from the most stable part to the request's
        (see ``ContextBundle.parts()`` and ``mnemo_client.prompt``): put it
        first in the prompt and a provider's prompt cache reuses its
        beginning. `agent_id` (the reader) is named in its last part;
        `recent_interactions` is validated only (the log of turns is cut in
        blocks of tokens). Memory bearing on
        `query` (or, without one, the newest user turn) is retrieved from
        the session's older turns, the subject's other sessions, facts and
        episodes into ``bundle.recalled`` unless `skip_recall`. Works on active,
        idle and closed sessions; what did not fit is listed in
        ``bundle.manifest``.
        """
        request = context_pb2.GetContextBundleRequest(
            namespace=namespace,
            session_id=session_id,
            budget_tokens=budget_tokens,
            encoding=enum_value_name(session_pb2.Encoding.DESCRIPTOR, encoding or "unspecified"),
            query=query,
            agent_id=agent_id,
            recent_interactions=recent_interactions,
            skip_recall=skip_recall,
        )
        response = self._call("GetContextBundle", request, idempotent=True, timeout=timeout)
        return from_message(ContextBundle, response.bundle)

    def handoff(
        self,
        namespace: str,
        session_id: str,
        from_agent: str,
        to_agent: str,
        lease_epoch: int,
        *,
        reason: str = "",
        budget_tokens: int = 0,
        idempotency_key: str = "",
        timeout: float | None = None,
    ) -> HandoffResult:
        """Passes the session from `from_agent` (its owner) to `to_agent`.

        `lease_epoch` is the session's current epoch as the caller knows it.
        Records a handoff event turn, makes `to_agent` the owner at epoch + 1,
        writes a summary (trigger "handoff") and returns the bundle for
        `to_agent` (`budget_tokens`; 0 = 8000 or the session's context
        limit, whichever is smaller). `FailedPrecondition` when the epoch is
        stale (someone else handed it off first), `from_agent` is not the
        owner, or the session is closed.

        With `idempotency_key` the call is retried on `Unavailable` and
        `DeadlineExceeded`: a repeat of a handoff that happened returns its
        outcome with ``replayed=True`` and writes nothing. Without a key it
        is not retried (a repeat would fail on the epoch it moved); then
        `get_session` tells whether the handoff happened (owner `to_agent`,
        epoch `lease_epoch` + 1).
        """
        request = context_pb2.HandoffRequest(
            namespace=namespace,
            session_id=session_id,
            from_agent=from_agent,
            to_agent=to_agent,
            reason=reason,
            lease_epoch=lease_epoch,
            budget_tokens=budget_tokens,
            idempotency_key=idempotency_key,
        )
        response = self._call("Handoff", request, idempotent=bool(idempotency_key), timeout=timeout)
        return from_message(HandoffResult, response)

    def watch(
        self, namespace: str, session_id: str, from_seq: int = 0, *, timeout: float | None = None
    ) -> SessionWatch:
        """Streams the session's events: `Turn`, `SummaryWritten`, `HandoffEvent`, `StateChanged`.

        From `from_seq` (>= 1) the stored turns are replayed first, each
        stored summary right after the last turn it covers and each handoff
        right after its event turn; then live events follow in the same
        order. 0 = live events only. Use it as a context manager, or call
        `cancel()`, to end it::

            with mnemo.watch("support", sid, from_seq=1) as events:
                for event in events:
                    ...

        The stream has no deadline unless `timeout` (seconds for the whole
        stream; `DeadlineExceeded` when it passes) and is not retried.
        Errors surface while iterating: `NotFound` (no such session, or it
        was deleted), `Unavailable` (the daemon is shutting down), and
        `ResourceExhausted`, whose `resume_from_seq` is set when the watcher
        fell behind (or no `resume_from_seq` when the namespace has too many
        open watches). After any error, watching again from `next_seq` of
        the returned `SessionWatch` continues without a gap.
        """
        request = context_pb2.WatchSessionRequest(
            namespace=namespace, session_id=session_id, from_seq=from_seq
        )
        call = self._stub.WatchSession(request, timeout=timeout, metadata=self._metadata)
        return SessionWatch(call, from_seq)

    # Long-term memory: facts, episodes, pending actions and search

    def put_fact(
        self,
        namespace: str,
        subject_id: str,
        text: str,
        *,
        key: str = "",
        source_session_id: str = "",
        source_seq: int = 0,
        tags: Iterable[str] = (),
        timeout: float | None = None,
    ) -> PutFactResult:
        """Stores a fact about `subject_id` (origin "client"); durable on return.

        With `key` (``[a-z0-9_.-]``, 1 to 128 characters), a fact that has the
        key of a current fact supersedes it (``outcome`` "superseded", the old
        version in ``superseded``); a fact with the same words as a current
        one of the subject (same key, or both unkeyed) is merged into it
        (``outcome`` "merged": its sources and tags are added); else
        ``outcome`` is "created". `source_session_id` (and `source_seq`, a
        turn of it; 0 = the whole session) says where it was stated: an
        unknown session raises `NotFound`. Bad fields raise `InvalidArgument`.

        Retried on transient errors: a repeat of a put that was stored merges
        into it, so after a lost answer the result says "merged" instead of
        "created" or "superseded".
        """
        if source_seq and not source_session_id:
            raise ValueError("source_seq needs source_session_id")
        request = knowledge_pb2.PutFactRequest(
            namespace=namespace, subject_id=subject_id, key=key, text=text, tags=_strings(tags)
        )
        if source_session_id:
            request.source.session_id = source_session_id
            request.source.seq = source_seq
        response = self._call("PutFact", request, idempotent=True, timeout=timeout)
        return from_message(PutFactResult, response)

    def get_fact(self, namespace: str, fact_id: str, *, timeout: float | None = None) -> Fact:
        """One fact version, current or superseded; `NotFound` if absent (or deleted)."""
        request = knowledge_pb2.GetFactRequest(namespace=namespace, fact_id=fact_id)
        response = self._call("GetFact", request, idempotent=True, timeout=timeout)
        return from_message(Fact, response.fact)

    def list_facts(
        self,
        namespace: str,
        *,
        subject_id: str = "",
        tag: str = "",
        key: str = "",
        include_history: bool = False,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Iterator[Fact]:
        """The namespace's facts (or `subject_id`'s), oldest first, optionally by `tag` and `key`.

        Only current facts unless `include_history` (then superseded versions
        too). `page_token` starts the listing at a ``next_page_token`` the
        server gave for the same filters; the iterator follows the rest.
        """
        request = knowledge_pb2.ListFactsRequest(
            namespace=namespace,
            subject_id=subject_id,
            tag=tag,
            key=key,
            include_history=include_history,
            page_size=page_size,
            page_token=page_token,
        )
        return self._pages("ListFacts", request, "facts", lambda m: from_message(Fact, m), timeout)

    def delete_fact(self, namespace: str, fact_id: str, *, timeout: float | None = None) -> Fact:
        """Removes one fact version (at once from search results and bundles); returns it.

        Deleting the current version of a key leaves the key without a
        current fact; older versions stay as history. `NotFound` if absent.
        Not retried: a repeat of a deletion that happened raises `NotFound`.
        """
        request = knowledge_pb2.DeleteFactRequest(namespace=namespace, fact_id=fact_id)
        response = self._call("DeleteFact", request, idempotent=False, timeout=timeout)
        return from_message(Fact, response.fact)

    def list_episodes(
        self,
        namespace: str,
        subject_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Iterator[Episode]:
        """The subject's past sessions, newest first: one `Episode` per session that closed or
        went idle with a summary (written shortly after, by the background worker)."""
        request = knowledge_pb2.ListEpisodesRequest(
            namespace=namespace, subject_id=subject_id, page_size=page_size, page_token=page_token
        )
        return self._pages("ListEpisodes", request, "episodes", lambda m: from_message(Episode, m), timeout)

    def update_pending_action(
        self,
        namespace: str,
        session_id: str,
        action_seq: int,
        status: Literal["done", "in_progress", "pending"],
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Sets the status of a pending action of the session's latest summary; returns the
        action (a dict shaped as in a summary).

        The action is named by its session and its first evidence seq (a
        `CarriedAction`'s ``ref``). A "done" action leaves the session's
        bundles and no longer carries over to the subject's later sessions.
        `NotFound` when the session or the action is unknown.
        """
        request = knowledge_pb2.UpdatePendingActionRequest(
            namespace=namespace,
            ref=knowledge_pb2.PendingActionRef(session_id=session_id, action_seq=action_seq),
            status=enum_value_name(summary_pb2.ActionStatus.DESCRIPTOR, status),
        )
        response = self._call("UpdatePendingAction", request, idempotent=True, timeout=timeout)
        return message_to_dict(response.action)

    def search(
        self,
        namespace: str,
        query: str,
        *,
        subject_id: str = "",
        session_id: str = "",
        kinds: Iterable[Literal["turn", "fact", "episode"]] = (),
        limit: int = 0,
        timeout: float | None = None,
    ) -> SearchResult:
        """Ranks the namespace's turns, current facts and episodes against `query` (BM25).

        `query` is plain words (1 to 4096 bytes); `subject_id` and
        `session_id` narrow the scope, `kinds` the kinds of hit (empty =
        all), `limit` the number of hits (0 = 10; at most 100). The index
        follows writes shortly after they are acknowledged: ``index_lag``
        counts the writes it had not taken in yet (deleted sessions and facts
        never appear, whatever the lag). `Unavailable` while the index is
        rebuilt; retried like every read.
        """
        request = knowledge_pb2.SearchRequest(
            namespace=namespace,
            subject_id=subject_id,
            session_id=session_id,
            query=query,
            kinds=[
                knowledge_pb2.SearchKind.Value(enum_value_name(knowledge_pb2.SearchKind.DESCRIPTOR, k))
                for k in _strings(kinds)
            ],
            limit=limit,
        )
        response = self._call("Search", request, idempotent=True, timeout=timeout)
        return from_message(SearchResult, response)

    # Plumbing

    def _call(self, rpc: str, request: Message, *, idempotent: bool, timeout: float | None) -> Any:
        """One RPC with a deadline per attempt; retries only when `idempotent`."""
        method: Callable[..., Any] = getattr(self._stub, rpc)
        deadline = self.timeout if timeout is None else timeout
        attempts = 1 + (self.retries if idempotent else 0)
        metadata = self._metadata
        token = self.consistency_token
        if token and rpc in _READS_AFTER_TOKEN:
            metadata = (*metadata, (CONSISTENCY_TOKEN_HEADER, token))
        for attempt in range(attempts):
            try:
                response, call = method.with_call(request, timeout=deadline, metadata=metadata)
                for key, value in call.initial_metadata() or ():
                    if key == CONSISTENCY_TOKEN_HEADER and isinstance(value, str):
                        self.consistency_token = value
                return response
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                if code in _RETRYABLE and attempt + 1 < attempts:
                    time.sleep(_backoff(attempt))
                    continue
                raise error_from_rpc(e) from e
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pages(
        self,
        rpc: str,
        request: Any,  # a List*Request message: every one has `page_token`
        items_field: str,
        convert: Callable[[Any], T],
        timeout: float | None,
    ) -> Iterator[T]:
        """Follows `next_page_token` until the server has no more pages."""
        while True:
            response = self._call(rpc, request, idempotent=True, timeout=timeout)
            for item in getattr(response, items_field):
                yield convert(item)
            if not response.next_page_token:
                return
            request.page_token = response.next_page_token


class SessionWatch:
    """An open `MnemoClient.watch` stream: an iterator of events that can be cancelled.

    Iterating blocks until the next event. `cancel()` (from any thread, or
    by leaving the ``with`` block) ends the stream; iteration then stops
    without an error.

    `next_seq` is the ``from_seq`` that continues this watch where it
    stopped: the seq after the last turn received, or until a turn arrives
    the seq the watch started at (for a live-only watch, `from_seq` 0, the
    daemon says which: the seq the next append gets).
    """

    def __init__(self, call: Any, from_seq: int) -> None:
        self._call = call  # a grpc stream: an iterator of responses and a grpc.Call
        self._cancelled = False
        self.next_seq = from_seq
        if from_seq == 0:
            # Waits for the response headers (or the error that ends the call).
            for key, value in call.initial_metadata() or ():
                if key == FIRST_SEQ_HEADER and isinstance(value, str) and value.isdigit():
                    self.next_seq = int(value)

    def __iter__(self) -> SessionWatch:
        return self

    def __next__(self) -> WatchEvent:
        while True:
            try:
                response = next(self._call)
            except grpc.RpcError as e:
                if self._cancelled:
                    raise StopIteration from None
                raise error_from_rpc(e) from e
            kind = response.WhichOneof("event")
            convert = _WATCH_EVENTS.get(kind)
            if convert is None:
                continue  # an event kind added to the contract after this client: skip it
            event = convert(getattr(response, kind))
            if isinstance(event, Turn):
                self.next_seq = event.seq + 1
            return event

    def cancel(self) -> None:
        """Ends the stream; safe to call more than once."""
        self._cancelled = True
        self._call.cancel()

    def __enter__(self) -> SessionWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


_WATCH_EVENTS: dict[str, Callable[[Any], WatchEvent]] = {
    "turn": lambda m: from_message(Turn, m),
    "summary_written": lambda m: from_message(SummaryWritten, m),
    "handoff": lambda m: from_message(HandoffEvent, m),
    "state_changed": lambda m: from_message(StateChanged, m),
}


def _pem(value: bytes | str | os.PathLike[str] | None) -> bytes | None:
    """PEM bytes as given, or read from the file a path names."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as pem:
        return pem.read()


def _strings(values: Iterable[str]) -> list[str]:
    """A list of strings; a lone string is one item, not its characters."""
    return [values] if isinstance(values, str) else list(values)


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter: ~0.1 s, 0.2 s, 0.4 s ... at most 2 s."""
    ceiling = min(_BACKOFF_MAX_SECONDS, _BACKOFF_BASE_SECONDS * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)
