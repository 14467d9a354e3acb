#!/usr/bin/env bash
# lcm-prepare of two builds on one file, alternating (shared machines drift): wall seconds of
# BASE/lcm-prepare and NEW/lcm-prepare per round (cache off, the same config), each round's
# NEW/BASE ratio and their median. For reader changes that must keep lcm-prepare's speed.
#
# Usage: BASE=/path/to/old/bin NEW=build/bin bash bench/compare_prepare.sh [FILE] [key=value ...]
#        (env: ROUNDS=5 WORKERS=2; extra key=value overrides go to both sides)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BASE:?set BASE to the bin folder of the build to compare against}"
NEW=${NEW:-build/bin}
ROUNDS=${ROUNDS:-5}
WORKERS=${WORKERS:-2}
FILE=${1:-../shared/data/looperset-sample/train.jsonl.gz}
shift || true
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
run() {  # run BIN [overrides...] → wall seconds
  local bin=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$bin/lcm-prepare" -q --config /dev/null data.train_file="$FILE" \
    data.valid_file= data.cache=false data.nb_workers="$WORKERS" experiment.base_path="$TMP" \
    "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}'
}
run "$NEW" "$@" >/dev/null  # warm the page cache
ratios=()
printf "%-6s %10s %10s %9s\n" round base_s new_s new/base
for r in $(seq 1 "$ROUNDS"); do
  b=$(run "$BASE")
  n=$(run "$NEW" "$@")
  ratio=$(awk -v b="$b" -v n="$n" 'BEGIN{printf "%.3f", n/b}')
  ratios+=("$ratio")
  printf "%-6s %10s %10s %9s\n" "$r" "$b" "$n" "$ratio"
done
printf "%s\n" "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{printf "median new/base %.3f over %d rounds\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), NR}'
grep -E "forms|cross-check" "$TMP/out.txt" || true
