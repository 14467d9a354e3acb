// Speed of the CUDA backend at the cost model's shapes (float32, one GPU), the same rows as
// bench_engine (CPU) for a side-by-side table: the fused LSTM, the computation MLP stack with ELU,
// the bare GEMMs in FP32 and TF32 (TFLOP/s, fraction of a stated peak), the multi-tensor AdamW
// step, and the device arena's peak. Without a CUDA device it prints "skipped: <reason>" and exits
// 0.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "bench/cuda_skip.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#include "kernels/cuda_ops.hpp"
#endif

using namespace lcm;
using lcm::bench::now_ms;

#ifdef LCM_WITH_CUDA
namespace {

/// Minimum wall time (ms) of fn() followed by a device synchronisation, over ≥ 5 calls and about
/// `budget_ms`, after 2 warm-up calls (the minimum: the least disturbed call).
template <class F>
double time_ms(F&& fn, double budget_ms = 400) {
  fn();
  fn();
  device_synchronize();
  double best = 1e30;
  const double start = now_ms();
  for (int reps = 0; reps < 5 || (now_ms() - start < budget_ms && reps < 5000); ++reps) {
    const double t0 = now_ms();
    fn();
    device_synchronize();
    best = std::min(best, now_ms() - t0);
  }
  return best;
}

/// Sets every parameter of `s` uniformly in [-0.5, 0.5) from Rng(seed), then copies `s` to
/// cuda:0.
void fill_random_on_device(ParameterStore<float>& s, uint64_t seed) {
  Rng rng(seed);
  for (auto& p : s.all())
    for (float& v : p.value) v = float(rng.uniform(-0.5, 0.5));
  parameters_to_device(s, 0);
}

void bench_lstm(const char* name, LstmSpec spec, int64_t S, int64_t B) {
  ParameterStore<float> store;
  Rng rng(1);
  add_lstm_parameters(store, "lstm", spec, &rng);
  Parameter<float>& x = store.add("x", Shape{B, S, spec.input_size});
  fill_random_on_device(store, 2);
  Tape<float> tape;
  tape.set_device(Device::CUDA, 0);
  auto run = [&](bool backward) {
    tape.clear();
    LstmOutputs o =
        ops::lstm(tape, tape.param(x), spec, lstm_weight_nodes(tape, store, "lstm", spec));
    if (backward) tape.backward(ops::sum(tape, o.output));
  };
  const bool fused = cuda::lstm_recurrence_shape<float>(B, spec.hidden_size).rows_per_block > 0;
  const double fwd = time_ms([&] { run(false); });
  const double fb = time_ms([&] { run(true); });
  std::printf("%-30s B=%-5lld T=%-3lld fwd %8.3f ms  fwd+bwd %8.3f ms  peak %8.1f MiB  (%s)\n",
              name, (long long)B, (long long)S, fwd, fb,
              double(tape.device_peak_bytes()) / (1 << 20),
              fused ? "fused recurrence" : "per-step cuBLAS + cell");
  if (!fused) return;
  cuda::set_lstm_fused_recurrence(false);  // the same shape on the per-step path, for comparison
  const double fwd_p = time_ms([&] { run(false); });
  const double fb_p = time_ms([&] { run(true); });
  cuda::set_lstm_fused_recurrence(true);
  std::printf(
      "%-30s B=%-5lld T=%-3lld fwd %8.3f ms  fwd+bwd %8.3f ms  (per-step path: fused is %.2fx, "
      "%.2fx)\n",
      name, (long long)B, (long long)S, fwd_p, fb_p, fwd_p / fwd, fb_p / fb);
}

void bench_mlp(int64_t B) {
  const std::vector<int64_t> widths{1146, 600, 350, 200, 180};
  ParameterStore<float> store;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    store.add("w" + std::to_string(i), Shape{widths[i + 1], widths[i]});
    store.add("b" + std::to_string(i), Shape{widths[i + 1]});
  }
  Parameter<float>& x = store.add("x", Shape{B, widths[0]});
  fill_random_on_device(store, 3);
  Tape<float> tape;
  tape.set_device(Device::CUDA, 0);
  auto run = [&](bool backward) {
    tape.clear();
    NodeId h = tape.param(x);
    for (size_t i = 0; i + 1 < widths.size(); ++i)
      h = ops::elu(tape, ops::linear(tape, h, tape.param(store.at("w" + std::to_string(i))),
                                     tape.param(store.at("b" + std::to_string(i)))));
    if (backward) tape.backward(ops::sum(tape, h));
  };
  const double fwd = time_ms([&] { run(false); });
  const double fb = time_ms([&] { run(true); });
  std::printf("%-30s B=%-5lld       fwd %8.3f ms  fwd+bwd %8.3f ms\n",
              "mlp 1146-600-350-200-180 elu", (long long)B, fwd, fb);
}

void bench_gemm(int64_t m, int64_t n, int64_t k, double peak_fp32, double peak_tf32) {
  DeviceBuffer a(0, sizeof(float) * m * k), b(0, sizeof(float) * k * n),
      c(0, sizeof(float) * m * n);
  device_fill(static_cast<float*>(a.get()), m * k, 0.01f);
  device_fill(static_cast<float*>(b.get()), k * n, 0.02f);
  for (bool tf32 : {false, true}) {
    cuda::set_tf32(tf32);
    const double ms = time_ms([&] {
      cuda::gemm(false, true, m, n, k, static_cast<const float*>(a.get()), k,
                 static_cast<const float*>(b.get()), k, static_cast<float*>(c.get()), n, false);
    });
    const double tflops = 2.0 * m * n * k / (ms * 1e-3) / 1e12;
    const double peak = tf32 ? peak_tf32 : peak_fp32;
    std::printf("gemm %-5s %6lldx%-6lldx%-6lld %8.3f ms  %7.2f TFLOP/s  %5.1f%% of %.0f\n",
                tf32 ? "TF32" : "FP32", (long long)m, (long long)n, (long long)k, ms, tflops,
                100.0 * tflops / peak, peak);
  }
  cuda::set_tf32(false);
}

void bench_adamw(int64_t n_params) {
  ParameterStore<float> store;
  const int64_t per = n_params / 16;
  for (int k = 0; k < 16; ++k) store.add("p" + std::to_string(k), Shape{per});
  fill_random_on_device(store, 4);
  AdamW<float> opt(parameter_pointers(store));
  const double ms = time_ms([&] { opt.step(); });
  std::printf("adamw step (one kernel)        %lld params  %8.3f ms\n", (long long)(16 * per), ms);
}

}  // namespace
#endif

int main(int argc, char** argv) {
  CLI::App app{"lcm CUDA benchmark: LSTM, MLP stack, GEMMs (FP32/TF32), AdamW on cuda:0 (float32)"};
  double peak_fp32 = 67, peak_tf32 = 495;  // H100/H200 SXM dense peaks, TFLOP/s
  app.add_option("--peak-fp32", peak_fp32,
                 "the GPU's FP32 peak, TFLOP/s (default: H100/H200 SXM, 67)");
  app.add_option("--peak-tf32", peak_tf32,
                 "the GPU's dense TF32 peak, TFLOP/s (default: H100/H200 SXM, 495)");
  if (const int rc = lcm::bench::parse_or_skip_without_cuda(app, argc, argv); rc >= 0) return rc;
#ifdef LCM_WITH_CUDA
  try {
    std::printf("device: %s\n", require_device(parse_device("cuda:0")).c_str());
    for (int64_t B : {32, 256, 2048}) {
      bench_lstm("lstm 180->180 (comps/nodes)", {180, 180, 1, false}, 4, B);
      bench_lstm("lstm 16->100 bidir (tags)", {16, 100, 1, true}, 4, B);
      bench_lstm("lstm 11->100 (expr)", {11, 100, 1, false}, 66, B);
      bench_lstm("lstm 44->20 2L bidir (AE)", {44, 20, 2, true}, 16, B);
      bench_mlp(B);
    }
    for (int64_t B : {256, 2048, 16384}) bench_gemm(B, 600, 1146, peak_fp32, peak_tf32);
    bench_gemm(8192, 8192, 8192, peak_fp32, peak_tf32);
    bench_adamw(int64_t(1) << 22);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
#endif
}
