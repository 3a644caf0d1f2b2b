"""End-to-end tests of `mnemo_client` against the real `mnemo` daemon.

They drive the story the daemon offers today: sessions, appends with a tool
call, idempotent retries, optimistic concurrency, summaries with their audit
log and review queue, health, and the mapping of status codes to exceptions.
Each test works in a namespace of its own (see conftest.py).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import mnemo_client
from mnemo_client import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    MnemoClient,
    MnemoError,
    NotFound,
)
from mnemo_client._gen import context_pb2, knowledge_pb2, session_pb2, summary_pb2

# The arguments exactly as the agent sent them: odd spacing, key order and
# non-ASCII must all survive the round trip byte for byte.
LOOKUP_ARGS = '{"order_id": "ORD-9921",  "include":["payments"], "note":"naïve café"}'

SUPPORT_TURNS: list[dict[str, Any]] = [
    {
        "role": "user",
        "speaker": "customer:42",
        "content": "I was charged twice for ORD-9921 ($49.99). Please refund the duplicate charge.",
        "client_time": datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc),
        "metadata": {"channel": "chat"},
    },
    {"role": "assistant", "speaker": "agent-a", "content": "I'll check the payment log."},
    {
        "role": "assistant",
        "speaker": "agent-a",
        "content": "Looking up the order.",
        "tool_call": {
            "tool_name": "lookup_order",
            "arguments_json": LOOKUP_ARGS,
            "result": '{"order_id": "ORD-9921", "charges": [49.99, 49.99]}',
            "status": "success",
        },
    },
    {
        "role": "assistant",
        "speaker": "agent-a",
        "content": "Confirmed: ORD-9921 was charged twice. I will refund $49.99 by 2026-12-05.",
    },
    {"role": "user", "speaker": "customer:42", "content": "Will I get an email confirmation?"},
]


def test_health_is_serving(daemon: Any) -> None:
    with grpc.insecure_channel(daemon.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "mnemo.v1.MemoryService"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service


def test_session_lifecycle(client: MnemoClient, namespace: str) -> None:
    created = client.create_session(
        namespace,
        subject_id="customer:42",
        title="Double charge",
        metadata={"ticket": "T-1"},
        settings={"summary_every_turns": 50, "encoding": "o200k_base"},
    )
    assert created.session_id  # a server-generated ULID
    assert (created.namespace, created.subject_id, created.title) == (
        namespace,
        "customer:42",
        "Double charge",
    )
    assert created.metadata == {"ticket": "T-1"}
    assert created.state == "active"
    assert (created.turn_count, created.next_seq) == (0, 1)
    assert created.settings.summary_every_turns == 50
    assert created.settings.encoding == "o200k_base"
    assert created.settings.context_limit_tokens == 128000  # default filled in
    assert created.create_time is not None and created.create_time.tzinfo is not None

    assert client.get_session(namespace, created.session_id) == created

    others = [client.create_session(namespace, f"s-{i}", subject_id="customer:7") for i in range(3)]
    # page_size=1 makes the iterator follow next_page_token across pages.
    listed = [s.session_id for s in client.list_sessions(namespace, page_size=1)]
    assert sorted(listed) == sorted([created.session_id, *(s.session_id for s in others)])
    by_subject = [s.session_id for s in client.list_sessions(namespace, subject_id="customer:7")]
    assert by_subject == ["s-0", "s-1", "s-2"]

    closed = client.close_session(namespace, "s-1")
    assert closed.state == "closed"
    assert client.close_session(namespace, "s-1").state == "closed"  # a no-op the second time
    assert [s.session_id for s in client.list_sessions(namespace, state="closed")] == ["s-1"]
    with pytest.raises(FailedPrecondition) as closed_err:
        client.append_turns(namespace, "s-1", [{"role": "user", "content": "too late"}])
    assert closed_err.value.reason == "SESSION_CLOSED"

    client.append_turns(
        namespace, "s-2", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    )
    assert client.delete_session(namespace, "s-2") == 2
    with pytest.raises(NotFound):
        client.get_session(namespace, "s-2")


def test_append_and_list_turns_back_exactly(client: MnemoClient, namespace: str) -> None:
    session = client.create_session(namespace)
    result = client.append_turns(namespace, session.session_id, SUPPORT_TURNS)
    assert (result.first_seq, result.last_seq, result.replayed) == (1, len(SUPPORT_TURNS), False)
    assert len(result.token_counts) == len(SUPPORT_TURNS) and all(n > 0 for n in result.token_counts)
    assert result.total_tokens == sum(result.token_counts)

    turns = list(client.list_turns(namespace, session.session_id, page_size=2))  # three pages
    assert [t.seq for t in turns] == list(range(1, len(SUPPORT_TURNS) + 1))
    for sent, stored in zip(SUPPORT_TURNS, turns):
        assert stored.role == sent["role"]
        assert stored.speaker == sent["speaker"]
        assert stored.content == sent["content"]
        assert stored.metadata == sent.get("metadata", {})
        assert stored.client_time == sent.get("client_time")
        assert stored.server_time is not None
        assert stored.token_count > 0
    assert [t.token_count for t in turns] == result.token_counts

    call = turns[2].tool_call
    assert call is not None
    assert call.tool_name == "lookup_order"
    assert call.arguments_json == LOOKUP_ARGS  # verbatim, not re-serialized
    assert call.result == SUPPORT_TURNS[2]["tool_call"]["result"]
    assert call.status == "success"
    assert all(t.tool_call is None for i, t in enumerate(turns) if i != 2)

    window = list(client.list_turns(namespace, session.session_id, from_seq=2, to_seq=3))
    assert [t.seq for t in window] == [2, 3]


def test_idempotent_retry_replays_and_writes_nothing(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace).session_id
    turn = [{"role": "user", "speaker": "customer:42", "content": "Any news?"}]
    first = client.append_turns(namespace, sid, turn, idempotency_key="retry-1")
    again = client.append_turns(namespace, sid, turn, idempotency_key="retry-1")
    assert not first.replayed and again.replayed
    assert (again.first_seq, again.last_seq) == (first.first_seq, first.last_seq) == (1, 1)
    assert client.get_session(namespace, sid).turn_count == 1
    assert len(list(client.list_turns(namespace, sid))) == 1

    # The same key for different turns is refused, and nothing is written.
    with pytest.raises(FailedPrecondition) as reused:
        client.append_turns(namespace, sid, [{"role": "user", "content": "other"}], idempotency_key="retry-1")
    assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert [t.content for t in client.list_turns(namespace, sid)] == ["Any news?"]


def test_expected_next_seq_conflict_raises_aborted(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace).session_id
    client.append_turns(namespace, sid, SUPPORT_TURNS[:2], expected_next_seq=1)
    with pytest.raises(Aborted) as conflict:
        client.append_turns(namespace, sid, [{"role": "user", "content": "stale"}], expected_next_seq=1)
    assert conflict.value.code == "ABORTED"
    assert "3" in conflict.value.message  # the server says what next_seq is now
    assert client.get_session(namespace, sid).next_seq == 3  # nothing was written
    ok = client.append_turns(namespace, sid, [{"role": "user", "content": "fresh"}], expected_next_seq=3)
    assert ok.first_seq == 3


def _all_evidence_seqs(summary: dict[str, Any]) -> list[int]:
    seqs: list[int] = []
    for section in ("decisions", "pending_actions", "open_questions", "key_facts"):
        for item in summary[section]:
            seqs.extend(item["evidence_seqs"])
    seqs.extend(call["seq"] for call in summary["tool_calls"])
    return seqs


def test_summary_audit_and_renderings(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, subject_id="customer:42").session_id
    with pytest.raises(FailedPrecondition):  # nothing to summarize yet
        client.summarize(namespace, sid)
    with pytest.raises(NotFound):
        client.get_summary(namespace, sid)
    client.append_turns(namespace, sid, SUPPORT_TURNS)
    n = len(SUPPORT_TURNS)

    summary = client.summarize(namespace, sid, wait=True)
    assert summary is not None
    assert summary["version"] == 1
    assert summary["covers_through_seq"] == n
    assert summary["trigger"] == "requested"
    # The tool log is exact.
    assert [(c["tool_name"], c["arguments_json"], c["seq"], c["status"]) for c in summary["tool_calls"]] == [
        ("lookup_order", LOOKUP_ARGS, 3, "success")
    ]
    # Identifiers and amounts come through verbatim.
    facts = " ".join(f["fact"] for f in summary["key_facts"])
    assert "ORD-9921" in facts
    # Every cited seq is a real turn.
    seqs = _all_evidence_seqs(summary)
    assert seqs and all(1 <= s <= n for s in seqs)
    assert summary["participants"]

    assert client.get_summary(namespace, sid) == summary
    markdown = client.get_summary(namespace, sid, format="markdown")
    assert "Pending Follow-Up" in markdown and "ORD-9921" in markdown
    rendered = json.loads(client.get_summary(namespace, sid, format="json"))
    assert rendered["tool_calls"][0]["arguments_json"] == LOOKUP_ARGS

    # Nothing new: the latest summary comes back unchanged.
    assert client.summarize(namespace, sid)["version"] == 1  # type: ignore[index]
    infos = list(client.list_summaries(namespace, sid))
    assert [(i.version, i.covers_through_seq, i.trigger) for i in infos] == [(1, n, "requested")]

    records = client.get_audit_log(namespace, sid)
    stored = [r for r in records if r.kind == "summary_attempt" and r.summary_version == 1]
    assert len(stored) == 1
    record = stored[0]
    assert record.validation_passed and not record.validation_errors
    assert record.covers_through_seq == n
    assert record.pre_summary_tokens == client.get_session(namespace, sid).total_tokens
    assert record.post_summary_tokens > 0
    assert len(record.covered_turns_sha256) == 64
    int(record.covered_turns_sha256, 16)


def test_high_risk_summary_goes_through_review(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, settings={"risk_level": "high"}).session_id
    client.append_turns(
        namespace,
        sid,
        [
            {"role": "user", "speaker": "customer:42", "content": "I was charged twice for ORD-9921."},
            {
                "role": "assistant",
                "speaker": "agent-a",
                "content": "I will refund $49.99 to the card used for ORD-9921.",
                # An explicit annotation wins over the heuristics.
                "metadata": {"mnemo.annotation": "pending_action"},
            },
        ],
    )
    summary = client.summarize(namespace, sid)
    assert summary is not None and summary["requires_human_review"]

    pending = [i for i in client.list_review_items(namespace) if i.session_id == sid]
    assert len(pending) == 1 and pending[0].status == "pending"
    assert pending[0].summary_version == summary["version"]
    item = client.resolve_review_item(namespace, pending[0].review_id, "approved", "ops:alice", "refund ok")
    assert (item.status, item.reviewer, item.comment) == ("approved", "ops:alice", "refund ok")
    assert item.resolve_time is not None
    with pytest.raises(FailedPrecondition):
        client.resolve_review_item(namespace, item.review_id, "rejected", "ops:bob")

    assert list(client.list_review_items(namespace)) == []
    resolved = list(client.list_review_items(namespace, include_resolved=True))
    assert [i.review_id for i in resolved] == [item.review_id]
    audit = client.get_audit_log(namespace, sid)
    assert [(r.kind, r.review_status, r.reviewer) for r in audit if r.kind == "review_resolved"] == [
        ("review_resolved", "approved", "ops:alice")
    ]


def test_errors_map_to_exception_classes(client: MnemoClient, namespace: str) -> None:
    with pytest.raises(NotFound) as missing:
        client.get_session(namespace, "no-such-session")
    assert isinstance(missing.value, MnemoError)
    assert missing.value.code == "NOT_FOUND" and missing.value.message
    assert str(missing.value).startswith("NOT_FOUND: ")

    with pytest.raises(InvalidArgument) as bad:
        client.create_session("")
    assert "namespace" in bad.value.message

    client.create_session(namespace, "dup")
    with pytest.raises(AlreadyExists):
        client.create_session(namespace, "dup")
    with pytest.raises(InvalidArgument):  # bad JSON in arguments_json
        client.append_turns(
            namespace, "dup", [{"role": "assistant", "tool_call": {"tool_name": "t", "arguments_json": "{"}}]
        )
    with pytest.raises(NotFound):
        list(client.list_turns(namespace, "no-such-session"))
    assert client.get_session(namespace, "dup").turn_count == 0

    # Mistakes the client can see itself fail before any call.
    with pytest.raises(ValueError, match="role"):
        client.append_turns(namespace, "dup", [{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="role is required"):
        client.append_turns(namespace, "dup", [{"content": "x"}])
    with pytest.raises(ValueError, match="tool_call.tool"):
        client.append_turns(namespace, "dup", [{"role": "assistant", "tool_call": {"tool": "t"}}])


def test_api_key_and_http_prefix_are_accepted(daemon: Any, namespace: str) -> None:
    # A loopback daemon with no keys configured checks none; the header must not break anything.
    with MnemoClient(f"http://{daemon.address}", api_key="secret-key") as keyed:
        assert keyed.create_session(namespace, "k").session_id == "k"


def test_unreachable_daemon_raises_unavailable_after_retries() -> None:
    with MnemoClient("127.0.0.1:1", timeout=1.0, retries=1) as nowhere:
        with pytest.raises(mnemo_client.Unavailable):
            nowhere.get_session("ns", "s")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (mnemo_client.Session, session_pb2.Session),
        (mnemo_client.SessionSettings, session_pb2.SessionSettings),
        (mnemo_client.Turn, session_pb2.Turn),
        (mnemo_client.ToolCall, session_pb2.ToolCall),
        (mnemo_client.AppendResult, session_pb2.AppendTurnsResponse),
        (mnemo_client.SummaryInfo, summary_pb2.SummaryInfo),
        (mnemo_client.AuditRecord, summary_pb2.AuditRecord),
        (mnemo_client.ReviewItem, summary_pb2.ReviewItem),
        (mnemo_client.SeqRange, context_pb2.SeqRange),
        (mnemo_client.ManifestEntry, context_pb2.ManifestEntry),
        (mnemo_client.BundleManifest, context_pb2.BundleManifest),
        (mnemo_client.CompressedTurn, context_pb2.CompressedTurn),
        (mnemo_client.ContextBundle, context_pb2.ContextBundle),
        (mnemo_client.HandoffResult, context_pb2.HandoffResponse),
        (mnemo_client.SummaryWritten, context_pb2.SummaryWritten),
        (mnemo_client.HandoffEvent, context_pb2.HandoffEvent),
        (mnemo_client.StateChanged, context_pb2.StateChanged),
        (mnemo_client.FactSource, knowledge_pb2.FactSource),
        (mnemo_client.Fact, knowledge_pb2.Fact),
        (mnemo_client.PutFactResult, knowledge_pb2.PutFactResponse),
        (mnemo_client.Episode, knowledge_pb2.Episode),
        (mnemo_client.PendingActionRef, knowledge_pb2.PendingActionRef),
        (mnemo_client.CarriedAction, knowledge_pb2.CarriedAction),
        (mnemo_client.SearchHit, knowledge_pb2.SearchHit),
        (mnemo_client.SearchResult, knowledge_pb2.SearchResponse),
        (mnemo_client.RecalledMemory, context_pb2.RecalledMemory),
        (mnemo_client.RecalledRef, context_pb2.RecalledRef),
    ],
)
def test_models_mirror_the_proto(model: type, message: Any) -> None:
    """A field added to the proto must be added to the client's dataclass too."""
    assert [f.name for f in dataclasses.fields(model)] == [f.name for f in message.DESCRIPTOR.fields]
