"""End-to-end tests of context bundles, handoffs and watches against the real daemon.

The story: agent-a serves a customer, looks the order up with a tool and
promises a refund, then hands the session to agent-b, whose bundle must
carry the promise; agent-a, fenced off by the lease epoch, can no longer
write; a watcher sees all of it, in order. Every watch has a deadline, so a
missing event fails the test instead of hanging it.
"""

from __future__ import annotations

import threading
from itertools import islice
from pathlib import Path
from typing import Any, Callable

import pytest

from mnemo_client import (
    FailedPrecondition,
    HandoffEvent,
    InvalidArgument,
    MnemoClient,
    NotFound,
    ResourceExhausted,
    SeqRange,
    StateChanged,
    SummaryWritten,
    Turn,
)

WATCH_SECONDS = 20.0

REFUND = "I will refund $49.99 by 2026-12-05."

TURNS: list[dict[str, Any]] = [
    {
        "role": "user",
        "speaker": "customer:42",
        "content": "I was charged twice for ORD-9921 ($49.99). Please refund the duplicate charge.",
    },
    {
        "role": "assistant",
        "speaker": "agent-a",
        "content": "Looking up the order.",
        "tool_call": {
            "tool_name": "lookup_order",
            "arguments_json": '{"order_id": "ORD-9921"}',
            "result": '{"order_id": "ORD-9921", "charges": [49.99, 49.99]}',
            "status": "success",
        },
    },
    {
        "role": "assistant",
        "speaker": "agent-a",
        "content": f"Confirmed: ORD-9921 was charged twice. {REFUND}",
    },
    {"role": "user", "speaker": "customer:42", "content": "Will I get an email confirmation?"},
]


def test_handoff_story(client: MnemoClient, namespace: str) -> None:
    created = client.create_session(namespace, "case-1", subject_id="customer:42", owner_agent="agent-a")
    assert (created.owner_agent, created.lease_epoch) == ("agent-a", 1)
    assert created.last_active_time == created.create_time is not None
    sid, n = created.session_id, len(TURNS)
    client.append_turns(namespace, sid, TURNS, lease_epoch=1)
    client.summarize(namespace, sid)
    stored = list(client.list_turns(namespace, sid))

    bundle = client.get_context_bundle(namespace, sid, 1000, agent_id="agent-a", query="refund")
    assert bundle.token_count <= bundle.budget_tokens == 1000
    assert (bundle.as_of_seq, bundle.owner_agent, bundle.lease_epoch, bundle.state) == (
        n,
        "agent-a",
        1,
        "active",
    )
    assert REFUND in [a["action"] for a in bundle.pending_actions]
    assert REFUND in bundle.rendered_text
    assert bundle.recent_turns == stored  # verbatim, tool call included
    assert bundle.manifest.summary_version == 1
    assert bundle.manifest.summarized == SeqRange(1, n)
    recent = bundle.manifest.section("recent_turns")
    assert recent is not None and recent.included_seqs == [SeqRange(1, n)]

    with client.watch(namespace, sid, from_seq=1, timeout=WATCH_SECONDS) as events:
        # The replay: the stored turns, then the summary that covers them.
        assert list(islice(events, n + 1)) == [*stored, SummaryWritten(1, n, "requested")]

        handed = client.handoff(
            namespace, sid, "agent-a", "agent-b", 1, reason="shift change", budget_tokens=1000
        )
        assert handed.lease_epoch == handed.session.lease_epoch == 2
        assert handed.session.owner_agent == "agent-b"
        assert handed.event_seq == n + 1
        assert handed.summary is not None
        assert (handed.summary["trigger"], handed.summary["covers_through_seq"]) == ("handoff", n + 1)
        for_b = handed.bundle
        assert (for_b.owner_agent, for_b.lease_epoch, for_b.as_of_seq) == ("agent-b", 2, n + 1)
        assert for_b.token_count <= for_b.budget_tokens == 1000
        assert REFUND in [a["action"] for a in for_b.pending_actions]
        assert REFUND in for_b.rendered_text and "agent-b" in for_b.rendered_text

        # agent-a still holds epoch 1: fenced off, and nothing is written.
        with pytest.raises(FailedPrecondition) as fenced:
            client.append_turns(
                namespace, sid, [{"role": "assistant", "speaker": "agent-a", "content": "Refund sent."}],
                lease_epoch=1,
            )  # fmt: skip
        assert "agent-b" in fenced.value.message  # the server names the current owner
        with pytest.raises(FailedPrecondition):
            client.handoff(namespace, sid, "agent-a", "agent-c", 1)
        after = client.get_session(namespace, sid)
        assert (after.turn_count, after.owner_agent, after.lease_epoch) == (n + 1, "agent-b", 2)

        live = client.append_turns(
            namespace, sid, [{"role": "assistant", "speaker": "agent-b", "content": "Refund is next."}],
            lease_epoch=2,
        )  # fmt: skip
        assert live.first_seq == n + 2

        event_turn, handoff, summary, live_turn = islice(events, 4)
        assert isinstance(event_turn, Turn) and (event_turn.seq, event_turn.role) == (n + 1, "system")
        assert handoff == HandoffEvent("agent-a", "agent-b", "shift change", 2, n + 1)
        assert summary == SummaryWritten(2, n + 1, "handoff")
        assert isinstance(live_turn, Turn) and (live_turn.seq, live_turn.speaker) == (n + 2, "agent-b")
        assert events.next_seq == n + 3
    assert next(events, None) is None  # leaving the block cancelled the watch


def test_bundle_budget_is_validated(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, owner_agent="agent-a").session_id
    client.append_turns(namespace, sid, TURNS)
    for budget in (0, 255, 1_000_001):
        with pytest.raises(InvalidArgument, match="budget_tokens"):
            client.get_context_bundle(namespace, sid, budget)
    smallest = client.get_context_bundle(namespace, sid, 256, encoding="o200k_base")
    assert smallest.token_count <= 256 and smallest.encoding == "o200k_base"

    # A handoff whose bundle budget is out of range changes nothing.
    with pytest.raises(InvalidArgument, match="budget_tokens"):
        client.handoff(namespace, sid, "agent-a", "agent-b", 1, budget_tokens=100)
    after = client.get_session(namespace, sid)
    assert (after.turn_count, after.owner_agent, after.lease_epoch) == (len(TURNS), "agent-a", 1)

    with pytest.raises(ValueError, match="Encoding"):  # caught before any call
        client.get_context_bundle(namespace, sid, 1000, encoding="utf-8")


def test_unknown_session_is_not_found(client: MnemoClient, namespace: str) -> None:
    with pytest.raises(NotFound):
        client.get_context_bundle(namespace, "no-such-session", 1000)
    with pytest.raises(NotFound):
        client.handoff(namespace, "no-such-session", "agent-a", "agent-b", 1)
    with client.watch(namespace, "no-such-session", timeout=WATCH_SECONDS) as events:
        with pytest.raises(NotFound):  # a stream's errors surface while iterating
            next(events)


def test_watch_follows_idle_and_wake(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, settings={"idle_timeout_seconds": 1}).session_id
    client.append_turns(namespace, sid, TURNS[:1])
    with client.watch(namespace, sid, timeout=WATCH_SECONDS) as events:  # live events only
        assert next(events) == StateChanged("idle", 1)  # about a second later
        assert next(events) == SummaryWritten(1, 1, "idle_timeout")
        assert client.get_session(namespace, sid).state == "idle"
        assert [s.session_id for s in client.list_sessions(namespace, state="idle")] == [sid]

        client.append_turns(namespace, sid, TURNS[1:2])  # an append wakes the session
        woke, turn = islice(events, 2)
        assert woke == StateChanged("active", 1)
        assert isinstance(turn, Turn) and turn.seq == 2


def test_watch_ends_with_not_found_when_the_session_is_deleted(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace).session_id
    client.append_turns(namespace, sid, TURNS[:1])
    with client.watch(namespace, sid, timeout=WATCH_SECONDS) as events:
        client.close_session(namespace, sid)
        assert next(events) == StateChanged("closed", 1)
        client.delete_session(namespace, sid)
        with pytest.raises(NotFound):
            for event in events:
                assert isinstance(event, SummaryWritten)  # the close's summary may come first


def test_cancel_ends_a_blocked_watch(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace).session_id
    events = client.watch(namespace, sid, timeout=WATCH_SECONDS)
    threading.Timer(0.2, events.cancel).start()
    assert list(events) == []  # stopped by the cancel, not by the deadline
    events.cancel()  # a second cancel is harmless


def test_a_watcher_that_falls_behind_is_told_where_to_resume(
    start_daemon: Callable[..., Any], tmp_path: Path, namespace: str
) -> None:
    config = tmp_path / "mnemo.toml"
    config.write_text("[limits]\nwatch_buffer = 1\n")
    daemon = start_daemon("--config", str(config))
    # Without BDP probing the client's HTTP/2 window stays small, so a watch
    # that nobody reads fills every buffer after a few hundred KB.
    with MnemoClient(daemon.address, options=[("grpc.http2.bdp_probe", 0)]) as mnemo:
        no_summaries = {"summary_every_turns": 10000, "context_limit_tokens": 10_000_000}
        sid = mnemo.create_session(namespace, settings=no_summaries).session_id
        received: list[Any] = []
        with mnemo.watch(namespace, sid, timeout=WATCH_SECONDS) as events:
            for _ in range(4):  # 1 MB the watcher cannot send while nobody reads
                mnemo.append_turns(namespace, sid, [{"role": "user", "content": "x " * 2500}] * 50)
            for _ in range(3):  # more notices than its buffer of one holds
                mnemo.append_turns(namespace, sid, [{"role": "user", "content": "one more"}])
            with pytest.raises(ResourceExhausted) as lagged:
                for event in events:
                    received.append(event)
        resume = lagged.value.resume_from_seq
        assert resume is not None and 1 < resume <= 203
        assert [e.seq for e in received] == list(range(1, resume))  # nothing lost before it
        assert events.next_seq == resume

        with mnemo.watch(namespace, sid, from_seq=resume, timeout=WATCH_SECONDS) as again:
            rest = [e.seq for e in islice(again, 203 - resume + 1) if isinstance(e, Turn)]
        assert rest == list(range(resume, 204))


def test_a_live_only_watch_knows_where_it_starts(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace).session_id
    client.append_turns(namespace, sid, TURNS[:3])
    with client.watch(namespace, sid) as events:
        # Before any event: the daemon said the next append gets seq 4.
        assert events.next_seq == 4
        client.append_turns(namespace, sid, [{"role": "user", "content": "one more"}])
        first = next(events)
        assert isinstance(first, Turn) and first.seq == 4


def test_a_handoff_retried_with_its_key_is_replayed(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, owner_agent="agent-a").session_id
    client.append_turns(namespace, sid, TURNS[:2], lease_epoch=1)
    first = client.handoff(namespace, sid, "agent-a", "agent-b", 1, idempotency_key="shift-1")
    again = client.handoff(namespace, sid, "agent-a", "agent-b", 1, idempotency_key="shift-1")
    assert (first.replayed, again.replayed) == (False, True)
    assert (again.lease_epoch, again.event_seq) == (first.lease_epoch, first.event_seq) == (2, 3)
    assert client.get_session(namespace, sid).turn_count == 3  # one handoff turn, not two
    with pytest.raises(FailedPrecondition) as reused:
        client.handoff(namespace, sid, "agent-a", "agent-c", 1, idempotency_key="shift-1")
    assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED"


def test_a_bundle_leads_the_prompt_with_cache_breakpoints(client: MnemoClient, namespace: str) -> None:
    from mnemo_client.prompt import anthropic_system, system_message, text_blocks

    sid = client.create_session(namespace, "cache-1", settings={"summary_every_turns": 10_000}).session_id
    for i in range(15):
        client.append_turns(
            namespace,
            sid,
            [
                {"role": "user", "content": f"Question {i}: where is order ORD-{100 + i}? " + "context " * 80},
                {"role": "assistant", "content": f"Order ORD-{100 + i} ships on day {i}. " + "detail " * 80},
            ],
        )
    client.summarize(namespace, sid)
    client.append_turns(namespace, sid, [{"role": "user", "content": "And the next one?"}])
    first = client.get_context_bundle(namespace, sid, 2000)
    stable, log, request = first.parts()
    assert stable.startswith("# Context bundle")
    assert log.startswith("## Conversation since summary v1") and "And the next one?" in log
    assert "As of turn 31" in request
    assert 0 < first.stable_end_tokens < first.log_end_tokens <= first.token_count
    blocks = anthropic_system(first)
    assert "".join(b["text"] for b in blocks) == first.rendered_text
    assert [b.get("cache_control") for b in blocks] == [{"type": "ephemeral"}, {"type": "ephemeral"}, None]
    ttl = text_blocks(first, cache_control={"type": "ephemeral", "ttl": "1h"})
    assert ttl[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert system_message(first) == {"role": "system", "content": first.rendered_text}
    # The next exchange: the first block is the same, the second grows.
    client.append_turns(namespace, sid, [{"role": "assistant", "content": "It ships tomorrow."}])
    second = client.get_context_bundle(namespace, sid, 2000)
    assert anthropic_system(second)[0] == blocks[0]
    assert second.parts()[1].startswith(log)
    # Requests whose queries retrieve memory share their blocks with each
    # other (the stable part and the log give way to the request's memory
    # in one fixed step, see docs/prompt-caching.md).
    asked = client.get_context_bundle(namespace, sid, 2000, query="shipping")
    client.append_turns(namespace, sid, [{"role": "user", "content": "Thanks, and ORD-101?"}])
    again = client.get_context_bundle(namespace, sid, 2000, query="order ORD-101")
    assert anthropic_system(again)[0] == anthropic_system(asked)[0]
    assert again.parts()[1].startswith(asked.parts()[1])
