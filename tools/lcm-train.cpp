// lcm-train: trains the LOOPer cost model (docs/model-spec.md §5–§6) with the training.loss
// objective and Adam/AdamW on data.train_file, validates every epoch on data.valid_file, and writes
// best/last checkpoints, optimizer state for --resume, JSONL/CSV logs and SVG plots under
// experiment.base_path (train/trainer.hpp does the work).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/cli.hpp"
#include "data/skips.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/ensemble.hpp"
#include "train/interrupt.hpp"
#include "train/memory_check.hpp"
#include "train/run_files.hpp"
#include "train/trainer.hpp"
#include "util/run_lock.hpp"

namespace {

namespace fs = std::filesystem;

/// The lock of the experiment whose checkpoint `path` is, for --calibrate-only on an explicit
/// eval.weights_path: <base>/weights/{best,last}_model_<name>.safetensors is experiment <name>
/// of <base>, whose lcm-train holds <base>/lcm_<name>.lock while it runs. An empty lock for a
/// file outside that layout (no run of lcm's can be writing it).
lcm::RunLock lock_checkpoint_experiment(const std::string& path) {
  const fs::path p(path);
  const std::string file = p.filename().string();
  const std::string suffix = ".safetensors";
  if (p.parent_path().filename() != "weights" || file.size() <= suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  for (const std::string prefix : {"best_model_", "last_model_"})
    if (file.rfind(prefix, 0) == 0) {
      const std::string name =
          file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
      std::string base = p.parent_path().parent_path().string();
      if (base.empty()) base = ".";
      return lcm::lock_experiment(base, name);
    }
  return {};
}

/// Refuses (ConfigError) to rewrite `path` in place when it or its folder is not writable: the
/// file's or the folder's owner write bit off (chmod 444 / 555, which root could otherwise
/// write), or a folder where the temp file of the atomic rewrite cannot be created. Checked
/// before any work.
void require_rewritable(const std::string& path, const char* flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IWUSR) == 0)
    throw lcm::config::ConfigError(std::string(flag) + ": " + path +
                                   " is read-only (no owner write permission); it would be "
                                   "rewritten in place: make it writable (chmod u+w) or copy it");
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  // the folder's owner write bit too: root passes access(W_OK) on a chmod 555 folder
  if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWUSR) == 0)
    throw lcm::config::ConfigError(std::string(flag) + ": the folder " + dir + " of " + path +
                                   " is read-only (no owner write permission); make it "
                                   "writable (chmod u+w) or copy the checkpoint elsewhere");
  if (::access(dir.c_str(), W_OK) != 0)
    throw lcm::config::ConfigError(std::string(flag) + ": cannot write into " + dir +
                                   " (the folder of " + path + ")");
}

/// The members of --ensemble-of's comma-separated list, each without the spaces and tabs around
/// it. Throws ConfigError for an empty list or
/// entry, a member named twice (under any spelling), more than 64 members (training.ensemble's
/// limit), or a member that is `out` itself (any spelling or link).
std::vector<std::string> ensemble_members_of(const std::string& list, const std::string& out) {
  std::vector<std::string> members;
  size_t a = 0;
  while (true) {
    const size_t b = std::min(list.find(',', a), list.size());
    // "A, B": the space a person types after a comma is not part of the path
    const size_t first = list.find_first_not_of(" \t", a);
    if (first >= b)
      throw lcm::config::ConfigError(
          "--ensemble-of: an empty entry in '" + list +
          "' (give the member checkpoints as A,B,C; an empty value would train a model instead)");
    const size_t last = list.find_last_not_of(" \t", b - 1);  // >= first: list[first] is not blank
    members.push_back(list.substr(first, last - first + 1));
    if (b == list.size()) break;
    a = b + 1;
  }
  if (members.size() > 64)
    throw lcm::config::ConfigError("--ensemble-of: " + std::to_string(members.size()) +
                                   " members; at most 64");
  std::error_code ec;
  const fs::path out_c = fs::weakly_canonical(out, ec);
  std::set<std::string> seen;
  for (const std::string& m : members) {
    const fs::path c = fs::weakly_canonical(m, ec);
    const std::string key = ec ? m : c.string();
    if (!seen.insert(key).second)
      throw lcm::config::ConfigError("--ensemble-of: " + m + " is named twice");
    if (key == out_c.string() ||
        (fs::exists(m, ec) && fs::exists(out, ec) && fs::equivalent(m, out, ec)))
      throw lcm::config::ConfigError("--ensemble-of: " + m +
                                     " is the output of this experiment; choose another "
                                     "experiment.name");
  }
  return members;
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
    if (ensemble_given) {
      if (comm.size() > 1)
        throw lcm::config::ConfigError("--ensemble-of runs on one process, not under MPI");
      const std::string out = lcm::train::run_paths(c).best;
      const std::vector<std::string> members = ensemble_members_of(ensemble_of, out);
      // a training run of this experiment would write `out` too
      const lcm::RunLock lock = lcm::lock_experiment(c.experiment.base_path, c.experiment.name);
      // the ensemble is a new run of the experiment: an earlier run there is refused, or moved
      // aside whole with experiment.overwrite=true (docs/run-state.md)
      lcm::train::claim_experiment(c.experiment.base_path, c.experiment.name,
                                   lcm::train::RunTool::Train, false, c.experiment.overwrite);
      std::filesystem::create_directories(lcm::train::run_paths(c).weights_dir);
      lcm::train::combine_ensemble(members, out);
      std::printf("lcm-train: ensemble of %s written to %s\n",
                  lcm::data::count_of(int64_t(members.size()), "member").c_str(), out.c_str());
      if (c.training.calibrate) {
        // with training.calibration_folds the fold runs train: Ctrl-C stops them cleanly
        if (c.training.calibration_folds > 0) lcm::train::install_stop_handlers("lcm-train");
        int code = 0;
        const lcm::model::Calibration cal = lcm::train::calibrate_checkpoint(c, out, o, &code);
        if (code != 0) return code;
        std::printf("lcm-train: %s; stored in %s\n", lcm::train::calibration_summary(cal).c_str(),
                    out.c_str());
      }
      return 0;
    }
    if (calibrate_only) {
      if (comm.size() > 1)
        throw lcm::config::ConfigError("--calibrate-only runs on one process, not under MPI");
      const std::string given =
          c.eval.weights_path.empty() ? lcm::train::run_paths(c).best : c.eval.weights_path;
      // A missing checkpoint is said as such, before a lock or a folder is made for it.
      std::error_code ec;
      if (!std::filesystem::exists(given, ec))
        throw std::runtime_error("weights file not found: " + given);
      // Through a link, the checkpoint itself is rewritten (not the link replaced by a copy),
      // and the lock is that of the experiment the file belongs to, however it is reached.
      const fs::path resolved = fs::canonical(given, ec);
      const std::string path = ec ? given : resolved.string();
      const std::string shown = path == fs::absolute(given).lexically_normal().string()
                                    ? given
                                    : path + " (reached through " + given + ")";
      // a training run of the checkpoint's experiment must not write it meanwhile
      const lcm::RunLock lock =
          c.eval.weights_path.empty()
              ? lcm::lock_experiment(c.experiment.base_path, c.experiment.name)
              : lock_checkpoint_experiment(path);
      require_rewritable(path, "--calibrate-only");
      if (c.training.calibration_folds > 0) lcm::train::install_stop_handlers("lcm-train");
      int code = 0;
      const lcm::model::Calibration cal = lcm::train::calibrate_checkpoint(c, path, o, &code);
      if (code != 0) return code;
      std::printf("lcm-train: %s; stored in %s\n", lcm::train::calibration_summary(cal).c_str(),
                  shown.c_str());
      return 0;
    }
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
    // The model, Adam state and one batch must fit before any data is read.
    lcm::train::check_training_memory(c);
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
    // Test hook (tests/test_mpi.cpp): LCM_TEST_FAIL_RANK=R:N makes rank R throw right after its
    // N-th optimizer step, as a failing rank would; the job must stop on every rank.
    if (const char* f = std::getenv("LCM_TEST_FAIL_RANK")) {
      const std::string spec = f;
      const size_t colon = spec.find(':');
      const int rank = std::atoi(spec.substr(0, colon).c_str());
      const int64_t after = colon == std::string::npos ? 1 : std::atoll(spec.c_str() + colon + 1);
      if (rank == comm.rank()) {
        auto previous = o.after_step;
        o.after_step = [previous, after, rank](int64_t steps) {
          if (previous) previous(steps);
          if (steps == after)
            throw std::runtime_error("injected fault on rank " + std::to_string(rank) +
                                     " after step " + std::to_string(after) +
                                     " (LCM_TEST_FAIL_RANK)");
        };
      }
    }
    if (c.training.ensemble > 1) {
      if (comm.size() > 1)
        throw lcm::config::ConfigError("training.ensemble > 1 runs on one process, not under MPI");
      return lcm::train::train_ensemble(c, o.resume, o.quiet);
    }
    return lcm::train::train(c, o).exit_code;
  });
  return lcm::train::finish_distributed(code);
}
