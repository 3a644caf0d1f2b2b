#!/usr/bin/env python3
"""Converts QMSum's Committee and Academic meetings into a meeting development
set for the summary-quality bench (the same JSON shape as the ELITR set).

Source: Yale-LILY/QMSum, data/Committee/all/*.json and data/Academic/all/*.json
(MIT licence). Never data/Product or data/ALL: those hold meetings of a
held-out corpus. Usage:

    python3 scripts/qmsum_meetings_to_dev_set.py [--all] OUT.json FILE.json...

`--all` keeps the meetings without a decision or next-step query too (with
no gold): the summary sweep folds every meeting.

Turns: each transcript entry is one turn, its text unchanged ({disfmarker}
and {vocalsound} markers kept).

Gold: QMSum has no minutes, but specific queries with an abstractive answer
and the turn spans that hold the evidence. A query counts when it asks what
was decided, agreed, concluded, planned or comes next (not someone's opinion
or reasons); each sentence of its answer is a gold item, with the query's
spans as `gold_spans` (0-based turn indices, inclusive). Answers paraphrase,
so content-word recall is a floor; the bench also reports span recall: a
gold item whose evidence span holds a turn cited by a decision or action.
"""

import json
import re
import sys
from pathlib import Path

ASKS = re.compile(
    r"\bdecid|\bdecision\b|\bagreed? (?:on|upon|to|that)\b|\bnext step|\bfuture\b"
    r"|\bconclu|\baction items?\b|\bplan(?:s|ned)? (?:for|to)\b|\bfollow.?up",
    re.IGNORECASE,
)
NOT_ASKS = re.compile(r"\bopinion\b|\bthink\b|\bwhy\b|\bsay when\b|\bhow do they\b", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3]


def main() -> None:
    args = sys.argv[1:]
    keep_all = bool(args) and args[0] == "--all"
    if keep_all:
        args = args[1:]
    out = Path(args[0])
    meetings = []
    for path in sorted(Path(p) for p in args[1:]):
        if "Product" in path.parts or "ALL" in path.parts:
            sys.exit(f"{path}: not a Committee or Academic meeting")
        d = json.loads(path.read_text(encoding="utf-8"))
        gold, spans = [], []
        for q in d["specific_query_list"]:
            if not ASKS.search(q["query"]) or NOT_ASKS.search(q["query"]):
                continue
            span = [[int(a), int(b)] for a, b in q["relevant_text_span"]]
            for s in sentences(q["answer"]):
                gold.append(s)
                spans.append(span)
        if not gold and not keep_all:
            continue
        turns = [
            {"speaker": t["speaker"].strip(), "content": t["content"].strip()}
            for t in d["meeting_transcripts"]
        ]
        meetings.append(
            {
                "id": path.stem,
                "participants": sorted({t["speaker"] for t in turns}),
                "turns": turns,
                "gold": gold,
                "gold_spans": spans,
            }
        )
    out.write_text(
        json.dumps(
            {"source": "QMSum Committee and Academic (Yale-LILY/QMSum), MIT", "meetings": meetings},
            ensure_ascii=False,
            indent=1,
        )
    )
    print(f"{len(meetings)} meetings, {sum(len(m['turns']) for m in meetings)} turns, "
          f"{sum(len(m['gold']) for m in meetings)} gold items -> {out}")


if __name__ == "__main__":
    main()
