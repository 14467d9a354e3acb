// lcm-pretrain: self-supervised pre-training of a program encoder (docs/model-spec.md §8;
// Liu & Baghdadi, CC 2025): trains the computation-vector or access-matrix autoencoder with MSE and
// Adam on the unlabeled computations of LOOPerSet files and keeps the best-validation checkpoint
// (train/pretrainer.hpp does the work).
#include <CLI/CLI.hpp>

#include "config/cli.hpp"
#include "tools/common/run_tool.hpp"
#include "tools/common/test_hooks.hpp"
#include "train/interrupt.hpp"
#include "train/memory_check.hpp"
#include "train/pretrainer.hpp"

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-pretrain", [&] {
    lcm::train::PretrainOptions o;
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-pretrain: self-supervised pre-training of a computation encoder (model-spec §8).\n"
        "Usage: lcm-pretrain [--config FILE] pretrain.kind=comp_vector|access_matrix "
        "pretrain.files=[a.jsonl.gz,b.jsonl.gz] [key=value ...]\n"
        "Every schedule of every program counts (labels unused, failed/missing times kept). "
        "Outputs under "
        "experiment.base_path: weights/{best,last}_autoencoder_<name>.safetensors, "
        "log_pretrain_<name>.{jsonl,csv}, loss_pretrain_<name>.svg; cache in <base_path>/cache.",
        [&](CLI::App& app) { app.add_flag("-q,--quiet", o.quiet, "no progress output"); });
    // Ctrl-C / SIGTERM: the current batch finishes, `last` is saved, exit 130 (a second one
    // exits at once).
    o.hooks.pause_at = lcm::tools::test_hooks_from_environment().pause_at;  // LCM_TEST_PAUSE_AT
    lcm::train::check_pretraining_memory(c);  // the autoencoder and one batch must fit
    lcm::train::install_stop_handlers("lcm-pretrain");
    return lcm::train::pretrain(c, o).exit_code;
  });
}
