// The option types of model/ that the configuration binds keys to (config/keys.cpp): the kind
// of pre-trained encoder and the names of the input scaling modes. Declarations only, so that
// config/ sees what model/ can be asked to do without seeing how; the functions are defined in
// autoencoder.cpp and input_scaling.cpp.
#pragma once
#include <string>
#include <vector>

namespace lcm::model {

/// Which pre-trained encoder embeds the computation vectors (model.encoder / pretrain.kind).
enum class EncoderKind { None, CompVector, AccessMatrix };

/// "none" | "comp_vector" | "access_matrix" → kind. Throws std::invalid_argument
/// ("unknown encoder kind 'x' (expected none|comp_vector|access_matrix)").
EncoderKind parse_encoder_kind(const std::string& text);
/// The text name of a kind ("none", "comp_vector", "access_matrix").
std::string encoder_kind_name(EncoderKind k);

/// The modes of model.input_scaling: "none" (reference, raw values), "log" (§3.10 transform),
/// "standardize" ((x − mean) / std per column), "log_standardize" (log, then standardize).
const std::vector<std::string>& input_scaling_modes();

}  // namespace lcm::model
