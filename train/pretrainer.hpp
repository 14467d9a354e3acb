// Self-supervised pre-training of a computation encoder (docs/model-spec.md §8; Liu & Baghdadi,
// CC 2025): the computation-vector or access-matrix autoencoder trained with MSE and Adam on every
// computation of every schedule of some LOOPerSet files (labels unused), programs held out for
// validation, the best-validation checkpoint kept. What lcm-pretrain runs.
#pragma once
#include <atomic>
#include <cmath>
#include <vector>

#include "config/config.hpp"
#include "train/history.hpp"
#include "train/test_hooks.hpp"

namespace lcm::train {

/// What a pre-training run does besides the configuration.
struct PretrainOptions {
  bool quiet = false;  // no progress output
  /// Read after every batch: when true, the run saves `last` and returns 130. nullptr:
  /// stop_requested() (interrupt.hpp).
  const std::atomic<bool>* stop = nullptr;
  TestHooks hooks;  // test hooks (only pause_at applies: "claimed", "moving")
};

/// How a pre-training run ended.
struct PretrainResult {
  int exit_code = 0;  // 0 done, 130 stopped (last saved)
  std::vector<PretrainEpochRecord> history;
  double best_mse = INFINITY;          // validation MSE (training MSE with nothing held out)
  int64_t programs = 0, held_out = 0;  // programs kept over all files; of them held out
  int64_t train_samples = 0, valid_samples = 0;
  std::string best_path, last_path;  // <base>/weights/{best,last}_autoencoder_<name>.safetensors
};

/// Pre-trains the autoencoder of pretrain.kind on pretrain.files under `c` (pretrain.*, the
/// data.* feature and strict switches, training.seed/threads/device/tf32), printing a header,
/// one line per epoch and a summary on stdout, and per-file read/skip summaries on stderr.
/// A program already read from an earlier file of pretrain.files is skipped as
/// program/duplicate_program (the first file wins). Writes the checkpoints (metadata
/// lcm.format=autoencoder, docs/run-state.md) and log_pretrain_<name>.{jsonl,csv},
/// loss_pretrain_<name>.svg under experiment.base_path; the data cache under <base>/cache.
/// Host memory: the programs are kept compact within training.host_memory_budget (static
/// columns deflated, schedule rows rebuilt per sample for the programs that do not fit; one
/// "lcm-pretrain: host memory: ..." line on stderr, docs/tools.md); the results do not depend on
/// the budget.
/// Throws ConfigError for an empty pretrain.files, DataError / std::runtime_error for
/// unreadable files ("pretrain.files: file not found: F"), no training samples, a non-finite
/// loss, device errors.
PretrainResult pretrain(const config::Config& c, const PretrainOptions& o = {});

}  // namespace lcm::train
