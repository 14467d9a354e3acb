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
