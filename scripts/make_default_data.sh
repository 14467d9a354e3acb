#!/usr/bin/env bash
# Regenerates the committed default data slice (tests/data/synth_{train,valid}.jsonl.gz, the
# data.train_file / data.valid_file defaults) with the repository's own lcm-synth. The output is
# byte-identical to the committed files for the same lcm-synth, zlib and libm (docs/synth.md,
# "Determinism"); `git diff --stat tests/data` after a run shows whether it still is.
# Usage: scripts/make_default_data.sh [BIN_DIR]   (default build/bin; build lcm-synth first:
#        cmake --build build --target lcm-synth)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/bin}
SYNTH="$BIN/lcm-synth"
if [ ! -x "$SYNTH" ]; then
  echo "make_default_data: $SYNTH not found; build it first" \
       "(cmake --build build --target lcm-synth)" >&2
  exit 1
fi
# Training and validation differ in --seed, so no program name (synth_<seed>_<index>) is shared;
# both draw from the same pool of 32 loop-tree skeletons, so validation footprints occur in
# training. Level 9: the smallest gzip lcm-synth writes (its header has mtime 0, so the bytes
# depend only on the options).
COMMON=(--schedules-per-program 12 --structures 32 --level 9 --threads 2)
"$SYNTH" --programs 160 --seed 1 "${COMMON[@]}" --out tests/data/synth_train.jsonl.gz
"$SYNTH" --programs 40 --seed 2 "${COMMON[@]}" --out tests/data/synth_valid.jsonl.gz
