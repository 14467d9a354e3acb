// The ranking losses (docs/accuracy.md): the L1 loss (used on log speedups; the reduction body of
// engine/ops/loss.cpp) and the pairwise logistic ranking loss over the schedules of one program,
// one body over the family's backend functions below (the CPU loops or kernels/rank_loss.cu, with
// the pairs built here on the host); the formulas are engine/ops/loss_math.hpp's. Sums accumulate
// in double in a fixed order (deterministic).
#include <cmath>
#include <map>
#include <memory>

#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/loss_math.hpp"
#include "kernels/cuda_ops.hpp"

namespace lcm::ops {

namespace {

using detail::Backend;
using Pairs = std::vector<std::pair<int64_t, int64_t>>;

// ---- backend functions: the CPU loops or the kernels of kernels/rank_loss.cu ----

/// The pair table on the device (CUDA; nullptr on the CPU, which walks `pairs` itself) and, for
/// the backward without atomics, each score's incidence list (CSR: p + 1 where the score is the
/// worse j, −(p + 1) where it is the better i, in increasing p).
struct DevicePairs {
  const int64_t* pairs = nullptr;
  const int64_t* starts = nullptr;
  const int64_t* inc = nullptr;
};
template <class T>
DevicePairs device_pairs(Backend be, Tape<T>& t, const Pairs& pairs, int64_t n, bool backward) {
  DevicePairs d;
  if (be != Backend::Cuda) return d;
  const int64_t np = int64_t(pairs.size());
  std::vector<int64_t> flat(size_t(2 * np));
  for (int64_t p = 0; p < np; ++p) {
    flat[size_t(2 * p)] = pairs[size_t(p)].first;
    flat[size_t(2 * p + 1)] = pairs[size_t(p)].second;
  }
  int64_t* d_pairs = t.template device_scratch<int64_t>(2 * np);
  device_upload_bytes(d_pairs, flat.data(), sizeof(int64_t) * flat.size());
  d.pairs = d_pairs;
  if (!backward) return d;
  std::vector<int64_t> starts(size_t(n + 1), 0), inc(size_t(2 * np));
  for (const auto& pr : pairs) {
    ++starts[size_t(pr.first + 1)];
    ++starts[size_t(pr.second + 1)];
  }
  for (int64_t k = 0; k < n; ++k) starts[size_t(k + 1)] += starts[size_t(k)];
  std::vector<int64_t> fill(starts.begin(), starts.end() - 1);
  for (int64_t p = 0; p < np; ++p) {
    inc[size_t(fill[size_t(pairs[size_t(p)].first)]++)] = -(p + 1);
    inc[size_t(fill[size_t(pairs[size_t(p)].second)]++)] = p + 1;
  }
  int64_t* d_starts = t.template device_scratch<int64_t>(n + 1);
  int64_t* d_inc = t.template device_scratch<int64_t>(2 * np);
  device_upload_bytes(d_starts, starts.data(), sizeof(int64_t) * starts.size());
  device_upload_bytes(d_inc, inc.data(), sizeof(int64_t) * inc.size());
  d.starts = d_starts;
  d.inc = d_inc;
  return d;
}

/// y[0] = T(weight · Σ_p pair_loss(s_i, s_j) / |P|) over the pairs, in pair order.
template <class T>
void pairwise_forward(Backend be, Tape<T>& t, const T* s, const Pairs& pairs, const DevicePairs& d,
                      double weight, T* y) {
  const int64_t np = int64_t(pairs.size());
  LCM_ON_CUDA(be, cuda::pairwise_logistic_forward(
                      s, d.pairs, np, weight / double(np), y,
                      t.template device_scratch<double>(cuda::reduce_scratch_size(np))));
  double total = 0;
  for (auto& [i, j] : pairs) total += math::pair_loss(double(s[i]), double(s[j]));
  y[0] = T(weight * total / double(np));
}

/// gs_i −= c·σ, gs_j += c·σ per pair (σ = pair_loss_grad_worse, c = dL·weight/|P|).
template <class T>
void pairwise_backward(Backend be, const T* s, const Pairs& pairs, const DevicePairs& d,
                       const T* gy, T* gs, int64_t n, double weight) {
  const double np = double(pairs.size());
  LCM_ON_CUDA(
      be, cuda::pairwise_logistic_backward(s, d.pairs, d.starts, d.inc, gy, gs, n, weight / np));
  const double c = double(gy[0]) * weight / np;
  for (auto& [i, j] : pairs) {
    const double g = c * math::pair_loss_grad_worse(double(s[i]), double(s[j]));
    gs[i] -= T(g);
    gs[j] += T(g);
  }
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
  return detail::reduce(t, op, LossKind::AbsError, pred, target, double(weight), 1.0, double(n));
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
  // Device dispatch point: a CUDA tape and score select kernels/rank_loss.cu over the same pairs.
  const Backend be = detail::select_backend(op, t, {score});
  // Members of each group in index order (deterministic pair order).
  std::map<int32_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < n; ++i) members[group[size_t(i)]].push_back(i);
  auto pairs = std::make_shared<Pairs>();  // (better i, worse j)
  for (auto& [g, idx] : members)
    for (size_t a = 0; a < idx.size(); ++a)
      for (size_t b = 0; b < idx.size(); ++b) {
        const int64_t i = idx[a], j = idx[b];
        if (double(target[size_t(i)]) - double(target[size_t(j)]) > double(min_gap))
          pairs->emplace_back(i, j);
      }
  const NodeId y = t.new_node(Shape{}, op, {score});
  if (pairs->empty()) {  // L = 0, no gradient
    if (be == Backend::Cuda)
      device_fill(t.value(y).data, int64_t(1), T(0));
    else
      t.value(y).data[0] = T(0);
    return y;
  }
  const double w = double(weight);
  const DevicePairs d = device_pairs(be, t, *pairs, n, t.requires_grad(y));
  pairwise_forward(be, t, t.value(score).data, *pairs, d, w, t.value(y).data);
  if (t.requires_grad(y)) {
    t.set_backward(y, [score, pairs, d, n, w, be](Tape<T>& tp, NodeId self) {
      if (T* gs = tp.grad_acc(score))
        pairwise_backward(be, tp.value(score).data, *pairs, d, tp.grad_acc(self), gs, n, w);
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
