// Cross-fitted calibration: the fold runs and their out-of-fold predictions (crossfit.hpp).
#include "train/crossfit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/prepare.hpp"
#include "engine/safetensors.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"

namespace lcm::train {

namespace {

/// How an existing experiment of a fold run's name relates to fold run `ck`.
enum class Existing { None, SameFold, OtherFold };

/// Reads the stamps of the last checkpoint of `ck`'s experiment. Throws config::ConfigError when
/// it exists but is not a calibration fold run (never overwritten).
Existing existing_fold_run(const config::Config& ck) {
  const RunPaths p = run_paths(ck);
  std::error_code ec;
  const bool any = std::filesystem::exists(p.last, ec) || std::filesystem::exists(p.best, ec);
  if (!any) return Existing::None;
  const std::string path = std::filesystem::exists(p.last, ec) ? p.last : p.best;
  Metadata m;
  try {
    m = lcm::read_safetensors(path).metadata;
  } catch (const std::exception& e) {
    throw config::ConfigError("calibration fold run " + ck.experiment.name + ": " + path +
                              " cannot be read (" + e.what() +
                              "); remove it or choose another "
                              "experiment.name");
  }
  const std::string folds = metadata_value(m, meta::kTrainFolds);
  if (folds.empty())
    throw config::ConfigError(
        "calibration fold run " + ck.experiment.name + ": experiment.base_path " +
        "already holds an experiment of that name that is not a fold run (" + path +
        "); it is not overwritten: rename it or choose another "
        "experiment.name");
  const std::string file = metadata_value(m, meta::kTrainFile);
  std::error_code eq;
  const bool same_file =
      file == ck.data.train_file ||
      (!file.empty() && std::filesystem::equivalent(file, ck.data.train_file, eq) && !eq);
  return folds == ck.data.train_folds.text() && same_file && std::filesystem::exists(p.last, ec)
             ? Existing::SameFold
             : Existing::OtherFold;
}

}  // namespace

double score_shift(const std::vector<Prediction>& p, bool relative) {
  double n = 0, sum = 0;
  for (const Prediction& x : p)
    if (!std::isnan(x.measured) && std::isfinite(x.score)) {
      n += 1;
      sum += x.score;
    }
  if (n == 0) throw std::invalid_argument("score_shift: no labelled, finite score");
  return relative ? 0.0 : sum / n;
}

std::string fold_run_name(const std::string& name, int k, int K) {
  return name + "_fold" + std::to_string(k + 1) + "of" + std::to_string(K);
}

void check_fold_sizes(const config::Config& c, bool progress) {
  const int K = c.training.calibration_folds;
  config::Config all = c;
  all.data.train_folds = {};
  const lcm::data::PreparedSplit s = prepare_from_config(all, "train", progress);
  std::vector<int64_t> n(size_t(K), 0);
  for (const auto& p : s.dataset.programs) ++n[size_t(lcm::data::program_fold(p.name, K))];
  for (int k = 0; k < K; ++k)
    if (n[size_t(k)] == 0)
      throw config::ConfigError(
          "training.calibration_folds=" + std::to_string(K) + ": fold " + std::to_string(k + 1) +
          " of " + std::to_string(K) + " holds no program of " + c.data.train_file + " (" +
          std::to_string(s.dataset.programs.size()) +
          " programs kept; programs are cut into folds by a hash of their name): use fewer "
          "folds, or 0 to fit the calibration map on the training split itself");
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
    config::Config ck = c;
    ck.experiment.name = fold_run_name(c.experiment.name, k, K);
    ck.training.calibrate = false;
    ck.training.calibration_folds = 0;
    ck.training.ensemble = 1;
    ck.data.train_folds = {K, k, false};
    // on --resume a fold run of this file and fold continues (a finished one is reused as it
    // is); otherwise it trains anew: it depends on the run's data and settings
    const Existing before = existing_fold_run(ck);
    TrainOptions ok = o;
    ok.resume = o.resume && before == Existing::SameFold;
    // a fold run trained anew moves its earlier files (this run's by-products) aside whole
    ok.replace = !ok.resume;
    std::printf("lcm-train: calibration fold %d of %d: experiment %s, trained %s%s\n", k + 1, K,
                ck.experiment.name.c_str(), ck.data.train_folds.text().c_str(),
                ok.resume ? " (resumed)" : "");
    std::fflush(stdout);
    const TrainResult r = train(ck, ok);
    if (r.exit_code != 0) {
      out.exit_code = r.exit_code;
      out.predictions.clear();
      return out;
    }
    if (!root) continue;
    config::Config ek = ck;
    ek.eval.weights_path = r.paths.best;
    ek.eval.calibrated = false;
    const Predictor predictor(ek);
    const bool relative = predictor.model().config().relative_to_identity;
    // where this fold model puts the programs it trained on
    const double shift = score_shift(
        predictor.predict(prepare_from_config(ek, "train", !o.quiet).dataset), relative);
    ek.data.train_folds = {K, k, true};
    const lcm::data::PreparedSplit held_out = prepare_from_config(ek, "train", !o.quiet);
    std::vector<Prediction> p = predictor.predict(held_out.dataset);
    for (Prediction& x : p) x.score -= shift;
    for (Prediction& x : p) x.program += program_base;
    program_base += int32_t(held_out.dataset.programs.size());
    std::printf(
        "lcm-train: calibration fold %d of %d: %lld out-of-fold predictions of %zu programs\n",
        k + 1, K, (long long)p.size(), held_out.dataset.programs.size());
    out.predictions.insert(out.predictions.end(), p.begin(), p.end());
  }
  return out;
}

lcm::model::Calibration fit_cross_fitted(const config::Config& c, const OutOfFold& oof,
                                         double shift, bool anchor_at_zero) {
  lcm::model::Calibration cal =
      fit_calibration(oof.predictions, anchor_at_zero, c.training.calibration_weighting);
  for (double& x : cal.x) x += shift;
  cal.folds = c.training.calibration_folds;
  return cal;
}

}  // namespace lcm::train
