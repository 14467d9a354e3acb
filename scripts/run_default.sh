#!/usr/bin/env bash
# The main job on the embedded default (the README's first command): set up, build, synthesize a
# small training and validation slice with lcm-synth and prepare both with lcm-prepare.
# (Training and evaluation join this script when lcm-train / lcm-eval land.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${LCM_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS" --target lcm-synth lcm-prepare
OUT=${LCM_RUN_DIR:-runs/default}
mkdir -p "$OUT"
build/bin/lcm-synth --programs 240 --seed 1 --out "$OUT/synth_train.jsonl.gz"
build/bin/lcm-synth --programs 60 --seed 2 --out "$OUT/synth_valid.jsonl.gz"
build/bin/lcm-prepare --config configs/default.yaml experiment.base_path="$OUT" \
  data.train_file="$OUT/synth_train.jsonl.gz" data.valid_file="$OUT/synth_valid.jsonl.gz" "$@"
