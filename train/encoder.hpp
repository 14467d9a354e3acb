// Pre-trained encoders in the tools (docs/model-spec.md §8): which autoencoder a checkpoint holds,
// the cost-model config with model.encoder / model.encoder_weights, and copying the encoder's
// weights into a cost model (lcm-train). Autoencoder checkpoints are written by lcm-pretrain.
#pragma once
#include <map>
#include <string>

#include "config/config.hpp"
#include "model/autoencoder.hpp"
#include "model/cost_model.hpp"

namespace lcm::train {

/// The autoencoder sizes stored in an autoencoder checkpoint at `path`, inferred from its
/// tensor shapes ("encoder.weight_hh_l0" [4H, H] → access_matrix with hidden H; the
/// "encoder.first_part/…/bottleneck" shapes → comp_vector), and checked against the metadata
/// "lcm.autoencoder" when the file has it (lcm-pretrain output; the published [PAM] file has none).
/// Throws std::runtime_error with one line: file not found, a directory, or not safetensors; no
/// encoder tensors
/// ("X holds no autoencoder encoder (no encoder.* tensors)"); a kind other than `expected`
/// ("X holds an autoencoder of kind comp_vector, but model.encoder=access_matrix").
lcm::model::AutoencoderConfig encoder_config_of(const std::string& path,
                                                lcm::model::EncoderKind expected);

/// model_config(c) plus the encoder selected by model.encoder (sizes from
/// encoder_config_of(model.encoder_weights)). Throws config::ConfigError when model.encoder is not
/// none and model.encoder_weights is empty; std::runtime_error as encoder_config_of.
lcm::model::ModelConfig model_config_with_encoder(const config::Config& c);

/// Copies every "encoder.*" tensor of the checkpoint at `path` into the matching parameter of
/// `model` (all of them must be present with the exact shape; decoder tensors are ignored).
/// Nothing is changed on error: std::runtime_error "model.encoder_weights=<path>: p1; p2; ..."
/// naming each missing tensor or shape mismatch ("encoder.weight_ih_l0: shape [80, 44] in file,
/// [12, 44] expected"). Throws std::invalid_argument when the model has no encoder.
void load_encoder_weights(const std::string& path, lcm::model::CostModel<float>& model);

}  // namespace lcm::train
