// Training objectives and input scaling of the ranking study (issue 7) as used by the tools:
// the loss selected by training.loss on one batch, and the input scaling stored in a checkpoint.
#pragma once
#include <limits>
#include <string>

#include "data/dataset.hpp"
#include "engine/tape.hpp"
#include "model/input_scaling.hpp"

namespace lcm::tools {

/// True when training.loss `loss` trains the model output as ln(speedup) (every loss but mape).
bool is_log_loss(const std::string& loss);

/// The training objective `loss` (training.loss) of one batch, a scalar []:
///   mape             ops::mape(out, y, weight)              (model-spec §6; out = speedup ×)
///   log_mse          weight · mean (out − ln y)²             (out = ln speedup)
///   log_l1           weight · mean |out − ln y|
///   pairwise         pairwise_logistic(out, ln y, bt.program_of, weight): RankNet loss over the
///                    pairs of schedules of the same program in the batch with different speedups
///   log_X+pairwise   log_X + rank_weight · pairwise
/// out: [B] model output; y = bt.speedup [B] (> 0, labels are clipped at 0.01, model-spec §4);
/// weight = batch_len / batch_size (Q10). Throws std::invalid_argument for an unknown loss or
/// a label ≤ 0 / NaN in a log loss.
NodeId training_loss(Tape<float>& tape, const std::string& loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight);

/// Best-checkpoint selection and early stopping on a validation score where larger is better
/// (training.select_metric, oriented; training.early_stop_patience).
struct EarlyStopping {
  int patience = 0;                           // 0 = never stop
  double best = -std::numeric_limits<double>::infinity();
  int bad_epochs = 0;                         // epochs since `best` last improved
  /// Records one epoch's score. Returns true when it is the best so far; a tie counts as better
  /// (the later checkpoint is kept, as the reference's `val ≤ best`, model-spec §6). A NaN score
  /// never improves.
  bool update(double score) {
    if (score >= best) {
      best = score;
      bad_epochs = 0;
      return true;
    }
    ++bad_epochs;
    return false;
  }
  /// True when patience > 0 and the score has not improved for `patience` epochs.
  bool should_stop() const { return patience > 0 && bad_epochs >= patience; }
};

/// The input scaling stored in the checkpoint's metadata "lcm.input_scaling" (mode "none" when
/// absent: checkpoints before issue 7 and reference runs). Throws std::runtime_error for an
/// unreadable file or malformed metadata (naming the field).
lcm::model::InputScaling load_input_scaling(const std::string& checkpoint_path);

}  // namespace lcm::tools
