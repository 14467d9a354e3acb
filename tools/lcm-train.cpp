// lcm-train: trains the LOOPer cost model (docs/model-spec.md §5–§6) with the training.loss
// objective and Adam/AdamW on data.train_file, validates every epoch on data.valid_file, and writes
// best/last checkpoints, optimizer state for --resume, JSONL/CSV logs and SVG plots under
// experiment.base_path (train/run.hpp does the work).
#include <CLI/CLI.hpp>
#include <string>

#include "config/cli.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "tools/common/test_hooks.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/run.hpp"

namespace {

/// Refuses (ConfigError) an input of the run (data.train_file, data.valid_file,
/// model.encoder_weights, training.init_weights) at one of its output paths, before anything is
/// written.
void require_run_outputs_not_inputs(const lcm::config::Config& c) {
  const lcm::train::RunPaths p = lcm::train::run_paths(c);
  const std::string dir = c.experiment.base_path + "/", n = c.experiment.name;
  lcm::tools::require_outputs_not_inputs({{"the run's log", p.log_jsonl},
                                          {"the run's log", p.log_csv},
                                          {"the run's plot", p.loss_svg},
                                          {"the run's plot", dir + "objective_" + n + ".svg"},
                                          {"the run's plot", dir + "ranking_" + n + ".svg"},
                                          {"the run's checkpoint", p.best},
                                          {"the run's checkpoint", p.last},
                                          {"the run's checkpoint", p.optimizer}},
                                         {{"data.train_file", c.data.train_file},
                                          {"data.valid_file", c.data.valid_file},
                                          {"model.encoder_weights", c.model.encoder_weights},
                                          {"training.init_weights", c.training.init_weights}});
}

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun / srun: MPI starts here; errors then name the rank, and one rank's error ends
  // every rank (finish_distributed). A plain start stays one process.
  int mpi_code = lcm::tools::run_tool("lcm-train", [&] {
    lcm::train::init_distributed(argc, argv);
    return 0;
  });
  if (mpi_code != 0) return mpi_code;
  lcm::train::Communicator& comm = lcm::train::communicator();
  const std::string tool = lcm::train::tool_name_with_rank("lcm-train", comm);
  const int code = lcm::tools::run_tool(tool.c_str(), [&] {
    // ranks other than 0 print nothing but their own error (rank 0 prints the run's output)
    const lcm::train::QuietNonRootOutput quiet(comm);
    lcm::train::TrainOptions o;
    bool calibrate_only = false;
    std::string ensemble_of;
    bool ensemble_given = false;  // --ensemble-of was given, even with an empty value
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-train: train the cost model on the objective training.loss (Adam/AdamW) and keep "
        "the best checkpoint by training.select_metric.\n"
        "Usage: lcm-train [--config FILE] [key=value | key value ...] [--resume]\n"
        "Outputs under experiment.base_path: weights/{best,last}_model_<name>.safetensors, "
        "weights/last_optimizer_<name>.safetensors, log_<name>.{jsonl,csv}, loss_<name>.svg "
        "(MAPE), objective_<name>.svg (training.loss), ranking_<name>.svg.\n"
        "Ctrl-C finishes the current step, saves `last` and exits with code 130.\n"
        "--calibrate-only: no training of the checkpoint; fit the calibration map of "
        "eval.weights_path (default: this experiment's best checkpoint) on data.train_file and "
        "store it there (with training.calibration_folds=K, on the out-of-fold predictions of "
        "K fold models, trained first as runs <name>_fold1..K).",
        [&](CLI::App& app) {
          app.add_flag("--resume", o.resume, "continue from weights/last_* of this experiment");
          app.add_flag("-q,--quiet", o.quiet, "no progress bar / prepare progress");
          app.add_flag("--calibrate-only", calibrate_only,
                       "fit and store the calibration map of an existing checkpoint, no training");
          app.add_option_function<std::string>(
              "--ensemble-of",
              [&](const std::string& v) {
                ensemble_of = v;
                ensemble_given = true;
              },
              "no training: combine these checkpoints (comma-separated) into the "
              "ensemble best_model_<name>.safetensors (calibrated with "
              "training.calibrate)");
        });
    // The no-training modes take no other mode: a flag that would be ignored is refused.
    if (ensemble_given && calibrate_only)
      throw lcm::config::ConfigError(
          "--ensemble-of and --calibrate-only: choose one (--ensemble-of calibrates the ensemble "
          "it writes when training.calibrate=true)");
    if ((ensemble_given || calibrate_only) && o.resume)
      throw lcm::config::ConfigError(
          std::string(ensemble_given ? "--ensemble-of" : "--calibrate-only") +
          " does not train: it takes no --resume");
    // Every mode pauses where LCM_TEST_PAUSE_AT says; the step hooks apply to training runs.
    const lcm::train::TestHooks hooks = lcm::tools::test_hooks_from_environment();
    o.hooks.pause_at = hooks.pause_at;
    if (ensemble_given) return lcm::train::write_ensemble_of(c, ensemble_of, o);
    if (calibrate_only) return lcm::train::calibrate_only(c, o);
    require_run_outputs_not_inputs(c);
    o.hooks = hooks;
    return lcm::train::run_training(c, o);
  });
  return lcm::train::finish_distributed(code);
}
