// Internal helpers shared by the CPU op implementations (engine/ops/*.cpp): the device dispatch
// point, shape-error messages, dimension normalisation, row-major Eigen maps, and the
// deterministic parallel loops/reductions of the CPU backend. Not part of the public API.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device_memory.hpp"
#include "engine/eigen.hpp"
#include "engine/ops/elementwise_math.hpp"
#include "engine/ops/loss_math.hpp"
#include "engine/tape.hpp"
#include "kernels/cuda_ops.hpp"

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
/// (LCM_WITH_CUDA), CUDA (kernels/*.cu + cuBLAS, launched from each family's backend functions in
/// engine/ops/<family>.cpp).
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

/// In a backend function of an op family: `if (backend == Cuda) { <cuda_call>; return; }` in a
/// CUDA build (the launch of kernels/*.cu), nothing otherwise (so the CPU-only build never
/// references the kernels); the CPU code follows it.
#ifdef LCM_WITH_CUDA
#define LCM_ON_CUDA(backend, ...)                       \
  if ((backend) == ::lcm::ops::detail::Backend::Cuda) { \
    __VA_ARGS__;                                        \
    return;                                             \
  }
#else
#define LCM_ON_CUDA(backend, ...) (void)(backend)
#endif

/// The one body of the reductions and losses (engine/ops/loss.cpp): y = T(weight·factor·Σ_i
/// math::loss_term(kind, a_i, b_i) / den) → scalar [], b = -1 for none; backward with
/// c = dL·factor·weight/den. Inputs already checked by the calling op.
template <class T>
NodeId reduce(Tape<T>& t, const char* op, LossKind kind, NodeId a, NodeId b, double weight,
              double factor, double den);

/// Throws std::invalid_argument("op <op>: <what>").
[[noreturn]] inline void shape_error(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("op ") + op + ": " + what);
}

/// The element count of a loss's inputs: std::invalid_argument "op <op>: prediction <shape> and
/// target <shape> differ" when their shapes differ, "op <op>: empty prediction <shape>" when they
/// hold no value.
template <class T>
int64_t loss_numel(const char* op, const Tape<T>& t, NodeId pred, NodeId target) {
  if (t.shape(pred) != t.shape(target))
    shape_error(op, "prediction " + t.shape(pred).str() + " and target " + t.shape(target).str() +
                        " differ");
  const int64_t n = t.value(pred).numel();
  if (n == 0) shape_error(op, "empty prediction " + t.shape(pred).str());
  return n;
}

/// A copy of `v` in the device scratch of tape `t` (CUDA backend): `n` ≥ v.size() values
/// allocated, the first v.size() uploaded.
template <class U, class T>
U* upload_scratch(Tape<T>& t, const std::vector<U>& v, int64_t n) {
  U* d = t.template device_scratch<U>(n);
  device_upload_bytes(d, v.data(), sizeof(U) * v.size());
  return d;
}
template <class U, class T>
U* upload_scratch(Tape<T>& t, const std::vector<U>& v) {
  return upload_scratch(t, v, int64_t(v.size()));
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

/// y[i] += x[i] for i < n on the CPU (vectorisable; OpenMP above kParallelMin).
template <class T>
void add_into(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
/// g += x (n values) on `backend`: the kernel of kernels/elementwise.cu or add_into (the gradient
/// of an identity-like input: add, reshape).
template <class T>
void accumulate(Backend backend, T* g, const T* x, int64_t n) {
  LCM_ON_CUDA(backend, cuda::accumulate(g, x, n));
  add_into(g, x, n);
}

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

}  // namespace lcm::ops::detail
