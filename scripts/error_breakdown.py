#!/usr/bin/env python3
"""Where the MAPE of a run comes from (docs/accuracy.md, "What limits it").

Usage: scripts/error_breakdown.py PREDICTIONS.jsonl DATA.jsonl.gz [--worst N]
  PREDICTIONS: lcm-predict --out of DATA (calibrated or not); DATA: the LOOPerSet file it predicted
  (for each program's initial_execution_time).

Splits the schedules by the program's size (initial execution time, ms) and by two schedule
features read from sched_str: parallelized (a "P(" entry) and tiled ("T2(" / "T3(" / "T("). For
each class it prints how many schedules it holds, its share of the per-program MAPE (model-spec
§7.4: each program's mean APE, averaged over programs, so a schedule weighs 1 / (P * n_p)), its own
mean APE, and the median measured and predicted speedups. Then the N programs with the highest
MAPE and their share of the mean.
"""
import argparse
import collections
import gzip
import json
import re
import statistics

SIZES = [(0, 1, "< 1 ms"), (1, 20, "1-20 ms"), (20, float("inf"), ">= 20 ms")]


def size_of(ms):
    for lo, hi, name in SIZES:
        if lo <= ms < hi:
            return name
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("predictions")
    ap.add_argument("data")
    ap.add_argument("--worst", type=int, default=10)
    a = ap.parse_args()
    init = {}
    with gzip.open(a.data, "rt") if a.data.endswith(".gz") else open(a.data) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                init[r.get("program_name") or r.get("name")] = r.get("initial_execution_time")
    rows = [json.loads(l) for l in open(a.predictions)]
    rows = [r for r in rows if r.get("measured_speedup") is not None]
    by_program = collections.defaultdict(list)
    for r in rows:
        r["ape"] = 100 * abs(r["measured_speedup"] - r["predicted_speedup"]) / (
            r["measured_speedup"] + 1e-5)
        by_program[r["program"]].append(r)
    n_programs = len(by_program)
    mape = statistics.mean(statistics.mean(x["ape"] for x in v) for v in by_program.values())
    classes = collections.defaultdict(list)
    for p, v in by_program.items():
        ms = init.get(p)
        for r in v:
            s = r.get("sched_str") or ""
            par = "parallel" if "P(" in s else "-"
            tiled = "tiled" if re.search(r"\bT[23]?\(", s) else "-"
            r["share"] = r["ape"] / len(v) / n_programs
            classes[(size_of(ms) if ms else "?", par, tiled)].append(r)
    print(f"{a.predictions}: {len(rows)} schedules of {n_programs} programs, per-program MAPE "
          f"{mape:.1f}")
    print("\n| program size | parallelized | tiled | schedules | share of MAPE | MAPE of the class "
          "| median measured | median predicted |")
    print("|---|---|---|---|---|---|---|---|")
    order = {name: i for i, (_, _, name) in enumerate(SIZES)}
    for k in sorted(classes, key=lambda k: (order.get(k[0], 9), k[1], k[2])):
        v = classes[k]
        share = sum(r["share"] for r in v) / mape
        print(f"| {k[0]} | {k[1]} | {k[2]} | {len(v)} | {share:.0%} | "
              f"{statistics.mean(r['ape'] for r in v):.0f} | "
              f"{statistics.median(r['measured_speedup'] for r in v):.3g} | "
              f"{statistics.median(r['predicted_speedup'] for r in v):.3g} |")
    worst = sorted(by_program.items(), key=lambda kv: -statistics.mean(x["ape"] for x in kv[1]))
    top = worst[:a.worst]
    share = sum(statistics.mean(x["ape"] for x in v) for _, v in top) / n_programs / mape
    rest = [statistics.mean(x["ape"] for x in v) for _, v in worst[a.worst:]]
    print(f"\nthe {len(top)} programs with the highest MAPE carry {share:.0%} of the mean; "
          f"without them the MAPE is {statistics.mean(rest):.1f}" if rest else "")
    print("\n| program | initial time (ms) | schedules | MAPE | its worst schedule (measured -> "
          "predicted) |")
    print("|---|---|---|---|---|")
    for p, v in top:
        w = max(v, key=lambda x: x["ape"])
        print(f"| {p} | {init.get(p, float('nan')):.3g} | {len(v)} | "
              f"{statistics.mean(x['ape'] for x in v):.0f} | `{(w.get('sched_str') or '')[:60]}` "
              f"{w['measured_speedup']:.3g} -> {w['predicted_speedup']:.3g} |")


if __name__ == "__main__":
    main()
