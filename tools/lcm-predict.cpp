// lcm-predict: predicts the speedup of every schedule of every program in data.valid_file with a
// checkpoint (eval.weights_path), including schedules without execution times, and writes CSV or
// JSONL (program, schedule_index, sched_str, predicted_speedup, measured_speedup).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "data/prepare.hpp"
#include "engine/atomic_file.hpp"
#include "engine/threads.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "train/checkpoint.hpp"
#include "config/cli.hpp"
#include "config/config.hpp"
#include "tools/common/run_tool.hpp"
#include "train/evaluate.hpp"
#include "tools/common/output_file.hpp"
#include "train/splits.hpp"
#include "train/losses.hpp"
#include "train/report.hpp"
#include "train/startup_checks.hpp"
#include "train/weights_check.hpp"

namespace {

int predict(int argc, char** argv) {
  std::string out_path;
  bool ranked = false, quiet = false;
  lcm::config::Config c = lcm::config::load_config(
      argc, argv,
      "lcm-predict: predict the speedup of every schedule (labelled or not) of data.valid_file.\n"
      "Usage: lcm-predict [--config FILE] eval.weights_path=CKPT data.valid_file=PROGRAMS "
      "[--out FILE.csv|FILE.jsonl] [--ranked]\n"
      "Columns: program, schedule_index, sched_str, predicted_speedup, measured_speedup (empty "
      "when unknown). Without --out, CSV goes to stdout.",
      [&](CLI::App& app) {
        app.add_option("--out", out_path,
                       "output file (.csv or .jsonl, any case), written atomically; missing "
                       "folders are created; checked at startup; never one of the input files");
        app.add_flag("--ranked", ranked, "print each program's schedules best first (stdout)");
        app.add_flag("-q,--quiet", quiet, "accepted for symmetry (lcm-predict prints no progress)");
      });
  bool jsonl = false;
  if (!out_path.empty()) {
    const std::string ext = lcm::tools::lower_extension(out_path);  // X.CSV is a CSV file too
    if (ext == ".jsonl")
      jsonl = true;
    else if (ext != ".csv")
      throw lcm::config::ConfigError("--out: expected a .csv or .jsonl file name, got " + out_path);
    // Data loss guard: --out equal to the input (data.valid_file=F --out F) would replace the
    // programs with their predictions; the checkpoint and the config file are inputs too.
    lcm::tools::require_output_not_input("--out", out_path,
                                         {{"data.valid_file", c.data.valid_file},
                                          {"eval.weights_path", c.eval.weights_path},
                                          {"the --config file", c.config_file}});
    // Missing folders are created and the file is test-created now: an unwritable --out fails
    // before the checkpoint is loaded and the predictions are computed, not after.
    lcm::tools::require_writable_output(out_path);
  }
  // training.device applies here too: a GPU that is absent is one clear error, before any work
  const lcm::DeviceSpec dev = c.training.device;
  lcm::require_device(dev);
  lcm::set_num_threads(c.training.threads);
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
  if (!scaling_note.empty()) std::fprintf(stderr, "lcm-predict: %s\n", scaling_note.c_str());
  if (!note.empty()) std::fprintf(stderr, "lcm-predict: note: %s\n", note.c_str());
  // Every schedule, labelled or not; no footprint filtering; no cache (the cache holds labelled data).
  lcm::data::PrepareOptions opt = lcm::train::prepare_options(c, "valid");
  if (opt.source.empty()) throw lcm::config::ConfigError("data.valid_file is empty");
  opt.features.keep_unlabeled = true;
  opt.batching.min_functions_per_footprint = 0;
  opt.cache_dir = "";
  opt.progress = false;
  (void)quiet;
  lcm::data::PreparedSplit split = lcm::data::prepare_split(opt);
  const lcm::data::Dataset& ds = split.dataset;
  // What was read and skipped (e.g. program/duplicate_program), the same line in lcm-eval and lcm-predict
  std::fprintf(stderr, "%s\n",
               lcm::train::skip_summary_line("lcm-predict", c.data.valid_file, split.counts,
                                             int64_t(ds.programs.size())).c_str());
  std::vector<lcm::train::Prediction> preds = lcm::train::predict_dataset(*model, ds, {}, &scaling);
  lcm::train::require_finite_predictions(ds, preds, c.eval.weights_path);

  std::string text = jsonl ? "" : "program,schedule_index,sched_str,predicted_speedup,measured_speedup\n";
  using lcm::train::csv_field;
  using lcm::train::format_number;
  for (auto& p : preds) {
    const auto& prog = ds.programs[size_t(p.program)];
    const int32_t sidx = prog.schedule_index[size_t(p.schedule)];
    const std::string& ss = prog.sched_str[size_t(p.schedule)];
    if (jsonl) {
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> w(sb);
      w.StartObject();
      w.Key("program");
      w.String(prog.name.c_str());
      w.Key("schedule_index");
      w.Int(sidx);
      w.Key("sched_str");
      w.String(ss.c_str());
      w.Key("predicted_speedup");
      std::isfinite(p.predicted) ? w.Double(p.predicted) : w.Null();
      w.Key("measured_speedup");
      std::isfinite(p.measured) ? w.Double(p.measured) : w.Null();
      w.EndObject();
      text += std::string(sb.GetString()) + "\n";
    } else {
      text += csv_field(prog.name) + "," + std::to_string(sidx) + "," + csv_field(ss) + "," +
              format_number(p.predicted) + "," + format_number(p.measured) + "\n";
    }
  }
  if (out_path.empty() && !ranked) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else if (!out_path.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(out_path, ec))
      std::fprintf(stderr, "lcm-predict: replacing existing %s\n", out_path.c_str());
    lcm::atomic_write_file(out_path, text);
    std::fprintf(stderr, "lcm-predict: %zu predictions for %zu programs written to %s\n",
                 preds.size(), ds.programs.size(), out_path.c_str());
  }
  if (ranked) {
    size_t i = 0;
    while (i < preds.size()) {
      size_t j = i;
      while (j < preds.size() && preds[j].program == preds[i].program) ++j;
      std::vector<lcm::train::Prediction> g(preds.begin() + long(i), preds.begin() + long(j));
      std::stable_sort(g.begin(), g.end(), [](auto& a, auto& b) { return a.predicted > b.predicted; });
      const auto& prog = ds.programs[size_t(g[0].program)];
      std::printf("%s (%zu schedules)\n%6s %8s %12s %12s  %s\n", prog.name.c_str(), g.size(), "rank",
                  "schedule", "predicted", "measured", "sched_str");
      for (size_t r = 0; r < g.size(); ++r) {
        char meas[32] = "-";
        if (!std::isnan(g[r].measured)) std::snprintf(meas, sizeof meas, "%.4f", g[r].measured);
        std::printf("%6zu %8d %12.4f %12s  %s\n", r + 1, prog.schedule_index[size_t(g[r].schedule)],
                    g[r].predicted, meas, prog.sched_str[size_t(g[r].schedule)].c_str());
      }
      i = j;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-predict", [&] { return predict(argc, argv); });
}
