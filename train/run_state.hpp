// The run-state schema: every "lcm.*" metadata key lcm writes into its safetensors files (cost-
// model checkpoints, optimizer state, autoencoders), in one place, with the typed records that
// read and write them. docs/run-state.md documents the same schema for people.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/history.hpp"

namespace lcm::train {

/// Metadata keys (safetensors `__metadata__`, string values). Files: M = cost-model checkpoint
/// (best_model_*, last_model_*), O = optimizer state (last_optimizer_*), E = encoder optimizer
/// state (last_encoder_optimizer_*), A = autoencoder (lcm-pretrain's *_autoencoder_*).
namespace meta {
inline constexpr const char* kFormat =
    "lcm.format";  // all: parameters | optimizer-state | autoencoder
inline constexpr const char* kFormatVersion = "lcm.format_version";  // O, E: "1"
inline constexpr const char* kModelConfig = "lcm.model_config";    // M: JSON of model::ModelConfig
inline constexpr const char* kInputScaling = "lcm.input_scaling";  // M: JSON of model::InputScaling
inline constexpr const char* kCalibration =
    "lcm.calibration";  // M (best): JSON of model::Calibration (score -> reported speedup)
inline constexpr const char* kEnsemble =
    "lcm.ensemble";  // M (ensemble): JSON {"format_version": 1, "members": K, "sources": [...]}
inline constexpr const char* kLoss = "lcm.loss";  // M: training.loss name
/// M: JSON {key: value} of the keys that change features (config::feature_keys()), as trained
inline constexpr const char* kFeatureConfig = "lcm.feature_config";
inline constexpr const char* kExperiment = "lcm.experiment";  // M, A: experiment.name
/// M, O, E, A: the id of the run that wrote the file (train/run_files.hpp new_run_id): the files
/// of one run carry the same id; --resume keeps it
inline constexpr const char* kRunId = "lcm.run_id";
inline constexpr const char* kEpoch = "lcm.epoch";  // M, O, A: epochs completed
inline constexpr const char* kBatchesDone =
    "lcm.batches_done";  // M (last), O: batches of the next epoch
inline constexpr const char* kTrainFile = "lcm.train_file";  // M (last): data.train_file
/// M (best, last) of a calibration fold run only: which programs it trained on, e.g. "without fold
/// 2 of 3" (data::FoldSelection::text(), train/crossfit.hpp)
inline constexpr const char* kTrainFolds = "lcm.train_folds";
inline constexpr const char* kValidFile = "lcm.valid_file";  // M (last): data.valid_file
inline constexpr const char* kValMape = "lcm.val_mape";      // M (best): validation MAPE, %
inline constexpr const char* kSelectMetric =
    "lcm.select_metric";  // M (best): training.select_metric
/// M (best): "best" (the epoch with the best lcm.select_metric so far) or "last_epoch" (no
/// epoch had a defined, non-NaN, select metric: the latest epoch's weights).
inline constexpr const char* kSelection = "lcm.selection";
inline constexpr const char* kScheduleStep = "lcm.schedule_step";  // O, E: LR-schedule steps taken
inline constexpr const char* kRngCounter = "lcm.rng_counter";      // O: dropout RNG position
inline constexpr const char* kBestValMape =
    "lcm.best_val_mape";                                // O: validation MAPE of the best checkpoint
inline constexpr const char* kHistory = "lcm.history";  // O: JSON array of EpochRecord
inline constexpr const char* kRunSettings =
    "lcm.run_settings";  // O: JSON {key: value} (resume policy)
inline constexpr const char* kPartialLossSum =
    "lcm.partial_loss_sum";  // O (mid-epoch): Σ loss × batch_size
inline constexpr const char* kPartialApeSum = "lcm.partial_ape_sum";  // O (mid-epoch): Σ APE, %
inline constexpr const char* kEpochLr =
    "lcm.epoch_lr";  // O (mid-epoch): LR of the epoch's first step
inline constexpr const char* kAutoencoder =
    "lcm.autoencoder";  // A: JSON of model::AutoencoderConfig
inline constexpr const char* kAutoencoderKind = "lcm.autoencoder_kind";  // A: pretrain.kind
inline constexpr const char* kValMse = "lcm.val_mse";  // A: validation MSE of that epoch
inline constexpr const char* kValLoss =
    "lcm.val_loss";  // A: validation loss of pretrain.objective masked / contrastive
inline constexpr const char* kPretrainObjective =
    "lcm.pretrain_objective";  // A: pretrain.objective
inline constexpr const char* kPretrainFiles =
    "lcm.pretrain_files";  // A: pretrain.files, comma-separated
}  // namespace meta

using Metadata = std::map<std::string, std::string>;

/// The value of `key` in `m`, "" when absent.
std::string metadata_value(const Metadata& m, const char* key);

/// What lcm-train records in the optimizer-state file besides Adam's own state, to continue a
/// run with --resume exactly where it stopped.
struct RunState {
  int epochs_done = 0;              // lcm.epoch
  int64_t batches_done = 0;         // lcm.batches_done: > 0 when saved inside epoch epochs_done + 1
  int64_t schedule_step = 0;        // lcm.schedule_step
  uint64_t rng_counter = 0;         // lcm.rng_counter
  double best_val_mape = INFINITY;  // lcm.best_val_mape ("inf" before any best checkpoint)
  std::vector<EpochRecord> history;  // lcm.history
  std::string run_settings;          // lcm.run_settings (resume::run_settings_json)
  // saved inside an epoch (batches_done > 0) only:
  double partial_loss_sum = 0;  // lcm.partial_loss_sum
  double partial_ape_sum = 0;   // lcm.partial_ape_sum
  double epoch_lr = 0;          // lcm.epoch_lr

  /// The metadata entries (batches_done and the partial sums only when batches_done > 0).
  Metadata to_metadata() const;
  /// Reads the entries of to_metadata() from `m` (metadata of file `path`, named in errors).
  /// Throws std::runtime_error "--resume: <path> lacks metadata <key>" or "--resume: <path>:
  /// metadata <key> is not a number: '<text>'", and history_from_json's errors.
  static RunState from_metadata(const Metadata& m, const std::string& path);
};

/// The values of the keys that change features (config::feature_keys()) as a JSON object
/// {"data.shift_match": "prefix", ...}: checkpoint metadata "lcm.feature_config".
std::string feature_config_json(const config::Config& c);

/// The metadata of lcm-train's `last` checkpoint (beside lcm.model_config).
Metadata last_checkpoint_metadata(const config::Config& c, int epochs_done, int64_t batches_done,
                                  const std::string& input_scaling_json);
/// The metadata of lcm-train's `best` checkpoint (beside lcm.model_config).
Metadata best_checkpoint_metadata(const config::Config& c, int epoch, double val_mape,
                                  const std::string& input_scaling_json);

/// "epoch/batches" of a last checkpoint's or optimizer state's metadata ("?" for a missing
/// epoch, batches 0 when absent): two files saved at the same step have the same stamp.
std::string step_stamp(const Metadata& m);

}  // namespace lcm::train
