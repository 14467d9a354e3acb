#!/usr/bin/env bash
# Chooses among settings by cross-validation over the training programs (docs/tools.md
# "Cross-validation runs", issue 46): each setting trains K runs, run k on every fold of the
# training file but k and validated on fold k (data.cv_folds / data.cv_fold), and is scored by the
# mean over its K runs of the held-out fold's metrics at each run's best epoch. The validation
# split is not read; evaluate the chosen setting on it afterwards, once.
#
# Usage: scripts/cv_select.sh OUT_DIR "NAME: key=value ..." ["NAME2: key=value ..." ...]
#   e.g. scripts/cv_select.sh runs/cv "defaults:" "lr3e-4: training.lr=0.0003"
# Environment (defaults in brackets): FOLDS [5], TRAIN [../shared/data/looperset-sample/train.jsonl.gz],
# THREADS [1], BIN [build/bin], EXTRA [""] overrides for every run.
# Finished runs (a done_<run> marker in OUT_DIR) are skipped, so the script can be re-run to
# resume; the table (OUT_DIR/cv_table.md) is written by scripts/cv_table.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)); then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
OUT=$1
shift
FOLDS=${FOLDS:-5}
TRAIN=${TRAIN:-../shared/data/looperset-sample/train.jsonl.gz}
THREADS=${THREADS:-1}
BIN=${BIN:-build/bin}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"
for setting in "$@"; do
  name=${setting%%:*}
  overrides=${setting#*:}
  if [[ "$setting" != *:* || ! "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    echo "cv_select: '$setting': expected NAME: key=value ... (NAME of letters, digits, . _ -)" >&2
    exit 2
  fi
  for ((k = 1; k <= FOLDS; k++)); do
    run="${name}_cv${k}of${FOLDS}"
    [ -f "$OUT/done_$run" ] && continue
    echo "== $run"
    # shellcheck disable=SC2086
    "$BIN/lcm-train" data.train_file="$TRAIN" data.cv_folds="$FOLDS" data.cv_fold="$k" \
      experiment.base_path="$OUT" experiment.name="$run" experiment.overwrite=true \
      training.threads="$THREADS" training.calibrate=false ${EXTRA:-} $overrides -q | tail -n 1
    touch "$OUT/done_$run"
  done
done
python3 scripts/cv_table.py "$OUT" | tee "$OUT/cv_table.md"
