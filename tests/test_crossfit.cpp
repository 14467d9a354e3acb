// Tests of the cross-fitted calibration (training.calibration_folds, train/crossfit): the fold of
// a program (stable, balanced, a partition), the prepared splits of a fold run and of its held-out
// programs (disjoint, complete, cached apart from the full split), and lcm-train's fold runs: the
// map stored in the best checkpoint is the one fitted on the fold models' out-of-fold
// predictions, a stop inside a fold run is resumed, a finished run is not retrained, and an
// ensemble is calibrated the same way; cross-validation runs (data.cv_folds) train without one
// fold and validate on it.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

  // the same map from the fold runs' best checkpoints, predicted by hand: each fold model's scores
  // of the programs it did not see, in the units of its scores of those it trained on
  std::vector<train::Prediction> oof;
  int32_t base = 0;
  for (int k = 0; k < 2; ++k) {
    config::Config e = c;
    e.experiment.name = train::fold_run_name("lcm", k, 2);
    CHECK(e.experiment.name == "lcm_fold" + std::to_string(k + 1) + "of2");
    e.eval.weights_path = train::run_paths(e).best;
    e.eval.calibrated = false;
    REQUIRE(std::filesystem::exists(e.eval.weights_path));
    CHECK(read_safetensors(e.eval.weights_path).metadata.at(train::meta::kTrainFolds) ==
          "without fold " + std::to_string(k + 1) + " of 2");
    const train::Predictor fold_model(e);
    e.data.train_folds = {2, k, false};
    const double own = train::score_shift(
        fold_model.predict(train::prepare_from_config(e, "train", false).dataset), false);
    e.data.train_folds = {2, k, true};
    const data::PreparedSplit held = train::prepare_from_config(e, "train", false);
    for (train::Prediction p : fold_model.predict(held.dataset)) {
      p.program += base;
      p.score -= own;
      oof.push_back(p);
    }
    base += int32_t(held.dataset.programs.size());
  }
  REQUIRE(oof.size() == size_t(cal.fit_points));
  config::Config m = c;
  m.eval.weights_path = r.paths.best;
  m.eval.calibrated = false;
  const train::Predictor main_model(m);
  const double main_shift = train::score_shift(
      main_model.predict(train::prepare_from_config(c, "train", false).dataset), false);
  const model::Calibration centred =
      train::fit_calibration(oof, false, config::CalibrationWeighting::Program);
  REQUIRE(centred.x.size() == cal.x.size());
  for (size_t i = 0; i < cal.x.size(); ++i) {
    CHECK(cal.x[i] == doctest::Approx(main_shift + centred.x[i]));
    CHECK(cal.log_speedup[i] == centred.log_speedup[i]);
  }
  CHECK(cal.tail_slope == doctest::Approx(0.02));  // flat tails
  // whatever the run's scores, its calibrated speedups stay among the measured ones: the knots
  // are geometric means of measured speedups and the tails flat (a map of the fold models' raw
  // scores, with the map's mean slope as tails, sent every validation schedule to 100-1000x here)
  const data::PreparedSplit valid = train::prepare_eval_input(m, false, false);
  const data::PreparedSplit training = train::prepare_from_config(c, "train", false);
  double lo = 1e300, hi = 0;
  for (const auto& p : training.dataset.programs)
    for (float y : p.speedup) lo = std::min(lo, double(y)), hi = std::max(hi, double(y));
  for (const train::Prediction& p : main_model.predict(valid.dataset)) {
    CHECK(cal.apply(p.score) <= 1.1 * hi);
    CHECK(cal.apply(p.score) >= lo / 1.1);
  }
  // and not the in-sample map of the same checkpoint
  config::Config in_sample = c;
  config::apply_overrides(in_sample, {"training.calibration_folds=0"});
  const std::string copy = dir + "/copy.safetensors";
  std::filesystem::copy_file(r.paths.best, copy);
  const model::Calibration own =
      train::calibrate_checkpoint(in_sample, copy, test::quiet_training());
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
  // --resume reuses the finished fold runs (their files untouched) and stores the same map
  config::Config f1 = c;
  f1.experiment.name = train::fold_run_name("lcm", 0, 2);
  const auto stamp = std::filesystem::last_write_time(train::run_paths(f1).last);
  REQUIRE(train::train_ensemble(c, true, true) == 0);
  CHECK(std::filesystem::last_write_time(train::run_paths(f1).last) == stamp);
  CHECK(train::load_calibration(best).x == cal.x);
  // the fold runs are single models of the ensemble's name
  config::Config f = c;
  f.experiment.name = train::fold_run_name("lcm", 1, 2);
  CHECK(train::ensemble_members(train::run_paths(f).best) == 0);
}

TEST_CASE("cross-fitting refuses an empty fold before training and never overwrites a stranger") {
  const std::string dir = test::temp_dir("crossfit_refusals");
  const test::TinySplits s = test::write_tiny_splits(dir, 53);
  // 16 programs in 20 folds: some fold is empty, said before any run trains
  const config::Config many =
      test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=20"});
  const std::string why =
      test::error_of<config::ConfigError>([&] { train::train(many, test::quiet_training()); });
  CHECK(test::contains(why, "holds no program of"));
  CHECK(test::contains(why, "use fewer folds"));
  CHECK_FALSE(std::filesystem::exists(train::run_paths(many).best));
  // an experiment that happens to carry a fold run's name is not a fold run: refused, kept
  config::Config stranger = test::tiny_run_config(s, dir + "/run");
  stranger.experiment.name = train::fold_run_name("lcm", 1, 2);
  REQUIRE(train::train(stranger, test::quiet_training()).exit_code == 0);
  const auto kept = read_safetensors(train::run_paths(stranger).best).tensors;
  const config::Config c = test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=2"});
  const std::string refused =
      test::error_of<config::ConfigError>([&] { train::train(c, test::quiet_training()); });
  // its files are files of run "lcm" (docs/run-state.md): the new run is refused before it
  // trains, and --calibrate-only (no new run) refuses to retrain it as a fold run
  CHECK(test::contains(refused, "experiment lcm in " + dir + "/run already holds a run ("));
  const std::string not_fold = test::error_of<config::ConfigError>(
      [&] { train::out_of_fold_predictions(c, test::quiet_training()); });
  CHECK(test::contains(not_fold, "not a fold run"));
  const auto after = read_safetensors(train::run_paths(stranger).best).tensors;
  REQUIRE(after.size() == kept.size());
  for (size_t i = 0; i < kept.size(); ++i) CHECK(after[i].second.bytes == kept[i].second.bytes);
}

TEST_CASE("--resume of a finished run refits a map of other settings, in-sample too") {
  const std::string dir = test::temp_dir("crossfit_refit");
  const test::TinySplits s = test::write_tiny_splits(dir, 59);
  config::Config c = test::tiny_run_config(s, dir + "/run", {"training.calibration_folds=0"});
  REQUIRE(train::train(c, test::quiet_training()).exit_code == 0);
  const std::string best = train::run_paths(c).best;
  CHECK(train::load_calibration(best).weighting == "program");
  train::TrainOptions o = test::quiet_training();
  o.resume = true;
  config::apply_overrides(c, {"training.calibration_weighting=datapoint"});
  const train::TrainResult r = train::train(c, o);
  CHECK(r.nothing_to_do);
  CHECK(train::load_calibration(best).weighting == "datapoint");
  CHECK(train::load_calibration(best).folds == 0);
  config::apply_overrides(c, {"training.calibration_folds=2"});
  REQUIRE(train::train(c, o).exit_code == 0);
  CHECK(train::load_calibration(best).folds == 2);
}

TEST_CASE("data.cv_folds: a run trains without one fold and validates on it") {
  const std::string dir = test::temp_dir("crossfit_cv");
  const test::TinySplits s = test::write_tiny_splits(dir, 61);
  config::Config c = test::tiny_run_config(
      s, dir + "/run",
      {"data.cv_folds=3", "data.cv_fold=2", "data.valid_file=" + dir + "/absent.jsonl.gz"});
  const std::string note = train::apply_cross_validation(c);
  CHECK(test::contains(note, "without fold 2 of 3"));
  CHECK(test::contains(note, "fold 2 of 3 only"));
  CHECK(c.data.valid_file == s.train);  // the validation split comes from the training file
  std::filesystem::create_directories(train::ensure_cache_folder(c));
  const data::PrepareOptions vo = train::prepare_options(c, "valid");
  CHECK(vo.split == "valid_fold2of3");
  const data::PreparedSplit tr = data::prepare_split(train::prepare_options(c, "train"));
  const data::PreparedSplit va = data::prepare_split(vo);
  const std::set<std::string> a = names_of(tr.dataset), b = names_of(va.dataset);
  REQUIRE(!b.empty());
  for (const std::string& n : b) {
    CHECK(a.count(n) == 0);
    CHECK(data::program_fold(n, 3) == 1);
  }
  CHECK(a.size() + b.size() == 16);
  const train::TrainResult r = train::train(c);
  CHECK(r.exit_code == 0);
  CHECK(r.history.size() == 2);
  // refused: one fold, a fold past K, folds within the calibration's folds; through lcm-train too
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {"data.cv_fold=4", "one of 1..3"}, {"training.calibration_folds=2", "choose one"}}) {
    config::Config e = test::tiny_run_config(s, dir + "/run", {"data.cv_folds=3", bad});
    CHECK(test::contains(
        test::error_of<config::ConfigError>([&] { train::apply_cross_validation(e); }), message));
  }
  const test::RunResult one =
      test::run_tool(dir, "lcm-train",
                     "data.train_file=" + s.train + " data.valid_file=" + s.valid +
                         " experiment.base_path=" + dir + "/one data.cv_folds=1 -q");
  CHECK(one.code == 2);
  CHECK(test::contains(one.err, "data.cv_folds=1: cross-validation needs at least 2 folds"));
}

TEST_CASE("scripts/cv_select.sh: every fold of every setting, a table, resumable") {
  const std::string dir = test::temp_dir("crossfit_cv_select");
  const test::TinySplits s = test::write_tiny_splits(dir, 67);
  const std::string out = dir + "/cv";
  const std::string env =
      "FOLDS=2 TRAIN=" + s.train + " BIN=" + test::bin_dir() +
      " EXTRA='data.batch_size=32 data.nb_workers=1 training.max_epochs=2 "
      "training.early_stop_patience=0 model.comp_embed_layer_sizes=32,16 model.drops=0.05,0.05 "
      "model.lstm_embedding_size=8 model.expr_embed_size=8' ";
  const std::string cmd = env + "bash " + test::source_path("scripts/cv_select.sh") + " " + out +
                          " 'plain:' 'fast: training.lr=0.01' > " + dir + "/log.txt 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string table = test::slurp(out + "/cv_table.md");
  INFO(table << test::slurp(dir + "/log.txt"));
  for (const std::string run : {"plain_cv1of2", "plain_cv2of2", "fast_cv1of2", "fast_cv2of2"})
    CHECK(std::filesystem::is_regular_file(out + "/log_" + run + ".jsonl"));
  CHECK(test::contains(table, "| plain | 2/2 |"));
  CHECK(test::contains(table, "| fast | 2/2 |"));
  // a second call trains nothing and prints the same table
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(!test::contains(test::slurp(dir + "/log.txt"), "== plain"));
  CHECK(test::slurp(out + "/cv_table.md") == table);
  // a malformed setting is a usage error
  CHECK(std::system(("bash " + test::source_path("scripts/cv_select.sh") + " " + out +
                     " 'no name' > /dev/null 2>&1")
                        .c_str()) != 0);
}
