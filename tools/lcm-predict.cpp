// lcm-predict: predicts the speedup of every schedule of every program in eval.input_file
// (default data.valid_file) with a checkpoint (eval.weights_path), including schedules without
// execution times, and writes CSV or JSONL (program, schedule_index, sched_str,
// predicted_speedup, measured_speedup; --ranked: with a rank column, each program best first) or,
// without --out, a per-program ranking table.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "config/cli.hpp"
#include "tools/common/eval_input.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "train/eval_output.hpp"
#include "train/predictor.hpp"
#include "train/startup_checks.hpp"
#include "util/atomic_file.hpp"

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-predict", [&] {
    std::string out_path, weights = "fp32";
    bool ranked = false, quiet = false;
    bool out_given = false;  // the App (and its options) ends inside load_config
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-predict: predict the speedup of every schedule (labelled or not) of eval.input_file "
        "(default data.valid_file).\n"
        "Usage: lcm-predict [--config FILE] eval.weights_path=CKPT eval.input_file=PROGRAMS "
        "[--out FILE.csv|FILE.jsonl] [--ranked]\n"
        "Columns: program, schedule_index, sched_str, predicted_speedup, measured_speedup (empty "
        "when unknown); --ranked adds rank after program and orders each program best first. "
        "Without --out, CSV (--ranked: a table per program) goes to stdout.",
        [&](CLI::App& app) {
          app.add_option("--out", out_path,
                         "output file (.csv or .jsonl, any case), written atomically; missing "
                         "folders are created; checked at startup; never one of the input files")
              ->each([&](const std::string&) { out_given = true; });
          app.add_flag("--ranked", ranked,
                       "each program's schedules best first: with --out a rank column in the "
                       "file, without it a table per program on stdout");
          app.add_option("--weights", weights,
                         "fp32 (default) | bf16: the weight matrices rounded to BF16, "
                         "one-schedule products reading 2-byte copies, sums in FP32 (as "
                         "lcm-serve --weights)");
          app.add_flag("-q,--quiet", quiet,
                       "accepted for symmetry (lcm-predict prints no progress)");
        });
    bool jsonl = false;
    const bool bf16 = lcm::train::parse_weight_format(weights, "--weights");
    lcm::tools::require_output_option("--out", out_given, out_path, "the table on stdout");
    if (!out_path.empty()) {
      const std::string ext = lcm::tools::lower_extension(out_path);  // X.CSV is a CSV file too
      if (ext == ".jsonl")
        jsonl = true;
      else if (ext != ".csv")
        throw lcm::config::ConfigError("--out: expected a .csv or .jsonl file name, got " +
                                       out_path);
      // Data loss guard: --out equal to an input (the programs, the checkpoint, the config file)
      // would replace it with the predictions.
      lcm::tools::require_output_not_input("--out", out_path,
                                           {{c.eval_input_key(), c.eval_input()},
                                            {"eval.weights_path", c.eval.weights_path},
                                            {"the --config file", c.config_file}});
      // Missing folders are created and the file is test-created now: an unwritable --out fails
      // before the checkpoint is loaded and the predictions are computed, not after.
      lcm::tools::require_writable_output(out_path);
    }
    // every schedule, labelled or not; no footprint filtering; no cache
    const lcm::tools::ScoredInput in =
        lcm::tools::score_eval_input(c, "lcm-predict", true, false, bf16);
    const lcm::data::Dataset& ds = in.split.dataset;
    const std::vector<lcm::train::Prediction>& preds = in.predictions;
    if (out_path.empty()) {  // stdout: the CSV, or with --ranked the per-program table
      const std::string text = ranked ? lcm::train::ranked_predictions(ds, preds)
                                      : lcm::train::predictions_text(ds, preds, false);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    // --out: the file (ranked with --ranked: a rank column, each program best first); stdout
    // gets one summary line, not the table
    std::error_code ec;
    if (std::filesystem::exists(out_path, ec))
      std::fprintf(stderr, "lcm-predict: replacing existing %s\n", out_path.c_str());
    lcm::atomic_write_file(out_path, lcm::train::predictions_text(ds, preds, jsonl, ranked));
    std::printf("lcm-predict: %zu predictions for %zu programs written to %s%s\n", preds.size(),
                ds.programs.size(), out_path.c_str(),
                ranked ? " (ranked: column rank, each program's schedules best first)" : "");
    return 0;
  });
}
