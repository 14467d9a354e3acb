// lcm-eval --compare: a study's settings side by side from their lcm-eval reports (one report per
// seed): each metric's mean ± sd over the seeds of each setting, and each later setting's paired
// per-program difference against the first (docs/model-spec.md §7 metrics).
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

namespace lcm::train {

/// The per-program metrics of a report, in report order: MAPE, Spearman, nDCG, nDCG@5, nDCG@1,
/// top-1 and top-5 speedup recovered (NaN where the report has null).
using ReportMetrics = std::array<double, 7>;

/// One lcm-eval report (eval_<name>.json, format "lcm-eval-report", version 1 or 2).
struct EvalReport {
  std::string path;
  std::string valid_file;  // the file it scored
  /// The means over programs (ReportMetrics order), the datapoint-weighted MAPE and, last, the
  /// MAPE before the checkpoint's calibration map ("uncalibrated.mape"; the MAPE itself when
  /// "calibrated" is false); NaN for null, for the top-k fields a version-1 report lacks and for
  /// the last when the report predates calibration.
  std::array<double, 9> mean{};
  std::map<std::string, ReportMetrics> programs;  // by program name
};

/// Reads an lcm-eval report. Throws std::runtime_error "<path>: <what>" for an unreadable file,
/// malformed JSON (with the byte offset), another format, an unknown format_version or a field of
/// the wrong type.
EvalReport read_eval_report(const std::string& path);

/// One setting of a study: a label and the reports of its seeds.
struct ReportGroup {
  std::string label;
  std::vector<EvalReport> reports;
};

/// The setting named by one --compare argument: "[LABEL:]FILES", FILES a comma-separated list of
/// report paths or glob patterns (each pattern's matches in name order; a path cannot hold ',');
/// LABEL is the text before the first ':' when it holds no '/', ',' or glob character, else the
/// label is the whole argument. Throws std::runtime_error for a pattern that matches nothing, a
/// report named twice, and what read_eval_report throws.
ReportGroup load_report_group(const std::string& arg);

/// The comparison as text: a header per setting (reports, programs, the scored files), the table
/// of each metric's mean ± sample sd over the setting's reports (the sd is left out for one
/// report; "(k of n)" when only k reports define the mean), then for every setting after the
/// first its paired per-program difference against the first: over the programs both settings
/// scored where both values are defined, each program's value averaged over the setting's
/// reports, d = setting − first; the mean of d ± the half-width of its 95% normal interval
/// (1.96·sd/√n) and the programs where the setting is better (lower MAPE, higher otherwise) out
/// of n, values equal but for rounding (relative 1e-9) counted as tied. Throws
/// std::invalid_argument for fewer than two settings, two settings with one label, or one report
/// in two settings.
std::string compare_table(const std::vector<ReportGroup>& groups);

}  // namespace lcm::train
