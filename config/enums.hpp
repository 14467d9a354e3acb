// The closed sets of values of the configuration (training.lr_schedule, ...) as
// enums with one name table each: the text of a value is parsed once, when its key is set, and
// everything after that compares enums, never strings.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/loss_terms.hpp"
#include "data/options.hpp"
#include "model/options.hpp"

namespace lcm::config {

/// training.lr_schedule (model-spec §6, §11 Q1 for one_cycle_per_epoch; reduce_on_plateau:
/// docs/accuracy.md).
enum class LrScheduleKind {
  Constant,
  OneCyclePerEpoch,
  OneCyclePerBatch,
  WarmupCosine,
  ReduceOnPlateau
};
/// training.optimizer: Adam (L2 in the gradient) or AdamW (decoupled weight decay).
enum class OptimizerKind { Adam, AdamW };
/// training.select_metric: the validation score of the best checkpoint and early stopping.
enum class SelectMetric { Mape, Spearman, Ndcg };
/// training.calibration_weighting: whose MAPE the calibration map minimises (docs/accuracy.md):
/// each program's mean alike (model-spec §7.4, what lcm-eval reports) or every datapoint alike.
enum class CalibrationWeighting { Program, Datapoint };
/// training.init_scaling: the input scaling of a run that starts from training.init_weights.
enum class InitScaling { Checkpoint, Refit };
/// pretrain.objective: what lcm-pretrain minimises (docs/accuracy.md, issue 46): the §8
/// reconstruction MSE, the masked-feature reconstruction MSE, or the two-view contrastive loss
/// (model/autoencoder.hpp).
enum class PretrainObjective { Reconstruct, Masked, Contrastive };
/// training.cuda_graphs: capture each training step on a CUDA device as a CUDA graph and replay it
/// (auto: on for cuda devices where lcm-train can use it; off: every step launched kernel by
/// kernel).
enum class CudaGraphs { Auto, On, Off };
/// model.preset: none, or the faithful reference settings (apply_reference_preset).
enum class Preset { None, Reference };
/// model.input_scaling: the modes of lcm::model::input_scaling_modes(), in that order.
enum class ScalingMode { None, Log, Standardize, LogStandardize };

/// The (value, name) table of enum E, in display order. Specialised for every enum above and for
/// lcm::model::EncoderKind and the two lcm::data::FeatureOptions switches.
template <class E>
const std::vector<std::pair<E, std::string>>& enum_names();

/// The name of `v` in enum_names<E>() ("one_cycle_per_epoch" for
/// LrScheduleKind::OneCyclePerEpoch).
template <class E>
const std::string& name_of(E v) {
  for (const auto& [value, name] : enum_names<E>())
    if (value == v) return name;
  static const std::string unknown = "?";
  return unknown;
}

/// The value named `text`; false (out untouched) when no value has that name.
template <class E>
bool enum_from_name(const std::string& text, E& out) {
  for (const auto& [value, name] : enum_names<E>())
    if (name == text) {
      out = value;
      return true;
    }
  return false;
}

/// True when `s` steps once per batch (one_cycle_per_batch, warmup_cosine) rather than once per
/// epoch (constant, one_cycle_per_epoch).
inline bool steps_per_batch(LrScheduleKind s) {
  return s == LrScheduleKind::OneCyclePerBatch || s == LrScheduleKind::WarmupCosine;
}

}  // namespace lcm::config
