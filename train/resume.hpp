// The --resume policy of lcm-train, decided from the saved files' metadata before any data is
// read: which changed settings are refused or warned about (each key's OnResume in the config
// table), whether the run has anything left to do, and the messages that say so.
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/checkpoint.hpp"
#include "train/run_state.hpp"

namespace lcm::train {

/// The values (text form of config::get_config_value) of every key whose policy is Refuse or Warn
/// under config `c`, as a JSON object: stored as the optimizer state's lcm.run_settings.
std::string run_settings_json(const config::Config& c);

/// The settings of a saved run, from the optimizer state's lcm.run_settings (optimizer metadata
/// `om`), or, for runs saved before it existed, training.loss and model.input_scaling from the
/// last model's lcm.loss / lcm.input_scaling (`mm`) and training.weight_decay from the optimizer's
/// own "weight_decay". Throws std::runtime_error when lcm.run_settings is present but damaged
/// (not JSON, nested deeper than the bound, not an object of strings, or empty); the older
/// records that do not parse are left out (the full --resume path reports damaged files).
Metadata saved_run_settings(const Metadata& om, const Metadata& mm);

/// Throws config::ConfigError (exit 2, one line) when a Refuse key differs from the saved run
/// `saved` (saved_run_settings), naming each key with the new and the saved value; returns one
/// warning line per changed Warn key except training.max_epochs. Numbers are compared by value
/// (0.001 = 1e-3).
std::vector<std::string> check_resume_settings(const config::Config& c, const Metadata& saved);

/// --resume of a run interrupted in (0-based) epoch `epoch` under a training.max_epochs that does
/// not reach it: the refusal (exit 2). `after_batch`: the saved batch count, named when known.
config::ConfigError interrupted_epoch_error(int max_epochs, int epoch,
                                            const std::string& after_batch);

/// The line of a --resume with nothing to do: all training.max_epochs are done (`epochs_done`).
std::string finished_line(const config::Config& c, int epochs_done, const std::string& best_path);
/// The line of a --resume with nothing to do: early stopping already stopped the run at
/// `epochs_done`, `bad_epochs` epochs after the best one.
std::string early_stopped_line(const config::Config& c, int epochs_done, int bad_epochs,
                               const std::string& best_path);

/// What --resume learns from the saved files' metadata before any data is read.
struct ResumePrecheck {
  std::string nothing_to_do;          // finished_line / early_stopped_line, or "" to continue
  std::vector<std::string> warnings;  // changed Warn settings (check_resume_settings)
  Metadata saved_settings;            // saved_run_settings
  std::string saved_weight_decay;     // the optimizer file's "weight_decay" text ("" unknown)
};

/// Reads paths.optimizer and paths.last (their metadata only) and decides: refuses changed
/// Refuse settings and a max_epochs below an interrupted epoch (config::ConfigError), returns the
/// warnings and, when the run is over under `c`, the line saying so. Files that cannot be read
/// or judged here (unreadable, malformed, saved at different steps) give no verdict: the full
/// --resume path names their problem.
ResumePrecheck precheck_resume(const config::Config& c, const RunPaths& paths);

/// For --resume: one warning line ("" when none) when data.train_file / data.valid_file differ
/// from the files recorded in the last model's metadata `meta` (lcm.train_file, lcm.valid_file;
/// checkpoints written before they were recorded give no warning). Paths naming the same
/// existing file (e.g. relative vs absolute) are not a change.
std::string changed_data_warning(const config::Config& c, const Metadata& meta);

}  // namespace lcm::train
