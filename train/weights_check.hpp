// Startup check of eval.weights_path (lcm-eval, lcm-predict): a safetensors file that is not a
// cost-model checkpoint (lcm-train's optimizer state, an autoencoder's weights) is named in one
// short line instead of load_parameters' list of every unexpected tensor.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lcm::train {

/// What a weights file is not, from its safetensors metadata and tensor names: "" when it may
/// be a cost-model checkpoint (load_parameters then checks every tensor); else one line
/// "<path> is an optimizer-state file (...), not a cost-model checkpoint; use ..." when
/// metadata lcm.format = "optimizer-state" (engine/optim.cpp Adam::save_state), or "<path> is
/// an autoencoder's weights (...)" when lcm.format = "autoencoder" (lcm-pretrain) or the file
/// has "decoder.*" tensors and no "predict.weight" (the published PyTorch autoencoder).
/// `tensor_names`: every tensor name of the file.
std::string weights_kind_problem(const std::string& path,
                                 const std::map<std::string, std::string>& metadata,
                                 const std::vector<std::string>& tensor_names);

/// Reads the safetensors file `path` and throws config::ConfigError "<key>: <problem>" (exit 2;
/// `key` is the setting that names the file) when weights_kind_problem finds one. A missing or
/// unreadable file is left to load_checkpoint (no throw here for it).
void require_cost_model_weights(const std::string& path,
                                const std::string& key = "eval.weights_path");

}  // namespace lcm::train
