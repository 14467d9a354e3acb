#!/usr/bin/env bash
# Training throughput on a real split: datapoints/s of lcm-train with mixed-footprint vs
# per-footprint batches in one process, and with 1 vs 2 MPI ranks, every process on 1 thread
# (training.threads=1), all in one run so that the ratios compare like with like on a shared
# machine. Each setting trains EPOCHS epochs from the same cache folder; the figure is the
# log's datapoints / train_seconds summed over the epochs (validation excluded).
# Usage: bench/bench_mpi.sh [TRAIN_FILE [VALID_FILE]]
#   default files: ../shared/data/looperset-sample/{train,valid}.jsonl.gz
#   env: EPOCHS=2, BIN_DIR=build/bin, CONFIG=configs/default.yaml, MPIRUN=mpirun,
#        BENCH_TMP (temp folder; default $TMPDIR or /tmp), BENCH_KEYS (extra key=value settings).
# The 2-rank rows need mpirun (Open MPI: as root it is given --allow-run-as-root); without it they
# are skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
EPOCHS=${EPOCHS:-2}
CONFIG=${CONFIG:-configs/default.yaml}
MPIRUN=${MPIRUN:-mpirun}
TRAIN=${1:-../shared/data/looperset-sample/train.jsonl.gz}
VALID=${2:-../shared/data/looperset-sample/valid.jsonl.gz}
read -r -a KEYS <<<"${BENCH_KEYS:-}"
case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;; esac
[ -x "$BIN_DIR/lcm-train" ] || { echo "bench_mpi: $BIN_DIR/lcm-train not built" >&2; exit 1; }
for f in "$TRAIN" "$VALID"; do [ -f "$f" ] || { echo "bench_mpi: $f not found" >&2; exit 1; }; done
TMP=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench_mpi.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CPUS=$(nproc)  # (before OMP_NUM_THREADS=1, which nproc obeys)
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
ROOT_FLAGS=()
[ "$(id -u)" = 0 ] && ROOT_FLAGS=(--allow-run-as-root)
echo "bench_mpi: $TRAIN, $EPOCHS epochs per setting, $CPUS CPUs, load $(cut -d' ' -f1 /proc/loadavg)"

ROWS=()
# run NAME RANKS KEY=VALUE...: trains, then prints and records datapoints/s.
run() {
  local name=$1 ranks=$2
  shift 2
  local out="$TMP/$name" launch=()
  if [ "$ranks" -gt 1 ]; then
    command -v "$MPIRUN" >/dev/null || { echo "  $name: skipped ($MPIRUN not found)"; return; }
    launch=("$MPIRUN" -np "$ranks" --oversubscribe ${ROOT_FLAGS[@]+"${ROOT_FLAGS[@]}"})
  fi
  local t0=$EPOCHREALTIME
  ${launch[@]+"${launch[@]}"} "$BIN_DIR/lcm-train" --config "$CONFIG" "data.train_file=$TRAIN" \
    "data.valid_file=$VALID" "experiment.base_path=$out" experiment.name=bench \
    training.max_epochs="$EPOCHS" training.early_stop_patience=0 training.threads=1 \
    data.nb_workers=1 "$@" ${KEYS[@]+"${KEYS[@]}"} >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    { cat "$TMP/$name.err" >&2; echo "bench_mpi: $name failed" >&2; exit 1; }
  local wall rate
  wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b - a}')
  rate=$(sed -n 's/.*"datapoints":\([0-9]*\).*"train_seconds":\([0-9.e+-]*\).*/\1 \2/p' \
    "$out/log_bench.jsonl" | awk '{d += $1; s += $2} END {printf "%.0f", (s > 0 ? d / s : 0)}')
  local batches
  batches=$(awk '/lcm-train: experiment/{for (i = 1; i < NF; ++i) if ($i == "batches,") {print $(i-1); exit}}' "$TMP/$name.out" "$TMP/$name.err")
  printf "  %-22s ranks %d  batches/epoch %5s  %7s datapoints/s  (wall %s s with validation)\n" \
    "$name" "$ranks" "${batches:-?}" "$rate" "$wall"
  ROWS+=("| $name | $ranks | ${batches:-?} | $rate |")
}
run mixed_1rank 1 data.batching=mixed
run per_footprint_1rank 1 data.batching=per_footprint
run mixed_2ranks 2 data.batching=mixed
run per_footprint_2ranks 2 data.batching=per_footprint
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($CPUS CPUs)"
echo "| setting | ranks x 1 thread | batches/epoch | training datapoints/s |"
echo "|---|---|---|---|"
for r in "${ROWS[@]}"; do echo "$r"; done
