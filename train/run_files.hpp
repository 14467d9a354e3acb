// The files of one run of an experiment (their paths under experiment.base_path) and the rule that
// keeps them together (docs/run-state.md "One run's files belong together"): a new run of lcm-train
// or lcm-pretrain into an experiment that already holds a run of that tool is refused, unless
// --resume continues it or experiment.overwrite=true first moves the earlier run's files, all of
// them, into <base_path>/previous/<name>-<UTC time>/. Each file of a run carries its run id
// (lcm.run_id).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/test_hooks.hpp"

namespace lcm::train {

/// Every output file of a run of experiment `name` under experiment.base_path.
struct RunPaths {
  std::string weights_dir;  // <base>/weights
  std::string best;         // <base>/weights/best_model_<name>.safetensors (the epoch
                            // training.select_metric chose)
  std::string last;         // <base>/weights/last_model_<name>.safetensors (after the last epoch)
  std::string optimizer;    // <base>/weights/last_optimizer_<name>.safetensors (resume state)
  std::string log_jsonl;    // <base>/log_<name>.jsonl (one object per epoch)
  std::string log_csv;      // <base>/log_<name>.csv
  std::string loss_svg;     // <base>/loss_<name>.svg
  std::string eval_json;    // <base>/eval_<name>.json (lcm-eval report)
  std::string eval_csv;     // <base>/eval_<name>.csv (per-program metrics)
  std::string eval_svg;     // <base>/eval_<name>.svg (predicted vs measured, log-log)
};

/// The paths of config `c` (nothing is created).
RunPaths run_paths(const config::Config& c);

/// Which tool's run: lcm-train's files (cost-model checkpoints, optimizer state, logs, plots,
/// lcm-eval reports) or lcm-pretrain's (autoencoder checkpoints, log_pretrain_*, plots).
enum class RunTool { Train, Pretrain };

/// The file names (relative to `base_path`, e.g. "weights/last_model_lcm.safetensors",
/// "log_lcm.jsonl") that a run of `tool` in experiment `name` writes, for a name: lcm-train's
///   weights/{best_model,last_model,last_optimizer,last_encoder_optimizer}_<n>.safetensors,
///   {log_<n>.jsonl, log_<n>.csv, loss_<n>.svg, objective_<n>.svg, ranking_<n>.svg,
///    eval_<n>.json, eval_<n>.csv, eval_<n>.svg},
/// lcm-pretrain's
///   weights/{best,last}_autoencoder_<n>.safetensors,
///   {log_pretrain_<n>.jsonl, log_pretrain_<n>.csv, loss_pretrain_<n>.svg}.
/// The two sets of one name are disjoint.
std::vector<std::string> run_file_names(RunTool tool, const std::string& name);

/// The files of `tool`'s run of experiment `name` that exist under `base_path` (relative names as
/// run_file_names gives them, sorted), those of its derived runs included: for lcm-train the
/// calibration fold runs <name>_fold<k>of<K> and the ensemble members <name>_m<k>, which belong
/// to the run that trained them. Never throws (an unreadable folder lists nothing).
std::vector<std::string> existing_run_files(const std::string& base_path, const std::string& name,
                                            RunTool tool);

/// A new run id: "<UTC YYYYmmddTHHMMSSZ>-<host>-<pid>" (host as temp files carry it), stored as
/// lcm.run_id in every checkpoint of the run and as "run_id" in each line of its JSONL log.
std::string new_run_id();

/// The start of a run of `tool` in experiment `name` under `base_path`, called while the
/// experiment's lock is held (lock_experiment), before any data is read:
/// 1. an earlier move of this experiment's `tool` run that was interrupted (a staging folder
///    <base_path>/previous/.moving-<train|pretrain>-<name>) is finished first;
/// 2. `resume`: nothing more (the run continues the files there);
/// 3. no file of the run exists (existing_run_files): nothing more;
/// 4. `overwrite` (experiment.overwrite=true, or the fold and member runs a parent run trains):
///    every file is moved into the staging folder (same relative names), which is then renamed
///    to <base_path>/previous/<name>-[pretrain-]<UTC YYYYmmddTHHMMSSZ>[-k]; one stdout line names
///    it unless `quiet`. Returns that folder;
/// 5. otherwise throws config::ConfigError (exit 2): "experiment <name> in <base_path>
///    already holds a run (<first file>, N files): --resume continues it; experiment.overwrite=true
///    moves its files into <base_path>/previous/ first; or choose another experiment.name".
/// `hooks` pauses at "moving" after the first file of a move (TestHooks::pause).
/// Returns "" when nothing was moved. Throws std::runtime_error naming the file when a move
/// fails.
std::string claim_experiment(const std::string& base_path, const std::string& name, RunTool tool,
                             bool resume, bool overwrite, bool quiet = false,
                             const TestHooks& hooks = {});

}  // namespace lcm::train
