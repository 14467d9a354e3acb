#!/usr/bin/env bash
# The data-efficiency experiment (docs/model-spec.md §8, Liu & Baghdadi CC 2025; docs/accuracy.md):
# pre-train, then train the cost model on 10/25/50/100 % of the training programs without and
# with each pre-trained start (same epochs and seeds), evaluate each on valid.jsonl.gz and
# tabulate (scripts/pretrain_table.py). The starts ("encoders"):
#   none           random initialisation (the baseline and the control of every start)
#   access_matrix  the access-matrix autoencoder as model.encoder (pre-trained here, or AM_WEIGHTS)
#   comp_vector    the computation-vector autoencoder as model.encoder (pre-trained here)
#   comp_vector_masked, comp_vector_contrastive
#                  the same encoder pre-trained with pretrain.objective=masked / contrastive
#                  (masked-feature reconstruction; InfoNCE between two masked views)
#   synth          supervised pre-training of the whole model on lcm-synth programs and their
#                  analytic speedups (docs/synth.md §3), then training.init_weights: the same
#                  architecture as none, so none is its random-initialisation control
# The autoencoders pre-train on every sample program (train + valid, labels unused) plus
# lcm-synth programs; the synth model trains on lcm-synth programs only and selects its
# checkpoint on other lcm-synth programs (no real label is used before the cost-model runs).
#
# Usage: scripts/pretrain_experiment.sh [OUT_DIR]   (default runs/pretrain_experiment)
# Environment (defaults in brackets): EPOCHS [30] cost-model epochs (at 100 %), STEPS_MATCHED [0]
# 1: a fraction f trains EPOCHS·100/f epochs, with early stopping's patience and first epoch
# scaled alike, so that every fraction takes the optimizer steps of 100 % (docs/accuracy.md
# round 5), FT_EPOCH [EPOCHS/2] first fine-tuning epoch of an encoder, SEEDS ["1"] training
# seeds, FRACTIONS ["10 25 50 100"], ENCODERS ["none access_matrix comp_vector"],
# SYNTH_PROGRAMS [1000], AM_EPOCHS [30], CV_EPOCHS [5], CV_SAMPLES [20000] comp-vector samples per
# pre-training epoch, SUP_PROGRAMS [4000] SUP_SCHEDULES [32] SUP_EPOCHS [8] the synth start's
# training programs, schedules per program and epochs (its selection split: 400 other programs),
# SUP_EXTRA [""] overrides for the synth start's training, INIT_EXTRA [""] overrides for the runs
# that start from it (e.g. training.lr=0.0003 training.init_scaling=refit), THREADS [1],
# DATA [../shared/data/looperset-sample], PRESET [reference] the cost model's settings (reference =
# the README table's MAPE / raw inputs; none = the committed defaults, input scaling on: the
# encoders' columns stay raw), AM_WEIGHTS [""] an access-matrix autoencoder to use instead of
# pre-training one (e.g. the published
# ../shared/data/pretrained/access_matrix_autoencoder_published.safetensors), BIN [build/bin],
# EXTRA [""] overrides for every cost-model run and its evaluation (e.g.
# training.early_stop_patience=0: every run trains EPOCHS epochs, so that a run without an encoder
# is not stopped at an early noisy peak while the encoder runs wait for their fine-tuning epochs).
# (data.min_functions_per_footprint=0 for every run, so that a subset's programs are all used.)
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
# (only for an autoencoder pre-trained here)
has() { [[ " $ENCODERS " == *" $1 "* ]]; }
NEED_PRETRAIN=0
{ has access_matrix && [ -z "${AM_WEIGHTS:-}" ]; } && NEED_PRETRAIN=1
for e in comp_vector comp_vector_masked comp_vector_contrastive; do has $e && NEED_PRETRAIN=1; done
[ "$NEED_PRETRAIN" = 0 ] || [ -f "$OUT/data/synth.jsonl.gz" ] ||
  "$BIN/lcm-synth" --programs "${SYNTH_PROGRAMS:-1000}" --seed 7 --structures 0 --threads "$THREADS" \
    --out "$OUT/data/synth.jsonl.gz"
PRE_FILES="[$DATA/train.jsonl.gz,$DATA/valid.jsonl.gz,$OUT/data/synth.jsonl.gz]"

# 2. pre-training (best validation checkpoint of each kind)
PRE=(training.threads="$THREADS" training.seed=1 pretrain.files="$PRE_FILES" experiment.base_path="$OUT/pretrain" -q)
{ has access_matrix && [ -z "${AM_WEIGHTS:-}" ]; } && [ ! -f "$OUT/pretrain/weights/best_autoencoder_am.safetensors" ] &&
  "$BIN/lcm-pretrain" "${PRE[@]}" pretrain.kind=access_matrix experiment.name=am \
    pretrain.epochs="${AM_EPOCHS:-30}" pretrain.lr=0.001
has comp_vector && [ ! -f "$OUT/pretrain/weights/best_autoencoder_cv.safetensors" ] &&
  "$BIN/lcm-pretrain" "${PRE[@]}" pretrain.kind=comp_vector experiment.name=cv \
    pretrain.epochs="${CV_EPOCHS:-5}" pretrain.max_samples="${CV_SAMPLES:-20000}" pretrain.lr=0.001
for obj in masked contrastive; do
  has comp_vector_$obj && [ ! -f "$OUT/pretrain/weights/best_autoencoder_cv_$obj.safetensors" ] &&
    "$BIN/lcm-pretrain" "${PRE[@]}" pretrain.kind=comp_vector pretrain.objective=$obj \
      experiment.name=cv_$obj pretrain.epochs="${CV_EPOCHS:-5}" \
      pretrain.max_samples="${CV_SAMPLES:-20000}" pretrain.lr=0.001
done
# the synth start: the cost model trained on lcm-synth programs (selected on other ones)
SUP="$OUT/pretrain/weights/best_model_synth_sup.safetensors"
if has synth && [ ! -f "$SUP" ]; then
  for split in train:"${SUP_PROGRAMS:-4000}":101 valid:400:102; do
    IFS=: read -r name n seed <<< "$split"
    [ -f "$OUT/data/synth_sup_$name.jsonl.gz" ] ||
      "$BIN/lcm-synth" --programs "$n" --schedules-per-program "${SUP_SCHEDULES:-32}" --seed "$seed" \
        --structures 0 --threads "$THREADS" --out "$OUT/data/synth_sup_$name.jsonl.gz"
  done
  # shellcheck disable=SC2086
  "$BIN/lcm-train" experiment.name=synth_sup experiment.base_path="$OUT/pretrain" training.threads="$THREADS" \
    data.train_file="$OUT/data/synth_sup_train.jsonl.gz" data.valid_file="$OUT/data/synth_sup_valid.jsonl.gz" \
    model.preset="$PRESET" training.seed=1 training.max_epochs="${SUP_EPOCHS:-8}" training.calibrate=false \
    ${SUP_EXTRA:-} -q | tail -n 1
fi

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
        comp_vector_masked | comp_vector_contrastive)
          ENC=(model.encoder=comp_vector
               model.encoder_weights="$OUT/pretrain/weights/best_autoencoder_cv_${enc#comp_vector_}.safetensors") ;;
        # shellcheck disable=SC2206
        synth) ENC=(model.encoder=none training.init_weights="$SUP" ${INIT_EXTRA:-}) ;;
      esac
      E=$EPOCHS STOP=()
      if [ "${STEPS_MATCHED:-0}" = 1 ]; then
        E=$((EPOCHS * 100 / f))
        STOP=(training.early_stop_patience=$((5 * 100 / f)) training.early_stop_from_epoch=$((10 * 100 / f)))
      fi
      COMMON=(experiment.name="$name" experiment.base_path="$OUT/runs" training.threads="$THREADS"
              data.train_file="$OUT/data/train_$f.jsonl.gz" data.valid_file="$DATA/valid.jsonl.gz"
              data.min_functions_per_footprint=0  # every program of the subset is used
              model.preset="$PRESET")            # reference: as run for the README table (MAPE, raw inputs)
      echo "== $name"
      # shellcheck disable=SC2086
      "$BIN/lcm-train" "${COMMON[@]}" "${STOP[@]}" "${ENC[@]}" ${EXTRA:-} training.seed="$seed" \
        training.max_epochs="$E" training.fine_tune_epoch="$FT_EPOCH" -q | tail -n 1
      # shellcheck disable=SC2086
      "$BIN/lcm-eval" "${COMMON[@]}" ${EXTRA:-} eval.weights_path="$OUT/runs/weights/best_model_$name.safetensors" > /dev/null
    done
  done
done

# 5. table (markdown) and plot (SVG)
python3 scripts/pretrain_table.py "$OUT/runs" | tee "$OUT/results.md"
echo "pretrain_experiment: table $OUT/results.md, plot $OUT/runs/pretrain_experiment.svg"
