// CPU implementations of the element-wise ops (add, mul, scale, ELU, LeakyReLU, sigmoid, tanh,
// inverted dropout), forward and backward side by side. Loops are simple and vectorisable and run
// under OpenMP for large tensors (element-wise, so results do not depend on the thread count).
#include <cmath>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"

namespace lcm::ops {

namespace {

/// f(i) for i < n; OpenMP-parallel (static schedule) above detail::kParallelMin elements.
template <class F>
inline void for_each_index(int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) f(i);
}

/// y[i] = fwd(x[i]) for i < n over non-aliasing arrays: written with restrict pointers (not
/// through for_each_index's capturing lambda) so that the compiler keeps one vector loop — ELU's
/// polynomial expm1 ran mostly scalar through the lambda (about 10 % of one-program inference).
template <class T, class Fwd>
inline void map_unary(int64_t n, const T* __restrict x, T* __restrict y, Fwd fwd) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = fwd(x[i]);
}

/// gx[i] += gy[i]·deriv(x[i], y[i]) for i < n (the backward of map_unary), restrict pointers.
template <class T, class Deriv>
inline void map_unary_backward(int64_t n, const T* __restrict gy, const T* __restrict x,
                               const T* __restrict y, T* __restrict gx, Deriv deriv) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) gx[i] += gy[i] * deriv(x[i], y[i]);
}

/// Dropout's forward over non-aliasing arrays (restrict pointers, one vector loop: through a
/// capturing lambda the 64-bit hash ran scalar, ~5% of a training step): element i is kept iff
/// counter_uniform(seed, offset, i) ≥ p. That uniform is k / 2^24 for the integer k = hash >> 40,
/// so the test is k ≥ ⌈p·2^24⌉ exactly (the same mask as the float comparison and the CUDA kernel).
template <class T>
inline void dropout_mask_apply(int64_t n, const T* __restrict x, T* __restrict y,
                               uint8_t* __restrict mask, uint64_t seed, uint64_t offset, double p,
                               T keep_scale) {
  const uint64_t s = mix64(seed);
  const uint32_t threshold =
      uint32_t(std::ceil(p * 16777216.0));  // ≤ 2^24; k < 2^24: 32-bit compare
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t k = uint32_t(mix64(s ^ (offset + uint64_t(i))) >> 40);
    const uint8_t m = k >= threshold ? 1 : 0;
    mask[i] = m;
    y[i] = m ? x[i] * keep_scale : T(0);
  }
}

/// gx[i] += mask[i] ? gy[i]·keep_scale : 0 (dropout's backward), restrict pointers.
template <class T>
inline void dropout_backward_into(int64_t n, const T* __restrict gy, const uint8_t* __restrict mask,
                                  T* __restrict gx, T keep_scale) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) gx[i] += mask[i] ? gy[i] * keep_scale : T(0);
}

template <class T>
void require_same_shape(const char* op, const Tape<T>& t, NodeId a, NodeId b) {
  if (t.shape(a) != t.shape(b))
    detail::shape_error(op, "shapes differ: " + t.shape(a).str() + " vs " + t.shape(b).str());
}

/// Shared body of the unary ops y = f(x) whose derivative is a function d(x, y):
/// backward dX += dY ⊙ d(x, y).
/// `kind`/`param` name the same op for the CUDA backend (kernels/elementwise.cu).
template <class T, class Fwd, class Deriv>
NodeId unary(Tape<T>& t, NodeId x, const char* op, Fwd fwd, Deriv deriv, detail::CudaUnary kind,
             T param) {
  // Device dispatch point: a CUDA tape and tensor select kernels/elementwise.cu.
  LCM_IF_CUDA(detail::select_backend(op, t, {x}), detail::cuda_unary(t, x, op, kind, param));
  const NodeId y = t.new_node(t.shape(x), op, {x});
  const int64_t n = t.value(x).numel();
  const T* xp = t.value(x).data;
  T* yp = t.value(y).data;
  map_unary(n, xp, yp, fwd);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, deriv](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T* gy = tp.grad_acc(self);
      const T* xv = tp.value(x).data;
      const T* yv = tp.value(self).data;
      map_unary_backward(n, gy, xv, yv, gx, deriv);
    });
  }
  return y;
}

}  // namespace

/// a + b (same shapes). Backward: dA += dY, dB += dY. Throws std::invalid_argument on a shape
/// mismatch.
template <class T>
NodeId add(Tape<T>& t, NodeId a, NodeId b) {
  const char* op = "add";
  require_same_shape(op, t, a, b);
  // Device dispatch point: a CUDA tape and tensors select kernels/elementwise.cu.
  LCM_IF_CUDA(detail::select_backend(op, t, {a, b}), detail::cuda_add(t, a, b));
  const NodeId y = t.new_node(t.shape(a), op, {a, b});
  const int64_t n = t.value(a).numel();
  const T *ap = t.value(a).data, *bp = t.value(b).data;
  T* yp = t.value(y).data;
  for_each_index(n, [=](int64_t i) { yp[i] = ap[i] + bp[i]; });
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      if (T* ga = tp.grad_acc(a)) for_each_index(n, [=](int64_t i) { ga[i] += gy[i]; });
      if (T* gb = tp.grad_acc(b)) for_each_index(n, [=](int64_t i) { gb[i] += gy[i]; });
    });
  }
  return y;
}

/// a ⊙ b (same shapes). Backward: dA += dY ⊙ b, dB += dY ⊙ a (a == b gives 2·a·dY).
template <class T>
NodeId mul(Tape<T>& t, NodeId a, NodeId b) {
  const char* op = "mul";
  require_same_shape(op, t, a, b);
  // Device dispatch point: a CUDA tape and tensors select kernels/elementwise.cu.
  LCM_IF_CUDA(detail::select_backend(op, t, {a, b}), detail::cuda_mul(t, a, b));
  const NodeId y = t.new_node(t.shape(a), op, {a, b});
  const int64_t n = t.value(a).numel();
  const T *ap = t.value(a).data, *bp = t.value(b).data;
  T* yp = t.value(y).data;
  for_each_index(n, [=](int64_t i) { yp[i] = ap[i] * bp[i]; });
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      const T *av = tp.value(a).data, *bv = tp.value(b).data;
      if (T* ga = tp.grad_acc(a)) for_each_index(n, [=](int64_t i) { ga[i] += gy[i] * bv[i]; });
      if (T* gb = tp.grad_acc(b)) for_each_index(n, [=](int64_t i) { gb[i] += gy[i] * av[i]; });
    });
  }
  return y;
}

/// s · a. Backward: dA += s · dY.
template <class T>
NodeId scale(Tape<T>& t, NodeId a, T s) {
  return unary(
      t, a, "scale", [s](T v) { return s * v; }, [s](T, T) { return s; }, detail::CudaUnary::Scale,
      s);
}

/// ELU (α = 1, docs/model-spec.md §5.2): y = x if x > 0 else exp(x) − 1; dy/dx = 1 if x > 0
/// else y + 1.
template <class T>
NodeId elu(Tape<T>& t, NodeId x) {
  return unary(
      t, x, "elu", [](T v) { return v > T(0) ? v : detail::expm1(v); },
      [](T v, T y) { return v > T(0) ? T(1) : y + T(1); }, detail::CudaUnary::Elu, T(0));
}

/// LeakyReLU (model-spec §5.2, slope 0.01): y = x if x ≥ 0 else slope·x; dy/dx = 1 or slope
/// (1 at x == 0, as PyTorch).
template <class T>
NodeId leaky_relu(Tape<T>& t, NodeId x, T slope) {
  return unary(
      t, x, "leaky_relu", [slope](T v) { return v >= T(0) ? v : slope * v; },
      [slope](T v, T) { return v >= T(0) ? T(1) : slope; }, detail::CudaUnary::LeakyRelu, slope);
}

/// σ(x) = 1 / (1 + exp(−x)); dy/dx = y (1 − y).
template <class T>
NodeId sigmoid(Tape<T>& t, NodeId x) {
  return unary(
      t, x, "sigmoid", [](T v) { return T(1) / (T(1) + std::exp(-v)); },
      [](T, T y) { return y * (T(1) - y); }, detail::CudaUnary::Sigmoid, T(0));
}

/// tanh(x); dy/dx = 1 − y².
template <class T>
NodeId tanh(Tape<T>& t, NodeId x) {
  return unary(
      t, x, "tanh", [](T v) { return std::tanh(v); }, [](T, T y) { return T(1) - y * y; },
      detail::CudaUnary::Tanh, T(0));
}

/// Inverted dropout (model-spec §5.2). In training mode with 0 < p: offset = rng.take(n) and
/// element i is kept iff counter_uniform(rng.seed(), offset, i) ≥ p (probability 1 − p), kept
/// elements scaled by 1/(1 − p) (p == 1 drops everything); the 0/1 mask is saved in tape scratch
/// and backward is dX += mask ⊙ dY / (1 − p). In eval mode or p == 0 it returns `x` itself (the
/// identity; no node, no draw taken). Throws std::invalid_argument unless 0 ≤ p ≤ 1.
template <class T>
NodeId dropout(Tape<T>& t, NodeId x, double p, Rng& rng) {
  const char* op = "dropout";
  if (!(p >= 0.0 && p <= 1.0))
    detail::shape_error(op, "probability p = " + std::to_string(p) + " outside [0, 1] for input " +
                                t.shape(x).str());
  // Device dispatch point: a CUDA tape and tensor select kernels/elementwise.cu (the kernel
  // draws the same counter_uniform(seed, offset, i) stream, hence the same mask).
  const detail::Backend backend = detail::select_backend(op, t, {x});
  if (!t.training() || p == 0.0) return x;
  LCM_IF_CUDA(backend, detail::cuda_dropout(t, x, p, rng));
  const int64_t n = t.value(x).numel();
  const uint64_t seed = rng.seed();
  const uint64_t offset = rng.take(uint64_t(n));
  const T keep_scale = p >= 1.0 ? T(0) : T(1.0 / (1.0 - p));
  const NodeId y = t.new_node(t.shape(x), op, {x});
  uint8_t* mask = t.template scratch<uint8_t>(n);
  dropout_mask_apply(n, t.value(x).data, t.value(y).data, mask, seed, offset, p, keep_scale);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, mask, keep_scale](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      dropout_backward_into(n, tp.grad_acc(self), mask, gx, keep_scale);
    });
  }
  return y;
}

#define LCM_INSTANTIATE_ELEMENTWISE(T)                \
  template NodeId add<T>(Tape<T>&, NodeId, NodeId);   \
  template NodeId mul<T>(Tape<T>&, NodeId, NodeId);   \
  template NodeId scale<T>(Tape<T>&, NodeId, T);      \
  template NodeId elu<T>(Tape<T>&, NodeId);           \
  template NodeId leaky_relu<T>(Tape<T>&, NodeId, T); \
  template NodeId sigmoid<T>(Tape<T>&, NodeId);       \
  template NodeId tanh<T>(Tape<T>&, NodeId);          \
  template NodeId dropout<T>(Tape<T>&, NodeId, double, Rng&);

LCM_INSTANTIATE_ELEMENTWISE(float)
LCM_INSTANTIATE_ELEMENTWISE(double)
#undef LCM_INSTANTIATE_ELEMENTWISE

}  // namespace lcm::ops
