// Tests of prediction relative to the untransformed schedule (model.relative_to_identity): the
// untransformed schedule's descriptor built by featurize (the same as an untransformed schedule 0,
// kept by the cache), the relative forward = f(schedule) − f(untransformed) exactly, checkpoints
// that record it, and the untransformed schedule predicted at exactly 1× by lcm-eval's Predictor
// and by lcm-serve's Scorer, which agree on every other schedule.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/prepare.hpp"
#include "engine/ops.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "model/cost_model.hpp"
#include "serve/scorer.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/device_batch_store.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/splits.hpp"
#include "train/trainer.hpp"

using namespace lcm;

namespace {

struct Files {
  std::string dir;
  test::TinySplits splits;
  Files() : dir(test::temp_dir("identity")), splits(test::write_tiny_splits(dir, 31)) {}
};

const Files& files() {
  static const Files f;
  return f;
}

config::Config small_config(const std::string& base) {
  return test::tiny_run_config(files().splits, base, {"model.relative_to_identity=true"});
}

}  // namespace

TEST_CASE("featurize builds the untransformed schedule: schedule 0 of a synthetic program is it") {
  const config::Config c = small_config(files().dir + "/unused");
  data::PrepareOptions o = train::prepare_options(c, "train");
  o.cache_dir = files().dir + "/cache";
  const data::PreparedSplit first = data::prepare_split(o);
  REQUIRE(!first.dataset.programs.empty());
  for (const data::ProgramFeatures& p : first.dataset.programs) {
    INFO(p.name);
    REQUIRE(p.has_identity());
    CHECK(p.is_identity(0));  // lcm-synth's schedule 0 has no transformation
    int transformed = 0;
    for (int64_t s = 1; s < p.n_schedules(); ++s) transformed += !p.is_identity(s);
    CHECK(transformed > 0);
    const size_t nc = size_t(p.n_comps) * data::kCompVectorWidth;
    const size_t nl = size_t(p.n_loops) * data::kLoopVectorWidth;
    std::vector<float> a(nc), b(nc), la(nl), lb(nl);
    p.comp_vectors(data::kIdentitySchedule, a.data(), la.data());
    p.comp_vectors(0, b.data(), lb.data());
    CHECK(a == b);
    CHECK(la == lb);
    const data::BatchTensors ib = data::identity_batch(p, 3);
    CHECK(ib.batch == 1);
    CHECK(ib.comp == a);
    CHECK(ib.speedup == std::vector<float>{1.0f});
    CHECK(ib.programs == std::vector<int32_t>{3});
  }
  // the cache keeps it
  const data::PreparedSplit again = data::prepare_split(o);
  REQUIRE(again.from_cache);
  REQUIRE(again.dataset.programs.size() == first.dataset.programs.size());
  for (size_t i = 0; i < again.dataset.programs.size(); ++i)
    CHECK(again.dataset.programs[i].identity_descriptor ==
          first.dataset.programs[i].identity_descriptor);
  // a hand-built program has none: a clear error, not another schedule's rows
  data::ProgramFeatures bare;
  bare.name = "bare";
  std::vector<float> out(16);
  CHECK_THROWS_AS(bare.schedule_rows(data::kIdentitySchedule, out.data(), out.data()),
                  data::DataError);
}

TEST_CASE("the relative forward is f(schedule) − f(untransformed), exactly") {
  const config::Config c = small_config(files().dir + "/unused2");
  data::PreparedSplit s = train::prepare_from_config(c, "valid", false);
  const data::Dataset& ds = s.dataset;
  REQUIRE(!ds.batches.empty());
  model::ModelConfig abs_cfg = train::model_config(c);
  abs_cfg.relative_to_identity = false;
  model::ModelConfig rel_cfg = abs_cfg;
  rel_cfg.relative_to_identity = true;
  model::CostModel<float> abs_model(abs_cfg, 5), rel_model(rel_cfg, 5);  // the same weights
  Tape<float> tape;
  tape.set_training(false);
  tape.set_grad_enabled(false);
  Rng rng(0);
  const train::BatchInput in = train::batch_input(ds, 0, nullptr, nullptr);
  const std::vector<float> rel = to_host(tape.value(in.forward(rel_model, tape, ds, 0, rng)));
  const std::vector<float> abs = to_host(tape.value(in.forward(abs_model, tape, ds, 0, rng)));
  const data::BatchTensors& bt = in.labels();
  data::Batch ub;
  for (int32_t p : bt.programs) ub.points.push_back({p, data::kIdentitySchedule});
  const std::vector<float> f0 =
      to_host(tape.value(abs_model.forward(tape, ds.trees(ub), ds.materialize(ub), rng)));
  REQUIRE(rel.size() == abs.size());
  for (size_t i = 0; i < rel.size(); ++i) CHECK(rel[i] == abs[i] - f0[size_t(bt.program_of[i])]);
  // gradients reach the weights through both forwards
  tape.clear();
  tape.set_training(true);
  tape.set_grad_enabled(true);
  const NodeId y = in.forward(rel_model, tape, ds, 0, rng);
  tape.backward(ops::sum(tape, y));
  double g = 0;
  for (auto& p : rel_model.params().all())
    for (float v : p.grad) g += std::fabs(double(v));
  CHECK(g > 0);
}

TEST_CASE(
    "a relative checkpoint: recorded, refused with mape, untransformed = 1x in eval and serve") {
  const std::string base = files().dir + "/run";
  config::Config c = small_config(base);
  {
    config::Config bad = c;
    config::apply_overrides(bad, {"training.loss=mape"});
    CHECK_THROWS_AS(train::model_config(bad), config::ConfigError);
  }
  train::TrainOptions o;
  o.quiet = true;
  const train::TrainResult r = train::train(c, o);
  REQUIRE(r.exit_code == 0);
  const auto meta = read_safetensors(r.paths.best).metadata;
  CHECK(test::contains(meta.at(train::meta::kModelConfig), "\"relative_to\":\"identity\""));
  const model::ModelConfig mc = train::model_config_from_json(meta.at(train::meta::kModelConfig));
  CHECK(mc.relative_to_identity);
  const model::Calibration cal = train::load_calibration(r.paths.best);
  REQUIRE(cal.active());
  CHECK(cal.apply(0.0) == 1.0);  // the map is anchored at score 0 → 1×
  {  // a map that does not pass through 1x at 0 (a damaged file) is refused, not applied
    model::Calibration shifted = cal;
    for (double& l : shifted.log_speedup) l += 0.5;
    const std::string copy = files().dir + "/shifted.safetensors";
    std::filesystem::copy_file(r.paths.best, copy,
                               std::filesystem::copy_options::overwrite_existing);
    train::store_calibration(copy, shifted);
    config::Config d = c;
    config::apply_overrides(d, {"eval.weights_path=" + copy});
    CHECK_THROWS_WITH_AS(train::Predictor{d}, doctest::Contains("must pass through 1x at 0"),
                         std::runtime_error);
  }

  config::Config e = c;
  config::apply_overrides(e, {"eval.weights_path=" + r.paths.best});
  const train::Predictor predictor(e);
  const data::PreparedSplit valid = train::prepare_eval_input(e, true, false);
  const std::vector<train::Prediction> p = predictor.predict(valid.dataset);
  int identities = 0, others_not_one = 0;
  for (const train::Prediction& x : p) {
    const data::ProgramFeatures& pf = valid.dataset.programs[size_t(x.program)];
    if (pf.is_identity(x.schedule)) {
      CHECK(x.predicted == 1.0);
      CHECK(x.uncalibrated == 1.0);
      ++identities;
    } else {
      others_not_one += x.predicted != 1.0;
    }
  }
  CHECK(identities == int(valid.dataset.programs.size()));
  CHECK(others_not_one > 0);

  // lcm-serve's Scorer: the same speedups, the untransformed schedule exactly 1×. Compared
  // before the calibration map: its slope near 0 can be steep enough on this tiny model to turn
  // the two paths' float differences in the raw score (~1e-7) into percent.
  config::apply_overrides(e, {"eval.calibrated=false"});
  const train::Predictor raw_predictor(e);
  const std::vector<train::Prediction> praw = raw_predictor.predict(valid.dataset);
  serve::Scorer scorer(e);
  const std::vector<std::string> lines = test::gz_lines(files().splits.valid);
  int checked = 0;
  for (const std::string& line : lines) {
    const test::QueryProgram q = test::query_program(line);
    const std::vector<serve::ScheduleScore> got =
        scorer.score(q.program, q.untransformed, q.schedules);
    REQUIRE(got.size() == q.schedules.size());
    CHECK(got[0].speedup == 1.0);
    for (const auto& [k, x] : test::predictions_of(q.name, praw, valid.dataset)) {
      REQUIRE(got[k].ok());
      CHECK(got[k].speedup == doctest::Approx(x->predicted).epsilon(1e-5));
      ++checked;
    }
  }
  CHECK(checked == int(praw.size()));
}
