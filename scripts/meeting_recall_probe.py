#!/usr/bin/env python3
"""Offline probe: can a general extractive selection of transcript sentences
raise decision+action recall on every meeting set at the item budget of
issue 33 (at most 25 items per hour, an hour = 9,000 words spoken)?

It reproduces the matching of `benches/summary_quality.rs` (content words
without its stop words; a gold item is covered when one item holds at least
half of its content words; sentences split at '.', '?', '!') and prints, per
set, for each selector: gold covered, recall, recall ÷ the one-sentence
ceiling, items. Nothing here is tuned on one set; every selector is scored on
all of them with the same weights.

Usage:

    python3 scripts/meeting_recall_probe.py [--rules QUALITY_OUTPUT] name=SET.json...

SET.json: a meeting set (`{"meetings": [{"id", "turns": [{"speaker",
"content"}], "gold": [...]}]}`, as `scripts/*_to_dev_set.py` write them).
QUALITY_OUTPUT: the output of `MNEMO_BENCH_SHOW_ITEMS=1 cargo bench --bench
summary_quality` over the same sets; with it the rules' own items are scored
too, alone, topped up to the budget by a selector ("fill") and with their
second half replaced by one ("replace half").

Also printed: how many of the gold items the ceiling reaches are reachable
by a sentence that carries a commitment cue at all (narrow: the bench
baseline's cues; broad: those and 17 more), i.e. the most any cue-based
rule could find with perfect ranking.
"""

import collections
import json
import math
import re
import sys

STOP = set(
    """the a an and or but of to in on for with at by from as is are was were be
    been it its this that these those we you i he she they them our your my me us
    will would should can could do does did so if not no yes yeah ok okay um uh hmm
    just also then there here what which who how all some any have has had there's
    it's i'll we'll let's don't about into out up""".split()
)
MARKER = re.compile(r"\{[^}]*\}|<[^>]*>|\[[a-z][^\]]*\]|\([a-z ]+\)")
NARROW = [" will ", " should ", " let's ", " to do ", " need to "]
BROAD = NARROW + [
    "'ll ", " going to ", " gonna ", " have to ", " has to ", " must ", " decided ",
    " decide ", " agree", " plan ", " shall ", " want to ", " would like to ",
    " try to ", " next ", " we can ", " i can ",
]
AGREE = re.compile(r"^(yes|yeah|yep|okay|ok|sure|sounds good|agreed|right|fine|good|great|exactly|absolutely)\b", re.I)


def words(text: str) -> set:
    out = set()
    for w in re.split(r"[^\w']+", text):
        w = w.strip("'").lower()
        if len(w) > 1 and w not in STOP:
            out.add(w)
    return out


def covered(gold: str, items: list) -> bool:
    g = words(gold)
    return bool(g) and any(len(g & words(i)) / len(g) >= 0.5 for i in items)


def sentences(m: dict) -> list:
    return [
        (i, t["speaker"], s.strip())
        for i, t in enumerate(m["turns"])
        for s in re.split(r"[.?!]", t["content"])
        if s.strip()
    ]


def budget(m: dict) -> int:
    spoken = sum(len(t["content"].split()) for t in m["turns"])
    return max(1, int(25 * spoken / 9000))


def has(cues: list, s: str) -> bool:
    low = " " + s.lower() + " "
    return any(c in low for c in cues)


class Meeting:
    def __init__(self, m: dict):
        self.m = m
        self.s = sentences(m)
        self.df = collections.Counter()
        for t in m["turns"]:
            self.df.update(words(MARKER.sub(" ", t["content"])))
        self.n = len(m["turns"])
        counts = collections.Counter(t["speaker"] for t in m["turns"])
        self.chair = counts.most_common(1)[0][0] if counts else None

    def cw(self, k: int) -> set:
        return words(MARKER.sub(" ", self.s[k][2]))


# Selectors: a score per sentence (higher first); None = never chosen.
def salience(mt, k):
    c = mt.cw(k)
    return None if len(c) < 3 else sum(math.log(1 + mt.df[w]) for w in c if mt.df[w] > 1) / len(c) ** 0.5


def salience_tfidf(mt, k):
    c = mt.cw(k)
    return None if len(c) < 3 else sum(
        math.log(1 + mt.df[w]) * math.log(mt.n / mt.df[w]) for w in c if mt.df[w] > 1
    )


def agreement_after(mt, k):
    c = mt.cw(k)
    if len(c) < 3:
        return None
    i, who, _ = mt.s[k]
    nxt = [x for x in mt.s[k + 1:k + 3] if x[0] != i and x[1] != who]
    return any(AGREE.match(x[2]) for x in nxt) + salience(mt, k) / 10


def weighted(wc, wl, wch):
    def f(mt, k):
        c = len(mt.cw(k))
        if c < 3:
            return None
        return wc * has(NARROW, mt.s[k][2]) + wl * min(c, 40) / 10 + wch * (mt.s[k][1] == mt.chair)
    return f


def centroid_mmr(lam):
    def select(mt, k_max):
        idf = {w: math.log((mt.n + 1) / mt.df[w]) for w in mt.df}
        tf = collections.Counter()
        for k in range(len(mt.s)):
            tf.update(mt.cw(k))
        cen = {w: tf[w] * idf.get(w, 0) for w in tf}
        nc = math.sqrt(sum(v * v for v in cen.values())) or 1
        cands = []
        for k in range(len(mt.s)):
            c = mt.cw(k)
            if len(c) < 5:
                continue
            v = {w: idf.get(w, 0) for w in c}
            nv = math.sqrt(sum(x * x for x in v.values())) or 1
            cands.append((sum(v[w] * cen.get(w, 0) for w in v) / (nv * nc), v, nv, mt.s[k][2]))
        cands.sort(key=lambda x: -x[0])
        cands = cands[: k_max * 5]
        chosen = []
        while cands and len(chosen) < k_max:
            def score(c):
                red = max((sum(c[1][w] * u.get(w, 0) for w in c[1]) / (c[2] * nu)
                           for (_, u, nu, _) in chosen), default=0)
                return lam * c[0] - (1 - lam) * red
            best = max(range(len(cands)), key=lambda j: score(cands[j]))
            chosen.append(cands.pop(best))
        return [c[3] for c in chosen]
    return select


def ranked(scorer):
    def select(mt, k_max, exclude=()):
        scored = [(scorer(mt, k), k) for k in range(len(mt.s))]
        scored = sorted((x for x in scored if x[0] is not None), reverse=True)
        out = []
        for _, k in scored:
            s = mt.s[k][2]
            if any(s in e or e in s for e in exclude):
                continue
            out.append(s)
            if len(out) >= k_max:
                break
        return out
    return select


def rules_items(path: str) -> dict:
    """Decisions and actions per meeting id from the quality bench's
    MNEMO_BENCH_SHOW_ITEMS output (items are printed before their row)."""
    out, buf = {}, []
    for line in open(path, encoding="utf-8"):
        if line.startswith(("  decision", "  action")):
            q = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
            buf.append(q[0].replace('\\"', '"'))
        elif line.startswith("| ") and not line.startswith(("| meeting |", "| all", "| set", "| mnemo", "| baseline")):
            out[line.split("|")[1].strip()] = buf
            buf = []
    return out


def main() -> None:
    args = sys.argv[1:]
    rules = None
    if args[:1] == ["--rules"]:
        rules = rules_items(args[1])
        args = args[2:]
    sets = [(a.split("=", 1) if "=" in a else (a, a)) for a in args]
    loaded = [(name, [Meeting(m) for m in json.load(open(p))["meetings"]]) for name, p in sets]
    for name, ms in loaded:
        gold = sum(len(mt.m["gold"]) for mt in ms)
        ceil = nar = bro = 0
        for mt in ms:
            for g in mt.m["gold"]:
                hits = [s for (_, _, s) in mt.s if covered(g, [s])]
                if hits:
                    ceil += 1
                    nar += any(has(NARROW, s) for s in hits)
                    bro += any(has(BROAD, s) for s in hits)
        print(f"{name}: gold {gold}, one-sentence ceiling {ceil} ({ceil / gold:.2f}); "
              f"reachable through a narrow-cue sentence {nar} ({nar / max(ceil, 1):.2f} of the ceiling), "
              f"broad-cue {bro} ({bro / max(ceil, 1):.2f} of the ceiling)")
    selectors = [
        ("salience (shared content words)", ranked(salience)),
        ("salience (tf-idf sum)", ranked(salience_tfidf)),
        ("agreement right after (other speaker)", ranked(agreement_after)),
        ("commitment cue", ranked(weighted(1, 0, 0))),
        ("longest", ranked(weighted(0, 1, 0))),
        ("cue + length", ranked(weighted(1, 1, 0))),
        ("cue + length + chair", ranked(weighted(1, 1, 0.5))),
        ("2 cue + length + chair", ranked(weighted(2, 1, 1))),
        ("centroid", centroid_mmr(1.0)),
        ("centroid + MMR 0.7", centroid_mmr(0.7)),
    ]
    rows = []
    for label, sel in selectors:
        rows.append((label, lambda mt, sel=sel: sel(mt, budget(mt.m))))
    if rules is not None:
        rows.insert(0, ("rules (as they are)", lambda mt: rules.get(mt.m["id"], [])))
        for label, sc in [("cue + length", weighted(1, 1, 0)), ("longest", weighted(0, 1, 0))]:
            sel = ranked(sc)

            def fill(mt, sel=sel):
                own = rules.get(mt.m["id"], [])
                return own + sel(mt, max(0, budget(mt.m) - len(own)), own)

            def half(mt, sel=sel):
                own = rules.get(mt.m["id"], [])
                keep = own[: len(own) // 2]
                return keep + sel(mt, max(0, budget(mt.m) - len(keep)), own)
            rows.append((f"rules + fill to budget by {label}", fill))
            rows.append((f"rules' first half + {label}", half))
    print("\n| selector | " + " | ".join(f"{n}: found, ÷ ceiling, items" for n, _ in loaded) + " |")
    print("|---|" + "---:|" * len(loaded))
    for label, pick in rows:
        cells = []
        for _, ms in loaded:
            found = items = ceil = 0
            for mt in ms:
                chosen = pick(mt)
                items += len(chosen)
                found += sum(covered(g, chosen) for g in mt.m["gold"])
                ceil += sum(covered(g, [s for (_, _, s) in mt.s]) for g in mt.m["gold"])
            cells.append(f"{found} ({found / max(ceil, 1):.2f}), {items}")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
