// Ensembles of cost models (training.ensemble, docs/accuracy.md): K checkpoints of one model
// configuration and input scaling, trained with different seeds, stored as one safetensors file
// whose members' predictions are averaged in the model's output space (ln speedup).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/cost_model.hpp"

namespace lcm::train {

/// The number of members of checkpoint `path` (metadata "lcm.ensemble"), 0 for a plain
/// checkpoint. Throws std::runtime_error for an unreadable file or malformed metadata.
int ensemble_members(const std::string& path);

/// Writes `out` (atomically): the tensors of every member checkpoint of `members` (K ≥ 1) under
/// "members.<k>." + their names, metadata "lcm.ensemble" = JSON {"format_version": 1,
/// "members": K, "sources": [paths]} plus member 0's lcm.model_config, lcm.input_scaling, lcm.loss,
/// lcm.experiment and lcm.select_metric (no calibration: a map belongs to the averaged scores and
/// is fitted afterwards). Throws std::runtime_error naming the member when one is not a plain
/// cost-model checkpoint (an ensemble, an optimizer state, unreadable) or when its
/// lcm.model_config or lcm.input_scaling differs from member 0's.
void combine_ensemble(const std::vector<std::string>& members, const std::string& out);

/// The K member models of ensemble checkpoint `path` (sizes from its lcm.model_config), each
/// with its weights. Throws std::runtime_error when a parameter of member k is missing, of
/// another dtype or shape, or when the file holds tensors of no member parameter.
std::vector<std::unique_ptr<lcm::model::CostModel<float>>> load_ensemble(const std::string& path);

}  // namespace lcm::train
