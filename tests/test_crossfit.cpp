// Tests of the cross-fitted calibration (training.calibration_folds, train/crossfit): the fold of
// a program (stable, balanced, a partition), the prepared splits of a fold run and of its held-out
// programs (disjoint, complete, cached apart from the full split), and lcm-train's fold runs: the
// map stored in the best checkpoint is the one fitted on the fold models' out-of-fold
// predictions, a stop inside a fold run is resumed, a finished run is not retrained, and an
// ensemble is calibrated the same way.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/prepare.hpp"
#include "engine/safetensors.hpp"
#include "model/calibration.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/crossfit.hpp"
#include "train/ensemble.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"
#include "train/trainer.hpp"

using namespace lcm;

namespace {

std::set<std::string> names_of(const data::Dataset& ds) {
  std::set<std::string> s;
  for (const auto& p : ds.programs) s.insert(p.name);
  return s;
}

}  // namespace

TEST_CASE("program_fold: stable, in range, balanced; a selection and its complement partition") {
  std::vector<int> count(3, 0);
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "function" + std::to_string(100000 + 7 * i);
    const int f = data::program_fold(name, 3);
    REQUIRE(f >= 0);
    REQUIRE(f < 3);
    CHECK(data::program_fold(name, 3) == f);  // a function of the name alone
    ++count[size_t(f)];
    const data::FoldSelection without{3, f, false}, only{3, f, true}, all{};
    CHECK(only.keeps(name));
    CHECK_FALSE(without.keeps(name));
    CHECK(all.keeps(name));
    CHECK(data::FoldSelection{3, (f + 1) % 3, false}.keeps(name));
  }
  for (int n : count) {
    CHECK(n > 850);  // 1000 expected each
    CHECK(n < 1150);
  }
  CHECK(data::program_fold("x", 1) == 0);
  CHECK_THROWS_AS(data::program_fold("x", 0), std::invalid_argument);
  CHECK(data::FoldSelection{3, 1, true}.text() == "fold 2 of 3 only");
  CHECK(data::FoldSelection{3, 1, false}.text() == "without fold 2 of 3");
}

TEST_CASE("a fold run's split and its held-out programs partition the training split") {
  const std::string dir = test::temp_dir("crossfit_splits");
  const test::TinySplits s = test::write_tiny_splits(dir, 31);
  config::Config c = test::tiny_run_config(s, dir + "/run");
  std::filesystem::create_directories(train::ensure_cache_folder(c));
  const data::PreparedSplit all = data::prepare_split(train::prepare_options(c, "train"));
  const std::set<std::string> every = names_of(all.dataset);
  REQUIRE(every.size() == 16);
  std::set<std::string> seen;
  for (int k = 0; k < 3; ++k) {
    c.data.train_folds = {3, k, false};
    const data::PrepareOptions ow = train::prepare_options(c, "train");
    CHECK(ow.split == "train_without_fold" + std::to_string(k + 1) + "of3");
    const data::PreparedSplit without = data::prepare_split(ow);
    c.data.train_folds = {3, k, true};
    const data::PreparedSplit only = data::prepare_split(train::prepare_options(c, "train"));
    const std::set<std::string> a = names_of(without.dataset), b = names_of(only.dataset);
    for (const std::string& n : b) {
      CHECK(a.count(n) == 0);
      CHECK(data::program_fold(n, 3) == k);
      CHECK(seen.insert(n).second);  // each program held out by exactly one fold
    }
    CHECK(a.size() + b.size() == every.size());
    // the programs a split leaves out are counted, not lost
    CHECK(without.counts.skips.at("fold/other_fold") == int64_t(b.size()));
    if (!a.empty()) CHECK(only.counts.skips.at("fold/other_fold") == int64_t(a.size()));
    CHECK(without.counts.programs_read == 16);
  }
  CHECK(seen == every);
  // the full split's cache is still the full split
  c.data.train_folds = {};
  const data::PreparedSplit again = data::prepare_split(train::prepare_options(c, "train"));
  CHECK(again.from_cache);
  CHECK(names_of(again.dataset) == every);
}

TEST_CASE("lcm-train with training.calibration_folds: the map is fitted on out-of-fold scores") {
  const std::string dir = test::temp_dir("crossfit_train");
  const test::TinySplits s = test::write_tiny_splits(dir, 41);
  const config::Config c = test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=2"});
  train::TrainOptions o;
  o.quiet = true;
  const train::TrainResult r = train::train(c, o);
  REQUIRE(r.exit_code == 0);
  const model::Calibration cal = train::load_calibration(r.paths.best);
  CHECK(cal.folds == 2);
  CHECK(cal.weighting == "program");
  CHECK(cal.fit_points == 16 * 12);  // every training datapoint, each predicted once

  // the same map from the fold runs' best checkpoints, predicted by hand
  std::vector<train::Prediction> oof;
  int32_t base = 0;
  for (int k = 0; k < 2; ++k) {
    config::Config e = c;
    e.experiment.name = "lcm_fold" + std::to_string(k + 1);
    e.eval.weights_path = train::run_paths(e).best;
    e.eval.calibrated = false;
    e.data.train_folds = {2, k, true};
    REQUIRE(std::filesystem::exists(e.eval.weights_path));
    const train::Predictor fold_model(e);
    const data::PreparedSplit held = train::prepare_from_config(e, "train", false);
    for (train::Prediction p : fold_model.predict(held.dataset)) {
      p.program += base;
      oof.push_back(p);
    }
    base += int32_t(held.dataset.programs.size());
  }
  REQUIRE(oof.size() == size_t(cal.fit_points));
  const model::Calibration expect = train::fit_calibration(oof, false);
  CHECK(expect.x == cal.x);
  CHECK(expect.log_speedup == cal.log_speedup);
  // and not the in-sample map of the same checkpoint
  config::Config in_sample = c;
  config::apply_overrides(in_sample, {"training.calibration_folds=0"});
  const std::string copy = dir + "/copy.safetensors";
  std::filesystem::copy_file(r.paths.best, copy);
  const model::Calibration own = train::calibrate_checkpoint(in_sample, copy, false);
  CHECK(own.folds == 0);
  CHECK(own.x != cal.x);

  // --resume of the finished run: nothing retrained, the map kept
  const auto before = read_safetensors(r.paths.best).metadata.at(train::meta::kCalibration);
  o.resume = true;
  const train::TrainResult again = train::train(c, o);
  CHECK(again.exit_code == 0);
  CHECK(again.nothing_to_do);
  CHECK(read_safetensors(r.paths.best).metadata.at(train::meta::kCalibration) == before);
}

TEST_CASE("a stop inside a fold run leaves no map; --resume finishes the fold runs") {
  const std::string dir = test::temp_dir("crossfit_stop");
  const test::TinySplits s = test::write_tiny_splits(dir, 43);
  const config::Config c = test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=2"});
  // the main run takes 2 epochs x 6 batches = 12 steps; stop at fold run 1's third step
  std::atomic<bool> stop{false};
  int64_t steps = 0;
  train::TrainOptions o;
  o.quiet = true;
  o.stop = &stop;
  o.after_step = [&](int64_t) {
    if (++steps == 15) stop = true;
  };
  const train::TrainResult r = train::train(c, o);
  CHECK(r.exit_code == 130);
  CHECK(read_safetensors(r.paths.best).metadata.count(train::meta::kCalibration) == 0);
  stop = false;
  o.after_step = nullptr;
  o.resume = true;
  const train::TrainResult done = train::train(c, o);
  REQUIRE(done.exit_code == 0);
  const model::Calibration cal = train::load_calibration(done.paths.best);
  CHECK(cal.active());
  CHECK(cal.folds == 2);
  CHECK(cal.fit_points == 16 * 12);
}

TEST_CASE("calibration_folds=1 is refused; an ensemble is calibrated on single fold models") {
  const std::string dir = test::temp_dir("crossfit_ensemble");
  const test::TinySplits s = test::write_tiny_splits(dir, 47);
  const config::Config one =
      test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=1"});
  CHECK(test::contains(test::error_of<config::ConfigError>([&] { train::train(one); }),
                       "at least 2 folds"));
  const config::Config c = test::tiny_run_config(
      s, dir + "/run", {"training.calibration_folds=2", "training.ensemble=2"});
  REQUIRE(train::train_ensemble(c, false, true) == 0);
  const std::string best = train::run_paths(c).best;
  CHECK(train::ensemble_members(best) == 2);
  const model::Calibration cal = train::load_calibration(best);
  CHECK(cal.folds == 2);
  CHECK(cal.fit_points == 16 * 12);
  // the fold runs are single models of the ensemble's name
  config::Config f = c;
  f.experiment.name = "lcm_fold2";
  CHECK(train::ensemble_members(train::run_paths(f).best) == 0);
}
