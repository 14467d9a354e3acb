// A cost-model checkpoint ready to score programs, as lcm-eval, lcm-predict and any caller of the
// library use it: the weights checked and loaded with their sizes, the input scaling they were
// trained with, on the configured device; and the programs such a caller scores.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/prepare.hpp"
#include "model/calibration.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "model/scoring.hpp"
#include "train/evaluate.hpp"

namespace lcm::train {

/// Loads eval.weights_path once and predicts speedups (×) for prepared programs.
class Predictor {
 public:
  /// Checks training.device (one clear error when absent), sets training.threads, refuses a
  /// weights file of another kind (ConfigError "eval.weights_path: <path> is an optimizer-state
  /// file ...", weights_kind_problem), loads the model (sizes from the checkpoint's
  /// lcm.model_config when present: load_checkpoint) and its input scaling
  /// (checkpoint_input_scaling) and, when eval.calibrated, its calibration map (lcm.calibration,
  /// load_calibration; none when absent), and moves the weights to the device. Throws as those do:
  /// std::runtime_error for a missing or unreadable file or mismatched tensors.
  /// The checkpoint's feature settings replace those of `c` (adopt_checkpoint_features: a
  /// conflicting key the user gave is ConfigError); config() is the result, the one to read and
  /// featurize the programs to score with.
  explicit Predictor(const config::Config& c);

  /// The configuration this checkpoint scores with: the caller's, with the feature settings
  /// (config::feature_keys()) the checkpoint was trained with.
  const config::Config& config() const { return config_; }

  /// Lines to show the user, in order, without a tool prefix: the feature settings taken from the
  /// checkpoint ("note: data.shift_match=exact as <path> was trained with"), how the input
  /// scaling was chosen
  /// when the checkpoint does not record it, and "note: model sizes taken from the checkpoint
  /// ..." when they differ from model.*. Empty for an lcm-train checkpoint under its own config.
  const std::vector<std::string>& notes() const { return notes_; }

  /// Predictions for every datapoint of `ds` (eval mode, no gradients), sorted by (program,
  /// schedule), `predicted` a speedup × whatever the model's output space, through the
  /// calibration map when there is one (`uncalibrated` holds the raw speedup). For an ensemble
  /// the score is the mean of the members' scores (ln speedups: a geometric mean of speedups).
  /// The path is lcm::model::score_batch's, through predict_dataset(scoring(), ds). Throws
  /// std::runtime_error naming the first program and schedule when any prediction is not
  /// finite (broken weights).
  std::vector<Prediction> predict(const lcm::data::Dataset& ds) const;
  /// The members, input scaling and calibration map of this checkpoint as lcm::model::score_batch
  /// takes them (valid while this Predictor lives).
  lcm::model::ScoringModels scoring() const;

  const lcm::model::CostModel<float>& model() const { return *model_; }
  /// The number of models whose scores predict() averages: 1, or K for an ensemble checkpoint
  /// (lcm.ensemble, train/ensemble.hpp; model() is its first member).
  int members() const { return 1 + int(extra_members_.size()); }
  /// The model for a caller's own eval-mode forwards (forward() takes no const model: it
  /// records on a tape; the weights are not changed). lcm-serve's Scorer.
  lcm::model::CostModel<float>& inference_model() const { return *model_; }
  /// Member k (0 ≤ k < members()) of an ensemble for eval-mode forwards, as inference_model();
  /// member(0) is inference_model(). Throws std::out_of_range for another k.
  lcm::model::CostModel<float>& member(int k) const;
  const lcm::model::InputScaling& scaling() const { return scaling_; }
  /// The calibration map applied to predictions (not active() when the checkpoint has none or
  /// eval.calibrated is false).
  const lcm::model::Calibration& calibration() const { return calibration_; }
  const std::string& weights_path() const { return weights_path_; }

  /// Every member's weight matrices rounded to BF16 with their BF16 bits kept for the one-row
  /// products (lcm::model::CostModel::use_bf16_weights; lcm-serve / lcm-predict --weights bf16):
  /// batch-1 forwards read half the weight bytes, sums in FP32. Idempotent. Throws
  /// config::ConfigError on a CUDA device (the copies serve the CPU kernels only).
  void use_bf16_weights();
  /// Whether use_bf16_weights() ran.
  bool bf16_weights() const { return model_->bf16_weights(); }

 private:
  std::string weights_path_;
  config::Config config_;
  std::unique_ptr<lcm::model::CostModel<float>> model_;
  std::vector<std::unique_ptr<lcm::model::CostModel<float>>> extra_members_;  // members 2..K
  lcm::model::InputScaling scaling_;
  lcm::model::Calibration calibration_;
  std::vector<std::string> notes_;
};

/// The weight format a tool serves with (--weights): "fp32" → false (the checkpoint's values),
/// "bf16" → true (Predictor::use_bf16_weights). Throws config::ConfigError naming `what` and the
/// accepted values for another text.
bool parse_weight_format(const std::string& text, const std::string& what);

/// The programs that lcm-eval / lcm-predict score: Config::eval_input() (eval.input_file, or
/// data.valid_file when it is empty). `all_schedules` false (lcm-eval): labelled datapoints,
/// cached like a validation split (every footprint kept); true (lcm-predict): every schedule,
/// labelled or not, no footprint rule, no cache. Throws ConfigError "<key> is empty" naming
/// Config::eval_input_key(), and what prepare_split throws.
lcm::data::PreparedSplit prepare_eval_input(const config::Config& c, bool all_schedules,
                                            bool progress);

}  // namespace lcm::train
