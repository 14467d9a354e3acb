// The run layer of lcm-train (run.hpp): a run's phases, the fold runs of cross-fitting, the
// members of an ensemble, and the modes that train no model of their own.
#include "train/run.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <vector>

#include "data/skips.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/ensemble.hpp"
#include "train/init_weights.hpp"
#include "train/interrupt.hpp"
#include "train/memory_check.hpp"
#include "train/predictor.hpp"
#include "train/run_files.hpp"
#include "train/splits.hpp"
#include "util/run_lock.hpp"

namespace lcm::train {
namespace {

namespace fs = std::filesystem;

/// "lcm-train: <calibration_summary>; stored in <where>" on stdout.
void print_stored(const lcm::model::Calibration& cal, const std::string& where) {
  std::printf("lcm-train: %s; stored in %s\n", calibration_summary(cal).c_str(), where.c_str());
}

/// The checkpoint `path` loaded as Predictor loads it, without its calibration map.
Predictor uncalibrated(const config::Config& c, const std::string& path) {
  config::Config e = c;
  e.eval.weights_path = path;
  e.eval.calibrated = false;  // fitted on the raw (for an ensemble: averaged) scores
  return Predictor(e);
}

/// The cross-fitted map of `model`'s checkpoint: `oof` moved into its scores by where it puts
/// its own training programs (as each fold model's are measured).
lcm::model::Calibration cross_fitted_map(const config::Config& c, const Predictor& model,
                                         const OutOfFold& oof, bool quiet) {
  const bool relative = model.model().config().relative_to_identity;
  const double own =
      score_shift(model.predict(prepare_from_config(c, "train", !quiet).dataset), relative);
  return fit_cross_fitted(c, oof, own, relative);
}

/// True when `best` holds the calibration map `c` asks for (its fold count and weighting): a
/// resumed finished run then has nothing to fit again.
bool has_calibration_of(const config::Config& c, const std::string& best) {
  std::error_code ec;
  if (!fs::exists(best, ec)) return false;
  const lcm::model::Calibration cal = load_calibration(best);
  return cal.fit_points > 0 && cal.folds == c.training.calibration_folds &&
         cal.weighting == config::name_of(c.training.calibration_weighting);
}

/// Refits the in-sample map of a resumed finished run (training.calibration_folds=0) whose map
/// was fitted otherwise.
void refit_in_sample(const config::Config& c, const TrainOptions& o, const std::string& best) {
  std::printf(
      "lcm-train: --resume: refitting the calibration map (training.calibration_folds=0, "
      "training.calibration_weighting=%s)\n",
      config::name_of(c.training.calibration_weighting).c_str());
  TrainOptions quiet = o;
  quiet.quiet = true;
  print_stored(calibrate_checkpoint(c, best, quiet), best);
}

/// Fits and stores the calibration map of the finished run `r` when training.calibrate asks for
/// one it does not hold yet: on out-of-fold predictions with training.calibration_folds (the
/// fold runs train here), or on its training split for a resumed finished run whose map was
/// fitted otherwise (fit_model fits the in-sample map of a run it trained itself). Returns
/// the exit code (130 when a fold run was stopped).
int calibrate_finished_run(const config::Config& c, const TrainOptions& o, const TrainResult& r) {
  const int K = c.training.calibration_folds;
  if (r.nothing_to_do && has_calibration_of(c, r.paths.best)) return 0;
  if (K == 0 && !r.nothing_to_do) return 0;  // fitted by fit_model
  const bool root = communicator().rank() == 0;
  // the run's experiment stays locked while its fold runs train and its map is stored
  const lcm::RunLock lock = lcm::lock_experiment(c.experiment.base_path, c.experiment.name, root);
  if (K == 0) {
    if (root) refit_in_sample(c, o, r.paths.best);
    return 0;
  }
  const OutOfFold oof = out_of_fold_predictions(c, o);
  if (oof.exit_code != 0) {
    if (root) {
      const lcm::model::Calibration had = load_calibration(r.paths.best);
      std::fprintf(stderr,
                   "lcm-train: the calibration fold runs did not finish; %s keeps %s until "
                   "lcm-train --resume finishes them\n",
                   r.paths.best.c_str(),
                   had.active() ? "the calibration map it had (fitted otherwise)"
                                : "no calibration map (raw model outputs)");
    }
    return oof.exit_code;
  }
  if (!root) return 0;
  const Predictor model = uncalibrated(c, r.paths.best);
  try {
    const lcm::model::Calibration cal = cross_fitted_map(c, model, oof, o.quiet);
    store_calibration(r.paths.best, cal);
    print_stored(cal, r.paths.best);
  } catch (const std::invalid_argument& ex) {
    std::fprintf(stderr,
                 "lcm-train: warning: no calibration map fitted (%s); %s reports raw model "
                 "outputs\n",
                 ex.what(), r.paths.best.c_str());
  }
  std::fflush(stdout);
  return 0;
}

/// Fold run k of K of `c`: its configuration (fold_run_name, trained without fold k, no
/// calibration, no ensemble) and its options (resumed when o.resume and the fold run there is
/// of this file and fold; trained anew otherwise, moving its earlier files aside whole).
std::pair<config::Config, TrainOptions> fold_run(const config::Config& c, const TrainOptions& o,
                                                 int k, int K) {
  config::Config ck = c;
  ck.experiment.name = fold_run_name(c.experiment.name, k, K);
  ck.training.calibrate = false;
  ck.training.calibration_folds = 0;
  ck.training.ensemble = 1;
  ck.data.train_folds = {K, k, false};
  // on --resume a fold run of this file and fold continues (a finished one is reused as it
  // is); otherwise it trains anew: it depends on the run's data and settings
  const ExistingFoldRun before = existing_fold_run(ck);
  TrainOptions ok = o;
  ok.resume = o.resume && before == ExistingFoldRun::SameFold;
  // a fold run trained anew moves its earlier files (this run's by-products) aside whole
  ok.replace = !ok.resume;
  return {ck, ok};
}

/// Fold model `predictor`'s predictions of the programs of fold k (its held-out fold), their
/// scores measured from where it puts the programs it trained on (score_shift).
std::vector<Prediction> held_out_predictions(const config::Config& ck, const Predictor& predictor,
                                             int k, int K, bool quiet, int64_t* programs) {
  const bool relative = predictor.model().config().relative_to_identity;
  const double shift =
      score_shift(predictor.predict(prepare_from_config(ck, "train", !quiet).dataset), relative);
  config::Config held = ck;
  held.data.train_folds = {K, k, true};
  const lcm::data::PreparedSplit held_out = prepare_from_config(held, "train", !quiet);
  std::vector<Prediction> p = predictor.predict(held_out.dataset);
  for (Prediction& x : p) x.score -= shift;
  *programs = int64_t(held_out.dataset.programs.size());
  return p;
}

/// The members of --ensemble-of's comma-separated list, each without the spaces and tabs around
/// it. Throws ConfigError for an empty list or entry, a member named twice (under any
/// spelling), more than 64 members (training.ensemble's limit), or a member that is `out` itself
/// (any spelling or link).
std::vector<std::string> ensemble_members_of(const std::string& list, const std::string& out) {
  std::vector<std::string> members;
  size_t a = 0;
  while (true) {
    const size_t b = std::min(list.find(',', a), list.size());
    // "A, B": the space a person types after a comma is not part of the path
    const size_t first = list.find_first_not_of(" \t", a);
    if (first >= b)
      throw config::ConfigError(
          "--ensemble-of: an empty entry in '" + list +
          "' (give the member checkpoints as A,B,C; an empty value would train a model instead)");
    const size_t last = list.find_last_not_of(" \t", b - 1);  // >= first: list[first] is not blank
    members.push_back(list.substr(first, last - first + 1));
    if (b == list.size()) break;
    a = b + 1;
  }
  if (members.size() > 64)
    throw config::ConfigError("--ensemble-of: " + std::to_string(members.size()) +
                              " members; at most 64");
  std::error_code ec;
  const fs::path out_c = fs::weakly_canonical(out, ec);
  std::set<std::string> seen;
  for (const std::string& m : members) {
    const fs::path c = fs::weakly_canonical(m, ec);
    const std::string key = ec ? m : c.string();
    if (!seen.insert(key).second)
      throw config::ConfigError("--ensemble-of: " + m + " is named twice");
    if (key == out_c.string() ||
        (fs::exists(m, ec) && fs::exists(out, ec) && fs::equivalent(m, out, ec)))
      throw config::ConfigError("--ensemble-of: " + m +
                                " is the output of this experiment; choose another "
                                "experiment.name");
  }
  return members;
}

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
    throw config::ConfigError(std::string(flag) + ": " + path +
                              " is read-only (no owner write permission); it would be "
                              "rewritten in place: make it writable (chmod u+w) or copy it");
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  // the folder's owner write bit too: root passes access(W_OK) on a chmod 555 folder
  if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWUSR) == 0)
    throw config::ConfigError(std::string(flag) + ": the folder " + dir + " of " + path +
                              " is read-only (no owner write permission); make it "
                              "writable (chmod u+w) or copy the checkpoint elsewhere");
  if (::access(dir.c_str(), W_OK) != 0)
    throw config::ConfigError(std::string(flag) + ": cannot write into " + dir +
                              " (the folder of " + path + ")");
}

/// Refuses a mode of lcm-train that runs on one process when started under MPI.
void require_one_process(const char* what) {
  if (communicator().size() > 1)
    throw config::ConfigError(std::string(what) + " runs on one process, not under MPI");
}

/// calibrate_checkpoint() of `path` for --ensemble-of and --calibrate-only, printing the map's
/// summary as stored in `shown`; Ctrl-C stops the fold runs of training.calibration_folds
/// cleanly. Returns the exit code.
int calibrate_and_print(const config::Config& c, const std::string& path, const std::string& shown,
                        const TrainOptions& o) {
  if (c.training.calibration_folds > 0) install_stop_handlers("lcm-train");
  int code = 0;
  const lcm::model::Calibration cal = calibrate_checkpoint(c, path, o, &code);
  if (code != 0) return code;
  print_stored(cal, shown);
  return 0;
}

}  // namespace

TrainResult train(const config::Config& c, const TrainOptions& o) {
  // an empty fold is found before the run trains, not after it (one process: under MPI the
  // ranks prepare the data together inside the trainer; out_of_fold_predictions checks again)
  if (c.training.calibrate && c.training.calibration_folds > 1 && !o.resume &&
      communicator().size() == 1)
    check_fold_sizes(c, !o.quiet);
  TrainResult r = fit_model(c, o);  // its data is freed before the fold runs read theirs
  const bool trained = !r.history.empty() || r.nothing_to_do;
  if (r.exit_code != 0 || !c.training.calibrate || !trained) return r;
  r.exit_code = calibrate_finished_run(c, o, r);
  return r;
}

OutOfFold out_of_fold_predictions(const config::Config& c, const TrainOptions& o) {
  const int K = c.training.calibration_folds;
  if (K < 2)
    throw config::ConfigError(
        "training.calibration_folds must be >= 2 for out-of-fold predictions (0 fits the map "
        "on the training split)");
  check_fold_sizes(c, !o.quiet);
  const bool root = communicator().rank() == 0;
  OutOfFold out;
  int32_t program_base = 0;
  for (int k = 0; k < K; ++k) {
    const auto [ck, ok] = fold_run(c, o, k, K);
    std::printf("lcm-train: calibration fold %d of %d: experiment %s, trained %s%s\n", k + 1, K,
                ck.experiment.name.c_str(), ck.data.train_folds.text().c_str(),
                ok.resume ? " (resumed)" : "");
    std::fflush(stdout);
    const TrainResult r = fit_model(ck, ok);
    if (r.exit_code != 0) return {{}, r.exit_code};
    if (!root) continue;
    config::Config ek = ck;
    ek.eval.weights_path = r.paths.best;
    ek.eval.calibrated = false;
    int64_t programs = 0;
    std::vector<Prediction> p = held_out_predictions(ek, Predictor(ek), k, K, o.quiet, &programs);
    for (Prediction& x : p) x.program += program_base;
    program_base += int32_t(programs);
    std::printf(
        "lcm-train: calibration fold %d of %d: %lld out-of-fold predictions of %zu programs\n",
        k + 1, K, (long long)p.size(), size_t(programs));
    out.predictions.insert(out.predictions.end(), p.begin(), p.end());
  }
  return out;
}

lcm::model::Calibration calibrate_checkpoint(const config::Config& c, const std::string& path,
                                             const TrainOptions& o, int* exit_code) {
  if (exit_code) *exit_code = 0;
  const Predictor predictor = uncalibrated(c, path);
  if (c.training.calibration_folds > 0) {
    const OutOfFold oof = out_of_fold_predictions(c, o);
    if (oof.exit_code != 0) {
      if (exit_code) *exit_code = oof.exit_code;
      return {};
    }
    const lcm::model::Calibration cal = cross_fitted_map(c, predictor, oof, o.quiet);
    store_calibration(path, cal);
    return cal;
  }
  const bool relative = predictor.model().config().relative_to_identity;
  const lcm::data::PreparedSplit train = prepare_from_config(c, "train", !o.quiet);
  const lcm::model::Calibration cal =
      fit_calibration(predictor.predict(train.dataset), relative, c.training.calibration_weighting);
  store_calibration(path, cal);
  return cal;
}

int train_ensemble(const config::Config& c, bool resume, bool quiet, const std::string& pause_at) {
  const int K = c.training.ensemble;
  // The ensemble and its members <name>_m<k> are one run of experiment <name>: it is locked
  // while they train, and a new one never mixes with an earlier one's files (docs/run-state.md).
  const lcm::RunLock lock = lcm::lock_experiment(c.experiment.base_path, c.experiment.name);
  TrainOptions o;
  o.resume = resume;
  o.quiet = quiet;
  o.hooks.pause_at = pause_at;
  claim_experiment(c.experiment.base_path, c.experiment.name, RunTool::Train, resume,
                   c.experiment.overwrite, false, o.hooks);
  std::vector<std::string> bests;
  for (int k = 1; k <= K; ++k) {
    config::Config ck = c;
    ck.experiment.name = c.experiment.name + "_m" + std::to_string(k);
    ck.training.seed = c.training.seed + uint64_t(k - 1);
    ck.training.calibrate = false;  // the map belongs to the averaged scores
    std::printf("lcm-train: ensemble member %d of %d: experiment %s, training.seed=%llu\n", k, K,
                ck.experiment.name.c_str(), (unsigned long long)ck.training.seed);
    std::fflush(stdout);
    TrainOptions member = o;
    member.replace = true;  // a member's earlier files were moved with its run's above
    const TrainResult r = fit_model(ck, member);
    if (r.exit_code != 0) return r.exit_code;
    bests.push_back(r.paths.best);
  }
  const std::string out = run_paths(c).best;
  combine_ensemble(bests, out);
  std::printf("lcm-train: ensemble of %d members written to %s\n", K, out.c_str());
  if (!c.training.calibrate) return 0;
  int code = 0;
  const lcm::model::Calibration cal = calibrate_checkpoint(c, out, o, &code);  // o: fold runs'
  if (code != 0) return code;
  print_stored(cal, out);
  return 0;
}

std::string apply_cross_validation(config::Config& c) {
  const int K = c.data.cv_folds, k = c.data.cv_fold;
  if (K == 0) return "";
  if (K == 1)
    throw config::ConfigError(
        "data.cv_folds=1: cross-validation needs at least 2 folds (0 validates on "
        "data.valid_file)");
  if (k > K)
    throw config::ConfigError("data.cv_fold=" + std::to_string(k) +
                              " with data.cv_folds=" + std::to_string(K) +
                              ": the held-out fold is one of 1.." + std::to_string(K));
  if (c.training.calibration_folds > 0)
    throw config::ConfigError(
        "data.cv_folds and training.calibration_folds: choose one (the calibration's fold runs "
        "would cut the training folds again); set training.calibration_folds=0");
  c.data.train_folds = {K, k - 1, false};
  c.data.valid_folds = {K, k - 1, true};
  c.data.valid_file = c.data.train_file;
  return "cross-validation: trains on " + c.data.train_file + " " + c.data.train_folds.text() +
         ", validates on its " + c.data.valid_folds.text() + " (data.valid_file is not read)";
}

int run_training(const config::Config& given, const TrainOptions& o) {
  // A run that starts from training.init_weights takes its feature settings, for every data
  // preparation of the run (fit, calibration, folds, members).
  config::Config c = given;
  for (const auto& note : check_init_weights(c))
    std::fprintf(stderr, "lcm-train: %s\n", note.c_str());
  const std::string cv = apply_cross_validation(c);
  if (!cv.empty()) std::fprintf(stderr, "lcm-train: %s\n", cv.c_str());
  // The model, Adam state and one batch must fit before any data is read.
  check_training_memory(c);
  // From here on Ctrl-C (or a batch system's SIGTERM) only sets a flag; the trainer stops
  // after the current step and saves `last`.
  install_stop_handlers("lcm-train");
  if (c.training.ensemble > 1) {
    require_one_process("training.ensemble > 1");
    return train_ensemble(c, o.resume, o.quiet, o.hooks.pause_at);
  }
  return train(c, o).exit_code;
}

int write_ensemble_of(const config::Config& c, const std::string& list, const TrainOptions& o) {
  require_one_process("--ensemble-of");
  const std::string out = run_paths(c).best;
  const std::vector<std::string> members = ensemble_members_of(list, out);
  // a training run of this experiment would write `out` too
  const lcm::RunLock lock = lcm::lock_experiment(c.experiment.base_path, c.experiment.name);
  // the ensemble is a new run of the experiment: an earlier run there is refused, or moved
  // aside whole with experiment.overwrite=true (docs/run-state.md)
  claim_experiment(c.experiment.base_path, c.experiment.name, RunTool::Train, false,
                   c.experiment.overwrite, false, o.hooks);
  fs::create_directories(run_paths(c).weights_dir);
  combine_ensemble(members, out);
  std::printf("lcm-train: ensemble of %s written to %s\n",
              lcm::data::count_of(int64_t(members.size()), "member").c_str(), out.c_str());
  return c.training.calibrate ? calibrate_and_print(c, out, out, o) : 0;
}

int calibrate_only(const config::Config& c, const TrainOptions& o) {
  require_one_process("--calibrate-only");
  const std::string given = c.eval.weights_path.empty() ? run_paths(c).best : c.eval.weights_path;
  // A missing checkpoint is said as such, before a lock or a folder is made for it.
  std::error_code ec;
  if (!fs::exists(given, ec)) throw std::runtime_error("weights file not found: " + given);
  // Through a link, the checkpoint itself is rewritten (not the link replaced by a copy), and
  // the lock is that of the experiment the file belongs to, however it is reached.
  const fs::path resolved = fs::canonical(given, ec);
  const std::string path = ec ? given : resolved.string();
  const std::string shown = path == fs::absolute(given).lexically_normal().string()
                                ? given
                                : path + " (reached through " + given + ")";
  // a training run of the checkpoint's experiment must not write it meanwhile
  const lcm::RunLock lock = c.eval.weights_path.empty()
                                ? lcm::lock_experiment(c.experiment.base_path, c.experiment.name)
                                : lock_checkpoint_experiment(path);
  require_rewritable(path, "--calibrate-only");
  return calibrate_and_print(c, path, shown, o);
}

}  // namespace lcm::train
