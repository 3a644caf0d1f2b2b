"""A session for the OpenAI Agents SDK, kept in mnemo.

``MnemoSession`` implements the SDK's ``Session`` protocol: ``Runner.run(agent,
input, session=MnemoSession("case-42", namespace="support"))`` stores every item
of the conversation as a mnemo turn, durably, so another process (or another
agent) given the same session id continues it, and mnemo's summaries, facts,
search and context bundles work on it like on any session.

How items are stored: one turn per item. Messages become user, assistant or
system turns with their text as the content; a ``function_call`` becomes an
assistant turn whose tool call holds the name and the exact arguments; a
``function_call_output`` becomes a tool turn; other items (reasoning, web
search, ...) become assistant turns with whatever text they carry. The item's
JSON is kept whole in the turn's metadata (split over several entries when
longer than one entry holds), so ``get_items`` returns every item exactly as it
was added. Turns appended by other clients come back as plain messages.

With ``context_budget_tokens``, ``get_items()`` keeps long sessions inside the
model's window: when the whole session fits the budget it returns every item;
otherwise mnemo's context bundle first: a system message with its stable part
(the summary, pending actions, open questions, the subject's memory) and older
turns shortened, then the newest items exactly as added, then a system message
with what the request decided (memory retrieved for the newest user message,
the point in time), all within about that many tokens. Successive calls share
everything up to the newest item, which a provider's prompt cache reuses.

``pop_item`` is atomic: it is mnemo's ``RemoveLastTurn``, so concurrent pops
each get a different item (a summary that covered the removed turn is
refolded). ``clear_session`` deletes the mnemo session with its turns and
summaries (an admin-role key when auth is on); the next ``add_items`` starts it
afresh under the same id.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from ..client import MnemoClient
from . import connect
from ..errors import AlreadyExists, NotFound
from ..models import Turn

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

ITEM_KEY = "openai_agents.item"
"""Metadata key prefix under which an item's JSON is kept."""
_CHUNK = 4000  # bytes per metadata value (the daemon's limit is 4096)
_MAX_CHUNKS = 60  # metadata entries per turn (the daemon's limit is 64)
_MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


# Turns read back to find the newest user message.
_REQUEST_LOOKBACK = 16


class MnemoSession:
    """The Agents SDK's ``Session`` protocol over one mnemo session.

    The mnemo session ``session_id`` is created on first use (two processes
    given the same id share it). Pass ``client`` to reuse a connection, or the
    connection settings (``address``, ``api_key``, ``tls``, ``root_certificates``,
    ``client_cert``, ``client_key``) to open one. ``subject_id`` names whose
    session it is (their facts and past sessions then reach its bundles).
    """

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        *,
        address: str = "127.0.0.1:50051",
        namespace: str = "default",
        api_key: str | None = None,
        tls: bool = False,
        root_certificates: Any = None,
        client_cert: Any = None,
        client_key: Any = None,
        subject_id: str = "",
        context_budget_tokens: int | None = None,
        client: MnemoClient | None = None,
    ) -> None:
        if context_budget_tokens is not None and not 256 <= context_budget_tokens <= 1_000_000:
            raise ValueError("context_budget_tokens must be from 256 to 1000000 (or None for every item)")
        self.context_budget_tokens = context_budget_tokens
        self.session_id = session_id
        self.namespace = namespace
        self.subject_id = subject_id
        self._client = connect(
            client,
            address,
            api_key=api_key,
            tls=tls,
            root_certificates=root_certificates,
            client_cert=client_cert,
            client_key=client_key,
        )
        self._created = False

    # The Session protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation's items, oldest first; the newest `limit` when given."""
        return await asyncio.to_thread(self._get_items, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends the items, in order, as one atomic and durable append."""
        if items:
            await asyncio.to_thread(self._add_items, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes and returns the newest item, atomically; None when there is none."""
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        """Deletes the mnemo session (turns, summaries); the next add starts it afresh."""
        await asyncio.to_thread(self._clear)

    # Blocking halves

    def _ensure(self) -> None:
        if self._created:
            return
        try:
            self._client.create_session(self.namespace, self.session_id, subject_id=self.subject_id)
        except AlreadyExists:
            pass
        self._created = True

    def _get_items(self, limit: int | None) -> list[Any]:
        if limit is not None and limit <= 0:
            return []
        try:
            session = self._client.get_session(self.namespace, self.session_id)
        except NotFound:
            return []
        if self.context_budget_tokens is not None and session.turn_count > 0:
            items = self._within_budget(self.context_budget_tokens, session.next_seq)
            if limit is None:
                return items
            # The newest items: the closing system message is no item.
            if len(items) > 1 and items[-1].get("role") == "system":
                items = items[:-1]
            return items[-limit:]
        first = 0 if limit is None else max(1, session.next_seq - limit)
        return [item_of(t) for t in self._client.list_turns(self.namespace, self.session_id, from_seq=first)]

    def _newest_request(self, next_seq: int) -> str:
        """The newest user message's text (at most 4096 bytes), or "" when the
        last few turns hold none: what the bundle retrieves memory for."""
        turns = self._client.list_turns(self.namespace, self.session_id, from_seq=max(1, next_seq - _REQUEST_LOOKBACK))
        for t in reversed(list(turns)):
            if t.role == "user" and t.content.strip():
                return t.content.encode("utf-8")[:4096].decode("utf-8", "ignore")
        return ""

    def _within_budget(self, budget: int, next_seq: int) -> list[Any]:
        """The session as the model should see it within `budget` tokens."""
        # Memory retrieved for the newest request comes last (the bundle's
        # request part), so it costs no prompt-cache reuse.
        query = self._newest_request(next_seq)
        bundle = self._client.get_context_bundle(self.namespace, self.session_id, budget, query=query)
        if bundle.manifest.transcript:
            return [item_of(t) for t in self._client.list_turns(self.namespace, self.session_id)]
        # The bundle first: its stable part and its shortened older turns lead,
        # the newest turns follow as the items they were (appended to, never
        # rewritten: a prompt cache reuses everything up to the newest item),
        # and what this request decided (memory retrieved for it, the point in
        # time) comes last.
        stable, log, request = bundle.parts()
        first = f"[#{bundle.recent_turns[0].seq}] " if bundle.recent_turns else None
        at = log.find(first) if first else -1
        head = log[:at] if at >= 0 else log
        # A pending action's status set since the fold: a line after the turns.
        tail = ""
        if at >= 0:
            lines = log[at:].splitlines(keepends=True)
            tail = "".join(line for line in lines if line.startswith("Update: pending action "))
        items: list[Any] = [{"role": "system", "content": (stable + head).rstrip()}]
        items.extend(item_of(t) for t in bundle.recent_turns)
        closing = (tail + request).strip()
        if closing:
            items.append({"role": "system", "content": closing})
        return items

    def _add_items(self, items: list[Any]) -> None:
        self._ensure()
        turns = [turn_of(item) for item in items]
        try:
            self._client.append_turns(self.namespace, self.session_id, turns)
        except NotFound:
            # Cleared by another process since: start it again.
            self._created = False
            self._ensure()
            self._client.append_turns(self.namespace, self.session_id, turns)

    def _pop_item(self) -> Any:
        try:
            turn = self._client.remove_last_turn(self.namespace, self.session_id)
        except NotFound:
            return None
        return None if turn is None else item_of(turn)

    def _clear(self) -> None:
        try:
            self._client.delete_session(self.namespace, self.session_id)
        except NotFound:
            pass
        self._created = False


def _text(content: Any) -> str:
    """The readable text of a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                for field in ("text", "refusal", "transcript"):
                    if isinstance(part.get(field), str):
                        parts.append(part[field])
                        break
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def turn_of(item: Any) -> dict[str, Any]:
    """The mnemo turn that stores `item` (its JSON kept whole in the metadata)."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True)
    if not isinstance(item, dict):
        raise TypeError(f"an item must be a dict (an SDK input item), not {type(item).__name__}")
    encoded = json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    metadata = _chunks(encoded)
    kind = item.get("type", "message" if "role" in item else "")
    if kind == "message" or (not kind and "role" in item):
        role = _MESSAGE_ROLES.get(str(item.get("role")), "assistant")
        return {"role": role, "content": _text(item.get("content")), "metadata": metadata}
    if kind == "function_call":
        arguments = str(item.get("arguments", ""))
        turn: dict[str, Any] = {"role": "assistant", "content": "", "metadata": metadata}
        try:
            json.loads(arguments)
        except ValueError:
            # Not JSON: the item (kept whole) is the only record of them.
            turn["content"] = f"{item.get('name', '')}({arguments})"
        else:
            turn["tool_call"] = {"tool_name": str(item.get("name", "")), "arguments_json": arguments, "status": "pending"}
        return turn
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return {"role": "tool", "content": text, "metadata": metadata}
    # Reasoning and the other item kinds: what text they carry.
    text = _text(item.get("summary")) or _text(item.get("content")) or kind
    return {"role": "assistant", "content": text, "metadata": metadata}


def _chunks(encoded: str) -> dict[str, str]:
    """`encoded` split into metadata values of at most _CHUNK bytes each."""
    raw = encoded.encode("utf-8")
    if len(raw) <= _CHUNK:
        return {ITEM_KEY: encoded}
    chunks: list[str] = []
    start = 0
    while start < len(raw):
        end = min(start + _CHUNK, len(raw))
        while end < len(raw) and (raw[end] & 0xC0) == 0x80:  # not inside a UTF-8 sequence
            end -= 1
        chunks.append(raw[start:end].decode("utf-8"))
        start = end
    if len(chunks) > _MAX_CHUNKS:
        raise ValueError(
            f"an item of {len(raw)} bytes is larger than one mnemo turn keeps "
            f"({_CHUNK * _MAX_CHUNKS} bytes of item JSON); store large payloads elsewhere and pass a reference"
        )
    return {f"{ITEM_KEY}.{i:02d}": c for i, c in enumerate(chunks)}


def item_of(turn: Turn) -> Any:
    """The item a turn stores: exactly as added, or a plain message for turns added otherwise."""
    meta = turn.metadata or {}
    if ITEM_KEY in meta:
        return json.loads(meta[ITEM_KEY])
    parts = sorted(k for k in meta if k.startswith(ITEM_KEY + "."))
    if parts:
        return json.loads("".join(meta[k] for k in parts))
    role = turn.role if turn.role in ("user", "assistant", "system") else "assistant"
    return {"role": role, "content": turn.content}
