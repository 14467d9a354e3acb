// Cross-fitted calibration (training.calibration_folds, docs/accuracy.md): the calibration map of
// a checkpoint fitted on out-of-fold predictions of the training split instead of the model's own
// in-sample predictions, which are over-confident (a model predicts the programs it was trained
// on far better than new ones, so a map fitted on them hardly corrects the new ones).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/calibration.hpp"
#include "train/evaluate.hpp"

namespace lcm::train {

/// Where a model's scores lie on the programs it was trained on: the mean of its scores of its
/// own training split (0 for a model relative to the untransformed schedule, whose score 0 means
/// 1× by construction). Models trained on other programs or for other lengths (a fold model and
/// the run's model) can put the same schedules at scores offset from each other; measured from
/// this shift they agree. (Dividing by the spread as well was no better on the real sample, and
/// stretched an under-trained model's nearly constant scores without bound.)
/// Throws std::invalid_argument when `p` has no labelled, finite score.
double score_shift(const std::vector<Prediction>& p, bool relative);

/// Out-of-fold predictions of data.train_file and how their fold runs ended
/// (out_of_fold_predictions, train/run.hpp).
struct OutOfFold {
  /// Every training program's predictions by the fold model that did not train on it, with
  /// `score` measured from that model's score_shift() and `uncalibrated` its raw speedup;
  /// Prediction::program numbers the programs across the folds (fold 1's first, ...). Empty on
  /// ranks other than 0 and when a fold run did not finish.
  std::vector<Prediction> predictions;
  /// 0, or the exit code of the first fold run that did not finish (130 after a stop request).
  int exit_code = 0;
};

/// The name of fold run k (0-based) of K of experiment `name`: "<name>_fold<k+1>of<K>".
std::string fold_run_name(const std::string& name, int k, int K);

/// Throws config::ConfigError naming the fold when one of the K = training.calibration_folds folds
/// of data.train_file's kept programs (data::program_fold) is empty, so that a fold run would
/// train on every program or predict none ("fold 2 of 3 holds no program of <file> (N programs
/// kept): use fewer folds, or 0"). Prepares the training split (from its cache when valid).
void check_fold_sizes(const config::Config& c, bool progress);

/// How an existing experiment of a fold run's name relates to fold run `ck` (ck.experiment.name,
/// ck.data.train_folds): none there; a fold run of this file and fold with a `last` checkpoint (one
/// to resume); or a fold run of another file or fold.
enum class ExistingFoldRun { None, SameFold, OtherFold };

/// Reads the stamps (lcm.train_folds, lcm.train_file) of the last (else best) checkpoint of
/// `ck`'s experiment. Throws config::ConfigError when one exists but cannot be read or is not a
/// calibration fold run (never overwritten).
ExistingFoldRun existing_fold_run(const config::Config& ck);

/// The calibration map of a model whose scores of its own training split have score_shift()
/// `shift` (relative_to_identity: `anchor_at_zero`), fitted on `oof`'s predictions
/// (fit_calibration with training.calibration_weighting; its flat tails report about the end
/// knot's speedup for a score beyond the fitted range rather than an extrapolation learnt on
/// other models' scores) and moved by `shift` into the model's scores; recorded as fitted on K =
/// training.calibration_folds folds (Calibration::folds).
lcm::model::Calibration fit_cross_fitted(const config::Config& c, const OutOfFold& oof,
                                         double shift, bool anchor_at_zero);

}  // namespace lcm::train
