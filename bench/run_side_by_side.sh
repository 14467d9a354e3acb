#!/usr/bin/env bash
# Side-by-side speed of lcm (build/bin/bench_model) and the PyTorch reference
# (bench/reference/bench_reference.py) on identical inputs exported by bench_export_batch:
# training datapoints/s (forward + MAPE + backward + AdamW) and one-program inference latency.
#
# Usage: bash bench/run_side_by_side.sh            (env: THREADS=2 ROUNDS=3 BATCHES=24 BUILD=build
#        SUB_BATCHES=1: lcm's training.cpu_sub_batches, bench_model --sub-batches)
# The two sides alternate ROUNDS times (shared machines drift); the summary gives each round's
# ratio and their median, and per round lcm's GFLOP/s of matrix products (forward, backward, whole
# step; engine/cpu_gemm.hpp counts them) as a share of the FP32 FMA peak bench_peak measures here. Needs LCM_SETUP_REFERENCE=1 scripts/setup.sh (python3-torch, OpenBLAS).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-24}
BUILD=${BUILD:-build}
SUB_BATCHES=${SUB_BATCHES:-1}
DATA=${DATA:-../shared/data/looperset-sample}
OUT=${OUT:-/tmp/lcm_side_by_side}
mkdir -p "$OUT"
cmake --build "$BUILD" --target bench_model bench_export_batch bench_peak -j"$THREADS" >/dev/null
# the first $BATCHES batches of lcm-train's seeded order (batch 512, docs/model-spec.md §3.11 rule
# on), and the one-program batches (first 100 schedules of the largest and of a median program of
# valid)
rm -rf "$OUT/train" "$OUT/programs"
"$BUILD/bin/bench_export_batch" --data "$DATA/train.jsonl.gz" --dump "$BATCHES" --dump-dir "$OUT/train" \
  --batch-size 512 --min-functions-per-footprint 2 >/dev/null
"$BUILD/bin/bench_export_batch" --data "$DATA/valid.jsonl.gz" --programs-dir "$OUT/programs" \
  --program-schedules 100 --min-functions-per-footprint 0
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OMP_NUM_THREADS=$THREADS
# this machine's FP32 FMA peak on $THREADS threads, the denominator of lcm's "% of peak" (measured
# before and after the rounds: the larger, since a shared machine's other work only lowers it)
"$BUILD/bin/bench_peak" --threads "$THREADS" --peak-only | tee "$OUT/peak_before.txt"
for r in $(seq 1 "$ROUNDS"); do
  echo "=== round $r: lcm"
  "$BUILD/bin/bench_model" --threads "$THREADS" --batch-dir "$OUT/train" --epochs 2 \
    --sub-batches "$SUB_BATCHES" --infer-dir "$OUT/programs" --infer-reps 30 | tee "$OUT/lcm_$r.txt"
  echo "=== round $r: PyTorch"
  /usr/bin/python3 bench/reference/bench_reference.py --batches "$OUT/train" --threads "$THREADS" \
    --passes 2 --infer-dir "$OUT/programs" --infer-reps 30 | tee "$OUT/torch_$r.txt"
done
"$BUILD/bin/bench_peak" --threads "$THREADS" --peak-only | tee "$OUT/peak_after.txt"
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
peak = max(float(re.search(r"GFLOP/s per core, ([0-9.]+) GFLOP/s on", open(f"{out}/peak_{w}.txt").read())
                 .group(1)) for w in ("before", "after"))
def grab(path):
    text = open(path).read()
    train = float(re.search(r"training[^\n]*?= ([0-9.]+) datapoints/s|training[^\n]*?: ([0-9.]+) datapoints/s",
                            text).group(1) or 0)
    return text, train
rows = {}
gflops = []
for r in range(1, rounds + 1):
    lcm, torch = open(f"{out}/lcm_{r}.txt").read(), open(f"{out}/torch_{r}.txt").read()
    lt = float(re.search(r"= ([0-9.]+) datapoints/s", lcm).group(1))
    tt = float(re.search(r"float32\): ([0-9.]+) datapoints/s", torch).group(1))
    rows.setdefault("training datapoints/s", []).append((lt, tt, lt / tt))
    fl = re.search(r"forward ([0-9.]+) MFLOP/datapoint at ([0-9.]+) GFLOP/s, backward ([0-9.]+) "
                   r"MFLOP/datapoint at ([0-9.]+) GFLOP/s, step ([0-9.]+) GFLOP/s", lcm)
    # sub-batches (SUB_BATCHES > 1) run a part's forward and backward together: the step only
    fs = re.search(r"forward \+ backward ([0-9.]+) MFLOP/datapoint, step ([0-9.]+) GFLOP/s", lcm)
    if fl:
        fwd, bwd, step = float(fl.group(2)), float(fl.group(4)), float(fl.group(5))
        gflops.append((fwd, bwd, step))
        print(f"round {r}: lcm training {lt:.0f} vs PyTorch {tt:.0f} datapoints/s = {lt / tt:.2f}x; "
              f"lcm GEMM work {step:.1f} GFLOP/s over the whole step = {100 * step / peak:.1f}% of "
              f"the {peak:.0f} GFLOP/s FMA peak (forward {fwd:.1f} GFLOP/s = {100 * fwd / peak:.1f}%, "
              f"backward {bwd:.1f} GFLOP/s = {100 * bwd / peak:.1f}%)")
    elif fs:
        step = float(fs.group(2))
        gflops.append((None, None, step))
        print(f"round {r}: lcm training {lt:.0f} vs PyTorch {tt:.0f} datapoints/s = {lt / tt:.2f}x; "
              f"lcm GEMM work {step:.1f} GFLOP/s over the whole step = {100 * step / peak:.1f}% of "
              f"the {peak:.0f} GFLOP/s FMA peak (sub-batches: forward and backward not timed apart)")
    for m in re.finditer(r"features excluded[^:]*: (program_\w+)\.safetensors.*?wall median ([0-9.]+) ms", lcm):
        tm = re.search(m.group(1) + r"\.safetensors.*?wall median ([0-9.]+) ms", torch)
        lat = float(m.group(2)); tl = float(tm.group(1))
        rows.setdefault(f"inference {m.group(1)} ms (features excluded)", []).append((lat, tl, tl / lat))
    for m in re.finditer(r"features included[^:]*: (program_\w+)\.safetensors.*?wall median ([0-9.]+) ms", lcm):
        tm = re.search(m.group(1) + r"\.safetensors.*?wall median ([0-9.]+) ms", torch)
        lat = float(m.group(2)); tl = float(tm.group(1))
        rows.setdefault(f"inference {m.group(1)} ms (lcm features included; torch excluded)", []).append(
            (lat, tl, tl / lat))
print(f"\n{'measure':<70} {'lcm':>10} {'PyTorch':>10} {'lcm advantage (per round)':>30}")
for k, v in rows.items():
    print(f"{k:<70} {statistics.median(x[0] for x in v):>10.2f} {statistics.median(x[1] for x in v):>10.2f} "
          f"  median {statistics.median(x[2] for x in v):.2f}x ({', '.join(f'{x[2]:.2f}' for x in v)})")
if gflops:
    split = "" if gflops[0][0] is None else (
        f", forward {statistics.median(g[0] for g in gflops):.1f}, "
        f"backward {statistics.median(g[1] for g in gflops):.1f}")
    print(f"lcm training GEMM GFLOP/s (median of rounds): whole step {statistics.median(g[2] for g in gflops):.1f}"
          f"{split}; FMA peak {peak:.0f} GFLOP/s on the same threads (bench_peak; GEMM FLOPs only, element-wise "
          f"work not counted)")
PY
