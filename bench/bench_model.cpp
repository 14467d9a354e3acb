// Speed of the cost model (float32, CPU): training throughput (datapoints/s of forward + backward +
// AdamW step over the batches of a prepared split) and inference latency for one program's ~100
// schedules (features excluded). Usage: bench_model --threads 2 [--data train.jsonl.gz] [--batches N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "data/prepare.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/threads.hpp"
#include "model/cost_model.hpp"

#include "bench/bench_timing.hpp"

using namespace lcm;
using lcm::bench::cpu_ms;
using lcm::bench::now_ms;

namespace {

/// BatchTensors of the first `n` kept schedules of one program (what lcm-predict would build).
data::BatchTensors program_batch(const data::ProgramFeatures& p, int32_t index, int64_t n) {
  data::BatchTensors t;
  t.batch = std::min<int64_t>(n, p.n_schedules());
  t.n_comps = p.n_comps;
  t.n_loops = p.n_loops;
  const int64_t C = p.n_comps, L = p.n_loops;
  t.comp.resize(size_t(t.batch * C * data::kCompVectorWidth));
  t.loops.assign(p.loops.begin(), p.loops.begin() + t.batch * L * data::kLoopVectorWidth);
  for (int64_t s = 0; s < t.batch; ++s) p.comp_vectors(s, t.comp.data() + s * C * data::kCompVectorWidth);
  t.speedup.assign(p.speedup.begin(), p.speedup.begin() + t.batch);
  t.programs = {index};
  t.program_of.assign(size_t(t.batch), 0);
  t.expr = p.expr;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_model: cost-model training throughput and inference latency"};
  int threads = 2, batch_size = 512, max_batches = 0, epochs = 1;
  std::string data_path = "/work/shared/data/looperset-sample/train.jsonl.gz";
  std::string cache_dir = "/tmp/lcm_bench_model";
  app.add_option("--threads", threads, "CPU threads for Eigen/OpenMP (<= 0: all)");
  app.add_option("--data", data_path, "LOOPerSet file to prepare");
  app.add_option("--cache-dir", cache_dir, "prepared-split cache folder");
  app.add_option("--batch-size", batch_size, "datapoints per batch");
  app.add_option("--batches", max_batches, "train on at most N batches per epoch (0 = all)");
  app.add_option("--epochs", epochs, "passes over the batches (0: inference only)");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);

  data::PrepareOptions opt;
  opt.split = "bench_train";
  opt.source = data_path;
  opt.cache_dir = cache_dir;
  opt.batching.batch_size = batch_size;
  opt.print_skips = 0;
  const data::PreparedSplit ps = data::prepare_split(opt);
  const data::Dataset& ds = ps.dataset;
  std::printf("data: %s, %zu programs, %lld datapoints, %zu batches of <= %d (prepared in %.1f s%s)\n",
              data_path.c_str(), ds.programs.size(), (long long)ds.n_datapoints(), ds.batches.size(), batch_size,
              ps.seconds, ps.from_cache ? ", from cache" : "");

  model::CostModel<float> m(model::ModelConfig{}, 1);
  AdamOptions ao;
  ao.weight_decay = 0.015;
  Adam<float> adam(parameter_pointers(m.params()), ao, true);
  Tape<float> tape;
  Rng rng(7);
  const size_t nb = max_batches > 0 ? std::min<size_t>(size_t(max_batches), ds.batches.size()) : ds.batches.size();
  std::vector<data::BatchTensors> bts;
  std::vector<const data::ProgramTree*> trees;
  const double m0 = now_ms();
  for (size_t b = 0; b < nb; ++b) {
    bts.push_back(ds.materialize(int64_t(b)));
    trees.push_back(&ds.tree(int64_t(b)));
  }
  const double materialize_ms = now_ms() - m0;
  // training: forward + MAPE (batch weight) + backward + AdamW step
  int64_t points = 0;
  double loss_sum = 0, fwd_ms = 0, bwd_ms = 0, step_ms = 0;
  size_t peak = 0;
  const double t0 = now_ms(), c0 = cpu_ms();
  for (int e = 0; e < epochs; ++e)
    for (size_t b = 0; b < nb; ++b) {
      const data::BatchTensors& bt = bts[b];
      const double a = now_ms();
      tape.clear();
      tape.set_training(true);
      adam.zero_grad();
      const NodeId y = m.forward(tape, *trees[b], bt, rng);
      const NodeId target = tape.constant(bt.speedup.data(), Shape{bt.batch});
      const NodeId loss = ops::mape(tape, y, target, float(bt.batch) / float(batch_size));
      const double f = now_ms();
      tape.backward(loss);
      const double g = now_ms();
      adam.step();
      const double h = now_ms();
      fwd_ms += f - a;
      bwd_ms += g - f;
      step_ms += h - g;
      loss_sum += double(tape.value(loss)[0]) * batch_size;
      points += bt.batch;
      peak = std::max(peak, tape.peak_bytes());
    }
  const double train_ms = now_ms() - t0, train_cpu_ms = cpu_ms() - c0;
  if (points > 0)
    std::printf("training (%d threads): %lld datapoints in %.1f s = %.0f datapoints/s, %.0f per CPU-second "
              "(forward %.0f%%, backward %.0f%%, AdamW %.0f%%; materialize excluded: %.2f s for %zu batches); "
              "epoch MAPE %.2f; peak arena %.1f MiB\n",
              threads, (long long)points, train_ms / 1e3, points / (train_ms / 1e3), points / (train_cpu_ms / 1e3),
              100 * fwd_ms / train_ms,
              100 * bwd_ms / train_ms, 100 * step_ms / train_ms, materialize_ms / 1e3, nb, loss_sum / double(points),
              double(peak) / (1 << 20));

  // inference: one program's first ~100 schedules, eval mode, no gradient recording
  size_t pick = 0;
  for (size_t p = 0; p < ds.programs.size(); ++p)
    if (std::abs(ds.programs[p].n_schedules() - 100) < std::abs(ds.programs[pick].n_schedules() - 100)) pick = p;
  const data::ProgramFeatures& pf = ds.programs[pick];
  const data::BatchTensors bt = program_batch(pf, int32_t(pick), 100);
  Tape<float> it;
  it.set_training(false);
  it.set_grad_enabled(false);
  std::vector<double> lat, cpu;
  for (int r = 0; r < 30; ++r) {
    const double a = now_ms(), c = cpu_ms();
    it.clear();
    m.forward(it, pf.tree, bt, rng);
    lat.push_back(now_ms() - a);
    cpu.push_back(cpu_ms() - c);
  }
  std::sort(lat.begin(), lat.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("inference (%d threads): program %s, %lld schedules, C=%lld, %zu loop nodes: wall min %.2f ms, median %.2f ms; CPU median %.2f ms\n",
              threads, pf.name.c_str(), (long long)bt.batch, (long long)bt.n_comps, pf.tree.nodes.size(), lat.front(),
              lat[lat.size() / 2], cpu[cpu.size() / 2]);
  return 0;
}
