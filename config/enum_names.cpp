// The name tables of the configuration's enums (enum_names<E>, config/enums.hpp): the words
// the keys accept and print.
#include "config/config.hpp"

namespace lcm::config {

// ---- enum name tables ----
template <>
const std::vector<std::pair<LrScheduleKind, std::string>>& enum_names<LrScheduleKind>() {
  static const std::vector<std::pair<LrScheduleKind, std::string>> t{
      {LrScheduleKind::Constant, "constant"},
      {LrScheduleKind::OneCyclePerEpoch, "one_cycle_per_epoch"},
      {LrScheduleKind::OneCyclePerBatch, "one_cycle_per_batch"},
      {LrScheduleKind::WarmupCosine, "warmup_cosine"},
      {LrScheduleKind::ReduceOnPlateau, "reduce_on_plateau"}};
  return t;
}
template <>
const std::vector<std::pair<OptimizerKind, std::string>>& enum_names<OptimizerKind>() {
  static const std::vector<std::pair<OptimizerKind, std::string>> t{
      {OptimizerKind::Adam, "adam"}, {OptimizerKind::AdamW, "adamw"}};
  return t;
}
template <>
const std::vector<std::pair<PretrainObjective, std::string>>& enum_names<PretrainObjective>() {
  static const std::vector<std::pair<PretrainObjective, std::string>> t{
      {PretrainObjective::Reconstruct, "reconstruct"},
      {PretrainObjective::Masked, "masked"},
      {PretrainObjective::Contrastive, "contrastive"}};
  return t;
}
template <>
const std::vector<std::pair<SelectMetric, std::string>>& enum_names<SelectMetric>() {
  static const std::vector<std::pair<SelectMetric, std::string>> t{
      {SelectMetric::Mape, "mape"},
      {SelectMetric::Spearman, "spearman"},
      {SelectMetric::Ndcg, "ndcg"}};
  return t;
}
template <>
const std::vector<std::pair<CalibrationWeighting, std::string>>&
enum_names<CalibrationWeighting>() {
  static const std::vector<std::pair<CalibrationWeighting, std::string>> t{
      {CalibrationWeighting::Program, "program"}, {CalibrationWeighting::Datapoint, "datapoint"}};
  return t;
}
template <>
const std::vector<std::pair<InitScaling, std::string>>& enum_names<InitScaling>() {
  static const std::vector<std::pair<InitScaling, std::string>> t{
      {InitScaling::Checkpoint, "checkpoint"}, {InitScaling::Refit, "refit"}};
  return t;
}
template <>
const std::vector<std::pair<CudaGraphs, std::string>>& enum_names<CudaGraphs>() {
  static const std::vector<std::pair<CudaGraphs, std::string>> t{
      {CudaGraphs::Auto, "auto"}, {CudaGraphs::On, "on"}, {CudaGraphs::Off, "off"}};
  return t;
}
template <>
const std::vector<std::pair<Preset, std::string>>& enum_names<Preset>() {
  static const std::vector<std::pair<Preset, std::string>> t{{Preset::None, "none"},
                                                             {Preset::Reference, "reference"}};
  return t;
}
template <>
const std::vector<std::pair<ScalingMode, std::string>>& enum_names<ScalingMode>() {
  // the model's own list of modes (the names stored in checkpoints), in the enum's order
  static const std::vector<std::pair<ScalingMode, std::string>> t = [] {
    const std::vector<std::string>& names = lcm::model::input_scaling_modes();
    const ScalingMode values[] = {ScalingMode::None, ScalingMode::Log, ScalingMode::Standardize,
                                  ScalingMode::LogStandardize};
    std::vector<std::pair<ScalingMode, std::string>> v;
    for (size_t i = 0; i < names.size() && i < 4; ++i) v.emplace_back(values[i], names[i]);
    return v;
  }();
  return t;
}
template <>
const std::vector<std::pair<lcm::model::EncoderKind, std::string>>&
enum_names<lcm::model::EncoderKind>() {
  using K = lcm::model::EncoderKind;
  static const std::vector<std::pair<K, std::string>> t = [] {
    std::vector<std::pair<K, std::string>> v;
    for (K k : {K::None, K::CompVector, K::AccessMatrix})
      v.emplace_back(k, lcm::model::encoder_kind_name(k));
    return v;
  }();
  return t;
}
template <>
const std::vector<std::pair<lcm::data::FeatureOptions::LoopZeroing, std::string>>&
enum_names<lcm::data::FeatureOptions::LoopZeroing>() {
  using Z = lcm::data::FeatureOptions::LoopZeroing;
  static const std::vector<std::pair<Z, std::string>> t{
      {Z::LastComp, "last_comp"}, {Z::RemovedByFusion, "removed_by_fusion"}, {Z::Off, "off"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::FeatureOptions::ShiftMatch, std::string>>&
enum_names<lcm::data::FeatureOptions::ShiftMatch>() {
  using S = lcm::data::FeatureOptions::ShiftMatch;
  static const std::vector<std::pair<S, std::string>> t{{S::Prefix, "prefix"}, {S::Exact, "exact"}};
  return t;
}

template <>
const std::vector<std::pair<lcm::data::ScheduleSource, std::string>>&
enum_names<lcm::data::ScheduleSource>() {
  using S = lcm::data::ScheduleSource;
  static const std::vector<std::pair<S, std::string>> t{{S::Auto, "auto"},
                                                        {S::Structured, "structured"},
                                                        {S::Typed, "typed"},
                                                        {S::SchedStr, "sched_str"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::BatchingMode, std::string>>&
enum_names<lcm::data::BatchingMode>() {
  using M = lcm::data::BatchingMode;
  static const std::vector<std::pair<M, std::string>> t{{M::Mixed, "mixed"},
                                                        {M::PerFootprint, "per_footprint"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::ScheduleCheck, std::string>>&
enum_names<lcm::data::ScheduleCheck>() {
  using S = lcm::data::ScheduleCheck;
  static const std::vector<std::pair<S, std::string>> t{
      {S::Report, "report"}, {S::Skip, "skip"}, {S::Off, "off"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::LoopLevelBase, std::string>>&
enum_names<lcm::data::LoopLevelBase>() {
  using B = lcm::data::LoopLevelBase;
  static const std::vector<std::pair<B, std::string>> t{
      {B::Auto, "auto"}, {B::Zero, "0"}, {B::One, "1"}};
  return t;
}

}  // namespace lcm::config
