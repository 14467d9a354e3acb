#!/usr/bin/env python3
# Collects the lcm-eval reports of scripts/rank_study.sh (eval_<setting>_s<seed>.json) and the
# training logs (log_<...>.csv) into a Markdown table: per setting, mean ± sample std over seeds
# of the per-program means (model-spec §7 + top-k recovered), plus the epochs actually run.
# With --programs RUN (e.g. combined_s1) it prints that run's per-program breakdown instead:
# Spearman by number of schedules, how many programs reach Spearman 0.6, the worst programs.
# Usage: scripts/rank_study_table.py OUT_DIR [--programs RUN]
import csv
import glob
import json
import math
import os
import re
import sys

ORDER = ["reference", "scaling", "log_mse", "pairwise", "optim", "combined", "combined_no_pairwise",
         "combined_no_scaling"]
METRICS = [("spearman", "Spearman"), ("ndcg", "nDCG"), ("ndcg_1", "nDCG@1"), ("ndcg_5", "nDCG@5"),
           ("mape", "MAPE"), ("top1_recovered", "top-1 rec."), ("top5_recovered", "top-5 rec.")]


def mean_std(v):
    v = [x for x in v if x is not None and not math.isnan(x)]
    if not v:
        return "n/a"
    m = sum(v) / len(v)
    if len(v) < 2:
        return f"{m:.3f}"
    s = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
    return f"{m:.3f} ± {s:.3f}"


def main(out):
    runs = {}
    for path in glob.glob(os.path.join(out, "eval_*_s*.json")):
        m = re.match(r"eval_(.+)_s(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            rep = json.load(f)
        epochs = best = None
        log = os.path.join(out, f"log_{m.group(1)}_s{m.group(2)}.csv")
        if os.path.exists(log):
            with open(log) as f:
                epochs = len(list(csv.DictReader(f)))
        trace = os.path.join(out, f"train_{m.group(1)}_s{m.group(2)}.out")
        if os.path.exists(trace):  # the last epoch line marked *best = the evaluated checkpoint
            with open(trace) as f:
                marked = [ln.split()[0] for ln in f if ln.rstrip().endswith("*best")]
            best = marked[-1] if marked else None
        runs.setdefault(m.group(1), []).append((int(m.group(2)), rep, f"{best}/{epochs}"))
    names = [n for n in ORDER if n in runs] + sorted(n for n in runs if n not in ORDER)
    print("| setting | seeds | best/run epochs | " + " | ".join(h for _, h in METRICS) + " |")
    print("|---|---|---|" + "---|" * len(METRICS))
    for n in names:
        rs = sorted(runs[n], key=lambda r: r[0])
        cells = [mean_std([r[1]["mean"].get(k) for r in rs]) for k, _ in METRICS]
        ep = ",".join(str(r[2]) for r in rs)
        print(f"| {n} | {len(rs)} | {ep} | " + " | ".join(cells) + " |")


def programs(out, run):
    with open(os.path.join(out, f"eval_{run}.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["spearman"]]
    num = lambda r, k: float(r[k]) if r[k] else float("nan")
    print(f"{run}: {len(rows)} programs with a Spearman value; "
          f"{sum(num(r, 'spearman') >= 0.6 for r in rows)} reach 0.6, "
          f"{sum(num(r, 'spearman') < 0.2 for r in rows)} are below 0.2\n")
    print("| schedules per program | programs | mean Spearman | mean nDCG | mean top-1 rec. |")
    print("|---|---|---|---|---|")
    for lo, hi in [(2, 30), (30, 100), (100, 300), (300, 10 ** 9)]:
        sel = [r for r in rows if lo <= int(r["n_schedules"]) < hi]
        if sel:
            mean = lambda k: sum(num(r, k) for r in sel) / len(sel)
            label = f"{lo}–{hi - 1}" if hi < 10 ** 9 else f"≥ {lo}"
            print(f"| {label} | {len(sel)} | {mean('spearman'):.3f} | {mean('ndcg'):.3f} | "
                  f"{mean('top1_recovered'):.3f} |")
    print("\n| worst programs | schedules | Spearman | nDCG | top-1 rec. | MAPE |")
    print("|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: num(r, "spearman"))[:8]:
        print(f"| {r['program']} | {r['n_schedules']} | {num(r, 'spearman'):.3f} | {num(r, 'ndcg'):.3f} | "
              f"{num(r, 'top1_recovered'):.3f} | {num(r, 'mape'):.1f} |")


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "runs/rank_study"
    if "--programs" in sys.argv:
        programs(out_dir, sys.argv[sys.argv.index("--programs") + 1])
    else:
        main(out_dir)
