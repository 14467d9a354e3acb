#!/usr/bin/env bash
# Benchmark of lcm-inspect against `zcat FILE > /dev/null` (the speed target: inspect wall time
# within 2x of zcat's), measured back to back in one run: best wall and CPU seconds of REPS runs
# each, peak RSS, and the ratio.
# Usage: bench/bench_inspect.sh [FILE] [BIN_DIR]   (env REPS=3, THREADS=0, FLAGS="--features")
# Without FILE it generates the 1M-schedule lcm-synth file (10,000 programs x 100 schedules,
# docs/synth.md) under build/bench_inspect/ and deletes it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${2:-build/bin}
REPS=${REPS:-3}
THREADS=${THREADS:-0}
FLAGS=${FLAGS:-}
INSPECT="$BIN_DIR/lcm-inspect"
[ -x "$INSPECT" ] || { echo "bench_inspect: $INSPECT not built (cmake --build build --target lcm-inspect)" >&2; exit 1; }
export OMP_WAIT_POLICY=passive
GENERATED=""
FILE=${1:-}
if [ -z "$FILE" ]; then
  [ -x "$BIN_DIR/lcm-synth" ] || { echo "bench_inspect: $BIN_DIR/lcm-synth not built" >&2; exit 1; }
  mkdir -p build/bench_inspect
  FILE=build/bench_inspect/synth_1m.jsonl.gz
  GENERATED=$FILE
  echo "bench_inspect: generating $FILE (10,000 programs x 100 schedules)"
  "$BIN_DIR/lcm-synth" --programs 10000 --schedules-per-program 100 --out "$FILE" >/dev/null
fi
[ -r "$FILE" ] || { echo "bench_inspect: cannot read $FILE" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ -n "$GENERATED" ] && rm -f "$GENERATED"' EXIT

# shellcheck source=bench/measure.sh
source bench/measure.sh
MEASURE_ANY_STATUS=1  # time every run, whatever its exit status

echo "bench_inspect: $FILE ($(stat -c %s "$FILE") bytes), best of $REPS, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
read -r z_wall z_cpu z_rss < <(measure zcat sh -c "zcat '$FILE' > /dev/null")
read -r i_wall i_cpu i_rss < <(measure inspect "$INSPECT" -q --threads "$THREADS" $FLAGS "$FILE")
printf "  %-28s wall %6.2f s  cpu %6.2f s  peak RSS %7.1f MB\n" "zcat > /dev/null" "$z_wall" "$z_cpu" "$(awk -v k="$z_rss" 'BEGIN{print k/1024}')"
printf "  %-28s wall %6.2f s  cpu %6.2f s  peak RSS %7.1f MB\n" "lcm-inspect $FLAGS" "$i_wall" "$i_cpu" "$(awk -v k="$i_rss" 'BEGIN{print k/1024}')"
grep -m1 "lcm reads" "$TMP/inspect.out" || true
ratio=$(awk -v a="$i_wall" -v b="$z_wall" 'BEGIN{printf "%.2f", a/b}')
echo "  ratio lcm-inspect / zcat wall: $ratio (target <= 2)"
