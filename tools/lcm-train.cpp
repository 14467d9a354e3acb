// lcm-train: trains the LOOPer cost model (docs/model-spec.md §5–§6) with the training.loss
// objective and Adam/AdamW on data.train_file, validates every epoch on data.valid_file, and writes
// best/last checkpoints, optimizer state for --resume, JSONL/CSV logs and SVG plots under
// experiment.base_path (train/trainer.hpp does the work).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <string>

#include "config/cli.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "train/checkpoint.hpp"
#include "train/interrupt.hpp"
#include "train/trainer.hpp"

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-train", [&] {
    lcm::train::TrainOptions o;
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-train: train the cost model on the objective training.loss (Adam/AdamW) and keep "
        "the best checkpoint by training.select_metric.\n"
        "Usage: lcm-train [--config FILE] [key=value | key value ...] [--resume]\n"
        "Outputs under experiment.base_path: weights/{best,last}_model_<name>.safetensors, "
        "weights/last_optimizer_<name>.safetensors, log_<name>.{jsonl,csv}, loss_<name>.svg "
        "(MAPE), objective_<name>.svg (training.loss), ranking_<name>.svg.\n"
        "Ctrl-C finishes the current step, saves `last` and exits with code 130.",
        [&](CLI::App& app) {
          app.add_flag("--resume", o.resume, "continue from weights/last_* of this experiment");
          app.add_flag("-q,--quiet", o.quiet, "no progress bar / prepare progress");
        });
    // An input at one of the run's output paths is refused before anything is written.
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
                                            {"model.encoder_weights", c.model.encoder_weights}});
    // From here on Ctrl-C (or a batch system's SIGTERM) only sets a flag; the trainer stops
    // after the current step and saves `last`.
    lcm::train::install_stop_handlers("lcm-train");
    // Test hook: LCM_INTERRUPT_AFTER_STEPS=N behaves as a Ctrl-C right after the N-th optimizer
    // step of this process; with LCM_INTERRUPT_TWICE=1 as two real SIGINTs (the second lands
    // during the graceful shutdown the first started).
    if (const char* n = std::getenv("LCM_INTERRUPT_AFTER_STEPS")) {
      const int64_t after = std::atoll(n);
      const char* twice = std::getenv("LCM_INTERRUPT_TWICE");
      const bool two = twice && std::string(twice) == "1";
      o.after_step = [after, two](int64_t steps) {
        if (after <= 0 || steps != after) return;
        if (two) {
          std::raise(SIGINT);
          std::raise(SIGINT);
        }
        lcm::train::stop_requested().store(true);
      };
    }
    return lcm::train::train(c, o).exit_code;
  });
}
