// Tests of model::score_batch, the one path from features to reported speedups (model/scoring.hpp):
// for small random models, plain and as a 2-member ensemble, absolute and relative to the
// untransformed schedule, with and without a calibration map, it equals the steps composed by
// hand (scaling, forwards, subtraction, mean, map) bit for bit, and train::predict_dataset
// reports exactly what it computes, also over a CUDA device batch store's staged inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "data/prepare.hpp"
#include "engine/device_memory.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "model/calibration.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "model/scoring.hpp"
#include "support/cuda_support.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/checkpoint.hpp"
#include "train/device_batch_store.hpp"
#include "train/evaluate.hpp"
#include "train/splits.hpp"

using namespace lcm;

namespace {

/// A small synthetic split, its fitted log_standardize scaling and two models of one
/// configuration with different random weights.
struct Setup {
  std::string dir;
  test::TinySplits splits;
  data::PreparedSplit valid;
  model::InputScaling scaling;
  model::ModelConfig cfg;
  std::unique_ptr<model::CostModel<float>> m0, m1;
  Setup() : dir(test::temp_dir("scoring")), splits(test::write_tiny_splits(dir, 43)) {
    const config::Config c = test::tiny_run_config(splits, dir + "/runs");
    data::PreparedSplit train = train::prepare_from_config(c, "train", false);
    valid = train::prepare_from_config(c, "valid", false);
    scaling = model::fit_input_scaling("log_standardize", train.dataset);
    cfg = train::model_config(c);
    REQUIRE(cfg.log_output);  // the tiny run's loss is in log space (relative needs it)
    m0 = std::make_unique<model::CostModel<float>>(cfg, 11);
    m1 = std::make_unique<model::CostModel<float>>(cfg, 12);
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

/// A strictly increasing map through (0, 0) that changes every value (docs/accuracy.md).
model::Calibration small_map() {
  model::Calibration cal;
  cal.kind = "isotonic_log";
  cal.x = {-2.0, -0.5, 0.0, 0.4, 3.0};
  cal.log_speedup = {-1.5, -0.2, 0.0, 0.9, 1.2};
  cal.tail_slope = 0.02;
  REQUIRE(cal.active());
  return cal;
}

/// score_batch's result for batch b of ds, composed by hand from its documented steps.
std::vector<model::ScoredDatapoint> by_hand(const std::vector<model::CostModel<float>*>& members,
                                            const model::InputScaling& scaling,
                                            const model::Calibration* cal, bool relative,
                                            const data::Dataset& ds, int64_t b) {
  data::BatchTensors bt = ds.materialize(b);
  scaling.apply(bt);  // 1. scaling
  data::Batch ub;     // the untransformed schedules of the batch's programs
  for (int32_t p : bt.programs) ub.points.push_back({p, data::kIdentitySchedule});
  data::BatchTensors it = ds.materialize(ub);
  scaling.apply(it);
  const auto& pts = ds.batches[size_t(b)].points;
  std::vector<double> sum(pts.size(), 0.0);
  for (model::CostModel<float>* m : members) {
    Tape<float> tape;
    tape.set_training(false);
    tape.set_grad_enabled(false);
    Rng rng(0);
    const std::vector<float> y = to_host(tape.value(m->forward(tape, ds.trees(b), bt, rng)));  // 2.
    const std::vector<float> f0 = to_host(tape.value(m->forward(tape, ds.trees(ub), it, rng)));
    for (size_t i = 0; i < pts.size(); ++i) {
      double s = double(y[i]);
      if (relative)  // 3.
        s = ds.programs[size_t(pts[i].program)].is_identity(pts[i].schedule)
                ? 0.0
                : double(y[i] - f0[size_t(bt.program_of[i])]);
      sum[i] += s;
    }
  }
  std::vector<model::ScoredDatapoint> out(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    out[i].score = sum[i] / double(members.size());  // 4. mean
    out[i].uncalibrated = std::exp(out[i].score);    // the log head's map (|score| < 50 here)
    out[i].speedup = cal ? cal->apply(out[i].score) : out[i].uncalibrated;  // 5.–6.
  }
  return out;
}

/// Checks score_batch against by_hand on every batch of the validation split, and
/// predict_dataset against score_batch, for these members, map and relativity.
void check_path(const std::vector<model::CostModel<float>*>& members, const model::Calibration* cal,
                bool relative) {
  Setup& s = setup();
  const data::Dataset& ds = s.valid.dataset;
  REQUIRE(!ds.batches.empty());
  model::ScoringModels m;
  m.members = members;
  m.scaling = &s.scaling;
  m.calibration = cal;
  m.relative_to_identity = relative;
  CHECK(m.relative() == relative);
  int64_t untransformed = 0, points = 0;
  std::map<std::pair<int32_t, int32_t>, model::ScoredDatapoint> scored;  // (program, schedule)
  for (int64_t b = 0; b < int64_t(ds.batches.size()); ++b) {
    model::ScoringBatch batch;
    batch.trees = ds.trees(b);
    batch.features = ds.materialize(b);
    const auto& pts = ds.batches[size_t(b)].points;
    for (const auto& p : pts)
      batch.untransformed.push_back(ds.programs[size_t(p.program)].is_identity(p.schedule));
    data::Batch ub;
    for (int32_t p : batch.features.programs) ub.points.push_back({p, data::kIdentitySchedule});
    batch.untransformed_trees = ds.trees(ub);
    batch.untransformed_features = ds.materialize(ub);
    Tape<float> tape;
    const std::vector<model::ScoredDatapoint> got = model::score_batch(m, batch, tape);
    const std::vector<model::ScoredDatapoint> want =
        by_hand(members, s.scaling, cal, relative, ds, b);
    REQUIRE(got.size() == pts.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("batch " << b << ", datapoint " << i);
      CHECK(got[i].score == want[i].score);
      CHECK(got[i].uncalibrated == want[i].uncalibrated);
      CHECK(got[i].speedup == want[i].speedup);
      CHECK(got[i].speedup > 0);
      if (relative && batch.untransformed[i]) {
        CHECK(got[i].score == 0.0);
        CHECK(got[i].speedup == 1.0);  // the map passes through (0, 0): 1x
        ++untransformed;
      }
      scored[{pts[i].program, pts[i].schedule}] = got[i];
      if (cal && got[i].score != 0.0) CHECK(got[i].speedup != got[i].uncalibrated);
      ++points;
    }
  }
  CHECK(points == ds.n_datapoints());
  if (relative) CHECK(untransformed > 0);
  // lcm-eval's, lcm-predict's and validation's prediction is this path's, datapoint by datapoint
  const std::vector<train::Prediction> p = train::predict_dataset(m, ds);
  REQUIRE(int64_t(p.size()) == points);
  for (const train::Prediction& x : p) {
    const model::ScoredDatapoint& want = scored.at({x.program, x.schedule});
    CHECK(x.score == want.score);
    CHECK(x.uncalibrated == want.uncalibrated);
    CHECK(x.predicted == want.speedup);
  }
}

}  // namespace

TEST_CASE("score_batch of one model, absolute, no map = exp of its output after scaling") {
  check_path({setup().m0.get()}, nullptr, false);
}

TEST_CASE("score_batch of one model relative to the untransformed schedule, with a map") {
  const model::Calibration cal = small_map();
  check_path({setup().m0.get()}, &cal, true);
}

TEST_CASE("score_batch of a 2-member ensemble: mean of the members' scores, with and without map") {
  const model::Calibration cal = small_map();
  check_path({setup().m0.get(), setup().m1.get()}, nullptr, false);
  check_path({setup().m0.get(), setup().m1.get()}, nullptr, true);
  check_path({setup().m0.get(), setup().m1.get()}, &cal, true);
  check_path({setup().m0.get(), setup().m1.get()}, &cal, false);
}

TEST_CASE("score_batch's ensemble is not one member's answer") {
  Setup& s = setup();
  const data::Dataset& ds = s.valid.dataset;
  auto run = [&](const std::vector<model::CostModel<float>*>& members) {
    model::ScoringModels m;
    m.members = members;
    m.scaling = &s.scaling;
    return train::predict_dataset(m, ds);
  };
  const auto a = run({s.m0.get()}), b = run({s.m1.get()}), ab = run({s.m0.get(), s.m1.get()});
  REQUIRE(a.size() == ab.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(ab[i].score == (a[i].score + b[i].score) / 2);
    differ += ab[i].score != a[i].score;
  }
  CHECK(differ > 0);
}

TEST_CASE("score_batch refuses what it cannot score") {
  Setup& s = setup();
  const data::Dataset& ds = s.valid.dataset;
  Tape<float> tape;
  model::ScoringModels none;
  model::ScoringBatch batch;
  batch.trees = ds.trees(0);
  batch.features = ds.materialize(0);
  CHECK_THROWS_AS(model::score_batch(none, batch, tape), std::invalid_argument);
  model::ScoringModels rel;
  rel.members = {s.m0.get()};
  rel.relative_to_identity = true;
  CHECK_THROWS_WITH_AS(model::score_batch(rel, batch, tape),
                       doctest::Contains("untransformed schedules' outputs or features"),
                       std::invalid_argument);
  model::ScoringModels two;
  two.members = {s.m0.get(), s.m1.get()};
  const model::ForwardInputs<float> staged = s.m0->prepare_inputs(batch.trees, batch.features);
  batch.staged = &staged;
  CHECK_THROWS_WITH_AS(model::score_batch(two, batch, tape), doctest::Contains("2 ensemble"),
                       std::invalid_argument);
}

TEST_CASE("score_batch over a device batch store's staged inputs = over the host upload") {
  if (test::skipped_without_cuda("staged inputs on CUDA")) return;
  Setup& s = setup();
  const data::Dataset& ds = s.valid.dataset;
  model::CostModel<float> device_model(s.cfg, 11);  // m0's weights, on cuda:0
  parameters_to_device(device_model.params(), 0);
  for (bool relative : {false, true}) {
    CAPTURE(relative);
    model::ScoringModels m;
    m.members = {&device_model};
    m.scaling = &s.scaling;
    m.relative_to_identity = relative;
    const std::vector<train::Prediction> host = train::predict_dataset(m, ds);
    // every batch resident, then every batch streamed through the staging buffers
    for (size_t budget : {size_t(1) << 40, size_t(0)}) {
      CAPTURE(budget);
      train::DeviceBatchStore store(device_model, ds, &s.scaling, 0, budget);
      const std::vector<train::Prediction> staged = train::predict_dataset(m, ds, {}, &store);
      REQUIRE(staged.size() == host.size());
      for (size_t i = 0; i < host.size(); ++i) {
        CHECK(staged[i].score == host[i].score);
        CHECK(staged[i].predicted == host[i].predicted);
      }
    }
  }
}

namespace {

/// One program's batch with its datapoints repeated to `n` (the schedules cycled): a query larger
/// than one slice of CostModel::forward_parts.
data::BatchTensors repeated_query(const data::ProgramFeatures& p, int64_t n) {
  const data::BatchTensors one = data::program_batch(p, 0, p.n_schedules());
  data::BatchTensors q = one;
  q.comp.clear();
  q.loops.clear();
  q.speedup.clear();
  q.program_of.clear();
  const int64_t C = one.n_comps, L = one.n_loops;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i % one.batch;
    q.comp.insert(q.comp.end(), one.comp.begin() + b * C * data::kCompVectorWidth,
                  one.comp.begin() + (b + 1) * C * data::kCompVectorWidth);
    q.loops.insert(q.loops.end(), one.loops.begin() + b * L * data::kLoopVectorWidth,
                   one.loops.begin() + (b + 1) * L * data::kLoopVectorWidth);
    q.speedup.push_back(one.speedup[size_t(b)]);
    q.program_of.push_back(0);
  }
  q.batch = n;
  return q;
}

}  // namespace

TEST_CASE("forward_parts: a query in slices = forward() of each slice; any thread count alike") {
  using M = model::CostModel<float>;
  CHECK(M::inference_parts(1) == 1);
  CHECK(M::inference_parts(64) == 1);
  CHECK(M::inference_parts(65) == 2);
  CHECK(M::inference_parts(100) == 2);
  CHECK(M::inference_parts(1000000) == 8);
  Setup& s = setup();
  const data::ProgramFeatures& p = s.valid.dataset.programs.at(0);
  const int64_t B = 150;  // 3 slices of 50
  data::BatchTensors q = repeated_query(p, B);
  s.scaling.apply(q);
  Tape<float> tape;
  tape.set_training(false);
  tape.set_grad_enabled(false);
  Rng rng(0);
  const std::vector<float> whole = to_host(tape.value(s.m0->forward(tape, p.tree, q, rng)));
  // each slice's values are forward()'s on that slice, bit for bit
  std::vector<float> by_slice;
  for (int64_t b = 0; b < B; b += 50) {
    data::BatchTensors part = repeated_query(p, B);  // the same rows, then cut
    s.scaling.apply(part);
    part.comp.assign(part.comp.begin() + b * p.n_comps * data::kCompVectorWidth,
                     part.comp.begin() + (b + 50) * p.n_comps * data::kCompVectorWidth);
    part.loops.assign(part.loops.begin() + b * p.n_loops * data::kLoopVectorWidth,
                      part.loops.begin() + (b + 50) * p.n_loops * data::kLoopVectorWidth);
    part.speedup.assign(part.speedup.begin() + b, part.speedup.begin() + b + 50);
    part.program_of.assign(50, 0);
    part.batch = 50;
    tape.clear();
    const std::vector<float> y = to_host(tape.value(s.m0->forward(tape, p.tree, part, rng)));
    by_slice.insert(by_slice.end(), y.begin(), y.end());
  }
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    runs.push_back(s.m0->forward_parts(tape, p.tree, q, nullptr));
  }
  set_num_threads(1);
  REQUIRE(runs[0].size() == size_t(B));
  CHECK(runs[0] == by_slice);
  CHECK(runs[1] == runs[0]);
  // and the whole batch's forward up to the rounding of products over fewer rows
  for (int64_t i = 0; i < B; ++i)
    CHECK(runs[0][size_t(i)] == doctest::Approx(whole[size_t(i)]).epsilon(1e-5));
  // with the program's rows given (lcm-serve's program cache) the same up to rounding
  const std::vector<float> rows = s.m0->program_rows(tape, data::BatchTrees{&p.tree}, q);
  const std::vector<float> sw = s.m0->schedule_weight();
  const std::vector<float> cached = s.m0->forward_parts(tape, p.tree, q, &rows, sw.data());
  for (int64_t i = 0; i < B; ++i)
    CHECK(cached[size_t(i)] == doctest::Approx(whole[size_t(i)]).epsilon(1e-5));
  // without rows, forward_parts computes the same rows once for all slices: the same bits
  CHECK(cached == runs[0]);
  // score_batch takes this path for such a query: its scores are these outputs
  model::ScoringModels m;
  m.members = {s.m0.get()};
  model::ScoringBatch sb;
  sb.features = repeated_query(p, B);  // unscaled: score_batch scales
  sb.trees = {&p.tree};
  m.scaling = &s.scaling;
  const std::vector<model::ScoredDatapoint> got = model::score_batch(m, sb, tape);
  REQUIRE(got.size() == size_t(B));
  for (int64_t i = 0; i < B; ++i) CHECK(got[size_t(i)].score == double(runs[0][size_t(i)]));
}
