#!/usr/bin/env python3
"""Converts task-oriented dialogues (a customer and an agent that calls an
API) into conversations for the summary sweep (`cargo bench --bench
summary_sweep`, MNEMO_SWEEP_SETS).

Sources, each a JSON list of dialogues, read by shape:
- Taskmaster-4 coffee orders (google-research-datasets/Taskmaster,
  `TM-4-2024/data/data_*.json`, CC BY 4.0): `utterances` of `user` and
  `assistant`; the API calls the agent made after a user utterance are
  that utterance's `api_call` / `request` / `api_response` / `response`
  annotations (grouped by their `context`).
- Taskmaster-3 movie tickets (same repository, `TM-3-2020/reward/reward_*.json`,
  CC BY 4.0): each reward example's `context` (a JSON list of `agent` /
  `user` texts, agent `api` calls and `api` responses) is one dialogue up to
  the scored agent step; the `generation` step is appended (its reward is
  not used).
- ABCD customer-service chats (asappresearch/abcd, `data/abcd_sample.json`,
  MIT): `original` pairs of `agent` / `customer` / `action`; an action line
  is the agent's system note, kept as an agent turn.

Usage:

    python3 scripts/task_dialogues_to_conversations.py OUT.json [--max N] [--source TEXT] FILE.json...

Every customer / user text is a user turn (speaker "customer"); every agent
text an assistant turn (speaker "agent"); every API call with its response one
tool turn (exact name, arguments JSON, response JSON; status "failure" when the
response is an object with an "error"). Empty texts are skipped. With --max N
at most N dialogues are kept per input file, the first N in the file's order.
"""

import json
import sys
from pathlib import Path


def tool_turn(name: str, args, response) -> dict:
    args_json = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    result = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    error = ""
    try:
        parsed = json.loads(result) if isinstance(result, str) else result
        if isinstance(parsed, dict) and parsed.get("error"):
            error = str(parsed["error"])
    except ValueError:
        pass
    return {
        "role": "tool",
        "speaker": name,
        "content": "",
        "tool_call": {
            "tool_name": name,
            "arguments_json": args_json or "{}",
            "result": result or "",
            "status": "failure" if error else "success",
            "error_details": error,
        },
    }


def text_turn(role: str, text: str) -> dict:
    speaker = "customer" if role == "user" else "agent"
    return {"role": role, "speaker": speaker, "content": (text or "").strip()}


def taskmaster4(d: dict) -> list:
    turns = []
    for u in d.get("utterances", []):
        role = "user" if u.get("speaker") == "user" else "assistant"
        turns.append(text_turn(role, u.get("text")))
        calls: dict = {}
        order = []
        for a in u.get("annotations", []):
            ctx = a.get("context", "")
            key = ctx.rsplit("_", 1)[-1]
            c = calls.setdefault(key, {})
            if key not in order:
                order.append(key)
            if a.get("name") in ("api_call", "request", "response"):
                c[a["name"]] = a.get("value", "")
        for key in order:
            c = calls[key]
            if c.get("api_call"):
                turns.append(tool_turn(c["api_call"], c.get("request", "{}"), c.get("response", "")))
    return turns


def taskmaster3(d: dict) -> list:
    steps = json.loads(d["context"])
    gen = d.get("generation")
    if gen:
        steps.append(json.loads(gen))
    turns = []
    pending = None
    for s in steps:
        if s.get("role") == "agent" and s.get("api"):
            if pending:
                turns.append(tool_turn(*pending, ""))
            name, args = next(iter(s["api"].items()))
            pending = (name, args)
        elif s.get("role") == "api":
            name, resp = next(iter(s.get("response", {}).items()), (None, ""))
            if pending:
                turns.append(tool_turn(pending[0], pending[1], resp))
                pending = None
        else:
            if pending:
                turns.append(tool_turn(*pending, ""))
                pending = None
            turns.append(text_turn("user" if s.get("role") == "user" else "assistant", s.get("text")))
    if pending:
        turns.append(tool_turn(*pending, ""))
    return turns


def abcd(d: dict) -> list:
    return [
        text_turn("user" if who == "customer" else "assistant", text)
        for who, text in d.get("original", [])
    ]


def convert(d: dict):
    if "utterances" in d:
        return d.get("conversation_id"), taskmaster4(d)
    if "context" in d:
        return d.get("conversation_id"), taskmaster3(d)
    if "original" in d:
        return f"abcd-{d.get('convo_id')}", abcd(d)
    raise ValueError(f"unknown dialogue shape: {sorted(d)[:6]}")


def main() -> None:
    args = sys.argv[1:]
    out = Path(args.pop(0))
    limit = None
    source = "task-oriented dialogues"
    files = []
    while args:
        a = args.pop(0)
        if a == "--max":
            limit = int(args.pop(0))
        elif a == "--source":
            source = args.pop(0)
        else:
            files.append(Path(a))
    conversations = []
    for path in files:
        dialogues = json.loads(path.read_text(encoding="utf-8"))
        for d in dialogues[:limit]:
            cid, turns = convert(d)
            turns = [t for t in turns if t["content"] or "tool_call" in t]
            if turns:
                conversations.append({"id": cid, "turns": turns})
    out.write_text(json.dumps({"source": source, "conversations": conversations},
                              ensure_ascii=False, indent=1))
    n = sum(len(c["turns"]) for c in conversations)
    print(f"{len(conversations)} dialogues, {n} turns -> {out}")


if __name__ == "__main__":
    main()
