// weights_kind_problem / require_cost_model_weights (see weights_check.hpp): the metadata and
// tensor names that tell an optimizer state or an autoencoder from a cost-model checkpoint.
#include "train/weights_check.hpp"

#include <filesystem>
#include <system_error>

#include "config/config.hpp"
#include "engine/safetensors.hpp"
#include "train/run_state.hpp"

namespace lcm::train {

std::string weights_kind_problem(const std::string& path,
                                 const std::map<std::string, std::string>& metadata,
                                 const std::vector<std::string>& tensor_names) {
  namespace fs = std::filesystem;
  auto value = [&](const char* k) {
    auto it = metadata.find(k);
    return it == metadata.end() ? std::string() : it->second;
  };
  if (value(meta::kFormat) == "optimizer-state") {
    // lcm-train writes <weights>/last_optimizer_<name>.safetensors beside best_model_<name> and
    // last_model_<name>: name those when the file follows that pattern
    const fs::path p(path);
    const std::string file = p.filename().string(), prefix = "last_optimizer_";
    std::string use = "best_model_<name>.safetensors or last_model_<name>.safetensors";
    if (file.rfind(prefix, 0) == 0) {
      const std::string rest = file.substr(prefix.size());
      use = (p.parent_path() / ("best_model_" + rest)).string() + " or " +
            (p.parent_path() / ("last_model_" + rest)).string();
    }
    return path +
           " is an optimizer-state file (Adam moments for --resume), not a cost-model "
           "checkpoint; use " +
           use;
  }
  bool decoder = false, predict = false;
  for (const std::string& n : tensor_names) {
    decoder = decoder || n.rfind("decoder.", 0) == 0;
    predict = predict || n == "predict.weight";
  }
  if (value(meta::kFormat) == "autoencoder" || (decoder && !predict))
    return path +
           " is an autoencoder's weights (lcm-pretrain, or the published access-matrix "
           "autoencoder), not a cost-model checkpoint; give it to training as "
           "model.encoder_weights, and evaluate a best_model_<name>/last_model_<name> file";
  return "";
}

void require_cost_model_weights(const std::string& path, const std::string& key) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return;
  SafeTensorsFile f;
  try {
    f = read_safetensors(path);
  } catch (const std::exception&) {
    return;  // load_checkpoint reports an unreadable file with its own message
  }
  std::vector<std::string> names;
  for (const auto& kv : f.tensors) names.push_back(kv.first);
  const std::string problem = weights_kind_problem(path, f.metadata, names);
  if (!problem.empty()) throw config::ConfigError(key + ": " + problem);
}

}  // namespace lcm::train
