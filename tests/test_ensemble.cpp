// Tests of ensemble checkpoints (train/ensemble): the members' scores averaged in the output space,
// one member identical to its plain checkpoint, training.ensemble=K end to end (members, one
// calibrated file), lcm-serve's Scorer serving one as Predictor predicts it, and the refusals:
// members of different configurations, a file that is not a cost model.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/safetensors.hpp"
#include "serve/scorer.hpp"
#include "support/gz_support.hpp"
#include "support/safetensors_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/ensemble.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/trainer.hpp"
#include "util/run_lock.hpp"

using namespace lcm;

namespace {

struct Runs {
  std::string dir;
  config::Config c;
  std::string a, b, optimizer;
  Runs() {
    dir = test::temp_dir("ensemble");
    // log-MSE: its tiny models' scores are near ln speedups, so their in-sample map is kept
    c = test::tiny_run_config(test::write_tiny_splits(dir, 41, 10), dir + "/run",
                              {"training.loss=log_mse+pairwise"});
    train::TrainOptions q;
    q.quiet = true;
    for (int s : {1, 2}) {
      config::Config k = c;
      config::apply_overrides(
          k, {"experiment.name=s" + std::to_string(s), "training.seed=" + std::to_string(s)});
      const train::TrainResult r = train::train(k, q);
      REQUIRE(r.exit_code == 0);
      (s == 1 ? a : b) = r.paths.best;
      optimizer = r.paths.optimizer;
    }
  }
};

const Runs& runs() {
  static const Runs r;
  return r;
}

std::vector<train::Prediction> raw_predictions(const config::Config& c, const std::string& ckpt,
                                               const data::Dataset& ds) {
  config::Config e = c;
  config::apply_overrides(e, {"eval.weights_path=" + ckpt, "eval.calibrated=false"});
  return train::Predictor(e).predict(ds);
}

}  // namespace

TEST_CASE("an ensemble predicts the mean of its members' scores; one member = the plain model") {
  const Runs& r = runs();
  const data::PreparedSplit valid = train::prepare_eval_input(r.c, false, false);
  const std::string two = r.dir + "/two.safetensors", one = r.dir + "/one.safetensors";
  train::combine_ensemble({r.a, r.b}, two);
  train::combine_ensemble({r.a}, one);
  CHECK(train::ensemble_members(two) == 2);
  CHECK(train::ensemble_members(one) == 1);
  CHECK(train::ensemble_members(r.a) == 0);
  const auto pa = raw_predictions(r.c, r.a, valid.dataset);
  const auto pb = raw_predictions(r.c, r.b, valid.dataset);
  const auto p2 = raw_predictions(r.c, two, valid.dataset);
  const auto p1 = raw_predictions(r.c, one, valid.dataset);
  REQUIRE(p2.size() == pa.size());
  int differ = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    CHECK(p2[i].score == (pa[i].score + pb[i].score) / 2);
    CHECK(p2[i].predicted == doctest::Approx(std::exp(p2[i].score)).epsilon(1e-12));
    CHECK(p1[i].predicted == pa[i].predicted);  // K = 1: identical to the plain checkpoint
    CHECK(p1[i].score == pa[i].score);
    differ += pa[i].score != pb[i].score;
  }
  CHECK(differ > 0);  // two seeds, two models
  // the calibration map of the averaged scores
  const model::Calibration cal = train::calibrate_checkpoint(r.c, two, test::quiet_training());
  REQUIRE(cal.active());
  config::Config e = r.c;
  config::apply_overrides(e, {"eval.weights_path=" + two});
  const train::Predictor ens(e);
  CHECK(ens.members() == 2);
  const auto pc = ens.predict(valid.dataset);
  for (size_t i = 0; i < pc.size(); ++i) CHECK(pc[i].predicted == cal.apply(p2[i].score));
}

namespace {

/// Checks that lcm-serve's Scorer on `ckpt` answers Predictor's raw (eval.calibrated=false)
/// speedups for every schedule of `valid_file`, and with the map the map of Predictor's score;
/// returns the number of schedules compared. `identity_one`: the untransformed schedule must
/// score exactly 1×.
int check_scorer_matches(const config::Config& c, const std::string& ckpt,
                         const std::string& valid_file, bool identity_one) {
  config::Config e = c;
  config::apply_overrides(e, {"eval.weights_path=" + ckpt, "eval.calibrated=false"});
  const data::PreparedSplit valid = train::prepare_eval_input(e, false, false);
  const std::vector<train::Prediction> p = train::Predictor(e).predict(valid.dataset);
  serve::Scorer raw(e);
  config::apply_overrides(e, {"eval.calibrated=true"});
  serve::Scorer calibrated(e);
  REQUIRE(raw.predictor().members() == calibrated.predictor().members());
  REQUIRE(calibrated.predictor().calibration().active());
  int checked = 0;
  for (const std::string& line : test::gz_lines(valid_file)) {
    const test::QueryProgram q = test::query_program(line);
    const auto got = raw.score(q.program, q.untransformed, q.schedules);
    const auto got_cal = calibrated.score(q.program, q.untransformed, q.schedules);
    REQUIRE(got.size() == q.schedules.size());
    if (identity_one) CHECK(got[0].speedup == 1.0);
    for (const auto& [k, x] : test::predictions_of(q.name, p, valid.dataset)) {
      REQUIRE(got[k].ok());
      CHECK(got[k].speedup == doctest::Approx(x->predicted).epsilon(1e-5));
      // the map applied to the same averaged score (compared in score space: the map can be
      // steep on a tiny model, so ~1e-7 float differences between the paths can move its value)
      const double s = std::log(got[k].speedup);
      const model::Calibration& cal = calibrated.predictor().calibration();
      CHECK(got_cal[k].speedup >= cal.apply(s - 1e-5) * (1 - 1e-9));
      CHECK(got_cal[k].speedup <= cal.apply(s + 1e-5) * (1 + 1e-9));
      ++checked;
    }
  }
  CHECK(checked == int(p.size()));
  return checked;
}

}  // namespace

TEST_CASE("lcm-serve's Scorer serves an ensemble as Predictor predicts it") {
  const Runs& r = runs();
  const std::string two = r.dir + "/serve_two.safetensors";
  train::combine_ensemble({r.a, r.b}, two);
  train::calibrate_checkpoint(r.c, two, test::quiet_training());
  CHECK(check_scorer_matches(r.c, two, r.dir + "/valid.jsonl.gz", false) > 0);
  // relative to the untransformed schedule: every member's f0 subtracted, the untransformed
  // schedule exactly 1x
  std::vector<std::string> members;
  for (int s : {1, 2}) {
    config::Config k = r.c;
    config::apply_overrides(
        k, {"experiment.name=id" + std::to_string(s), "training.seed=" + std::to_string(s),
            "model.relative_to_identity=true"});
    train::TrainOptions q;
    q.quiet = true;
    const train::TrainResult t = train::train(k, q);
    REQUIRE(t.exit_code == 0);
    members.push_back(t.paths.best);
  }
  const std::string id2 = r.dir + "/serve_id2.safetensors";
  train::combine_ensemble(members, id2);
  train::calibrate_checkpoint(r.c, id2, test::quiet_training());
  CHECK(check_scorer_matches(r.c, id2, r.dir + "/valid.jsonl.gz", true) > 0);
}

TEST_CASE("combine_ensemble refuses other configurations, ensembles and non-models") {
  const Runs& r = runs();
  config::Config k = r.c;
  config::apply_overrides(
      k, {"experiment.name=wide", "model.comp_embed_layer_sizes=40,16", "training.max_epochs=1"});
  train::TrainOptions q;
  q.quiet = true;
  const train::TrainResult w = train::train(k, q);
  REQUIRE(w.exit_code == 0);
  const std::string out = r.dir + "/bad.safetensors";
  CHECK_THROWS_WITH_AS(train::combine_ensemble({r.a, w.paths.best}, out),
                       doctest::Contains("lcm.model_config differs"), std::runtime_error);
  CHECK_THROWS_WITH_AS(train::combine_ensemble({r.a, r.optimizer}, out),
                       doctest::Contains("not a cost-model checkpoint"), std::runtime_error);
  train::combine_ensemble({r.a, r.b}, r.dir + "/e.safetensors");
  CHECK_THROWS_WITH_AS(train::combine_ensemble({r.dir + "/e.safetensors"}, out),
                       doctest::Contains("is itself an ensemble"), std::runtime_error);
  CHECK_THROWS_AS(train::combine_ensemble({r.dir + "/missing.safetensors"}, out),
                  std::runtime_error);
}

TEST_CASE("training.ensemble=2 trains two members and writes one calibrated ensemble") {
  const Runs& r = runs();
  config::Config k = r.c;
  config::apply_overrides(k, {"experiment.name=ens", "training.ensemble=2", "training.seed=1"});
  REQUIRE(train::train_ensemble(k, false, true) == 0);
  const train::RunPaths p = train::run_paths(k);
  CHECK(train::ensemble_members(p.best) == 2);
  CHECK(train::load_calibration(p.best).active());
  // member 1 is the plain run of seed 1 (same config, same seed): the same weights as run "s1"
  config::Config m1 = k;
  config::apply_overrides(m1, {"experiment.name=ens_m1"});
  const auto t1 = read_safetensors(train::run_paths(m1).best);
  const auto ta = read_safetensors(r.a);
  lcm::test::expect_same_tensors(t1, ta);
  const auto ens = read_safetensors(p.best);
  CHECK(ens.tensors.size() == 2 * ta.tensors.size());
}

TEST_CASE("lcm-train --ensemble-of / --calibrate-only refuse what they would get wrong") {
  const Runs& r = runs();
  const std::string base = r.dir + "/run";
  const std::string data = "data.train_file=" + r.dir + "/train.jsonl.gz data.valid_file=" + r.dir +
                           "/valid.jsonl.gz training.threads=1 data.nb_workers=1 -q "
                           // no cache: the calls without experiment.base_path would write it
                           // under the current directory's runs/
                           "data.cache=false ";
  auto refused = [&](const std::string& args, const std::string& what) {
    const test::RunResult t = test::run_tool(r.dir, "lcm-train", data + args);
    INFO(args << "\n" << t.out << t.err);
    CHECK(t.code != 0);
    CHECK(test::contains(t.err, what));
  };
  const std::string ens = "experiment.base_path=" + base + " experiment.name=cli_ens ";
  // an empty value (an unset shell variable) must not train a new model instead
  refused(ens + "--ensemble-of ''", "an empty entry");
  CHECK_FALSE(std::filesystem::exists(base + "/weights/best_model_cli_ens.safetensors"));
  refused(ens + "--ensemble-of " + r.a + ",", "an empty entry");
  refused(ens + "--ensemble-of " + r.a + "," + r.a, "is named twice");
  // the output of this experiment under another spelling is still the output
  const std::string other_spelling = base + "/weights/../weights/best_model_s1.safetensors";
  refused("experiment.base_path=" + base + " experiment.name=s1 --ensemble-of " + other_spelling +
              "," + r.b,
          "is the output of this experiment");
  refused(ens + "--ensemble-of " + r.a + "," + r.b + " --calibrate-only", "choose one");
  refused(ens + "--ensemble-of " + r.a + "," + r.b + " --resume", "takes no --resume");
  refused("eval.weights_path=" + r.a + " --calibrate-only --resume", "takes no --resume");
  // a read-only checkpoint is not rewritten (root could), and is left as it was
  const std::string ro_dir = r.dir + "/ro/weights", ro = ro_dir + "/best_model_ro.safetensors";
  std::filesystem::create_directories(ro_dir);
  std::filesystem::copy_file(r.a, ro, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(ro, std::filesystem::perms::owner_read |
                                       std::filesystem::perms::group_read |
                                       std::filesystem::perms::others_read);
  const std::string ro_bytes = test::slurp(ro);
  refused("eval.weights_path=" + ro + " --calibrate-only", "is read-only");
  CHECK(test::slurp(ro) == ro_bytes);
  // a run of the checkpoint's experiment holds its lock: neither mode writes under it
  {
    const lcm::RunLock held = lcm::lock_experiment(base, "s2");
    refused("eval.weights_path=" + r.b + " --calibrate-only", "in use by another run");
    refused("experiment.base_path=" + base + " experiment.name=s2 --calibrate-only",
            "in use by another run");
    refused("experiment.base_path=" + base + " experiment.name=s2 --ensemble-of " + r.a,
            "in use by another run");
    // ... also when the checkpoint is reached through a link to its folder or to the file
    const std::string wlink = r.dir + "/wlink", flink = r.dir + "/flink.safetensors";
    std::filesystem::remove(wlink);
    std::filesystem::remove(flink);
    std::filesystem::create_directory_symlink(base + "/weights", wlink);
    std::filesystem::create_symlink(r.b, flink);
    const std::string b_bytes = test::slurp(r.b);
    refused("eval.weights_path=" + wlink + "/best_model_s2.safetensors --calibrate-only",
            "in use by another run");
    refused("eval.weights_path=" + flink + " --calibrate-only", "in use by another run");
    CHECK(test::slurp(r.b) == b_bytes);
  }
  // a link is followed: the checkpoint is recalibrated, the link stays a link
  {
    const std::string target = r.dir + "/linked/best_model_lk.safetensors",
                      link = r.dir + "/lk_link.safetensors";
    std::filesystem::create_directories(r.dir + "/linked");
    std::filesystem::copy_file(r.b, target, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::remove(link);
    std::filesystem::create_symlink(target, link);
    const std::string before = test::slurp(target);
    const test::RunResult t = test::run_tool(
        r.dir, "lcm-train", data + "eval.weights_path=" + link + " --calibrate-only");
    INFO(t.out << t.err);
    CHECK(t.code == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(test::contains(t.out, "(reached through " + link + ")"));
    CHECK(test::slurp(target) != before);  // rewritten with its new map
    CHECK(train::load_calibration(target).active());
  }
  // a read-only folder is refused too (root would pass an access() check), file left as it was
  const std::string rod = r.dir + "/rodir/weights", rof = rod + "/best_model_rod.safetensors";
  std::filesystem::create_directories(rod);
  std::filesystem::copy_file(r.a, rof, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(rod, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::remove);
  const std::string rof_bytes = test::slurp(rof);
  refused("eval.weights_path=" + rof + " --calibrate-only", "is read-only");
  std::filesystem::permissions(rod, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  CHECK(test::slurp(rof) == rof_bytes);
  // a checkpoint that does not exist is said so, and nothing is created for it
  const std::string never = r.dir + "/never_made";
  refused("experiment.base_path=" + never + " experiment.name=typo --calibrate-only",
          "weights file not found");
  CHECK_FALSE(std::filesystem::exists(never));
  refused("eval.weights_path=/dev/null --calibrate-only", "not a regular file");
  // the space typed after a comma is not part of a member's path; a directory is named as one
  {
    const test::RunResult t = test::run_tool(r.dir, "lcm-train",
                                             data + "experiment.base_path=" + base +
                                                 " experiment.name=spaced --ensemble-of '" + r.a +
                                                 ", " + r.b + "' training.calibrate=false");
    INFO(t.out << t.err);
    CHECK(t.code == 0);
    CHECK(train::ensemble_members(base + "/weights/best_model_spaced.safetensors") == 2);
  }
  refused(ens + "--ensemble-of " + r.a + "," + r.dir, "is a directory");
}
