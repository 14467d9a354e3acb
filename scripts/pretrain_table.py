#!/usr/bin/env python3
# Tabulates the pre-training experiment of scripts/pretrain_experiment.sh: reads the lcm-eval
# reports eval_f<fraction>_<encoder>_s<seed>.json of a runs folder, prints a markdown table (mean
# and spread over seeds) and writes pretrain_experiment.svg (validation metrics vs training fraction).
"""Usage: scripts/pretrain_table.py RUNS_DIR  (standard library only)."""
import glob
import json
import math
import os
import re
import statistics
import sys

# (key, label, top level of the report rather than its "mean" object)
METRICS = [("spearman", "Spearman", False), ("ndcg", "nDCG", False),
           ("top1_recovered", "top-1 rec.", False), ("mape", "MAPE %", False),
           ("median_error_factor", "median error factor", True)]
PLOTTED = ("spearman", "ndcg", "mape")
COLORS = {"none": "#1f77b4", "access_matrix": "#ff7f0e", "comp_vector": "#2ca02c",
          "synth": "#d62728"}


def load(runs):
    """{(fraction, encoder): {metric: [values over seeds]}} from the eval reports in `runs`."""
    out = {}
    for path in sorted(glob.glob(os.path.join(runs, "eval_f*_s*.json"))):
        m = re.match(r"eval_f(\d+)_(.+)_s(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            rep = json.load(f)
        cell = out.setdefault((int(m.group(1)), m.group(2)), {k: [] for k, _, _ in METRICS})
        for k, _, top in METRICS:
            v = (rep if top else rep["mean"]).get(k)
            cell[k].append(float("nan") if v is None else float(v))
    return out


def fmt(vals):
    """'mean' or 'mean ± sd (n)' of the finite values."""
    v = [x for x in vals if math.isfinite(x)]
    if not v:
        return "–"
    if len(v) == 1:
        return f"{v[0]:.4g}"
    return f"{statistics.mean(v):.4g} ± {statistics.stdev(v):.2g} (n={len(v)})"


def svg(data, path):
    """Three small panels (one per metric): mean over seeds vs training fraction, one line per encoder."""
    fracs = sorted({f for f, _ in data})
    encs = [e for e in COLORS if any(k[1] == e for k in data)]
    W, H, PW = 900, 320, 280
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             '<text x="450" y="16" text-anchor="middle" font-size="13">validation metrics vs share of '
             'training programs (mean over seeds)</text>']
    for i, (key, label, _) in enumerate([m for m in METRICS if m[0] in PLOTTED]):
        x0, y0, w, h = 20 + i * (PW + 20) + 40, 40, PW - 50, H - 90
        pts = [statistics.mean([v for v in data[(f, e)][key] if math.isfinite(v)] or [float("nan")])
               for f in fracs for e in encs if (f, e) in data]
        pts = [p for p in pts if math.isfinite(p)]
        if not pts:
            continue
        lo, hi = min(pts), max(pts)
        if hi - lo < 1e-12:
            lo, hi = lo - 1, hi + 1
        pad = 0.1 * (hi - lo)
        lo, hi = lo - pad, hi + pad
        X = lambda f: x0 + w * (math.log10(f) - 1) / (math.log10(100) - 1 or 1)  # noqa: E731
        Y = lambda v: y0 + h - h * (v - lo) / (hi - lo)  # noqa: E731
        parts.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
        parts.append(f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle">{label}</text>')
        for t in (lo + pad, (lo + hi) / 2, hi - pad):
            parts.append(f'<text x="{x0 - 4}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:.3g}</text>')
        for f in fracs:
            parts.append(f'<text x="{X(f):.1f}" y="{y0 + h + 14}" text-anchor="middle">{f}%</text>')
        for j, e in enumerate(encs):
            line = []
            for f in fracs:
                if (f, e) not in data:
                    continue
                v = [x for x in data[(f, e)][key] if math.isfinite(x)]
                if not v:
                    continue
                m = statistics.mean(v)
                line.append(f"{X(f):.1f},{Y(m):.1f}")
                parts.append(f'<circle cx="{X(f):.1f}" cy="{Y(m):.1f}" r="3" fill="{COLORS[e]}"/>')
                if len(v) > 1:
                    parts.append(f'<line x1="{X(f):.1f}" x2="{X(f):.1f}" y1="{Y(min(v)):.1f}" y2="{Y(max(v)):.1f}" '
                                 f'stroke="{COLORS[e]}"/>')
            parts.append(f'<polyline fill="none" stroke="{COLORS[e]}" points="{" ".join(line)}"/>')
            if i == 0:
                parts.append(f'<text x="{x0 + 5}" y="{H - 20 + 0 * j}" dx="{j * 110}" fill="{COLORS[e]}">{e}</text>')
    parts.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(parts))
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = load(sys.argv[1])
    if not data:
        print(f"no eval_f*_s*.json reports in {sys.argv[1]}", file=sys.stderr)
        return 1
    print("| training programs | start | " + " | ".join(l for _, l, _ in METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for (f, e) in sorted(data, key=lambda k: (k[0], list(COLORS).index(k[1]) if k[1] in COLORS else 9)):
        print(f"| {f}% | {e} | " + " | ".join(fmt(data[(f, e)][k]) for k, _, _ in METRICS) + " |")
    svg(data, os.path.join(sys.argv[1], "pretrain_experiment.svg"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
