// What a training run does besides the configuration (TrainOptions) and how it ended
// (TrainResult): the options and result of fit_model (train/trainer.hpp) and of the run layer
// (train/run.hpp).
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "train/checkpoint.hpp"
#include "train/history.hpp"
#include "train/test_hooks.hpp"

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
  /// Test hooks (train/test_hooks.hpp), run after `after_step`; copied into the fold runs of
  /// cross-fitting, of which only pause_at reaches ensemble members.
  TestHooks hooks;
};

/// What training.cuda_graphs did in a run (all zero on cpu or with cuda_graphs=off).
struct StepGraphCounts {
  bool enabled = false;   // steps were captured and replayed where they could be
  int64_t captures = 0;   // training steps captured (each replayed at once: counted in replays)
  int64_t replays = 0;    // training steps run as one graph launch
  int64_t fallbacks = 0;  // steps run uncaptured: batch streamed, cache full, or capture refused
  int64_t refused = 0;    // captures that failed (those batches then always run uncaptured)
  int64_t nodes = 0;      // launches recorded in the cached graphs, together
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
  RunPaths paths;               // where the checkpoints and logs are
  StepGraphCounts cuda_graphs;  // training.cuda_graphs (train/step_graphs.hpp)
};

}  // namespace lcm::train
