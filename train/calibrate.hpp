// The calibration map of a cost-model checkpoint (model/calibration.hpp) as lcm uses it: fitted
// on a split's predictions, stored in the checkpoint as "lcm.calibration", read back and applied
// to predictions by Predictor (lcm-eval, lcm-predict) and serve::Scorer (lcm-serve, liblcm).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "model/calibration.hpp"
#include "train/evaluate.hpp"

namespace lcm::train {

/// The isotonic squared-ln-error map (fit_isotonic_log) of uncalibrated predictions `p` (their
/// `score`, the model's raw output, against `measured`; unlabelled ones left out), through score
/// 0 → 1× when `anchor_at_zero` (a relative_to_identity model), each program counting alike
/// (`weighting` program: each prediction weighted 1 / its program's labelled predictions, by
/// Prediction::program) or each datapoint. The map is not kept when it has fewer than
/// model::kMinCalibrationSteps steps, or when it would raise the mean squared ln error of `p`
/// (the fit is optimal for its step function, not for the continuous
/// map made of it, and a model whose outputs are not ln speedups, e.g. trained by a listwise
/// loss alone, can lose by it): the result is then kind "none" (not active()) with the rejected
/// map's fit_* numbers and `refused` saying why, so that storing it records why the checkpoint
/// reports raw outputs. Throws std::invalid_argument when `p` has no labelled, finite prediction.
lcm::model::Calibration fit_calibration(
    const std::vector<Prediction>& p, bool anchor_at_zero = false,
    config::CalibrationWeighting weighting = config::CalibrationWeighting::Program);

/// The map stored in checkpoint `path` (metadata "lcm.calibration"); kind "none" when absent.
/// Throws std::runtime_error for an unreadable file or malformed metadata (naming the field).
lcm::model::Calibration load_calibration(const std::string& path);

/// Rewrites checkpoint `path` atomically with metadata "lcm.calibration" = cal.to_json(), every
/// tensor and other metadata unchanged. Throws std::runtime_error naming the path on failure.
void store_calibration(const std::string& path, const lcm::model::Calibration& cal);

/// One line for people: "calibration map (squared ln error): N knots fitted on M train
/// datapoints, their per-program MAPE B% -> A%, median error factor F1x -> F2x, within 2x
/// W1% -> W2% (per-program rankings unchanged)" ("their MAPE" for a datapoint-weighted map; no
/// factors for a map that does not record them), or why there is no map.
std::string calibration_summary(const lcm::model::Calibration& cal);

/// One line for people on predictions `p` of split `split` through a calibration map: "<split>
/// split, uncalibrated -> calibrated: MAPE B -> A, median error factor F1x -> F2x, within 2x
/// W1% -> W2%" (per-program mean MAPE and the error factors of model::compute_metrics, over the
/// labelled predictions; uncalibrated = Prediction::raw_speedup()). "" when none is labelled.
std::string calibration_check(const std::vector<Prediction>& p, const std::string& split);

}  // namespace lcm::train
