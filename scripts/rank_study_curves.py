#!/usr/bin/env python3
# Learning curves of the ranking study (scripts/rank_study.sh): one SVG per metric with one line
# per setting (mean over the seeds present at each epoch), read from log_<setting>_s<seed>.csv.
# Usage: scripts/rank_study_curves.py OUT_DIR DEST_DIR [PREFIX]  → DEST_DIR/<PREFIX>_<metric>.svg
# (PREFIX defaults to "curves"; the regularisation study uses "reg_curves"). Settings outside ORDER
# get the colours of EXTRA_COLORS in name order, so a plot of new settings stays readable.
import csv
import math
import os
import sys

from rank_study_table import study_runs

ORDER = ["reference", "scaling", "log_mse", "pairwise", "optim", "combined", "combined_no_pairwise",
         "combined_no_scaling", "defaults", "dropout_0.2", "wd_0.1", "rank_3", "rank_10"]
COLORS = ["#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2",
          "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd"]
EXTRA_COLORS = ["#17becf", "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896"]
METRICS = [("val_spearman", "validation Spearman (per-program mean)"),
           ("val_ndcg", "validation nDCG (per-program mean)"),
           ("train_mape", "training MAPE (%, training-mode predictions)"),
           ("val_mape", "validation MAPE (%, datapoint-weighted)")]


def curves(out, key):
    per = {}
    for setting, _, path in study_runs(out, "log", "csv"):
        with open(path) as f:
            for row in csv.DictReader(f):
                if row.get(key):
                    per.setdefault(setting, {}).setdefault(int(row["epoch"]), []).append(float(row[key]))
    return {n: sorted((e, sum(v) / len(v)) for e, v in d.items()) for n, d in per.items()}


def svg(title, ylabel, series, log_y=False):
    W, H, L, R, T, B = 800, 500, 80, 180, 50, 60
    pts = [p for s in series.values() for p in s]
    tr = (lambda y: math.log10(max(y, 1e-9))) if log_y else (lambda y: y)
    xs = [p[0] for p in pts] or [0, 1]
    ys = [tr(p[1]) for p in pts] or [0, 1]
    x0, x1 = 0, max(xs)
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y1 = y0 + 1
    pad = 0.05 * (y1 - y0)
    y0, y1 = y0 - pad, y1 + pad
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (tr(y) - y0) / (y1 - y0) * (H - T - B)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{(W - R + L) / 2}" y="25" text-anchor="middle" font-size="15">{title}</text>',
         f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="black"/>',
         f'<text x="{(W - R + L) / 2}" y="{H - 15}" text-anchor="middle">epoch</text>',
         f'<text transform="translate(20,{H / 2}) rotate(-90)" text-anchor="middle">{ylabel}</text>']
    for i in range(6):
        yv = y0 + (y1 - y0) * i / 5
        lab = f"{10 ** yv:.3g}" if log_y else f"{yv:.3g}"
        yy = H - B - (yv - y0) / (y1 - y0) * (H - T - B)
        o.append(f'<line x1="{L - 5}" y1="{yy:.1f}" x2="{L}" y2="{yy:.1f}" stroke="black"/>'
                 f'<text x="{L - 8}" y="{yy + 4:.1f}" text-anchor="end">{lab}</text>')
    for e in range(0, int(x1) + 1, max(1, int(x1) // 8)):
        o.append(f'<line x1="{px(e):.1f}" y1="{H - B}" x2="{px(e):.1f}" y2="{H - B + 5}" stroke="black"/>'
                 f'<text x="{px(e):.1f}" y="{H - B + 18}" text-anchor="middle">{e}</text>')
    extra = sorted(n for n in series if n not in ORDER)
    for i, n in enumerate([n for n in ORDER if n in series] + extra):
        c = COLORS[ORDER.index(n)] if n in ORDER else EXTRA_COLORS[extra.index(n) % len(EXTRA_COLORS)]
        p = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series[n])
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{p}"/>')
        o.append(f'<line x1="{W - R + 15}" y1="{T + 15 + 20 * i}" x2="{W - R + 40}" y2="{T + 15 + 20 * i}" '
                 f'stroke="{c}" stroke-width="2"/><text x="{W - R + 45}" y="{T + 19 + 20 * i}">{n}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main(out, dest, prefix="curves"):
    os.makedirs(dest, exist_ok=True)
    for key, label in METRICS:
        series = curves(out, key)
        if series:
            study = {"curves": "rank study", "reg_curves": "regularisation study"}.get(
                prefix, prefix.replace("_curves", "").replace("_", " ") + " study")
            with open(os.path.join(dest, f"{prefix}_{key}.svg"), "w") as f:
                f.write(svg(f"{study}: {label}, mean over seeds", label, series,
                            log_y="mape" in key))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "curves")
