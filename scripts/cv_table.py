#!/usr/bin/env python3
# Tabulates scripts/cv_select.sh: for each setting, the held-out fold's metrics at the best epoch
# (highest val_spearman) of each of its runs log_<setting>_cv<k>of<K>.jsonl, as mean ± sd over the
# folds, best setting first.
"""Usage: scripts/cv_table.py RUNS_DIR  (standard library only)."""
import glob
import json
import math
import os
import re
import statistics
import sys

METRICS = [("val_spearman", "Spearman"), ("val_ndcg", "nDCG"), ("val_top1_recovered", "top-1 rec."),
           ("val_mape", "MAPE %")]


def best_epoch(path):
    """The log line of the epoch with the highest val_spearman (None when no epoch has one)."""
    best = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            v = r.get("val_spearman")
            if v is not None and math.isfinite(v) and (best is None or v > best["val_spearman"]):
                best = r
    return best


def fmt(v):
    if not v:
        return "–"
    if len(v) == 1:
        return f"{v[0]:.4g}"
    return f"{statistics.mean(v):.4g} ± {statistics.stdev(v):.2g}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    settings = {}
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "log_*_cv*of*.jsonl"))):
        m = re.match(r"log_(.+)_cv(\d+)of(\d+)\.jsonl$", os.path.basename(path))
        if not m:
            continue
        b = best_epoch(path)
        if b is None:
            continue
        cell = settings.setdefault(m.group(1), {"folds": 0, "of": int(m.group(3)), "epochs": [],
                                                **{k: [] for k, _ in METRICS}})
        cell["folds"] += 1
        cell["epochs"].append(b["epoch"])
        for k, _ in METRICS:
            if b.get(k) is not None:
                cell[k].append(float(b[k]))
    if not settings:
        print(f"no log_<setting>_cv<k>of<K>.jsonl in {sys.argv[1]}", file=sys.stderr)
        return 1
    order = sorted(settings, key=lambda s: -statistics.mean(settings[s]["val_spearman"] or [-9]))
    print("| setting | folds | " + " | ".join(l for _, l in METRICS) + " | best epochs |")
    print("|---|---|" + "---|" * (len(METRICS) + 1))
    for s in order:
        c = settings[s]
        print(f"| {s} | {c['folds']}/{c['of']} | " + " | ".join(fmt(c[k]) for k, _ in METRICS) +
              " | " + ",".join(str(e) for e in c["epochs"]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
