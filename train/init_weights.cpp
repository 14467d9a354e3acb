// training.init_weights (see init_weights.hpp).
#include "train/init_weights.hpp"

#include <filesystem>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/encoder.hpp"
#include "train/run_state.hpp"
#include "train/weights_check.hpp"

namespace lcm::train {

std::vector<std::string> check_init_weights(config::Config& c) {
  const std::string key = "training.init_weights", path = c.training.init_weights;
  if (path.empty()) return {};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error(key + "=" + path + ": not a file (a cost-model checkpoint, " +
                             "lcm-train's best_model_<name>.safetensors, is expected)");
  require_cost_model_weights(path, key);
  lcm::SafeTensorsFile f;
  try {
    f = lcm::read_safetensors(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(key + "=" + path + ": " + e.what());
  }
  if (f.metadata.count(meta::kEnsemble))
    throw config::ConfigError(key + ": " + path +
                              " is an ensemble; give one of its members' checkpoints");
  // Other sizes or another head are refused now, not after the data is prepared; dropout may
  // differ (it has no weights).
  const std::string saved_text = metadata_value(f.metadata, meta::kModelConfig);
  if (!saved_text.empty()) {
    const lcm::model::ModelConfig run = model_config_with_encoder(c);
    lcm::model::ModelConfig saved = model_config_from_json(saved_text);
    saved.drops = run.drops;
    saved.share_static_columns = run.share_static_columns;
    if (model_config_json(saved) != model_config_json(run))
      throw config::ConfigError(key + ": " + path + " holds the model " + saved_text +
                                ", this run's model.* and training.loss make " +
                                model_config_json(run) + "; give the checkpoint's settings");
  }
  try {
    return adopt_checkpoint_features(c, path);
  } catch (const config::ConfigError& e) {
    throw config::ConfigError(key + ": " + e.what());
  }
}

void load_init_weights(const std::string& path, lcm::model::CostModel<float>& model) {
  try {
    lcm::load_parameters(path, model.params(), true);
  } catch (const std::exception& e) {
    throw std::runtime_error("training.init_weights=" + path + ": " + e.what() +
                             " (the run's model.* sizes must be those of the checkpoint)");
  }
}

}  // namespace lcm::train
