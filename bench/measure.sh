# shellcheck shell=bash
# Sourced by the bench scripts (bench_inspect.sh, bench_prepare.sh); needs /usr/bin/time.
# measure NAME CMD...: best-of-REPS wall seconds, CPU seconds (user+sys) and max RSS (KB) of CMD,
# as "wall cpu rss"; CMD's stdout and stderr go to $TMP/NAME.out and $TMP/NAME.err. A failing CMD
# stops the caller's `set -e` shell unless MEASURE_ANY_STATUS is non-empty.
measure() {
  local name=$1; shift
  local best_wall="" best_cpu="" max_rss=0
  for ((r = 0; r < REPS; r++)); do
    /usr/bin/time -f "%e %U %S %M" -o "$TMP/$name.time" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
      [ -n "${MEASURE_ANY_STATUS:-}" ]
    read -r wall user sys rss <"$TMP/$name.time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')
    if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN{exit !(a<b)}'; then best_wall=$wall; best_cpu=$cpu; fi
    [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  done
  echo "$best_wall $best_cpu $max_rss"
}
