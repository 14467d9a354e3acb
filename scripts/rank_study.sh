#!/usr/bin/env bash
# The ranking study (docs/accuracy.md): trains every setting below for each seed on
# data.train_file, evaluates the best checkpoint with lcm-eval on data.valid_file (the only split
# used for decisions), then tabulates mean ± spread with scripts/rank_study_table.py.
# Usage: scripts/rank_study.sh [OUT_DIR] ; env: LCM_BIN (tool folder, default build/bin),
# STUDY_EPOCHS (15), STUDY_SEEDS ("1 2 3"), STUDY_SETTINGS (names, default all, in table order),
# STUDY_EXTRA (extra overrides for every run, e.g. training.log_train_metrics=true), STUDY_CONFIG
# (the defaults file, default configs/default.yaml: give a copy that matches LCM_BIN's binaries when
# the checkout moves on during a study).
# Settings in SETTING are layered on model.preset=reference; those in ON_DEFAULTS on the plain
# committed defaults (configs/default.yaml), e.g. the regularisation study:
#   STUDY_EPOCHS=30 STUDY_SETTINGS="defaults dropout_0.2 wd_0.1" scripts/rank_study.sh runs/reg_study
# Runs one training at a time with 1 thread (the machine is shared); finished runs are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rank_study}
BIN=${LCM_BIN:-build/bin}
EPOCHS=${STUDY_EPOCHS:-15}
SEEDS=${STUDY_SEEDS:-"1 2 3"}
CONFIG=${STUDY_CONFIG:-configs/default.yaml}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"

# name → overrides on top of model.preset=reference (the faithful behaviour)
declare -A SETTING=(
  [reference]=""
  [scaling]="model.input_scaling=log_standardize"
  [log_mse]="training.loss=log_mse"
  [pairwise]="training.loss=pairwise"
  [optim]="training.lr_schedule=warmup_cosine training.clip_grad_norm=1 training.early_stop_patience=5"
  [combined]="model.input_scaling=log_standardize training.loss=log_mse+pairwise training.lr_schedule=warmup_cosine training.clip_grad_norm=1 training.early_stop_patience=5 training.select_metric=spearman"
  # ablations of the combination (one part removed)
  [combined_no_pairwise]="model.input_scaling=log_standardize training.loss=log_mse training.lr_schedule=warmup_cosine training.clip_grad_norm=1 training.early_stop_patience=5 training.select_metric=spearman"
  [combined_no_scaling]="training.loss=log_mse+pairwise training.lr_schedule=warmup_cosine training.clip_grad_norm=1 training.early_stop_patience=5 training.select_metric=spearman"
)
# name → overrides on top of the plain defaults (no preset): the regularisation study
declare -A ON_DEFAULTS=(
  [defaults]=""
  # the round-2 defaults: log-MSE + pairwise, the calibration map fitted in-sample over datapoints
  [round2]="training.loss=log_mse+pairwise training.calibration_weighting=datapoint"
  # the calibration map fitted on out-of-fold predictions of 3 fold runs (3x the training time)
  [crossfit]="training.calibration_folds=3"
  # the reference's batching on the defaults: one footprint per batch, small groups dropped
  [per_footprint]="data.batching=per_footprint data.min_functions_per_footprint=2"
  [dropout_0.2]="model.drops=0.2,0.2,0.2,0.2,0.2"
  [wd_0.1]="training.weight_decay=0.1"
  [rank_3]="training.rank_weight=3"
  [rank_10]="training.rank_weight=10"
  # prediction relative to the program's untransformed schedule (identity = 1x exactly)
  [identity]="model.relative_to_identity=true"
  # the recipe of configs/pact25.yaml, as overrides
  [pact25]="training.loss=log_huber+pairwise training.huber_delta=0.5 training.rank_weight=0.05 training.lr=0.0003 training.lr_schedule=reduce_on_plateau training.plateau_factor=0.5 training.plateau_patience=2 training.clip_grad_norm=1.0"
  # listwise ranking terms beside log-MSE
  [listnet]="training.loss=log_mse+listnet"
  [lambdarank]="training.loss=log_mse+lambdarank"
  [identity_listnet]="model.relative_to_identity=true training.loss=log_mse+listnet"
  [identity_lambdarank]="model.relative_to_identity=true training.loss=log_mse+lambdarank"
  # capacity: LSTM / expression embeddings 100 -> 256
  [wide]="model.lstm_embedding_size=256 model.expr_embed_size=256"
  # capacity with regularisation: the wide model with dropout 0.2
  [wide_dropout_0.2]="model.lstm_embedding_size=256 model.expr_embed_size=256 model.drops=0.2,0.2,0.2,0.2,0.2"
  # losses robust to label noise (repeated measurements disagree by > 2x for 1 in 5 schedules)
  [huber]="training.loss=log_huber+pairwise"
  [log_l1]="training.loss=log_l1+pairwise"
  # optimisation: batch size (more, noisier steps per epoch) and learning rate
  [batch_128]="data.batch_size=128"
  [batch_256]="data.batch_size=256"
  [batch_1024]="data.batch_size=1024"
  [batch_128_lr5e-4]="data.batch_size=128 training.lr=0.0005"
  [lr_2e-3]="training.lr=0.002"
  [lr_5e-4]="training.lr=0.0005"
  # the calibration map off (reference behaviour of the reported speedups)
  [no_calibration]="training.calibrate=false"
)
ORDER=${STUDY_SETTINGS:-"combined reference scaling log_mse pairwise optim"}

for seed in $SEEDS; do
  for name in $ORDER; do
    exp="${name}_s${seed}"
    if [[ -f "$OUT/eval_${exp}.json" ]]; then echo "skip $exp (done)"; continue; fi
    if [[ -v "ON_DEFAULTS[$name]" ]]; then base=""; over=${ON_DEFAULTS[$name]}
    elif [[ -v "SETTING[$name]" ]]; then base="model.preset=reference"; over=${SETTING[$name]}
    else echo "rank_study.sh: unknown setting '$name'" >&2; exit 2; fi
    echo "=== $exp: ${base:-defaults} $over ($(date +%H:%M:%S), $(uptime | sed 's/.*load/load/'))"
    start=$(date +%s)
    # shellcheck disable=SC2086
    "$BIN/lcm-train" --config "$CONFIG" $base $over \
      experiment.base_path="$OUT" experiment.name="$exp" training.seed="$seed" \
      training.max_epochs="$EPOCHS" training.threads=1 data.nb_workers=1 ${STUDY_EXTRA:-} -q 2>"$OUT/train_${exp}.err" \
      | tee "$OUT/train_${exp}.out" | tail -2
    "$BIN/lcm-eval" --config "$CONFIG" experiment.base_path="$OUT" experiment.name="$exp" \
      eval.weights_path="$OUT/weights/best_model_${exp}.safetensors" training.threads=1 data.nb_workers=1 ${STUDY_EXTRA:-} -q \
      2>>"$OUT/train_${exp}.err" > "$OUT/eval_${exp}.out"
    echo "$exp: $(( $(date +%s) - start )) s wall (train + eval), end $(date +%H:%M:%S), $(uptime | sed 's/.*load/load/')" \
      | tee -a "$OUT/wall_times.txt"
    grep -E "Spearman|^nDCG |top-1" "$OUT/eval_${exp}.out" || true
  done
done
python3 scripts/rank_study_table.py "$OUT" | tee "$OUT/study_table.md"
