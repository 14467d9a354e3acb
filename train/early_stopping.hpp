// Best-checkpoint selection and early stopping on the validation score chosen by
// training.select_metric (training.early_stop_patience).
#pragma once
#include <algorithm>
#include <limits>

namespace lcm::train {

/// Tracks a validation score where larger is better (select_score orients the metric).
struct EarlyStopping {
  int patience = 0;  // 0 = never stop
  /// The first epoch (1-based, as RunState history records) whose lack of improvement counts
  /// towards `patience`; earlier epochs still set `best`. A run with a pre-trained encoder that
  /// is fine-tuned from epoch index F counts from F + 1 (fine_tuning_count_from), so it never
  /// stops while the encoder is frozen: the frozen phase alone often peaks in its first epochs,
  /// and stopping there would skip the fine-tuning it was configured for. A plain run counts from
  /// training.early_stop_from_epoch (early_stop_count_from).
  int count_from_epoch = 1;
  double best = -std::numeric_limits<double>::infinity();
  int bad_epochs = 0;  // counted epochs since `best` last improved
  /// Records epoch `epoch`'s (1-based) score. Returns true when it is the best so far; a tie
  /// counts as better (the later checkpoint is kept, as the reference's `val ≤ best`,
  /// docs/model-spec.md §6). A NaN score never improves.
  bool update(double score, int epoch) {
    if (score >= best) {
      best = score;
      bad_epochs = 0;
      return true;
    }
    if (epoch >= count_from_epoch) ++bad_epochs;
    return false;
  }
  /// True when patience > 0 and the score has not improved for `patience` counted epochs.
  bool should_stop() const { return patience > 0 && bad_epochs >= patience; }
};

/// EarlyStopping::count_from_epoch of a run: fine_tune_epoch + 1 when a pre-trained encoder is
/// fine-tuned within max_epochs (fine_tune_epoch is 0-based), else 1.
inline int fine_tuning_count_from(bool has_encoder, int fine_tune_epoch, int max_epochs) {
  return has_encoder && fine_tune_epoch > 0 && fine_tune_epoch < max_epochs ? fine_tune_epoch + 1
                                                                            : 1;
}

/// EarlyStopping::count_from_epoch of a run: the later of `from_epoch`
/// (training.early_stop_from_epoch, 1-based; values < 1 count as 1) and fine_tuning_count_from.
/// Starting the count late keeps a run from stopping in the slow first phase of training, where a
/// log_huber model can sit on an early, low peak for 5 epochs before it improves
/// (docs/accuracy.md, round 4: a run stopped at epoch 9 with validation Spearman 0.24, against
/// 0.50 for the runs that went on).
inline int early_stop_count_from(int from_epoch, bool has_encoder, int fine_tune_epoch,
                                 int max_epochs) {
  return std::max(
      {1, from_epoch, fine_tuning_count_from(has_encoder, fine_tune_epoch, max_epochs)});
}

}  // namespace lcm::train
