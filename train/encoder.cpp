// Autoencoder checkpoints → cost-model encoder (see encoder.hpp): kind/size inference from the
// tensor shapes, the metadata check, and the all-or-nothing copy of the encoder.* weights.
#include "train/encoder.hpp"

#include <filesystem>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/run_state.hpp"

namespace lcm::train {

namespace {

using lcm::model::AutoencoderConfig;
using lcm::model::EncoderKind;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

AutoencoderConfig encoder_config_of(const std::string& path, EncoderKind expected) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("encoder weights file " + path +
                             ": is a directory, not a weights file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("encoder weights file not found: " + path);
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  auto dim = [&](const char* name, size_t i) -> int {
    const lcm::SafeTensor* t = f.find(name);
    if (!t || t->shape.size() <= i) return -1;
    return int(t->shape[i]);
  };
  AutoencoderConfig cfg;
  if (f.find("encoder.weight_hh_l0")) {
    cfg.kind = EncoderKind::AccessMatrix;
    cfg.access.hidden = dim("encoder.weight_hh_l0", 1);
  } else if (f.find("encoder.first_part.weight")) {
    cfg.kind = EncoderKind::CompVector;
    auto& z = cfg.comp;
    z.first = dim("encoder.first_part.weight", 0);
    z.tags_hidden = dim("encoder.transformation_vectors_embed.weight_hh_l0", 1);
    z.domain = dim("encoder.domain.weight", 0);
    z.write = dim("encoder.write_access.weight", 0);
    z.read = dim("encoder.read_access.weight", 0);
    z.reads = dim("encoder.read_accesses.weight", 0);
    z.expr_hidden = dim("encoder.exprs_embed.weight_hh_l0", 1);
    z.bottleneck_hidden = dim("encoder.bottleneck.0.weight", 0);
    z.embedding = dim("encoder.bottleneck.1.weight", 0);
    if (dim("decoder.0.weight", 0) > 0) z.decoder_hidden0 = dim("decoder.0.weight", 0);
    if (dim("decoder.1.weight", 0) > 0) z.decoder_hidden1 = dim("decoder.1.weight", 0);
  } else {
    throw std::runtime_error(path +
                             " holds no autoencoder encoder (no encoder.weight_hh_l0 or "
                             "encoder.first_part.weight tensor)");
  }
  auto it = f.metadata.find(meta::kAutoencoder);
  if (it != f.metadata.end()) {
    const AutoencoderConfig meta = AutoencoderConfig::from_json(it->second);
    if (meta.kind != cfg.kind)
      throw std::runtime_error(
          path + ": metadata says " + lcm::model::encoder_kind_name(meta.kind) +
          " but the tensors are a " + lcm::model::encoder_kind_name(cfg.kind) + " encoder");
  }
  if (cfg.kind != expected)
    throw std::runtime_error(path + " holds an autoencoder of kind " +
                             lcm::model::encoder_kind_name(cfg.kind) +
                             ", but model.encoder=" + lcm::model::encoder_kind_name(expected));
  try {
    cfg.comp.validate();
    cfg.access.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": encoder tensors missing or mis-shaped (" + e.what() + ")");
  }
  return cfg;
}

lcm::model::ModelConfig model_config_with_encoder(const config::Config& c) {
  lcm::model::ModelConfig m = model_config(c);
  const EncoderKind kind = c.model.encoder;
  if (kind == EncoderKind::None) return m;
  if (c.model.encoder_weights.empty())
    throw config::ConfigError(
        "model.encoder=" + config::name_of(kind) +
        " needs model.encoder_weights=<autoencoder checkpoint> (written by lcm-pretrain)");
  m.encoder = encoder_config_of(c.model.encoder_weights, kind);
  return m;
}

void load_encoder_weights(const std::string& path, lcm::model::CostModel<float>& model) {
  auto params = model.encoder_parameters();
  if (params.empty()) throw std::invalid_argument("load_encoder_weights: the model has no encoder");
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  std::string problems;
  std::vector<std::vector<float>> values(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto* p = params[i];
    const lcm::SafeTensor* t = f.find(p->name);
    if (!t) {
      problems += (problems.empty() ? "" : "; ") + p->name + ": missing";
      continue;
    }
    if (t->shape != lcm::shape_vector(p->shape)) {
      problems += (problems.empty() ? "" : "; ") + p->name + ": shape " + shape_text(t->shape) +
                  " in file, " + shape_text(lcm::shape_vector(p->shape)) + " expected";
      continue;
    }
    try {
      values[i] = t->to_float();
    } catch (const std::exception& e) {
      problems += (problems.empty() ? "" : "; ") + p->name + ": " + e.what();
      continue;
    }
    const std::string bad = lcm::nonfinite_values_problem(p->name, *t);
    if (!bad.empty())
      problems +=
          (problems.empty() ? "" : "; ") + bad + ": the weights are broken (a diverged run?)";
  }
  if (!problems.empty())
    throw std::runtime_error("model.encoder_weights=" + path + ": " + problems);
  for (size_t i = 0; i < params.size(); ++i) params[i]->value = values[i];
}

}  // namespace lcm::train
