// CPU implementations of the reductions and losses (sum, mean, MSE, the MAPE of
// docs/model-spec.md §6), forward and backward side by side. Reductions accumulate in double over
// fixed blocks summed in block order (detail::blocked_sum), so a loss is bit-identical for any
// thread count, run after run.
#include <cmath>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"

namespace lcm::ops {

namespace {

/// g[i] += f(i) for i < n (element-wise; OpenMP above detail::kParallelMin).
template <class T, class F>
void accumulate(T* g, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) g[i] += f(i);
}

template <class T>
void require_same_shape(const char* op, const Tape<T>& t, NodeId a, NodeId b) {
  if (t.shape(a) != t.shape(b))
    detail::shape_error(
        op, "prediction " + t.shape(a).str() + " and target " + t.shape(b).str() + " differ");
}

/// PyTorch's sign: −1, 0 or +1 (so the gradient of |·| at 0 is 0).
template <class T>
inline T sign_of(T v) {
  return T((v > T(0)) - (v < T(0)));
}

}  // namespace

/// Σ of all elements of x (any shape) → scalar []. Backward: dX += dY (broadcast).
template <class T>
NodeId sum(Tape<T>& t, NodeId x) {
  const char* op = "sum";
  // Device dispatch point: a CUDA tape and tensor select kernels/loss.cu.
  LCM_IF_CUDA(detail::select_backend(op, t, {x}),
              detail::cuda_reduce(t, op, detail::CudaLoss::Sum, x, -1, 1.0, 1.0));
  const int64_t n = t.value(x).numel();
  const T* xp = t.value(x).data;
  const NodeId y = t.new_node(Shape{}, op, {x});
  t.value(y).data[0] = T(detail::blocked_sum(n, [xp](int64_t i) { return xp[i]; }));
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T g = tp.grad_acc(self)[0];
      accumulate(gx, n, [g](int64_t) { return g; });
    });
  }
  return y;
}

/// Mean of all elements of x → scalar []. Backward: dX += dY / n. Throws std::invalid_argument
/// for an empty x.
template <class T>
NodeId mean(Tape<T>& t, NodeId x) {
  const char* op = "mean";
  const int64_t n = t.value(x).numel();
  if (n == 0) detail::shape_error(op, "mean of an empty tensor " + t.shape(x).str());
  // Device dispatch point: a CUDA tape and tensor select kernels/loss.cu.
  LCM_IF_CUDA(
      detail::select_backend(op, t, {x}),
      detail::cuda_reduce(t, op, detail::CudaLoss::Sum, x, -1, 1.0 / double(n), 1.0 / double(n)));
  const T* xp = t.value(x).data;
  const NodeId y = t.new_node(Shape{}, op, {x});
  t.value(y).data[0] = T(detail::blocked_sum(n, [xp](int64_t i) { return xp[i]; }) / double(n));
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T g = T(double(tp.grad_acc(self)[0]) / double(n));
      accumulate(gx, n, [g](int64_t) { return g; });
    });
  }
  return y;
}

/// mean((pred − target)²) → scalar []. Backward: dPred += 2·(pred − target)/n · dY, dTarget −=
/// the same. Throws std::invalid_argument for different or empty shapes.
template <class T>
NodeId mse(Tape<T>& t, NodeId pred, NodeId target) {
  const char* op = "mse";
  require_same_shape(op, t, pred, target);
  const int64_t n = t.value(pred).numel();
  if (n == 0) detail::shape_error(op, "empty prediction " + t.shape(pred).str());
  // Device dispatch point: a CUDA tape and tensors select kernels/loss.cu.
  LCM_IF_CUDA(detail::select_backend(op, t, {pred, target}),
              detail::cuda_reduce(t, op, detail::CudaLoss::SquaredError, pred, target,
                                  1.0 / double(n), 2.0 / double(n)));
  const T *pp = t.value(pred).data, *tp_ = t.value(target).data;
  const NodeId y = t.new_node(Shape{}, op, {pred, target});
  t.value(y).data[0] = T(detail::blocked_sum(n,
                                             [pp, tp_](int64_t i) {
                                               const double d = double(pp[i]) - double(tp_[i]);
                                               return d * d;
                                             }) /
                         double(n));
  if (t.requires_grad(y)) {
    t.set_backward(y, [pred, target, n](Tape<T>& tp, NodeId self) {
      const T c = T(2.0 * double(tp.grad_acc(self)[0]) / double(n));
      const T *pv = tp.value(pred).data, *tv = tp.value(target).data;
      if (T* gp = tp.grad_acc(pred))
        accumulate(gp, n, [&](int64_t i) { return c * (pv[i] - tv[i]); });
      if (T* gt = tp.grad_acc(target))
        accumulate(gt, n, [&](int64_t i) { return -c * (pv[i] - tv[i]); });
    });
  }
  return y;
}

/// MAPE of model-spec §6: L = weight · 100 · mean_i |y_i − ŷ_i| / (y_i + 1e-5), pred ŷ and
/// target y of the same shape ([B] in the model). weight = batch_len / batch_size (Q10), 1 for
/// the plain mean. Backward (sign as PyTorch's, 0 at 0):
///   dŷ_i += dL · c · sign(ŷ_i − y_i) / (y_i + 1e-5),                         c = 100·weight/n
///   dy_i += dL · c · (sign(y_i − ŷ_i) / (y_i + 1e-5) − |y_i − ŷ_i| / (y_i + 1e-5)²).
/// Throws std::invalid_argument for different or empty shapes.
template <class T>
NodeId mape(Tape<T>& t, NodeId pred, NodeId target, T weight) {
  const char* op = "mape";
  require_same_shape(op, t, pred, target);
  const int64_t n = t.value(pred).numel();
  if (n == 0) detail::shape_error(op, "empty prediction " + t.shape(pred).str());
  // Device dispatch point: a CUDA tape and tensors select kernels/loss.cu.
  LCM_IF_CUDA(
      detail::select_backend(op, t, {pred, target}),
      detail::cuda_reduce(t, op, detail::CudaLoss::Mape, pred, target,
                          double(weight) * 100.0 / double(n), 100.0 * double(weight) / double(n)));
  const T *pp = t.value(pred).data, *tp_ = t.value(target).data;
  const T eps = T(1e-5);
  const NodeId y = t.new_node(Shape{}, op, {pred, target});
  const double s = detail::blocked_sum(n, [pp, tp_, eps](int64_t i) {
    // Each term in T (as the reference computes it), accumulated in double.
    return std::abs(tp_[i] - pp[i]) / (tp_[i] + eps);
  });
  t.value(y).data[0] = T(double(weight) * 100.0 * s / double(n));
  if (t.requires_grad(y)) {
    t.set_backward(y, [pred, target, n, weight, eps](Tape<T>& tp, NodeId self) {
      const T c = T(double(tp.grad_acc(self)[0]) * 100.0 * double(weight) / double(n));
      const T *pv = tp.value(pred).data, *tv = tp.value(target).data;
      if (T* gp = tp.grad_acc(pred))
        accumulate(gp, n, [&](int64_t i) { return c * sign_of(pv[i] - tv[i]) / (tv[i] + eps); });
      if (T* gt = tp.grad_acc(target))
        accumulate(gt, n, [&](int64_t i) {
          const T den = tv[i] + eps, diff = tv[i] - pv[i];
          return c * (sign_of(diff) / den - std::abs(diff) / (den * den));
        });
    });
  }
  return y;
}

#define LCM_INSTANTIATE_LOSS(T)                     \
  template NodeId sum<T>(Tape<T>&, NodeId);         \
  template NodeId mean<T>(Tape<T>&, NodeId);        \
  template NodeId mse<T>(Tape<T>&, NodeId, NodeId); \
  template NodeId mape<T>(Tape<T>&, NodeId, NodeId, T);

LCM_INSTANTIATE_LOSS(float)
LCM_INSTANTIATE_LOSS(double)
#undef LCM_INSTANTIATE_LOSS

}  // namespace lcm::ops
