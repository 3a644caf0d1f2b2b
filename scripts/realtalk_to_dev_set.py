#!/usr/bin/env python3
"""Converts REALTALK (Lee et al., "REALTALK: A 21-Day Real-World Dataset for
Long-Term Conversation", 2025) into mnemo's retrieval development-set format
(read by `cargo bench --bench retrieval`).

Licence: the REALTALK repository carries no licence file. Its conversations
are real people's chats; the output of this script is for local use only and
must never be committed (nor its input copied into this repository). Keep it
outside the repository, e.g. under /work/data, and point the bench at it with
MNEMO_RETRIEVAL_SET.

Input: a directory holding the dataset's files as they are in the REALTALK
repository under `data/`: `Chat_<n>_<name>_<name>.json` (one 21-day chat
between two people each). Only those files are read. The repository's
`data/locomo/` folder is a held-out set: it is never read, and files in
DATA_DIR not named `Chat_*.json` are ignored.

Mapping: each Chat file is a subject (`subject_id` the file's name without
`.json`, subjects in chat-number order); each `session_<k>` is a session
(`<subject>-<k:02d>`, in k order) dated by its `session_<k>_date_time`
(written as UTC, the source gives no zone); each message is a turn with role
"user" when its speaker is the chat's first speaker (who writes the first
message of session 1) and "assistant" for the other person, `speaker` the
message's speaker as written, `content` its `clean_text` (image captions are
left out). A question (`qa`) is kept when its answer has at most six words;
`answers` is that one answer string, `category` REALTALK's category number
as a string (1 multi-hop, 2 temporal, 3 commonsense). Its
evidence ids name turns by `dia_id` ("D3:5"; they do not follow session
numbers, so they are looked up, not parsed); each is mapped to
(session_id, 0-based index in that session's turns); ids naming no turn
(typos, several ids in one string) are dropped, duplicates kept once.

Two variants: by default the last real session of each subject is left open
(the bench opens the last session). With --hi-again, each subject gets one
more session after its real ones (`<subject>-open`, dated a day after the
subject's last message) holding one user turn "Hi again.", as the BFCL
converter (scripts/bfcl_memory_to_dev_set.py) does.

Output format: the retrieval development-set format documented in
scripts/bfcl_memory_to_dev_set.py (read by `cargo bench --bench retrieval`);
"category" is REALTALK's category number as a string.

Usage: realtalk_to_dev_set.py [--hi-again] DATA_DIR OUT.json
"""

import datetime
import glob
import json
import os
import re
import sys

MAX_ANSWER_WORDS = 6


def parse_time(s):
    return datetime.datetime.strptime(s.strip(), "%d.%m.%Y, %H:%M:%S")


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def chat_number(path):
    m = re.match(r"Chat_(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else 0


def main(data_dir, out_path, hi_again):
    subjects, questions = [], []
    paths = sorted(glob.glob(os.path.join(data_dir, "Chat_*.json")), key=chat_number)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            chat = json.load(f)
        subject_id = os.path.splitext(os.path.basename(path))[0]
        keys = sorted((k for k in chat if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        sessions, where, last_time = [], {}, None
        first = chat[keys[0]][0]["speaker"] if keys and chat[keys[0]] else None
        for k in keys:
            n = int(k.split("_")[1])
            session_id = f"{subject_id}-{n:02d}"
            messages = chat[k]
            date = chat.get(f"{k}_date_time") or messages[0]["date_time"]
            turns = []
            for i, m in enumerate(messages):
                where.setdefault(m["dia_id"], (session_id, i))
                role = "user" if m["speaker"] == first else "assistant"
                turns.append({"role": role, "speaker": m["speaker"], "content": m["clean_text"]})
                t = parse_time(m["date_time"])
                last_time = t if last_time is None or t > last_time else last_time
            sessions.append({"session_id": session_id, "date": rfc3339(parse_time(date)), "turns": turns})
        if hi_again:
            sessions.append({
                "session_id": f"{subject_id}-open",
                "date": rfc3339(last_time + datetime.timedelta(days=1)),
                "turns": [{"role": "user", "speaker": "user", "content": "Hi again."}],
            })
        subjects.append({"subject_id": subject_id, "sessions": sessions})
        for q in chat.get("qa", []):
            answer = str(q["answer"]).strip()
            if len(answer.split()) > MAX_ANSWER_WORDS:
                continue
            evidence, seen = [], set()
            for e in q.get("evidence", []):
                hit = where.get(e)
                if hit is None or hit in seen:
                    continue
                seen.add(hit)
                evidence.append({"session_id": hit[0], "index": hit[1]})
            questions.append({
                "subject_id": subject_id,
                "question": q["question"],
                "answers": [answer],
                "evidence": evidence,
                "category": str(q.get("category", "")),
            })
    out = {
        "source": "REALTALK (Lee et al. 2025), data/Chat_*.json of the REALTALK repository; "
                  "no licence: local use only, never commit" + ("; plus a 'Hi again.' session per subject" if hi_again else ""),
        "subjects": subjects,
        "questions": questions,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    n_turns = sum(len(s["turns"]) for sub in subjects for s in sub["sessions"])
    print(f"{len(subjects)} subjects, {sum(len(s['sessions']) for s in subjects)} sessions, "
          f"{n_turns} turns, {len(questions)} questions, {sum(1 for q in questions if q['evidence'])} with evidence")


if __name__ == "__main__":
    args = sys.argv[1:]
    hi = "--hi-again" in args
    args = [a for a in args if a != "--hi-again"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], hi)
