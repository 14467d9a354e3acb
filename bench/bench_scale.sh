#!/usr/bin/env bash
# Scale benchmark of the data pipeline on lcm-synth data: for each size N (schedules), lcm-synth
# writes N schedules (K per program), lcm-prepare featurises and caches them (wall time,
# schedules/s, cache bytes per kept schedule, peak RSS), then lcm-train reads that cache and trains
# for BATCHES batches (datapoints/s of those batches, peak RSS of the whole process); a table at
# the end. Every generated file is removed after its size (and at exit).
# Usage: bench/bench_scale.sh [SIZE ...] [--10m]   (sizes like 100k, 1M, 10M or plain counts)
#   default sizes: $SCALE_SIZES or "100k 1M"; --10m (or SCALE_10M=1) appends 10M.
#   env: BATCHES=2000 (training batches per size), K=100 (schedules per program), BIN_DIR=build/bin,
#        SCALE_TMP (folder for the temp files; default $TMPDIR or /tmp), CONFIG=configs/default.yaml,
#        SCALE_KEYS (key=value settings for lcm-prepare and lcm-train, e.g.
#        "data.batching=per_footprint").
# Training stops after BATCHES optimizer steps through lcm-train's LCM_INTERRUPT_AFTER_STEPS hook
# (a Ctrl-C after step BATCHES: `last` is saved, exit 130) with training.max_epochs=1, so a size
# with fewer batches trains its one epoch (the table says how many batches ran). Datapoints/s:
# for a finished epoch the log's datapoints / train_seconds; for a stopped one BATCHES x the mean
# batch (training datapoints / batches of the header line) over the seconds from the header line
# to the "interrupted" line (timestamped as they are printed).
# /usr/bin/time writes "Command exited with non-zero status" first: its figures are the last line.
# Disk: about 0.3 KB per schedule while a size runs (gzip ~0.2 KB, compact cache ~0.09 KB); 10M
# needs ~3 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
BATCHES=${BATCHES:-2000}
K=${K:-100}
CONFIG=${CONFIG:-configs/default.yaml}
read -r -a KEYS <<<"${SCALE_KEYS:-}"
SIZES=()
WITH_10M=${SCALE_10M:-0}
for a in "$@"; do
  case $a in
    --10m) WITH_10M=1 ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) SIZES+=("$a") ;;
  esac
done
[ ${#SIZES[@]} -eq 0 ] && read -r -a SIZES <<<"${SCALE_SIZES:-100k 1M}"
[ "$WITH_10M" = 1 ] && SIZES+=(10M)
for t in lcm-synth lcm-prepare lcm-train; do
  [ -x "$BIN_DIR/$t" ] || { echo "bench_scale: $BIN_DIR/$t not built (cmake --build build --target $t)" >&2; exit 1; }
done
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench_scale: /usr/bin/time missing (Debian package 'time')" >&2; exit 1; }
export OMP_WAIT_POLICY=passive
TMP=$(mktemp -d "${SCALE_TMP:-${TMPDIR:-/tmp}}/bench_scale.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# count SIZE: 100k -> 100000, 1M -> 1000000, 2500 -> 2500; empty for anything else.
count() {
  case $1 in
    *[kK]) awk -v n="${1%?}" 'BEGIN{printf "%.0f", n * 1e3}' ;;
    *[mM]) awk -v n="${1%?}" 'BEGIN{printf "%.0f", n * 1e6}' ;;
    *[!0-9]* | "") ;;
    *) echo "$1" ;;
  esac
}
mb() { awk -v k="$1" 'BEGIN{printf "%.0f", k / 1024}'; }  # KB -> MB
# stamp: each input line prefixed with the seconds since the epoch at which it arrived.
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }

for size in "${SIZES[@]}"; do  # every size checked before anything runs
  n=$(count "$size")
  [ -n "$n" ] && [ "$n" -ge "$K" ] || { echo "bench_scale: bad size '$size' (e.g. 100k, 1M, 10M; at least K=$K)" >&2; exit 2; }
done
echo "bench_scale: sizes ${SIZES[*]}, $K schedules per program, $BATCHES training batches," \
  "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), temp folder $TMP"
VALID="$TMP/valid.jsonl.gz"  # lcm-train's validation split: 2,000 schedules of another seed
"$BIN_DIR/lcm-synth" --programs $((2000 / K > 0 ? 2000 / K : 1)) --schedules-per-program "$K" \
  --seed 2 --out "$VALID" 2>/dev/null
ROWS=()
for size in "${SIZES[@]}"; do
  n=$(count "$size")
  need_kb=$((n * 3 / 10))  # ~0.3 KB per schedule (see the header)
  avail_kb=$(df -Pk "$TMP" | awk 'NR==2{print $4}')
  if [ "$avail_kb" -lt "$need_kb" ]; then
    echo "bench_scale: $size needs ~$((need_kb / 1048576)) GB in $TMP, $((avail_kb / 1048576)) GB free; skipped" >&2
    continue
  fi
  programs=$((n / K))
  data="$TMP/train_$size.jsonl.gz"
  run="$TMP/run_$size"
  echo "== $size: $programs programs x $K schedules"
  # 1. lcm-synth
  "$TIME" -f "%e %U %S %M" -o "$TMP/synth.time" "$BIN_DIR/lcm-synth" --programs "$programs" \
    --schedules-per-program "$K" --seed 1 --out "$data" 2>"$TMP/synth.err"
  read -r s_wall s_user s_sys s_rss < <(tail -n 1 "$TMP/synth.time")
  s_bytes=$(stat -c %s "$data")
  printf "  lcm-synth    wall %8.1f s  cpu %8.1f s  peak RSS %6s MB  %s MB gzip\n" "$s_wall" \
    "$(awk -v u="$s_user" -v s="$s_sys" 'BEGIN{print u+s}')" "$(mb "$s_rss")" "$((s_bytes / 1000000))"
  # 2. lcm-prepare (the training split only, into the cache lcm-train reads next)
  "$TIME" -f "%e %U %S %M" -o "$TMP/prep.time" "$BIN_DIR/lcm-prepare" --config "$CONFIG" -q \
    "data.train_file=$data" data.valid_file= "experiment.base_path=$run" ${KEYS[@]+"${KEYS[@]}"} \
    >"$TMP/prep.out" 2>"$TMP/prep.err" || { cat "$TMP/prep.err" >&2; exit 1; }
  read -r p_wall p_user p_sys p_rss < <(tail -n 1 "$TMP/prep.time")
  read -r sched_read sched_kept < <(awk '/^  schedules /{print $2, $4; exit}' "$TMP/prep.out")
  cache_bytes=$(stat -c %s "$run/cache/train.lcmb")
  p_rate=$(awk -v n="$sched_read" -v w="$p_wall" 'BEGIN{printf "%.0f", (w > 0 ? n / w : 0)}')
  p_bps=$(awk -v b="$cache_bytes" -v n="$sched_kept" 'BEGIN{printf "%.0f", (n > 0 ? b / n : 0)}')
  printf "  lcm-prepare  wall %8.1f s  cpu %8.1f s  peak RSS %6s MB  %s schedules read, %s kept, %s schedules/s, cache %s MB = %s B/kept schedule\n" \
    "$p_wall" "$(awk -v u="$p_user" -v s="$p_sys" 'BEGIN{print u+s}')" "$(mb "$p_rss")" \
    "$sched_read" "$sched_kept" "$p_rate" "$((cache_bytes / 1000000))" "$p_bps"
  # 3. lcm-train for BATCHES batches (one epoch at most) on that cache
  set +e
  LCM_INTERRUPT_AFTER_STEPS=$BATCHES "$TIME" -f "%e %U %S %M" -o "$TMP/train.time" \
    "$BIN_DIR/lcm-train" --config "$CONFIG" -q "data.train_file=$data" "data.valid_file=$VALID" \
    "experiment.base_path=$run" training.max_epochs=1 ${KEYS[@]+"${KEYS[@]}"} 2>&1 |
    stamp >"$TMP/train.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; then
    cut -d' ' -f2- "$TMP/train.log" >&2
    echo "bench_scale: lcm-train failed (exit $rc) at $size" >&2
    exit 1
  fi
  read -r t_wall t_user t_sys t_rss < <(tail -n 1 "$TMP/train.time")
  read -r t0 dp nb < <(awk '/lcm-train: experiment/{for (i = 1; i < NF; ++i) if ($(i+1) == "training" && $(i+2) == "datapoints") print $1, $i, $(i+4); exit}' "$TMP/train.log")
  if [ -s "$run/log_lcm.jsonl" ]; then  # the whole epoch ran: the log's own figures
    trained=$nb
    rate=$(sed -n 's/.*"datapoints":\([0-9]*\).*"train_seconds":\([0-9.e+-]*\).*/\1 \2/p' \
      "$run/log_lcm.jsonl" | awk '{printf "%.0f", ($2 > 0 ? $1 / $2 : 0)}')
  else  # stopped after BATCHES steps
    t1=$(awk '/lcm-train: interrupted in epoch/{print $1; exit}' "$TMP/train.log")
    [ -n "$t1" ] || { cut -d' ' -f2- "$TMP/train.log" >&2; echo "bench_scale: lcm-train neither finished its epoch nor stopped after $BATCHES batches" >&2; exit 1; }
    trained=$BATCHES
    rate=$(awk -v b="$BATCHES" -v d="$dp" -v n="$nb" -v a="$t0" -v z="$t1" \
      'BEGIN{printf "%.0f", (z > a ? b * d / n / (z - a) : 0)}')
  fi
  printf "  lcm-train    wall %8.1f s  cpu %8.1f s  peak RSS %6s MB  %s of %s batches (%s datapoints), %s datapoints/s\n" \
    "$t_wall" "$(awk -v u="$t_user" -v s="$t_sys" 'BEGIN{print u+s}')" "$(mb "$t_rss")" \
    "$trained" "$nb" "$dp" "$rate"
  ROWS+=("$(printf "| %s | %.1f | %s | %s | %.1f | %s | %s | %s | %s | %s | %s |" "$size" "$s_wall" \
    "$((s_bytes / 1000000))" "$(mb "$s_rss")" "$p_wall" "$p_rate" "$p_bps" "$(mb "$p_rss")" \
    "$trained/$nb" "$rate" "$(mb "$t_rss")")")
  rm -rf "$data" "$run"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
echo "| schedules | synth s | synth MB (gz) | synth RSS MB | prepare s | prepare schedules/s | cache B/schedule | prepare RSS MB | train batches | train datapoints/s | train RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${ROWS[@]}"; do echo "$r"; done
