#!/usr/bin/env bash
# Benchmark of lcm-prepare on one LOOPerSet file: schedules/s with 1 and 2 feature threads (cache
# off), peak RSS, and `zcat FILE > /dev/null` measured in the same run as the baseline (ratio).
# Usage: bench/bench_prepare.sh [FILE] [BIN_DIR]   (env REPS=3: best of REPS runs each)
# Targets: prepare wall time <= 4x zcat wall time, peak RSS < 1 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=${1:-../shared/data/looperset-sample/train.jsonl.gz}
BIN_DIR=${2:-build/bin}
REPS=${REPS:-3}
PREP="$BIN_DIR/lcm-prepare"
[ -x "$PREP" ] || { echo "bench_prepare: $PREP not built (cmake --build build --target lcm-prepare)" >&2; exit 1; }
[ -r "$FILE" ] || { echo "bench_prepare: cannot read $FILE" >&2; exit 1; }
TIME=/usr/bin/time
if [ ! -x "$TIME" ]; then
  echo "bench_prepare: /usr/bin/time missing; installing the Debian package 'time' (apt-get install -y time)" >&2
  (apt-get install -y time >/dev/null 2>&1 || sudo apt-get install -y time >/dev/null 2>&1) ||
    { echo "bench_prepare: could not install 'time'" >&2; exit 1; }
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# measure NAME CMD...: best-of-REPS wall seconds, CPU seconds (user+sys) and max RSS (KB) of CMD.
measure() {
  local name=$1; shift
  local best_wall="" best_cpu="" max_rss=0
  for ((r = 0; r < REPS; r++)); do
    "$TIME" -f "%e %U %S %M" -o "$TMP/$name.time" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    read -r wall user sys rss <"$TMP/$name.time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')
    if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN{exit !(a<b)}'; then best_wall=$wall; best_cpu=$cpu; fi
    [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  done
  echo "$best_wall $best_cpu $max_rss"
}

echo "bench_prepare: $FILE ($(stat -c %s "$FILE") bytes), best of $REPS, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
read -r z_wall z_cpu z_rss < <(measure zcat sh -c "zcat '$FILE' > /dev/null")
printf "  %-22s wall %6.2f s  cpu %6.2f s  peak RSS %7.1f MB\n" "zcat > /dev/null" "$z_wall" "$z_cpu" "$(awk -v k="$z_rss" 'BEGIN{print k/1024}')"
status=0
for t in 1 2; do
  read -r wall cpu rss < <(measure "prep$t" "$PREP" --config configs/default.yaml -q data.cache=false \
      "data.train_file=$FILE" data.valid_file= data.nb_workers=$t experiment.base_path="$TMP/run")
  sched=$(awk '/^  schedules /{print $2; exit}' "$TMP/prep$t.out")
  rate=$(awk -v n="$sched" -v w="$wall" 'BEGIN{printf "%.0f", (w > 0 ? n / w : 0)}')
  ratio=$(awk -v a="$wall" -v b="$z_wall" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}')
  cratio=$(awk -v a="$cpu" -v b="$z_cpu" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}')
  printf "  %-22s wall %6.2f s  cpu %6.2f s  peak RSS %7.1f MB  %s schedules, %s schedules/s, wall ratio to zcat %sx (cpu ratio %sx)\n" \
    "lcm-prepare ${t} thread(s)" "$wall" "$cpu" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$sched" "$rate" "$ratio" "$cratio"
  awk -v r="$ratio" 'BEGIN{exit !(r > 4)}' && { echo "  -> above the 4x zcat target"; status=1; }
  [ "$rss" -ge 1048576 ] && { echo "  -> peak RSS above 1 GB"; status=1; }
done
exit $status
