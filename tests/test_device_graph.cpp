// Launch counts and CUDA graphs (engine/device_graph.hpp): the counts of a few calls, a captured
// training forward + loss + backward of the cost model replayed to the same loss, predictions and
// gradients as the uncaptured step (also after the parameters changed: a replay reads the current
// values), what a capture refuses, and the launches per training step of a tests/data batch,
// uncaptured and captured (printed: the proxy of the GPU's launch bound). Runs on a real GPU and
// on the emulated device (-DLCM_CUDA_EMULATE=ON); skipped in a build without CUDA, after checking
// that the counts stay zero and a capture is refused there.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/loss_terms.hpp"
#include "data/prepare.hpp"
#include "engine/device_graph.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "model/cost_model.hpp"
#include "support/cuda_support.hpp"
#include "support/model_support.hpp"
#include "support/test_support.hpp"
#include "train/losses.hpp"

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
