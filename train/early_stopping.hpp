// Best-checkpoint selection and early stopping on the validation score chosen by
// training.select_metric (training.early_stop_patience).
#pragma once
#include <limits>

namespace lcm::train {

/// Tracks a validation score where larger is better (select_score orients the metric).
struct EarlyStopping {
  int patience = 0;  // 0 = never stop
  double best = -std::numeric_limits<double>::infinity();
  int bad_epochs = 0;  // epochs since `best` last improved
  /// Records one epoch's score. Returns true when it is the best so far; a tie counts as better
  /// (the later checkpoint is kept, as the reference's `val ≤ best`, docs/model-spec.md §6). A NaN
  /// score never improves.
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

}  // namespace lcm::train
