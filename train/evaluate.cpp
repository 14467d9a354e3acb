// Eval-mode prediction over a Dataset and its summaries (see evaluate.hpp).
#include "train/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/device_memory.hpp"
#include "engine/tape.hpp"
#include "model/metrics.hpp"
#include "train/device_batch_store.hpp"

namespace lcm::train {

std::vector<Prediction> predict_dataset(const lcm::model::ScoringModels& m,
                                        const lcm::data::Dataset& ds,
                                        const std::function<void(int64_t, int64_t)>& progress,
                                        DeviceBatchStore* store) {
  std::vector<Prediction> out;
  out.reserve(size_t(ds.n_datapoints()));
  lcm::Tape<float> tape;
  // Parameters on a CUDA device (parameters_to_device): predict there too.
  m.config();  // throws for no member
  for (const auto& p : m.members[0]->params().all())
    if (p.device_value) {
      tape.set_device(lcm::Device::CUDA, p.device_index);
      break;
    }
  const bool relative = m.relative();
  const int64_t nb = int64_t(ds.batches.size());
  for (int64_t b = 0; b < nb; ++b) {
    lcm::model::ScoringBatch sb;
    sb.trees = ds.trees(b);
    if (store) {
      const StagedBatch& staged = store->acquire(b);
      sb.staged = &staged.inputs;
      sb.features = staged.labels;
      sb.on_queued = [store, b] { store->prefetch(b + 1); };  // its copy overlaps the forward
    } else {
      sb.features = ds.materialize(b);
    }
    const auto& pts = ds.batches[size_t(b)].points;
    if (relative) {  // the batch's P programs' untransformed schedules, in features.programs order
      for (const auto& pt : pts)
        sb.untransformed.push_back(ds.programs[size_t(pt.program)].is_identity(pt.schedule));
      lcm::data::Batch untransformed;
      for (int32_t p : sb.features.programs)
        untransformed.points.push_back({p, lcm::data::kIdentitySchedule});
      sb.untransformed_trees = ds.trees(untransformed);
      sb.untransformed_features = ds.materialize(untransformed);
    }
    const std::vector<lcm::model::ScoredDatapoint> s = lcm::model::score_batch(m, sb, tape);
    for (size_t i = 0; i < pts.size(); ++i)
      out.push_back({pts[i].program, pts[i].schedule, s[i].speedup, double(sb.features.speedup[i]),
                     s[i].score, s[i].uncalibrated});
    if (progress) progress(b + 1, nb);
  }
  std::sort(out.begin(), out.end(), [](const Prediction& a, const Prediction& b) {
    return a.program != b.program ? a.program < b.program : a.schedule < b.schedule;
  });
  return out;
}

std::vector<Prediction> predict_dataset(lcm::model::CostModel<float>& model,
                                        const lcm::data::Dataset& ds,
                                        const std::function<void(int64_t, int64_t)>& progress,
                                        const lcm::model::InputScaling* scaling,
                                        DeviceBatchStore* store) {
  lcm::model::ScoringModels m;
  m.members = {&model};
  m.scaling = scaling;
  return predict_dataset(m, ds, progress, store);
}

double loss_mape(const std::vector<Prediction>& p) {
  double s = 0;
  int64_t n = 0;
  for (auto& x : p) {
    if (std::isnan(x.measured)) continue;
    s += model::loss_ape(x.measured, x.predicted);
    ++n;
  }
  return n ? s / double(n) : std::numeric_limits<double>::quiet_NaN();
}

lcm::model::MetricsSummary evaluate_predictions(const lcm::data::Dataset& ds,
                                                const std::vector<Prediction>& p) {
  std::vector<std::string> names;
  std::vector<double> t, y, raw;
  bool calibrated = false;
  for (auto& x : p) {
    if (std::isnan(x.measured)) continue;
    names.push_back(ds.programs[size_t(x.program)].name);
    t.push_back(x.measured);
    y.push_back(x.predicted);
    raw.push_back(x.raw_speedup());
    calibrated |= x.predicted != raw.back();
  }
  if (names.empty()) throw std::invalid_argument("no labelled datapoints to evaluate");
  // a calibration map changes values, not order: rankings are scored on the uncalibrated values
  return lcm::model::compute_metrics(names, t, y, calibrated ? &raw : nullptr);
}

std::string undefined_metric_reason(const lcm::model::MetricsSummary& m,
                                    const std::string& metric) {
  const std::vector<std::pair<std::string, double>> means{{"mape", m.mean_mape},
                                                          {"spearman", m.mean_spearman},
                                                          {"ndcg", m.mean_ndcg},
                                                          {"ndcg_5", m.mean_ndcg_5},
                                                          {"ndcg_1", m.mean_ndcg_1},
                                                          {"top1_recovered", m.mean_top1_recovered},
                                                          {"top5_recovered", m.mean_top5_recovered},
                                                          {"weighted_mape", m.weighted_mape}};
  const auto it =
      std::find_if(means.begin(), means.end(), [&](const auto& kv) { return kv.first == metric; });
  if (it == means.end()) throw std::invalid_argument("undefined_metric_reason: metric " + metric);
  if (!std::isnan(it->second)) return "";
  const int64_t n = int64_t(m.programs.size());
  const int64_t single = std::count_if(m.programs.begin(), m.programs.end(),
                                       [](const auto& p) { return p.n_schedules < 2; });
  const std::string programs = n == 1 ? "the 1 program" : "all " + std::to_string(n) + " programs";
  if (n == 0) return "no program was evaluated";
  if (metric == "mape" || metric == "weighted_mape")
    return "a measured speedup of 0 makes the percentage error undefined";
  if (single == n)
    return programs + (n == 1 ? " has" : " have") + " fewer than 2 schedules: nothing to rank";
  const std::string split = std::to_string(single) + " of the " + std::to_string(n) +
                            " programs have fewer than 2 schedules, the other " +
                            std::to_string(n - single);
  const std::string constant =
      " constant measured or predicted speedups (after rounding to 6 decimals, model-spec §7.1)";
  if (metric == "spearman" && single == 0) return programs + (n == 1 ? " has" : " have") + constant;
  if (metric == "spearman") return split + " have" + constant;
  if (metric == "top1_recovered" || metric == "top5_recovered")
    return split + " have a best measured speedup <= 0";
  return split + " have undefined nDCG";  // (not expected: nDCG needs only 2 schedules)
}

void require_finite_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& p,
                                const std::string& weights_path) {
  int64_t bad = 0;
  const Prediction* first = nullptr;
  for (const Prediction& x : p)
    if (!std::isfinite(x.predicted)) {
      ++bad;
      if (!first) first = &x;
    }
  if (bad == 0) return;
  const auto& prog = ds.programs[size_t(first->program)];
  throw std::runtime_error(std::to_string(bad) + " of " + std::to_string(p.size()) +
                           " predictions are not finite (first: program " + prog.name +
                           ", schedule " +
                           std::to_string(prog.schedule_index[size_t(first->schedule)]) +
                           "): the weights " + weights_path + " are broken (NaN/inf)");
}

}  // namespace lcm::train
