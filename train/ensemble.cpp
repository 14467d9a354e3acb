// Ensemble checkpoints: combining members, loading them, and training.ensemble (ensemble.hpp).
#include "train/ensemble.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/run_state.hpp"
#include "util/json_parse.hpp"

namespace lcm::train {

namespace {

std::string member_prefix(int k) {
  return "members." + std::to_string(k) + ".";
}

std::string metadata_or_empty(const lcm::SafeTensorsFile& f, const char* key) {
  auto it = f.metadata.find(key);
  return it == f.metadata.end() ? std::string() : it->second;
}

}  // namespace

int ensemble_members(const std::string& path) {
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  const std::string text = metadata_or_empty(f, meta::kEnsemble);
  if (text.empty()) return 0;
  rapidjson::Document d;
  const std::string why = parse_json_bounded<>(d, text);
  if (!why.empty() || !d.IsObject() || !d.HasMember("members") || !d["members"].IsInt() ||
      d["members"].GetInt() < 1 || !d.HasMember("format_version") || !d["format_version"].IsInt() ||
      d["format_version"].GetInt() != 1)
    throw std::runtime_error(
        path + ": lcm.ensemble is not {\"format_version\": 1, \"members\": K >= 1, ...}");
  return d["members"].GetInt();
}

void combine_ensemble(const std::vector<std::string>& members, const std::string& out) {
  if (members.empty()) throw std::runtime_error("an ensemble needs at least one member");
  lcm::SafeTensorsFile e;
  std::string config0, scaling0, features0;
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format_version");
  w.Int(1);
  w.Key("members");
  w.Int(int(members.size()));
  w.Key("sources");
  w.StartArray();
  for (size_t k = 0; k < members.size(); ++k) {
    const std::string& path = members[k];
    lcm::SafeTensorsFile f;
    try {
      f = lcm::read_safetensors(path);
    } catch (const std::exception& ex) {
      throw std::runtime_error("ensemble member " + path + ": " + ex.what());
    }
    if (f.metadata.count(meta::kEnsemble))
      throw std::runtime_error("ensemble member " + path + ": is itself an ensemble");
    lcm::require_finite_tensors(f, "ensemble member " + path);
    const std::string fmt = metadata_or_empty(f, meta::kFormat);
    if (!fmt.empty() && fmt != "parameters")
      throw std::runtime_error("ensemble member " + path + ": is an " + fmt +
                               " file, not a cost-model checkpoint");
    const std::string mc = metadata_or_empty(f, meta::kModelConfig);
    const std::string sc = metadata_or_empty(f, meta::kInputScaling);
    const std::string fc = metadata_or_empty(f, meta::kFeatureConfig);
    if (mc.empty())
      throw std::runtime_error("ensemble member " + path + ": no lcm.model_config metadata");
    if (k == 0) {
      config0 = mc;
      scaling0 = sc;
      features0 = fc;
      e.metadata = f.metadata;
      e.metadata.erase(meta::kCalibration);
      e.metadata.erase(meta::kEpoch);
      e.metadata.erase(meta::kValMape);
      e.metadata.erase(meta::kSelection);
    } else if (mc != config0) {
      throw std::runtime_error("ensemble member " + path + ": its lcm.model_config differs from " +
                               members[0] + "'s (members must be one model configuration)");
    } else if (sc != scaling0) {
      throw std::runtime_error("ensemble member " + path + ": its lcm.input_scaling differs from " +
                               members[0] + "'s (members must be trained on one split)");
    } else if (fc != features0) {
      throw std::runtime_error("ensemble member " + path + ": its " + meta::kFeatureConfig +
                               " differs from " + members[0] +
                               "'s (members must be trained on the same features)");
    }
    for (auto& [name, t] : f.tensors) e.add(member_prefix(int(k)) + name, std::move(t));
    w.String(path.c_str());
  }
  w.EndArray();
  w.EndObject();
  e.metadata[meta::kEnsemble] = sb.GetString();
  lcm::write_safetensors(out, e);
}

std::vector<std::unique_ptr<lcm::model::CostModel<float>>> load_ensemble(const std::string& path) {
  const int K = ensemble_members(path);
  if (K < 1) throw std::runtime_error(path + ": not an ensemble checkpoint (no lcm.ensemble)");
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  lcm::require_finite_tensors(f, path);
  const std::string mc = metadata_or_empty(f, meta::kModelConfig);
  if (mc.empty()) throw std::runtime_error(path + ": no lcm.model_config metadata");
  const lcm::model::ModelConfig cfg = model_config_from_json(mc);
  std::set<std::string> used;
  std::vector<std::unique_ptr<lcm::model::CostModel<float>>> out;
  for (int k = 0; k < K; ++k) {
    auto m = std::make_unique<lcm::model::CostModel<float>>(cfg, 0);
    for (auto& p : m->params().all()) {
      const std::string name = member_prefix(k) + p.name;
      const lcm::SafeTensor* t = f.find(name);
      if (!t)
        throw std::runtime_error(path + ": ensemble member " + std::to_string(k) +
                                 " has no tensor " + p.name);
      std::vector<int64_t> want(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
      if (t->dtype != "F32" || t->shape != want)
        throw std::runtime_error(path + ": " + name + ": dtype or shape differs from the model's");
      p.value = t->to_float();
      used.insert(name);
    }
    out.push_back(std::move(m));
  }
  for (const auto& [name, t] : f.tensors)
    if (!used.count(name))
      throw std::runtime_error(path + ": unexpected tensor " + name + " in an ensemble of " +
                               std::to_string(K));
  return out;
}

}  // namespace lcm::train
