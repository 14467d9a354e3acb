// The ranking losses (docs/accuracy.md): the L1 and Huber losses (used on log speedups; the
// reduction body of engine/ops/loss.cpp), the pairwise logistic ranking loss over the schedules
// of one program and its |ΔnDCG|-weighted LambdaRank form, and the listwise ListNet loss, one body
// each over the family's backend functions below (the CPU loops or kernels/rank_loss.cu, with the
// pairs and groups built here on the host); the formulas are engine/ops/loss_math.hpp's. Sums
// accumulate in double in a fixed order (deterministic).
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  const double* w = nullptr;  // pair weights (LambdaRank); nullptr = 1
};
template <class T>
DevicePairs device_pairs(Backend be, Tape<T>& t, const Pairs& pairs, int64_t n, bool backward,
                         const std::vector<double>* weights = nullptr) {
  DevicePairs d;
  if (be != Backend::Cuda) return d;
  const int64_t np = int64_t(pairs.size());
  if (weights) {
    d.w = detail::upload_scratch(t, *weights, np);
  }
  std::vector<int64_t> flat(size_t(2 * np));
  for (int64_t p = 0; p < np; ++p) {
    flat[size_t(2 * p)] = pairs[size_t(p)].first;
    flat[size_t(2 * p + 1)] = pairs[size_t(p)].second;
  }
  d.pairs = detail::upload_scratch(t, flat, 2 * np);
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
  d.starts = detail::upload_scratch(t, starts, n + 1);
  d.inc = detail::upload_scratch(t, inc, 2 * np);
  return d;
}

/// y[0] = T(weight · Σ_p w_p · pair_loss(s_i, s_j) / |P|) over the pairs, in pair order (w: the
/// pair weights, nullptr = 1).
template <class T>
void pairwise_forward(Backend be, Tape<T>& t, const T* s, const Pairs& pairs, const DevicePairs& d,
                      double weight, T* y, const std::vector<double>* w) {
  const int64_t np = int64_t(pairs.size());
  LCM_ON_CUDA(be, cuda::pairwise_logistic_forward(
                      s, d.pairs, d.w, np, weight / double(np), y,
                      t.template device_scratch<double>(cuda::reduce_scratch_size(np))));
  double total = 0;
  for (int64_t p = 0; p < np; ++p) {
    const auto& [i, j] = pairs[size_t(p)];
    const double l = math::pair_loss(double(s[i]), double(s[j]));
    total += w ? (*w)[size_t(p)] * l : l;
  }
  y[0] = T(weight * total / double(np));
}

/// gs_i −= c·w_p·σ, gs_j += c·w_p·σ per pair (σ = pair_loss_grad_worse, c = dL·weight/|P|).
template <class T>
void pairwise_backward(Backend be, const T* s, const Pairs& pairs, const DevicePairs& d,
                       const T* gy, T* gs, int64_t n, double weight, const std::vector<double>* w) {
  const double np = double(pairs.size());
  LCM_ON_CUDA(be, cuda::pairwise_logistic_backward(s, d.pairs, d.w, d.starts, d.inc, gy, gs, n,
                                                   weight / np));
  const double c = double(gy[0]) * weight / np;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto& [i, j] = pairs[p];
    double g = c * math::pair_loss_grad_worse(double(s[i]), double(s[j]));
    if (w) g *= (*w)[p];
    gs[i] -= T(g);
    gs[j] += T(g);
  }
}

/// The groups of a listwise loss as CSR tables: the members of group g are members[starts[g] ..
/// starts[g+1]) (indices into the scores, increasing), p their target probabilities, in the same
/// order; and their device copies (CUDA; nullptr on the CPU).
struct Groups {
  std::vector<int64_t> members, starts{0};
  std::vector<double> p;
  const int64_t* d_members = nullptr;
  const int64_t* d_starts = nullptr;
  const double* d_p = nullptr;
  int64_t count() const { return int64_t(starts.size()) - 1; }
};

/// y[0] = T(weight · Σ_g listnet_group_term(g) / G), groups in order.
template <class T>
void listnet_fwd(Backend be, Tape<T>& t, const T* s, const Groups& g, double weight, T* y) {
  const int64_t G = g.count();
  LCM_ON_CUDA(be,
              cuda::listnet_forward(s, g.d_p, g.d_members, g.d_starts, G, weight / double(G), y,
                                    t.template device_scratch<double>(std::max<int64_t>(1, G))));
  double total = 0;
  for (int64_t k = 0; k < G; ++k)
    total += math::listnet_group_term(s, g.p.data(), g.members.data(), g.starts[size_t(k)],
                                      g.starts[size_t(k + 1)]);
  y[0] = T(weight * total / double(G));
}

/// gs_i += c·(softmax(s)_i − p_i) within each group, c = dL·weight/G.
template <class T>
void listnet_bwd(Backend be, const T* s, const Groups& g, const T* gy, T* gs, double weight) {
  const int64_t G = g.count();
  LCM_ON_CUDA(
      be, cuda::listnet_backward(s, g.d_p, g.d_members, g.d_starts, G, gy, gs, weight / double(G)));
  const double c = double(gy[0]) * weight / double(G);
  for (int64_t k = 0; k < G; ++k) {
    const int64_t lo = g.starts[size_t(k)], hi = g.starts[size_t(k + 1)];
    const double lse = math::group_logsumexp(s, g.members.data(), lo, hi);
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t i = g.members[size_t(q)];
      gs[i] += T(c * (std::exp(double(s[i]) - lse) - g.p[size_t(q)]));
    }
  }
}

/// Checks the shapes of a ranking loss: score [B], and every per-score list of size B.
template <class T>
int64_t check_rank_inputs(const char* op, const Tape<T>& t, NodeId score,
                          std::initializer_list<std::pair<const char*, size_t>> lists) {
  const Shape s = t.shape(score);
  if (s.rank != 1) detail::shape_error(op, "score must be [B], got " + s.str());
  const int64_t n = s.numel();
  for (const auto& [name, size] : lists)
    if (int64_t(size) != n)
      detail::shape_error(
          op, "score " + s.str() + " and " + name + " [" + std::to_string(size) + "] differ");
  return n;
}

/// The members of each group in index order (groups in increasing id: a deterministic order).
std::map<int32_t, std::vector<int64_t>> members_of(const std::vector<int32_t>& group) {
  std::map<int32_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < int64_t(group.size()); ++i) members[group[size_t(i)]].push_back(i);
  return members;
}

/// The pairs (better i, worse j) of the same group with target_i − target_j > min_gap, groups in
/// increasing id, then i, then j in index order.
template <class T>
Pairs pairs_of(const std::vector<T>& target, const std::vector<int32_t>& group, T min_gap) {
  Pairs pairs;
  for (auto& [g, idx] : members_of(group))
    for (size_t a = 0; a < idx.size(); ++a)
      for (size_t b = 0; b < idx.size(); ++b) {
        const int64_t i = idx[a], j = idx[b];
        if (double(target[size_t(i)]) - double(target[size_t(j)]) > double(min_gap))
          pairs.emplace_back(i, j);
      }
  return pairs;
}

/// A scalar 0 into y (no pair or no group: L = 0, no gradient).
template <class T>
void write_zero(Backend be, Tape<T>& t, NodeId y) {
  if (be == Backend::Cuda)
    device_fill(t.value(y).data, int64_t(1), T(0));
  else
    t.value(y).data[0] = T(0);
}

/// The shared body of pairwise_logistic and lambdarank over `pairs` with optional pair weights.
template <class T>
NodeId pairwise_body(Tape<T>& t, const char* op, Backend be, NodeId score, int64_t n,
                     std::shared_ptr<Pairs> pairs, std::shared_ptr<std::vector<double>> w,
                     double weight) {
  const NodeId y = t.new_node(Shape{}, op, {score});
  if (pairs->empty()) {
    write_zero(be, t, y);
    return y;
  }
  const DevicePairs d = device_pairs(be, t, *pairs, n, t.requires_grad(y), w.get());
  pairwise_forward(be, t, t.value(score).data, *pairs, d, weight, t.value(y).data, w.get());
  if (t.requires_grad(y)) {
    t.set_backward(y, [score, pairs, w, d, n, weight, be](Tape<T>& tp, NodeId self) {
      if (T* gs = tp.grad_acc(score))
        pairwise_backward(be, tp.value(score).data, *pairs, d, tp.grad_acc(self), gs, n, weight,
                          w.get());
    });
  }
  return y;
}

}  // namespace

/// L = weight · mean_i |pred_i − target_i| → scalar []. Backward (sign 0 at 0, as PyTorch):
/// dpred_i += dL · weight · sign(pred_i − target_i) / n, dtarget_i −= the same. Throws
/// std::invalid_argument for different or empty shapes.
template <class T>
NodeId l1(Tape<T>& t, NodeId pred, NodeId target, T weight) {
  const char* op = "l1";
  const int64_t n = detail::loss_numel(op, t, pred, target);
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
  const int64_t n =
      check_rank_inputs(op, t, score, {{"target", target.size()}, {"group", group.size()}});
  // Device dispatch point: a CUDA tape and score select kernels/rank_loss.cu over the same pairs.
  const Backend be = detail::select_backend(op, t, {score});
  auto pairs = std::make_shared<Pairs>(pairs_of(target, group, min_gap));
  return pairwise_body(t, op, be, score, n, pairs, nullptr, double(weight));
}

// (documented in engine/ops.hpp)
std::vector<double> lambdarank_weights(const std::vector<double>& score,
                                       const std::vector<double>& gain,
                                       const std::vector<int32_t>& group,
                                       const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  const size_t n = score.size();
  std::vector<double> disc(n, 0.0), idcg_of(n, 0.0);
  for (auto& [g, idx] : members_of(group)) {
    // predicted order: score descending, ties by index (a NaN score ranks last: a total order)
    auto key = [&](int64_t i) {
      const double v = score[size_t(i)];
      return std::isnan(v) ? -INFINITY : v;
    };
    std::vector<int64_t> order = idx;
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
    for (size_t r = 0; r < order.size(); ++r)
      disc[size_t(order[r])] = 1.0 / std::log2(double(r) + 2.0);  // rank r + 1
    std::vector<double> ideal;
    for (int64_t i : idx) ideal.push_back(gain[size_t(i)]);
    std::sort(ideal.begin(), ideal.end(), std::greater<double>());
    double idcg = 0;
    for (size_t r = 0; r < ideal.size(); ++r) idcg += ideal[r] / std::log2(double(r) + 2.0);
    for (int64_t i : idx) idcg_of[size_t(i)] = idcg;
  }
  std::vector<double> w(pairs.size(), 0.0);
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    const double idcg = idcg_of[size_t(i)];
    if (!(idcg > 0)) continue;
    w[p] =
        std::fabs((gain[size_t(i)] - gain[size_t(j)]) * (disc[size_t(i)] - disc[size_t(j)])) / idcg;
  }
  return w;
}

/// LambdaRank (Burges 2010): pairwise_logistic's pairs and terms, each weighted by the constant
/// |ΔnDCG| of lambdarank_weights at the forward's scores. Shapes, pair choice and backward as
/// pairwise_logistic with σ_ij scaled by w_ij.
template <class T>
NodeId lambdarank(Tape<T>& t, NodeId score, const std::vector<T>& target,
                  const std::vector<T>& gain, const std::vector<int32_t>& group, T weight) {
  const char* op = "lambdarank";
  const int64_t n = check_rank_inputs(
      op, t, score, {{"target", target.size()}, {"gain", gain.size()}, {"group", group.size()}});
  const Backend be = detail::select_backend(op, t, {score});
  auto pairs = std::make_shared<Pairs>(pairs_of(target, group, T(0)));
  if (pairs->empty()) return pairwise_body(t, op, be, score, n, pairs, nullptr, double(weight));
  // the weights come from the current scores (on the host: one small copy from a device)
  const std::vector<T> sv = be == Backend::Cuda
                                ? to_host(t.value(score))
                                : std::vector<T>(t.value(score).data, t.value(score).data + n);
  const std::vector<double> sd(sv.begin(), sv.end()), gd(gain.begin(), gain.end());
  auto w = std::make_shared<std::vector<double>>(lambdarank_weights(sd, gd, group, *pairs));
  return pairwise_body(t, op, be, score, n, pairs, w, double(weight));
}

/// ListNet (Cao et al. 2007): over the groups with ≥ 2 members, p = softmax(target) and
/// q = softmax(score) within the group, L = weight · (1/G) · Σ_g −Σ_{i∈g} p_i ln q_i → scalar [];
/// L = 0 (no gradient) when no group has 2 members. Backward to the score only:
/// ds_i += dL · weight · (q_i − p_i) / G.
template <class T>
NodeId listnet(Tape<T>& t, NodeId score, const std::vector<T>& target,
               const std::vector<int32_t>& group, T weight) {
  const char* op = "listnet";
  check_rank_inputs(op, t, score, {{"target", target.size()}, {"group", group.size()}});
  const Backend be = detail::select_backend(op, t, {score});
  auto g = std::make_shared<Groups>();
  for (auto& [id, idx] : members_of(group)) {
    if (idx.size() < 2) continue;
    double m = double(target[size_t(idx[0])]);
    for (int64_t i : idx) m = std::max(m, double(target[size_t(i)]));
    double z = 0;
    for (int64_t i : idx) z += std::exp(double(target[size_t(i)]) - m);
    for (int64_t i : idx) {
      g->members.push_back(i);
      g->p.push_back(std::exp(double(target[size_t(i)]) - m) / z);
    }
    g->starts.push_back(int64_t(g->members.size()));
  }
  const NodeId y = t.new_node(Shape{}, op, {score});
  if (g->count() == 0) {
    write_zero(be, t, y);
    return y;
  }
  if (be == Backend::Cuda) {
    g->d_members = detail::upload_scratch(t, g->members);
    g->d_starts = detail::upload_scratch(t, g->starts);
    g->d_p = detail::upload_scratch(t, g->p);
  }
  const double w = double(weight);
  listnet_fwd(be, t, t.value(score).data, *g, w, t.value(y).data);
  if (t.requires_grad(y)) {
    t.set_backward(y, [score, g, w, be](Tape<T>& tp, NodeId self) {
      if (T* gs = tp.grad_acc(score))
        listnet_bwd(be, tp.value(score).data, *g, tp.grad_acc(self), gs, w);
    });
  }
  return y;
}

/// Huber loss (Huber 1964): with d_i = pred_i − target_i, L = weight · mean_i h_δ(d_i),
/// h_δ(d) = ½d² for |d| ≤ δ, δ·(|d| − ½δ) beyond → scalar []. Built as δ² · the δ = 1 reduction
/// (LossKind::Huber1) of pred/δ and target/δ, since h_δ(d) = δ²·h_1(d/δ). Backward:
/// dpred_i += dL · weight · clamp(d_i, −δ, δ) / n, dtarget_i −= the same. Throws
/// std::invalid_argument for different or empty shapes or δ ≤ 0.
template <class T>
NodeId huber(Tape<T>& t, NodeId pred, NodeId target, T delta, T weight) {
  const char* op = "huber";
  const int64_t n = detail::loss_numel(op, t, pred, target);
  if (!(delta > T(0))) detail::shape_error(op, "delta must be > 0, got " + std::to_string(delta));
  const T inv = T(1) / delta;
  const NodeId a = scale(t, pred, inv), b = scale(t, target, inv);
  return detail::reduce(t, op, LossKind::Huber1, a, b, double(weight),
                        double(delta) * double(delta), double(n));
}

#define LCM_INSTANTIATE_RANK_LOSS(T)                                                               \
  template NodeId l1<T>(Tape<T>&, NodeId, NodeId, T);                                              \
  template NodeId huber<T>(Tape<T>&, NodeId, NodeId, T, T);                                        \
  template NodeId pairwise_logistic<T>(Tape<T>&, NodeId, const std::vector<T>&,                    \
                                       const std::vector<int32_t>&, T, T);                         \
  template NodeId lambdarank<T>(Tape<T>&, NodeId, const std::vector<T>&, const std::vector<T>&,    \
                                const std::vector<int32_t>&, T);                                   \
  template NodeId listnet<T>(Tape<T>&, NodeId, const std::vector<T>&, const std::vector<int32_t>&, \
                             T);

LCM_INSTANTIATE_RANK_LOSS(float)
LCM_INSTANTIATE_RANK_LOSS(double)
#undef LCM_INSTANTIATE_RANK_LOSS

}  // namespace lcm::ops
