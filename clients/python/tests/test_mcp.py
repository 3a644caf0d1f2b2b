"""`mnemo mcp` driven by the official Python `mcp` client package, over stdio
and over Streamable HTTP, against the real daemon."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import Daemon, _binary
from mnemo_client import MnemoClient

TOOLS = {
    "get_context",
    "remember",
    "search_memory",
    "put_fact",
    "list_facts",
    "list_pending_actions",
    "update_pending_action",
    "handoff",
    "list_sessions",
}


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@asynccontextmanager
async def over_stdio(daemon: Daemon, namespace: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=str(_binary()),
        args=["mcp", "--namespace", namespace, "--addr", f"http://{daemon.address}", "--max-result-tokens", "2000"],
    )
    async with stdio_client(params) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def over_http(daemon: Daemon, namespace: str) -> AsyncIterator[ClientSession]:
    process = subprocess.Popen(
        [str(_binary()), "mcp", "--namespace", namespace, "--addr", f"http://{daemon.address}", "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"listening on (http://\S+)", line)
        assert match, f"mnemo mcp said: {line!r}"
        async with streamable_http_client(match.group(1)) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                yield session
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def story(session: ClientSession, client: MnemoClient, namespace: str) -> None:
    listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and len(t.description) > 20
        assert t.input_schema.get("type") == "object"
    assert "session_id" in tools["remember"].input_schema["required"]
    roles = tools["remember"].input_schema
    assert "user" in str(roles) and "assistant" in str(roles)

    remembered = await session.call_tool(
        "remember",
        {
            "session_id": "case-1",
            "subject_id": "cust-9",
            "turns": [
                {"role": "user", "speaker": "cust-9", "content": "I was charged twice for order ORD-5521."},
                {"role": "assistant", "speaker": "agent-a",
                 "content": "I'll refund the duplicate charge on ORD-5521 by Friday."},
            ],
        },
    )
    assert not remembered.is_error, text_of(remembered)
    assert "#1–#2" in text_of(remembered)

    # Once summarized, the bundle holds the pending refund, listed with its reference.
    client.summarize(namespace, "case-1")
    context = await session.call_tool("get_context", {"session_id": "case-1", "budget_tokens": 2000})
    assert not context.is_error
    assert "refund the duplicate charge on ORD-5521" in text_of(context), text_of(context)
    actions = text_of(await session.call_tool("list_pending_actions", {"session_id": "case-1"}))
    assert "refund the duplicate charge on ORD-5521" in actions and "action_seq 2" in actions, actions
    done = await session.call_tool(
        "update_pending_action", {"session_id": "case-1", "action_seq": 2, "status": "done"}
    )
    assert not done.is_error and ", done;" in text_of(done), text_of(done)
    assert "no open pending actions" in text_of(
        await session.call_tool("list_pending_actions", {"session_id": "case-1"})
    )

    fact = await session.call_tool("put_fact", {"subject_id": "cust-9", "text": "Prefers email.", "key": "contact"})
    assert not fact.is_error and "created" in text_of(fact)
    facts = await session.call_tool("list_facts", {"subject_id": "cust-9"})
    assert "Prefers email." in text_of(facts)

    # Read your writes: remember, then search at once.
    found = text_of(await session.call_tool("search_memory", {"query": "charged twice", "limit": 3}))
    assert "turn case-1 #1" in found, found
    for i in range(20):
        word = f"zq{i:02d}parcel"
        kept = await session.call_tool(
            "remember", {"session_id": "case-rw", "turns": [{"role": "user", "content": f"my parcel code is {word}"}]}
        )
        assert not kept.is_error, text_of(kept)
        hits = text_of(await session.call_tool("search_memory", {"query": word, "limit": 3}))
        assert "case-rw" in hits, (i, hits)

    sessions = await session.call_tool("list_sessions", {"subject_id": "cust-9"})
    assert "case-1" in text_of(sessions)

    # A bad session id: a tool error that carries the gRPC reason.
    bad = await session.call_tool("get_context", {"session_id": "no such session!"})
    assert bad.is_error and "InvalidArgument" in text_of(bad)
    missing = await session.call_tool("get_context", {"session_id": "nope"})
    assert missing.is_error and "NotFound" in text_of(missing)
    out_of_range = await session.call_tool("search_memory", {"query": "x", "limit": 500})
    assert out_of_range.is_error and "limit must be from 1 to 20" in text_of(out_of_range)

    handed = await session.call_tool(
        "handoff", {"session_id": "case-1", "from_agent": "agent-a", "to_agent": "agent-b", "reason": "shift"}
    )
    assert not handed.is_error, text_of(handed)
    assert "owned by agent-b at lease epoch 2" in text_of(handed)


def test_mcp_over_stdio(daemon: Daemon, client: MnemoClient, namespace: str) -> None:
    async def run() -> None:
        async with over_stdio(daemon, namespace) as session:
            await story(session, client, namespace)

    asyncio.run(run())


def test_mcp_over_http(daemon: Daemon, client: MnemoClient, namespace: str) -> None:
    async def run() -> None:
        async with over_http(daemon, namespace) as session:
            await story(session, client, namespace)

    asyncio.run(run())


def test_results_are_bounded_in_tokens(daemon: Daemon, namespace: str) -> None:
    async def run() -> None:
        async with over_stdio(daemon, namespace) as session:
            for i in range(60):
                await session.call_tool(
                    "put_fact",
                    {"subject_id": "big", "text": f"Fact number {i}: " + "lorem ipsum dolor sit amet " * 20},
                )
            listed = text_of(await session.call_tool("list_facts", {"subject_id": "big", "limit": 50}))
            # --max-result-tokens 2000: about 4 characters a token at most.
            assert len(listed) < 2000 * 6
            assert "more not shown" in listed

    asyncio.run(run())


def test_a_namespace_is_required(daemon: Daemon) -> None:
    r = subprocess.run([str(_binary()), "mcp", "--addr", f"http://{daemon.address}"], capture_output=True, text=True)
    assert r.returncode != 0 and "--namespace" in r.stderr
    time.sleep(0)


@pytest.mark.parametrize("tokens", ["10", "100000"])
def test_the_result_bound_is_checked(daemon: Daemon, namespace: str, tokens: str) -> None:
    r = subprocess.run(
        [str(_binary()), "mcp", "-n", namespace, "--addr", f"http://{daemon.address}", "--max-result-tokens", tokens],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode != 0 and "--max-result-tokens must be from 256 to 32000" in r.stderr
