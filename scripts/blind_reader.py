#!/usr/bin/env python3
"""Blind-reader protocol: does an agent answer better from a bundle than
from a plain search pack of the same size? Answer-in-bundle checks a gold
string; this checks what a reader model makes of the context.

Three steps, each a file hand-off, so that any capable model can be the
reader and the judge (a local model, an API, a person):

1. prepare: from context dumps of the retrieval bench
   (`MNEMO_BENCH_DUMP_CONTEXTS=path cargo bench --bench retrieval --
   quality`; one JSON line per question and budget with the question, the
   gold answers, its category and the contexts by condition: `bundle`,
   `pack`), writes reader tasks with the condition hidden: every (question,
   condition) gets a random id, tasks are shuffled and split into batches.
   Dumps from other binaries (the release before, say) join with
   `--extra NAME=DUMP`: their `bundle` context becomes condition NAME.
   Conditions with byte-identical contexts for a question share one task.

       python3 scripts/blind_reader.py prepare OUT_DIR DUMP.jsonl [--extra before=OLD.jsonl]
           [--budget 2000] [--sets realtalk,elitr] [--per-set 100] [--batch 40] [--seed 7]

   OUT_DIR/reader/batch_NN.json: [{"id", "question", "context"}]; give a
   reader one batch at a time with READER_INSTRUCTIONS (below) and have it
   write OUT_DIR/answers/batch_NN.json: [{"id", "answer"}].
   OUT_DIR/key.json maps ids to questions and conditions: never show it to
   a reader or a judge.

2. judge-tasks: writes OUT_DIR/judge/batch_NN.json: [{"id", "question",
   "gold", "answer"}] (no context, no condition); a judge model, with
   JUDGE_INSTRUCTIONS, writes OUT_DIR/verdicts/batch_NN.json: [{"id",
   "correct": true|false}].

       python3 scripts/blind_reader.py judge-tasks OUT_DIR [--batch 80]

3. score: accuracy per condition and per category, and for each pair of
   conditions the paired counts (right only from A / only from B) and the
   difference with a 95% interval (paired, normal approximation).

       python3 scripts/blind_reader.py score OUT_DIR

4. extend (a later version, same questions): adds condition NAME from
   another dump; contexts identical to one already read share its task,
   the rest become new reader tasks (reader/extra_NAME_NN.json); then
   judge-tasks writes judge batches only for answers not judged yet.

       python3 scripts/blind_reader.py extend OUT_DIR DUMP.jsonl NAME [--budget 2000]

Nothing here calls a model: the protocol fixes what each side sees.
"""

import json
import math
import random
import sys
from collections import defaultdict
from pathlib import Path

READER_INSTRUCTIONS = """You answer questions about a person's or a team's past conversations.
For each item you get a question and a context (memory handed to an agent). Answer from the
context alone: no outside knowledge, no guessing. Give the shortest answer that answers the
question (a name, a date, a few words). If the context does not say, answer exactly "unknown".
Dates in the context are when things were said; answer "when" questions with the date or
period the context supports."""

JUDGE_INSTRUCTIONS = """For each item you get a question, the gold answer(s) and a candidate answer.
Mark correct=true when the candidate gives the same fact as a gold answer (wording, spelling
and format may differ; a date within the gold's period counts; extra correct detail is fine),
and false when it is wrong, missing, "unknown", or hedges between several answers."""


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def qkey(row):
    return f'{row["set"]}#{row["qid"]}'


def prepare(args, flags):
    out = Path(args[0])
    budget = int(flags.get("budget", 2000))
    sets = set(flags["sets"].split(",")) if "sets" in flags else None
    per_set = int(flags.get("per-set", 0))
    batch = int(flags.get("batch", 40))
    rng = random.Random(int(flags.get("seed", 7)))
    rows = [r for r in read_jsonl(args[1]) if r["budget"] == budget]
    rows = [r for r in rows if sets is None or r["set"] in sets]
    extra = {}
    for spec in flags.get("extra", []):
        name, path = spec.split("=", 1)
        extra[name] = {qkey(r): r for r in read_jsonl(path) if r["budget"] == budget}
    # A stratified sample: per set, the same number of questions from
    # each category (as far as the set has them).
    by_set = defaultdict(list)
    for r in rows:
        if all(qkey(r) in e for e in extra.values()):
            by_set[r["set"]].append(r)
    chosen = []
    for name, rs in sorted(by_set.items()):
        if per_set and len(rs) > per_set:
            by_cat = defaultdict(list)
            for r in rs:
                by_cat[r.get("category", "")].append(r)
            for c in by_cat.values():
                rng.shuffle(c)
            picked = []
            while len(picked) < per_set:
                for c in sorted(by_cat):
                    if by_cat[c] and len(picked) < per_set:
                        picked.append(by_cat[c].pop())
            rs = picked
        chosen += rs
    tasks, key = [], {}
    for r in chosen:
        contexts = dict(r["contexts"])
        for name, e in extra.items():
            contexts[name] = e[qkey(r)]["contexts"]["bundle"]
        # Conditions whose contexts are byte-identical for a question
        # share one reader task (the same context is read once: a change
        # that touches few bundles costs few reads, and identical contexts
        # cannot get different verdicts by the reader's chance).
        by_text = defaultdict(list)
        for cond, text in contexts.items():
            by_text[text].append(cond)
        for text, conds in by_text.items():
            tid = "%012x" % rng.getrandbits(48)
            key[tid] = {"q": qkey(r), "set": r["set"], "category": r.get("category", ""),
                        "condition": conds[0], "conditions": conds,
                        "question": r["question"], "answers": r["answers"]}
            tasks.append({"id": tid, "question": r["question"], "context": text})
    rng.shuffle(tasks)
    (out / "reader").mkdir(parents=True, exist_ok=True)
    (out / "answers").mkdir(exist_ok=True)
    for i in range(0, len(tasks), batch):
        (out / "reader" / f"batch_{i // batch:02d}.json").write_text(
            json.dumps(tasks[i:i + batch], indent=1, ensure_ascii=False))
    (out / "key.json").write_text(json.dumps(key, indent=1, ensure_ascii=False))
    (out / "READER.md").write_text(READER_INSTRUCTIONS + "\n")
    (out / "JUDGE.md").write_text(JUDGE_INSTRUCTIONS + "\n")
    print(f"{len(chosen)} questions, {len(tasks)} reader tasks in {math.ceil(len(tasks) / batch)} batches")


def extend(args, flags):
    """Adds condition NAME (the `bundle` context of DUMP) to a prepared
    OUT_DIR: a question whose new context is byte-identical to one already
    read joins that task; the others become new reader tasks
    (reader/extra_NN.json). Earlier answers and verdicts stay valid."""
    out, dump, name = Path(args[0]), args[1], args[2]
    budget = int(flags.get("budget", 2000))
    batch = int(flags.get("batch", 40))
    # Seeded by the condition, and checked against the ids in use: two
    # extensions must never hand out the same id.
    rng = random.Random(f'{flags.get("seed", 13)}:{name}')
    key = json.loads((out / "key.json").read_text())
    texts = {}
    for p in sorted((out / "reader").glob("*.json")):
        for item in json.loads(p.read_text()):
            texts[item["id"]] = item["context"]
    new = {qkey(r): r for r in read_jsonl(dump) if r["budget"] == budget}
    by_q = defaultdict(list)
    for tid, k in key.items():
        by_q[k["q"]].append(tid)
    tasks = []
    for q, tids in by_q.items():
        text = new[q]["contexts"]["bundle"]
        same = next((t for t in tids if texts.get(t) == text), None)
        if same:
            key[same].setdefault("conditions", [key[same]["condition"]]).append(name)
            continue
        k = key[tids[0]]
        tid = "%012x" % rng.getrandbits(48)
        while tid in key or tid in texts:
            tid = "%012x" % rng.getrandbits(48)
        key[tid] = {"q": q, "set": k["set"], "category": k["category"], "condition": name,
                    "conditions": [name], "question": k["question"], "answers": k["answers"]}
        tasks.append({"id": tid, "question": k["question"], "context": text})
    rng.shuffle(tasks)
    for i in range(0, len(tasks), batch):
        (out / "reader" / f"extra_{name}_{i // batch:02d}.json").write_text(
            json.dumps(tasks[i:i + batch], indent=1, ensure_ascii=False))
    (out / "key.json").write_text(json.dumps(key, indent=1, ensure_ascii=False))
    print(f"{len(by_q) - len(tasks)} questions share a read context, {len(tasks)} new reader tasks")


def load_dir(d):
    out = {}
    for p in sorted(Path(d).glob("*.json")):
        for item in json.loads(p.read_text()):
            out[item["id"]] = item
    return out


def judge_tasks(args, flags):
    out = Path(args[0])
    batch = int(flags.get("batch", 80))
    key = json.loads((out / "key.json").read_text())
    answers = load_dir(out / "answers")
    (out / "judge").mkdir(exist_ok=True)
    (out / "verdicts").mkdir(exist_ok=True)
    # Answers already judged (an earlier round) are not judged again.
    judged = load_dir(out / "verdicts")
    items = [{"id": i, "question": key[i]["question"], "gold": key[i]["answers"],
              "answer": a.get("answer", "")} for i, a in answers.items()
             if i in key and i not in judged]
    random.Random(11).shuffle(items)
    first = len(list((out / "judge").glob("*.json")))
    for i in range(0, len(items), batch):
        (out / "judge" / f"batch_{first + i // batch:02d}.json").write_text(
            json.dumps(items[i:i + batch], indent=1, ensure_ascii=False))
    print(f"{len(items)} answers to judge ({len(judged)} judged before), "
          f"{len(key) - len(answers)} tasks without an answer")


def score(args, flags):
    out = Path(args[0])
    key = json.loads((out / "key.json").read_text())
    verdicts = load_dir(out / "verdicts")
    right = defaultdict(dict)  # question -> condition -> bool
    meta = {}
    for tid, k in key.items():
        v = verdicts.get(tid)
        for cond in k.get("conditions", [k["condition"]]):
            right[k["q"]][cond] = bool(v and v.get("correct"))
        meta[k["q"]] = k
    conds = sorted({c for r in right.values() for c in r})
    complete = {q: r for q, r in right.items() if all(c in r for c in conds)}
    n = len(complete)
    print(f"{n} questions judged under every condition ({len(verdicts)} verdicts)\n")
    cats = sorted({meta[q]["set"] + ":" + str(meta[q]["category"]) for q in complete})
    print("| condition | accuracy | " + " | ".join(cats) + " |")
    print("|---|---|" + "---|" * len(cats))
    for c in conds:
        k = sum(r[c] for r in complete.values())
        cells = []
        for cat in cats:
            qs = [q for q in complete if meta[q]["set"] + ":" + str(meta[q]["category"]) == cat]
            cells.append(f"{sum(complete[q][c] for q in qs)}/{len(qs)}")
        print(f"| {c} | {k / n:.3f} ({k}/{n}) | " + " | ".join(cells) + " |")
    print("\n| A vs B | only A right | only B right | A − B | 95% interval |")
    print("|---|---:|---:|---:|---|")
    for i, a in enumerate(conds):
        for b in conds[i + 1:]:
            only_a = sum(r[a] and not r[b] for r in complete.values())
            only_b = sum(r[b] and not r[a] for r in complete.values())
            d = (only_a - only_b) / n
            se = math.sqrt(max(only_a + only_b - (only_a - only_b) ** 2 / n, 0)) / n
            print(f"| {a} vs {b} | {only_a} | {only_b} | {d:+.3f} | [{d - 1.96 * se:+.3f}, {d + 1.96 * se:+.3f}] |")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    args, flags = [], {"extra": []}
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--"):
            name = a[2:]
            if name == "extra":
                flags["extra"].append(rest[i + 1])
            else:
                flags[name] = rest[i + 1]
            i += 2
        else:
            args.append(a)
            i += 1
    {"prepare": prepare, "extend": extend, "judge-tasks": judge_tasks, "score": score}[cmd](args, flags)


if __name__ == "__main__":
    main()
