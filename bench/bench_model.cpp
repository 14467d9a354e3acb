// Speed of the cost model (float32, CPU or --device cuda:N): training throughput (datapoints/s of
// forward + backward + AdamW step) and inference latency for one program's ~100 schedules, features
// excluded and included. With --batch-dir / --infer-dir it runs the exact inputs the PyTorch
// reference runs (bench_export_batch files; bench/run_side_by_side.sh, scripts/gpu_check.sh).
// On CUDA it also prints the device launches per training step (engine/device_graph.hpp), and
// --cuda-graphs replays each batch's captured forward + loss + backward.
// Usage: bench_model --threads 2 [--device cuda:0 [--cuda-graphs]] [--help]
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "data/batch_io.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/device.hpp"
#include "engine/device_graph.hpp"
#include "engine/device_memory.hpp"
#include "engine/eigen.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/threads.hpp"
#include "model/cost_model.hpp"
#include "train/sub_batches.hpp"

using namespace lcm;
using lcm::bench::cpu_ms;
using lcm::bench::now_ms;
using lcm::bench::thread_cpu_ms;

namespace {

/// batch_<i>.safetensors / program_*.safetensors files of `dir` (index order / name order).
std::vector<std::string> batch_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || e.path().extension() != ".safetensors") continue;
    const std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - 12);
    int64_t key = 0;
    try {
      key = prefix == "batch_" ? std::stoll(mid) : int64_t(found.size());
    } catch (const std::exception&) {
      continue;
    }
    found.emplace_back(key, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

/// The record of program `name` in `path`, cut to its first `n_schedules` schedules_list entries
/// (the request an autoscheduler would send). Throws std::runtime_error when it is not found.
data::RawRecord program_record(const std::string& path, const std::string& name,
                               int64_t n_schedules) {
  data::SkipLog log(false, 0);
  data::RecordSource src(path, log);
  data::RawRecord rec;
  while (src.next(rec)) {
    if (rec.json.find("\"" + name + "\"") == std::string::npos) continue;
    rapidjson::Document d;
    d.Parse(rec.json.c_str(), rec.json.size());
    if (d.HasParseError() || !d.IsObject()) continue;
    const bool named = (d.HasMember("program_name") && d["program_name"].IsString() &&
                        name == d["program_name"].GetString()) ||
                       rec.name_hint == name;
    if (!named) continue;
    auto& list = d["schedules_list"];
    while (int64_t(list.Size()) > n_schedules) list.PopBack();
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    d.Accept(w);
    rec.json = buf.GetString();
    return rec;
  }
  throw std::runtime_error("program " + name + " not found in " + path);
}

/// Prepares batch `bt`'s forward inputs for a model on cuda:`device`, copied into `buf` (grown
/// when too small; the caller keeps it alive and unchanged while the inputs are used), as
/// lcm-train's resident batches (tools/common/device_batch_store.hpp).
model::ForwardInputs<float> inputs_on_device(const model::CostModel<float>& m,
                                             const data::BatchTrees& trees,
                                             const data::BatchTensors& bt, int device,
                                             DeviceBuffer& buf) {
  model::ForwardInputs<float> in = m.prepare_inputs(trees, bt);
  if (buf.bytes() < in.bytes()) buf = DeviceBuffer(device, in.bytes());
  device_upload(static_cast<float*>(buf.get()), in.host.data(), in.total);
  in.device = static_cast<const float*>(buf.get());
  return in;
}

/// Median of v (sorted in place).
double median(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_model: cost-model training throughput and inference latency"};
  int threads = 2, batch_size = 512, max_batches = 0, epochs = 1;
  std::string data_path = "/work/shared/data/looperset-sample/train.jsonl.gz";
  std::string cache_dir = "/tmp/lcm_bench_model";
  std::string batching = "per_footprint";
  app.add_option("--threads", threads, "CPU threads for Eigen/OpenMP (<= 0: all)")
      ->check(CLI::Range(std::numeric_limits<int>::min(), kMaxThreads));
  app.add_option("--data", data_path, "LOOPerSet file to prepare");
  app.add_option("--cache-dir", cache_dir, "prepared-split cache folder");
  app.add_option("--batch-size", batch_size, "datapoints per batch")->check(CLI::PositiveNumber);
  app.add_option("--batching", batching,
                 "batches of --data: per_footprint (one footprint each, the default of "
                 "data.batching) or mixed (any footprints)")
      ->check(CLI::IsMember({"mixed", "per_footprint"}));
  app.add_option("--batches", max_batches, "train on at most N batches per epoch (0 = all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option(
         "--epochs", epochs,
         "passes over the batches (0: inference only, on --infer-dir or a program of --data)")
      ->check(CLI::NonNegativeNumber);
  std::string batch_dir, infer_dir;
  int infer_reps = 30;
  app.add_option("--batch-dir", batch_dir,
                 "train on the batch_<i>.safetensors of this folder (bench_export_batch --dump) "
                 "instead of preparing --data: the inputs bench_reference.py runs");
  app.add_option("--infer-dir", infer_dir,
                 "time inference on the program_*.safetensors of this folder "
                 "(bench_export_batch --programs-dir), features excluded and included");
  app.add_option("--infer-reps", infer_reps, "timed repetitions per inference measurement")
      ->check(CLI::PositiveNumber);
  std::string device_text = "cpu";
  bool tf32 = false;
  app.add_option(
      "--device", device_text,
      "cpu or cuda:N: on CUDA the batches' inputs are prepared and copied to the device once "
      "(resident, as lcm-train's), each step reads its loss back, each inference copies its "
      "inputs in and its speedups out");
  app.add_flag("--tf32", tf32, "CUDA: TF32 tensor cores in float GEMMs (training.tf32)");
  std::string shapes_path;
  app.add_option("--gemm-shapes", shapes_path,
                 "CPU: write the training products' shapes (m n k trans_a trans_b calls flops, "
                 "most FLOPs first) to this file, for bench_peak --shapes");
  int sub_batches = 1;
  app.add_option("--sub-batches", sub_batches,
                 "CPU: each batch's forward and backward in this many sub-batches at once on the "
                 "threads, as lcm-train's training.cpu_sub_batches (default 1, its default: the "
                 "whole batch, its products split across the threads)")
      ->check(CLI::Range(1, 64));
  bool cuda_graphs = false;
  app.add_flag("--cuda-graphs", cuda_graphs,
               "CUDA: capture each batch's forward + loss + backward once (a CUDA graph, before "
               "the clock starts) and replay it every step, AdamW outside the graph (the dropout "
               "masks of the capture are replayed: a throughput bound of the launch-free step, "
               "not a training mode)");
  // Bad usage (a value out of range, an unknown option, a bad --device) exits 2 with one line,
  // as the lcm-* tools' config errors; --help exits 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  DeviceSpec dev;
  try {
    dev = parse_device(device_text);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench_model: --device: %s\n", e.what());
    return 2;
  }
  if (epochs == 0 && !batch_dir.empty() && infer_dir.empty()) {
    std::fprintf(stderr,
                 "bench_model: nothing to run: --epochs 0 with --batch-dir trains nothing, and "
                 "inference needs --infer-dir (or no --batch-dir: a program of --data)\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each result line as it is measured (logs, timeouts)
  set_num_threads(threads);
  try {
    const bool on_cuda = dev.kind == Device::CUDA;
    if (on_cuda) {
      std::printf("lcm engine: %s, CUDA kernels + cuBLAS (%s), float32\n",
                  require_device(dev).c_str(), tf32 ? "TF32 allowed" : "full FP32");
      set_cuda_tf32(tf32);
    } else {
      std::printf(
          "lcm engine: %s GEMM kernels (Eigen SIMD: %s), OpenMP, %d threads, float32, training "
          "in %d sub-batches\n",
          cpu_gemm_library().c_str(), Eigen::SimdInstructionSetsInUse(), threads, sub_batches);
    }

    std::vector<data::BatchTensors> bts;
    std::vector<data::BatchTrees> trees;         // per batch: its segments' trees
    std::deque<data::ProgramTree> tree_storage;  // the exported batches' trees
    data::Dataset ds_storage;
    double materialize_ms = 0;
    if (!batch_dir.empty()) {
      // the exported batches, in file order every epoch (as bench_reference.py /
      // train_reference.py)
      for (const std::string& f : batch_files(batch_dir, "batch_")) {
        data::BatchFile bf = data::read_batch_file(f);
        bts.push_back(std::move(bf.bt));
        tree_storage.push_back(std::move(bf.tree));
        trees.push_back({&tree_storage.back()});
        if (max_batches > 0 && int(bts.size()) >= max_batches) break;
      }
      if (bts.empty()) throw std::runtime_error("no batch_<i>.safetensors in " + batch_dir);
      int64_t n = 0;
      for (const auto& b : bts) n += b.batch;
      std::printf("data: %zu exported batches from %s, %lld datapoints\n", bts.size(),
                  batch_dir.c_str(), (long long)n);
    } else if (epochs > 0 || infer_dir.empty()) {
      // --data: the training batches (epochs > 0) and/or the program of the default inference
      // measurement (no --infer-dir; --epochs 0 = that measurement only)
      data::PrepareOptions opt;
      opt.split = "bench_train";
      opt.source = data_path;
      opt.cache_dir = cache_dir;
      opt.batching.batch_size = batch_size;
      opt.batching.mode = batching == "per_footprint" ? data::BatchingMode::PerFootprint
                                                      : data::BatchingMode::Mixed;
      opt.print_skips = 0;
      const data::PreparedSplit ps = data::prepare_split(opt);
      ds_storage = ps.dataset;
      const data::Dataset& ds = ds_storage;
      std::printf(
          "data: %s, %zu programs, %lld datapoints, %zu %s batches of <= %d (prepared in %.1f "
          "s%s)\n",
          data_path.c_str(), ds.programs.size(), (long long)ds.n_datapoints(), ds.batches.size(),
          batching.c_str(), batch_size, ps.seconds, ps.from_cache ? ", from cache" : "");

      const size_t nb = epochs == 0       ? 0
                        : max_batches > 0 ? std::min<size_t>(size_t(max_batches), ds.batches.size())
                                          : ds.batches.size();
      const double m0 = now_ms();
      for (size_t b = 0; b < nb; ++b) {
        bts.push_back(ds.materialize(int64_t(b)));
        trees.push_back(ds.trees(int64_t(b)));
      }
      materialize_ms = now_ms() - m0;
    }
    const size_t nb = bts.size();

    model::CostModel<float> m(model::ModelConfig{}, 1);
    if (on_cuda) parameters_to_device(m.params(), dev.index);
    AdamOptions ao;
    ao.weight_decay = 0.015;
    Adam<float> adam(parameter_pointers(m.params()), ao, true);
    Tape<float> tape;
    if (on_cuda) tape.set_device(Device::CUDA, dev.index);
    // CPU: lcm-train's step in sub-batches (train/sub_batches.hpp; MAPE has no ranking term, so
    // the parts are even runs of the datapoints ordered by program)
    std::unique_ptr<train::SubBatchStep> sub_step;
    if (!on_cuda && sub_batches > 1)
      sub_step = std::make_unique<train::SubBatchStep>(parameter_pointers(m.params()), sub_batches);
    Rng rng(7);
    // CUDA: every batch's inputs prepared and on the device before the clock starts (resident)
    std::vector<DeviceBuffer> resident;
    std::vector<model::ForwardInputs<float>> staged;
    if (on_cuda)
      for (size_t b = 0; b < nb; ++b) {
        resident.emplace_back();
        staged.push_back(inputs_on_device(m, trees[b], bts[b], dev.index, resident.back()));
      }
    // training: forward + MAPE (batch weight) + backward + AdamW step
    DeviceLaunchCounts launches_fwd, launches_bwd, launches_opt;
    int64_t steps = 0;
    int64_t points = 0;
    double loss_sum = 0, fwd_ms = 0, bwd_ms = 0, step_ms = 0;
    double main_excess_ms = 0;  // sub-batches: the busiest thread's parts beyond the main's
    double fwd_flops = 0, bwd_flops = 0;  // CPU: the matrix products' FLOPs (engine/cpu_gemm.hpp)
    size_t peak = 0;
    const std::string where = on_cuda ? dev.str() : std::to_string(threads) + " threads";
    if (on_cuda && nb > 0) {  // warm-up step (cuBLAS handles, module load, arena growth, AdamW
                              // moments), not timed
      tape.clear();
      tape.set_training(true);
      const NodeId y = m.forward(tape, trees[0], staged[0], rng);
      tape.backward(ops::sum(tape, y));
      adam.step();
      adam.zero_grad();
      device_synchronize();
    }
    // --cuda-graphs: each batch's forward + loss + backward captured once (one arena: the graphs
    // run one at a time, each writes what it reads of the arena), its loss read after a replay
    std::vector<DeviceGraph> graphs;
    std::vector<Tensor<float>> graph_loss;
    if (cuda_graphs && !on_cuda) throw std::runtime_error("--cuda-graphs needs --device cuda:N");
    if (cuda_graphs) {
      const double a = now_ms();
      for (size_t b = 0; b < nb; ++b) {
        const data::BatchTensors& bt = bts[b];
        tape.clear();
        tape.set_training(true);
        graphs.emplace_back();
        graphs.back().begin_capture(dev.index);
        const NodeId y = m.forward(tape, trees[b], staged[b], rng);
        const NodeId target = tape.constant(bt.speedup.data(), Shape{bt.batch});
        const NodeId loss = ops::mape(tape, y, target, float(bt.batch) / float(batch_size));
        tape.backward(loss);
        graphs.back().end_capture();
        graph_loss.push_back(tape.value(loss));
      }
      int64_t nodes = 0;
      for (const DeviceGraph& g : graphs) nodes += g.size();
      std::printf("cuda graphs: %zu batches captured in %.1f s, %.0f recorded launches per batch\n",
                  nb, (now_ms() - a) / 1e3, nb ? double(nodes) / double(nb) : 0.0);
    }
    if (!on_cuda) set_flop_counting(true, !shapes_path.empty());
    reset_flop_count();
    const double t0 = now_ms(), c0 = cpu_ms(), m0 = thread_cpu_ms();
    for (int e = 0; e < epochs; ++e)
      for (size_t b = 0; b < nb; ++b) {
        const data::BatchTensors& bt = bts[b];
        const double a = now_ms(), fl0 = flop_count();
        const DeviceLaunchCounts l0 = device_launch_counts();
        float loss_value = 0;
        double f = 0, g = 0;
        DeviceLaunchCounts l1, l2;
        if (cuda_graphs) {  // the captured forward + loss + backward, one launch
          adam.zero_grad();
          graphs[b].launch();
          f = g = now_ms();
          l1 = l2 = device_launch_counts();
          adam.step();
          std::vector<float> lv(1);
          device_download(lv.data(), graph_loss[b].data, 1);  // syncs
          loss_value = lv[0];
        } else if (sub_step) {  // forward + loss + backward of the parts at once
          adam.zero_grad();
          std::vector<float> pred;
          const double lv = sub_step->run(
              bt, trees[b], false, rng,
              [&](Tape<float>& t, const train::SubBatch& sub, Rng& r) {
                return m.forward(t, sub.trees, sub.bt, r);
              },
              [&](Tape<float>& t, NodeId y, const train::SubBatch& sub) {
                const NodeId target = t.constant(sub.bt.speedup.data(), Shape{sub.bt.batch});
                return ops::mape(t, y, target, float(sub.bt.batch) / float(batch_size));
              },
              &pred);
          f = g = now_ms();
          l1 = l2 = device_launch_counts();
          fwd_flops += flop_count() - fl0;  // forward and backward together
          main_excess_ms += sub_step->critical_path_excess_ms();
          adam.step();
          loss_value = float(lv);
        } else {
          tape.clear();
          tape.set_training(true);
          adam.zero_grad();
          const NodeId y = on_cuda ? m.forward(tape, trees[b], staged[b], rng)
                                   : m.forward(tape, trees[b], bt, rng);
          const NodeId target = tape.constant(bt.speedup.data(), Shape{bt.batch});
          const NodeId loss = ops::mape(tape, y, target, float(bt.batch) / float(batch_size));
          f = now_ms();  // (CUDA: kernels queued, not finished: the split is of host time)
          l1 = device_launch_counts();
          const double fl1 = flop_count();
          tape.backward(loss);
          g = now_ms();
          l2 = device_launch_counts();
          fwd_flops += fl1 - fl0;
          bwd_flops += flop_count() - fl1;
          adam.step();
          loss_value = to_host(tape.value(loss))[0];  // as lcm-train / loss.item(): syncs
        }
        const double h = now_ms();
        const DeviceLaunchCounts l3 = device_launch_counts();
        launches_fwd = launches_fwd + (l1 - l0);
        launches_bwd = launches_bwd + (l2 - l1);
        launches_opt = launches_opt + (l3 - l2);
        ++steps;
        fwd_ms += f - a;
        bwd_ms += g - f;
        step_ms += h - g;
        loss_sum += double(loss_value) * batch_size;
        points += bt.batch;
        peak = std::max(peak, on_cuda    ? tape.device_peak_bytes()
                              : sub_step ? sub_step->peak_bytes()
                                         : tape.peak_bytes());
      }
    const double train_ms = now_ms() - t0, train_cpu_ms = cpu_ms() - c0,
                 main_cpu_ms = thread_cpu_ms() - m0 + main_excess_ms;
    set_flop_counting(false);
    if (points > 0)
      std::printf(
          "training (%s): %lld datapoints in %.1f s = %.0f datapoints/s, %.0f per CPU-second "
          "(forward %.0f%%, backward %.0f%%, AdamW %.0f%%; materialize excluded: %.2f s for %zu "
          "batches); "
          "epoch MAPE %.2f; peak arena %.1f MiB\n",
          where.c_str(), (long long)points, train_ms / 1e3, points / (train_ms / 1e3),
          points / (train_cpu_ms / 1e3), 100 * fwd_ms / train_ms, 100 * bwd_ms / train_ms,
          100 * step_ms / train_ms, materialize_ms / 1e3, nb, loss_sum / double(points),
          double(peak) / (1 << 20));
    if (points > 0 && !on_cuda)
      // The critical path in thread CPU time, a proxy of the idle machine's wall time that a
      // shared machine's wall clock does not give: the main thread's CPU time (with
      // sub-batches plus, per step, how much longer the busiest thread's parts ran than the
      // main thread's). Whole batches: the main thread's waits for its workers' tiles are not
      // counted (they are short when the threads keep up).
      std::printf(
          "training critical path (%s): %.0f datapoints per critical-path CPU-second (%.2f "
          "CPUs busy along it)\n",
          where.c_str(), points / (main_cpu_ms / 1e3), train_cpu_ms / std::max(1e-9, main_cpu_ms));
    if (points > 0 && sub_step) {
      // GEMM work only (engine/cpu_gemm.hpp); the parts' forward and backward interleave
      std::printf(
          "training GEMM FLOPs (%s, %d sub-batches): forward + backward %.2f MFLOP/datapoint, "
          "step %.1f GFLOP/s (matrix products only)\n",
          where.c_str(), sub_batches, fwd_flops / double(points) / 1e6,
          fwd_flops / (train_ms * 1e6));
    } else if (points > 0 && !on_cuda) {
      // GEMM work only (engine/cpu_gemm.hpp); bench_peak measures what the machine can do
      std::printf(
          "training GEMM FLOPs (%s): forward %.2f MFLOP/datapoint at %.1f GFLOP/s, backward "
          "%.2f MFLOP/datapoint at %.1f GFLOP/s, step %.1f GFLOP/s (matrix products only; "
          "their share of the time is not measured here)\n",
          where.c_str(), fwd_flops / double(points) / 1e6, fwd_flops / (fwd_ms * 1e6),
          bwd_flops / double(points) / 1e6, bwd_flops / (bwd_ms * 1e6),
          (fwd_flops + bwd_flops) / (train_ms * 1e6));
    }
    if (points > 0 && !on_cuda) {
      if (!shapes_path.empty()) {
        const std::string tmp = shapes_path + ".tmp";
        std::FILE* out = std::fopen(tmp.c_str(), "w");
        if (!out) throw std::runtime_error("cannot write " + tmp);
        std::fprintf(out,
                     "# m n k trans_a trans_b calls flops (bench_model --gemm-shapes, %lld "
                     "datapoints)\n",
                     (long long)points);
        for (const GemmShape& sh : gemm_shapes())
          std::fprintf(out, "%lld %lld %lld %d %d %lld %.0f\n", (long long)sh.m, (long long)sh.n,
                       (long long)sh.k, int(sh.trans_a), int(sh.trans_b), (long long)sh.calls,
                       sh.flops);
        if (std::fclose(out) != 0) throw std::runtime_error("cannot write " + tmp);
        std::filesystem::rename(tmp, shapes_path);
      }
    }
    if (on_cuda && steps > 0) {
      const double n = double(steps);
      const DeviceLaunchCounts all = launches_fwd + launches_bwd + launches_opt;
      std::printf(
          "launches per training step (%s%s, %.0f datapoints): %.1f = zero_grad+forward+loss %.1f "
          "(%.1f "
          "kernels, %.1f GEMMs, %.1f copies), backward %.1f (%.1f kernels, %.1f GEMMs, %.1f "
          "copies), AdamW + loss read %.1f; %.1f graph launches\n",
          where.c_str(), cuda_graphs ? ", cuda graphs" : "", double(points) / n, all.total() / n,
          launches_fwd.total() / n, launches_fwd.kernels / n, launches_fwd.gemms / n,
          launches_fwd.copies / n, launches_bwd.total() / n, launches_bwd.kernels / n,
          launches_bwd.gemms / n, launches_bwd.copies / n, launches_opt.total() / n,
          all.graphs / n);
    }

    // inference: one program's ~100 schedules, eval mode, no gradient recording
    Tape<float> it;
    it.set_training(false);
    it.set_grad_enabled(false);
    if (on_cuda) it.set_device(Device::CUDA, dev.index);
    DeviceBuffer query_inputs;  // CUDA: one query's inputs (grown when a larger query comes)
    // One autoscheduler query on batch `q`: ŷ [q.batch] on the host. CUDA: inputs prepared on the
    // host, copied in, forward, speedups copied out (the whole round trip is timed).
    auto infer = [&](const data::ProgramTree& tree, const data::BatchTensors& q) {
      it.clear();
      // CPU: the path of lcm's scoring (model::score_batch): the query's schedules in slices on
      // the threads (CostModel::forward_parts)
      if (!on_cuda) return m.forward_parts(it, tree, q, nullptr);
      const model::ForwardInputs<float> in =
          inputs_on_device(m, {&tree}, q, dev.index, query_inputs);
      return to_host(it.value(m.forward(it, tree, in, rng)));
    };
    if (!infer_dir.empty()) {
      for (const std::string& f : batch_files(infer_dir, "program_")) {
        const data::BatchFile pb = data::read_batch_file(f);
        std::vector<double> lat, cpu;
        double query_flops = 0;                     // CPU: GEMM FLOPs of one query (the warm-up's)
        for (int r = 0; r < infer_reps + 1; ++r) {  // the first run is a warm-up
          if (r == 0 && !on_cuda) set_flop_counting(true), reset_flop_count();
          const double a = now_ms(), c = cpu_ms();
          infer(pb.tree, pb.bt);
          if (r > 0) lat.push_back(now_ms() - a), cpu.push_back(cpu_ms() - c);
          if (r == 0 && !on_cuda) query_flops = flop_count(), set_flop_counting(false);
        }
        const std::string name = pb.metadata.count("program") ? pb.metadata.at("program") : f;
        const double med = median(lat);
        std::printf(
            "inference, features excluded (%s): %s: program %s, %lld schedules, C=%lld, %zu "
            "loop nodes: wall median %.3f ms (min %.3f), CPU median %.3f ms",
            where.c_str(), std::filesystem::path(f).filename().c_str(), name.c_str(),
            (long long)pb.bt.batch, (long long)pb.bt.n_comps, pb.tree.nodes.size(), med,
            *std::min_element(lat.begin(), lat.end()), median(cpu));
        if (query_flops > 0)
          std::printf("; GEMM %.1f MFLOP per query, %.1f GFLOP/s at the median", query_flops / 1e6,
                      query_flops / (med * 1e6));
        std::printf("\n");
        if (!pb.metadata.count("program") || !pb.metadata.count("raw_schedules")) continue;
        // features included: raw record text (cut to the schedules asked for) → parse → features →
        // batch tensors → forward, as lcm-predict / an autoscheduler call would run it
        const data::RawRecord rec = program_record(pb.metadata.at("source"), name,
                                                   std::stoll(pb.metadata.at("raw_schedules")));
        std::vector<double> flat, fcpu, feat;
        int64_t n_sched = 0;
        for (int r = 0; r < infer_reps + 1; ++r) {
          const double a = now_ms(), c = cpu_ms();
          data::SkipLog log(false, 0);
          const std::optional<data::Program> prog = data::parse_program(rec, log);
          if (!prog) throw std::runtime_error("program " + name + " does not parse");
          const std::optional<data::ProgramFeatures> pf =
              data::featurize(*prog, data::FeatureOptions{}, log);
          if (!pf) throw std::runtime_error("program " + name + " has no features");
          const data::BatchTensors bt = data::program_batch(*pf, 0, pf->n_schedules());
          const double fe = now_ms();
          infer(pf->tree, bt);
          n_sched = bt.batch;
          if (r > 0)
            flat.push_back(now_ms() - a), fcpu.push_back(cpu_ms() - c), feat.push_back(fe - a);
        }
        std::printf(
            "inference, features included (%s): %s: %lld schedules from %zu bytes of JSON: "
            "wall median %.3f ms (features %.3f ms), CPU median %.3f ms\n",
            where.c_str(), std::filesystem::path(f).filename().c_str(), (long long)n_sched,
            rec.json.size(), median(flat), median(feat), median(fcpu));
      }
      return 0;
    }
    if (!batch_dir.empty()) return 0;  // exported batches: training only (inference: --infer-dir)
    if (ds_storage.programs.empty())
      throw std::runtime_error("no program left in " + data_path +
                               " for the inference measurement");
    const data::Dataset& ds = ds_storage;
    size_t pick = 0;
    for (size_t p = 0; p < ds.programs.size(); ++p)
      if (std::abs(ds.programs[p].n_schedules() - 100) <
          std::abs(ds.programs[pick].n_schedules() - 100))
        pick = p;
    const data::ProgramFeatures& pf = ds.programs[pick];
    const data::BatchTensors bt = data::program_batch(pf, int32_t(pick), 100);
    std::vector<double> lat, cpu;
    for (int r = 0; r < infer_reps; ++r) {
      const double a = now_ms(), c = cpu_ms();
      infer(pf.tree, bt);
      lat.push_back(now_ms() - a);
      cpu.push_back(cpu_ms() - c);
    }
    std::sort(lat.begin(), lat.end());
    std::sort(cpu.begin(), cpu.end());
    std::printf(
        "inference (%s): program %s, %lld schedules, C=%lld, %zu loop nodes: wall min %.2f ms, "
        "median %.2f ms; CPU median %.2f ms\n",
        where.c_str(), pf.name.c_str(), (long long)bt.batch, (long long)bt.n_comps,
        pf.tree.nodes.size(), lat.front(), lat[lat.size() / 2], cpu[cpu.size() / 2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
