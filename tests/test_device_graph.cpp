// Launch counts and CUDA graphs (engine/device_graph.hpp): the counts of a few calls, a captured
// training forward + loss + backward of the cost model replayed to the same loss, predictions and
// gradients as the uncaptured step (also after the parameters changed: a replay reads the current
// values), what a capture refuses, and the launches per training step of a tests/data batch,
// uncaptured and captured (printed: the proxy of the GPU's launch bound). What a replayed training
// step reads per step: a captured dropout draws the masks of the device counter's step; clipping
// on the device and AdamW from device scalars replay the uncaptured step under a changing LR and
// β1. lcm-train with training.cuda_graphs (train/step_graphs.hpp): runs with graphs off and on end
// with the same weights, optimizer moments and losses, bit for bit, under dropout, active
// clipping and a per-batch one-cycle schedule, with several batches of different trees replayed
// in turn; a graph limit below the batches per epoch runs the rest uncaptured with the same
// result; the launches of a steady lcm-train step with and without graphs (printed). Runs on a
// real GPU and on the emulated device (-DLCM_CUDA_EMULATE=ON); skipped in a build without CUDA,
// after checking that the counts stay zero and a capture is refused there.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/loss_terms.hpp"
#include "data/prepare.hpp"
#include "engine/device_graph.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "model/cost_model.hpp"
#include "support/cuda_support.hpp"
#include "support/model_support.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/losses.hpp"
#include "train/step_graphs.hpp"
#include "train/trainer.hpp"

using namespace lcm;
using lcm::model::CostModel;
using lcm::model::ModelConfig;

namespace {

/// A cost model small enough for the emulated device, with dropout (the capture must record the
/// masks of the step it captured).
ModelConfig small_config() {
  ModelConfig c;
  c.comp_embed_layer_sizes = {48, 24};
  c.drops = {0.05, 0.05};
  c.lstm_embedding_size = 12;
  c.expr_embed_size = 10;
  return c;
}

/// tests/data/synth_train.jsonl.gz prepared in memory in batches of `batch_size`.
data::PreparedSplit synth_split(int batch_size) {
  return test::prepare_mini(std::string(LCM_SOURCE_DIR) + "/tests/data/synth_train.jsonl.gz",
                            batch_size);
}

/// Every device gradient of `m`'s parameters, concatenated (host copy).
std::vector<float> device_grads(CostModel<float>& m) {
  std::vector<float> g;
  for (Parameter<float>& p : m.params().all()) {
    if (!p.device_grad) continue;
    std::vector<float> h(size_t(p.numel()));
    device_download(h.data(), p.device_grad, p.numel());
    g.insert(g.end(), h.begin(), h.end());
  }
  return g;
}

/// What one training forward + loss + backward leaves: the loss, the predictions, the gradients.
struct StepResult {
  float loss = 0;
  std::vector<float> pred, grads;
};

/// The nodes of one recorded forward + loss + backward on `tape` (dropout from Rng(seed)).
struct StepNodes {
  NodeId pred = -1, loss = -1;
};
StepNodes record_step(CostModel<float>& m, Tape<float>& tape, const data::Dataset& ds, int64_t b,
                      const data::BatchTensors& bt, uint64_t seed) {
  Rng rng(seed);
  tape.clear();
  tape.set_training(true);
  tape.set_grad_enabled(true);
  StepNodes n;
  n.pred = m.forward(tape, ds.trees(b), bt, rng);
  n.loss = train::training_loss(tape, config::parse_objective("log_huber+pairwise"), n.pred, bt,
                                1.0f, 1.0f);
  tape.backward(n.loss);
  return n;
}
StepResult read_step(CostModel<float>& m, Tape<float>& tape, const StepNodes& n) {
  StepResult r;
  r.loss = to_host(tape.value(n.loss))[0];
  r.pred = to_host(tape.value(n.pred));
  r.grads = device_grads(m);
  return r;
}

void expect_equal(const StepResult& a, const StepResult& b) {
  CHECK(a.loss == b.loss);
  REQUIRE(a.pred.size() == b.pred.size());
  REQUIRE(a.grads.size() == b.grads.size());
  size_t pred_diff = 0, grad_diff = 0;
  for (size_t i = 0; i < a.pred.size(); ++i) pred_diff += a.pred[i] != b.pred[i];
  for (size_t i = 0; i < a.grads.size(); ++i) grad_diff += a.grads[i] != b.grads[i];
  CHECK(pred_diff == 0);
  CHECK(grad_diff == 0);
}

}  // namespace

TEST_CASE("device launch counts: each kernel, copy and graph launch is counted once") {
  if (test::no_cuda_reason() == "this build has no CUDA kernels") {
    CHECK(device_launch_counts().total() == 0);
    DeviceGraph g;
    CHECK_THROWS_WITH_AS(g.begin_capture(0), doctest::Contains("no CUDA support"),
                         std::runtime_error);
    CHECK_FALSE(g.ready());
  }
  if (test::skipped_without_cuda("launch counts")) return;
  DeviceBuffer buf(0, 64 * sizeof(float));
  float* p = static_cast<float*>(buf.get());
  const std::vector<float> host(64, 2.5f);
  const DeviceLaunchCounts c0 = device_launch_counts();
  device_upload(p, host.data(), 64);
  device_fill(p, 32, 1.0f);
  device_add_scalar(p, 1.0f);
  const DeviceLaunchCounts d = device_launch_counts() - c0;
  CHECK(d.copies == 1);
  CHECK(d.kernels == 2);
  CHECK(d.gemms == 0);
  CHECK(d.graphs == 0);
  CHECK(d.total() == 3);
  std::vector<float> back(64);
  device_download(back.data(), p, 64);
  CHECK(back[0] == 2.0f);
  CHECK(back[31] == 1.0f);
  CHECK(back[32] == 2.5f);
}

TEST_CASE("device graph: a captured upload and kernels replay on the current device values") {
  if (test::skipped_without_cuda("graph replay of kernels")) return;
  DeviceBuffer buf(0, 8 * sizeof(float));
  float* p = static_cast<float*>(buf.get());
  std::vector<float> host(8, 3.0f);
  DeviceGraph g;
  g.begin_capture(0);
  CHECK(g.capturing());
  device_upload(p, host.data(), 4);  // recorded with the values 3
  host.assign(8, 100.0f);            // later changes of the source do not reach the graph
  device_add_scalar(p + 1, 2.0f);    // p[1] += 2 on every replay
  g.end_capture();
  REQUIRE(g.ready());
  CHECK(g.size() == 2);
  device_fill(p, 8, 0.0f);  // nothing ran during the capture; now p = 0
  std::vector<float> back(8);
  device_download(back.data(), p, 8);
  CHECK(back[0] == 0.0f);
  const DeviceLaunchCounts c0 = device_launch_counts();
  g.launch();
  const DeviceLaunchCounts d = device_launch_counts() - c0;
  CHECK(d.graphs == 1);
  CHECK(d.total() == 1);
  device_download(back.data(), p, 8);
  CHECK(back[0] == 3.0f);
  CHECK(back[1] == 5.0f);
  CHECK(back[4] == 0.0f);
  g.launch();
  device_download(back.data(), p, 8);
  CHECK(back[1] == 5.0f);  // the upload ran again before the add
  // a moved graph replays too; the moved-from one is empty
  DeviceGraph h = std::move(g);
  CHECK_FALSE(g.ready());
  CHECK_THROWS_AS(g.launch(), std::logic_error);
  h.launch();
}

TEST_CASE("device graph: reading back or synchronising during a capture is refused") {
  if (test::skipped_without_cuda("graph capture errors")) return;
  DeviceBuffer buf(0, 4 * sizeof(float));
  float* p = static_cast<float*>(buf.get());
  DeviceGraph g;
  g.begin_capture(0);
  float h = 0;
  CHECK_THROWS_WITH_AS(device_download(&h, p, 1), doctest::Contains("graph capture"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(device_synchronize(), doctest::Contains("graph capture"),
                       std::runtime_error);
  DeviceGraph other;
  CHECK_THROWS_WITH_AS(other.begin_capture(0), doctest::Contains("already under way"),
                       std::runtime_error);
  g.abort_capture();
  CHECK_FALSE(g.capturing());
  CHECK_FALSE(g.ready());
  // the thread runs its work again
  device_fill(p, 4, 7.0f);
  device_download(&h, p, 1);
  CHECK(h == 7.0f);
  CHECK_THROWS_WITH_AS(g.end_capture(), doctest::Contains("no capture"), std::runtime_error);
}

TEST_CASE(
    "device graph: a captured training forward + loss + backward replays to the uncaptured "
    "step's loss, predictions and gradients") {
  if (test::skipped_without_cuda("graph replay of a training step")) return;
  const data::PreparedSplit ps = synth_split(16);
  const data::Dataset& ds = ps.dataset;
  REQUIRE(ds.batches.size() >= 1);
  const int64_t b = 0;
  const data::BatchTensors bt = ds.materialize(b);
  CostModel<float> m(small_config(), 5);
  parameters_to_device(m.params(), 0);
  Tape<float> ref, cap;
  ref.set_device(Device::CUDA, 0);
  cap.set_device(Device::CUDA, 0);

  zero_device_grads(m.params());
  const StepResult want = read_step(m, ref, record_step(m, ref, ds, b, bt, 11));

  zero_device_grads(m.params());
  DeviceGraph g;
  g.begin_capture(0);
  const StepNodes n = record_step(m, cap, ds, b, bt, 11);
  g.end_capture();
  REQUIRE(g.ready());
  MESSAGE("captured step of " << bt.batch << " datapoints: " << g.size() << " recorded launches");
  CHECK(g.size() > 10);
  zero_device_grads(m.params());
  g.launch();
  expect_equal(read_step(m, cap, n), want);
  // a second replay accumulates into zeroed gradients again: the same step
  zero_device_grads(m.params());
  g.launch();
  expect_equal(read_step(m, cap, n), want);

  // After an AdamW step the replay reads the new parameter values, as a fresh step does.
  AdamOptions ao;
  ao.lr = 1e-2;
  Adam<float> opt(parameter_pointers(m.params()), ao, true);
  opt.step();
  zero_device_grads(m.params());
  const StepResult fresh = read_step(m, ref, record_step(m, ref, ds, b, bt, 11));
  CHECK(fresh.loss != want.loss);
  zero_device_grads(m.params());
  g.launch();
  expect_equal(read_step(m, cap, n), fresh);
}

TEST_CASE("device launch counts per training step of a tests/data batch, uncaptured and captured") {
  if (test::skipped_without_cuda("launches per training step")) return;
  const data::PreparedSplit ps = synth_split(64);
  const data::Dataset& ds = ps.dataset;
  REQUIRE(ds.batches.size() >= 1);
  const int64_t b = 0;
  const data::BatchTensors bt = ds.materialize(b);
  CostModel<float> m(small_config(), 5);
  parameters_to_device(m.params(), 0);
  AdamOptions ao;
  ao.weight_decay = 0.015;
  Adam<float> opt(parameter_pointers(m.params()), ao, true);
  Tape<float> tape;
  tape.set_device(Device::CUDA, 0);
  // a first step: the optimizer's moments and the tape's memory are made there
  record_step(m, tape, ds, b, bt, 2);
  opt.step();
  opt.zero_grad();
  Rng rng(3);
  tape.clear();
  tape.set_training(true);
  tape.set_grad_enabled(true);
  const DeviceLaunchCounts c0 = device_launch_counts();
  const NodeId y = m.forward(tape, ds.trees(b), bt, rng);
  const NodeId loss =
      train::training_loss(tape, config::parse_objective("log_huber+pairwise"), y, bt, 1.0f, 1.0f);
  const DeviceLaunchCounts c1 = device_launch_counts();
  tape.backward(loss);
  const DeviceLaunchCounts c2 = device_launch_counts();
  opt.step();
  opt.zero_grad();
  const DeviceLaunchCounts c3 = device_launch_counts();
  const DeviceLaunchCounts f = c1 - c0, k = c2 - c1, o = c3 - c2;
  MESSAGE("launches per training step ("
          << bt.batch << " datapoints, " << ds.trees(b).size() << " tree(s)): forward+loss "
          << f.total() << " (" << f.kernels << " kernels, " << f.gemms << " GEMMs, " << f.copies
          << " copies), backward " << k.total() << " (" << k.kernels << " kernels, " << k.gemms
          << " GEMMs, " << k.copies << " copies), AdamW + zero_grad " << o.total());
  CHECK(f.kernels > 0);
  CHECK(f.gemms > 0);
  CHECK(k.gemms > 0);
  CHECK(o.total() <= 8);  // multi-tensor: tables + one kernel each for the step and zero_grad
  // Captured: the forward + loss + backward is one graph launch.
  DeviceGraph g;
  g.begin_capture(0);
  record_step(m, tape, ds, b, bt, 3);
  g.end_capture();
  CHECK(g.size() == f.total() + k.total());
  const DeviceLaunchCounts g0 = device_launch_counts();
  g.launch();
  opt.step();
  opt.zero_grad();
  const DeviceLaunchCounts gd = device_launch_counts() - g0;
  MESSAGE("captured: " << gd.total() << " launches per step (1 graph of " << g.size()
                       << " + AdamW + zero_grad " << gd.total() - 1 << ")");
  CHECK(gd.graphs == 1);
  CHECK(gd.total() == 1 + o.total());
}

TEST_CASE(
    "device graph: a captured dropout reads its counter base from the device at each replay, "
    "drawing the masks the uncaptured op draws at that counter") {
  if (test::skipped_without_cuda("graph replay of dropout")) return;
  const int64_t n = 4096;
  std::vector<float> ones(size_t(n), 1.0f);
  DeviceBuffer counter(0, sizeof(uint64_t));
  auto* base = static_cast<uint64_t*>(counter.get());
  Tape<float> ref, cap;
  ref.set_device(Device::CUDA, 0);
  cap.set_device(Device::CUDA, 0);
  // the uncaptured op with the generator at `at` (a draw earlier in the step first: offsets
  // inside the step are kept)
  auto uncaptured = [&](uint64_t at) {
    Rng rng(77);
    rng.set_counter(at);
    ref.clear();
    ref.set_training(true);
    const NodeId x = ref.constant(ones.data(), Shape{n});
    (void)ops::dropout(ref, x, 0.5, rng);
    return to_host(ref.value(ops::dropout(ref, x, 0.5, rng)));
  };
  Rng rng(77);
  rng.set_counter(1000);  // at capture: another counter than the replays'
  rng.set_device_counter(base);
  cap.clear();
  cap.set_training(true);
  const NodeId x = cap.constant(ones.data(), Shape{n});
  DeviceGraph g;
  g.begin_capture(0);
  (void)ops::dropout(cap, x, 0.5, rng);
  const NodeId y = ops::dropout(cap, x, 0.5, rng);
  g.end_capture();
  CHECK(rng.counter() == 1000 + 2 * uint64_t(n));     // the host counter advanced as uncaptured
  const uint64_t at1 = 5, at2 = 5 + 2 * uint64_t(n);  // two consecutive steps
  device_upload_bytes(base, &at1, sizeof at1);
  g.launch();
  const std::vector<float> step1 = to_host(cap.value(y));
  device_upload_bytes(base, &at2, sizeof at2);
  g.launch();
  const std::vector<float> step2 = to_host(cap.value(y));
  CHECK(step1 == uncaptured(at1));
  CHECK(step2 == uncaptured(at2));
  CHECK(step1 != step2);  // fresh masks: a replay does not repeat its capture's mask
  // on a CPU tape a device counter is refused
  Tape<float> cpu;
  cpu.set_training(true);
  const NodeId xc = cpu.constant(ones.data(), Shape{n});
  CHECK_THROWS_AS(ops::dropout(cpu, xc, 0.5, rng), std::logic_error);
}

TEST_CASE(
    "device graph: clipping on the device and AdamW from device scalars, captured once, replay "
    "the uncaptured clip_grad_norm + step under a changing learning rate and beta1") {
  if (test::skipped_without_cuda("graph replay of clipping and AdamW")) return;
  CostModel<float> a(small_config(), 5), b(small_config(), 5);
  parameters_to_device(a.params(), 0);
  parameters_to_device(b.params(), 0);
  const std::vector<Parameter<float>*> pa = parameter_pointers(a.params()),
                                       pb = parameter_pointers(b.params());
  AdamOptions ao;
  ao.weight_decay = 0.015;
  Adam<float> oa(pa, ao, true), ob(pb, ao, true);
  train::StepState state(0, ob);
  DeviceGraph g;
  // gradients of step s: deterministic, large enough that clipping to `max_norm` scales them
  // at steps 0 and 2 and leaves them alone at step 1
  auto set_grads = [](const std::vector<Parameter<float>*>& ps, int s) {
    for (Parameter<float>* p : ps) {
      std::vector<float> h(size_t(p->numel()));
      for (size_t i = 0; i < h.size(); ++i)
        h[i] = (s == 1 ? 1e-4f : 0.5f) * std::sin(float(i) * 0.37f + float(s) + float(p->numel()));
      device_upload(p->device_grad, h.data(), p->numel());
    }
  };
  const double max_norm = 0.5;
  for (int s = 0; s < 3; ++s) {
    const double lr = 1e-3 * (1 + 3 * s), beta1 = 0.95 - 0.03 * s;
    set_grads(pa, s);
    const double norm = clip_grad_norm(pa, max_norm);
    CHECK((norm > max_norm) == (s != 1));
    oa.set_lr(lr);
    oa.set_beta1(beta1);
    oa.step();
    oa.zero_grad();

    set_grads(pb, s);
    ob.set_lr(lr);
    ob.set_beta1(beta1);
    ob.prepare_device_step();
    if (!g.ready()) {
      g.begin_capture(0);
      clip_grad_norm_on_device(pb, max_norm);
      ob.step_from_device(state.scalars());
      ob.zero_grad();
      g.end_capture();
    }
    state.write(0, ob);
    g.launch();
    for (size_t k = 0; k < pa.size(); ++k) {
      CHECK(to_host(Tensor<float>{pa[k]->device_value, pa[k]->shape, Device::CUDA}) ==
            to_host(Tensor<float>{pb[k]->device_value, pb[k]->shape, Device::CUDA}));
      CHECK(oa.step_count(k) == ob.step_count(k));
    }
    CHECK(oa.exp_avg(0) == ob.exp_avg(0));
    CHECK(oa.exp_avg_sq(3) == ob.exp_avg_sq(3));
    CHECK(device_grads(b) == std::vector<float>(device_grads(b).size(), 0.0f));
  }
}

namespace {

// ---- lcm-train with training.cuda_graphs (train/step_graphs.hpp) ----

/// What a run leaves that graphs must not change, and how it ran.
struct GraphRun {
  train::TrainResult result;
  SafeTensorsFile weights, optimizer;  // the `last` checkpoint and optimizer state
  std::vector<int64_t> launches;       // device launches counted after each step
};

/// The tiny run on cuda:0 with dropout, clipping that is active at every step and a per-batch
/// one-cycle schedule, under `tag`, plus `extra` overrides.
GraphRun run(const std::string& tag, const std::vector<std::string>& extra) {
  const std::string dir = test::temp_dir("train_graphs_" + tag);
  static const test::TinySplits splits = test::write_tiny_splits(test::temp_dir("graphs_data"), 7);
  std::vector<std::string> o{"training.device=cuda:0",
                             "training.gpu_memory_budget=64MiB",
                             "model.drops=0.2,0.2",
                             "training.clip_grad_norm=0.01",
                             "training.lr_schedule=one_cycle_per_batch",
                             "training.lr=0.01",
                             "training.calibrate=false"};
  o.insert(o.end(), extra.begin(), extra.end());
  const config::Config c = test::tiny_run_config(splits, dir, o);
  GraphRun r;
  train::TrainOptions opts = test::quiet_training();
  opts.after_step = [&r](int64_t) { r.launches.push_back(device_launch_counts().total()); };
  r.result = train::fit_model(c, opts);
  r.weights = read_safetensors(r.result.paths.last);
  r.optimizer = read_safetensors(r.result.paths.optimizer);
  return r;
}

/// Tensors of `a` and `b` with different bytes (or missing in b).
int differing_tensors(const SafeTensorsFile& a, const SafeTensorsFile& b) {
  int n = 0;
  for (const auto& [name, t] : a.tensors) {
    const SafeTensor* u = b.find(name);
    n += !u || u->bytes != t.bytes;
  }
  return n + int(b.tensors.size() != a.tensors.size());
}

void expect_same_run(const GraphRun& a, const GraphRun& b) {
  REQUIRE(a.result.history.size() == b.result.history.size());
  for (size_t e = 0; e < a.result.history.size(); ++e) {
    CHECK(a.result.history[e].train_loss == b.result.history[e].train_loss);
    CHECK(a.result.history[e].train_mape == b.result.history[e].train_mape);
    CHECK(a.result.history[e].val_mape == b.result.history[e].val_mape);
  }
  CHECK(differing_tensors(a.weights, b.weights) == 0);
  CHECK(differing_tensors(a.optimizer, b.optimizer) == 0);
  CHECK(a.optimizer.metadata.at("lr") == b.optimizer.metadata.at("lr"));
  CHECK(a.optimizer.metadata.at("beta1") == b.optimizer.metadata.at("beta1"));
}

}  // namespace

TEST_CASE(
    "lcm-train with cuda graphs: the same weights, moments and losses as uncaptured steps, "
    "also when the graph limit leaves batches uncaptured") {
  if (test::skipped_without_cuda("lcm-train cuda graphs")) return;
  const GraphRun off = run("off", {"training.cuda_graphs=off"});
  CHECK_FALSE(off.result.cuda_graphs.enabled);
  CHECK(off.result.cuda_graphs.replays == 0);
  const GraphRun on = run("on", {"training.cuda_graphs=on"});
  const train::StepGraphCounts& g = on.result.cuda_graphs;
  REQUIRE(g.enabled);
  const int64_t batches = int64_t(off.launches.size()) / 2;  // 2 epochs
  REQUIRE(batches >= 3);
  CHECK(g.refused == 0);
  CHECK(g.captures == batches);  // one graph per batch, each replayed again in epoch 2
  CHECK(g.replays == 2 * batches);
  CHECK(g.fallbacks == 0);
  CHECK(g.nodes > 50 * g.captures);
  expect_same_run(off, on);
  // the training moved (a replay that did nothing would not match anyway: this guards the setup)
  CHECK(off.result.history[0].train_loss != off.result.history[1].train_loss);

  // Launches of a steady step (epoch 2: every batch's graph exists), counted around the steps.
  auto steady = [&](const GraphRun& r) {
    int64_t most = 0;
    for (size_t k = size_t(batches) + 1; k < r.launches.size(); ++k)
      most = std::max(most, r.launches[k] - r.launches[k - 1]);
    return most;
  };
  MESSAGE("device launches per steady lcm-train step (tiny setup, batches of 32): "
          << steady(off) << " uncaptured, " << steady(on) << " with cuda graphs; "
          << double(g.nodes) / double(g.captures) << " launches recorded per graph");
  CHECK(steady(on) <= 5);  // scalars up, the graph, loss and predictions back
  CHECK(steady(off) > 50);

  // Two graphs for more batches: the others run uncaptured, the result is the same.
  const GraphRun lim = run("limit", {"training.cuda_graphs=on", "training.cuda_graph_limit=2"});
  const train::StepGraphCounts& l = lim.result.cuda_graphs;
  CHECK(l.captures == 2);
  CHECK(l.replays == 4);
  CHECK(l.fallbacks == 2 * (batches - 2));
  expect_same_run(off, lim);
}

TEST_CASE("lcm-train cuda graphs: auto is on for a cuda device, limit 0 captures nothing") {
  if (test::skipped_without_cuda("lcm-train cuda graphs auto")) return;
  const GraphRun a = run("auto", {"training.max_epochs=1"});
  CHECK(a.result.cuda_graphs.enabled);
  CHECK(a.result.cuda_graphs.captures > 0);
  const GraphRun z = run("zero", {"training.max_epochs=1", "training.cuda_graph_limit=0"});
  CHECK_FALSE(z.result.cuda_graphs.enabled);
  CHECK(z.result.cuda_graphs.replays == 0);
  expect_same_run(a, z);
}

TEST_CASE("StepGraphCache: bounded, no eviction, refused keys remembered") {
  train::StepGraphCache c(2);
  CHECK(c.find(7) == nullptr);
  CHECK(c.has_room());
  train::CapturedStep& a = c.add(7, train::CapturedStep{});
  a.draws = 11;
  c.add(3, train::CapturedStep{});
  CHECK_FALSE(c.has_room());
  CHECK(c.size() == 2);
  REQUIRE(c.find(7) != nullptr);
  CHECK(c.find(7)->draws == 11);  // (stable address: the same entry)
  CHECK(c.find(7) == &a);
  CHECK_THROWS_AS(c.add(5, train::CapturedStep{}), std::logic_error);  // full: no eviction
  CHECK(c.find(3) != nullptr);
  CHECK_FALSE(c.refused(5));
  c.refuse(5);
  CHECK(c.refused(5));
  CHECK(c.nodes() == 0);  // nothing captured in these entries
  train::StepGraphCache none(0);
  CHECK_FALSE(none.has_room());
  CHECK_THROWS_AS(none.add(1, train::CapturedStep{}), std::logic_error);
  train::StepGraphCache dup(3);
  dup.add(1, train::CapturedStep{});
  CHECK_THROWS_AS(dup.add(1, train::CapturedStep{}), std::logic_error);
  train::StepGraphCounts n;
  n.captures = 2;
  n.nodes = 900;
  n.replays = 10;
  n.fallbacks = 4;
  CHECK(train::step_graph_summary(n) ==
        "cuda graphs: 2 training steps captured (450 launches each on average), 10 steps replayed "
        "as one graph launch, 4 run uncaptured (0 refused captures)");
}
