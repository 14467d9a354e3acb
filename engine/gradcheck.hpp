// Finite-difference gradient checking (central differences in double) for the engine's ops and
// models, and the asymmetric random-weighted sum used to scalarise a tensor for such checks.
// Used by tests (tests/test_ops.cpp, the LSTM and model tests); not needed at training time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "engine/parameter.hpp"
#include "engine/tape.hpp"

namespace lcm {

/// Outcome of grad_check. `worst` names the element with the largest error relative to its
/// tolerance: "param[idx]: analytic a vs numeric n" ("" when there was no element).
struct GradCheckResult {
  bool ok = true;
  double max_abs_err = 0;  // max |a − n| over all checked elements
  double max_rel_err = 0;  // max |a − n| / max(|a|, |n|) over elements where that is > 0
  std::string worst;
  int64_t checked = 0;  // number of elements compared
};

/// Central differences in double (docs/design.md "Tests"): builds the loss once with `build_loss`
/// on a fresh Tape<double> and backpropagates to get the analytic gradients (every parameter's grad
/// is zeroed first and holds the analytic gradient afterwards); then for every element of every
/// parameter in `params` perturbs it by ±eps, rebuilds the loss on a fresh tape and compares
/// numeric n = (L(+eps) − L(−eps)) / (2·eps) with analytic a. An element passes if
/// |a − n| ≤ atol + rtol·max(|a|, |n|) (a NaN never passes). Values are restored afterwards.
/// `build_loss` must be deterministic: anything random (e.g. a dropout Rng) must be re-created
/// inside it from a fixed seed so that every rebuild draws the same mask.
/// On the GPU: a `build_loss` that calls parameters_to_device (uploading the perturbed host values)
/// and tape.set_device(Device::CUDA, i) first checks the CUDA backend; the analytic gradients are
/// then downloaded from Parameter::device_grad.
/// Throws std::invalid_argument for an empty or null parameter list, a parameter with
/// requires_grad == false, or a loss that is not a scalar.
GradCheckResult grad_check(std::vector<Parameter<double>*> params,
                           const std::function<NodeId(Tape<double>&)>& build_loss,
                           double eps = 1e-6, double atol = 1e-7, double rtol = 1e-5);

/// Σ_i w_i·x_i → scalar [], with fixed random weights w (shape of x) drawn from Rng(seed):
/// |w_i| uniform in [0.5, 1.5) with a random sign, so that a wrong permutation, transpose or
/// factor in a backward changes the gradient. Differentiable through ops::mul and ops::sum.
template <class T>
NodeId weighted_sum(Tape<T>& t, NodeId x, uint64_t seed) {
  Rng rng(seed);
  const Shape s = t.shape(x);
  std::vector<T> w(size_t(s.numel()));
  for (T& v : w) {
    const double mag = rng.uniform(0.5, 1.5);
    v = T(rng.next_double() < 0.5 ? -mag : mag);
  }
  return ops::sum(t, ops::mul(t, x, t.constant(w.data(), s)));
}

}  // namespace lcm
