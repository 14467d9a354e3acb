// Checkpoints of the cost model: the model.* keys → lcm::model::ModelConfig, the model config
// stored in safetensors metadata, and loading a model from a checkpoint (used by lcm-train,
// lcm-eval and lcm-predict).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "train/run_files.hpp"

namespace lcm::train {

/// The model sizes selected by model.* (other fields at their ModelConfig defaults). Throws
/// config::ConfigError naming the key for a malformed list or a config ModelConfig::validate
/// refuses.
lcm::model::ModelConfig model_config(const config::Config& c);

/// The model config as JSON text (stored as checkpoint metadata "lcm.model_config").
std::string model_config_json(const lcm::model::ModelConfig& m);
/// Parses model_config_json's text. Throws std::runtime_error naming the bad field.
lcm::model::ModelConfig model_config_from_json(const std::string& text);

/// Makes `c` score with the feature settings the checkpoint eval.weights_path was trained with
/// (its "lcm.feature_config"; docs/run-state.md): each recorded key replaces the configured value;
/// a key the user gave (Config::given) with another value is refused, since the features would
/// differ from those the weights learned: ConfigError "data.shift_match=exact (command line)
/// conflicts with <path>, trained with data.shift_match=prefix: ...". Returns one note per key
/// whose value it changed. A checkpoint without the metadata (written before it existed, or by
/// other code) changes nothing. Throws std::runtime_error for an unreadable file or malformed
/// metadata; nothing when eval.weights_path is empty or not a file (loading it says why).
std::vector<std::string> adopt_checkpoint_features(config::Config& c);
/// The same for the checkpoint at `path` (lcm-train's training.init_weights): a missing or
/// non-regular `path` changes nothing (loading it says why).
std::vector<std::string> adopt_checkpoint_features(config::Config& c, const std::string& path);

/// Saves the parameters of `model` at `path` (atomic safetensors, F32) with metadata
/// "lcm.model_config" plus `extra`. Throws std::runtime_error naming the path on failure.
void save_checkpoint(const std::string& path, const lcm::model::CostModel<float>& model,
                     const std::map<std::string, std::string>& extra = {});

/// Builds a model and loads the weights at `path`. The sizes come from the checkpoint's
/// "lcm.model_config" metadata when present (a note is written to *note when they differ from
/// model.*), else from model.* of `c`. Throws std::runtime_error with one line: a missing file
/// ("weights file not found: ...", "weights file <path>: is a directory, ...", "...: not a
/// regular file ..." for a device, pipe or socket), or
/// load_parameters' message for names/shapes that differ.
std::unique_ptr<lcm::model::CostModel<float>> load_checkpoint(const std::string& path,
                                                              const config::Config& c,
                                                              std::string* note = nullptr);

/// The input scaling (docs/model-spec.md §3.10) to apply to the inputs of checkpoint `path`:
/// its metadata "lcm.input_scaling" when present (fitted on the run's training split). Without it:
/// - a checkpoint whose lcm.model_config has no "output" field predates input scaling (always
///   trained on raw inputs): mode none; *note (when given) gets a warning naming
///   that assumption when model.input_scaling of `c` is not none;
/// - any other (no lcm.model_config: weights from elsewhere, or metadata removed; or a model
///   config without the scaling key): model.input_scaling of `c`, fitted on data.train_file when it
///   standardises (the same deterministic fit as lcm-train's), with a note saying so.
/// Throws std::runtime_error for an unreadable file or malformed metadata, config::ConfigError when
/// a standardising model.input_scaling needs data.train_file and it is empty, the data errors of
/// prepare_split for that file.
lcm::model::InputScaling checkpoint_input_scaling(const std::string& path, const config::Config& c,
                                                  std::string* note = nullptr);

/// The input scaling stored in the checkpoint's metadata "lcm.input_scaling" (mode "none" when
/// absent: checkpoints written before input scaling existed, and reference runs). Throws
/// std::runtime_error for an unreadable file or malformed metadata (naming the field).
lcm::model::InputScaling load_input_scaling(const std::string& checkpoint_path);

}  // namespace lcm::train
