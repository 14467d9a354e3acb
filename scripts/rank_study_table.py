#!/usr/bin/env python3
# Collects the lcm-eval reports of scripts/rank_study.sh (eval_<setting>_s<seed>.json) and the
# training logs (log_<...>.csv) into a Markdown table: per setting, mean ± sample std over seeds
# of the per-program means (docs/model-spec.md §7 + top-k recovered), plus the epochs actually run.
# With --programs RUN (e.g. combined_s1) it prints that run's per-program breakdown instead:
# Spearman by number of schedules, how many programs reach Spearman 0.6, the worst programs.
# With --gap it prints, per setting, the train-vs-validation gap from the training logs (final
# training MAPE, validation MAPE and Spearman at the selected epoch); with --across SETTING, the
# programs that are worst (lowest Spearman) in the seeds of that setting, and how often.
# A run without a train_<run>.out trace (copied from elsewhere) takes its selected epoch from the
# log: the epoch of best val_spearman (right for settings that select by Spearman, the defaults).
# Usage: scripts/rank_study_table.py OUT_DIR [--programs RUN | --gap | --across SETTING]
import csv
import glob
import json
import math
import os
import re
import sys

ORDER = ["reference", "scaling", "log_mse", "pairwise", "optim", "combined", "combined_no_pairwise",
         "combined_no_scaling", "defaults", "dropout_0.2", "wd_0.1", "rank_3", "rank_10"]
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


def read_log(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def best_epoch_from_log(path):
    """Epoch (str) of the best validation Spearman in a log_<run>.csv; None if it has none."""
    rows = [r for r in read_log(path) if r.get("val_spearman")]
    return max(rows, key=lambda r: float(r["val_spearman"]))["epoch"] if rows else None


def study_runs(out, kind, ext):
    """(setting, seed as written, path) of every <kind>_<setting>_s<seed>.<ext> file in out."""
    for path in glob.glob(os.path.join(out, f"{kind}_*_s*.{ext}")):
        m = re.match(rf"{kind}_(.+)_s(\d+)\.{ext}$", os.path.basename(path))
        if m:
            yield m.group(1), m.group(2), path


def trace_best(out, setting, seed):
    """The last epoch line marked *best of train_<setting>_s<seed>.out (the evaluated
    checkpoint); "" when no line is marked, None when there is no such trace."""
    trace = os.path.join(out, f"train_{setting}_s{seed}.out")
    if not os.path.exists(trace):
        return None
    with open(trace) as f:
        marked = [ln.split()[0] for ln in f if ln.rstrip().endswith("*best")]
    return marked[-1] if marked else ""


def run_logs(out):
    """setting → [(seed, log rows, selected epoch)] for every log_<setting>_s<seed>.csv."""
    runs = {}
    for setting, seed, path in study_runs(out, "log", "csv"):
        if not os.path.exists(os.path.join(out, f"eval_{setting}_s{seed}.json")):
            continue
        best = trace_best(out, setting, seed) or best_epoch_from_log(path)
        runs.setdefault(setting, []).append((int(seed), read_log(path), best))
    return runs


def gap(out):
    """Train-vs-validation gap per setting: mean ± std over seeds of the last epoch's training
    MAPE (training-mode predictions) and, at the selected epoch, training MAPE, validation MAPE
    (datapoint-weighted) and validation Spearman / nDCG (per-program means)."""
    runs = run_logs(out)
    names = [n for n in ORDER if n in runs] + sorted(n for n in runs if n not in ORDER)
    print("| setting | seeds | train MAPE, last epoch | train MAPE, selected epoch | "
          "val MAPE, selected epoch | val Spearman, selected | val nDCG, selected |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        rs = sorted(runs[n], key=lambda r: r[0])
        sel = [next(r for r in rows if r["epoch"] == best) for _, rows, best in rs]
        col = lambda rows, k: [float(r[k]) if r.get(k) else None for r in rows]
        print(f"| {n} | {len(rs)} | {mean_std(col([rows[-1] for _, rows, _ in rs], 'train_mape'))} | "
              f"{mean_std(col(sel, 'train_mape'))} | {mean_std(col(sel, 'val_mape'))} | "
              f"{mean_std(col(sel, 'val_spearman'))} | {mean_std(col(sel, 'val_ndcg'))} |")


def across(out, setting, worst_n=10):
    """The worst_n lowest-Spearman programs of each seed of `setting`, and how many seeds share them."""
    per_seed = {}
    for path in sorted(glob.glob(os.path.join(out, f"eval_{setting}_s*.csv"))):
        seed = re.search(r"_s(\d+)\.csv$", path).group(1)
        with open(path) as f:
            per_seed[seed] = {r["program"]: r for r in csv.DictReader(f)}
    if not per_seed:
        sys.exit(f"rank_study_table.py: no eval_{setting}_s*.csv in {out}")
    num = lambda r, k: float(r[k]) if r and r.get(k) else float("nan")
    worst = {s: [p for p, _ in sorted(((p, r) for p, r in rows.items() if r["spearman"]),
                                      key=lambda x: num(x[1], "spearman"))[:worst_n]]
             for s, rows in per_seed.items()}
    seeds = sorted(per_seed, key=int)
    count = {}
    for s in seeds:
        for p in worst[s]:
            count[p] = count.get(p, 0) + 1
    print(f"{setting}: the {worst_n} lowest-Spearman programs of each of {len(seeds)} seeds; "
          f"{len(count)} distinct programs, {sum(c == len(seeds) for c in count.values())} in every seed\n")
    print("| program | schedules | in worst of seeds | " +
          " | ".join(f"Spearman s{s}" for s in seeds) + " | " +
          " | ".join(f"top-1 rec. s{s}" for s in seeds) + " |")
    print("|---|---|---|" + "---|" * (2 * len(seeds)))
    for p in sorted(count, key=lambda p: (-count[p], sum(num(per_seed[s].get(p), "spearman") for s in seeds))):
        any_row = next(per_seed[s][p] for s in seeds if p in per_seed[s])
        print(f"| {p} | {any_row['n_schedules']} | {count[p]} | " +
              " | ".join(f"{num(per_seed[s].get(p), 'spearman'):.3f}" for s in seeds) + " | " +
              " | ".join(f"{num(per_seed[s].get(p), 'top1_recovered'):.3f}" for s in seeds) + " |")


def main(out):
    runs = {}
    for setting, seed, path in study_runs(out, "eval", "json"):
        with open(path) as f:
            rep = json.load(f)
        epochs = None
        log = os.path.join(out, f"log_{setting}_s{seed}.csv")
        if os.path.exists(log):
            with open(log) as f:
                epochs = len(list(csv.DictReader(f)))
        best = trace_best(out, setting, seed)
        if best is None and os.path.exists(log):
            best = best_epoch_from_log(log)
        runs.setdefault(setting, []).append((int(seed), rep, f"{best or None}/{epochs}"))
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
    elif "--gap" in sys.argv:
        gap(out_dir)
    elif "--across" in sys.argv:
        across(out_dir, sys.argv[sys.argv.index("--across") + 1])
    else:
        main(out_dir)
