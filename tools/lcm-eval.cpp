// lcm-eval: evaluates a checkpoint (eval.weights_path) on eval.input_file (default
// data.valid_file) with the metrics of docs/model-spec.md §7: per-program MAPE / Spearman / nDCG /
// nDCG@5 / nDCG@1 and top-1 / top-5 speedup recovered, their unweighted means and the
// datapoint-weighted MAPE. Prints a table; writes eval_<name>.{json,csv,svg}. With --compare it
// reads such reports instead (one setting per argument, its seeds' reports) and prints each
// metric's mean ± sd per setting and the paired per-program differences against the first.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/cli.hpp"
#include "tools/common/eval_input.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "train/compare_reports.hpp"
#include "train/eval_output.hpp"
#include "train/predictor.hpp"
#include "train/splits.hpp"
#include "train/startup_checks.hpp"

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-eval", [&] {
    bool quiet = false, per_program = false;
    std::vector<std::string> compare;
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-eval: evaluate a checkpoint on eval.input_file, default data.valid_file (model-spec "
        "§7 metrics).\n"
        "Usage: lcm-eval [--config FILE] eval.weights_path=CKPT [eval.input_file=PROGRAMS] "
        "[key=value ...]\n"
        "Writes experiment.base_path/eval_<name>.json (report), .csv (per program), .svg "
        "(predicted vs measured, log-log).\n"
        "       lcm-eval --compare [LABEL:]REPORTS [LABEL:]REPORTS ...   (REPORTS: eval_*.json "
        "files or globs, comma-separated: one setting's seeds)",
        [&](CLI::App& app) {
          app.add_flag("-q,--quiet", quiet, "no prepare progress");
          app.add_flag("--per-program", per_program, "also print one table row per program");
          app.add_option("--compare", compare,
                         "compare settings from their lcm-eval reports instead of evaluating: "
                         "each argument [LABEL:]FILES is one setting (report paths or glob "
                         "patterns, comma-separated, one per seed); prints each metric's mean ± "
                         "sd over the setting's reports and the paired per-program difference "
                         "of every setting against the first");
        });
    if (!compare.empty()) {
      if (compare.size() < 2)
        throw lcm::config::ConfigError("--compare needs at least two settings (got " +
                                       std::to_string(compare.size()) + ")");
      std::vector<lcm::train::ReportGroup> groups;
      for (const std::string& a : compare) groups.push_back(lcm::train::load_report_group(a));
      try {
        std::printf("%s", lcm::train::compare_table(groups).c_str());
      } catch (const std::invalid_argument& e) {  // settings that cannot be compared: usage
        throw lcm::config::ConfigError(e.what());
      }
      return 0;
    }
    // A bad experiment.base_path (a file, or a file where <base>/cache goes) fails now with the
    // line of lcm-train / lcm-prepare, not after the data is prepared.
    lcm::train::require_writable_base_path(c, false);
    const lcm::train::RunPaths paths = lcm::train::run_paths(c);
    lcm::tools::require_outputs_not_inputs(
        {{"the report", paths.eval_json},
         {"the report", paths.eval_csv},
         {"the report", paths.eval_svg}},
        {{c.eval_input_key(), c.eval_input()}, {"eval.weights_path", c.eval.weights_path}});
    lcm::train::ensure_cache_folder(c);
    const lcm::tools::ScoredInput in = lcm::tools::score_eval_input(c, "lcm-eval", false, !quiet);
    const lcm::train::Predictor& predictor = in.predictor;
    const lcm::data::Dataset& ds = in.split.dataset;
    const std::vector<lcm::train::Prediction>& preds = in.predictions;
    const lcm::model::MetricsSummary m = lcm::train::evaluate_predictions(ds, preds);
    std::printf("lcm-eval: %s on %s: %lld programs, %lld datapoints\n", c.eval.weights_path.c_str(),
                c.eval_input().c_str(), (long long)m.programs.size(), (long long)m.n_datapoints);
    std::printf("%s", lcm::train::metrics_table(m, per_program).c_str());
    lcm::train::CalibrationEffect cal = lcm::train::calibration_effect(ds, preds);
    cal.folds = predictor.calibration().folds;
    cal.weighting = predictor.calibration().weighting;
    cal.objective = predictor.calibration().kind;
    if (cal.applied) {
      const std::string fitted =
          (cal.folds > 0 ? "fitted on out-of-fold predictions of " + std::to_string(cal.folds) +
                               " fold models"
                         : std::string("fitted on the model's training predictions")) +
          ", minimising the " + (cal.weighting == "program" ? "per-program" : "datapoint") +
          (cal.objective == "isotonic_mape" ? " MAPE" : " squared ln error");
      std::printf(
          "%-28s %10.4f  (datapoint-weighted %.4f; the checkpoint's calibration map, %s, "
          "changes values only, not rankings; eval.calibrated=false for raw outputs)\n",
          "MAPE before calibration", cal.mean_mape, cal.weighted_mape, fitted.c_str());
      std::printf("%-28s %10.4f\n%-28s %10.4f\n", "median factor before calib.",
                  cal.median_error_factor, "within 2x before calib.", cal.within_2x);
    }
    // an undefined mean (n/a, null in the report) is said with its reason; the exit code stays 0
    for (const std::string& n : lcm::train::undefined_metric_notes(m))
      std::fprintf(stderr, "lcm-eval: warning: %s\n", n.c_str());
    lcm::train::write_eval_report(
        paths, "lcm-eval " + c.experiment.name + ": predicted vs measured speedup",
        c.eval.weights_path, c.eval_input(), m, preds, cal);
    std::printf("lcm-eval: wrote %s, %s, %s\n", paths.eval_json.c_str(), paths.eval_csv.c_str(),
                paths.eval_svg.c_str());
    return 0;
  });
}
