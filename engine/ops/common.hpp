// Internal helpers shared by the CPU op implementations (engine/ops/*.cpp): the device dispatch
// point, shape-error messages, dimension normalisation, row-major Eigen maps, and the
// deterministic parallel loops/reductions of the CPU backend. Not part of the public API.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
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

/// Backends an op can run on. Only the CPU (Eigen) backend exists in this build.
enum class Backend { Cpu };

/// The device dispatch point of every op: chooses the backend from the devices of the op's input
/// tensors (ids < 0 are ignored: absent optional inputs). All inputs on the CPU → Backend::Cpu.
/// Any CUDA input throws std::logic_error("op <op>: CUDA backend not built") until the CUDA
/// backend (kernels/<family>.cu, mirrored by name) is wired in here.
template <class T>
Backend select_backend(const char* op, const Tape<T>& t, std::initializer_list<NodeId> inputs) {
  for (NodeId i : inputs) {
    if (i < 0) continue;
    if (t.value(i).device != Device::CPU)
      throw std::logic_error(std::string("op ") + op + ": CUDA backend not built");
  }
  return Backend::Cpu;
}
template <class T>
Backend select_backend(const char* op, const Tape<T>& t, const std::vector<NodeId>& inputs) {
  for (NodeId i : inputs) {
    if (t.value(i).device != Device::CPU)
      throw std::logic_error(std::string("op ") + op + ": CUDA backend not built");
  }
  return Backend::Cpu;
}

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
constexpr int64_t kParallelMin = int64_t(1) << 15;
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
