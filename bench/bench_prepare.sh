#!/usr/bin/env bash
# Benchmark of lcm-prepare on one LOOPerSet file: schedules/s with 1 and 2 feature threads (cache
# off), peak RSS, and `zcat FILE > /dev/null` measured in the same run as the baseline (ratio).
# Usage: bench/bench_prepare.sh [FILE] [BIN_DIR]   (env REPS=3: best of REPS runs each)
# Targets: prepare wall time <= 4x zcat wall time, peak RSS < 1 GB.
#
# Peak RSS per size: bench/bench_prepare.sh --sizes 1M 2M 4M [--bin BIN_DIR]
#   for each size N (schedules; 100k, 1M, 2.5M or a plain count) lcm-synth writes N schedules
#   (K=100 per program, --structures 32), lcm-prepare builds its cache (the defaults: cache on,
#   both files' roles taken by the one file as data.train_file, data.valid_file empty), and the
#   wall time, peak RSS (/usr/bin/time -v "Maximum resident set size") and cache size are
#   printed, then the RSS growth between consecutive sizes in KB per 1M schedules (the slope
#   that says whether RSS depends on the input's size). Files go to $BENCH_TMP (default
#   $TMPDIR or /tmp) and are removed after each size. env: K, BIN_DIR, THREADS (data.nb_workers,
#   default 2), KEYS (more key=value settings).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sizes" ]; then
  shift
  SIZES=()
  BIN_DIR=${BIN_DIR:-build/bin}
  while [ $# -gt 0 ]; do
    case $1 in
      --bin) BIN_DIR=$2; shift 2 ;;
      *) SIZES+=("$1"); shift ;;
    esac
  done
  K=${K:-100}
  THREADS=${THREADS:-2}
  read -r -a XKEYS <<<"${KEYS:-}"
  for t in lcm-synth lcm-prepare; do
    [ -x "$BIN_DIR/$t" ] || { echo "bench_prepare: $BIN_DIR/$t not built" >&2; exit 1; }
  done
  [ -x /usr/bin/time ] || { echo "bench_prepare: /usr/bin/time missing (Debian package 'time')" >&2; exit 1; }
  TMP=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench_prepare.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  count() {
    case $1 in
      *[kK]) awk -v n="${1%?}" 'BEGIN{printf "%.0f", n * 1e3}' ;;
      *[mM]) awk -v n="${1%?}" 'BEGIN{printf "%.0f", n * 1e6}' ;;
      *) echo "$1" ;;
    esac
  }
  echo "bench_prepare --sizes: $BIN_DIR, $K schedules/program, data.nb_workers=$THREADS, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
  printf "  %-10s %10s %10s %12s %14s %12s\n" schedules programs "synth s" "prepare s" "peak RSS MB" "cache MB"
  prev_n="" prev_rss=""
  for size in "${SIZES[@]}"; do
    n=$(count "$size")
    programs=$(( (n + K - 1) / K ))
    f="$TMP/synth_$n.jsonl.gz"
    s0=$(date +%s.%N)
    "$BIN_DIR/lcm-synth" --programs "$programs" --schedules-per-program "$K" --out "$f" >/dev/null
    s1=$(date +%s.%N)
    /usr/bin/time -v -o "$TMP/time.txt" "$BIN_DIR/lcm-prepare" --config configs/default.yaml -q \
      "data.train_file=$f" data.valid_file= data.nb_workers="$THREADS" \
      experiment.base_path="$TMP/run" "${XKEYS[@]}" >"$TMP/out.txt" 2>"$TMP/err.txt" ||
      { echo "bench_prepare: lcm-prepare failed at $size:" >&2; tail -5 "$TMP/err.txt" >&2; exit 1; }
    rss=$(awk -F': *' '/Maximum resident set size/{print $2}' "$TMP/time.txt")
    wall=$(awk -F': *' '/Elapsed \(wall clock\)/{print $2}' "$TMP/time.txt")
    cache=$(stat -c %s "$TMP/run/cache/train.lcmb")
    printf "  %-10s %10s %10.1f %12s %14.1f %12.1f\n" "$n" "$programs" \
      "$(awk -v a="$s0" -v b="$s1" 'BEGIN{print b - a}')" "$wall" \
      "$(awk -v k="$rss" 'BEGIN{print k / 1024}')" "$(awk -v b="$cache" 'BEGIN{print b / 1048576}')"
    if [ -n "$prev_n" ]; then
      awk -v a="$prev_rss" -v b="$rss" -v m="$prev_n" -v n="$n" 'BEGIN{printf "    RSS growth %s -> %s schedules: %.0f KB per 1M schedules (%.1f bytes a schedule)\n", m, n, (b - a) / ((n - m) / 1e6), (b - a) * 1024 / (n - m)}'
    fi
    prev_n=$n prev_rss=$rss
    rm -rf "$f" "$TMP/run"
  done
  exit 0
fi
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

# shellcheck source=bench/measure.sh
source bench/measure.sh

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
