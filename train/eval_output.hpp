// What lcm-eval and lcm-predict print and write, as text any caller can reuse: the metrics table
// (docs/model-spec.md §7), the evaluation report (JSON, per-program CSV, log-log SVG), and the
// predictions as CSV, JSONL or a per-program ranking.
#pragma once
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "model/metrics.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"

namespace lcm::train {

/// The metrics table: with `per_program` one row per program (schedules, MAPE, Spearman, nDCG,
/// nDCG@5, nDCG@1, top-1/top-5 recovered), then the means over programs and the
/// datapoint-weighted MAPE. An undefined (NaN) value prints as "n/a".
std::string metrics_table(const lcm::model::MetricsSummary& m, bool per_program);

/// What a checkpoint's calibration map changed in a report: the MAPEs (%) of the same
/// predictions before the map (per-program mean and datapoint-weighted). The ranking metrics are
/// the same with and without it (the map is strictly increasing).
struct CalibrationEffect {
  bool applied = false;
  /// The uncalibrated predictions' per-program mean MAPE, datapoint MAPE, median error factor and
  /// within-2× share (MetricsSummary's definitions).
  double mean_mape = 0, weighted_mape = 0, median_error_factor = 0, within_2x = 0;
  /// How the applied map was fitted (lcm.calibration; set by the caller, which holds the map):
  /// 0 = on the model's own training predictions, K = on out-of-fold predictions of K fold
  /// models; how it weighed datapoints ("program" or "datapoint"); its objective (its kind:
  /// "isotonic_log" = squared ln error, "isotonic_mape" = MAPE).
  int folds = 0;
  std::string weighting;
  std::string objective;
};

/// The CalibrationEffect of predictions `p` of `ds` (applied when some prediction differs from its
/// uncalibrated value).
CalibrationEffect calibration_effect(const lcm::data::Dataset& ds,
                                     const std::vector<Prediction>& p);

/// Writes paths.eval_json (format "lcm-eval-report", format_version 2: weights_path, the scored
/// file as "valid_file", counts, means, weighted MAPE, per-program metrics; NaN as null; with an
/// applied `calibration`, "calibrated": true, "uncalibrated": {"mape", "weighted_mape",
/// "median_error_factor", "within_2x"} and "calibration": {"folds", "weighting", "objective"}),
/// paths.eval_csv (one row per program) and paths.eval_svg (predicted vs measured speedup,
/// log-log, `title`), atomically. Throws std::runtime_error on I/O failure.
void write_eval_report(const RunPaths& paths, const std::string& title,
                       const std::string& weights_path, const std::string& input_file,
                       const lcm::model::MetricsSummary& m, const std::vector<Prediction>& preds,
                       const CalibrationEffect& calibration = {});

/// One line per mean of `m` that is undefined (NaN): "mean Spearman is undefined (n/a in the
/// table, null in the report): <undefined_metric_reason>", in table order; empty when every mean
/// is a number.
std::vector<std::string> undefined_metric_notes(const lcm::model::MetricsSummary& m);

/// A prediction and its rank (1 = highest predicted speedup) among its program's schedules.
struct RankedPrediction {
  Prediction p;
  int64_t rank = 0;
};

/// `preds` (sorted by program, as predict_dataset returns them) with each program's schedules
/// best first by predicted speedup; ties keep schedule order.
std::vector<RankedPrediction> rank_predictions(const std::vector<Prediction>& preds);

/// Every prediction of `preds` (of prepared programs `ds`) as CSV with the header
/// program,schedule_index,sched_str,predicted_speedup,measured_speedup (an unknown measured
/// speedup is an empty field; text fields quoted by csv_field, RFC 4180; numbers round-trip,
/// format_number), or as JSON Lines with the same fields (null when unknown; strings escaped by
/// RapidJSON's Writer). `ranked`: each program's schedules best first (rank_predictions), with a
/// column / field `rank` after `program`.
std::string predictions_text(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds,
                             bool jsonl, bool ranked = false);

/// Each program's schedules best first by predicted speedup (ties keep schedule order): a title
/// line "<program> (N schedules)", a header, then rank, schedule index, predicted, measured
/// ("-" when unknown), sched_str. Speedups are printed with "%.Ng", N = distinguishing_digits of
/// the program's values, so that distinct predictions never look tied.
std::string ranked_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds);

}  // namespace lcm::train
