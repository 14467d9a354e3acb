// Cross-fitted calibration (training.calibration_folds, docs/accuracy.md): the calibration map of
// a checkpoint fitted on out-of-fold predictions of the training split instead of the model's own
// in-sample predictions, which are over-confident (a model predicts the programs it was trained
// on far better than new ones, so a map fitted on them hardly corrects the new ones).
#pragma once
#include <vector>

#include "config/config.hpp"
#include "model/calibration.hpp"
#include "train/evaluate.hpp"
#include "train/trainer.hpp"

namespace lcm::train {

/// Out-of-fold predictions of data.train_file and how their fold runs ended.
struct OutOfFold {
  /// Every training program's predictions by the fold model that did not train on it (raw
  /// scores: no calibration map); Prediction::program numbers the programs across the folds
  /// (fold 1's first, then fold 2's, ...). Empty when a fold run did not finish.
  std::vector<Prediction> predictions;
  /// 0, or the exit code of the first fold run that did not finish (130 after a stop request).
  int exit_code = 0;
};

/// Trains the K = training.calibration_folds fold models of `c` and predicts with each the
/// programs it did not see: the programs of data.train_file are cut into K folds by
/// data::program_fold (a hash of the name); fold run k (k = 1..K) is the ordinary run
/// "<experiment.name>_fold<k>" under experiment.base_path with c's settings but
/// training.calibrate, training.ensemble and training.calibration_folds off, trained on the
/// programs of every other fold (its training split cached as train_without_fold<k>of<K>), and
/// predicts fold k (cached as train_fold<k>of<K>). With o.resume an existing fold run is resumed
/// (a finished one is reused); otherwise every fold run trains from the start. Under MPI every rank
/// trains the fold runs and rank 0 alone predicts (the others return no predictions). Throws
/// config::ConfigError when K < 2, and what train() and prepare_split throw.
OutOfFold out_of_fold_predictions(const config::Config& c, const TrainOptions& o);

/// The calibration map of a model (relative_to_identity: `anchor_at_zero`) fitted on `oof`'s
/// predictions with training.calibration_weighting (fit_calibration), recorded as fitted on
/// K = training.calibration_folds folds (Calibration::folds).
lcm::model::Calibration fit_cross_fitted(const config::Config& c, const OutOfFold& oof,
                                         bool anchor_at_zero);

}  // namespace lcm::train
