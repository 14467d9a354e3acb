// The ranking losses (docs/accuracy.md): the L1 loss (used on log speedups) and the
// pairwise logistic ranking loss over the schedules of one program, forward and backward side by
// side on the CPU; CUDA tensors dispatch to kernels/loss.cu (L1) and kernels/rank_loss.cu (pairs
// built here on the host). Sums accumulate in double in a fixed order (deterministic).
#include <cmath>
#include <map>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"

namespace lcm::ops {

namespace {

/// log(1 + e^z) without overflow.
inline double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}
/// 1 / (1 + e^{−z}).
inline double sigmoid_d(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

}  // namespace

/// L = weight · mean_i |pred_i − target_i| → scalar []. Backward (sign 0 at 0, as PyTorch):
/// dpred_i += dL · weight · sign(pred_i − target_i) / n, dtarget_i −= the same. Throws
/// std::invalid_argument for different or empty shapes.
template <class T>
NodeId l1(Tape<T>& t, NodeId pred, NodeId target, T weight) {
  const char* op = "l1";
  if (t.shape(pred) != t.shape(target))
    detail::shape_error(op, "prediction " + t.shape(pred).str() + " and target " +
                                t.shape(target).str() + " differ");
  const int64_t n = t.value(pred).numel();
  if (n == 0) detail::shape_error(op, "empty prediction " + t.shape(pred).str());
  // Device dispatch point: a CUDA tape and tensors select kernels/loss.cu (LossKind::AbsError).
  LCM_IF_CUDA(detail::select_backend(op, t, {pred, target}),
              detail::cuda_reduce(t, op, detail::CudaLoss::AbsError, pred, target,
                                  double(weight) / double(n), double(weight) / double(n)));
  const T *pp = t.value(pred).data, *tp_ = t.value(target).data;
  const NodeId y = t.new_node(Shape{}, op, {pred, target});
  const double s = detail::blocked_sum(
      n, [pp, tp_](int64_t i) { return std::fabs(double(pp[i]) - double(tp_[i])); });
  t.value(y).data[0] = T(double(weight) * s / double(n));
  if (t.requires_grad(y)) {
    t.set_backward(y, [pred, target, n, weight](Tape<T>& tp, NodeId self) {
      const double c = double(tp.grad_acc(self)[0]) * double(weight) / double(n);
      const T *pv = tp.value(pred).data, *tv = tp.value(target).data;
      auto sgn = [](double v) { return double((v > 0) - (v < 0)); };
      if (T* gp = tp.grad_acc(pred))
        for (int64_t i = 0; i < n; ++i) gp[i] += T(c * sgn(double(pv[i]) - double(tv[i])));
      if (T* gt = tp.grad_acc(target))
        for (int64_t i = 0; i < n; ++i) gt[i] -= T(c * sgn(double(pv[i]) - double(tv[i])));
    });
  }
  return y;
}

/// Pairwise logistic ranking loss (RankNet): over the pairs P = {(i, j) : group_i == group_j,
/// target_i − target_j > min_gap}, L = weight · (1/|P|) · Σ_{(i,j)∈P} log(1 + exp(−(s_i − s_j))).
/// L = 0 (no gradient) when P is empty. score s and target: [B]; group: [B] ids. Backward to the
/// score only (target and group are constants): with σ_ij = sigmoid(−(s_i − s_j)),
/// ds_i −= dL · weight · σ_ij / |P|, ds_j += dL · weight · σ_ij / |P|.
template <class T>
NodeId pairwise_logistic(Tape<T>& t, NodeId score, const std::vector<T>& target,
                         const std::vector<int32_t>& group, T weight, T min_gap) {
  const char* op = "pairwise_logistic";
  const Shape s = t.shape(score);
  if (s.rank != 1) detail::shape_error(op, "score must be [B], got " + s.str());
  const int64_t n = s.numel();
  if (int64_t(target.size()) != n || int64_t(group.size()) != n)
    detail::shape_error(op, "score " + s.str() + ", target [" + std::to_string(target.size()) +
                                "] and group [" + std::to_string(group.size()) + "] differ");
  const detail::Backend backend = detail::select_backend(op, t, {score});
  // Members of each group in index order (deterministic pair order).
  std::map<int32_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < n; ++i) members[group[size_t(i)]].push_back(i);
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (better i, worse j)
  for (auto& [g, idx] : members)
    for (size_t a = 0; a < idx.size(); ++a)
      for (size_t b = 0; b < idx.size(); ++b) {
        const int64_t i = idx[a], j = idx[b];
        if (double(target[size_t(i)]) - double(target[size_t(j)]) > double(min_gap))
          pairs.emplace_back(i, j);
      }
  // Device dispatch point: a CUDA tape and score select kernels/rank_loss.cu over the same pairs.
  LCM_IF_CUDA(backend, detail::cuda_pairwise_logistic(t, score, pairs, weight));
  const T* sv = t.value(score).data;
  double total = 0;
  for (auto& [i, j] : pairs) total += softplus(-(double(sv[i]) - double(sv[j])));
  const double np = double(pairs.size());
  const NodeId y = t.new_node(Shape{}, op, {score});
  t.value(y).data[0] = pairs.empty() ? T(0) : T(double(weight) * total / np);
  if (t.requires_grad(y) && !pairs.empty()) {
    t.set_backward(y, [score, pairs = std::move(pairs), weight, np](Tape<T>& tp, NodeId self) {
      T* gs = tp.grad_acc(score);
      if (!gs) return;
      const double c = double(tp.grad_acc(self)[0]) * double(weight) / np;
      const T* v = tp.value(score).data;
      for (auto& [i, j] : pairs) {
        const double g = c * sigmoid_d(-(double(v[i]) - double(v[j])));
        gs[i] -= T(g);
        gs[j] += T(g);
      }
    });
  }
  return y;
}

#define LCM_INSTANTIATE_RANK_LOSS(T)                                            \
  template NodeId l1<T>(Tape<T>&, NodeId, NodeId, T);                           \
  template NodeId pairwise_logistic<T>(Tape<T>&, NodeId, const std::vector<T>&, \
                                       const std::vector<int32_t>&, T, T);

LCM_INSTANTIATE_RANK_LOSS(float)
LCM_INSTANTIATE_RANK_LOSS(double)
#undef LCM_INSTANTIATE_RANK_LOSS

}  // namespace lcm::ops
