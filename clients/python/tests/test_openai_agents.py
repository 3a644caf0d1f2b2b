"""MnemoSession with the real `openai-agents` package against the real daemon.

The model is the only part that cannot run here (a hosted API): the SDK talks
to a scripted OpenAI-compatible server over real HTTP on 127.0.0.1, which
answers chat completions from a script and records what it was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from conftest import Daemon
from mnemo_client import MnemoClient
from mnemo_client.integrations.openai_agents import MnemoSession

set_tracing_disabled(True)


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ScriptedModel:
    """An OpenAI-compatible HTTP server that answers from a script."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                reply = json.dumps(owner.replies.pop(0)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    tool_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-7731"}'},
            }
        ],
    }
    model = ScriptedModel(
        [
            completion(tool_call, "tool_calls"),
            completion({"role": "assistant", "content": "ORD-7731 was delivered on 28 November."}, "stop"),
            completion({"role": "assistant", "content": "Yes, the refund of $84.50 is on its way."}, "stop"),
        ]
    )
    yield model
    model.close()


@function_tool
def lookup_order(order_id: str) -> str:
    """Looks an order up."""
    return json.dumps({"order_id": order_id, "status": "delivered", "delivered": "2026-11-28"})


def test_runner_keeps_its_conversation_in_mnemo_and_another_process_resumes_it(
    daemon: Daemon, client: MnemoClient, namespace: str, scripted: ScriptedModel
) -> None:
    model = OpenAIChatCompletionsModel(
        model="scripted", openai_client=AsyncOpenAI(base_url=scripted.url, api_key="not-used")
    )
    agent = Agent(name="support", instructions="Help with orders.", model=model, tools=[lookup_order])
    session = MnemoSession("chat-1", address=daemon.address, namespace=namespace)

    async def conversation() -> tuple[str, str]:
        first = await Runner.run(agent, "Where is my order ORD-7731?", session=session)
        second = await Runner.run(agent, "And the refund?", session=session)
        return str(first.final_output), str(second.final_output)

    first, second = asyncio.run(conversation())
    assert first == "ORD-7731 was delivered on 28 November."
    assert second.startswith("Yes, the refund")
    # The second call to the model was sent the history the session kept.
    sent = json.dumps(scripted.requests[2]["messages"])
    assert "Where is my order ORD-7731?" in sent and "delivered on 28 November" in sent

    items = asyncio.run(session.get_items())
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1
    # Stored as mnemo turns: the tool call with its exact arguments.
    turns = list(client.list_turns(namespace, "chat-1"))
    assert len(turns) == len(items)
    calls = [t for t in turns if t.tool_call is not None]
    assert [(c.tool_call.tool_name, c.tool_call.arguments_json) for c in calls] == [
        ("lookup_order", '{"order_id": "ORD-7731"}')
    ]

    # Another process, same session id: the same items.
    script = (
        "import asyncio, json, sys\n"
        "from mnemo_client.integrations.openai_agents import MnemoSession\n"
        "s = MnemoSession('chat-1', address=sys.argv[1], namespace=sys.argv[2])\n"
        "print(json.dumps(asyncio.run(s.get_items())))\n"
        "print(json.dumps(asyncio.run(s.get_items(limit=2))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, daemon.address, namespace], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert json.loads(out[0]) == items
    assert json.loads(out[1]) == items[-2:]


def test_items_round_trip_exactly(daemon: Daemon, namespace: str) -> None:
    session = MnemoSession("round-trip", address=daemon.address, namespace=namespace)
    items: list[Any] = [
        {"role": "user", "content": "Hello"},
        {"role": "user", "content": [{"type": "input_text", "text": "Two parts,"}, {"type": "input_text", "text": "one message"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Hi!", "annotations": []}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thinking about it."}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": [1, 2.5, "x"]}'},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "assistant", "content": "é" * 5000 + " long, split over several metadata entries"},
        {"role": "developer", "content": "Be brief."},
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    assert asyncio.run(session.get_items(limit=3)) == items[-3:]
    assert asyncio.run(session.pop_item()) == items[-1]
    assert asyncio.run(session.get_items()) == items[:-1]


def test_forty_concurrent_pops_return_forty_distinct_items_then_clear_empties(
    daemon: Daemon, namespace: str
) -> None:
    session = MnemoSession("pops", address=daemon.address, namespace=namespace)
    items = [{"role": "user", "content": f"item {i}"} for i in range(50)]
    asyncio.run(session.add_items(items))

    async def pop_forty() -> list[Any]:
        return await asyncio.gather(*(session.pop_item() for _ in range(40)))

    popped = asyncio.run(pop_forty())
    contents = [p["content"] for p in popped]
    assert len(set(contents)) == 40
    assert sorted(contents) == sorted(i["content"] for i in items[10:])
    assert asyncio.run(session.get_items()) == items[:10]

    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    # Used again after a clear: a fresh session under the same id.
    asyncio.run(session.add_items(items[:1]))
    assert asyncio.run(session.get_items()) == items[:1]


def test_a_budget_keeps_long_sessions_inside_the_window(daemon: Daemon, namespace: str) -> None:
    full = MnemoSession("long", address=daemon.address, namespace=namespace)
    items: list[Any] = []
    for i in range(40):
        items.append({"role": "user", "content": f"Question {i}: what about order ORD-{1000 + i}? " + "details " * 30})
        items.append({"role": "assistant", "content": f"Answer {i}: ORD-{1000 + i} ships on day {i}. " + "more " * 30})
    asyncio.run(full.add_items(items))
    bounded = MnemoSession("long", address=daemon.address, namespace=namespace, context_budget_tokens=1000)
    got = asyncio.run(bounded.get_items())
    assert got[0]["role"] == "system" and got[0]["content"].startswith("# Context bundle")
    # The bundle first; what the request decided (the point in time) last.
    assert got[-1]["role"] == "system" and "As of turn 80" in got[-1]["content"]
    recent = got[1:-1]
    assert 0 < len(recent) < len(items)
    assert recent == items[-len(recent):]  # the newest items, exactly as added
    assert sum(len(json.dumps(i)) for i in got) < 1000 * 6  # about the budget (a few characters a token)
    assert asyncio.run(bounded.get_items(limit=2)) == items[-2:]
    # One more exchange: everything up to the newest item is unchanged (a
    # prompt cache reuses it).
    asyncio.run(full.add_items([{"role": "user", "content": "And ORD-2000?"}]))
    again = asyncio.run(bounded.get_items())
    if again[0] == got[0]:  # no fold and no block of old turns cut meanwhile (the log is
        # append-only between folds, the exchange a fold ended on included)
        assert again[: len(got) - 1] == got[:-1]
    assert again[-2] == {"role": "user", "content": "And ORD-2000?"}
    # Memory is retrieved for the newest user message, in the closing part:
    # an early exchange the window no longer holds verbatim comes back.
    asyncio.run(full.add_items([{"role": "user", "content": "When does ORD-1002 ship?"}]))
    asked = asyncio.run(bounded.get_items())
    assert asked[-2] == {"role": "user", "content": "When does ORD-1002 ship?"}
    assert "ORD-1002 ships on day 2" in asked[-1]["content"], asked[-1]["content"]
    # A short session fits: every item as added.
    short = MnemoSession("short", address=daemon.address, namespace=namespace, context_budget_tokens=1000)
    asyncio.run(short.add_items(items[:4]))
    assert asyncio.run(short.get_items()) == items[:4]
    with pytest.raises(ValueError):
        MnemoSession("x", address=daemon.address, namespace=namespace, context_budget_tokens=10)
