#!/usr/bin/env python3
# How well can the measured labels rank themselves? Splits every schedule's execution_times
# (docs/data-format.md) into two halves (even / odd runs), makes one speedup label from each half,
# and scores one half's ranking against the other with the per-program metrics of
# docs/model-spec.md §7.
# Usage: scripts/label_noise.py FILE.jsonl.gz [EVAL_CSV]  (EVAL_CSV: lcm-eval per-program CSV, to
# print the split-half agreement of that run's worst programs next to the model's Spearman)
import csv
import gzip
import json
import math
import sys


def ranks(v):
    """Average ranks (1-based) of the values in v, ties sharing the mean rank (model-spec §7)."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    """Spearman rank correlation of two equal-length lists; NaN if < 2 items or a constant list."""
    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else float("nan")


def ndcg(pred, gain, k=None):
    """nDCG of ranking by pred (descending) with linear gains (model-spec §7); ties in pred get
    the mean gain of their group. NaN if < 2 items."""
    n = len(pred)
    if n < 2:
        return float("nan")
    k = n if k is None else min(k, n)
    disc = [1 / math.log2(i + 2) if i < k else 0.0 for i in range(n)]
    groups = {}
    for p, g in zip(pred, gain):
        groups.setdefault(p, []).append(g)
    dcg, pos = 0.0, 0
    for p in sorted(groups, reverse=True):
        gs = groups[p]
        dcg += sum(gs) / len(gs) * sum(disc[pos:pos + len(gs)])
        pos += len(gs)
    ideal = sum(g * d for g, d in zip(sorted(gain, reverse=True), disc))
    return dcg / ideal if ideal > 0 else float("nan")


def halves(times):
    """(min of even-indexed runs, min of odd-indexed runs) in ms, or None when the schedule has no
    label (no times, a negative or zero time) or a single run."""
    if not times or any(t is None or t <= 0 for t in times) or len(times) < 2:
        return None
    return min(times[0::2]), min(times[1::2])


def main(path, eval_csv=None):
    per_program = {}
    n_labelled = n_single = 0
    with gzip.open(path, "rt") as f:
        for line in f:
            rec = json.loads(line)
            name = rec.get("program_name") or rec.get("filename") or rec.get("name")
            scheds = rec.get("schedules_list") or []
            a, b = [], []
            for s in scheds:
                t = s.get("execution_times")
                if t and all(x is not None and x > 0 for x in t):
                    n_labelled += 1
                h = halves(t)
                if h is None:
                    n_single += bool(t and all(x is not None and x > 0 for x in t))
                    continue
                # speedup ∝ 1 / min time; the per-program baseline cancels in Spearman and nDCG
                a.append(1 / h[0])
                b.append(1 / h[1])
            per_program[name] = (a, b)
    rows = {}
    for name, (a, b) in per_program.items():
        rows[name] = (len(a), spearman(a, b), (ndcg(a, b) + ndcg(b, a)) / 2,
                      (ndcg(a, b, 1) + ndcg(b, a, 1)) / 2)
    mean = lambda i: (lambda v: sum(v) / len(v) if v else float("nan"))(
        [r[i] for r in rows.values() if not math.isnan(r[i])])
    print(f"{path}: {len(rows)} programs, {n_labelled} labelled schedules, {n_single} with a single "
          f"run (left out)")
    print(f"split-half agreement (even vs odd runs), per-program means: Spearman {mean(1):.3f}, "
          f"nDCG {mean(2):.3f}, nDCG@1 {mean(3):.3f}")
    if eval_csv:
        with open(eval_csv) as f:
            ev = [r for r in csv.DictReader(f) if r["spearman"]]
        ev.sort(key=lambda r: float(r["spearman"]))
        print("\n| program | schedules | model Spearman | split-half Spearman | split-half nDCG |")
        print("|---|---|---|---|---|")
        for r in ev[:10]:
            h = rows.get(r["program"])
            if h:
                print(f"| {r['program']} | {r['n_schedules']} | {float(r['spearman']):.3f} | "
                      f"{h[1]:.3f} | {h[2]:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: scripts/label_noise.py FILE.jsonl.gz [EVAL_CSV]")
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
