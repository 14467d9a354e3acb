// The evaluation loop shared by lcm-train (validation), lcm-eval and lcm-predict: predict every
// datapoint of a prepared Dataset in eval mode without gradients, and summarise the predictions
// (training-style MAPE loss, docs/model-spec.md §6; per-program metrics, §7).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "model/metrics.hpp"
#include "model/scoring.hpp"

namespace lcm::train {

class DeviceBatchStore;  // tools/common/device_batch_store.hpp

/// The prediction for one datapoint: kept schedule row `schedule` of Dataset::programs[program].
struct Prediction {
  int32_t program = 0;
  int32_t schedule = 0;
  double predicted = 0;  // speedup ×
  double measured = 0;   // speedup × (NaN when unlabeled)
  /// The model's raw output (ln speedup for a log-output model); NaN when not from a model.
  double score = std::numeric_limits<double>::quiet_NaN();
  /// The speedup × before any calibration map (= predicted without one); NaN: same as predicted.
  double uncalibrated = std::numeric_limits<double>::quiet_NaN();
  /// The speedup × before any calibration map: `uncalibrated`, or `predicted` when it is NaN.
  double raw_speedup() const { return std::isnan(uncalibrated) ? predicted : uncalibrated; }
};

/// Predicts every datapoint of every batch of `ds` through lcm::model::score_batch (input
/// scaling, each member's eval-mode forward, relative to the untransformed schedule, ensemble
/// mean, calibration map, positive speedup): `predicted` is the reported speedup ×, `score` the
/// members' mean raw output, `uncalibrated` the speedup × without the map. Sorted by (program,
/// schedule). `progress(done, total)` after each batch when set. `store` (K = 1 only), when set,
/// holds ds's batches for the model's CUDA device (built with m.scaling). Throws as
/// model::score_batch.
std::vector<Prediction> predict_dataset(const lcm::model::ScoringModels& m,
                                        const lcm::data::Dataset& ds,
                                        const std::function<void(int64_t, int64_t)>& progress = {},
                                        DeviceBatchStore* store = nullptr);

/// predict_dataset of the one model `model` with input scaling `scaling` and no calibration map.
std::vector<Prediction> predict_dataset(lcm::model::CostModel<float>& model,
                                        const lcm::data::Dataset& ds,
                                        const std::function<void(int64_t, int64_t)>& progress = {},
                                        const lcm::model::InputScaling* scaling = nullptr,
                                        DeviceBatchStore* store = nullptr);

/// Refuses predictions that are not finite (NaN/inf: broken weights, e.g. a diverged run), which
/// would otherwise give meaningless ranks and MAPE. Throws std::runtime_error naming how many of
/// them, the first program and schedule, and `weights_path`. No-op when every prediction is finite.
void require_finite_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& p,
                                const std::string& weights_path);

/// The training-time loss on these predictions: mean over labelled datapoints of
/// 100·|y − ŷ| / (y + 1e-5) (model-spec §6 epoch loss). NaN when none is labelled.
double loss_mape(const std::vector<Prediction>& p);

/// Metrics of model-spec §7 over the labelled predictions (grouped by program name).
/// Throws std::invalid_argument when none is labelled.
lcm::model::MetricsSummary evaluate_predictions(const lcm::data::Dataset& ds,
                                                const std::vector<Prediction>& p);

/// Why the mean `metric` of `m` is undefined (NaN), in one phrase without a trailing period, or
/// "" when it is a number. `metric`: "mape", "spearman", "ndcg", "ndcg_5", "ndcg_1",
/// "top1_recovered", "top5_recovered" (the per-program means of model-spec §7.4) or
/// "weighted_mape". Spearman is NaN for a program with fewer than 2 schedules or constant
/// measured or predicted speedups (after the 6-decimal rounding of §7.1); the ranking metrics for
/// fewer than 2 schedules (top-k also for a best measured speedup <= 0); MAPE for a measured
/// speedup of 0. Throws std::invalid_argument for another metric name.
std::string undefined_metric_reason(const lcm::model::MetricsSummary& m, const std::string& metric);

}  // namespace lcm::train
