#!/usr/bin/env bash
# The main job on the embedded default (the README's first command): set up, build, synthesize a
# training and a validation slice with lcm-synth, train the cost model on it with lcm-train
# (prepares both splits first) and evaluate the best checkpoint with lcm-eval.
# Extra arguments are config overrides for lcm-train (e.g. training.max_epochs=50).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${LCM_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS" --target lcm-synth lcm-prepare lcm-train lcm-eval lcm-predict
OUT=${LCM_RUN_DIR:-runs/default}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
build/bin/lcm-synth --programs 240 --seed 1 --out "$OUT/synth_train.jsonl.gz"
build/bin/lcm-synth --programs 60 --seed 2 --out "$OUT/synth_valid.jsonl.gz"
COMMON=(experiment.name=synth experiment.base_path="$OUT"
        data.train_file="$OUT/synth_train.jsonl.gz" data.valid_file="$OUT/synth_valid.jsonl.gz")
build/bin/lcm-train --config configs/default.yaml "${COMMON[@]}" training.max_epochs=10 "$@"
build/bin/lcm-eval --config configs/default.yaml "${COMMON[@]}" \
  eval.weights_path="$OUT/weights/best_model_synth.safetensors"
echo "run_default: outputs in $OUT (weights/, log_synth.csv, loss_synth.svg, eval_synth.*)"
