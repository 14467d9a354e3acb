// A run that starts from a trained cost model (training.init_weights): the startup check of the
// file, which also adopts its feature settings, and the load of its weights. The first half of
// the pre-training recipe trains that model on lcm-synth programs (docs/accuracy.md, round 6).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/cost_model.hpp"

namespace lcm::train {

/// The startup check of training.init_weights (before any data is read): the file is a single
/// cost-model checkpoint, and `c` takes its feature settings as adopt_checkpoint_features does
/// (returns its notes). No-op when training.init_weights is empty. Throws config::ConfigError
/// "training.init_weights: ..." (an autoencoder, an optimizer state, an ensemble, a model of
/// other model.* sizes or another head per its lcm.model_config, a conflicting feature setting)
/// or std::runtime_error "training.init_weights=<path>: ..." (not a file, not a safetensors file).
std::vector<std::string> check_init_weights(config::Config& c);

/// Loads every parameter of `model` from the cost-model checkpoint `path`
/// (training.init_weights: a run that starts from trained weights, e.g. a model trained on
/// lcm-synth programs; the encoder's too when the model has one), checked first by
/// check_init_weights. Throws std::runtime_error "training.init_weights=<path>: ..." with
/// load_parameters' problems (names, shapes: other model.* sizes, non-finite values); `model`
/// is unchanged on any error.
void load_init_weights(const std::string& path, lcm::model::CostModel<float>& model);

}  // namespace lcm::train
