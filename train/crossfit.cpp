// Cross-fitted calibration: the fold runs and their out-of-fold predictions (crossfit.hpp).
#include "train/crossfit.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/prepare.hpp"
#include "engine/safetensors.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"

namespace lcm::train {

ExistingFoldRun existing_fold_run(const config::Config& ck) {
  const RunPaths p = run_paths(ck);
  std::error_code ec;
  const bool any = std::filesystem::exists(p.last, ec) || std::filesystem::exists(p.best, ec);
  if (!any) return ExistingFoldRun::None;
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
             ? ExistingFoldRun::SameFold
             : ExistingFoldRun::OtherFold;
}

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

lcm::model::Calibration fit_cross_fitted(const config::Config& c, const OutOfFold& oof,
                                         double shift, bool anchor_at_zero) {
  lcm::model::Calibration cal =
      fit_calibration(oof.predictions, anchor_at_zero, c.training.calibration_weighting);
  for (double& x : cal.x) x += shift;
  cal.folds = c.training.calibration_folds;
  return cal;
}

}  // namespace lcm::train
