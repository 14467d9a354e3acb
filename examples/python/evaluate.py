#!/usr/bin/env python3
"""lcm-eval's table for a checkpoint, from Python: every program of a LOOPerSet file read by
lcm's own reader (lcm.read_looperset), its schedules scored by lcm.Model, the metrics computed
by lcm.eval_table (lcm-eval's code).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/evaluate.py CKPT PROGRAMS [--per-program]

As lcm-eval: datapoints are the schedules with a measured speedup that the model can score; when
the checkpoint has a calibration map the rankings are scored on the uncalibrated predictions.
The numbers equal lcm-eval's up to the float rounding of batched forwards (lcm-eval scores many
programs per forward, this script one program per call)."""
import argparse
import math
import sys

import lcm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights", help="cost-model checkpoint (.safetensors)")
    ap.add_argument("programs", help="LOOPerSet file (.jsonl or .jsonl.gz)")
    ap.add_argument("--per-program", action="store_true", help="also one row per program")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    try:
        model = lcm.Model(a.weights, device=a.device, threads=a.threads)
        calibrated = model.info["calibration"] is not None
        raw = lcm.Model(a.weights, device=a.device, threads=a.threads,
                        calibrated=False) if calibrated else model
        names, measured, predicted, rank = [], [], [], []
        reader = lcm.read_looperset(a.programs)
        n_programs = 0
        for rec in reader:
            v, _ = model.predict(rec["program"], rec["schedules"],
                                 untransformed=rec["untransformed"], errors="return")
            u = v
            if calibrated:
                u, _ = raw.predict(rec["program"], rec["schedules"],
                                   untransformed=rec["untransformed"], errors="return")
            kept = 0
            for i, y in enumerate(rec["measured_speedups"]):
                if math.isnan(y) or math.isnan(v[i]):
                    continue
                names.append(rec["name"])
                measured.append(y)
                predicted.append(v[i])
                rank.append(u[i])
                kept += 1
            n_programs += kept > 0
        if reader.skip_counts:
            print("skipped: " + ", ".join(f"{k} {n}" for k, n in reader.skip_counts.items()),
                  file=sys.stderr)
        print(f"{a.weights} on {a.programs}: {n_programs} programs, {len(measured)} datapoints")
        print(lcm.eval_table(measured, predicted, programs=names, rank=rank,
                             per_program=a.per_program), end="")
    except lcm.Error as e:
        print(f"evaluate.py: {type(e).__name__} ({e.reason}): {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
