#!/usr/bin/env python3
"""Converts BFCL v4 memory (ShishirPatil/gorilla, Apache-2.0) into mnemo's
retrieval development-set format (read by `cargo bench --bench retrieval`).

Input: a directory holding the dataset's files as they are in the repository
under `berkeley-function-call-leaderboard/bfcl_eval/data/`:
  BFCL_v4_memory.json                      questions (JSON lines)
  possible_answer/BFCL_v4_memory.json      accepted answers + quoted source
  memory_prereq_conversation/memory_*.json earlier conversations (user turns)

Mapping: each scenario (customer, finance, ...) is a subject; each earlier
conversation is a closed session, one day apart from 2024-01-01 10:00 UTC;
a final open session holds one user turn ("Hi again."). A question's
evidence is the turn containing its quoted source sentence (ellipses split
the quote; the longest fragment is searched, case and spacing ignored).

Output format:
  {"source": str,
   "subjects": [{"subject_id", "sessions": [{"session_id", "date" (RFC 3339),
                 "turns": [{"role", "speaker", "content"}]}]}],
   "questions": [{"subject_id", "question", "answers": [str],
                  "evidence": [{"session_id", "index"}], "category"}]}

Usage: bfcl_memory_to_dev_set.py DATA_DIR OUT.json
"""

import datetime
import glob
import json
import os
import re
import sys


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def norm(s):
    return re.sub(r"\s+", " ", s.lower()).strip()


def main(data_dir, out_path):
    subjects = {}
    start = datetime.datetime(2024, 1, 1, 10, 0, 0)
    for path in sorted(glob.glob(os.path.join(data_dir, "memory_prereq_conversation", "memory_*.json"))):
        for day, conv in enumerate(lines(path)):
            scenario = conv["scenario"]
            subject = subjects.setdefault(scenario, {"subject_id": scenario, "sessions": []})
            turns = []
            for group in conv["question"]:
                for t in group:
                    turns.append({"role": t["role"], "speaker": "user" if t["role"] == "user" else "", "content": t["content"]})
            date = start + datetime.timedelta(days=len(subject["sessions"]))
            subject["sessions"].append({
                "session_id": f"{scenario}-{len(subject['sessions']) + 1:02d}",
                "date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "topic": conv.get("topic", ""),
                "turns": turns,
            })
    for subject in subjects.values():
        date = start + datetime.timedelta(days=len(subject["sessions"]))
        subject["sessions"].append({
            "session_id": f"{subject['subject_id']}-open",
            "date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "turns": [{"role": "user", "speaker": "user", "content": "Hi again."}],
        })
    answers = {a["id"]: a for a in lines(os.path.join(data_dir, "possible_answer", "BFCL_v4_memory.json"))}
    questions = []
    for q in lines(os.path.join(data_dir, "BFCL_v4_memory.json")):
        a = answers.get(q["id"])
        if a is None:
            continue
        scenario = q["scenario"]
        text = " ".join(t["content"] for group in q["question"] for t in group)
        fragments = [norm(f) for f in re.split(r"\.\.\.|…", a.get("source", "")) if norm(f)]
        quote = max(fragments, key=len) if fragments else ""
        evidence = []
        if quote:
            for s in subjects[scenario]["sessions"]:
                for i, t in enumerate(s["turns"]):
                    if quote in norm(t["content"]):
                        evidence.append({"session_id": s["session_id"], "index": i})
        questions.append({
            "subject_id": scenario,
            "question": text,
            "answers": [str(x) for x in a["ground_truth"]],
            "evidence": evidence,
            "category": scenario,
        })
    out = {
        "source": "BFCL v4 memory (ShishirPatil/gorilla, berkeley-function-call-leaderboard/bfcl_eval/data: "
                  "BFCL_v4_memory.json, possible_answer/BFCL_v4_memory.json, memory_prereq_conversation/); Apache-2.0",
        "subjects": list(subjects.values()),
        "questions": questions,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    n_turns = sum(len(s["turns"]) for sub in subjects.values() for s in sub["sessions"])
    print(f"{len(subjects)} subjects, {sum(len(s['sessions']) for s in subjects.values())} sessions, "
          f"{n_turns} turns, {len(questions)} questions, {sum(1 for q in questions if q['evidence'])} with evidence")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
