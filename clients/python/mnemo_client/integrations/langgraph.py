"""A LangGraph store kept in mnemo.

``MnemoStore`` implements LangGraph's ``BaseStore`` (``batch`` and ``abatch``:
get, put, delete, search, list namespaces) over mnemo's facts, so that a
graph's long-term memory is durable, shared by every process that points at
the daemon, versioned (a put supersedes the previous value and keeps it as
history) and searchable with mnemo's ranked search.

The mapping:

- the store's mnemo namespace is fixed by the constructor (``namespace=``);
- a LangGraph namespace tuple is a mnemo *subject*: its labels joined by
  ``.`` (LangGraph forbids ``.`` in labels), each label with characters mnemo
  ids do not allow written as ``@xx`` hex escapes (``("users", "ann b")`` is
  subject ``users.ann@20b``);
- a LangGraph key is the fact's key (characters outside ``a-z0-9_-`` written
  as ``.xx`` hex escapes, so ``"Prefs"`` is key ``.50refs``), and the value is the fact's text as JSON
  (at most 4,096 bytes, mnemo's fact limit); facts are tagged ``langgraph``;
- ``search`` with a ``query`` ranks the facts with mnemo's search (lexical
  ranking, no embeddings: ``index`` settings are accepted and ignored); without
  one it lists them, newest first. ``filter`` matches top-level value fields
  by equality. ``created_at`` and ``updated_at`` are the fact's times (a put
  creates a new version, so both are the time of the latest put).

Listing namespaces and searching under a prefix read the namespace's facts
page by page, so they cost time in proportion to the store's size.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..client import MnemoClient
from . import connect
from ..errors import NotFound
from ..models import Fact

TAG = "langgraph"
_ID_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-:")
_PAGE = 500
_MAX_VALUE_BYTES = 4096


def _escape(label: str) -> str:
    return "".join(c if c in _ID_SAFE else "".join(f"@{b:02x}" for b in c.encode()) for c in label)


def _unescape(label: str) -> str:
    out = bytearray()
    i = 0
    while i < len(label):
        if label[i] == "@":
            out.append(int(label[i + 1 : i + 3], 16))
            i += 3
        else:
            out += label[i].encode()
            i += 1
    return out.decode("utf-8")


_KEY_SAFE = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def key_of(key: str) -> str:
    """The mnemo fact key that holds a LangGraph key."""
    return "".join(c if c in _KEY_SAFE else "".join(f".{b:02x}" for b in c.encode()) for c in key)


def unkey(key: str) -> str:
    """The LangGraph key a mnemo fact key holds."""
    out = bytearray()
    i = 0
    while i < len(key):
        if key[i] == ".":
            out.append(int(key[i + 1 : i + 3], 16))
            i += 3
        else:
            out += key[i].encode()
            i += 1
    return out.decode("utf-8")


def subject_of(namespace: tuple[str, ...]) -> str:
    """The mnemo subject that holds a LangGraph namespace."""
    return ".".join(_escape(label) for label in namespace)


def namespace_of(subject: str) -> tuple[str, ...]:
    """The LangGraph namespace a mnemo subject holds."""
    return tuple(_unescape(label) for label in subject.split("."))


def _time(t: datetime | None) -> datetime:
    return t if t is not None else datetime.now(timezone.utc)


def _item(fact: Fact, score: float | None = None, search: bool = False) -> Item:
    value = json.loads(fact.text)
    ns = namespace_of(fact.subject_id)
    if search:
        return SearchItem(ns, unkey(fact.key), value, _time(fact.create_time), _time(fact.update_time), score)
    return Item(value=value, key=unkey(fact.key), namespace=ns, created_at=_time(fact.create_time), updated_at=_time(fact.update_time))


def _matches(ns: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


class MnemoStore(BaseStore):
    """LangGraph's ``BaseStore`` over mnemo facts (see the module's docs for the mapping)."""

    def __init__(
        self,
        *,
        address: str = "127.0.0.1:50051",
        namespace: str = "default",
        api_key: str | None = None,
        tls: bool = False,
        root_certificates: Any = None,
        client_cert: Any = None,
        client_key: Any = None,
        client: MnemoClient | None = None,
    ) -> None:
        self.namespace = namespace
        self._client = connect(
            client,
            address,
            api_key=api_key,
            tls=tls,
            root_certificates=root_certificates,
            client_cert=client_cert,
            client_key=client_key,
        )

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    # One operation each

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            fact = self._current(op.namespace, op.key)
            return None if fact is None else _item(fact)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _current(self, namespace: tuple[str, ...], key: str) -> Fact | None:
        facts = self._client.list_facts(self.namespace, subject_id=subject_of(namespace), key=key_of(key), page_size=1)
        return next(iter(facts), None)

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            current = self._current(op.namespace, op.key)
            if current is not None:
                try:
                    self._client.delete_fact(self.namespace, current.fact_id)
                except NotFound:
                    pass
            return
        text = json.dumps(op.value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        if len(text.encode()) > _MAX_VALUE_BYTES:
            raise ValueError(
                f"the value for key {op.key!r} is {len(text.encode())} bytes of JSON; "
                f"mnemo keeps at most {_MAX_VALUE_BYTES} per value"
            )
        self._client.put_fact(self.namespace, subject_of(op.namespace), text, key=key_of(op.key), tags=[TAG])

    def _facts(self, subject: str = "") -> Iterable[Fact]:
        return self._client.list_facts(self.namespace, subject_id=subject, tag=TAG, page_size=_PAGE)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)

        def wanted(fact: Fact) -> bool:
            ns = namespace_of(fact.subject_id)
            if ns[: len(prefix)] != prefix:
                return False
            if op.filter:
                value = json.loads(fact.text)
                return all(value.get(k) == v for k, v in op.filter.items())
            return True

        if op.query:
            subject = subject_of(prefix) if prefix else ""
            # Exact subject when the prefix names one; else the whole namespace.
            hits = self._client.search(self.namespace, op.query, subject_id=subject, kinds=["fact"], limit=100).hits
            if not hits and prefix:
                hits = self._client.search(self.namespace, op.query, kinds=["fact"], limit=100).hits
            found: list[SearchItem] = []
            for hit in hits:
                try:
                    fact = self._client.get_fact(self.namespace, hit.fact_id)
                except NotFound:
                    continue
                if TAG in fact.tags and wanted(fact):
                    found.append(_item(fact, hit.score, search=True))
            return found[op.offset : op.offset + op.limit]
        facts = [f for f in self._facts(subject_of(prefix) if prefix else "") if wanted(f)]
        if prefix:
            # Deeper namespaces under the prefix are other subjects.
            facts += [
                f
                for f in self._facts()
                if f.subject_id.startswith(subject_of(prefix) + ".") and wanted(f)
            ]
        facts.sort(key=lambda f: _time(f.update_time), reverse=True)
        return [_item(f, search=True) for f in facts[op.offset : op.offset + op.limit]]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen = sorted({namespace_of(f.subject_id) for f in self._facts()})
        out: list[tuple[str, ...]] = []
        for ns in seen:
            if op.match_conditions and not all(_matches(ns, c) for c in op.match_conditions):
                continue
            if op.max_depth is not None:
                ns = ns[: op.max_depth]
            if ns not in out:
                out.append(ns)
        return out[op.offset : op.offset + op.limit]
