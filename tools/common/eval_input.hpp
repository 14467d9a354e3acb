// What lcm-eval and lcm-predict score: the checkpoint and the programs of eval.input_file,
// loaded and prepared the same way, with the same lines on stderr.
#pragma once
#include <vector>

#include "config/config.hpp"
#include "data/prepare.hpp"
#include "train/predictor.hpp"

namespace lcm::tools {

/// A loaded checkpoint, the programs it scores and its predictions of them.
struct ScoredInput {
  lcm::train::Predictor predictor;
  lcm::data::PreparedSplit split;
  std::vector<lcm::train::Prediction> predictions;  // predictor.predict(split.dataset)
};

/// Loads eval.weights_path (train::Predictor; its notes on stderr as "<tool>: <note>"),
/// prepares the programs to score (train::prepare_eval_input with `all_schedules`, `progress`),
/// prints the read/kept/skipped line of the input file on stderr (train::skip_summary_line) and
/// predicts every datapoint; with `bf16_weights`, after Predictor::use_bf16_weights (--weights
/// bf16). Throws what Predictor, prepare_eval_input and predict throw.
ScoredInput score_eval_input(const lcm::config::Config& c, const char* tool, bool all_schedules,
                             bool progress, bool bf16_weights = false);

}  // namespace lcm::tools
