// The trainer of the cost model: one call fits one model (docs/model-spec.md §5–§6 with the
// configured objective, Adam/AdamW and LR schedule): startup checks, data preparation, resume,
// the epoch loop with validation, early stopping, checkpoints, logs and a graceful stop. Runs of
// several models (cross-fitting folds, ensemble members) are train/run.hpp's.
#pragma once
#include "config/config.hpp"
#include "train/train_options.hpp"

namespace lcm::train {

/// Fits one cost model under `c`, printing its header, epoch table and
/// summary on stdout and its notes, warnings and per-file skip summaries on stderr.
/// Outputs under experiment.base_path (RunPaths): best/last model checkpoints, optimizer state,
/// JSONL/CSV logs and SVG plots; the prepared-data cache under <base_path>/cache. With
/// training.calibrate and training.calibration_folds=0 it fits the calibration map of the best
/// checkpoint on its training split and stores it there; a cross-fitted map is train()'s
/// (train/run.hpp).
/// Throws config::ConfigError for a bad or inconsistent configuration (including --resume under
/// refused settings), lcm::data::DataError for unreadable or strict-mode-malformed data, and
/// std::runtime_error naming the problem otherwise (a missing --resume file, a non-finite loss,
/// no training batches, device errors).
TrainResult fit_model(const config::Config& c, const TrainOptions& o = {});

}  // namespace lcm::train
