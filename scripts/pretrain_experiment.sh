#!/usr/bin/env bash
# The data-efficiency experiment (docs/model-spec.md §8, Liu & Baghdadi CC 2025): pre-train both
# encoders on every sample program (train + valid, labels unused) plus lcm-synth programs, then train
# the cost model on 10/25/50/100 % of the training programs without and with each encoder (same
# epochs and seeds), evaluate each on valid.jsonl.gz and tabulate (scripts/pretrain_table.py).
#
# Usage: scripts/pretrain_experiment.sh [OUT_DIR]   (default runs/pretrain_experiment)
# Environment (defaults in brackets): EPOCHS [30] cost-model epochs, FT_EPOCH [EPOCHS/2] first
# fine-tuning epoch, SEEDS ["1"] training seeds, FRACTIONS ["10 25 50 100"], ENCODERS ["none
# access_matrix comp_vector"], SYNTH_PROGRAMS [1000], AM_EPOCHS [30], CV_EPOCHS [5], CV_SAMPLES
# [20000] comp-vector samples per pre-training epoch (the footprint-group rule is off:
# data.min_functions_per_footprint=0, so that a subset's programs are all used), THREADS [1], DATA [../shared/data/looperset-sample],
# PRESET [reference] the cost model's settings (reference = the README table's MAPE / raw inputs;
# none = the committed defaults, input scaling on: the encoders' columns stay raw), AM_WEIGHTS [""]
# an access-matrix autoencoder to use instead of pre-training one (e.g. the published
# ../shared/data/pretrained/access_matrix_autoencoder_published.safetensors), BIN [build/bin],
# EXTRA [""] overrides for every cost-model run and its evaluation (e.g.
# training.early_stop_patience=0: every run trains EPOCHS epochs, so that a run without an encoder
# is not stopped at an early noisy peak while the encoder runs wait for their fine-tuning epochs).
# Finished runs (eval_<name>.json present) are skipped, so the script can be re-run to resume.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/pretrain_experiment}
DATA=${DATA:-../shared/data/looperset-sample}
EPOCHS=${EPOCHS:-30}
FT_EPOCH=${FT_EPOCH:-$((EPOCHS / 2))}
SEEDS=${SEEDS:-1}
FRACTIONS=${FRACTIONS:-10 25 50 100}
ENCODERS=${ENCODERS:-none access_matrix comp_vector}
THREADS=${THREADS:-1}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
BIN=${BIN:-build/bin}
PRESET=${PRESET:-reference}
AM=${AM_WEIGHTS:-$OUT/pretrain/weights/best_autoencoder_am.safetensors}
mkdir -p "$OUT/data"

# 1. unlabeled corpus: the sample's programs + synthetic programs (docs/synth.md distribution)
# (not needed when no encoder is pre-trained here)
NEED_PRETRAIN=1
[[ -n "${AM_WEIGHTS:-}" && " $ENCODERS " != *" comp_vector "* ]] && NEED_PRETRAIN=0
[ "$NEED_PRETRAIN" = 0 ] || [ -f "$OUT/data/synth.jsonl.gz" ] ||
  "$BIN/lcm-synth" --programs "${SYNTH_PROGRAMS:-1000}" --seed 7 --structures 0 --threads "$THREADS" \
    --out "$OUT/data/synth.jsonl.gz"
PRE_FILES="[$DATA/train.jsonl.gz,$DATA/valid.jsonl.gz,$OUT/data/synth.jsonl.gz]"

# 2. pre-training (best validation checkpoint of each kind)
PRE=(training.threads="$THREADS" training.seed=1 pretrain.files="$PRE_FILES" experiment.base_path="$OUT/pretrain" -q)
[ -n "${AM_WEIGHTS:-}" ] || [ -f "$OUT/pretrain/weights/best_autoencoder_am.safetensors" ] ||
  "$BIN/lcm-pretrain" "${PRE[@]}" pretrain.kind=access_matrix experiment.name=am \
    pretrain.epochs="${AM_EPOCHS:-30}" pretrain.lr=0.001
[[ " $ENCODERS " != *" comp_vector "* ]] || [ -f "$OUT/pretrain/weights/best_autoencoder_cv.safetensors" ] ||
  "$BIN/lcm-pretrain" "${PRE[@]}" pretrain.kind=comp_vector experiment.name=cv \
    pretrain.epochs="${CV_EPOCHS:-5}" pretrain.max_samples="${CV_SAMPLES:-20000}" pretrain.lr=0.001

# 3. training subsets: the first 10/25/50/100 % of the training programs (file order)
N=$(zcat "$DATA/train.jsonl.gz" | wc -l)
for f in $FRACTIONS; do
  sub="$OUT/data/train_$f.jsonl.gz"
  # (zcat gets SIGPIPE when head stops reading: not an error here)
  [ -f "$sub" ] || { zcat "$DATA/train.jsonl.gz" || true; } | head -n $(((N * f + 99) / 100)) | gzip -1 > "$sub"
done

# 4. cost-model runs + evaluation
for seed in $SEEDS; do
  for f in $FRACTIONS; do
    for enc in $ENCODERS; do
      name="f${f}_${enc}_s${seed}"
      [ -f "$OUT/runs/eval_$name.json" ] && continue
      ENC=(model.encoder="$enc")
      case $enc in
        access_matrix) ENC+=(model.encoder_weights="$AM") ;;
        comp_vector) ENC+=(model.encoder_weights="$OUT/pretrain/weights/best_autoencoder_cv.safetensors") ;;
      esac
      COMMON=(experiment.name="$name" experiment.base_path="$OUT/runs" training.threads="$THREADS"
              data.train_file="$OUT/data/train_$f.jsonl.gz" data.valid_file="$DATA/valid.jsonl.gz"
              data.min_functions_per_footprint=0  # every program of the subset is used
              model.preset="$PRESET")            # reference: as run for the README table (MAPE, raw inputs)
      echo "== $name"
      # shellcheck disable=SC2086
      "$BIN/lcm-train" "${COMMON[@]}" "${ENC[@]}" ${EXTRA:-} training.seed="$seed" training.max_epochs="$EPOCHS" \
        training.fine_tune_epoch="$FT_EPOCH" -q | tail -n 1
      # shellcheck disable=SC2086
      "$BIN/lcm-eval" "${COMMON[@]}" ${EXTRA:-} eval.weights_path="$OUT/runs/weights/best_model_$name.safetensors" > /dev/null
    done
  done
done

# 5. table (markdown) and plot (SVG)
python3 scripts/pretrain_table.py "$OUT/runs" | tee "$OUT/results.md"
echo "pretrain_experiment: table $OUT/results.md, plot $OUT/runs/pretrain_experiment.svg"
