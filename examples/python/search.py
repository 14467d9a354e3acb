#!/usr/bin/env python3
"""A small beam search over the real schedules of a LOOPerSet program, ranked by lcm.Model.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/search.py CKPT PROGRAMS [--program NAME]
        [--beam 4]

The search space is the program's schedules in the file (so every candidate has a measured
speedup to check the search against). A schedule is the set of its transformation terms (its
sched_str split into terms, each with the computations it applies to). The search starts from
the untransformed schedule; step d takes the schedules of d terms that extend a schedule of the
beam by one term (all schedules of d terms when none does), scores them in one Model.predict
call, and keeps the `beam` best. It reports the best schedule found by predicted speedup, its
measured speedup, the best measured speedup of the program, and how many schedules it scored."""
import argparse
import json
import math
import re
import sys

import lcm

TERM = re.compile(r"\{[^{}]*\}:|[A-Z][0-9]?\((?:\{[^{}]*\}|[^()])*\)")


def terms(sched_str):
    """The transformation terms of a sched_str, each prefixed by the computation label in force
    (`{comp00}:` in some dialects): a frozenset, so the order of application is not compared."""
    label, out = "", []
    for t in TERM.findall(sched_str or ""):
        if t.endswith(":"):
            label = t
        else:
            out.append(label + t)
    return frozenset(out)


def search(model, rec, beam):
    scheds = rec["schedules"]
    sets = [terms(json.loads(s).get("sched_str", "")) for s in scheds]
    by_size = {}
    for i, t in enumerate(sets):
        by_size.setdefault(len(t), []).append(i)
    frontier = [0]  # the untransformed schedule
    scored = {}
    for d in sorted(k for k in by_size if k > 0):
        cands = [i for i in by_size[d] if any(sets[b] < sets[i] for b in frontier)] or by_size[d]
        cands = [i for i in cands if i not in scored]
        if not cands:
            continue
        v, _ = model.predict(rec["program"], [scheds[i] for i in cands],
                             untransformed=rec["untransformed"], errors="return")
        for i, x in zip(cands, v):
            scored[i] = x
        ranked = sorted((i for i in cands if not math.isnan(scored[i])),
                        key=lambda i: -scored[i])
        frontier = ranked[:beam] or frontier
    return scored


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("programs")
    ap.add_argument("--program", help="program name (default: the one with most schedules)")
    ap.add_argument("--beam", type=int, default=4)
    a = ap.parse_args()
    try:
        model = lcm.Model(a.weights)
        recs = [r for r in lcm.read_looperset(a.programs)
                if a.program is None or r["name"] == a.program]
        if not recs:
            print(f"search.py: no program {a.program!r} in {a.programs}", file=sys.stderr)
            return 1
        rec = max(recs, key=lambda r: len(r["schedules"]))
        scored = search(model, rec, a.beam)
    except lcm.Error as e:
        print(f"search.py: {type(e).__name__} ({e.reason}): {e}", file=sys.stderr)
        return 1
    measured = rec["measured_speedups"]
    ok = [i for i in scored if not math.isnan(scored[i])]
    if not ok:
        print(f"{rec['name']}: no schedule could be scored")
        return 1
    best = max(ok, key=lambda i: scored[i])
    best_measured = max((m for m in measured if not math.isnan(m)), default=math.nan)
    sched_str = json.loads(rec["schedules"][best]).get("sched_str", "")
    print(f"program {rec['name']}: {len(rec['schedules'])} schedules, beam {a.beam}: "
          f"scored {len(scored)}")
    print(f"best found: schedule {best} {sched_str!r}: predicted {scored[best]:.4g}x, "
          f"measured {measured[best]:.4g}x")
    print(f"best measured speedup of the program: {best_measured:.4g}x "
          f"(found/best = {measured[best] / best_measured:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
