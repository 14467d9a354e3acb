#!/usr/bin/env bash
# Regenerates the committed seed corpus of the fuzz targets (fuzz/corpus/<target>/) from committed
# data only: a few lines of the lcm-synth slice, hand-made edge cases derived from its smallest
# line, a few small safetensors fixtures and a tiny .lcmb cache written by lcm-prepare. Not run by
# CI (the corpus is committed); rerun it when the record layout or the cache format changes, so the
# seeds reach past the version checks. Needs lcm-prepare (default build/bin; LCM_BIN=<folder>).
# Replaces what it writes and leaves other corpus files (e.g. promoted findings) alone.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LCM_BIN:-build/bin}
REC=fuzz/corpus/fuzz_record
FILES=fuzz/corpus/fuzz_files
mkdir -p "$REC" "$FILES"
work=$(mktemp -d "${TMPDIR:-/tmp}/lcm-seeds-XXXXXX")
trap 'rm -rf "$work"' EXIT
zcat tests/data/synth_train.jsonl.gz >"$work/train.jsonl"

# Eight lines of the synth slice of spread sizes (9-24 KB; one computation up to several).
for n in 7 72 78 85 95 104 107 159; do
  sed -n "${n}p" "$work/train.jsonl" >"$REC/synth-line-$n.jsonl"
done
small=$(sed -n 107p "$work/train.jsonl")  # the smallest line: two loops, one computation

# Hand-made edge cases (each one line, except where the layout itself is the case).
printf '%s\n' "$small" | gzip -9n >"$REC/gzip-line.jsonl.gz"
deep=$(printf '[%.0s' $(seq 20000))$(printf ']%.0s' $(seq 20000))
printf '{"program_name":"deep","program_annotation":{"iterators":%s},"schedules_list":[{}]}\n' \
  "$deep" >"$REC/deep-nesting.jsonl"
printf '{"deep":\n{"program_name":"deep","program_annotation":%s}}\n' "$deep" \
  >"$REC/deep-nesting-legacy.json"
printf '%s\n' "$small" | sed 's/^{"program_name":"[^"]*",/{"program_name":"dup_a","program_name":"dup_b",/; s/"computations":{/"computations":{"comp00":{"absolute_order":2},/' \
  >"$REC/duplicate-keys.jsonl"
printf '%s\n' "$small" | sed 's/"parent_iterator":"i0"/"parent_iterator":"i1"/; s/"child_iterators":\[\]/"child_iterators":["i1"]/' \
  >"$REC/iterator-own-parent.jsonl"
printf '%s\n' "$small" | sed 's/"initial_execution_time":[^,]*/"initial_execution_time":1e308/' \
  >"$REC/initial-time-1e308.jsonl"
printf '%s\n' "$small" | sed 's/^{"program_name":"[^"]*"/{"program_name":"bad\xff\xfeutf8"/' \
  >"$REC/invalid-utf8-name.jsonl"
printf '%s\n' "$small" | sed 's/^{"program_name":"[^"]*"/{"program_name":"nul\\u0000name"/; s/comp00/comp\\u000000/g' \
  >"$REC/nul-in-names.jsonl"
# The schedule forms (docs/data-format.md "Schedule forms"): the same line with its dicts replaced
# by a typed transformations_list, by its sched_str alone, and split one schedule per line.
printf '%s\n' "$small" >"$work/small.jsonl"
python3 - "$REC" "$work/small.jsonl" <<'PY'
import json, sys
rec = json.loads(open(sys.argv[2]).readline())
comps = list(rec["program_annotation"]["computations"])
typed, only_str = json.loads(json.dumps(rec)), json.loads(json.dumps(rec))
for s in typed["schedules_list"]:
    for c in comps:
        s.pop(c, None)
    s["transformations_list"] = [
        {"type": "interchange", "loop_levels": [0, 1], "computations": comps[:1]},
        {"type": "tiling", "loop_levels": [0, 1], "parameters": [32, 16]},
        {"type": "unrolling", "loop_levels": [1], "parameters": [4]},
        {"type": "parallelization", "loop_levels": [0]}]
    s["execution_times"] = {"m1": s.get("execution_times")}
for s in only_str["schedules_list"]:
    for c in comps:
        s.pop(c, None)
out = sys.argv[1]
with open(out + "/form-typed.jsonl", "w") as f:
    f.write(json.dumps(typed, separators=(",", ":")) + "\n")
with open(out + "/form-sched-str.jsonl", "w") as f:
    f.write(json.dumps(only_str, separators=(",", ":")) + "\n")
with open(out + "/form-one-schedule-per-line.jsonl", "w") as f:
    for i, s in enumerate(rec["schedules_list"]):
        line = {k: v for k, v in rec.items() if k != "schedules_list"}
        line["schedule"] = s
        line["schedule_index"] = i
        f.write(json.dumps(line, separators=(",", ":")) + "\n")
PY

# Loader byte 0: safetensors fixtures of a few KB (with and without metadata, several dtypes).
for f in safetensors_layout golden_mape optim_torch_f32 golden_linear; do
  { printf '\x00'; cat "tests/fixtures/$f.safetensors"; } >"$FILES/safetensors-$f.bin"
done

# Loader bytes 1 and 2: a tiny cache of three one-computation programs in batches of 4 (every
# footprint group kept), as lcm-prepare writes it. Its key holds the temp source's path and mtime,
# so the bytes differ on every run; fuzz_files takes the expected key from the file itself.
for n in 107 127 60; do sed -n "${n}p" "$work/train.jsonl"; done >"$work/tiny.jsonl"
OMP_WAIT_POLICY=passive "$BIN/lcm-prepare" -q data.train_file="$work/tiny.jsonl" \
  data.valid_file= experiment.base_path="$work/run" data.batch_size=4 \
  data.min_functions_per_footprint=0 data.nb_workers=1 >/dev/null
cache="$work/run/cache/train.lcmb"
{ printf '\x01'; cat "$cache"; } >"$FILES/lcmb-tiny-as-is.bin"
{ printf '\x02'; cat "$cache"; } >"$FILES/lcmb-tiny-crc-fixed.bin"
du -sh "$REC" "$FILES"
