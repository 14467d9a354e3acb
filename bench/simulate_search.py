#!/usr/bin/env python3
"""A simulated autoscheduler search over a LOOPerSet split, with and without learning during
search (docs/accuracy.md "Learning during search").

For each program of the split: rank its schedules, 'measure' (reveal the label of) the top-k
unmeasured ones, tell the model (Model.observe), re-rank, and repeat until B measurements were
made. Per budget B it reports the mean over programs of

    best measured speedup among the B measured schedules / the program's best speedup

(in (0, 1]; 1 = the best schedule was found), for these searchers:

  random        the B schedules in a random order (seeded)
  model         the model's ranking, no learning (the ranking never changes)
  model+corr    the model with the per-program correction of Model.observe (ln s' = a + b ln s,
                refitted after every round, applied to the re-ranking)
  model+ft      the model fine-tuned per program on the measured schedules (Model learning
                "finetune", synchronous: a few AdamW steps after every measurement, --ft)
  model+ft+corr both (learning "both")

and, for the model searchers, the mean over programs of the MAPE (%) of the predictions of the
schedules not yet measured (what the correction is for: absolute speedups).

Only schedules with a label and a prediction take part. Each measurement is observed with
untransformed_time = 1 and execution_times = [1 / measured speedup], so the measured speedup the
model learns is the label itself. Ties of the predicted speedups are broken by a seeded random
order; the random searcher uses its own stream of the same seed. Deterministic for a seed.

Usage: simulate_search.py --weights CKPT --data SPLIT.jsonl.gz [--seeds 1,2,3] [--budgets
1,2,5,10,20] [--batch 1] [--out-json F] [--out-svg F] [--out-md F] [--max-programs N]
[--ft steps=10,lr=0.001,...] [--searchers random,model,...]
Needs the Python module lcm (PYTHONPATH=build/python) and numpy.
"""
import argparse
import json
import math
import sys

import numpy as np

import lcm

SEARCHERS = ["random", "model", "model+corr", "model+ft", "model+ft+corr"]
# the Model learning variant of each learning searcher
LEARNING = {"model+corr": "correction", "model+ft": "finetune", "model+ft+corr": "both"}


def load_programs(path, max_programs, skip_programs=0):
    """The split's programs: (record, indices of the usable schedules, their labels), from the
    (skip_programs + 1)-th usable one on."""
    out = []
    for r in lcm.read_looperset(path):
        m = np.asarray(r["measured_speedups"], dtype=float)
        usable = [i for i in range(len(m)) if math.isfinite(m[i]) and m[i] > 0]
        if len(usable) < 1:
            continue
        if skip_programs > 0:
            skip_programs -= 1
            continue
        out.append((r, usable, m))
        if max_programs and len(out) >= max_programs:
            break
    return out


def predictions(model, r, usable):
    """The model's answers for the usable schedules (NaN where a schedule cannot be scored)."""
    s, _errors = model.predict(r["program"], [r["schedules"][i] for i in usable],
                               untransformed=r["untransformed"], errors="return")
    return np.asarray(s, dtype=float)


def order(pred, tie):
    """Indices by predicted speedup, largest first; unscored (NaN) last; ties by `tie`."""
    key = np.where(np.isnan(pred), -np.inf, pred)
    return sorted(range(len(pred)), key=lambda i: (-key[i], tie[i]))


def mape(pred, true):
    ok = ~np.isnan(pred)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(pred[ok] - true[ok]) / true[ok]) * 100)


def search_program(model, r, usable, labels, searcher, budget_max, batch, rng):
    """The best-found ratio after 1..budget_max measurements and the MAPE of the unmeasured
    schedules' predictions after each round (model searchers), for one program. `model` is the
    Model of the searcher's learning variant."""
    n = len(usable)
    true = labels[usable]
    best = true.max()
    tie = rng.permutation(n)
    measured = []
    ratios, mapes = [], []
    if searcher == "random":
        seq = list(rng.permutation(n))
        for b in range(1, budget_max + 1):
            measured = seq[:min(b, n)]
            ratios.append(float(true[measured].max() / best))
        return ratios, mapes
    learns = searcher in LEARNING
    if learns:
        model.reset(r["program"])
    pred = predictions(model, r, usable)
    while len(measured) < budget_max:
        taken = set(measured)
        ranked = [i for i in order(pred, tie) if i not in taken]
        if not ranked:  # every schedule measured: the best is found
            ratios.append(1.0)
            measured.append(-1)
            continue
        for i in ranked[:batch]:
            if len(measured) >= budget_max:
                break
            measured.append(i)
            ratios.append(float(true[[j for j in measured if j >= 0]].max() / best))
            if learns and not np.isnan(pred[i]):
                model.observe(r["program"], r["schedules"][usable[i]], [1.0 / true[i]],
                              untransformed=r["untransformed"], untransformed_time=1.0)
        if learns:
            pred = predictions(model, r, usable)
        rest = np.array([i for i in range(n) if i not in set(measured)], dtype=int)
        mapes.append(mape(pred[rest], true[rest]) if len(rest) else float("nan"))
    if learns:
        model.reset(r["program"])
    return ratios, mapes


def simulate(models, programs, seeds, budgets, batch, searchers=None):
    """{searcher: {seed: {"ratio": [per budget], "mape": [per budget], "per_program": [per
    budget: [per program]]}}}; models: {searcher: Model} (random and model share one)."""
    bmax = max(budgets)
    res = {}
    for searcher in searchers or SEARCHERS:
        model = models[searcher]
        res[searcher] = {}
        for seed in seeds:
            per_ratio = np.zeros((len(programs), bmax))
            per_mape = np.full((len(programs), bmax), np.nan)
            for p, (r, usable, labels) in enumerate(programs):
                # one stream per (seed, program): a searcher's draws do not depend on the others
                rng = np.random.default_rng([seed, p])
                ratios, mapes = search_program(model, r, usable, labels, searcher, bmax, batch, rng)
                per_ratio[p] = ratios
                # the MAPE after the round that made the b-th measurement
                for b in range(1, bmax + 1):
                    k = (b - 1) // batch
                    if k < len(mapes):
                        per_mape[p, b - 1] = mapes[k]
            res[searcher][seed] = {
                "ratio": [float(per_ratio[:, b - 1].mean()) for b in budgets],
                "mape": [float(np.nanmean(per_mape[:, b - 1]))
                         if np.isfinite(per_mape[:, b - 1]).any() else None for b in budgets],
                "per_program": [[float(x) for x in per_ratio[:, b - 1]] for b in budgets],
            }
    return res


def summary(res, budgets):
    """{searcher: {"ratio_mean", "ratio_sd", "mape_mean"} per budget}."""
    out = {}
    for s, by_seed in res.items():
        r = np.array([v["ratio"] for v in by_seed.values()])
        m = [[x for x in col if x is not None] for col in zip(*[v["mape"] for v in by_seed.values()])]
        out[s] = {
            "ratio_mean": [float(x) for x in r.mean(axis=0)],
            "ratio_sd": [float(x) for x in r.std(axis=0)],
            "mape_mean": [float(np.mean(c)) if c else None for c in m],
        }
    return out


def versus(res, budgets, base="model"):
    """{searcher: {"better": [per budget], "worse": [...], "diff_mean": [...], "diff_sd": [...]}}
    for each learning searcher against `base`: programs whose best-found ratio (mean over seeds)
    is higher / lower than base's, and the mean over programs of the difference (mean ± sd over
    seeds). Needs the per-program ratios of both."""
    out = {}
    if base not in res:
        return out
    for s in [x for x in SEARCHERS if x in res and x in LEARNING]:
        seeds = [k for k in res[s] if k in res[base]]
        if not seeds:
            continue
        a = np.array([res[s][k]["per_program"] for k in seeds])  # [seed, budget, program]
        b = np.array([res[base][k]["per_program"] for k in seeds])
        d = a - b
        per_prog = d.mean(axis=0)  # [budget, program]
        out[s] = {"better": [int((per_prog[i] > 1e-12).sum()) for i in range(len(budgets))],
                  "worse": [int((per_prog[i] < -1e-12).sum()) for i in range(len(budgets))],
                  "diff_mean": [float(d[:, i].mean(axis=1).mean()) for i in range(len(budgets))],
                  "diff_sd": [float(d[:, i].mean(axis=1).std()) for i in range(len(budgets))]}
    return out


def markdown(summ, budgets, n_programs, seeds, batch, vs=None):
    lines = [f"Mean over {n_programs} programs of best measured speedup / program's best speedup "
             f"(mean ± sd over seeds {','.join(map(str, seeds))}; {batch} measurement(s) per "
             "round):", "",
             "| searcher | " + " | ".join(f"B={b}" for b in budgets) + " |",
             "|---|" + "---|" * len(budgets)]
    for s in [x for x in SEARCHERS if x in summ]:
        v = summ[s]
        lines.append(f"| {s} | " + " | ".join(f"{m:.4f} ± {d:.4f}" for m, d in
                                              zip(v["ratio_mean"], v["ratio_sd"])) + " |")
    lines += ["", "MAPE (%) of the predictions of the schedules not yet measured, after B "
              "measurements (mean over programs and seeds):", "",
              "| searcher | " + " | ".join(f"B={b}" for b in budgets) + " |",
              "|---|" + "---|" * len(budgets)]
    for s in [x for x in SEARCHERS if x in summ and x != "random"]:
        lines.append(f"| {s} | " + " | ".join("-" if x is None else f"{x:.1f}"
                                              for x in summ[s]["mape_mean"]) + " |")
    if vs:
        lines += ["", "Against the model without learning: mean difference of the best-found ratio "
                  "(mean ± sd over seeds), and the programs better / worse (per-program mean over "
                  "seeds):", "",
                  "| searcher | " + " | ".join(f"B={b}" for b in budgets) + " |",
                  "|---|" + "---|" * len(budgets)]
        for s, v in vs.items():
            lines.append(f"| {s} | " + " | ".join(
                f"{m:+.4f} ± {d:.4f} ({g}/{w})" for m, d, g, w in
                zip(v["diff_mean"], v["diff_sd"], v["better"], v["worse"])) + " |")
    return "\n".join(lines) + "\n"


def svg(summ, budgets, title):
    """The best-found ratio against B (log x axis), one line per searcher."""
    w, h, l, r, t, b = 640, 400, 70, 150, 40, 50
    xs = [math.log(x) for x in budgets]
    lo = min(min(v["ratio_mean"]) for v in summ.values())
    y0 = max(0.0, math.floor(lo * 10) / 10 - 0.05)

    def px(x):
        return l + (x - xs[0]) / ((xs[-1] - xs[0]) or 1) * (w - l - r)

    def py(y):
        return t + (1 - (y - y0) / (1 - y0)) * (h - t - b)

    colors = {"random": "#888888", "model": "#1f77b4", "model+corr": "#d62728",
              "model+ft": "#2ca02c", "model+ft+corr": "#9467bd"}
    dashes = {"random": "", "model": "", "model+corr": ' stroke-dasharray="6,4"', "model+ft": "",
              "model+ft+corr": ' stroke-dasharray="2,3"'}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{l}" y1="{py(y0)}" x2="{w - r}" y2="{py(y0)}" stroke="black"/>',
           f'<line x1="{l}" y1="{py(y0)}" x2="{l}" y2="{py(1)}" stroke="black"/>']
    for bgt, x in zip(budgets, xs):
        out.append(f'<text x="{px(x):.1f}" y="{py(y0) + 18:.1f}" text-anchor="middle">{bgt}</text>')
    k = 0
    while y0 + k * 0.1 <= 1.0001:
        y = y0 + k * 0.1
        out.append(f'<line x1="{l - 4}" y1="{py(y):.1f}" x2="{w - r}" y2="{py(y):.1f}" '
                   'stroke="#dddddd"/>')
        out.append(f'<text x="{l - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
        k += 1
    out.append(f'<text x="{(l + w - r) / 2}" y="{h - 12}" text-anchor="middle">'
               'measurements B (log scale)</text>')
    out.append(f'<text x="16" y="{(t + h - b) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(t + h - b) / 2})">best found / best speedup</text>')
    for i, s in enumerate([x for x in SEARCHERS if x in summ]):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, summ[s]["ratio_mean"]))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colors[s]}" '
                   f'stroke-width="2"{dashes[s]}/>')
        out.append(f'<line x1="{w - r + 10}" y1="{t + 20 * i + 6}" x2="{w - r + 35}" '
                   f'y2="{t + 20 * i + 6}" stroke="{colors[s]}" stroke-width="2"{dashes[s]}/>')
        out.append(f'<text x="{w - r + 40}" y="{t + 20 * i + 10}">{s}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--budgets", default="1,2,5,10,20")
    ap.add_argument("--batch", type=int, default=1, help="measurements per round (top-k)")
    ap.add_argument("--max-programs", type=int, default=0)
    ap.add_argument("--skip-programs", type=int, default=0,
                    help="leave out the first N programs (to split a run into parts)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ft", default="",
                    help="fine-tuning options of model+ft(+corr): key=value,... (Model learning)")
    ap.add_argument("--searchers", default=",".join(SEARCHERS))
    ap.add_argument("--out-json")
    ap.add_argument("--out-svg")
    ap.add_argument("--out-md")
    a = ap.parse_args(argv)
    seeds = [int(x) for x in a.seeds.split(",")]
    budgets = sorted({int(x) for x in a.budgets.split(",")})
    if a.batch < 1 or not budgets or budgets[0] < 1:
        ap.error("--batch and every budget must be >= 1")
    searchers = [x for x in a.searchers.split(",") if x]
    if not searchers or any(x not in SEARCHERS for x in searchers):
        ap.error(f"--searchers: a list of {','.join(SEARCHERS)}")
    models = {}
    for s in searchers:
        variant = LEARNING.get(s, "none")
        if variant in ("finetune", "both"):  # reproducible: observe returns after the steps
            variant += ",synchronous=1" + ("," + a.ft if a.ft else "")
        models[s] = lcm.Model(a.weights, threads=a.threads, learning=variant)
    programs = load_programs(a.data, a.max_programs, a.skip_programs)
    if not programs:
        ap.error(f"{a.data}: no program with a labelled schedule")
    res = simulate(models, programs, seeds, budgets, a.batch, searchers)
    summ = summary(res, budgets)
    vs = versus(res, budgets)
    md = markdown(summ, budgets, len(programs), seeds, a.batch, vs)
    sys.stdout.write(md)
    doc = {"weights": a.weights, "data": a.data, "programs": len(programs), "seeds": seeds,
           "ft": a.ft, "searchers": searchers,
           "budgets": budgets, "batch": a.batch, "per_seed": res, "summary": summ, "versus": vs}
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
    if a.out_svg:
        with open(a.out_svg, "w") as f:
            f.write(svg(summ, budgets, f"Simulated search, {len(programs)} programs"))
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(md)
    return doc


if __name__ == "__main__":
    main()
