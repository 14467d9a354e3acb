// The key table of the lcm configuration: one row per key with its type, documentation, default,
// validation and --resume policy (the rows: config/keys_data.cpp, keys_training.cpp,
// keys_model.cpp; their builders and parsers: config/key_rows.hpp), the reference preset and
// Config's defaults (see config.hpp).
#include "config/key_rows.hpp"

namespace lcm::config {

namespace {

using namespace key_rows;  // NOLINT: the sections of the table

/// Every row, in display order.
std::vector<ConfigKey> make_keys() {
  std::vector<ConfigKey> k;
  add_experiment_keys(k);
  add_data_keys(k);
  add_data_feature_keys(k);
  add_device_keys(k);
  add_optimisation_keys(k);
  add_eval_keys(k);
  add_schedule_keys(k);
  add_model_size_keys(k);
  add_pretraining_keys(k);
  add_objective_keys(k);
  add_selection_keys(k);
  add_calibration_keys(k);
  add_output_keys(k);
  return k;
}

}  // namespace

void apply_reference_preset(Config& c) {
  auto& t = c.training;
  t.loss = parse_objective("mape");
  t.lr_schedule = LrScheduleKind::Constant;
  t.lr = 0.001;
  t.optimizer = OptimizerKind::AdamW;
  t.weight_decay = 0.015;
  t.clip_grad_norm = 0;
  t.warmup_pct = 0.1;
  t.rank_weight = 1.0;
  t.early_stop_patience = 0;
  t.early_stop_from_epoch = 1;
  t.select_metric = SelectMetric::Mape;
  t.calibrate = false;
  t.calibration_folds = 0;
  c.model.input_scaling = ScalingMode::None;
  c.model.relative_to_identity = false;
  c.model.drops = {0.05, 0.05, 0.05, 0.05, 0.05};
  c.data.min_functions_per_footprint = 2;
  c.data.batching = lcm::data::BatchingMode::PerFootprint;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

std::vector<std::string> keys_on_resume(OnResume p) {
  std::vector<std::string> out;
  for (const auto& k : config_keys())
    if (k.on_resume == p) out.push_back(k.key);
  return out;
}

std::vector<std::string> feature_keys() {
  std::vector<std::string> out;
  for (const auto& k : config_keys())
    if (k.changes_features) out.push_back(k.key);
  return out;
}

Config::Config() {
  for (const auto& k : config_keys()) k.set(*this, k.default_value);
}

const std::string& Config::eval_input() const {
  return eval.input_file.empty() ? data.valid_file : eval.input_file;
}

const char* Config::eval_input_key() const {
  return eval.input_file.empty() ? "data.valid_file" : "eval.input_file";
}

lcm::data::FeatureOptions feature_options(const DataConfig& d) {
  lcm::data::FeatureOptions o;
  o.loop_zeroing = d.loop_zeroing;
  o.shift_match = d.shift_match;
  return o;
}

}  // namespace lcm::config