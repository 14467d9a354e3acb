// The per-element formulas of the reductions and losses, written once: the term each loss sums and
// its gradients (engine/ops/loss.cpp, the L1 loss of engine/ops/rank_loss.cpp, kernels/loss.cu
// and its emulation), and the softplus / sigmoid of the pairwise ranking loss (rank_loss.cpp,
// kernels/rank_loss.cu and its emulation).
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/hd.hpp"

namespace lcm::ops {

/// What a reduction sums (see math::loss_term): shared by the ops and the kernels.
enum class LossKind : int { Sum = 0, SquaredError = 1, Mape = 2, AbsError = 3 };

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
///   Mape: |b − a| / (b + 1e-5) in T (as the reference computes it), then widened.
template <class T>
LCM_HD inline double loss_term(LossKind kind, T a, T b) {
  switch (kind) {
    case LossKind::Sum:
      return double(a);
    case LossKind::SquaredError: {
      const double d = double(a) - double(b);
      return d * d;
    }
    case LossKind::AbsError:
      return abs_of(double(a) - double(b));
    default:
      return double(abs_of(b - a) / (b + T(kMapeEps)));
  }
}

/// The gradient of term i with respect to a, times c (c = dL·scale, the loss's scale):
///   Sum: c;  SquaredError: 2c·(a − b);  AbsError: c·sign(a − b);
///   Mape: c·sign(a − b) / (b + 1e-5).
template <class T>
LCM_HD inline T loss_grad_pred(LossKind kind, T a, T b, T c) {
  switch (kind) {
    case LossKind::Sum:
      return c;
    case LossKind::SquaredError:
      return (T(2) * c) * (a - b);
    case LossKind::AbsError:
      return c * sign_of(a - b);
    default:
      return c * sign_of(a - b) / (b + T(kMapeEps));
  }
}
/// The gradient of term i with respect to b, times c:
///   SquaredError: −2c·(a − b);  AbsError: −c·sign(a − b);
///   Mape: c·(sign(b − a)/den − |b − a|/den²), den = b + 1e-5;  Sum: 0 (no b).
template <class T>
LCM_HD inline T loss_grad_target(LossKind kind, T a, T b, T c) {
  switch (kind) {
    case LossKind::Sum:
      return T(0);
    case LossKind::SquaredError:
      return -(T(2) * c) * (a - b);
    case LossKind::AbsError:
      return -(c * sign_of(a - b));
    default: {
      const T den = b + T(kMapeEps), diff = b - a;
      return c * (sign_of(diff) / den - abs_of(diff) / (den * den));
    }
  }
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

/// The pair-loss gradient of score k over its incidence list, in list order (the backward of the
/// pairwise loss without atomics, kernels/rank_loss.cu and its emulation): Σ_q ±c·σ_p over
/// q in [starts[k], starts[k+1]), entry inc[q] = p + 1 where k is pair p's worse j (+), −(p + 1)
/// where it is the better i (−); pairs: [2·P] (better, worse) score indices; c = dL·scale.
template <class T>
LCM_HD inline double pair_grad_of_score(const T* s, const int64_t* pairs, const int64_t* starts,
                                        const int64_t* inc, int64_t k, double c) {
  double acc = 0;
  for (int64_t q = starts[k]; q < starts[k + 1]; ++q) {
    const int64_t e = inc[q];
    const int64_t p = (e > 0 ? e : -e) - 1;
    const double g = c * pair_loss_grad_worse(double(s[pairs[2 * p]]), double(s[pairs[2 * p + 1]]));
    acc += e > 0 ? g : -g;
  }
  return acc;
}

}  // namespace math
}  // namespace lcm::ops
