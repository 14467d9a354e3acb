// The calibration map of a cost-model checkpoint: a strictly increasing map from the model's raw
// output (its score) to the speedup lcm reports, fitted after training on the training split to
// minimise MAPE. Strictly increasing, so every per-program ranking metric (Spearman, nDCG, top-k)
// is the same before and after it; only the values, and so MAPE, change.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lcm::model {

/// A fitted calibration map (checkpoint metadata "lcm.calibration", docs/accuracy.md).
///
/// The map is piecewise linear in (score, ln speedup): knots (x[k], log_speedup[k]), both strictly
/// increasing, with linear interpolation between knots and, outside [x.front(), x.back()], the
/// straight line through the end knot with slope `tail_slope` (> 0), its ln speedup held within
/// ±50 (the bound of every knot). So apply() is continuous, strictly increasing over all finite
/// scores whose value lies inside e^±50 (non-decreasing beyond), and its value is finite and > 0.
///
/// The score is the model's raw output: ln speedup for a model with log output
/// (ModelConfig::log_output), the speedup itself for the reference head.
struct Calibration {
  std::string kind = "none";        // none | isotonic_mape
  std::vector<double> x;            // knot scores, strictly increasing [K]
  std::vector<double> log_speedup;  // ln of the reported speedup at each knot [K]
  double tail_slope = 1;            // d ln(speedup) / d score beyond the end knots
  // what the fit saw (reported by tools; not used by apply)
  int64_t fit_points = 0;           // datapoints the map was fitted on
  double fit_mape_before = 0;       // their MAPE (%) without the map
  double fit_mape_after = 0;        // their MAPE (%) with it
  std::string fit_split = "train";  // which split it was fitted on
  /// Whose MAPE the fit minimised (and fit_mape_* measure): "datapoint" (every datapoint alike)
  /// or "program" (each program's datapoints weighted 1 / its datapoints: the per-program mean
  /// MAPE of model-spec §7.4, which lcm-eval reports). Maps without the field are "datapoint".
  std::string weighting = "datapoint";
  /// 0: fitted on the model's own predictions of its training split (in-sample); K ≥ 2: on
  /// out-of-fold predictions of it by K fold models (training.calibration_folds,
  /// train/crossfit.hpp). Maps without the field are in-sample fits.
  int folds = 0;

  /// True when the map changes predictions (kind != none and at least one knot).
  bool active() const { return kind != "none" && !x.empty(); }

  /// The calibrated speedup (×, in [e^−50, e^50]) of raw score `score`. A non-finite score gives
  /// NaN for NaN, 0 for −∞ and +∞ for +∞ (monotone at the limits). Requires active().
  double apply(double score) const;

  /// JSON {"format_version":1,"kind":...,"x":[...],"log_speedup":[...],"tail_slope":...,
  /// "fit_points":...,"fit_mape_before":...,"fit_mape_after":...,"fit_split":...,
  /// "weighting":...,"folds":...} with 17 significant digits, so from_json(to_json()) is exact.
  std::string to_json() const;
  /// Parses to_json()'s text. Throws std::runtime_error naming the bad field: unknown kind or
  /// format_version, knot arrays of different lengths, knots that are not finite or not strictly
  /// increasing, a knot whose |ln speedup| exceeds 50, a tail slope outside [1e-9, 1e9], a
  /// weighting other than datapoint|program, folds that are not an integer in {0} ∪ [2, 1000].
  static Calibration from_json(const std::string& text);
};

/// The MAPE-optimal monotone map from `score` to `speedup` (isotonic_mape): the non-decreasing
/// step function f minimising Σ_i |f(score_i) − y_i| / y_i, i.e. the weighted isotonic L1
/// regression of y on the score with weights 1/y (its value on a block of scores is the block's
/// weighted median, a lower quantile rather than the mean; pool-adjacent-violators with weighted
/// medians, Robertson, Wright & Dykstra 1988, "Order Restricted Statistical Inference" §1.4).
/// Scores are first grouped into at most `max_bins` runs of consecutive scores of about equal
/// size (equal scores are never split), on which f is constant. The step function is then made
/// continuous and strictly increasing for Calibration: one knot per block at the block's mean
/// score with ln of its median, each knot's ln value raised when needed so that every segment has
/// slope ≥ 0.02 (distinct scores stay distinct in float32 and printed values), tails with the
/// mean slope of the whole map (1 with a single block).
///
/// With `anchor_at_zero` (a model relative to the untransformed schedule, whose score 0 means
/// "as fast as untransformed"), the map is forced through score 0 → speedup 1: f ≤ 1 on negative
/// scores and ≥ 1 on positive ones (each side the clamp of its own fit), with the knot (0, 0), so
/// the untransformed program still reports exactly 1×.
/// score, speedup: [n], the model's raw outputs and the measured speedups (×) of the same
/// datapoints. Points with a non-finite score, or a speedup that is not finite and > 0 or whose
/// |ln| exceeds 50, are left
/// out (counted out of fit_points). Fills fit_points, fit_mape_before (MAPE of `before`, the
/// uncalibrated predictions, [n] speedups ×) and fit_mape_after.
///
/// `program` ([n] ids, or empty): with ids, each datapoint's weight is 1 / (y · n_p), n_p the
/// fitted datapoints of its program, so the fit minimises the unweighted mean over programs of
/// their MAPE (model-spec §7.4, the MAPE lcm-eval reports) instead of the MAPE over datapoints,
/// where programs with many schedules dominate; weighting = "program" and fit_mape_* are that
/// per-program mean. Empty: weighting = "datapoint".
///
/// `flat_tails`: beyond the end knots the map keeps the slope floor (0.02) instead of the mean
/// slope of the map, so that a score outside the fitted range reports about the end knot's
/// speedup (a cross-fitted map, whose scores come from other models, train/crossfit.hpp).
/// Throws std::invalid_argument for arrays of different lengths, max_bins < 1 or no usable point.
Calibration fit_isotonic_mape(const std::vector<double>& score, const std::vector<double>& speedup,
                              const std::vector<double>& before, int max_bins = 4096,
                              bool anchor_at_zero = false, const std::vector<int64_t>& program = {},
                              bool flat_tails = false);

/// MAPE (%) of model-spec §7 over paired predictions and measurements: mean of
/// 100·|y − ŷ| / (y + 1e-5) over the pairs whose y is not NaN. NaN when there is none.
double mape_percent(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace lcm::model
