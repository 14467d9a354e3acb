// The calibration map of a cost-model checkpoint: a strictly increasing map from the model's raw
// output (its score) to the speedup lcm reports, fitted after training on the training split to
// minimise the squared error of ln speedup (so that over- and under-prediction by the same factor
// cost the same, and shrinking every prediction cannot win as it does under MAPE). Strictly
// increasing, so every per-program ranking metric (Spearman, nDCG, top-k) is the same before and
// after it; only the values change.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
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
  /// none | isotonic_log (fitted on squared ln error, fit_isotonic_log) | isotonic_mape (older
  /// maps fitted on MAPE; they still load and apply as stored)
  std::string kind = "none";
  std::vector<double> x;            // knot scores, strictly increasing [K]
  std::vector<double> log_speedup;  // ln of the reported speedup at each knot [K]
  double tail_slope = 1;            // d ln(speedup) / d score beyond the end knots
  // what the fit saw (reported by tools; not used by apply)
  int64_t fit_points = 0;      // datapoints the map was fitted on
  double fit_mape_before = 0;  // their MAPE (%) without the map
  double fit_mape_after = 0;   // their MAPE (%) with it
  /// Their median error factor (median of max(ŷ/y, y/ŷ) over datapoints, as lcm-eval reports it)
  /// and share of datapoints within 2×, without and with the map. NaN: not recorded (older maps).
  double fit_factor_before = std::numeric_limits<double>::quiet_NaN();
  double fit_factor_after = std::numeric_limits<double>::quiet_NaN();
  double fit_within_2x_before = std::numeric_limits<double>::quiet_NaN();
  double fit_within_2x_after = std::numeric_limits<double>::quiet_NaN();
  /// The fit's objective, the (weighted) mean squared ln error, without and with the map. NaN:
  /// not recorded.
  double fit_log_mse_before = std::numeric_limits<double>::quiet_NaN();
  double fit_log_mse_after = std::numeric_limits<double>::quiet_NaN();
  /// The steps of the fitted step function (its distinct values: isotonic blocks, the anchor's
  /// 0 included); 0: not recorded (older maps).
  int64_t fit_steps = 0;
  /// For kind none after a fit: why its map was not kept (one phrase, e.g. "it has 2 knots,
  /// fewer than the 3 a map needs"); "" otherwise.
  std::string refused;
  std::string fit_split = "train";  // which split it was fitted on
  /// How the fit weighted datapoints (in its objective and fit_mape_*): "datapoint" (every
  /// datapoint alike) or "program" (each program's datapoints weighted 1 / its datapoints, so
  /// that every program counts alike, as in the per-program mean MAPE of model-spec §7.4 that
  /// lcm-eval reports). Maps without the field are "datapoint".
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
  /// "weighting":...,"folds":...} plus, when recorded, "fit_factor_before", "fit_factor_after",
  /// "fit_within_2x_before", "fit_within_2x_after", "fit_log_mse_before", "fit_log_mse_after"
  /// and "refused", with 17 significant digits, so from_json(to_json()) is exact.
  std::string to_json() const;
  /// Parses to_json()'s text (the optional fields may be absent: older maps). Throws
  /// std::runtime_error naming the bad field: unknown kind or
  /// format_version, knot arrays of different lengths, knots that are not finite or not strictly
  /// increasing, a knot whose |ln speedup| exceeds 50, a tail slope outside [1e-9, 1e9], a
  /// weighting other than datapoint|program, folds that are not an integer in {0} ∪ [2, 1000].
  static Calibration from_json(const std::string& text);
};

/// The fewest steps (Calibration::fit_steps) a fitted map may have: a fit with fewer (the scores
/// barely order the speedups, so isotonic pooling merged them into one or two blocks) is not
/// kept (train::fit_calibration), because a one-step map reports one speedup for every schedule
/// and a two-step map sorts them into two classes.
constexpr int64_t kMinCalibrationSteps = 3;

/// The monotone map from `score` to ln `speedup` that minimises the squared ln error
/// (isotonic_log): the non-decreasing step function g minimising Σ_i w_i (g(score_i) − ln y_i)²,
/// i.e. the weighted isotonic regression of ln y on the score, whose value on a block of scores
/// is the block's weighted mean of ln y, a geometric mean of its speedups (pool-adjacent-
/// violators, Robertson, Wright & Dykstra 1988, "Order Restricted Statistical Inference" §1.4).
/// Over- and under-prediction by the same factor cost the same, so unlike MAPE (at most 100 %
/// for any under-prediction, unbounded above) shrinking predictions towards 0 cannot lower it:
/// when ln y − score has mean 0 in every block, the map is the identity at the knots.
/// Scores are first grouped into at most `max_bins` runs of consecutive scores of about equal
/// size (equal scores are never split), on which g is constant. The step function is then made
/// continuous and strictly increasing for Calibration: a knot at each block's smallest and
/// largest score (one when they are equal) with the block's mean ln y, so every fitted point
/// keeps its block's value, and linear ramps between blocks; each knot's ln value is raised when
/// needed so that every segment has slope ≥ 0.02 (distinct scores stay distinct in float32 and
/// printed values; the tilt this adds inside a block is 0.02 × its score width). Beyond the end
/// knots the map is flat up to that same slope floor (tail_slope 0.02): it reports about the end
/// knot's speedup, the mean of the most extreme block, and never extrapolates a slope learnt
/// between two crowded blocks (isotonic end segments can be arbitrarily steep, which took
/// schedules outside the fitted range to 9,000× and 2e−6×).
///
/// With `anchor_at_zero` (a model relative to the untransformed schedule, whose score 0 means
/// "as fast as untransformed"), the map is forced through score 0 → speedup 1: g ≤ 0 on negative
/// scores and ≥ 0 on positive ones (each side the clamp of its own fit, optimal for any
/// separable convex loss), with the knot (0, 0), so the untransformed program still reports 1×.
/// score, speedup: [n], the model's raw outputs and the measured speedups (×) of the same
/// datapoints. Points with a non-finite score, or a speedup that is not finite and > 0 or whose
/// |ln| exceeds 50, are left out (counted out of fit_points).
///
/// `program` ([n] ids, or empty): with ids, each datapoint's weight is w_i = 1 / n_p, n_p the
/// fitted datapoints of its program, so every program counts alike (weighting = "program", and
/// fit_mape_* are the per-program mean MAPE of model-spec §7.4); empty: w_i = 1 (weighting =
/// "datapoint"). Fills fit_points, fit_mape_*, fit_factor_*, fit_within_2x_* and
/// fit_log_mse_* and fit_steps (`before`: the uncalibrated predictions, [n] speedups ×). The
/// result may have fewer than kMinCalibrationSteps steps; train::fit_calibration refuses it then.
/// Throws std::invalid_argument for arrays of different lengths, max_bins < 1 or no usable point.
Calibration fit_isotonic_log(const std::vector<double>& score, const std::vector<double>& speedup,
                             const std::vector<double>& before, int max_bins = 4096,
                             bool anchor_at_zero = false, const std::vector<int64_t>& program = {});

/// MAPE (%) of model-spec §7 over paired predictions and measurements: mean of
/// 100·|y − ŷ| / (y + 1e-5) over the pairs whose y is not NaN. NaN when there is none.
double mape_percent(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace lcm::model
