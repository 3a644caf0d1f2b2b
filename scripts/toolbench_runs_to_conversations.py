#!/usr/bin/env python3
"""Converts ToolBench's recorded runs into conversations for the summary
sweep (`cargo bench --bench summary_sweep`, MNEMO_SWEEP_SETS).

Source: OpenBMB/ToolBench, data_example/answer/G{1,2,3}_answer/*.json
(Apache-2.0). Usage:

    python3 scripts/toolbench_runs_to_conversations.py OUT.json FILE.json...

Each file is one run: the last list of `answer_generation.train_messages`
(the whole trajectory); a run without messages (two of the fifteen keep
only their search tree) is skipped. The system prompt is left out; a user message is a
user turn; an assistant message's text (its thought) an assistant turn; an
assistant function call and the function message after it one tool turn,
with the call's exact name and arguments JSON, the result as returned, and
status "failure" with the result's "error" text when it has one.
"""

import json
import sys
from pathlib import Path


def turns_of(messages: list) -> list:
    turns = []
    pending = None
    for m in messages:
        role = m.get("role")
        if role == "user":
            turns.append({"role": "user", "speaker": "user", "content": (m.get("content") or "").strip()})
        elif role == "assistant":
            text = (m.get("content") or "").strip()
            if text:
                turns.append({"role": "assistant", "speaker": "toolbench-agent", "content": text})
            call = m.get("function_call")
            if call:
                pending = call
        elif role == "function":
            result = m.get("content") or ""
            error = ""
            try:
                error = str(json.loads(result).get("error") or "")
            except (ValueError, AttributeError):
                pass
            name = (pending or {}).get("name") or m.get("name") or "unknown"
            turns.append({
                "role": "tool",
                "speaker": name,
                "content": "",
                "tool_call": {
                    "tool_name": name,
                    "arguments_json": (pending or {}).get("arguments") or "{}",
                    "result": result,
                    "status": "failure" if error else "success",
                    "error_details": error,
                },
            })
            pending = None
    return [t for t in turns if t["content"] or "tool_call" in t]


def main() -> None:
    out = Path(sys.argv[1])
    conversations = []
    for path in sorted(Path(p) for p in sys.argv[2:]):
        d = json.loads(path.read_text(encoding="utf-8"))
        # Two of the example runs keep only their search tree, no messages.
        runs = d["answer_generation"].get("train_messages")
        if not runs:
            continue
        conversations.append({"id": path.stem, "turns": turns_of(runs[-1])})
    out.write_text(json.dumps({
        "source": "ToolBench data_example answers (OpenBMB/ToolBench), Apache-2.0",
        "conversations": conversations,
    }, ensure_ascii=False, indent=1))
    print(f"{len(conversations)} runs, {sum(len(c['turns']) for c in conversations)} turns -> {out}")


if __name__ == "__main__":
    main()
