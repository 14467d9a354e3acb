#!/usr/bin/env bash
# bench_model of two builds of lcm on identical inputs, alternating (shared machines drift): training
# datapoints/s and one-program inference latency of BASE/bench_model and NEW/bench_model, each
# round's NEW/BASE ratio and their median. For refactors that must not change speed.
#
# Usage: BASE=/path/to/old/bin NEW=build/bin bash bench/compare_builds.sh
#        (env: THREADS=2 ROUNDS=3 BATCHES=24 DATA=../shared/data/looperset-sample OUT=/tmp/lcm_compare)
# Inputs are exported once by NEW/bench_export_batch (the first BATCHES training batches of batch
# size 512 and the first 100 schedules of the largest and a median validation program).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BASE:?set BASE to the bin folder of the build to compare against}"
NEW=${NEW:-build/bin}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-24}
DATA=${DATA:-../shared/data/looperset-sample}
OUT=${OUT:-/tmp/lcm_compare}
rm -rf "$OUT" && mkdir -p "$OUT"
"$NEW/bench_export_batch" --data "$DATA/train.jsonl.gz" --dump "$BATCHES" --dump-dir "$OUT/train" \
  --batch-size 512 --min-functions-per-footprint 2 >/dev/null
"$NEW/bench_export_batch" --data "$DATA/valid.jsonl.gz" --programs-dir "$OUT/programs" \
  --program-schedules 100 --min-functions-per-footprint 0 >/dev/null
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OMP_NUM_THREADS=$THREADS
for r in $(seq 1 "$ROUNDS"); do
  for side in base new; do
    bin=$BASE
    [[ $side == new ]] && bin=$NEW
    echo "=== round $r: $side ($bin)"
    "$bin/bench_model" --threads "$THREADS" --batch-dir "$OUT/train" --epochs 2 \
      --infer-dir "$OUT/programs" --infer-reps 30 | tee "$OUT/${side}_$r.txt"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def measures(path):
    text = open(path).read()
    m = {"training datapoints/s": float(re.search(r"= ([0-9.]+) datapoints/s", text).group(1))}
    for p in re.finditer(r"features (excluded|included)[^:]*: (program_\w+)\.safetensors.*?wall median ([0-9.]+) ms", text):
        m[f"inference {p.group(2)} (features {p.group(1)}), ms"] = float(p.group(3))
    return m
rows = {}
for r in range(1, rounds + 1):
    b, n = measures(f"{out}/base_{r}.txt"), measures(f"{out}/new_{r}.txt")
    for k in b:
        if k in n: rows.setdefault(k, []).append((b[k], n[k], n[k] / b[k]))
print(f"{'measure':58s} {'base':>10s} {'new':>10s}  new/base (median; each round)")
for k, v in rows.items():
    ratios = [x[2] for x in v]
    print(f"{k:58s} {statistics.median(x[0] for x in v):10.2f} {statistics.median(x[1] for x in v):10.2f}  "
          f"{statistics.median(ratios):.3f} ({', '.join(f'{x:.3f}' for x in ratios)})")
PY
