// Speed of the engine's hot ops at the cost model's shapes (float32, CPU): the fused LSTM
// (forward and forward+backward, ms per call and GFLOP/s) and the computation MLP stack
// 1146→600→350→200→180 with ELU, and (--filter gemms) the bare GEMMs of each of its layers. Same
// table as bench/reference/bench_torch.py for a side-by-side run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "engine/ops/gemm.hpp"
#include "engine/threads.hpp"

using namespace lcm;
using lcm::bench::cpu_ms;
using lcm::bench::now_ms;

namespace {

/// Timing of one call: the minimum wall time (ms; the least disturbed call on a shared machine)
/// and the median process CPU time (ms, summed over threads).
struct Timing {
  double wall_ms, cpu_ms;
};

/// Times fn() over at least `min_reps` calls and ~`budget_ms` of wall time, after 2 warm-up calls.
template <class F>
Timing time_ms(F&& fn, int min_reps = 5, double budget_ms = 500) {
  fn();
  fn();
  std::vector<double> wall, cpu;
  const double start = now_ms();
  while (int(wall.size()) < min_reps || (now_ms() - start < budget_ms && wall.size() < 2000)) {
    const double t0 = now_ms(), c0 = cpu_ms();
    fn();
    cpu.push_back(cpu_ms() - c0);
    wall.push_back(now_ms() - t0);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return Timing{wall.front(), cpu[cpu.size() / 2]};
}

/// One table row: forward and forward+backward (min wall ms, median CPU ms) and GFLOP/s of the
/// forward+backward wall time (backward ≈ 2× the forward's multiply-adds: ≈ 3× forward FLOPs).
void print_row(const std::string& name, int64_t B, int64_t S, double flops_fwd, Timing fwd,
               Timing fb) {
  std::printf("%-30s %6lld %4lld %10.3f %10.3f %10.3f %10.3f %9.1f\n", name.c_str(), (long long)B,
              (long long)S, fwd.wall_ms, fb.wall_ms, fwd.cpu_ms, fb.cpu_ms,
              3 * flops_fwd / (fb.wall_ms * 1e6));
  std::fflush(stdout);
}

struct LstmCase {
  std::string name;
  LstmSpec spec;
  int64_t S;
  bool loss_on_output;  // sum(output) (autoencoder) instead of sum(h_n) (cost model)
};

void bench_lstm(const LstmCase& c, int64_t B) {
  ParameterStore<float> store;
  Rng rng(1);
  add_lstm_parameters(store, "lstm", c.spec, &rng);
  Parameter<float>& x = store.add("x", Shape{B, c.S, c.spec.input_size});
  x.requires_grad = false;  // like a torch input without requires_grad
  for (float& v : x.value) v = float(rng.uniform(-1, 1));
  Tape<float> tape;
  auto run = [&](bool backward) {
    tape.clear();
    tape.set_grad_enabled(backward);
    LstmOutputs o =
        ops::lstm(tape, tape.param(x), c.spec, lstm_weight_nodes(tape, store, "lstm", c.spec));
    if (backward) {
      store.zero_grad();
      tape.backward(ops::sum(tape, c.loss_on_output ? o.output : o.h_n));
    }
  };
  const Timing fwd = time_ms([&] { run(false); });
  const Timing fb = time_ms([&] { run(true); });
  double flops = 0;
  for (int l = 0; l < c.spec.num_layers; ++l)
    flops += c.spec.directions() * 2.0 * double(B) * double(c.S) * 4.0 * c.spec.hidden_size *
             (c.spec.layer_input_size(l) + c.spec.hidden_size);
  print_row(c.name, B, c.S, flops, fwd, fb);
}

void bench_mlp(int64_t B) {
  const std::vector<int64_t> widths{1146, 600, 350, 200, 180};
  ParameterStore<float> store;
  Rng rng(2);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    auto& w = store.add("w" + std::to_string(i), Shape{widths[i + 1], widths[i]});
    auto& b = store.add("b" + std::to_string(i), Shape{widths[i + 1]});
    const double bound = 1 / std::sqrt(double(widths[i]));
    for (float& v : w.value) v = float(rng.uniform(-bound, bound));
    for (float& v : b.value) v = float(rng.uniform(-bound, bound));
  }
  Parameter<float>& x = store.add("x", Shape{B, widths[0]});
  x.requires_grad = false;
  for (float& v : x.value) v = float(rng.uniform(-1, 1));
  Tape<float> tape;
  auto run = [&](bool backward) {
    tape.clear();
    tape.set_grad_enabled(backward);
    NodeId h = tape.param(x);
    for (size_t i = 0; i + 1 < widths.size(); ++i)
      h = ops::linear_elu(
          tape, h, tape.param(store.at("w" + std::to_string(i))),
          tape.param(store.at("b" + std::to_string(i))));  // as the cost model runs it
    if (backward) {
      store.zero_grad();
      tape.backward(ops::sum(tape, h));
    }
  };
  const Timing fwd = time_ms([&] { run(false); });
  const Timing fb = time_ms([&] { run(true); });
  double flops = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    flops += 2.0 * double(B) * double(widths[i]) * double(widths[i + 1]);
  print_row("mlp 1146-600-350-200-180 elu", B, 1, flops, fwd, fb);
}

/// The three GEMMs of one linear layer of the MLP stack alone (no tape, no bias, no activation):
/// "fwd" = Y[B, out] = X·Wᵀ, "fwd+bwd" = that + dX = dY·W + dW += dYᵀ·X, on the tiled deterministic
/// GEMM of engine/ops/gemm.hpp: the kernel's GFLOP/s to set against OpenBLAS's in bench_torch.py.
void bench_linear_gemms(int64_t B, int64_t in, int64_t out) {
  Rng rng(3);
  auto filled = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = float(rng.uniform(-1, 1));
    return v;
  };
  std::vector<float> X = filled(B * in), W = filled(out * in), dY = filled(B * out);
  std::vector<float> Y(size_t(B * out)), dX(size_t(B * in)), dW(size_t(out * in));
  using ops::detail::gemm_tiled;
  auto fwd = [&] {
    gemm_tiled<float>(B, out, in, {X.data(), in, false}, {W.data(), in, true}, Y.data(), out,
                      false);
  };
  auto fb = [&] {
    fwd();
    gemm_tiled<float>(B, in, out, {dY.data(), out, false}, {W.data(), in, false}, dX.data(), in,
                      false);
    gemm_tiled<float>(out, in, B, {dY.data(), out, true}, {X.data(), in, false}, dW.data(), in,
                      true);
  };
  const Timing f = time_ms(fwd, 5, 200), b = time_ms(fb, 5, 200);
  print_row("gemms linear " + std::to_string(in) + "->" + std::to_string(out), B, 1,
            2.0 * B * in * out, f, b);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "lcm engine benchmark: fused LSTM and MLP stack at the cost model's shapes (float32, CPU)"};
  int threads = 2;
  std::string filter;
  int64_t only_batch = 0;
  app.add_option("--threads", threads, "CPU threads for Eigen/OpenMP (<= 0: all)")
      ->check(CLI::Range(std::numeric_limits<int>::min(), kMaxThreads));
  app.add_option("--batch", only_batch, "only this batch size (32, 256 or 2048; 0: all)");
  app.add_option("--filter", filter, "only rows whose name contains this text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help is 0; a bad option or value is bad usage
  }
  set_num_threads(threads);
  std::printf("lcm bench_engine: threads %d, float32\n", num_threads());
  std::printf("%-30s %6s %4s %10s %10s %10s %10s %9s\n", "case", "B", "T", "fwd_ms", "fwdbwd_ms",
              "fwd_cpu", "fwdbwd_cpu", "GFLOP/s");
  const std::vector<LstmCase> cases = {
      {"lstm 180->180 (comps/nodes)", {180, 180, 1, false}, 1, false},
      {"lstm 180->180 (comps/nodes)", {180, 180, 1, false}, 2, false},
      {"lstm 180->180 (comps/nodes)", {180, 180, 1, false}, 4, false},
      {"lstm 180->180 (comps/nodes)", {180, 180, 1, false}, 8, false},
      {"lstm 16->100 bidir (tags)", {16, 100, 1, true}, 4, false},
      {"lstm 11->100 (expr)", {11, 100, 1, false}, 66, false},
      {"lstm 44->20 2L bidir (AE)", {44, 20, 2, true}, 16, true},
  };
  for (const LstmCase& c : cases)
    for (int64_t B : {32, 256, 2048})
      if ((filter.empty() || c.name.find(filter) != std::string::npos) &&
          (!only_batch || B == only_batch))
        bench_lstm(c, B);
  if (filter.empty() || std::string("mlp").find(filter) != std::string::npos)
    for (int64_t B : {32, 256, 2048})
      if (!only_batch || B == only_batch) bench_mlp(B);
  if (!filter.empty() && std::string("gemms linear").find(filter) != std::string::npos) {
    const std::vector<int64_t> widths{1146, 600, 350, 200, 180};
    for (int64_t B : {32, 256, 2048})
      for (size_t i = 0; i + 1 < widths.size(); ++i)
        bench_linear_gemms(B, widths[i], widths[i + 1]);
  }
  return 0;
}
