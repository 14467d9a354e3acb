// The run layer of lcm-train, above the trainer that fits one model (train/trainer.hpp): a
// training run's phases in order (check → fit → calibrate, in-sample or cross-fitted on the
// out-of-fold predictions of fold runs), ensembles of members, and lcm-train's modes that train
// no model of their own (--ensemble-of, --calibrate-only). Nothing else of train/ includes it.
#pragma once
#include <string>

#include "config/config.hpp"
#include "model/calibration.hpp"
#include "train/crossfit.hpp"
#include "train/trainer.hpp"

namespace lcm::train {

/// Trains the cost model under `c` as lcm-train does: fit_model() (with training.calibrate and
/// training.calibration_folds=0 it fits the in-sample map), then, with training.calibrate and
/// training.calibration_folds=K, the K fold runs (out_of_fold_predictions) and the cross-fitted
/// map stored in the best checkpoint; a resumed finished run whose map was fitted otherwise gets
/// it refitted. With K folds an empty fold is refused before training (one process).
/// Returns fit_model()'s result with the exit code of the fold runs when one did not finish (130).
/// Throws as fit_model(), check_fold_sizes and out_of_fold_predictions.
TrainResult train(const config::Config& c, const TrainOptions& o = {});

/// Trains the K = training.calibration_folds fold models of `c` and predicts with each the
/// programs it did not see: the kept programs of data.train_file are cut into K folds by
/// data::program_fold (a hash of the name); fold run k is the ordinary run fold_run_name() under
/// experiment.base_path with c's settings but training.calibrate, training.ensemble and
/// training.calibration_folds off, trained on the programs of every other fold (its training
/// split cached as train_without_fold<k>of<K>, its checkpoints stamped lcm.train_folds), and
/// predicts fold k (cached as train_fold<k>of<K>) and, for its score_shift(), its own training
/// split. With o.resume a fold run of this file and fold is resumed (a finished one is reused);
/// otherwise, or when it trained on other programs, it trains from the start. An experiment of
/// that name that is not a fold run is never overwritten: ConfigError. Under MPI every rank trains
/// the fold runs and rank 0 alone predicts. Throws config::ConfigError when K < 2 or a fold is
/// empty (check_fold_sizes), and what fit_model() and prepare_split throw.
OutOfFold out_of_fold_predictions(const config::Config& c, const TrainOptions& o);

/// lcm-train --calibrate-only: fits the map of checkpoint `path` (a plain or ensemble checkpoint,
/// loaded as Predictor loads it, on training.device, without its current map) with
/// training.calibration_weighting and stores it in the checkpoint; `o` are the fold runs' options
/// (o.quiet also silences preparation progress). The map is fitted on the
/// checkpoint's own predictions of data.train_file (prepared as lcm-train prepares its training
/// split: footprint rule, cache), or, with training.calibration_folds = K, on the out-of-fold
/// predictions of K fold models trained with c's settings (out_of_fold_predictions: single
/// models, also for an ensemble checkpoint). A fold run that does not finish (a stop request)
/// leaves the checkpoint as it was, sets *exit_code (when given) to its exit code (130) and
/// returns kind none with fit_points 0; otherwise *exit_code is 0. Returns the map. Throws
/// config::ConfigError for an empty data.train_file, std::runtime_error for a missing or foreign
/// checkpoint, std::invalid_argument when nothing can be fitted, and the errors of prepare_split
/// and fit_model().
lcm::model::Calibration calibrate_checkpoint(const config::Config& c, const std::string& path,
                                             const TrainOptions& o, int* exit_code = nullptr);

/// lcm-train with training.ensemble = K > 1: trains K members as runs "<name>_m<k>" (k = 1..K,
/// training.seed + k − 1; each an ordinary run under experiment.base_path, resumable), combines
/// their best checkpoints into the run's best_model_<name>.safetensors and, with
/// training.calibrate, fits the calibration map of the averaged scores on the training split.
/// `pause_at` reaches the members' TestHooks (no other hook does). Returns the exit code of the
/// first member that did not finish (130 after a stop request), else 0. Throws as fit_model()
/// and combine_ensemble.
int train_ensemble(const config::Config& c, bool resume, bool quiet,
                   const std::string& pause_at = "");

/// Cross-validation (data.cv_folds = K >= 2, data.cv_fold = k): makes `c` train on data.train_file
/// without its fold k and validate on that fold (data.train_folds / data.valid_folds, and
/// data.valid_file = data.train_file), and returns the note lcm-train prints; "" and `c`
/// unchanged when data.cv_folds = 0. Throws config::ConfigError for data.cv_folds = 1, data.cv_fold
/// > data.cv_folds, or training.calibration_folds > 0 with it (folds within folds).
std::string apply_cross_validation(config::Config& c);

/// lcm-train's training mode, after the tool's checks of its paths: checks training.init_weights
/// and adopts its feature settings (check_init_weights, notes on stderr), applies
/// apply_cross_validation, checks that the model,
/// Adam state and one batch fit (check_training_memory), installs the stop handlers (Ctrl-C or
/// SIGTERM then stops after the current step and saves `last`), and trains: train_ensemble
/// with training.ensemble > 1 (one process only: ConfigError under MPI), else train(). Returns
/// the exit code (0, or 130 after a stop request).
int run_training(const config::Config& c, const TrainOptions& o);

/// lcm-train --ensemble-of LIST: combines the checkpoints of `members` (comma-separated; spaces
/// and tabs around an entry are not part of it) into this experiment's best checkpoint as a new
/// run of it (claim_experiment; the experiment locked meanwhile) and, with training.calibrate,
/// calibrates it (calibrate_checkpoint with `o`). Prints what it wrote. Returns 0, or the exit
/// code of a fold run that did not finish. Throws config::ConfigError under MPI, for an empty
/// list or entry, a member named twice (under any spelling), more than 64 members, or a member
/// that is the output itself; and what combine_ensemble and calibrate_checkpoint throw.
int write_ensemble_of(const config::Config& c, const std::string& members, const TrainOptions& o);

/// lcm-train --calibrate-only: calibrate_checkpoint() of eval.weights_path (empty: this
/// experiment's best checkpoint; through a link, the file it reaches), holding the lock of the
/// experiment the checkpoint belongs to (<base>/weights/{best,last}_model_<name>.safetensors is
/// experiment <name> of <base>). Prints the map's summary. Returns 0, or the exit code of a fold
/// run that did not finish. Throws config::ConfigError under MPI or when the checkpoint or its
/// folder is not writable (checked before any work), std::runtime_error "weights file not found:
/// <path>", and what calibrate_checkpoint throws.
int calibrate_only(const config::Config& c, const TrainOptions& o);

}  // namespace lcm::train
