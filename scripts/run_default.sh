#!/usr/bin/env bash
# The main job on the embedded default (the README's first command): set up, build, train the cost
# model with lcm-train on the default data (the committed lcm-synth slice tests/data/synth_{train,
# valid}.jsonl.gz, see tests/data/README.md; lcm-train prepares both splits first) and evaluate the
# best checkpoint with lcm-eval.
# Extra arguments are config overrides for lcm-train (e.g. training.max_epochs=50).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${LCM_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS" --target lcm-prepare lcm-train lcm-eval lcm-predict
OUT=${LCM_RUN_DIR:-runs/default}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
COMMON=(experiment.name=synth experiment.base_path="$OUT")
build/bin/lcm-train --config configs/default.yaml "${COMMON[@]}" training.max_epochs=10 "$@"
build/bin/lcm-eval --config configs/default.yaml "${COMMON[@]}" \
  eval.weights_path="$OUT/weights/best_model_synth.safetensors"
echo "run_default: outputs in $OUT (weights/, log_synth.csv, loss_synth.svg, eval_synth.*)"
