// End to end on a GPU (issue 5): a few AdamW training steps of the cost model on real batches of
// mini.jsonl.gz give the same losses on the CPU and on cuda:0, and weights trained on the GPU load
// on the CPU and predict the same. Without a CUDA device (or the shared sample) it reports skipped.
#include <doctest/doctest.h>

#include "support/test_support.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "data/prepare.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "model/cost_model.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

using namespace lcm;
using lcm::model::CostModel;
using lcm::model::ModelConfig;

namespace {

/// "" when a CUDA device is usable, else the reason.
std::string no_cuda_reason() {
#ifdef LCM_WITH_CUDA
  std::string why;
  return cuda::device_count(&why) > 0 ? std::string() : "no CUDA device (" + why + ")";
#else
  return "this build has no CUDA kernels";
#endif
}

data::PreparedSplit prepare_mini(const std::string& path, int batch_size) {
  data::PrepareOptions opt;
  opt.split = "mini";
  opt.source = path;
  opt.cache_dir = "";
  opt.nb_workers = 2;
  opt.print_skips = 0;
  opt.batching.batch_size = batch_size;
  opt.batching.min_functions_per_footprint = 0;
  return data::prepare_split(opt);
}

/// MAPE losses of `steps` AdamW steps (training mode, dropout from Rng(7)) over the given batches,
/// on the CPU or cuda:0, then the eval-mode predictions of the first batch.
struct TrainRun {
  std::vector<float> losses;
  std::vector<float> predictions;
};

TrainRun train_steps(CostModel<float>& m, const data::Dataset& ds, const std::vector<int64_t>& batches, int steps,
                     bool cuda) {
  if (cuda) parameters_to_device(m.params(), 0);
  AdamOptions ao;
  ao.lr = 1e-3;
  ao.weight_decay = 0.015;
  Adam<float> opt(parameter_pointers(m.params()), ao, true);
  Tape<float> tape;
  if (cuda) tape.set_device(Device::CUDA, 0);
  Rng rng(7);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    const int64_t b = batches[size_t(s) % batches.size()];
    const data::BatchTensors bt = ds.materialize(b);
    tape.clear();
    tape.set_training(true);
    tape.set_grad_enabled(true);
    const NodeId y = m.forward(tape, ds.tree(b), bt, rng);
    const NodeId loss = ops::mape(tape, y, tape.constant(bt.speedup.data(), Shape{bt.batch}), 1.0f);
    r.losses.push_back(to_host(tape.value(loss))[0]);
    tape.backward(loss);
    opt.step();
    opt.zero_grad();
  }
  const data::BatchTensors bt = ds.materialize(batches[0]);
  tape.clear();
  tape.set_training(false);
  tape.set_grad_enabled(false);
  r.predictions = to_host(tape.value(m.forward(tape, ds.tree(batches[0]), bt, rng)));
  if (cuda) parameters_to_host(m.params());
  return r;
}

}  // namespace

TEST_CASE("cuda end to end: training losses equal the CPU's; GPU-trained weights predict the same on the CPU") {
  const std::string why = no_cuda_reason();
  if (!why.empty()) {
    MESSAGE("skipped: cost-model training on CUDA: " << why);
    return;
  }
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 32);
  const data::Dataset& ds = ps.dataset;
  REQUIRE(ds.batches.size() >= 2);
  const std::vector<int64_t> batches{0, int64_t(ds.batches.size() / 2)};
  CostModel<float> cpu(ModelConfig{}, 3), gpu(ModelConfig{}, 3);
  const TrainRun a = train_steps(cpu, ds, batches, 4, false);
  const TrainRun b = train_steps(gpu, ds, batches, 4, true);
  for (size_t s = 0; s < a.losses.size(); ++s) {
    INFO("step " << s << ": cpu " << a.losses[s] << " cuda " << b.losses[s]);
    REQUIRE(std::isfinite(b.losses[s]));
    CHECK(std::abs(a.losses[s] - b.losses[s]) <= 1e-3f * std::abs(a.losses[s]));
  }
  // The GPU-trained weights, saved and loaded on the CPU, predict what the GPU predicted.
  const std::string file = test::temp_dir("cuda_model") + "/gpu.safetensors";
  save_parameters(file, gpu.params());
  CostModel<float> loaded(ModelConfig{}, 99);
  load_parameters(file, loaded.params(), true);
  Tape<float> tape;
  tape.set_training(false);
  tape.set_grad_enabled(false);
  Rng rng(0);
  const data::BatchTensors bt = ds.materialize(batches[0]);
  const std::vector<float> p = to_host(tape.value(loaded.forward(tape, ds.tree(batches[0]), bt, rng)));
  REQUIRE(p.size() == b.predictions.size());
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(std::abs(p[i] - b.predictions[i]) <= 1e-4f * std::max(1.0f, std::abs(p[i])));
}
