// What the CPU backend's matrix products run on, and how much work they do: the floating-point
// operations of every ops::detail::gemm call (2·m·n·k: one multiply and one add per term), and
// optionally the calls per product shape. Counting is off by default; bench_model turns it on to
// report GFLOP/s and bench_peak replays the recorded shapes against other GEMM libraries.
// Element-wise work (activations, the LSTM cell, losses, the optimizer) is not counted.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace lcm {

/// The smallest float product the CPU backend hands to oneDNN (a build with LCM_WITH_ONEDNN): C of
/// at least kLibraryMinDim × kLibraryMinDim and at least kLibraryMinMacs multiply-adds (m·n·k).
/// Below, the library's per-call checks and dispatch cost more than its faster kernel saves
/// (bench_peak: 16×16×16 and 9×64×64 ran faster on Eigen, 24×180×720 and larger on oneDNN).
/// ops::detail::library_shape applies them; cpu_gemm_library() names them.
constexpr int64_t kLibraryMinDim = 16;
constexpr int64_t kLibraryMinMacs = 65536;

/// The library behind the CPU backend's float products, for logs and benchmark headers, e.g.
/// "oneDNN 2.6.3 sgemm (products of at least 16x16 and 65536 multiply-adds; Eigen 3.4.0 below)"
/// or "Eigen 3.4.0". double products always run on Eigen.
std::string cpu_gemm_library();

/// One product shape of the CPU backend: C[m, n] (+)= op(A)[m, k]·op(B)[k, n] with A or B read
/// transposed (ops::detail::Operand::trans), and how often it ran and its FLOPs (2·m·n·k each).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t calls = 0;
  double flops = 0;
};

namespace detail {
/// Whether gemm() counts (read relaxed on every call; set by set_flop_counting).
inline std::atomic<bool> g_flop_counting{false};
/// Records one product of 2·m·n·k FLOPs (and its shape when shape recording is on).
void count_gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);
}  // namespace detail

/// Turns the counting on or off; `shapes` also records each distinct shape's calls (a mutex per
/// product: for a profile, not for timing). Counting alone costs one relaxed atomic add per
/// product.
void set_flop_counting(bool on, bool shapes = false);
/// FLOPs of the products counted since the last reset (every thread).
double flop_count();
/// Sets the FLOP count to zero and forgets the recorded shapes.
void reset_flop_count();
/// The recorded shapes, most FLOPs first.
std::vector<GemmShape> gemm_shapes();

}  // namespace lcm
