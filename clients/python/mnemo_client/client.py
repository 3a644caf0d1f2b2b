"""`MnemoClient`: a small synchronous wrapper over mnemo's gRPC API.

Methods take and return plain Python values (dicts, dataclasses from
`mnemo_client.models`) and raise `MnemoError` subclasses. Every call has a
deadline. Only calls that are safe to repeat are retried, with exponential
backoff and jitter, on UNAVAILABLE and DEADLINE_EXCEEDED: reads, and appends
that carry an idempotency key (the server replays those instead of writing
twice). Everything else is tried once, so a lost answer surfaces as an error
instead of a duplicate write.
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
    ReviewItem,
    Session,
    SessionSettings,
    SummaryInfo,
    Turn,
    from_message,
)

try:
    from ._gen import memory_service_pb2_grpc, session_pb2, summary_pb2
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
_RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_BACKOFF_BASE_SECONDS = 0.1
_BACKOFF_MAX_SECONDS = 2.0
# The server bounds a waiting Summarize by its request timeout (30 s by
# default); the client waits a little longer so the server's answer wins.
_SUMMARIZE_WAIT_SECONDS = 35.0


class MnemoClient:
    """A connection to a mnemo daemon.

    `address` is ``host:port`` (an ``http://`` or ``https://`` prefix is
    accepted; ``https://`` implies TLS). With `tls`, `root_certificates`
    (PEM bytes or a path to a PEM file) replaces the system's trust store.
    `api_key` is sent as ``authorization: Bearer <key>`` on every call.
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
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {api_key}"),) if api_key else ()
        )
        if tls:
            if isinstance(root_certificates, (str, os.PathLike)):
                with open(root_certificates, "rb") as pem:
                    root_certificates = pem.read()
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
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
        timeout: float | None = None,
    ) -> Session:
        """Starts a session; the server generates a ULID when `session_id` is empty.

        `settings` keys: summary_every_turns, context_limit_tokens,
        idle_timeout_seconds, encoding ("cl100k_base" | "o200k_base"),
        risk_level ("normal" | "high"); missing or zero ones take defaults.
        """
        request = session_pb2.CreateSessionRequest(
            namespace=namespace, session_id=session_id, subject_id=subject_id, title=title
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
        """The namespace's sessions in id order, optionally by subject and state ("active" | "closed")."""
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
        differs raises `Aborted`.
        """
        request = session_pb2.AppendTurnsRequest(
            namespace=namespace,
            session_id=session_id,
            idempotency_key=idempotency_key,
            expected_next_seq=expected_next_seq,
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

    # Plumbing

    def _call(self, rpc: str, request: Message, *, idempotent: bool, timeout: float | None) -> Any:
        """One RPC with a deadline per attempt; retries only when `idempotent`."""
        method: Callable[..., Any] = getattr(self._stub, rpc)
        deadline = self.timeout if timeout is None else timeout
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            try:
                return method(request, timeout=deadline, metadata=self._metadata)
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


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter: ~0.1 s, 0.2 s, 0.4 s ... at most 2 s."""
    ceiling = min(_BACKOFF_MAX_SECONDS, _BACKOFF_BASE_SECONDS * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)
