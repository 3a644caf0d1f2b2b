"""MnemoStore with the real `langgraph` package against the real daemon:
put, get, search, delete and list_namespaces, sync and async, and a small
graph that keeps its memory in the store."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from conftest import Daemon
from mnemo_client import MnemoClient
from mnemo_client.integrations.langgraph import MnemoStore, key_of, namespace_of, subject_of


def test_namespaces_and_keys_map_to_subjects_and_fact_keys() -> None:
    for ns in [("users",), ("users", "ann b", "memories"), ("tenant:1", "ü/x")]:
        assert namespace_of(subject_of(ns)) == ns
    assert subject_of(("users", "ann b")) == "users.ann@20b"
    assert key_of("Prefs") == ".50refs"


def test_put_get_search_delete_and_list(daemon: Daemon, client: MnemoClient, namespace: str) -> None:
    store = MnemoStore(address=daemon.address, namespace=namespace)
    store.put(("users", "ann", "memories"), "Lang", {"text": "Ann prefers answers in Spanish", "kind": "pref"})
    store.put(("users", "ann", "memories"), "food", {"text": "Ann is vegetarian", "kind": "fact"})
    store.put(("users", "bob"), "food", {"text": "Bob avoids gluten", "kind": "fact"})

    item = store.get(("users", "ann", "memories"), "Lang")
    assert item is not None and item.value == {"text": "Ann prefers answers in Spanish", "kind": "pref"}
    assert (item.key, item.namespace) == ("Lang", ("users", "ann", "memories"))
    assert store.get(("users", "ann", "memories"), "missing") is None

    # A put on a key supersedes; mnemo keeps the old version as history.
    store.put(("users", "ann", "memories"), "Lang", {"text": "Ann prefers answers in English now", "kind": "pref"})
    assert store.get(("users", "ann", "memories"), "Lang").value["text"].endswith("English now")
    subject = subject_of(("users", "ann", "memories"))
    history = list(client.list_facts(namespace, subject_id=subject, key=key_of("Lang"), include_history=True))
    assert len(history) == 2

    listed = store.search(("users",))
    assert {(i.namespace, i.key) for i in listed} == {
        (("users", "ann", "memories"), "Lang"),
        (("users", "ann", "memories"), "food"),
        (("users", "bob"), "food"),
    }
    assert [i.key for i in store.search(("users", "ann"), filter={"kind": "fact"})] == ["food"]

    # Read your writes: the search right after the put sees it.
    found = store.search(("users", "ann", "memories"), query="vegetarian")
    assert found and found[0].key == "food" and found[0].score is not None

    assert store.list_namespaces() == [("users", "ann", "memories"), ("users", "bob")]
    assert store.list_namespaces(prefix=("users", "bob")) == [("users", "bob")]
    assert store.list_namespaces(max_depth=2) == [("users", "ann"), ("users", "bob")]
    assert store.list_namespaces(suffix=("memories",)) == [("users", "ann", "memories")]

    store.delete(("users", "bob"), "food")
    assert store.get(("users", "bob"), "food") is None
    assert store.list_namespaces() == [("users", "ann", "memories")]


def test_a_put_is_found_by_the_search_right_after_it(daemon: Daemon, namespace: str) -> None:
    store = MnemoStore(address=daemon.address, namespace=namespace)
    misses = []
    for i in range(100):
        word = f"zq{i:03d}marker"
        store.put(("bar", "u1"), f"k{i}", {"text": f"prefers {word}"})
        if [item.key for item in store.search(("bar",), query=word)] != [f"k{i}"]:
            misses.append(i)
    assert misses == [], f"searches right after a put that missed it: {misses}"
    assert store.list_namespaces(prefix=("bar",)) == [("bar", "u1")]


def test_async_operations(daemon: Daemon, namespace: str) -> None:
    store = MnemoStore(address=daemon.address, namespace=namespace)

    async def run() -> None:
        await store.aput(("agents", "a1"), "goal", {"text": "ship the release"})
        item = await store.aget(("agents", "a1"), "goal")
        assert item is not None and item.value == {"text": "ship the release"}
        assert [i.key for i in await store.asearch(("agents",))] == ["goal"]
        assert await store.alist_namespaces() == [("agents", "a1")]
        await store.adelete(("agents", "a1"), "goal")
        assert await store.aget(("agents", "a1"), "goal") is None

    asyncio.run(run())


class State(TypedDict):
    user: str
    message: str
    reply: str


def test_a_graph_keeps_its_memory_in_the_store(daemon: Daemon, namespace: str) -> None:
    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        if state["message"].startswith("my name is "):
            store.put(("profiles", state["user"]), "name", {"name": state["message"][len("my name is ") :]})
        return {}

    def answer(state: State, *, store: BaseStore) -> dict[str, Any]:
        known = store.get(("profiles", state["user"]), "name")
        return {"reply": f"Hello, {known.value['name']}!" if known else "Hello, stranger!"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)

    first = builder.compile(store=MnemoStore(address=daemon.address, namespace=namespace))
    assert first.invoke({"user": "u1", "message": "hi", "reply": ""})["reply"] == "Hello, stranger!"
    first.invoke({"user": "u1", "message": "my name is Ada", "reply": ""})
    # A new graph and a new connection: the memory is in mnemo, not in the process.
    second = builder.compile(store=MnemoStore(address=daemon.address, namespace=namespace))
    assert second.invoke({"user": "u1", "message": "hi", "reply": ""})["reply"] == "Hello, Ada!"
    assert second.invoke({"user": "u2", "message": "hi", "reply": ""})["reply"] == "Hello, stranger!"
