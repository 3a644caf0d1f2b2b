#!/usr/bin/env python3
"""Converts ELITR-Bench's questions about ELITR English meetings into mnemo's
retrieval development-set format (read by `cargo bench --bench retrieval`).

Source: the repository utter-project/UTTER-MS9-meetingdata (licence CC BY
4.0, LICENSE.txt), files
  ELITR-Bench/data.zip          questions and gold answers (zip password "utter")
  ELITR-English-dev.tar.zip     dev meeting transcripts (zip password "utter")
  ELITR-English-test.tar.zip    test2 meeting transcripts (zip password "utter")
(The repository's README says ELITR-Bench has moved to
utter-project/ELITR-Bench; this script reads the copy above.) Unpack them into one folder (DATA_DIR), outside this repository:

    unzip -P utter data.zip                   -> DATA_DIR/data/elitr-bench-*.json
    unzip -P utter ELITR-English-dev.tar.zip  && tar xf ELITR-English-dev.tar
    unzip -P utter ELITR-English-test.tar.zip && tar xf ELITR-English-test.tar
                                              -> DATA_DIR/ELITR-English-{dev,test}/meeting_en_*/

Questions: `data/elitr-bench-qa_dev.json` and `data/elitr-bench-qa_test2.json`
(the "qa" version, whose questions stand alone; the "conv" version rewords
some as follow-ups, "Who attended it?"). ELITR-Bench has only these two
splits; test2 is the split of the meetings in ELITR-English-test
(meeting_en_test2_*). A question's meeting is its meeting's "id", the name
of the meeting's folder in the ELITR corpus.

Transcripts: each meeting folder holds one manual transcript,
`transcript_MAN_annotNN.txt` or `transcript_MAN2_annotNN.txt`; that file is
read (the first by name if there were several; `<meeting id>.txt`, a copy of
it, only if there is none). The `alignment+...` files are not read.

Mapping: each meeting is a subject (`subject_id` the meeting id) holding one
session, the meeting itself (`<meeting id>-meeting`). The corpus gives no
meeting dates, so the sessions are dated 2023-01-01T10:00:00Z plus one day
per meeting, dev 001-010 then test2 001-008. Turns: a transcript line
"(PERSONn) text" starts that speaker's turn, the lines after it without a
speaker continue it (turns_of() of scripts/elitr_meetings_to_dev_set.py);
every turn has role "user" and speaker "PERSONn".

Filter: a question is kept when its gold answer ("groundtruth-answer") has at
most eight words (split on whitespace) and is not a bare anonymization
placeholder: `[PERSON3]`, and likewise `[ORGANIZATION5]` or `[PROJECT2]`,
is found in almost any text, so finding it proves nothing. (Dropping only
bare `[PERSONn]` answers keeps 10 more questions, 141 instead of 131.)
`answers` is [the gold answer], `category` ELITR-Bench's "question-type"
(who, what, when, howmany). ELITR-Bench gives only the answer's position
(beginning, middle, end, several), not its turns, so `evidence` is [].

Output format: the retrieval development-set format documented in
scripts/bfcl_memory_to_dev_set.py.

Usage: elitr_bench_qa_to_dev_set.py DATA_DIR OUT.json
"""

import datetime
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from elitr_meetings_to_dev_set import turns_of  # noqa: E402

SPLITS = ("dev", "test2")
MAX_ANSWER_WORDS = 8
PLACEHOLDER = re.compile(r"\[[A-Z]+\d+\]")
FIRST_DAY = datetime.datetime(2023, 1, 1, 10, 0, 0)


def keep(answer: str) -> bool:
    return 0 < len(answer.split()) <= MAX_ANSWER_WORDS and not PLACEHOLDER.fullmatch(answer)


def transcript_of(root: Path, meeting_id: str) -> Path:
    folders = sorted(p for p in root.rglob(meeting_id) if p.is_dir())
    if not folders:
        sys.exit(f"no folder {meeting_id} under {root}")
    folder = folders[0]
    manual = sorted(folder.glob("transcript_*.txt"))
    if manual:
        return manual[0]
    copy = folder / f"{meeting_id}.txt"
    if copy.exists():
        return copy
    sys.exit(f"no transcript in {folder}")


def main(data_dir: str, out_path: str) -> None:
    root = Path(data_dir)
    subjects, questions = [], []
    for split in SPLITS:
        bench = json.loads((root / "data" / f"elitr-bench-qa_{split}.json").read_text(encoding="utf-8"))
        for meeting in bench["meetings"]:
            meeting_id = meeting["id"]
            session_id = f"{meeting_id}-meeting"
            date = FIRST_DAY + datetime.timedelta(days=len(subjects))
            turns = [
                {"role": "user", "speaker": t["speaker"], "content": t["content"]}
                for t in turns_of(transcript_of(root, meeting_id))
            ]
            subjects.append({
                "subject_id": meeting_id,
                "sessions": [{
                    "session_id": session_id,
                    "date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "turns": turns,
                }],
            })
            for q in meeting["questions"]:
                answer = q["groundtruth-answer"].strip()
                if not keep(answer):
                    continue
                questions.append({
                    "subject_id": meeting_id,
                    "question": q["question"].strip(),
                    "answers": [answer],
                    "evidence": [],
                    "category": q.get("question-type", ""),
                })
    out = {
        "source": "ELITR-Bench QA (utter-project/UTTER-MS9-meetingdata: ELITR-Bench/data.zip, qa dev and test2 "
                  "questions; ELITR-English-dev/test transcripts), CC BY 4.0",
        "subjects": subjects,
        "questions": questions,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    n_turns = sum(len(s["turns"]) for sub in subjects for s in sub["sessions"])
    print(f"{len(subjects)} subjects, {n_turns} turns, {len(questions)} questions -> {out_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
