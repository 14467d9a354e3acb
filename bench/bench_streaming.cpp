// Speed of the CUDA data placement on the real sample: training steps of the release-size
// cost model with every batch resident, every batch streamed (pinned staging, copy stream) and the
// per-step host upload; and whether the streaming copy really overlaps compute: a step alone, the
// copies alone, both together (overlap 1 = fully hidden, 0 = serialised). Without a CUDA device (or
// in the emulated build) it prints "skipped: <reason>" and exits 0 (1 with --require-device).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "bench/cuda_skip.hpp"
#include "data/prepare.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/device_stream.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "model/cost_model.hpp"
#include "train/device_batch_store.hpp"

using namespace lcm;
using lcm::bench::now_ms;

#ifdef LCM_WITH_CUDA
namespace {

/// Milliseconds per training step (forward, MAPE, backward, AdamW; synchronised at the end) over
/// `steps` steps cycling through the batches, after one warm-up pass; `store` null: per-step
/// upload.
double ms_per_step(model::CostModel<float>& m, Adam<float>& opt, const data::Dataset& ds,
                   train::DeviceBatchStore* store, int steps) {
  Tape<float> tape;
  tape.set_device(Device::CUDA, 0);
  Rng rng(7);
  const int64_t nb = int64_t(ds.batches.size());
  auto step = [&](int64_t b) {
    tape.clear();
    const train::BatchInput in = train::batch_input(ds, b, store, nullptr);
    const NodeId y = in.forward(m, tape, ds, b, rng);
    const NodeId target = tape.constant(in.labels().speedup.data(), Shape{in.labels().batch});
    const NodeId loss = ops::mape(tape, y, target, 1.0f);
    (void)to_host(tape.value(loss));  // as lcm-train: the loss is read every step
    tape.backward(loss);
    opt.step();
    opt.zero_grad();
    if (store) store->prefetch((b + 1) % nb);
  };
  for (int64_t b = 0; b < std::min<int64_t>(nb, 8); ++b) step(b);
  device_synchronize();
  const double t0 = now_ms();
  for (int s = 0; s < steps; ++s) step(s % nb);
  device_synchronize();
  return (now_ms() - t0) / steps;
}

}  // namespace
#endif

int main(int argc, char** argv) {
  CLI::App app{
      "lcm data placement benchmark on cuda:0: resident vs streamed vs per-step upload, copy "
      "overlap"};
  std::string data_path = "../shared/data/looperset-sample/mini.jsonl.gz";
  int steps = 200, batch_size = 32;
  app.add_option("--data", data_path, "LOOPerSet file (gzip JSONL)");
  app.add_option("--steps", steps, "timed training steps per mode");
  app.add_option("--batch-size", batch_size, "data.batch_size");
  if (const int rc = lcm::bench::parse_or_skip_without_cuda(app, argc, argv); rc >= 0) return rc;
#ifdef LCM_WITH_CUDA
  try {
    std::printf("device: %s\n", require_device(parse_device("cuda:0")).c_str());
    data::PrepareOptions po;
    po.split = "bench";
    po.source = data_path;
    po.cache_dir = "";
    po.print_skips = 0;
    po.batching.batch_size = batch_size;
    po.batching.min_functions_per_footprint = 0;
    const data::PreparedSplit ps = data::prepare_split(po);
    const data::Dataset& ds = ps.dataset;
    model::CostModel<float> m(model::ModelConfig{}, 1);  // release sizes
    parameters_to_device(m.params(), 0);
    Adam<float> opt(parameter_pointers(m.params()), AdamOptions{}, true);
    const double points_per_step = double(ds.n_datapoints()) / double(ds.batches.size());

    train::DeviceBatchStore resident(m, ds, nullptr, 0, size_t(1) << 40);
    train::DeviceBatchStore streamed(m, ds, nullptr, 0, 0);
    std::printf("%s\n%s\n", resident.summary("bench").c_str(), streamed.summary("bench").c_str());
    const double t_up = ms_per_step(m, opt, ds, nullptr, steps);
    const double t_res = ms_per_step(m, opt, ds, &resident, steps);
    const double t_str = ms_per_step(m, opt, ds, &streamed, steps);
    const char* names[3] = {"per-step host upload", "all resident", "all streamed"};
    const double times[3] = {t_up, t_res, t_str};
    for (int i = 0; i < 3; ++i)
      std::printf("training step, %-22s %8.3f ms  %10.0f datapoints/s\n", names[i], times[i],
                  points_per_step / times[i] * 1e3);
    std::printf("streamed / resident step time: %.3f (1 = streaming fully hidden)\n",
                t_str / t_res);

    // Overlap of the copy stream with compute: one step on a resident batch, 16 pinned copies of
    // the largest batch on the copy stream, and both queued together.
    const size_t bytes = std::max<size_t>(streamed.staging_bytes() / 2, size_t(1) << 20);
    PinnedBuffer src(bytes);
    DeviceBuffer dst(0, bytes);
    DeviceStream copy_stream(0);
    auto copies = [&] {
      for (int i = 0; i < 16; ++i) copy_stream.copy_to_device_async(dst.get(), src.get(), bytes);
    };
    Tape<float> tape;
    tape.set_device(Device::CUDA, 0);
    Rng rng(3);
    auto compute = [&] {
      tape.clear();
      const train::StagedBatch& sb = resident.acquire(0);
      const NodeId y = m.forward(tape, ds.trees(0), sb.inputs, rng);
      const NodeId loss =
          ops::mape(tape, y, tape.constant(sb.labels.speedup.data(), Shape{sb.labels.batch}), 1.0f);
      tape.backward(loss);
      opt.step();
    };
    auto best_of = [&](auto&& fn) {
      double best = 1e30;
      for (int r = 0; r < 20; ++r) {
        device_synchronize();
        const double t0 = now_ms();
        fn();
        copy_stream.synchronize();
        device_synchronize();
        best = std::min(best, now_ms() - t0);
      }
      return best;
    };
    const double t_copy = best_of(copies), t_comp = best_of(compute);
    const double t_both = best_of([&] {
      copies();
      compute();
    });
    const double overlap = (t_copy + t_comp - t_both) / std::max(1e-9, std::min(t_copy, t_comp));
    std::printf(
        "copy 16 x %.2f MiB pinned->device %.3f ms (%.1f GB/s); step %.3f ms; both %.3f ms; "
        "overlap %.2f\n",
        double(bytes) / double(1 << 20), t_copy, 16.0 * double(bytes) / (t_copy * 1e6), t_comp,
        t_both, overlap);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_streaming: %s\n", e.what());
    return 1;
  }
  return 0;
#endif
}
