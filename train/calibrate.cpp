// Fitting, storing and applying a checkpoint's calibration map (see calibrate.hpp).
#include "train/calibrate.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "model/metrics.hpp"
#include "model/speedup.hpp"
#include "train/run_state.hpp"

namespace lcm::train {

lcm::model::Calibration fit_calibration(const std::vector<Prediction>& p, bool anchor_at_zero,
                                        config::CalibrationWeighting weighting) {
  std::vector<double> score, y, before;
  std::vector<int64_t> program;
  for (const Prediction& x : p) {
    if (std::isnan(x.measured)) continue;
    score.push_back(x.score);
    y.push_back(x.measured);
    before.push_back(x.raw_speedup());
    if (weighting == config::CalibrationWeighting::Program) program.push_back(x.program);
  }
  lcm::model::Calibration cal =
      lcm::model::fit_isotonic_log(score, y, before, 4096, anchor_at_zero, program);
  std::string refused;
  char buf[160];
  if (cal.fit_steps < lcm::model::kMinCalibrationSteps) {
    std::snprintf(buf, sizeof buf, "it has %lld step%s, fewer than the %lld a map needs",
                  (long long)cal.fit_steps, cal.fit_steps == 1 ? "" : "s",
                  (long long)lcm::model::kMinCalibrationSteps);
    refused = buf;
  } else if (cal.fit_log_mse_after > cal.fit_log_mse_before) {
    std::snprintf(buf, sizeof buf, "it would raise their mean squared ln error from %.4g to %.4g",
                  cal.fit_log_mse_before, cal.fit_log_mse_after);
    refused = buf;
  }
  if (refused.empty()) return cal;
  lcm::model::Calibration none = cal;  // the rejected fit's numbers, without its knots
  none.kind = "none";
  none.x.clear();
  none.log_speedup.clear();
  none.tail_slope = 1;
  none.refused = refused;
  return none;
}

lcm::model::Calibration load_calibration(const std::string& path) {
  const lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  auto it = f.metadata.find(meta::kCalibration);
  if (it == f.metadata.end()) return {};
  try {
    return lcm::model::Calibration::from_json(it->second);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

void store_calibration(const std::string& path, const lcm::model::Calibration& cal) {
  lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  f.metadata[meta::kCalibration] = cal.to_json();
  lcm::write_safetensors(path, f);
}

std::string calibration_summary(const lcm::model::Calibration& cal) {
  // "the out-of-fold predictions (3 fold models) of 32980 train datapoints" / "32980 train ..."
  const std::string points = std::to_string(cal.fit_points) + " " + cal.fit_split + " datapoints";
  const std::string of = cal.folds > 0 ? "out-of-fold predictions (" + std::to_string(cal.folds) +
                                             " fold models) of " + points
                                       : points;
  const char* whose = cal.weighting == "program" ? "per-program " : "";
  char buf[640];
  if (!cal.active() && cal.fit_points > 0) {
    if (!cal.refused.empty()) {
      std::snprintf(buf, sizeof buf,
                    "no calibration map: the one fitted on %s was not kept (%s), so the raw model "
                    "outputs are reported",
                    of.c_str(), cal.refused.c_str());
      return buf;
    }
    std::snprintf(buf, sizeof buf,
                  "no calibration map: the one fitted on %s would raise their %sMAPE from %.1f%% "
                  "to %.1f%%, so the raw model outputs are reported",
                  of.c_str(), whose, cal.fit_mape_before, cal.fit_mape_after);
    return buf;
  }
  if (!cal.active()) return "no calibration map (raw model outputs)";
  std::string factors;
  if (std::isfinite(cal.fit_factor_before) && std::isfinite(cal.fit_factor_after)) {
    char f[160];
    std::snprintf(f, sizeof f, ", median error factor %.2fx -> %.2fx, within 2x %.0f%% -> %.0f%%",
                  cal.fit_factor_before, cal.fit_factor_after, 100 * cal.fit_within_2x_before,
                  100 * cal.fit_within_2x_after);
    factors = f;
  }
  std::snprintf(buf, sizeof buf,
                "calibration map (%s): %zu knots fitted on %s, their %sMAPE %.1f%% -> %.1f%%%s "
                "(per-program rankings unchanged)",
                cal.kind == "isotonic_log" ? "squared ln error" : "MAPE", cal.x.size(), of.c_str(),
                whose, cal.fit_mape_before, cal.fit_mape_after, factors.c_str());
  return buf;
}

/// One line comparing uncalibrated and calibrated predictions of a split.
std::string calibration_check(const std::vector<Prediction>& p, const std::string& split) {
  std::vector<double> t, raw, cal;
  std::vector<std::string> names;
  for (const Prediction& x : p) {
    if (std::isnan(x.measured)) continue;
    names.push_back(std::to_string(x.program));
    t.push_back(x.measured);
    raw.push_back(x.raw_speedup());
    cal.push_back(x.predicted);
  }
  if (t.empty()) return "";
  const lcm::model::MetricsSummary a = lcm::model::compute_metrics(names, t, raw);
  const lcm::model::MetricsSummary b = lcm::model::compute_metrics(names, t, cal);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s split, uncalibrated -> calibrated: MAPE %.1f -> %.1f, median error factor "
                "%.2fx -> %.2fx, within 2x %.0f%% -> %.0f%%",
                split.c_str(), a.mean_mape, b.mean_mape, a.median_error_factor,
                b.median_error_factor, 100 * a.within_2x, 100 * b.within_2x);
  return buf;
}

}  // namespace lcm::train
