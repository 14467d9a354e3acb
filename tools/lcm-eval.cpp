// lcm-eval: evaluates a checkpoint (eval.weights_path) on data.valid_file with the metrics of
// model-spec §7: per-program MAPE / Spearman / nDCG / nDCG@5 / nDCG@1 and top-1 / top-5 speedup
// recovered (issue 7), their unweighted means and the datapoint-weighted MAPE. Prints a table; writes eval_<name>.{json,csv,svg}.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/atomic_file.hpp"
#include "engine/threads.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "train/checkpoint.hpp"
#include "config/cli.hpp"
#include "config/config.hpp"
#include "tools/common/run_tool.hpp"
#include "train/evaluate.hpp"
#include "train/splits.hpp"
#include "train/losses.hpp"
#include "train/report.hpp"
#include "train/startup_checks.hpp"
#include "train/weights_check.hpp"

namespace {

void put(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const char* k, double v) {
  w.Key(k);
  if (std::isfinite(v))
    w.Double(v);
  else
    w.Null();
}

int eval(int argc, char** argv) {
  bool quiet = false, per_program = false;
  lcm::config::Config c = lcm::config::load_config(
      argc, argv,
      "lcm-eval: evaluate a checkpoint on data.valid_file (model-spec §7 metrics).\n"
      "Usage: lcm-eval [--config FILE] eval.weights_path=CKPT [key=value ...]\n"
      "Writes experiment.base_path/eval_<name>.json (report), .csv (per program), .svg "
      "(predicted vs measured, log-log).",
      [&](CLI::App& app) {
        app.add_flag("-q,--quiet", quiet, "no prepare progress");
        app.add_flag("--per-program", per_program, "also print one table row per program");
      });
  // training.device applies here too: a GPU that is absent is one clear error, before any work
  const lcm::DeviceSpec dev = c.training.device;
  lcm::require_device(dev);
  lcm::set_num_threads(c.training.threads);
  // A bad experiment.base_path (a file, or a file where <base>/cache goes) fails now with the
  // line of lcm-train / lcm-prepare, not after the data is prepared.
  lcm::train::require_writable_base_path(c, false);
  lcm::train::ensure_cache_folder(c);
  // an optimizer state or an autoencoder given as the checkpoint: one short line, not the
  // list of every unexpected tensor
  lcm::train::require_cost_model_weights(c.eval.weights_path);
  std::string note;
  auto model = lcm::train::load_checkpoint(c.eval.weights_path, c, &note);
  if (dev.kind == lcm::Device::CUDA) lcm::parameters_to_device(model->params(), dev.index);  // predict there
  // issue 7: the checkpoint's input scaling (fitted on its training split) is reapplied; without
  // that metadata the configured one, or none for checkpoints older than it (one stderr line)
  std::string scaling_note;
  const lcm::model::InputScaling scaling = lcm::train::checkpoint_input_scaling(c.eval.weights_path, c, &scaling_note);
  if (!scaling_note.empty()) std::fprintf(stderr, "lcm-eval: %s\n", scaling_note.c_str());
  if (!note.empty()) std::fprintf(stderr, "lcm-eval: note: %s\n", note.c_str());
  lcm::data::PreparedSplit split = lcm::train::prepare_from_config(c, "valid", !quiet);
  const lcm::data::Dataset& ds = split.dataset;
  // What was read and skipped (e.g. program/duplicate_program), the same line in lcm-eval and lcm-predict
  std::fprintf(stderr, "%s\n",
               lcm::train::skip_summary_line("lcm-eval", c.data.valid_file, split.counts,
                                             int64_t(ds.programs.size())).c_str());
  std::vector<lcm::train::Prediction> preds = lcm::train::predict_dataset(*model, ds, {}, &scaling);
  lcm::train::require_finite_predictions(ds, preds, c.eval.weights_path);
  lcm::model::MetricsSummary m = lcm::train::evaluate_predictions(ds, preds);
  const lcm::train::RunPaths paths = lcm::train::run_paths(c);

  std::printf("lcm-eval: %s on %s: %lld programs, %lld datapoints\n", c.eval.weights_path.c_str(),
              c.data.valid_file.c_str(), (long long)m.programs.size(), (long long)m.n_datapoints);
  if (per_program) {
    std::printf("%-40s %6s %10s %9s %8s %8s %8s %8s %8s\n", "program", "scheds", "MAPE", "Spearman",
                "nDCG", "nDCG@5", "nDCG@1", "top1", "top5");
    for (auto& p : m.programs)
      std::printf("%-40s %6lld %10.3f %9.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", p.program.c_str(),
                  (long long)p.n_schedules, p.mape, p.spearman, p.ndcg, p.ndcg_5, p.ndcg_1,
                  p.top1_recovered, p.top5_recovered);
  }
  std::printf("%-28s %10s\n", "metric (mean over programs)", "value");
  std::printf("%-28s %10.4f\n", "MAPE", m.mean_mape);
  std::printf("%-28s %10.4f  (%lld programs)\n", "Spearman", m.mean_spearman, (long long)m.n_spearman);
  std::printf("%-28s %10.4f  (%lld programs)\n", "nDCG", m.mean_ndcg, (long long)m.n_ndcg);
  std::printf("%-28s %10.4f\n", "nDCG@5", m.mean_ndcg_5);
  std::printf("%-28s %10.4f\n", "nDCG@1", m.mean_ndcg_1);
  std::printf("%-28s %10.4f\n", "top-1 speedup recovered", m.mean_top1_recovered);
  std::printf("%-28s %10.4f\n", "top-5 speedup recovered", m.mean_top5_recovered);
  std::printf("%-28s %10.4f\n", "MAPE (datapoint-weighted)", m.weighted_mape);

  rapidjson::StringBuffer sb;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format");
  w.String("lcm-eval-report");
  w.Key("format_version");
  w.Int(2);  // 2: adds top1_recovered / top5_recovered
  w.Key("weights_path");
  w.String(c.eval.weights_path.c_str());
  w.Key("valid_file");
  w.String(c.data.valid_file.c_str());
  w.Key("n_programs");
  w.Int64(int64_t(m.programs.size()));
  w.Key("n_datapoints");
  w.Int64(m.n_datapoints);
  w.Key("mean");
  w.StartObject();
  put(w, "mape", m.mean_mape);
  put(w, "spearman", m.mean_spearman);
  put(w, "ndcg", m.mean_ndcg);
  put(w, "ndcg_5", m.mean_ndcg_5);
  put(w, "ndcg_1", m.mean_ndcg_1);
  put(w, "top1_recovered", m.mean_top1_recovered);
  put(w, "top5_recovered", m.mean_top5_recovered);
  w.EndObject();
  put(w, "weighted_mape", m.weighted_mape);
  w.Key("programs");
  w.StartArray();
  std::string csv = "program,n_schedules,mape,spearman,ndcg,ndcg_5,ndcg_1,top1_recovered,top5_recovered\n";
  using lcm::train::format_number;
  for (auto& p : m.programs) {
    w.StartObject();
    w.Key("program");
    w.String(p.program.c_str());
    w.Key("n_schedules");
    w.Int64(p.n_schedules);
    put(w, "mape", p.mape);
    put(w, "spearman", p.spearman);
    put(w, "ndcg", p.ndcg);
    put(w, "ndcg_5", p.ndcg_5);
    put(w, "ndcg_1", p.ndcg_1);
    put(w, "top1_recovered", p.top1_recovered);
    put(w, "top5_recovered", p.top5_recovered);
    w.EndObject();
    csv += lcm::train::csv_field(p.program) + "," + std::to_string(p.n_schedules) + "," +
           format_number(p.mape) + "," + format_number(p.spearman) + "," + format_number(p.ndcg) +
           "," + format_number(p.ndcg_5) + "," + format_number(p.ndcg_1) + "," +
           format_number(p.top1_recovered) + "," + format_number(p.top5_recovered) + "\n";
  }
  w.EndArray();
  w.EndObject();
  std::vector<double> xs, ys;
  for (auto& p : preds)
    if (!std::isnan(p.measured)) xs.push_back(p.measured), ys.push_back(p.predicted);
  lcm::atomic_write_file(paths.eval_json, std::string(sb.GetString()) + "\n");
  lcm::atomic_write_file(paths.eval_csv, csv);
  lcm::atomic_write_file(paths.eval_svg,
                         lcm::train::svg_scatter_loglog("lcm-eval " + c.experiment.name +
                                                            ": predicted vs measured speedup",
                                                        "measured speedup (x)",
                                                        "predicted speedup (x)", xs, ys));
  std::printf("lcm-eval: wrote %s, %s, %s\n", paths.eval_json.c_str(), paths.eval_csv.c_str(),
              paths.eval_svg.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-eval", [&] { return eval(argc, argv); });
}
