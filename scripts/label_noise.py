#!/usr/bin/env python3
# How well can the measured labels rank themselves? Two checks (docs/accuracy.md, "What limits
# it"), scored with the per-program metrics of docs/model-spec.md §7:
# 1. split-half: every schedule's execution_times (docs/data-format.md) split into two halves
#    (even / odd runs of one measurement), one speedup label from each half, one half's ranking
#    scored against the other. Both halves come from the same process, so this sees only the
#    noise between runs of one measurement.
# 2. repeated schedules: a program whose schedules_list holds the same schedule twice (every key
#    equal but the times and the search's bookkeeping) measured it in two processes. Their
#    disagreement is the noise between measurements; the file's labels, each multiplied by a
#    ratio drawn from those pairs, are then scored against themselves ("re-measured"): what a
#    model that predicts each schedule's first measurement perfectly would score against a
#    second one.
# Usage: scripts/label_noise.py FILE.jsonl.gz [EVAL_CSV] [--repeats-from F.jsonl.gz ...]
#   EVAL_CSV: lcm-eval per-program CSV, to print the split-half agreement of that run's worst
#   programs next to the model's Spearman; --repeats-from: further files whose repeated schedules
#   join FILE's in the pool of measurement ratios (e.g. the training split).
import argparse
import csv
import gzip
import json
import math
import random
import statistics


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


# keys of a schedule that are not the schedule: the measurements and the search's bookkeeping
NOT_THE_SCHEDULE = ("execution_times", "exploration_method", "legality_check")


def labelled(times):
    """True when the schedule has a label: times present, none missing, zero or negative."""
    return bool(times) and all(t is not None and t > 0 for t in times)


def read_programs(path):
    """[(name, initial_execution_time, schedules_list)] of a LOOPerSet JSON Lines file."""
    out = []
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            name = rec.get("program_name") or rec.get("filename") or rec.get("name")
            out.append((name, rec.get("initial_execution_time"), rec.get("schedules_list") or []))
    return out


def repeated_groups(programs):
    """Groups (lists of speedups, ≥ 2) of labelled schedules of one program that are the same
    schedule: every key equal but NOT_THE_SCHEDULE."""
    groups = []
    for _, init, scheds in programs:
        if not init or init <= 0:
            continue
        by_key = {}
        for s in scheds:
            t = s.get("execution_times")
            if not labelled(t):
                continue
            key = json.dumps({k: v for k, v in s.items() if k not in NOT_THE_SCHEDULE},
                             sort_keys=True)
            by_key.setdefault(key, []).append(init / min(t))
        groups += [v for v in by_key.values() if len(v) >= 2]
    return groups


def quantile(sorted_v, q):
    return sorted_v[min(len(sorted_v) - 1, int(q * (len(sorted_v) - 1) + 0.5))]


def repeats_report(path, programs, extra_paths, trials=5, seed=1):
    groups = repeated_groups(programs)
    for p in extra_paths:
        groups += repeated_groups(read_programs(p))
    names = " + ".join([path] + extra_paths)
    if not groups:
        print(f"\nrepeated schedules: none in {names}")
        return
    ratios = sorted(max(g) / min(g) for g in groups)
    # the MAPE of one measurement as the prediction of another, over ordered pairs
    cross = [abs(a - b) / b for g in groups for i, a in enumerate(g) for j, b in enumerate(g)
             if i != j]
    # the best one value per group (a weighted median, one of its members): an oracle floor
    floor = []
    for g in groups:
        best = min(sum(abs(p - y) / y for y in g) / len(g) for p in g)
        floor += [best] * len(g)
    log_ratios = [math.log(a / b) for g in groups for i, a in enumerate(g)
                  for j, b in enumerate(g) if i != j]
    print(f"\nrepeated schedules ({names}): {len(groups)} schedules measured more than once, "
          f"{sum(len(g) for g in groups)} measurements")
    print(f"  max/min speedup of a repeated schedule: median {quantile(ratios, 0.5):.2f}, "
          f"p75 {quantile(ratios, 0.75):.2f}, p90 {quantile(ratios, 0.9):.2f}, max "
          f"{ratios[-1]:.2f}; {sum(r > 2 for r in ratios) / len(ratios):.0%} differ by > 2x")
    print(f"  one measurement as the prediction of another: MAPE {100 * statistics.mean(cross):.1f} "
          f"(median APE {100 * statistics.median(cross):.1f}); best single value per schedule "
          f"(oracle): MAPE {100 * statistics.mean(floor):.1f}")
    def simulate(scale):
        rng = random.Random(seed)
        runs = []
        for _ in range(trials):
            sp, nd, n1, mp = [], [], [], []
            for _, init, scheds in programs:
                if not init or init <= 0:
                    continue
                y = [init / min(s["execution_times"]) for s in scheds
                     if labelled(s.get("execution_times"))]
                if len(y) < 2:
                    continue
                y2 = [v * math.exp(scale * rng.choice(log_ratios)) for v in y]
                r = spearman(y, y2)
                if not math.isnan(r):
                    sp.append(r)
                nd.append(ndcg(y2, y))
                n1.append(ndcg(y2, y, 1))
                mp.append(100 * sum(abs(b - a) / a for a, b in zip(y, y2)) / len(y))
            runs.append([statistics.mean(v) for v in (sp, nd, n1, mp)])
        return tuple(x for i in range(4) for x in (
            statistics.mean(r[i] for r in runs),
            statistics.stdev(r[i] for r in runs) if len(runs) > 1 else 0.0))

    print(f"  {path}, every label re-drawn ({trials} draws, seed {seed}) and scored against the "
          f"measured labels (per-program means):")
    print("    x a measurement ratio of those pairs (a second measurement): Spearman %.3f ± %.3f, "
          "nDCG %.3f ± %.3f, nDCG@1 %.3f ± %.3f, MAPE %.1f ± %.1f" % simulate(1.0))
    print("    x that ratio^(1/sqrt 2) (the noise of one measurement if it were log-normal: the "
          "noise-free speedup): Spearman %.3f ± %.3f, nDCG %.3f ± %.3f, nDCG@1 %.3f ± %.3f, "
          "MAPE %.1f ± %.1f" % simulate(1 / math.sqrt(2)))


def main(path, eval_csv=None, repeats_from=()):
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
    repeats_report(path, read_programs(path), list(repeats_from))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("eval_csv", nargs="?")
    ap.add_argument("--repeats-from", nargs="*", default=[])
    a = ap.parse_args()
    main(a.file, a.eval_csv, a.repeats_from)
