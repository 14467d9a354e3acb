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
/// datapoint-weighted MAPE.
std::string metrics_table(const lcm::model::MetricsSummary& m, bool per_program);

/// Writes paths.eval_json (format "lcm-eval-report", format_version 2: weights_path, the scored
/// file as "valid_file", counts, means, weighted MAPE, per-program metrics; NaN as null),
/// paths.eval_csv (one row per program) and paths.eval_svg (predicted vs measured speedup,
/// log-log, `title`), atomically. Throws std::runtime_error on I/O failure.
void write_eval_report(const RunPaths& paths, const std::string& title,
                       const std::string& weights_path, const std::string& input_file,
                       const lcm::model::MetricsSummary& m, const std::vector<Prediction>& preds);

/// Every prediction of `preds` (of prepared programs `ds`) as CSV with the header
/// program,schedule_index,sched_str,predicted_speedup,measured_speedup (an unknown measured
/// speedup is an empty field), or as JSON Lines with the same fields (null when unknown).
std::string predictions_text(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds,
                             bool jsonl);

/// Each program's schedules best first by predicted speedup (ties keep schedule order): a title
/// line "<program> (N schedules)", a header, then rank, schedule index, predicted, measured
/// ("-" when unknown), sched_str.
std::string ranked_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds);

}  // namespace lcm::train
