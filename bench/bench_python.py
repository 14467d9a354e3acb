#!/usr/bin/env python3
"""Per-call overhead of the Python module over liblcm (docs/tools.md "Python module"): the same
calls (one program, cached; 1 and 100 schedules) through lcm.Model.predict, with JSON strings and
with dicts, against liblcm's own time measured by bench_python (C++), alternated in rounds so
that both see the same machine state. Prints the median µs per call of each and the difference.

    PYTHONPATH=build/python python3 bench/bench_python.py CKPT PROGRAMS [--bin build/bin]"""
import argparse
import json
import os
import statistics
import subprocess
import time

import lcm


def median_us(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("programs")
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    m = lcm.Model(a.weights)
    rec = max(lcm.read_looperset(a.programs), key=lambda r: len(r["schedules"]))
    prog, untr = rec["program"], rec["untransformed"]
    prog_d, untr_d = json.loads(prog), json.loads(untr)
    res = {}
    for rnd in range(a.rounds):
        out = subprocess.run([os.path.join(a.bin, "bench_python"), a.weights, a.programs,
                              "--calls", str(a.calls)], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            _, n, us = line.split()
            res.setdefault(("liblcm", int(n)), []).append(float(us))
        for n in (1, 100):
            s = [rec["schedules"][i % len(rec["schedules"])] for i in range(n)]
            sd = [json.loads(x) for x in s]
            reps = a.calls if n == 1 else max(a.calls // 20, 50)
            m.predict(prog, s, untransformed=untr)
            res.setdefault(("str", n), []).append(
                median_us(lambda: m.predict(prog, s, untransformed=untr), reps))
            res.setdefault(("dict", n), []).append(
                median_us(lambda: m.predict(prog_d, sd, untransformed=untr_d), reps))
    print(f"program {rec['name']}; median over {a.rounds} rounds of the median µs per call")
    for n in (1, 100):
        base = statistics.median(res[("liblcm", n)])
        for kind in ("str", "dict"):
            t = statistics.median(res[(kind, n)])
            print(f"{n:4d} schedules: liblcm {base:9.2f} µs, lcm.Model.predict ({kind:4s}) "
                  f"{t:9.2f} µs, overhead {t - base:8.2f} µs per call")


if __name__ == "__main__":
    main()
