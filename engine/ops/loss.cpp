// The reductions and losses (sum, mean, MSE, the MAPE of docs/model-spec.md §6, and the L1 loss
// of rank_loss.cpp): one body, detail::reduce, over the terms and gradients of
// engine/ops/loss_math.hpp, run by the CPU loops below or kernels/loss.cu. CPU reductions
// accumulate in double over fixed blocks summed in block order (detail::blocked_sum), so a loss is
// bit-identical for any thread count, run after run.
#include <cmath>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/loss_math.hpp"
#include "kernels/cuda_ops.hpp"

namespace lcm::ops {

namespace {

/// g[i] += f(i) for i < n (element-wise; OpenMP above detail::kParallelMin).
template <class T, class F>
void accumulate(T* g, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) g[i] += f(i);
}

using detail::Backend;

// ---- backend functions: the CPU loops or the kernels of kernels/loss.cu ----

/// Σ_i loss_term(kind, a_i, b_i) in double (b may be nullptr for Sum), then
/// y[0] = T(weight·factor·Σ/den), left to right.
template <class T>
void reduce_forward(Backend be, Tape<T>& t, LossKind kind, const T* a, const T* b, int64_t n,
                    double weight, double factor, double den, T* y) {
  LCM_ON_CUDA(be,
              cuda::reduce_loss(kind, a, b, n, weight * factor / den, y,
                                t.template device_scratch<double>(cuda::reduce_scratch_size(n))));
  const double s =
      b ? detail::blocked_sum(n, [=](int64_t i) { return math::loss_term(kind, a[i], b[i]); })
        : detail::blocked_sum(n, [=](int64_t i) { return math::loss_term(kind, a[i], T(0)); });
  y[0] = T(weight * factor * s / den);
}

/// ga += loss_grad_pred, gb += loss_grad_target with c = T(dL·factor·weight/den), left to right
/// (ga, gb may be nullptr).
template <class T>
void reduce_backward(Backend be, LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb,
                     int64_t n, double weight, double factor, double den) {
  LCM_ON_CUDA(be, cuda::loss_backward(kind, a, b, gy, ga, gb, n, factor * weight / den));
  const T c = T(double(gy[0]) * factor * weight / den);
  if (ga)
    accumulate(ga, n,
               [=](int64_t i) { return math::loss_grad_pred(kind, a[i], b ? b[i] : T(0), c); });
  if (gb) accumulate(gb, n, [=](int64_t i) { return math::loss_grad_target(kind, a[i], b[i], c); });
}

}  // namespace

namespace detail {

/// The one body of the reductions: y = T(weight·factor·Σ_i loss_term(kind, a_i, b_i) / den) →
/// scalar [], b = -1 for none (Sum); backward with c = dL·factor·weight/den
/// (math::loss_grad_pred / _target). The scale is split in weight and factor so that each loss
/// keeps the association of its formula (MAPE: weight·100·Σ/n forward, dL·100·weight/n back).
template <class T>
NodeId reduce(Tape<T>& t, const char* op, LossKind kind, NodeId a, NodeId b, double weight,
              double factor, double den) {
  // Device dispatch point: a CUDA tape and tensors select kernels/loss.cu.
  const Backend be = b >= 0 ? select_backend(op, t, {a, b}) : select_backend(op, t, {a});
  const int64_t n = t.value(a).numel();
  const NodeId y = b >= 0 ? t.new_node(Shape{}, op, {a, b}) : t.new_node(Shape{}, op, {a});
  reduce_forward(be, t, kind, t.value(a).data, b >= 0 ? t.value(b).data : nullptr, n, weight,
                 factor, den, t.value(y).data);
  if (t.requires_grad(y)) {
    t.set_backward(y, [be, kind, a, b, n, weight, factor, den](Tape<T>& tp, NodeId self) {
      T* ga = tp.grad_acc(a);
      T* gb = b >= 0 ? tp.grad_acc(b) : nullptr;
      if (!ga && !gb) return;
      reduce_backward(be, kind, tp.value(a).data, b >= 0 ? tp.value(b).data : nullptr,
                      tp.grad_acc(self), ga, gb, n, weight, factor, den);
    });
  }
  return y;
}

}  // namespace detail

/// Σ of all elements of x (any shape) → scalar []. Backward: dX += dY (broadcast).
template <class T>
NodeId sum(Tape<T>& t, NodeId x) {
  return detail::reduce(t, "sum", LossKind::Sum, x, -1, 1.0, 1.0, 1.0);
}

/// Mean of all elements of x → scalar []. Backward: dX += dY / n. Throws std::invalid_argument
/// for an empty x.
template <class T>
NodeId mean(Tape<T>& t, NodeId x) {
  const int64_t n = t.value(x).numel();
  if (n == 0) detail::shape_error("mean", "mean of an empty tensor " + t.shape(x).str());
  return detail::reduce(t, "mean", LossKind::Sum, x, -1, 1.0, 1.0, double(n));
}

/// mean((pred − target)²) → scalar []. Backward: dPred += 2·(pred − target)/n · dY, dTarget −=
/// the same. Throws std::invalid_argument for different or empty shapes.
template <class T>
NodeId mse(Tape<T>& t, NodeId pred, NodeId target) {
  const char* op = "mse";
  const int64_t n = detail::loss_numel(op, t, pred, target);
  const NodeId y = detail::reduce(t, op, LossKind::SquaredError, pred, target, 1.0, 1.0, double(n));
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
  const int64_t n = detail::loss_numel(op, t, pred, target);
  return detail::reduce(t, op, LossKind::Mape, pred, target, double(weight), 100.0, double(n));
}

template NodeId detail::reduce<float>(Tape<float>&, const char*, LossKind, NodeId, NodeId, double,
                                      double, double);
template NodeId detail::reduce<double>(Tape<double>&, const char*, LossKind, NodeId, NodeId, double,
                                       double, double);

#define LCM_INSTANTIATE_LOSS(T)                     \
  template NodeId sum<T>(Tape<T>&, NodeId);         \
  template NodeId mean<T>(Tape<T>&, NodeId);        \
  template NodeId mse<T>(Tape<T>&, NodeId, NodeId); \
  template NodeId mape<T>(Tape<T>&, NodeId, NodeId, T);

LCM_INSTANTIATE_LOSS(float)
LCM_INSTANTIATE_LOSS(double)
#undef LCM_INSTANTIATE_LOSS

}  // namespace lcm::ops
