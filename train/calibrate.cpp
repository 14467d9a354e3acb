// Fitting, storing and applying a checkpoint's calibration map (see calibrate.hpp).
#include "train/calibrate.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engine/safetensors.hpp"
#include "train/crossfit.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"

namespace lcm::train {

lcm::model::Calibration fit_calibration(const std::vector<Prediction>& p, bool anchor_at_zero,
                                        config::CalibrationWeighting weighting, bool flat_tails) {
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
      lcm::model::fit_isotonic_mape(score, y, before, 4096, anchor_at_zero, program, flat_tails);
  if (cal.fit_mape_after > cal.fit_mape_before) {  // worse than no map: keep the raw outputs
    lcm::model::Calibration none;
    none.fit_points = cal.fit_points;
    none.fit_mape_before = cal.fit_mape_before;
    none.fit_mape_after = cal.fit_mape_after;
    none.fit_split = cal.fit_split;
    none.weighting = cal.weighting;
    return none;
  }
  return cal;
}

void apply_calibration(const lcm::model::Calibration& cal, std::vector<Prediction>& p) {
  if (!cal.active()) return;
  for (Prediction& x : p) x.predicted = cal.apply(x.score);
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

lcm::model::Calibration calibrate_checkpoint(const config::Config& c, const std::string& path,
                                             const TrainOptions& o, int* exit_code) {
  if (exit_code) *exit_code = 0;
  config::Config e = c;
  e.eval.weights_path = path;
  e.eval.calibrated = false;  // fitted on the raw (for an ensemble: averaged) scores
  const Predictor predictor(e);
  const bool relative = predictor.model().config().relative_to_identity;
  if (c.training.calibration_folds > 0) {
    const OutOfFold oof = out_of_fold_predictions(c, o);
    if (oof.exit_code != 0) {
      if (exit_code) *exit_code = oof.exit_code;
      return {};
    }
    // where the checkpoint puts its own training programs (as each fold model's are measured)
    const double own =
        score_shift(predictor.predict(prepare_from_config(c, "train", !o.quiet).dataset), relative);
    const lcm::model::Calibration cal = fit_cross_fitted(c, oof, own, relative);
    store_calibration(path, cal);
    return cal;
  }
  const lcm::data::PreparedSplit train = prepare_from_config(c, "train", !o.quiet);
  const lcm::model::Calibration cal =
      fit_calibration(predictor.predict(train.dataset), relative, c.training.calibration_weighting);
  store_calibration(path, cal);
  return cal;
}

std::string calibration_summary(const lcm::model::Calibration& cal) {
  // "the out-of-fold predictions (3 fold models) of 32980 train datapoints" / "32980 train ..."
  const std::string points = std::to_string(cal.fit_points) + " " + cal.fit_split + " datapoints";
  const std::string of = cal.folds > 0 ? "out-of-fold predictions (" + std::to_string(cal.folds) +
                                             " fold models) of " + points
                                       : points;
  const char* whose = cal.weighting == "program" ? "per-program " : "";
  char buf[384];
  if (!cal.active() && cal.fit_points > 0) {
    std::snprintf(buf, sizeof buf,
                  "no calibration map: the one fitted on %s would raise their %sMAPE from %.1f%% "
                  "to %.1f%%, so the raw model outputs are reported",
                  of.c_str(), whose, cal.fit_mape_before, cal.fit_mape_after);
    return buf;
  }
  if (!cal.active()) return "no calibration map (raw model outputs)";
  std::snprintf(buf, sizeof buf,
                "calibration map: %zu knots fitted on %s, their %sMAPE %.1f%% -> %.1f%% "
                "(per-program rankings unchanged)",
                cal.x.size(), of.c_str(), whose, cal.fit_mape_before, cal.fit_mape_after);
  return buf;
}

}  // namespace lcm::train
