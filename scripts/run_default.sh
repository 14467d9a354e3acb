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
# training.max_epochs=10 unless the caller gives it (a key given twice is a config error)
EPOCHS=(training.max_epochs=10)
for a in "$@"; do
  case "$a" in training.max_epochs=* | --training.max_epochs=* | training.max_epochs) EPOCHS=() ;; esac
done
build/bin/lcm-train --config configs/default.yaml "${COMMON[@]}" "${EPOCHS[@]}" "$@"
build/bin/lcm-eval --config configs/default.yaml "${COMMON[@]}" \
  eval.weights_path="$OUT/weights/best_model_synth.safetensors"
echo "run_default: outputs in $OUT (weights/, log_synth.csv, loss_synth.svg, eval_synth.*)"
