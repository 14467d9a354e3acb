// The CPU training step in sub-batches (train/sub_batches.hpp, training.cpu_sub_batches): a
// selected part of a batch equals the batch materialized from those datapoints; the parts'
// loss, predictions and gradients equal the whole batch's up to float reassociation; the step
// gives the same bits on 1 and 2 threads; lcm-train with sub-batches is thread-count
// independent and trains as the whole-batch step does.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/synth.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "engine/threads.hpp"
#include "model/cost_model.hpp"
#include "support/model_support.hpp"
#include "support/test_support.hpp"
#include "train/run.hpp"
#include "train/sub_batches.hpp"

using namespace lcm;

namespace {

/// A synthetic training and validation file pair (2 tree shapes, 16 programs of 12 schedules).
struct Files {
  std::string train, valid;
  Files() {
    const std::string dir = test::temp_dir("sub_batches");
    train = dir + "/train.jsonl.gz";
    valid = dir + "/valid.jsonl.gz";
    data::SynthOptions o;
    o.programs = 16;
    o.schedules_per_program = 12;
    o.structures = 2;
    o.threads = 1;
    o.seed = 5;
    data::write_synth_file(train, o);
    o.programs = 6;
    o.seed = 6;
    data::write_synth_file(valid, o);
  }
};

const Files& files() {
  static const Files f;
  return f;
}

/// The gradients of every parameter of `m`, concatenated in store order.
std::vector<float> all_grads(model::CostModel<float>& m) {
  std::vector<float> g;
  for (const auto& p : m.params().all()) g.insert(g.end(), p.grad.begin(), p.grad.end());
  return g;
}

/// A small model with dropout `drop`, parameters re-drawn (seed 3) so that every gradient flows.
model::CostModel<float> small_model(double drop) {
  model::ModelConfig mc;
  mc.comp_embed_layer_sizes = {32, 16};
  mc.drops = {drop, drop};
  mc.lstm_embedding_size = 8;
  mc.expr_embed_size = 8;
  model::CostModel<float> m(mc, 1);
  test::randomize(m, 3, 0.2);
  return m;
}

/// One SubBatchStep::run of MAPE (weight part.batch / B) on `bt`, gradients into m's (zeroed
/// first). Returns the loss; the predictions go to *pred.
double split_step(model::CostModel<float>& m, train::SubBatchStep& step,
                  const data::BatchTensors& bt, const data::BatchTrees& trees, bool programs,
                  std::vector<float>* pred) {
  m.params().zero_grad();
  Rng rng(9);
  return step.run(
      bt, trees, programs, rng,
      [&](Tape<float>& t, const train::SubBatch& sub, Rng& r) {
        return m.forward(t, sub.trees, sub.bt, r);
      },
      [&](Tape<float>& t, NodeId y, const train::SubBatch& sub) {
        const NodeId target = t.constant(sub.bt.speedup.data(), Shape{sub.bt.batch});
        return ops::mape(t, y, target, float(sub.bt.batch) / float(bt.batch));
      },
      pred);
}

}  // namespace

TEST_CASE("select_points equals the batch materialized from the selected datapoints") {
  const data::PreparedSplit ps = test::prepare_mini(files().train, 64, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  int multi_segment = 0;
  for (int64_t b = 0; b < int64_t(ds.batches.size()); ++b) {
    const data::BatchTensors bt = ds.materialize(b);
    if (bt.segment_list().size() > 1) ++multi_segment;
    // every other program of the batch, and a contiguous run of datapoints
    std::set<int32_t> keep;
    for (size_t p = 0; p < bt.programs.size(); p += 2) keep.insert(int32_t(p));
    std::vector<int32_t> by_program, run;
    for (int64_t i = 0; i < bt.batch; ++i) {
      if (keep.count(bt.program_of[size_t(i)])) by_program.push_back(int32_t(i));
      if (i >= bt.batch / 3 && i < 2 * bt.batch / 3 + 1) run.push_back(int32_t(i));
    }
    for (const std::vector<int32_t>& idx : {by_program, run}) {
      data::BatchTrees trees;
      const data::BatchTensors got = train::select_points(bt, ds.trees(b), idx, &trees);
      data::Batch part;
      for (int32_t i : idx) part.points.push_back(ds.batches[size_t(b)].points[size_t(i)]);
      const data::BatchTensors want = ds.materialize(part);
      CHECK(got.batch == want.batch);
      CHECK(got.comp == want.comp);
      CHECK(got.loops == want.loops);
      CHECK(got.speedup == want.speedup);
      CHECK(got.expr == want.expr);
      CHECK(got.programs == want.programs);
      CHECK(got.program_of == want.program_of);
      CHECK(got.n_comps == want.n_comps);
      CHECK(got.n_loops == want.n_loops);
      const auto gs = got.segment_list(), ws = want.segment_list();
      REQUIRE(gs.size() == ws.size());
      for (size_t s = 0; s < gs.size(); ++s) {
        CHECK(gs[s].points == ws[s].points);
        CHECK(gs[s].n_comps == ws[s].n_comps);
      }
      // one tree per segment, of the shape Dataset::trees gives (its representative program
      // may be another of the same footprint)
      const data::BatchTrees wt = ds.trees(part);
      REQUIRE(trees.size() == wt.size());
      for (size_t s = 0; s < wt.size(); ++s)
        CHECK(data::footprint(*trees[s]) == data::footprint(*wt[s]));
      CHECK_NOTHROW(data::batch_layout(got));
    }
  }
  CHECK(multi_segment > 0);  // the mixed batches exercise the segment runs
  const data::BatchTensors bt = ds.materialize(0);
  data::BatchTrees t;
  CHECK_THROWS_AS(train::select_points(bt, ds.trees(0), {}, &t), std::invalid_argument);
  CHECK_THROWS_AS(train::select_points(bt, ds.trees(0), {1, 0}, &t), std::invalid_argument);
  CHECK_THROWS_AS(train::select_points(bt, ds.trees(0), {int32_t(bt.batch)}, &t),
                  std::invalid_argument);
}

TEST_CASE("sub_batch_points: whole programs or runs by program, covering the batch once") {
  const data::BatchTensors bt = test::random_batch(50, 7, 2, 2, 4);
  for (const bool programs : {true, false})
    for (const int parts : {1, 2, 3}) {
      const auto split = train::sub_batch_points(bt, parts, programs);
      REQUIRE(int(split.size()) == parts);
      std::vector<int> seen(size_t(bt.batch), 0);
      std::map<int32_t, size_t> part_of_program;
      for (size_t k = 0; k < split.size(); ++k) {
        CHECK(std::is_sorted(split[k].begin(), split[k].end()));
        for (int32_t i : split[k]) {
          ++seen[size_t(i)];
          if (programs) {
            auto it = part_of_program.emplace(bt.program_of[size_t(i)], k).first;
            CHECK(it->second == k);  // a program's datapoints stay in one part
          }
        }
        CHECK(!split[k].empty());
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  CHECK_THROWS_AS(train::sub_batch_points(bt, 0, false), std::invalid_argument);
}

TEST_CASE("the parts' loss and gradients equal the whole batch's up to reassociation") {
  set_num_threads(2);
  const data::PreparedSplit ps = test::prepare_mini(files().train, 64, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  model::CostModel<float> m = small_model(0.0);  // no dropout: the same function
  for (int64_t b = 0; b < int64_t(ds.batches.size()); ++b) {
    const data::BatchTensors bt = ds.materialize(b);
    const data::BatchTrees trees = ds.trees(b);
    m.params().zero_grad();
    Tape<float> tape;
    Rng rng(9);
    const NodeId y = m.forward(tape, trees, bt, rng);
    const NodeId loss = ops::mape(tape, y, tape.constant(bt.speedup.data(), Shape{bt.batch}), 1.0f);
    const double whole = double(tape.value(loss).data[0]);
    const std::vector<float> yw(tape.value(y).data, tape.value(y).data + bt.batch);
    tape.backward(loss);
    const std::vector<float> gw = all_grads(m);
    float gmax = 0;
    for (float v : gw) gmax = std::max(gmax, std::fabs(v));
    REQUIRE(gmax > 0);
    for (const int parts : {2, 3})
      for (const bool programs : {true, false}) {
        CAPTURE(b);
        CAPTURE(parts);
        CAPTURE(programs);
        train::SubBatchStep step(parameter_pointers(m.params()), parts);
        std::vector<float> pred;
        const double split = split_step(m, step, bt, trees, programs, &pred);
        // float sums of B ≤ 64 terms in another order: relative differences of a few ulp
        // (1.2e-7) per term; 1e-5 of the loss and of the largest gradient leaves 100× room
        CHECK(std::fabs(split - whole) <= 1e-5 * std::fabs(whole));
        REQUIRE(pred.size() == yw.size());
        for (size_t i = 0; i < pred.size(); ++i)
          CHECK(std::fabs(pred[i] - yw[i]) <= 1e-5f * std::max(1.0f, std::fabs(yw[i])));
        const std::vector<float> gs = all_grads(m);
        REQUIRE(gs.size() == gw.size());
        float worst = 0;
        for (size_t i = 0; i < gs.size(); ++i) worst = std::max(worst, std::fabs(gs[i] - gw[i]));
        CHECK(worst <= 1e-5f * gmax);
      }
  }
}

TEST_CASE("the sub-batch step gives the same bits on 1 and 2 threads, dropout on") {
  const data::PreparedSplit ps = test::prepare_mini(files().train, 64, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  std::map<int, std::vector<std::vector<float>>> grads, preds;
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    model::CostModel<float> m = small_model(0.3);
    train::SubBatchStep step(parameter_pointers(m.params()), 2);
    for (int64_t b = 0; b < int64_t(ds.batches.size()); ++b) {
      std::vector<float> pred;
      split_step(m, step, ds.materialize(b), ds.trees(b), true, &pred);
      grads[threads].push_back(all_grads(m));
      preds[threads].push_back(pred);
    }
  }
  CHECK(grads[1] == grads[2]);
  CHECK(preds[1] == preds[2]);
  set_num_threads(2);
}

namespace {

/// A tiny lcm-train run under `dir` with the given threads, sub-batches, loss and dropout.
config::Config run_config(const std::string& dir, int threads, int parts, const std::string& loss,
                          double drop) {
  config::Config c;
  const std::string d = std::to_string(drop);
  config::apply_overrides(
      c, {"data.train_file=" + files().train, "data.valid_file=" + files().valid,
          "experiment.base_path=" + dir, "data.batch_size=48", "data.min_functions_per_footprint=0",
          "training.threads=" + std::to_string(threads),
          "training.cpu_sub_batches=" + std::to_string(parts), "data.nb_workers=1",
          "training.max_epochs=2", "training.early_stop_patience=0",
          "model.comp_embed_layer_sizes=32,16", "model.drops=" + d + "," + d,
          "model.lstm_embedding_size=8", "model.expr_embed_size=8", "training.calibration_folds=0",
          "training.loss=" + loss});
  return c;
}

train::TrainResult quiet_run(const config::Config& c) {
  train::TrainOptions o;
  o.quiet = true;
  return train::train(c, o);
}

/// Every tensor of the run's `last` checkpoint as floats, by name.
std::map<std::string, std::vector<float>> last_weights(const train::TrainResult& r) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : read_safetensors(r.paths.last).tensors) {
    std::vector<float> v(t.bytes.size() / sizeof(float));
    std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
    out[name] = v;
  }
  return out;
}

}  // namespace

TEST_CASE("lcm-train in sub-batches: the same bits on 1 and 2 threads (ranking loss, dropout)") {
  const std::string dir = test::temp_dir("sub_batches_threads");
  const train::TrainResult a = quiet_run(run_config(dir + "/t1", 1, 2, "log_huber+pairwise", 0.05));
  const train::TrainResult b = quiet_run(run_config(dir + "/t2", 2, 2, "log_huber+pairwise", 0.05));
  REQUIRE(a.history.size() == 2);
  REQUIRE(b.history.size() == 2);
  for (size_t e = 0; e < 2; ++e) {
    CHECK(a.history[e].train_loss == b.history[e].train_loss);
    CHECK(a.history[e].train_mape == b.history[e].train_mape);
    CHECK(a.history[e].val_mape == b.history[e].val_mape);
  }
  CHECK(last_weights(a) == last_weights(b));
  set_num_threads(2);
}

TEST_CASE("lcm-train in sub-batches trains as the whole-batch step, up to reassociation") {
  const std::string dir = test::temp_dir("sub_batches_whole");
  for (const std::string loss : {"mape", "log_mse+pairwise"}) {
    CAPTURE(loss);
    const train::TrainResult whole = quiet_run(run_config(dir + "/w_" + loss, 2, 1, loss, 0.0));
    const train::TrainResult split = quiet_run(run_config(dir + "/s_" + loss, 2, 2, loss, 0.0));
    REQUIRE(whole.history.size() == 2);
    REQUIRE(split.history.size() == 2);
    // The first step's loss differs by rounding only; later steps start from weights that
    // differ by rounding too, so each epoch's mean loss agrees to about 1e-4 (measured ~1e-6).
    for (size_t e = 0; e < 2; ++e)
      CHECK(std::fabs(split.history[e].train_loss - whole.history[e].train_loss) <=
            1e-4 * std::fabs(whole.history[e].train_loss));
    // AdamW moves a weight by at most about lr per step (|m̂ / √v̂| ≤ 1 up to bias correction),
    // so a real difference between the steps (a part's gradient lost or doubled, another mask)
    // shows as differences of order lr within a few steps; rounding drift stays orders below:
    // 0.01 · lr per step (measured: about 3e-8 in all, 1 ulp of the weights).
    const auto ww = last_weights(whole), ws = last_weights(split);
    REQUIRE(ww.size() == ws.size());
    const double steps = 2.0 * double(test::prepare_mini(files().train, 48).dataset.batches.size());
    double worst = 0;
    for (const auto& [name, v] : ww) {
      const std::vector<float>& u = ws.at(name);
      REQUIRE(u.size() == v.size());
      for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, double(std::fabs(u[i] - v[i])));
    }
    MESSAGE(loss << ": largest weight difference " << worst);
    CHECK(worst <= 0.01 * 1e-3 * steps);
  }
}

TEST_CASE("lcm-train in sub-batches: a run stopped mid-epoch and resumed equals the whole run") {
  // the dropout stream moves on by the parts' draws each step and is saved with the run state
  const std::string dir = test::temp_dir("sub_batches_resume");
  const train::TrainResult a =
      quiet_run(run_config(dir + "/whole", 2, 2, "log_huber+pairwise", 0.05));
  REQUIRE(a.exit_code == 0);
  const config::Config cut = run_config(dir + "/cut", 2, 2, "log_huber+pairwise", 0.05);
  std::atomic<bool> stop{false};
  train::TrainOptions o;
  o.quiet = true;
  o.stop = &stop;
  o.after_step = [&](int64_t steps) {
    if (steps == 2) stop.store(true);  // inside epoch 1 (4 batches per epoch)
  };
  const train::TrainResult b = train::train(cut, o);
  CHECK(b.exit_code == 130);
  stop.store(false);
  train::TrainOptions ro;
  ro.quiet = true;
  ro.resume = true;
  ro.stop = &stop;
  const train::TrainResult r = train::train(cut, ro);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.history.size() == a.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {
    CHECK(r.history[e].train_loss == a.history[e].train_loss);
    CHECK(r.history[e].val_mape == a.history[e].val_mape);
  }
  CHECK(last_weights(r) == last_weights(a));
  set_num_threads(2);
}
