// Internal helpers shared by the CPU op implementations (engine/ops/*.cpp): the device dispatch
// point, shape-error messages, dimension normalisation, row-major Eigen maps, and the
// deterministic parallel loops/reductions of the CPU backend. Not part of the public API.
#pragma once
#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tape.hpp"

namespace lcm::ops::detail {

/// Row-major dynamic matrix of T and (mutable / const) maps over raw pointers.
template <class T>
using MatRM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapM = Eigen::Map<MatRM<T>>;
template <class T>
using CMapM = Eigen::Map<const MatRM<T>>;
/// 1-D array maps (element-wise work).
template <class T>
using MapA = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CMapA = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Backends an op can run on: the CPU (Eigen, the oracle) and, in a build with the CUDA kernels
/// (LCM_WITH_CUDA), CUDA (kernels/*.cu + cuBLAS, glue in engine/ops/cuda_ops.cpp).
enum class Backend { Cpu, Cuda };

/// Shared body of select_backend over the devices of the inputs.
template <class T, class It>
Backend select_backend_range(const char* op, const Tape<T>& t, It begin, It end) {
  bool any_cpu = false, any_cuda = false;
  for (It it = begin; it != end; ++it) {
    if (*it < 0) continue;
    (t.value(*it).device == Device::CPU ? any_cpu : any_cuda) = true;
  }
#ifndef LCM_WITH_CUDA
  if (any_cuda || t.device() != Device::CPU)
    throw std::logic_error(std::string("op ") + op + ": CUDA backend not built");
  return Backend::Cpu;
#else
  const bool tape_cuda = t.device() != Device::CPU;
  if (!any_cuda && !tape_cuda) return Backend::Cpu;
  if (any_cpu || !tape_cuda)
    throw std::logic_error(std::string("op ") + op +
                           ": inputs on different devices (a cuda tensor needs a cuda tape " +
                           "and every input on it; tape is " + (tape_cuda ? "cuda" : "cpu") + ")");
  return Backend::Cuda;
#endif
}

/// The device dispatch point of every op: chooses the backend from the devices of the op's input
/// tensors (ids < 0 are ignored: absent optional inputs) and of the tape. All on the CPU →
/// Backend::Cpu; all on CUDA with a CUDA tape → Backend::Cuda. Throws std::logic_error
/// "op <op>: CUDA backend not built" for a CUDA input in a build without the kernels, and
/// "op <op>: inputs on different devices (...)" for a mix of devices.
template <class T>
Backend select_backend(const char* op, const Tape<T>& t, std::initializer_list<NodeId> inputs) {
  return select_backend_range(op, t, inputs.begin(), inputs.end());
}
template <class T>
Backend select_backend(const char* op, const Tape<T>& t, const std::vector<NodeId>& inputs) {
  return select_backend_range(op, t, inputs.begin(), inputs.end());
}

/// `if (backend == Cuda) return <cuda_call>;` in a CUDA build, nothing otherwise (so the CPU-only
/// build never references the CUDA glue of engine/ops/cuda_ops.cpp).
#ifdef LCM_WITH_CUDA
#define LCM_IF_CUDA(backend, ...) \
  if ((backend) == ::lcm::ops::detail::Backend::Cuda) return __VA_ARGS__
#else
#define LCM_IF_CUDA(backend, ...) (void)(backend)
#endif

/// Throws std::invalid_argument("op <op>: <what>").
[[noreturn]] inline void shape_error(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("op ") + op + ": " + what);
}

/// `dim` in [-rank, rank) → [0, rank); otherwise std::invalid_argument naming op and shape.
inline int normalize_dim(const char* op, int dim, const Shape& s) {
  int d = dim < 0 ? dim + s.rank : dim;
  if (d < 0 || d >= s.rank)
    shape_error(op, "dim " + std::to_string(dim) + " out of range for shape " + s.str());
  return d;
}

/// Element counts above which the CPU loops use OpenMP (below, thread start-up costs more).
/// On `parallel for simd` the condition must be written `if (parallel : …)`: OpenMP 5 applies a
/// plain `if` to the simd part too, and GCC then runs every loop below the threshold scalar.
constexpr int64_t kParallelMin = int64_t(1) << 17;
/// Fixed block length of deterministic reductions (independent of the thread count).
constexpr int64_t kReduceBlock = 4096;

/// Σ_{i<n} term(i) accumulated in double, in fixed blocks of kReduceBlock summed sequentially
/// inside a block, then the block partials summed in block order. The result is bit-identical
/// for any thread count and run (no atomics); blocks run in parallel when n is large.
template <class F>
double blocked_sum(int64_t n, F term) {
  if (n <= kReduceBlock) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(term(i));
    return s;
  }
  const int64_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> part(size_t(nb), 0.0);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kReduceBlock, hi = std::min(n, lo + kReduceBlock);
    double s = 0;
    for (int64_t i = lo; i < hi; ++i) s += double(term(i));
    part[size_t(b)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

/// exp(x) − 1 for float without a library call, so that loops over it vectorise (`omp simd`):
/// glibc's expm1f is scalar (~4 ns/element; it was ~20% of the MLP stack's time in ELU). Method
/// (Cody–Waite, as Cephes/Sleef expm1f): k = round(x / ln 2), r = x − k·ln 2 (|r| ≤ 0.35) split
/// in a high and a low part, expm1(r) by its Taylor series to r⁸/8! (truncation < 1e-9 relative),
/// then expm1(x) = 2ᵏ·expm1(r) + (2ᵏ − 1) with one fused multiply-add. Max error ≈ 2 ulp against
/// std::expm1 for all finite x (tests/test_gemm.cpp); x < −87 (and −inf) gives −1, x > ln(FLT_MAX)
/// (and +inf) +inf, NaN and ±0 are returned unchanged. The polynomial itself runs on x clamped to
/// [−87, ln(FLT_MAX)] with NaN mapped to −87, so that k is always in [−126, 127] and 2ᵏ is built
/// from a valid exponent field (a NaN k would convert to INT_MIN, and its shift is undefined).
/// The double overload is std::expm1 (exact reference for gradient checks).
inline float expm1(float x) {
  // The comparisons are false for NaN, which therefore takes the −87 branch.
  const float xc = x > -87.0f ? (x < 88.7228394f ? x : 88.7228394f) : -87.0f;
  constexpr float kRound = 12582912.0f;  // 1.5·2²³: adding and subtracting rounds to an integer
  float kf = (xc * 1.44269504088896341f + kRound) - kRound;
  kf = kf > 127.0f ? 127.0f : kf;  // x in (88.03, 88.72]: r up to 0.69, still ≈ 2 ulp
  const float r0 = std::fma(kf, -0.693359375f, xc);  // ln 2 high part (exact product for |k| ≤ 128)
  const float r =
      std::fma(kf, 2.12194440e-4f, r0);  // ln 2 low part: ln 2 = 0.693359375 − 2.12194440e-4
  float p = 1.0f / 40320.0f;
  p = std::fma(p, r, 1.0f / 5040.0f);
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  const float em1 = std::fma(p * r, r, r);  // expm1(r) = r + r²·(1/2 + r/6 + …)
  const int32_t bits = (int32_t(kf) + 127) << 23;
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  const float y = std::fma(two_k, em1, two_k - 1.0f);
  // Beyond ln(FLT_MAX) the result overflows; NaN and ±0 are returned as they are.
  return x > 88.7228394f ? HUGE_VALF : (x != x || x == 0.0f) ? x : y;
}
inline double expm1(double x) {
  return std::expm1(x);
}

}  // namespace lcm::ops::detail
