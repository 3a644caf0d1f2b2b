#!/usr/bin/env python3
"""Turns labelled conversations into a conversation set for the summary
sweep (`cargo bench --bench summary_sweep`, MNEMO_SWEEP_SETS), with the
labels keyed by the turn seqs mnemo gives the turns, so the sweep can
score the summaries' pending actions, decisions and open questions against
them (the scoring of docs/summaries.md, from the labelling guideline).

Usage:

    python3 scripts/labelled_to_sweep.py OUT.json INPUTS_DIR LABELS_DIR [--only=a,b]

INPUTS_DIR holds one `<name>.json` per conversation: {"source", "turns":
[{"idx", "role", "speaker", "content", "tool_call"?: {"name",
"arguments"}, "tool_name"?, "status"?, "error_details"?}]}, turn `idx`
1-based. LABELS_DIR holds `<name>.json` per conversation, written by an
annotator who saw only the conversation: {"labels": [{"turn": idx,
"labels": ["commitment" | "request" | "decision" | "open_question"],
"owner", "reason"}]}. A conversation without a labels file is skipped.

Turns become mnemo turns in order (seq 1, 2, ...); an assistant turn that
only calls a tool and the tool turn answering it become one tool turn (the
call's exact name and arguments, the result), as
`toolbench_runs_to_conversations.py` reads a run; a labelled idx maps to
the seq of the turn it became.

Output: {"source",
"conversations": [{"id", "turns": [...], "labels": {"<seq>": [...]},
"owners": {"<seq>": "..."}}]}.
"""

import json
import sys
from pathlib import Path

KINDS = {"commitment", "request", "decision", "open_question"}


def mnemo_turns(turns):
    """The mnemo turns and, per input idx, the seq it became."""
    out, seq_of = [], {}
    i = 0
    while i < len(turns):
        t = turns[i]
        call = t.get("tool_call")
        if t.get("role") == "assistant" and call and not (t.get("content") or "").strip():
            result = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].get("role") == "tool" else None
            status = (result or {}).get("status") or ("pending" if result is None else "success")
            out.append({
                "role": "tool",
                "speaker": t.get("speaker", ""),
                "content": "",
                "tool_call": {
                    "tool_name": call["name"],
                    "arguments_json": call.get("arguments", ""),
                    "result": (result or {}).get("content", ""),
                    "status": status,
                    "error_details": (result or {}).get("error_details", ""),
                },
            })
            seq_of[t["idx"]] = len(out)
            if result is not None:
                seq_of[result["idx"]] = len(out)
                i += 1
            i += 1
            continue
        out.append({"role": t.get("role", "user"), "speaker": t.get("speaker", ""),
                    "content": t.get("content", "")})
        seq_of[t["idx"]] = len(out)
        i += 1
    return out, seq_of


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) < 3:
        sys.exit(__doc__)
    out_path, inputs, labels_dir = Path(args[0]), Path(args[1]), Path(args[2])
    only = None
    for f in flags:
        if f.startswith("--only="):
            only = set(f.split("=", 1)[1].split(","))
    convs, sources = [], set()
    for path in sorted(inputs.glob("*.json")):
        name = path.stem
        if only is not None and name not in only:
            continue
        lab_path = labels_dir / f"{name}.json"
        if not lab_path.exists():
            continue
        conv = json.loads(path.read_text())
        sources.add(conv.get("source", "").split(" data")[0])
        turns, seq_of = mnemo_turns(conv["turns"])
        labels, owners = {}, {}
        for item in json.loads(lab_path.read_text()).get("labels", []):
            seq = seq_of.get(item["turn"])
            kinds = [k for k in item.get("labels", []) if k in KINDS]
            if seq is None or not kinds:
                continue
            labels.setdefault(str(seq), [])
            labels[str(seq)] += [k for k in kinds if k not in labels[str(seq)]]
            if item.get("owner"):
                owners[str(seq)] = item["owner"]
        entry = {"id": name, "turns": turns, "labels": labels, "owners": owners}
        convs.append(entry)
    out_path.write_text(json.dumps({"source": ", ".join(sorted(s for s in sources if s)),
                                    "conversations": convs}, indent=1, ensure_ascii=False))
    print(f"{len(convs)} conversations -> {out_path}")


if __name__ == "__main__":
    main()
