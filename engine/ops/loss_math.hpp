// The per-element formulas of the reductions and losses, written once: the term each loss sums and
// its gradients (engine/ops/loss.cpp, the L1 loss of engine/ops/rank_loss.cpp, kernels/loss.cu
// and its emulation), the softplus / sigmoid of the pairwise ranking loss and the per-program
// softmax cross-entropy of the ListNet loss (rank_loss.cpp, kernels/rank_loss.cu and its
// emulation).
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/hd.hpp"

namespace lcm::ops {

/// What a reduction sums (see math::loss_term): shared by the ops and the kernels. Count is the
/// number of kinds, not a kind (tests enumerate k < Count); every switch over LossKind names each
/// kind (no default), so -Wswitch names a kind a switch misses.
enum class LossKind : int {
  Sum = 0,
  SquaredError = 1,
  Mape = 2,
  AbsError = 3,
  Huber1 = 4,
  Count = 5
};

namespace math {

/// The MAPE denominator's guard (docs/model-spec.md §6): |y − ŷ| / (y + 1e-5).
constexpr double kMapeEps = 1e-5;

/// PyTorch's sign: −1, 0 or +1 (so the gradient of |·| at 0 is 0).
template <class T>
LCM_HD inline T sign_of(T v) {
  return T((v > T(0)) - (v < T(0)));
}
template <class T>
LCM_HD inline T abs_of(T v) {
  return v < T(0) ? -v : v;
}

/// Term i of a reduction over a (prediction) and b (target), as a double to be summed:
///   Sum: a;  SquaredError: (a − b)² in double;  AbsError: |a − b| in double;
///   Huber1: the Huber loss with δ = 1 of d = a − b in double, ½d² for |d| ≤ 1, |d| − ½ beyond
///   (Huber 1964; ops::huber scales its inputs by 1/δ for other δ);
///   Mape: |b − a| / (b + 1e-5) in T (as the reference computes it), then widened.
template <class T>
LCM_HD inline double loss_term(LossKind kind, T a, T b) {
  switch (kind) {
    case LossKind::Huber1: {
      const double d = double(a) - double(b), ad = abs_of(d);
      return ad <= 1.0 ? 0.5 * d * d : ad - 0.5;
    }
    case LossKind::Sum:
      return double(a);
    case LossKind::SquaredError: {
      const double d = double(a) - double(b);
      return d * d;
    }
    case LossKind::AbsError:
      return abs_of(double(a) - double(b));
    case LossKind::Mape:
      return double(abs_of(b - a) / (b + T(kMapeEps)));
    case LossKind::Count:  // not a kind
      break;
  }
  return double(NAN);  // Count or a value outside the enum: no loss's term
}

/// The gradient of term i with respect to a, times c (c = dL·scale, the loss's scale):
///   Sum: c;  SquaredError: 2c·(a − b);  AbsError: c·sign(a − b);
///   Huber1: c·clamp(a − b, −1, 1);  Mape: c·sign(a − b) / (b + 1e-5).
template <class T>
LCM_HD inline T loss_grad_pred(LossKind kind, T a, T b, T c) {
  switch (kind) {
    case LossKind::Huber1: {
      const T d = a - b;
      return c * (d > T(1) ? T(1) : (d < T(-1) ? T(-1) : d));
    }
    case LossKind::Sum:
      return c;
    case LossKind::SquaredError:
      return (T(2) * c) * (a - b);
    case LossKind::AbsError:
      return c * sign_of(a - b);
    case LossKind::Mape:
      return c * sign_of(a - b) / (b + T(kMapeEps));
    case LossKind::Count:  // not a kind
      break;
  }
  return T(NAN);
}
/// The gradient of term i with respect to b, times c:
///   SquaredError: −2c·(a − b);  AbsError: −c·sign(a − b);  Huber1: −c·clamp(a − b, −1, 1);
///   Mape: c·(sign(b − a)/den − |b − a|/den²), den = b + 1e-5;  Sum: 0 (no b).
template <class T>
LCM_HD inline T loss_grad_target(LossKind kind, T a, T b, T c) {
  switch (kind) {
    case LossKind::Huber1:
      return -loss_grad_pred(kind, a, b, c);
    case LossKind::Sum:
      return T(0);
    case LossKind::SquaredError:
      return -(T(2) * c) * (a - b);
    case LossKind::AbsError:
      return -(c * sign_of(a - b));
    case LossKind::Mape: {
      const T den = b + T(kMapeEps), diff = b - a;
      return c * (sign_of(diff) / den - abs_of(diff) / (den * den));
    }
    case LossKind::Count:  // not a kind
      break;
  }
  return T(NAN);
}

/// log(1 + e^z) without overflow.
LCM_HD inline double softplus(double z) {
  return z > 0 ? z + ::log1p(::exp(-z)) : ::log1p(::exp(z));
}
/// 1 / (1 + e^−z) without overflow.
LCM_HD inline double stable_sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + ::exp(-z));
  const double e = ::exp(z);
  return e / (1.0 + e);
}
/// The pairwise logistic (RankNet) loss of one pair (better i, worse j) of scores s_i, s_j:
/// softplus(−(s_i − s_j)); its derivative with respect to s_j is sigmoid(−(s_i − s_j)) (and the
/// negative of it with respect to s_i).
LCM_HD inline double pair_loss(double si, double sj) {
  return softplus(-(si - sj));
}
LCM_HD inline double pair_loss_grad_worse(double si, double sj) {
  return stable_sigmoid(-(si - sj));
}

/// The weighted pairwise loss of pair p: w_p · pair_loss (w == nullptr: weight 1; the LambdaRank
/// form of ops::lambdarank passes its |ΔnDCG| weights).
template <class T>
LCM_HD inline double weighted_pair_loss(const T* s, const int64_t* pairs, const double* w,
                                        int64_t p) {
  const double l = pair_loss(double(s[pairs[2 * p]]), double(s[pairs[2 * p + 1]]));
  return w ? w[p] * l : l;
}

/// The pair-loss gradient of score k over its incidence list, in list order (the backward of the
/// pairwise loss without atomics, kernels/rank_loss.cu and its emulation): Σ_q ±c·σ_p over
/// q in [starts[k], starts[k+1]), entry inc[q] = p + 1 where k is pair p's worse j (+), −(p + 1)
/// where it is the better i (−); pairs: [2·P] (better, worse) score indices; c = dL·scale;
/// w: [P] pair weights, or nullptr for weight 1.
template <class T>
LCM_HD inline double pair_grad_of_score(const T* s, const int64_t* pairs, const int64_t* starts,
                                        const int64_t* inc, int64_t k, double c,
                                        const double* w = nullptr) {
  double acc = 0;
  for (int64_t q = starts[k]; q < starts[k + 1]; ++q) {
    const int64_t e = inc[q];
    const int64_t p = (e > 0 ? e : -e) - 1;
    double g = c * pair_loss_grad_worse(double(s[pairs[2 * p]]), double(s[pairs[2 * p + 1]]));
    if (w) g *= w[p];
    acc += e > 0 ? g : -g;
  }
  return acc;
}

/// The log-sum-exp of the scores of one group, ln Σ_{q∈[lo,hi)} exp(s[members[q]]), computed
/// as m + ln Σ exp(s − m) with m the group's maximum (no overflow), in double.
template <class T>
LCM_HD inline double group_logsumexp(const T* s, const int64_t* members, int64_t lo, int64_t hi) {
  double m = double(s[members[lo]]);
  for (int64_t q = lo + 1; q < hi; ++q) m = double(s[members[q]]) > m ? double(s[members[q]]) : m;
  double z = 0;
  for (int64_t q = lo; q < hi; ++q) z += ::exp(double(s[members[q]]) - m);
  return m + ::log(z);
}

/// The ListNet term of one group (Cao et al. 2007, top-one probabilities): the cross-entropy
/// −Σ_i p_i · ln softmax(s)_i over its members [lo, hi) = lse − Σ_i p_i·s_i (Σ_i p_i = 1), with
/// p the target distribution (softmax of the target, built on the host), lse group_logsumexp.
template <class T>
LCM_HD inline double listnet_group_term(const T* s, const double* p, const int64_t* members,
                                        int64_t lo, int64_t hi) {
  const double lse = group_logsumexp(s, members, lo, hi);
  double dot = 0;
  for (int64_t q = lo; q < hi; ++q) dot += p[q] * double(s[members[q]]);
  return lse - dot;
}

}  // namespace math
}  // namespace lcm::ops
