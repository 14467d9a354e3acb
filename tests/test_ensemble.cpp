// Tests of ensemble checkpoints (train/ensemble): the members' scores averaged in the output space,
// one member identical to its plain checkpoint, training.ensemble=K end to end (members, one
// calibrated file), and the refusals: members of different configurations, a file that is not a
// cost model, lcm-serve's Scorer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/safetensors.hpp"
#include "serve/scorer.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/ensemble.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/trainer.hpp"

using namespace lcm;

namespace {

struct Runs {
  std::string dir;
  config::Config c;
  std::string a, b, optimizer;
  Runs() {
    dir = test::temp_dir("ensemble");
    c = test::tiny_run_config(test::write_tiny_splits(dir, 41, 10), dir + "/run");
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
  const model::Calibration cal = train::calibrate_checkpoint(r.c, two, false);
  CHECK(cal.active());
  config::Config e = r.c;
  config::apply_overrides(e, {"eval.weights_path=" + two});
  const train::Predictor ens(e);
  CHECK(ens.members() == 2);
  const auto pc = ens.predict(valid.dataset);
  for (size_t i = 0; i < pc.size(); ++i) CHECK(pc[i].predicted == cal.apply(p2[i].score));
  // lcm-serve serves one model
  CHECK_THROWS_WITH_AS(serve::Scorer{e}, doctest::Contains("is an ensemble of 2 models"),
                       config::ConfigError);
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
  REQUIRE(t1.tensors.size() == ta.tensors.size());
  for (size_t i = 0; i < t1.tensors.size(); ++i)
    CHECK(t1.tensors[i].second.bytes == ta.tensors[i].second.bytes);
  const auto ens = read_safetensors(p.best);
  CHECK(ens.tensors.size() == 2 * ta.tensors.size());
}
