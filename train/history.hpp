// The per-epoch history of a training run: one EpochRecord per epoch, its JSON form (stored in
// the optimizer state as lcm.history, docs/run-state.md) and the logs written from it after every
// epoch: log_<name>.jsonl, log_<name>.csv, loss_<name>.svg and ranking_<name>.svg. The same for
// lcm-pretrain's reconstruction losses.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "train/run_files.hpp"

namespace lcm::train {

/// One epoch of lcm-train. MAPE values in %, seconds wall clock; NaN = not measured.
struct EpochRecord {
  int epoch = 0;                // 1-based
  double train_mape = 0;        // training MAPE (model-spec §6) of the training-mode predictions
  double val_mape = 0;          // validation MAPE (NaN when no validation point is labelled)
  double seconds = 0;           // the whole epoch: training, validation, logs
  double datapoints_per_s = 0;  // datapoints / train_seconds
  double lr = 0;                // learning rate of the epoch's first step
  double train_loss = NAN;      // the training objective (training.loss)
  double val_spearman = NAN, val_ndcg = NAN, val_top1 = NAN;  // model-spec §7 means
  double train_spearman = NAN, train_ndcg = NAN;  // with training.log_train_metrics only
  int64_t datapoints = 0;  // trained in this epoch by the process that finished it (-1: unknown)
  double train_seconds = NAN;  // seconds of those training steps
};

/// The value of `metric` in `r`, oriented so that larger is better (−MAPE for mape).
double select_score(config::SelectMetric metric, const EpochRecord& r);

/// The history as a JSON array of objects (non-finite numbers as null).
std::string history_json(const std::vector<EpochRecord>& h);
/// Parses history_json's text. Entries of older logs without the ranking fields, datapoints or
/// train_seconds read them as NaN / -1. Throws std::runtime_error "lcm.history: entry N: field
/// "k" is missing or not a number" (or "not a JSON array" / "is not an object").
std::vector<EpochRecord> history_from_json(const std::string& text);

/// Writes the run's logs from `h` (atomically): paths.log_jsonl (one object per epoch),
/// paths.log_csv, paths.loss_svg (train/validation MAPE, its title naming the objective `loss`
/// and the metric `select` that picks the best checkpoint), objective_<name>.svg beside it (the
/// training objective per epoch, train_loss) and, when any ranking metric was measured,
/// ranking_<name>.svg. The x axes are whole epochs. A non-empty `run_id` is written as the field
/// "run_id" of every JSONL line (the run's lcm.run_id, docs/run-state.md). Throws
/// std::runtime_error on I/O failure.
void write_training_logs(const RunPaths& paths, const std::vector<EpochRecord>& h,
                         const std::string& name, const config::Objective& loss,
                         config::SelectMetric select, const std::string& run_id = "");

/// "validation spearman" / "validation MAPE": the metric of training.select_metric as the
/// logs, tables and messages name it.
std::string select_metric_label(config::SelectMetric select);

/// One epoch of lcm-pretrain: the loss of pretrain.objective (the reconstruction MSE by default;
/// the masked-entry MSE or the InfoNCE loss otherwise), seconds, samples/s; NaN = not measured.
struct PretrainEpochRecord {
  int epoch = 0;
  double train_mse = 0, val_mse = NAN, seconds = 0, samples_per_s = 0;
};

/// Writes <base>/log_pretrain_<name>.{jsonl,csv} and loss_pretrain_<name>.svg (atomically);
/// `kind` names the autoencoder in the plot title.
/// A non-empty `run_id` is the field "run_id" of every JSONL line. `objective` "" (the §8
/// reconstruction) names the losses train_mse / val_mse; another objective ("masked",
/// "contrastive") names them train_loss / val_loss and is the field "objective" of every line.
void write_pretrain_logs(const std::string& base, const std::string& name, const std::string& kind,
                         const std::vector<PretrainEpochRecord>& h, const std::string& run_id = "",
                         const std::string& objective = "");

}  // namespace lcm::train
