#!/usr/bin/env python3
"""Writes the per-utterance TSVs of `cargo bench --bench dialogue_acts`
(MNEMO_DA_SETS) from two dialogue-act corpora labelled by people.

Sources (GPL-3.0 repositories whose data licence is not stated: use
locally, never commit the corpora or these TSVs):
- MRDA, NathanDuran/MRDA-Corpus: `mrda_data/<split>/<meeting>.txt` name
  each split's meetings; `mrda_archive/database/<meeting>.dadb` holds each
  utterance's full tags (the processed files keep only the first), and
  `mrda_archive/transcripts/<meeting>.trans` its text. Positive: a full
  tag with `cc` (commit) or `co` (action directive) among its labels.
- Switchboard DA, NathanDuran/Switchboard-Corpus:
  `swda_data/<split>/<conversation>.txt`, lines `speaker|text|tag`.
  Positive: `ad` (action directive) or `oo_co_cc` (offers, options,
  commits).

Output: a header, then `conv_id, utt_index, speaker, text, full_tag,
positive` (tab separated; tabs in text become spaces).

Usage:
    dialogue_acts_to_tsv.py mrda MRDA_REPO SPLIT OUT.tsv
    dialogue_acts_to_tsv.py swda SWDA_REPO SPLIT OUT.tsv
with the repository's files unpacked under *_REPO and SPLIT one of
train, val, test.
"""

import csv
import re
import sys
from pathlib import Path

MRDA_POSITIVE = {"cc", "co"}
SWDA_POSITIVE = {"ad", "oo_co_cc"}


def clean(text):
    return " ".join(text.replace("\t", " ").split())


def mrda_rows(repo, split):
    repo = Path(repo)
    for meeting_file in sorted((repo / "mrda_data" / split).glob("*.txt")):
        meeting = meeting_file.stem
        texts = {}
        with open(repo / "mrda_archive" / "transcripts" / f"{meeting}.trans", encoding="utf-8") as f:
            for row in csv.reader(f):
                if len(row) >= 2:
                    texts[row[0]] = row[1]
        with open(repo / "mrda_archive" / "database" / f"{meeting}.dadb", encoding="utf-8") as f:
            for i, row in enumerate(csv.reader(f)):
                if len(row) < 8 or row[2] not in texts:
                    continue
                tag = row[5]
                labels = set(re.split(r"[\^|:.,]", tag))
                yield (meeting, i, row[7], clean(texts[row[2]]), tag, int(bool(labels & MRDA_POSITIVE)))


def swda_rows(repo, split):
    for conv_file in sorted((Path(repo) / "swda_data" / split).glob("*.txt")):
        with open(conv_file, encoding="utf-8") as f:
            for i, line in enumerate(f):
                parts = line.rstrip("\n").split("|")
                if len(parts) < 3:
                    continue
                speaker, tag, text = parts[0], parts[-1], "|".join(parts[1:-1])
                yield (conv_file.stem, i, speaker, clean(text), tag, int(tag in SWDA_POSITIVE))


def main(kind, repo, split, out):
    rows = {"mrda": mrda_rows, "swda": swda_rows}[kind](repo, split)
    n = pos = 0
    with open(out, "w", encoding="utf-8") as f:
        f.write("conv_id\tutt_index\tspeaker\ttext\tfull_tag\tpositive\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
            n += 1
            pos += r[-1]
    print(f"{kind} {split}: {pos} positives / {n} utterances -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
