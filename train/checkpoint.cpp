// Checkpoint naming, model.* parsing and model loading (see checkpoint.hpp).
#include "train/checkpoint.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "train/report.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"
#include "util/json_parse.hpp"

namespace lcm::train {

lcm::model::ModelConfig model_config(const config::Config& c) {
  lcm::model::ModelConfig m;
  m.comp_embed_layer_sizes = c.model.comp_embed_layer_sizes;
  m.drops = c.model.drops;
  m.lstm_embedding_size = c.model.lstm_embedding_size;
  m.expr_embed_size = c.model.expr_embed_size;
  m.log_output = c.training.loss.log_output();  // log-space and ranking losses train ln(speedup)
  m.relative_to_identity = c.model.relative_to_identity;
  try {
    m.validate();
  } catch (const std::exception& e) {
    throw config::ConfigError(std::string("model.*: ") + e.what());
  }
  return m;
}

std::string model_config_json(const lcm::model::ModelConfig& m) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  json_int(w, "input_size", m.input_size);
  json_array(w, "comp_embed_layer_sizes", m.comp_embed_layer_sizes);
  json_array(w, "drops", m.drops);
  json_int(w, "lstm_embedding_size", m.lstm_embedding_size);
  json_int(w, "expr_embed_size", m.expr_embed_size);
  json_int(w, "loops_tensor_size", m.loops_tensor_size);
  if (m.encoder.kind != lcm::model::EncoderKind::None) {  // docs/model-spec.md §8 (absent = none)
    const std::string enc = m.encoder.to_json();
    w.Key("encoder");
    w.RawValue(enc.c_str(), enc.size(), rapidjson::kObjectType);
  }
  w.Key("output");
  w.String(m.log_output ? "log_speedup" : "speedup");
  if (m.relative_to_identity) {  // absent = none (every checkpoint written before it existed)
    w.Key("relative_to");
    w.String("identity");
  }
  w.EndObject();
  return sb.GetString();
}

lcm::model::ModelConfig model_config_from_json(const std::string& text) {
  rapidjson::Document d;
  // Iterative, nesting bounded: the Accept of "encoder" below walks a value of bounded depth.
  // Full precision: the dropout rates read back are the bits written.
  const std::string why = parse_json_bounded<rapidjson::kParseFullPrecisionFlag>(d, text);
  if (!why.empty())
    throw std::runtime_error("lcm.model_config metadata is not a JSON object (bad JSON " + why +
                             ")");
  if (!d.IsObject()) throw std::runtime_error("lcm.model_config metadata is not a JSON object");
  lcm::model::ModelConfig m;
  auto get_int = [&](const char* k, int& out) {
    if (!d.HasMember(k)) return;
    if (!d[k].IsInt())
      throw std::runtime_error(std::string("lcm.model_config.") + k + ": not an int");
    out = d[k].GetInt();
  };
  get_int("input_size", m.input_size);
  get_int("lstm_embedding_size", m.lstm_embedding_size);
  get_int("expr_embed_size", m.expr_embed_size);
  get_int("loops_tensor_size", m.loops_tensor_size);
  if (d.HasMember("comp_embed_layer_sizes") && d["comp_embed_layer_sizes"].IsArray()) {
    m.comp_embed_layer_sizes.clear();
    for (auto& v : d["comp_embed_layer_sizes"].GetArray()) {
      if (!v.IsInt()) throw std::runtime_error("lcm.model_config.comp_embed_layer_sizes: not ints");
      m.comp_embed_layer_sizes.push_back(v.GetInt());
    }
  }
  if (d.HasMember("drops") && d["drops"].IsArray()) {
    m.drops.clear();
    for (auto& v : d["drops"].GetArray()) {
      if (!v.IsNumber()) throw std::runtime_error("lcm.model_config.drops: not numbers");
      m.drops.push_back(v.GetDouble());
    }
  }
  if (d.HasMember("encoder")) {
    if (!d["encoder"].IsObject())
      throw std::runtime_error("lcm.model_config.encoder: not an object");
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    d["encoder"].Accept(w);
    m.encoder = lcm::model::AutoencoderConfig::from_json(sb.GetString());
  }
  if (d.HasMember("output")) {  // absent in checkpoints that predate input scaling: speedup
    const std::string o = d["output"].IsString() ? d["output"].GetString() : "";
    if (o != "speedup" && o != "log_speedup")
      throw std::runtime_error("lcm.model_config.output: expected speedup or log_speedup");
    m.log_output = o == "log_speedup";
  }
  if (d.HasMember("relative_to")) {
    const std::string r = d["relative_to"].IsString() ? d["relative_to"].GetString() : "";
    if (r != "identity" && r != "none")
      throw std::runtime_error("lcm.model_config.relative_to: expected identity or none");
    m.relative_to_identity = r == "identity";
  }
  m.validate();
  return m;
}

std::vector<std::string> adopt_checkpoint_features(config::Config& c) {
  return adopt_checkpoint_features(c, c.eval.weights_path);
}

std::vector<std::string> adopt_checkpoint_features(config::Config& c, const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return {};
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  const std::string text = metadata_value(f.metadata, meta::kFeatureConfig);
  if (text.empty()) return {};
  rapidjson::Document d;
  if (d.Parse(text.c_str(), text.size()).HasParseError() || !d.IsObject())
    throw std::runtime_error(path + ": metadata " + meta::kFeatureConfig + " is not a JSON object");
  std::vector<std::string> notes;
  for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m) {
    const std::string key = m->name.GetString();
    if (!m->value.IsString())
      throw std::runtime_error(path + ": metadata " + meta::kFeatureConfig + "." + key +
                               " is not a string");
    const std::string trained = m->value.GetString();
    std::string now;
    try {
      now = config::get_config_value(c, key);
    } catch (const config::ConfigError&) {
      throw std::runtime_error(path + ": metadata " + meta::kFeatureConfig + " names " + key +
                               ", which this lcm does not know (a newer lcm wrote it)");
    }
    if (now == trained) continue;
    if (auto g = c.given.find(key); g != c.given.end())
      throw config::ConfigError(key + "=" + now + " (" + g->second + ") conflicts with " + path +
                                ", trained with " + key + "=" + trained +
                                ": its schedules would get other features than the weights "
                                "learned; drop the setting to use the trained one");
    config::set_config_value(c, key, trained);
    notes.push_back("note: " + key + "=" + trained + " as " + path + " was trained with");
  }
  return notes;
}

void save_checkpoint(const std::string& path, const lcm::model::CostModel<float>& model,
                     const std::map<std::string, std::string>& extra) {
  Metadata all = extra;
  all[meta::kModelConfig] = model_config_json(model.config());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  lcm::save_parameters(path, model.params(), all);
}

std::unique_ptr<lcm::model::CostModel<float>> load_checkpoint(const std::string& path,
                                                              const config::Config& c,
                                                              std::string* note) {
  if (path.empty())
    throw config::ConfigError("eval.weights_path is not set (eval.weights_path=FILE)");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("weights file " + path + ": is a directory, not a weights file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error(std::filesystem::exists(path, ec)
                                 ? "weights file " + path +
                                       ": not a regular file (a device, pipe or socket)"
                                 : "weights file not found: " + path);
  lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  lcm::model::ModelConfig mc;
  auto it = f.metadata.find(meta::kModelConfig);
  if (it != f.metadata.end()) {
    mc = model_config_from_json(it->second);
    if (note && model_config_json(mc) != model_config_json(model_config(c)))
      *note = "model sizes taken from the checkpoint (" + it->second + "), not from model.*";
  } else {
    mc = model_config(c);
  }
  auto model = std::make_unique<lcm::model::CostModel<float>>(mc, 0);
  lcm::load_parameters(path, model->params(), true);
  return model;
}

lcm::model::InputScaling checkpoint_input_scaling(const std::string& path, const config::Config& c,
                                                  std::string* note) {
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  if (auto it = f.metadata.find(meta::kInputScaling); it != f.metadata.end())
    return lcm::model::InputScaling::from_json(it->second);
  const std::string& mode = config::name_of(c.model.input_scaling);
  if (auto it = f.metadata.find(meta::kModelConfig); it != f.metadata.end()) {
    rapidjson::Document d;
    if (parse_json_bounded(d, it->second).empty() && d.IsObject() &&
        !d.HasMember("output")) {  // raw-input checkpoint
      if (note && mode != "none")
        *note = "warning: " + path +
                " predates input scaling (no lcm.input_scaling, no output in lcm.model_config): "
                "assuming it was trained on unscaled inputs (model.input_scaling=none), not the "
                "configured "
                "model.input_scaling=" +
                mode;
      return {};
    }
  }
  lcm::model::InputScaling s;
  if (mode == "none" || mode == "log") {
    s.mode = mode;
  } else {
    lcm::data::PrepareOptions o = prepare_options(c, "train");
    if (o.source.empty())
      throw config::ConfigError(
          "data.train_file is empty: " + path +
          " has no lcm.input_scaling metadata and model.input_scaling=" + mode +
          " is fitted on the training file (set data.train_file, or model.input_scaling)");
    o.cache_dir = "";
    o.progress = false;
    s = lcm::model::fit_input_scaling(mode, lcm::data::prepare_split(o).dataset);
  }
  if (note)
    *note = "note: " + path +
            " has no lcm.input_scaling metadata: using the configured model.input_scaling=" + mode +
            (s.standardizes() ? " fitted on data.train_file (" + c.data.train_file + ")"
                              : std::string());
  return s;
}

lcm::model::InputScaling load_input_scaling(const std::string& checkpoint_path) {
  lcm::SafeTensorsFile f = lcm::read_safetensors(checkpoint_path);
  auto it = f.metadata.find(meta::kInputScaling);
  if (it == f.metadata.end()) return {};
  return lcm::model::InputScaling::from_json(it->second);
}

}  // namespace lcm::train
