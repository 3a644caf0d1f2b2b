#!/usr/bin/env python3
"""Converts ELITR English meetings (with their human minutes) into a meeting
development set for the summary-quality bench.

Source: utter-project/UTTER-MS9-meetingdata, ELITR-English-dev.tar.zip (zip
password "utter"), CC BY 4.0. Unpack it, then:

    python3 scripts/elitr_meetings_to_dev_set.py ELITR-English-dev OUT.json [meeting ids...]

Turns: a transcript line "(PERSONn) text" starts a speaker's turn; the lines
that follow without a speaker continue it. Markers such as <laugh/> are kept:
they are part of what a summarizer must cope with.

Gold: the bullets of the meeting's human minutes (minutes_ORIG.txt, else the
first minutes_GENER_*.txt) that carry a commitment or a decision cue ("will",
"should", "to <verb>", "agreed", "decided", "let's", "plan", "needs to",
"TODO", "@[PERSON…]", "to be done", "to be <verb>ed", "has to",
"required"), with the minute's markup stripped. A meeting's minutes
are not complete lists of its decisions and actions, so precision against
them is only indicative; recall is what the bench reports first.
"""

import json
import re
import sys
from pathlib import Path

# The dev minutes use "-", the test minutes "•".
BULLETS = ("-", "•", "*")
SPEAKER = re.compile(r"^\((PERSON\d+)\)\s*(.*)$")
CUE = re.compile(
    r"\bwill\b|\bshould\b|\bagreed?\b|\bdecided?\b|\bdecision\b|\blet'?s\b"
    r"|\bneeds? to\b|\btodo\b|@\[person|\bto (?:do|send|write|prepare|check|ask|contact|create|finish|update"
    r"|test|run|fix|share|look|find|add|train|evaluate|organi[sz]e|submit|present|show|invite|help|try)\b"
    r"|\bto be (?:done|\w+ed)\b|\b(?:have|has) to\b|\brequired\b",
    re.IGNORECASE,
)


def turns_of(transcript: Path) -> list[dict]:
    turns: list[dict] = []
    for raw in transcript.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = SPEAKER.match(line)
        if m:
            turns.append({"speaker": m.group(1), "content": m.group(2).strip()})
        elif turns:
            turns[-1]["content"] = (turns[-1]["content"] + " " + line).strip()
    return [t for t in turns if t["content"]]


def gold_of(minutes: Path) -> list[str]:
    out = []
    for raw in minutes.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line.startswith(BULLETS):
            continue
        text = line.lstrip("".join(BULLETS)).strip()
        text = re.sub(r"^#\w+\s*", "", text)
        if len(text.split()) >= 3 and CUE.search(text):
            out.append(text)
    return out


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    wanted = set(sys.argv[3:])
    meetings = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("meeting_")):
        if wanted and d.name not in wanted:
            continue
        transcripts = sorted(d.glob("transcript_*.txt"))
        minutes = [d / "minutes_ORIG.txt"] if (d / "minutes_ORIG.txt").exists() else sorted(d.glob("minutes_GENER_*.txt"))
        if not transcripts or not minutes:
            continue
        turns = turns_of(transcripts[0])
        meetings.append(
            {
                "id": d.name,
                "participants": sorted({t["speaker"] for t in turns}),
                "turns": turns,
                "gold": gold_of(minutes[0]),
            }
        )
    out.write_text(
        json.dumps(
            {
                "source": "ELITR English meetings (utter-project/UTTER-MS9-meetingdata), CC BY 4.0",
                "meetings": meetings,
            },
            ensure_ascii=False,
            indent=1,
        )
    )
    print(f"{len(meetings)} meetings, {sum(len(m['turns']) for m in meetings)} turns, "
          f"{sum(len(m['gold']) for m in meetings)} gold items -> {out}")


if __name__ == "__main__":
    main()
