// The element-wise ops (add, mul, scale, ELU, LeakyReLU, sigmoid, tanh, inverted dropout): one
// body per op (shape check, tape node, backward) over the family's backend functions below, which
// run the CPU loops or launch kernels/elementwise.cu. The formulas are
// engine/ops/elementwise_math.hpp and engine/rng.hpp's. CPU loops are simple and vectorisable and
// run under OpenMP for large tensors (element-wise, so results do not depend on the thread count).
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/elementwise_math.hpp"
#include "kernels/cuda_ops.hpp"

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
/// capturing lambda the 64-bit hash ran scalar, ~5% of a training step), with the keep rule of
/// engine/rng.hpp (dropout_keeps: the kernel's mask).
template <class T>
inline void dropout_mask_apply(int64_t n, const T* __restrict x, T* __restrict y,
                               uint8_t* __restrict mask, uint64_t seed, uint64_t offset, double p,
                               T keep_scale) {
  const uint64_t s = mix64(seed);
  const uint32_t threshold = dropout_threshold(p);
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t m = dropout_keeps(s, offset, uint64_t(i), threshold) ? 1 : 0;
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

// ---- backend functions: the CPU loops or the kernels of kernels/elementwise.cu ----

using detail::Backend;

/// y = f(x) of `kind`, n values. The CPU's ELU runs on detail::expm1 (detail::cpu_elu).
template <class T>
void unary_forward(Backend be, Unary kind, const T* x, T* y, int64_t n, T param) {
  LCM_ON_CUDA(be, cuda::unary_forward(kind, x, y, n, param));
  switch (kind) {
    case Unary::Scale:
      return map_unary(n, x, y, [param](T v) { return param * v; });
    case Unary::Elu:
      return map_unary(n, x, y, [](T v) { return detail::cpu_elu(v); });
    case Unary::LeakyRelu:
      return map_unary(n, x, y, [param](T v) { return math::leaky_relu(v, param); });
    case Unary::Sigmoid:
      return map_unary(n, x, y, [](T v) { return math::sigmoid(v); });
    case Unary::Tanh:
      return map_unary(n, x, y, [](T v) { return math::lib_tanh(v); });
    case Unary::Count:  // not a kind
      break;
  }
  throw std::logic_error("unary_forward: " + std::to_string(int(kind)) + " is not a Unary kind");
}
/// gx += gy ⊙ f'(x, y) of `kind`.
template <class T>
void unary_backward(Backend be, Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n,
                    T param) {
  LCM_ON_CUDA(be, cuda::unary_backward(kind, x, y, gy, gx, n, param));
  switch (kind) {
    case Unary::Scale:
      return map_unary_backward(n, gy, x, y, gx, [param](T, T) { return param; });
    case Unary::Elu:
      return map_unary_backward(n, gy, x, y, gx, [](T v, T w) { return math::elu_grad(v, w); });
    case Unary::LeakyRelu:
      return map_unary_backward(n, gy, x, y, gx,
                                [param](T v, T) { return math::leaky_relu_grad(v, param); });
    case Unary::Sigmoid:
      return map_unary_backward(n, gy, x, y, gx, [](T, T w) { return math::sigmoid_grad(w); });
    case Unary::Tanh:
      return map_unary_backward(n, gy, x, y, gx, [](T, T w) { return math::tanh_grad(w); });
    case Unary::Count:  // not a kind
      break;
  }
  throw std::logic_error("unary_backward: " + std::to_string(int(kind)) + " is not a Unary kind");
}
/// y = a + b.
template <class T>
void add_values(Backend be, const T* a, const T* b, T* y, int64_t n) {
  LCM_ON_CUDA(be, cuda::add(a, b, y, n));
  for_each_index(n, [=](int64_t i) { y[i] = a[i] + b[i]; });
}
/// y = a ⊙ b.
template <class T>
void mul_values(Backend be, const T* a, const T* b, T* y, int64_t n) {
  LCM_ON_CUDA(be, cuda::mul(a, b, y, n));
  for_each_index(n, [=](int64_t i) { y[i] = a[i] * b[i]; });
}
/// g += x ⊙ w.
template <class T>
void accumulate_product(Backend be, T* g, const T* x, const T* w, int64_t n) {
  LCM_ON_CUDA(be, cuda::accumulate_product(g, x, w, n));
  for_each_index(n, [=](int64_t i) { g[i] += x[i] * w[i]; });
}
/// Dropout's mask and output (the keep rule of engine/rng.hpp).
/// `offset_base`: device memory holding the offset's base (Rng::set_device_counter; CUDA only).
template <class T>
void dropout_forward(Backend be, const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed,
                     uint64_t offset, double p, T keep_scale, const uint64_t* offset_base) {
  LCM_ON_CUDA(be, cuda::dropout_forward(x, y, mask, n, seed, offset, p, keep_scale, offset_base));
  if (offset_base)
    throw std::logic_error(
        "dropout: a device counter base (Rng::set_device_counter) on a CPU tape");
  dropout_mask_apply(n, x, y, mask, seed, offset, p, keep_scale);
}
/// gx += mask ? gy·keep_scale : 0.
template <class T>
void dropout_backward(Backend be, const T* gy, const uint8_t* mask, T* gx, int64_t n,
                      T keep_scale) {
  LCM_ON_CUDA(be, cuda::dropout_backward(gy, mask, gx, n, keep_scale));
  dropout_backward_into(n, gy, mask, gx, keep_scale);
}

// ---- the ops ----

/// Shared body of the unary ops y = f(x) whose derivative is a function of (x, y):
/// backward dX += dY ⊙ f'(x, y) (engine/ops/elementwise_math.hpp).
template <class T>
NodeId unary(Tape<T>& t, NodeId x, const char* op, Unary kind, T param) {
  // Device dispatch point: a CUDA tape and tensor select kernels/elementwise.cu.
  const Backend be = detail::select_backend(op, t, {x});
  const NodeId y = t.new_node(t.shape(x), op, {x});
  const int64_t n = t.value(x).numel();
  unary_forward(be, kind, t.value(x).data, t.value(y).data, n, param);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, be, kind, param](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      unary_backward(be, kind, tp.value(x).data, tp.value(self).data, tp.grad_acc(self), gx, n,
                     param);
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
  const Backend be = detail::select_backend(op, t, {a, b});
  const NodeId y = t.new_node(t.shape(a), op, {a, b});
  const int64_t n = t.value(a).numel();
  add_values(be, t.value(a).data, t.value(b).data, t.value(y).data, n);
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n, be](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      if (T* ga = tp.grad_acc(a)) detail::accumulate(be, ga, gy, n);
      if (T* gb = tp.grad_acc(b)) detail::accumulate(be, gb, gy, n);
    });
  }
  return y;
}

/// a ⊙ b (same shapes). Backward: dA += dY ⊙ b, dB += dY ⊙ a (a == b gives 2·a·dY).
template <class T>
NodeId mul(Tape<T>& t, NodeId a, NodeId b) {
  const char* op = "mul";
  require_same_shape(op, t, a, b);
  const Backend be = detail::select_backend(op, t, {a, b});
  const NodeId y = t.new_node(t.shape(a), op, {a, b});
  const int64_t n = t.value(a).numel();
  mul_values(be, t.value(a).data, t.value(b).data, t.value(y).data, n);
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n, be](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      if (T* ga = tp.grad_acc(a)) accumulate_product(be, ga, gy, tp.value(b).data, n);
      if (T* gb = tp.grad_acc(b)) accumulate_product(be, gb, gy, tp.value(a).data, n);
    });
  }
  return y;
}

/// s · a. Backward: dA += s · dY.
template <class T>
NodeId scale(Tape<T>& t, NodeId a, T s) {
  return unary(t, a, "scale", Unary::Scale, s);
}

/// ELU (α = 1, docs/model-spec.md §5.2): y = x if x > 0 else exp(x) − 1; dy/dx = 1 if x > 0
/// else y + 1.
template <class T>
NodeId elu(Tape<T>& t, NodeId x) {
  return unary(t, x, "elu", Unary::Elu, T(0));
}

/// LeakyReLU (model-spec §5.2, slope 0.01): y = x if x ≥ 0 else slope·x; dy/dx = 1 or slope
/// (1 at x == 0, as PyTorch).
template <class T>
NodeId leaky_relu(Tape<T>& t, NodeId x, T slope) {
  return unary(t, x, "leaky_relu", Unary::LeakyRelu, slope);
}

/// σ(x) = 1 / (1 + exp(−x)); dy/dx = y (1 − y).
template <class T>
NodeId sigmoid(Tape<T>& t, NodeId x) {
  return unary(t, x, "sigmoid", Unary::Sigmoid, T(0));
}

/// tanh(x); dy/dx = 1 − y².
template <class T>
NodeId tanh(Tape<T>& t, NodeId x) {
  return unary(t, x, "tanh", Unary::Tanh, T(0));
}

/// Inverted dropout (model-spec §5.2). In training mode with 0 < p: offset = rng.take(n) and
/// element i is kept iff counter_uniform(rng.seed(), offset, i) ≥ p (probability 1 − p), kept
/// elements scaled by 1/(1 − p) (p == 1 drops everything); the 0/1 mask is saved in tape scratch
/// and backward is dX += mask ⊙ dY / (1 − p). In eval mode or p == 0 it returns `x` itself (the
/// identity; no node, no draw taken). Throws std::invalid_argument unless 0 ≤ p ≤ 1. Under
/// Rng::set_device_counter (CUDA only; std::logic_error on a CPU tape) the kernel adds the base
/// it reads from device memory when it runs to the offset's distance from the Rng's origin.
template <class T>
NodeId dropout(Tape<T>& t, NodeId x, double p, Rng& rng) {
  const char* op = "dropout";
  if (!(p >= 0.0 && p <= 1.0))
    detail::shape_error(op, "probability p = " + std::to_string(p) + " outside [0, 1] for input " +
                                t.shape(x).str());
  const Backend be = detail::select_backend(op, t, {x});
  if (!t.training() || p == 0.0) return x;
  const int64_t n = t.value(x).numel();
  const uint64_t seed = rng.seed();
  // under Rng::set_device_counter the kernel adds the device base to the offset from its origin
  const uint64_t* base = rng.device_counter();
  const uint64_t offset = rng.take(uint64_t(n)) - (base ? rng.device_origin() : 0);
  const T keep_scale = p >= 1.0 ? T(0) : T(1.0 / (1.0 - p));
  const NodeId y = t.new_node(t.shape(x), op, {x});
  uint8_t* mask = t.template device_scratch<uint8_t>(n);
  dropout_forward(be, t.value(x).data, t.value(y).data, mask, n, seed, offset, p, keep_scale, base);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, mask, keep_scale, be](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      dropout_backward(be, tp.grad_acc(self), mask, gx, n, keep_scale);
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
