// Loading a checkpoint for scoring, and the programs it scores (see predictor.hpp).
#include "train/predictor.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/threads.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/ensemble.hpp"
#include "train/splits.hpp"
#include "train/weights_check.hpp"

namespace lcm::train {

bool parse_weight_format(const std::string& text, const std::string& what) {
  if (text == "fp32") return false;
  if (text == "bf16") return true;
  throw config::ConfigError(what + ": '" + text + "' is not a weight format (fp32 or bf16)");
}

void Predictor::use_bf16_weights() {
  if (config_.training.device.kind != lcm::Device::CPU)
    throw config::ConfigError(
        "--weights bf16: the BF16 weight copies serve the CPU kernels only (training.device is " +
        config_.training.device.str() + ")");
  model_->use_bf16_weights();
  for (auto& m : extra_members_) m->use_bf16_weights();
}

Predictor::Predictor(const config::Config& given)
    : weights_path_(given.eval.weights_path), config_(given) {
  const config::Config& c = config_;
  // training.device applies here too: a GPU that is absent is one clear error, before any work
  lcm::require_device(c.training.device);
  lcm::set_num_threads(c.training.threads);
  // an optimizer state or an autoencoder given as the checkpoint: one short line, not the list
  // of every unexpected tensor
  require_cost_model_weights(weights_path_);
  // the feature settings the weights were trained with, before anything reads data.*
  notes_ = adopt_checkpoint_features(config_);
  std::string sizes_note, scaling_note;
  if (std::filesystem::is_regular_file(weights_path_) && ensemble_members(weights_path_) > 0) {
    std::vector<std::unique_ptr<lcm::model::CostModel<float>>> m = load_ensemble(weights_path_);
    model_ = std::move(m[0]);
    for (size_t k = 1; k < m.size(); ++k) extra_members_.push_back(std::move(m[k]));
    if (model_config_json(model_->config()) != model_config_json(model_config(c)))
      sizes_note = "model sizes taken from the checkpoint, not from model.*";
  } else {
    model_ = load_checkpoint(weights_path_, c, &sizes_note);
  }
  if (c.training.device.kind == lcm::Device::CUDA) {
    lcm::parameters_to_device(model_->params(), c.training.device.index);
    for (auto& m : extra_members_) lcm::parameters_to_device(m->params(), c.training.device.index);
  }
  // The checkpoint's input scaling (fitted on its training split) is reapplied; without that
  // metadata the configured one, or none for checkpoints older than input scaling.
  scaling_ = checkpoint_input_scaling(weights_path_, c, &scaling_note);
  if (!scaling_note.empty()) notes_.push_back(scaling_note);
  if (c.eval.calibrated) calibration_ = load_calibration(weights_path_);
  // A relative model's untransformed schedule scores 0 and must report 1x: its map passes
  // through (0, 1) by construction (the anchored fit), so another map is a damaged file.
  if (calibration_.active() && model_->config().relative_to_identity &&
      std::fabs(calibration_.apply(0.0) - 1.0) > 1e-12)
    throw std::runtime_error(weights_path_ + ": lcm.calibration maps score 0 to " +
                             std::to_string(calibration_.apply(0.0)) +
                             "x, but this model is relative to the untransformed schedule, whose "
                             "map must pass through 1x at 0 (a damaged file? refit it with "
                             "lcm-train --calibrate-only)");
  if (!sizes_note.empty()) notes_.push_back("note: " + sizes_note);
}

lcm::model::ScoringModels Predictor::scoring() const {
  lcm::model::ScoringModels m;
  m.members.push_back(model_.get());
  for (const auto& x : extra_members_) m.members.push_back(x.get());
  m.scaling = &scaling_;
  m.calibration = &calibration_;
  return m;
}

std::vector<Prediction> Predictor::predict(const lcm::data::Dataset& ds) const {
  std::vector<Prediction> p = predict_dataset(scoring(), ds);
  require_finite_predictions(ds, p, weights_path_);
  return p;
}

lcm::model::CostModel<float>& Predictor::member(int k) const {
  if (k == 0) return *model_;
  if (k < 0 || k >= members())
    throw std::out_of_range("Predictor::member(" + std::to_string(k) + ") of " +
                            std::to_string(members()) + " members");
  return *extra_members_[size_t(k - 1)];
}

lcm::data::PreparedSplit prepare_eval_input(const config::Config& c, bool all_schedules,
                                            bool progress) {
  // The validation split's options (and, reading data.valid_file, its cache), another source
  // and cache name when eval.input_file is set.
  lcm::data::PrepareOptions o = prepare_options(c, "valid");
  if (!c.eval.input_file.empty()) {
    o.source = c.eval.input_file;
    o.split = "eval";
  }
  if (o.source.empty()) throw config::ConfigError(std::string(c.eval_input_key()) + " is empty");
  o.progress = progress;
  o.compact_rows = true;  // predict_dataset rebuilds each batch's rows from the descriptors
  if (all_schedules) {    // the cache holds labelled data only
    o.features.keep_unlabeled = true;
    o.batching.min_functions_per_footprint = 0;
    o.cache_dir = "";
    o.progress = false;
  }
  lcm::data::PreparedSplit s = lcm::data::prepare_split(o);
  const std::string line = cache_rebuilt_line("lcm-eval", o.split, s);
  if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  return s;
}

}  // namespace lcm::train
