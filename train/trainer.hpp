// The trainer of the cost model: one call runs what lcm-train does (docs/model-spec.md §5–§6 with
// the configured objective, Adam/AdamW and LR schedule): startup checks, data preparation, resume,
// the epoch loop with validation, early stopping, checkpoints, logs and a graceful stop.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "config/config.hpp"
#include "train/checkpoint.hpp"
#include "train/history.hpp"

namespace lcm::train {

/// What a training run does besides the configuration.
struct TrainOptions {
  bool resume = false;  // continue from weights/last_* of experiment.name (docs/run-state.md)
  bool quiet = false;   // no progress bar and no preparation progress
  /// A new run moves an earlier run of its experiment aside as experiment.overwrite=true does
  /// (train/run_files.hpp claim_experiment): set for the fold and member runs that a parent run
  /// trains, whose earlier files are that parent's by-products.
  bool replace = false;
  /// Read after every optimizer step: when true, the run saves `last` (and the state to resume
  /// from that step) and returns with exit code 130. nullptr: stop_requested() (interrupt.hpp).
  const std::atomic<bool>* stop = nullptr;
  /// Called after every optimizer step with the number of steps this call has taken (tests use
  /// it to request a stop at a deterministic point).
  std::function<void(int64_t steps_taken)> after_step;
};

/// How a training run ended.
struct TrainResult {
  /// 0: all epochs trained, stopped early, or (--resume) nothing left to do; 130: stopped by a
  /// stop request (state saved to resume from, unless it came before training started).
  int exit_code = 0;
  bool nothing_to_do = false;        // --resume of a finished run: nothing was read or written
  std::vector<EpochRecord> history;  // every epoch of the run, resumed ones included
  double best_val_mape = INFINITY;   // validation MAPE (%) of the best checkpoint
  /// Epoch (1-based) whose weights `best` holds: the best by training.select_metric, or, when
  /// that metric was NaN in every epoch so far, the last finished epoch
  /// (lcm.selection=last_epoch); 0 when no epoch was finished.
  int best_epoch = 0;
  RunPaths paths;  // where the checkpoints and logs are
};

/// Trains the cost model under `c` as lcm-train does, printing its header, epoch table and
/// summary on stdout and its notes, warnings and per-file skip summaries on stderr.
/// Outputs under experiment.base_path (RunPaths): best/last model checkpoints, optimizer state,
/// JSONL/CSV logs and SVG plots; the prepared-data cache under <base_path>/cache.
/// Throws config::ConfigError for a bad or inconsistent configuration (including --resume under
/// refused settings), lcm::data::DataError for unreadable or strict-mode-malformed data, and
/// std::runtime_error naming the problem otherwise (a missing --resume file, a non-finite loss,
/// no training batches, device errors).
TrainResult train(const config::Config& c, const TrainOptions& o = {});

}  // namespace lcm::train
