// Cross-fitted calibration: the fold runs and their out-of-fold predictions (crossfit.hpp).
#include "train/crossfit.hpp"

#include <cstdio>
#include <filesystem>
#include <string>

#include "data/prepare.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/predictor.hpp"
#include "train/splits.hpp"

namespace lcm::train {

OutOfFold out_of_fold_predictions(const config::Config& c, const TrainOptions& o) {
  const int K = c.training.calibration_folds;
  if (K < 2)
    throw config::ConfigError(
        "training.calibration_folds must be >= 2 for out-of-fold "
        "predictions (0 fits the map on the training split)");
  const bool root = communicator().rank() == 0;
  OutOfFold out;
  int32_t program_base = 0;
  for (int k = 0; k < K; ++k) {
    config::Config ck = c;
    ck.experiment.name = c.experiment.name + "_fold" + std::to_string(k + 1);
    ck.training.calibrate = false;
    ck.training.calibration_folds = 0;
    ck.training.ensemble = 1;
    ck.data.train_folds = {K, k, false};
    const RunPaths paths = run_paths(ck);
    std::error_code ec;
    // on --resume a fold run continues (a finished one is reused as it is); a new run trains
    // its fold runs anew, as they depend on its data and settings
    const bool exists = std::filesystem::exists(paths.last, ec);
    std::printf("lcm-train: calibration fold %d of %d: experiment %s, trained %s\n", k + 1, K,
                ck.experiment.name.c_str(), ck.data.train_folds.text().c_str());
    std::fflush(stdout);
    TrainOptions ok = o;
    ok.resume = o.resume && exists;
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
    ek.data.train_folds = {K, k, true};
    const Predictor predictor(ek);
    const lcm::data::PreparedSplit held_out = prepare_from_config(ek, "train", !o.quiet);
    std::vector<Prediction> p = predictor.predict(held_out.dataset);
    for (Prediction& x : p) x.program += program_base;
    program_base += int32_t(held_out.dataset.programs.size());
    std::printf(
        "lcm-train: calibration fold %d of %d: %lld out-of-fold predictions of %zu "
        "programs\n",
        k + 1, K, (long long)p.size(), held_out.dataset.programs.size());
    out.predictions.insert(out.predictions.end(), p.begin(), p.end());
  }
  return out;
}

lcm::model::Calibration fit_cross_fitted(const config::Config& c, const OutOfFold& oof,
                                         bool anchor_at_zero) {
  lcm::model::Calibration cal =
      fit_calibration(oof.predictions, anchor_at_zero, c.training.calibration_weighting);
  cal.folds = c.training.calibration_folds;
  return cal;
}

}  // namespace lcm::train
