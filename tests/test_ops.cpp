// Tests of the CPU ops (engine/ops/*.cpp) and of the gradient checker (engine/gradcheck.hpp):
// a double-precision finite-difference check for every op, hand-computed forward values, shape
// errors, gradient accumulation, no_grad/eval modes, determinism and arena reuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/ops/elementwise_math.hpp"
#include "engine/ops/loss_math.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "support/test_support.hpp"

using lcm::test::contains;
using lcm::test::error_of;

using namespace lcm;

namespace {

/// A parameter filled from Rng(seed): values uniform in [lo, hi); with `away_from_zero`, the
/// magnitude is uniform in [0.2, 1.5) and the sign random (keeps inputs off the kinks at 0).
Parameter<double> random_param(const std::string& name, Shape shape, uint64_t seed,
                               bool away_from_zero = false, double lo = -1.5, double hi = 1.5) {
  Parameter<double> p;
  p.name = name;
  p.shape = shape;
  p.value.resize(size_t(shape.numel()));
  p.grad.assign(size_t(shape.numel()), 0.0);
  Rng rng(seed);
  for (double& v : p.value) {
    if (away_from_zero) {
      const double mag = rng.uniform(0.2, 1.5);
      v = rng.next_double() < 0.5 ? -mag : mag;
    } else {
      v = rng.uniform(lo, hi);
    }
  }
  return p;
}

/// Runs grad_check and reports the worst element on failure.
void expect_grads_ok(std::vector<Parameter<double>*> params,
                     const std::function<NodeId(Tape<double>&)>& build) {
  GradCheckResult r = grad_check(params, build);
  INFO("worst: " << r.worst << " max_abs_err " << r.max_abs_err << " max_rel_err "
                 << r.max_rel_err);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

/// Gradient check of the linear layer `op` (ops::linear or ops::linear_elu) of input `x`, weight
/// `w` and bias `b` (nullptr: none) through a weighted sum (weights from `seed`); the output must
/// have shape `out`.
void expect_linear_grads_ok(NodeId (*op)(Tape<double>&, NodeId, NodeId, NodeId),
                            Parameter<double>& x, Parameter<double>& w, Parameter<double>* b,
                            const Shape& out, uint64_t seed) {
  std::vector<Parameter<double>*> params{&x, &w};
  if (b) params.push_back(b);
  expect_grads_ok(params, [&](Tape<double>& t) {
    const NodeId y = op(t, t.param(x), t.param(w), b ? t.param(*b) : NodeId(-1));
    CHECK(t.shape(y) == out);
    return weighted_sum(t, y, seed);
  });
}

std::vector<double> values_of(Tape<double>& t, NodeId id) {
  const Tensor<double>& v = t.value(id);
  return std::vector<double>(v.data, v.data + v.numel());
}

/// Unary kind k's value and derivative at x, written here from their definitions
/// (docs/model-spec.md §5.2), independently of engine/ops/elementwise_math.hpp. No default: a kind
/// added to ops::Unary without a formula here is a -Wswitch warning and a failed CHECK.
std::array<double, 2> unary_reference(ops::Unary k, double x, double param) {
  switch (k) {
    case ops::Unary::Scale:
      return {param * x, param};
    case ops::Unary::Elu:
      return {x > 0 ? x : std::exp(x) - 1, x > 0 ? 1 : std::exp(x)};
    case ops::Unary::LeakyRelu:
      return {x >= 0 ? x : param * x, x >= 0 ? 1 : param};
    case ops::Unary::Sigmoid: {
      const double s = 1 / (1 + std::exp(-x));
      return {s, s * (1 - s)};
    }
    case ops::Unary::Tanh:
      return {std::tanh(x), 1 / (std::cosh(x) * std::cosh(x))};
    case ops::Unary::Count:
      break;
  }
  FAIL_CHECK("no reference formula for unary kind " << int(k));
  return {NAN, NAN};
}

/// The public op of unary kind k (the factor or slope `param` where it has one), as above.
NodeId unary_op(Tape<double>& t, ops::Unary k, NodeId x, double param) {
  switch (k) {
    case ops::Unary::Scale:
      return ops::scale(t, x, param);
    case ops::Unary::Elu:
      return ops::elu(t, x);
    case ops::Unary::LeakyRelu:
      return ops::leaky_relu(t, x, param);
    case ops::Unary::Sigmoid:
      return ops::sigmoid(t, x);
    case ops::Unary::Tanh:
      return ops::tanh(t, x);
    case ops::Unary::Count:
      break;
  }
  throw std::logic_error("no public op for unary kind " + std::to_string(int(k)));
}

/// Reduction kind k's term at (a, b) and its derivatives in a and b, written here from their
/// definitions (model-spec §6, docs/accuracy.md), independently of engine/ops/loss_math.hpp.
std::array<double, 3> loss_reference(ops::LossKind k, double a, double b) {
  const double d = a - b, sgn = d > 0 ? 1 : (d < 0 ? -1 : 0);
  switch (k) {
    case ops::LossKind::Sum:
      return {a, 1, 0};
    case ops::LossKind::SquaredError:
      return {d * d, 2 * d, -2 * d};
    case ops::LossKind::Mape: {
      const double den = b + 1e-5;
      return {std::fabs(d) / den, sgn / den, -sgn / den - std::fabs(d) / (den * den)};
    }
    case ops::LossKind::AbsError:
      return {std::fabs(d), sgn, -sgn};
    case ops::LossKind::Huber1: {
      const double c = std::max(-1.0, std::min(1.0, d));
      return {std::fabs(d) <= 1 ? 0.5 * d * d : std::fabs(d) - 0.5, c, -c};
    }
    case ops::LossKind::Count:
      break;
  }
  FAIL_CHECK("no reference formula for reduction kind " << int(k));
  return {NAN, NAN, NAN};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Gradient checks, one per op (double, central differences, asymmetric weighted sum).
// ---------------------------------------------------------------------------------------------

TEST_CASE("gradcheck linear with bias, without bias, rank-1 and rank-3 input") {
  auto x2 = random_param("x", Shape{5, 4}, 1);
  auto x3 = random_param("x3", Shape{2, 3, 4}, 2);
  auto x1 = random_param("x1", Shape{4}, 3);
  auto w = random_param("w", Shape{3, 4}, 4);
  auto b = random_param("b", Shape{3}, 5);
  SUBCASE("bias") {
    expect_linear_grads_ok(ops::linear<double>, x2, w, &b, Shape{5, 3}, 11);
  }
  SUBCASE("no bias") {
    expect_linear_grads_ok(ops::linear<double>, x2, w, nullptr, Shape{5, 3}, 12);
  }
  SUBCASE("rank 3") {
    expect_linear_grads_ok(ops::linear<double>, x3, w, &b, Shape{2, 3, 3}, 13);
  }
  SUBCASE("rank 1") {
    expect_linear_grads_ok(ops::linear<double>, x1, w, &b, Shape{3}, 14);
  }
}

TEST_CASE("gradcheck linear_elu with and without bias, rank 3") {
  // Pre-activations of both signs, none within 0.05 of the kink at 0 (central differences).
  auto x = random_param("x", Shape{6, 4}, 21);
  auto x3 = random_param("x3", Shape{2, 3, 4}, 22);
  auto w = random_param("w", Shape{5, 4}, 23);
  auto b = random_param("b", Shape{5}, 24);
  SUBCASE("bias") {
    expect_linear_grads_ok(ops::linear_elu<double>, x, w, &b, Shape{6, 5}, 25);
  }
  SUBCASE("no bias, rank 3") {
    expect_linear_grads_ok(ops::linear_elu<double>, x3, w, nullptr, Shape{2, 3, 5}, 26);
  }
}

TEST_CASE(
    "gradcheck: a linear's input gradient written fresh (grad_write) or added, both consumer "
    "orders") {
  // h = 1.3·x feeds a linear and another op. The consumer created last runs its backward first:
  // when that is the linear, it writes h's gradient without zero-filling it (fresh), and the other
  // op adds after; in the other order the linear adds. Both must give the true gradient.
  auto x = random_param("x", Shape{4, 3}, 41);
  auto w = random_param("w", Shape{2, 3}, 42);
  for (int linear_last : {0, 1}) {
    CAPTURE(linear_last);
    expect_grads_ok({&x, &w}, [&](Tape<double>& t) {
      const NodeId h = ops::scale(t, t.param(x), 1.3);
      NodeId a, b;
      if (linear_last) {
        a = ops::tanh(t, h);
        b = ops::linear_elu(t, h, t.param(w));
      } else {
        b = ops::linear(t, h, t.param(w));
        a = ops::tanh(t, h);
      }
      return ops::add(t, weighted_sum(t, a, 43), weighted_sum(t, b, 44));
    });
  }
}

TEST_CASE("linear_elu equals elu(linear) in float: outputs and every gradient, one tile and many") {
  const int saved = num_threads();
  set_num_threads(2);
  // 300×400×500 is split into several GEMM tiles (bias and ELU then run per tile); 7×5×3 is one.
  for (const auto& dims :
       {std::array<int64_t, 3>{7, 5, 3}, std::array<int64_t, 3>{300, 400, 500}}) {
    const int64_t rows = dims[0], in = dims[1], out = dims[2];
    CAPTURE(rows);
    auto make = [](const std::string& name, Shape shape, uint64_t seed) {
      Parameter<float> p;
      p.name = name;
      p.shape = shape;
      Rng rng(seed);
      for (int64_t i = 0; i < shape.numel(); ++i) p.value.push_back(float(rng.uniform(-1, 1)));
      p.grad.assign(p.value.size(), 0.0f);
      return p;
    };
    std::vector<float> outs[2], grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      Parameter<float> x = make("x", Shape{rows, in}, 31), w = make("w", Shape{out, in}, 32),
                       b = make("b", Shape{out}, 33), r = make("r", Shape{rows, out}, 34);
      Tape<float> t;
      const NodeId y = fused ? ops::linear_elu(t, t.param(x), t.param(w), t.param(b))
                             : ops::elu(t, ops::linear(t, t.param(x), t.param(w), t.param(b)));
      t.backward(ops::sum(t, ops::mul(t, y, t.param(r))));  // a non-uniform output gradient
      outs[fused].assign(t.value(y).data, t.value(y).data + rows * out);
      for (Parameter<float>* q : {&x, &w, &b})
        grads[fused].insert(grads[fused].end(), q->grad.begin(), q->grad.end());
    }
    CHECK(outs[0] == outs[1]);  // == on floats: equal values (a zero's sign may differ)
    CHECK(grads[0] == grads[1]);
    int64_t negative = 0;
    for (float v : outs[1]) negative += v < 0;
    CHECK(negative > 0);  // both branches of ELU were exercised
    CHECK(negative < rows * out);
  }
  set_num_threads(saved);
}

TEST_CASE("gradcheck add, mul, scale") {
  auto a = random_param("a", Shape{3, 4}, 21);
  auto b = random_param("b", Shape{3, 4}, 22);
  expect_grads_ok({&a, &b}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::add(t, t.param(a), t.param(b)), 23);
  });
  expect_grads_ok({&a, &b}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::mul(t, t.param(a), t.param(b)), 24);
  });
  expect_grads_ok({&a}, [&](Tape<double>& t) {  // same node on both sides: d(a²) = 2a
    NodeId pa = t.param(a);
    return weighted_sum(t, ops::mul(t, pa, pa), 25);
  });
  expect_grads_ok(
      {&a}, [&](Tape<double>& t) { return weighted_sum(t, ops::scale(t, t.param(a), -2.5), 26); });
}

TEST_CASE("gradcheck elu, leaky_relu, sigmoid, tanh (inputs away from 0)") {
  auto x = random_param("x", Shape{4, 5}, 31, /*away_from_zero=*/true);
  expect_grads_ok({&x},
                  [&](Tape<double>& t) { return weighted_sum(t, ops::elu(t, t.param(x)), 32); });
  expect_grads_ok(
      {&x}, [&](Tape<double>& t) { return weighted_sum(t, ops::leaky_relu(t, t.param(x)), 33); });
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::leaky_relu(t, t.param(x), 0.2), 34);
  });
  expect_grads_ok(
      {&x}, [&](Tape<double>& t) { return weighted_sum(t, ops::sigmoid(t, t.param(x)), 35); });
  expect_grads_ok({&x},
                  [&](Tape<double>& t) { return weighted_sum(t, ops::tanh(t, t.param(x)), 36); });
}

TEST_CASE("every unary kind (k < Unary::Count): formula, derivative, op values and gradcheck") {
  const double param = 0.3;
  const std::vector<double> xs{-2.1, -0.7, -0.2, 0.15, 0.6, 1.9};  // off the kinks at 0
  for (int ki = 0; ki < int(ops::Unary::Count); ++ki) {
    const ops::Unary k = ops::Unary(ki);
    INFO("unary kind " << ki);
    Tape<double> t;
    std::vector<double> host = xs;
    const NodeId x = t.constant(host.data(), Shape{int64_t(xs.size())});
    const std::vector<double> y = values_of(t, unary_op(t, k, x, param));
    for (size_t i = 0; i < xs.size(); ++i) {
      const auto [f, df] = unary_reference(k, xs[i], param);
      CHECK(ops::math::unary_value(k, xs[i], param) == doctest::Approx(f).epsilon(1e-14));
      CHECK(ops::math::unary_grad(k, xs[i], f, param) == doctest::Approx(df).epsilon(1e-12));
      CHECK(y[i] == doctest::Approx(f).epsilon(1e-12));
    }
    auto p = random_param("x", Shape{3, 4}, 40 + uint64_t(ki), /*away_from_zero=*/true);
    expect_grads_ok({&p}, [&](Tape<double>& tp) {
      return weighted_sum(tp, unary_op(tp, k, tp.param(p), param), 50 + uint64_t(ki));
    });
  }
  // Count is no kind: NaN from the formulas, an error from the op's CPU loop
  CHECK(std::isnan(ops::math::unary_value(ops::Unary::Count, 0.5, param)));
  CHECK(std::isnan(ops::math::unary_grad(ops::Unary::Count, 0.5, 0.5, param)));
}

TEST_CASE("every reduction kind (k < LossKind::Count): term and both derivatives") {
  const std::vector<std::pair<double, double>> ab{
      {0.4, 1.3}, {2.5, 0.9}, {-0.3, 0.2}, {3.1, 0.5}, {1.0, 1.8}};  // |a − b| ≠ 1, a ≠ b
  for (int ki = 0; ki < int(ops::LossKind::Count); ++ki) {
    const ops::LossKind k = ops::LossKind(ki);
    INFO("reduction kind " << ki);
    for (const auto& [a, b] : ab) {
      const auto [f, da, db] = loss_reference(k, a, b);
      CHECK(ops::math::loss_term(k, a, b) == doctest::Approx(f).epsilon(1e-14));
      CHECK(ops::math::loss_grad_pred(k, a, b, 0.7) == doctest::Approx(0.7 * da).epsilon(1e-12));
      CHECK(ops::math::loss_grad_target(k, a, b, 0.7) == doctest::Approx(0.7 * db).epsilon(1e-12));
    }
  }
  CHECK(std::isnan(ops::math::loss_term(ops::LossKind::Count, 0.5, 0.5)));
  CHECK(std::isnan(ops::math::loss_grad_pred(ops::LossKind::Count, 0.5, 0.5, 1.0)));
  CHECK(std::isnan(ops::math::loss_grad_target(ops::LossKind::Count, 0.5, 0.5, 1.0)));
}

TEST_CASE("gradcheck dropout in training mode with a fixed seed") {
  auto x = random_param("x", Shape{6, 7}, 41);
  int dropped = -1;
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    Rng rng(1234);  // re-created on every rebuild: same (seed, offset) → same mask
    rng.take(17);   // a non-zero offset
    NodeId y = ops::dropout(t, t.param(x), 0.4, rng);
    dropped = 0;
    for (double v : values_of(t, y)) dropped += v == 0.0;
    return weighted_sum(t, y, 42);
  });
  // The check is only meaningful if the mask both drops and keeps elements.
  CHECK(dropped > 0);
  CHECK(dropped < 42);
}

TEST_CASE("gradcheck reshape") {
  auto x = random_param("x", Shape{2, 6}, 51);
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    NodeId y = ops::reshape(t, t.param(x), Shape{3, 2, 2});
    // followed by an op that mixes positions so that the view's layout matters
    return weighted_sum(t, ops::tanh(t, ops::slice(t, y, 1, 1, 1)), 52);
  });
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::reshape(t, t.param(x), Shape{12}), 53);
  });
}

TEST_CASE("gradcheck concat along several dims") {
  auto a = random_param("a", Shape{2, 3, 4}, 61);
  auto b0 = random_param("b0", Shape{1, 3, 4}, 62);
  auto b1 = random_param("b1", Shape{2, 2, 4}, 63);
  auto b2 = random_param("b2", Shape{2, 3, 5}, 64);
  expect_grads_ok({&a, &b0}, [&](Tape<double>& t) {
    NodeId y = ops::concat(t, {t.param(a), t.param(b0)}, 0);
    CHECK(t.shape(y) == Shape{3, 3, 4});
    return weighted_sum(t, y, 65);
  });
  expect_grads_ok({&a, &b1}, [&](Tape<double>& t) {
    NodeId y = ops::concat(t, {t.param(b1), t.param(a), t.param(b1)}, 1);
    CHECK(t.shape(y) == Shape{2, 7, 4});
    return weighted_sum(t, y, 66);
  });
  expect_grads_ok({&a, &b2}, [&](Tape<double>& t) {
    NodeId y = ops::concat(t, {t.param(a), t.param(b2)}, -1);
    CHECK(t.shape(y) == Shape{2, 3, 9});
    return weighted_sum(t, y, 67);
  });
}

TEST_CASE("gradcheck slice") {
  auto x = random_param("x", Shape{3, 4, 5}, 71);
  for (int dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    expect_grads_ok({&x}, [&](Tape<double>& t) {
      return weighted_sum(t, ops::slice(t, t.param(x), dim, 1, 2), 72 + uint64_t(dim));
    });
  }
}

TEST_CASE("gradcheck index_select with repeated indices") {
  auto x = random_param("x", Shape{4, 3, 2}, 81);
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::index_select(t, t.param(x), 0, {3, 1, 3, 3, 0}), 82);
  });
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::index_select(t, t.param(x), 1, {2, 2, 0}), 83);
  });
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::index_select(t, t.param(x), -1, {1, 1, 1, 0}), 84);
  });
}

TEST_CASE("gradcheck stack") {
  auto a = random_param("a", Shape{2, 3}, 91);
  auto b = random_param("b", Shape{2, 3}, 92);
  for (int dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    expect_grads_ok({&a, &b}, [&](Tape<double>& t) {
      NodeId pa = t.param(a);
      return weighted_sum(t, ops::stack(t, {pa, t.param(b), pa}, dim), 93);
    });
  }
}

TEST_CASE("gradcheck broadcast_rows") {
  auto v2 = random_param("v2", Shape{1, 5}, 101);
  auto v1 = random_param("v1", Shape{5}, 102);
  expect_grads_ok({&v2}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::broadcast_rows(t, t.param(v2), 4), 103);
  });
  expect_grads_ok({&v1}, [&](Tape<double>& t) {
    return weighted_sum(t, ops::broadcast_rows(t, t.param(v1), 3), 104);
  });
}

TEST_CASE("gradcheck sum, mean, mse, mape") {
  auto x = random_param("x", Shape{3, 4}, 111);
  auto p = random_param("pred", Shape{8}, 112, false, 0.5, 3.0);
  auto y = random_param("target", Shape{8}, 113, false, 0.5, 3.0);
  for (size_t i = 0; i < y.value.size(); ++i)  // keep |y − ŷ| away from the kink at 0
    if (std::abs(y.value[i] - p.value[i]) < 0.1) y.value[i] += 0.3;
  // sum/mean/mse scaled through a further non-linearity so the seed gradient is not 1
  expect_grads_ok({&x}, [&](Tape<double>& t) {
    return ops::sum(
        t,
        ops::mul(t, ops::broadcast_rows(t, ops::reshape(t, ops::sum(t, t.param(x)), Shape{1}), 1),
                 ops::broadcast_rows(t, ops::reshape(t, ops::mean(t, t.param(x)), Shape{1}), 1)));
  });
  expect_grads_ok({&x}, [&](Tape<double>& t) { return ops::mean(t, ops::tanh(t, t.param(x))); });
  expect_grads_ok({&p, &y}, [&](Tape<double>& t) { return ops::mse(t, t.param(p), t.param(y)); });
  expect_grads_ok({&p, &y},
                  [&](Tape<double>& t) { return ops::mape(t, t.param(p), t.param(y), 0.75); });
  expect_grads_ok({&p}, [&](Tape<double>& t) {
    return ops::scale(t, ops::mape(t, t.param(p), t.constant(y.value.data(), y.shape)), 0.3);
  });
}

// ---------------------------------------------------------------------------------------------
// Forward values against hand-computed results.
// ---------------------------------------------------------------------------------------------

TEST_CASE("forward values: linear") {
  Tape<double> t;
  const double xv[] = {1, 2, 3, 4};
  const double wv[] = {1, 0, 0, 1, 1, 1};
  const double bv[] = {0.5, -1, 0};
  NodeId y = ops::linear(t, t.constant(xv, Shape{2, 2}), t.constant(wv, Shape{3, 2}),
                         t.constant(bv, Shape{3}));
  CHECK(t.shape(y) == Shape{2, 3});
  CHECK(values_of(t, y) == std::vector<double>{1.5, 1, 3, 3.5, 3, 7});
  NodeId z = ops::linear(t, t.constant(xv, Shape{2, 2}), t.constant(wv, Shape{3, 2}));
  CHECK(values_of(t, z) == std::vector<double>{1, 2, 3, 3, 4, 7});
}

TEST_CASE("forward values: element-wise") {
  Tape<double> t;
  const double xv[] = {-1, 0, 2};
  const double yv[] = {3, 4, -5};
  NodeId x = t.constant(xv, Shape{3});
  NodeId y = t.constant(yv, Shape{3});
  CHECK(values_of(t, ops::add(t, x, y)) == std::vector<double>{2, 4, -3});
  CHECK(values_of(t, ops::mul(t, x, y)) == std::vector<double>{-3, 0, -10});
  CHECK(values_of(t, ops::scale(t, x, 0.5)) == std::vector<double>{-0.5, 0, 1});
  auto e = values_of(t, ops::elu(t, x));
  CHECK(e[0] == doctest::Approx(std::exp(-1.0) - 1.0));
  CHECK(e[1] == 0.0);
  CHECK(e[2] == 2.0);
  CHECK(values_of(t, ops::leaky_relu(t, x)) == std::vector<double>{-0.01, 0, 2});
  auto s = values_of(t, ops::sigmoid(t, x));
  CHECK(s[0] == doctest::Approx(1.0 / (1.0 + std::exp(1.0))));
  CHECK(s[1] == 0.5);
  auto th = values_of(t, ops::tanh(t, x));
  CHECK(th[0] == doctest::Approx(-0.7615941559557649));
  CHECK(th[1] == 0.0);
}

TEST_CASE("forward values: concat, slice, index_select, stack, broadcast_rows, reshape") {
  Tape<double> t;
  const double xv[] = {1, 2, 3, 4, 5, 6};
  NodeId x = t.constant(xv, Shape{3, 2});  // [[1,2],[3,4],[5,6]]
  const double cv[] = {7, 8, 9};
  NodeId c = t.constant(cv, Shape{3, 1});
  CHECK(values_of(t, ops::concat(t, {x, c}, 1)) == std::vector<double>{1, 2, 7, 3, 4, 8, 5, 6, 9});
  const double rv[] = {7, 8};
  NodeId r = t.constant(rv, Shape{1, 2});
  NodeId xc = ops::concat(t, {r, x}, 0);
  CHECK(t.shape(xc) == Shape{4, 2});
  CHECK(values_of(t, xc) == std::vector<double>{7, 8, 1, 2, 3, 4, 5, 6});
  CHECK(values_of(t, ops::slice(t, x, 0, 1, 2)) == std::vector<double>{3, 4, 5, 6});
  CHECK(values_of(t, ops::slice(t, x, 1, 1, 1)) == std::vector<double>{2, 4, 6});
  CHECK(values_of(t, ops::index_select(t, x, 0, {2, 0, 2})) ==
        std::vector<double>{5, 6, 1, 2, 5, 6});
  CHECK(values_of(t, ops::index_select(t, x, 1, {1, 1, 0})) ==
        std::vector<double>{2, 2, 1, 4, 4, 3, 6, 6, 5});
  const double av[] = {1, 2}, bv[] = {3, 4};
  NodeId a = t.constant(av, Shape{2});
  NodeId b = t.constant(bv, Shape{2});
  NodeId s0 = ops::stack(t, {a, b}, 0);
  CHECK(t.shape(s0) == Shape{2, 2});
  CHECK(values_of(t, s0) == std::vector<double>{1, 2, 3, 4});
  NodeId s1 = ops::stack(t, {a, b}, 1);
  CHECK(values_of(t, s1) == std::vector<double>{1, 3, 2, 4});
  NodeId br = ops::broadcast_rows(t, r, 3);
  CHECK(t.shape(br) == Shape{3, 2});
  CHECK(values_of(t, br) == std::vector<double>{7, 8, 7, 8, 7, 8});
  NodeId v = ops::reshape(t, x, Shape{2, 3});
  CHECK(t.shape(v) == Shape{2, 3});
  CHECK(t.value(v).data == t.value(x).data);  // a view, no copy
}

TEST_CASE("forward values: sum, mean, mse, mape") {
  Tape<double> t;
  const double xv[] = {1, -2, 3.5, 4};
  NodeId x = t.constant(xv, Shape{2, 2});
  NodeId s = ops::sum(t, x);
  CHECK(t.shape(s).rank == 0);
  CHECK(t.value(s)[0] == 6.5);
  CHECK(t.value(ops::mean(t, x))[0] == 1.625);
  const double pv[] = {1.1, 1.8}, yv[] = {1.0, 2.0};
  NodeId p = t.constant(pv, Shape{2});
  NodeId y = t.constant(yv, Shape{2});
  // (0.1² + 0.2²) / 2 = 0.025
  CHECK(t.value(ops::mse(t, p, y))[0] == doctest::Approx(0.025).epsilon(1e-12));
  // docs/model-spec.md §6: 0.5 · 100 · mean(0.1/1.00001, 0.2/2.00001) = 4.99996250031...
  CHECK(t.value(ops::mape(t, p, y, 0.5))[0] == doctest::Approx(4.9999625003125).epsilon(1e-12));
  CHECK(t.value(ops::mape(t, p, y))[0] == doctest::Approx(9.999925000625).epsilon(1e-12));
  // float instantiation: same formula
  Tape<float> tf;
  const float pf[] = {1.1f, 1.8f}, yf[] = {1.0f, 2.0f};
  CHECK(tf.value(ops::mape(tf, tf.constant(pf, Shape{2}), tf.constant(yf, Shape{2})))[0] ==
        doctest::Approx(9.999925).epsilon(1e-5));
}

TEST_CASE("mape gradient: hand values and zero at |y − ŷ| = 0") {
  Parameter<double> p;
  p.name = "pred";
  p.shape = Shape{3};
  p.value = {1.5, 2.0, 1.0};
  p.grad.assign(3, 0.0);
  const double yv[] = {1.0, 2.0, 2.0};
  Tape<double> t;
  NodeId l = ops::mape(t, t.param(p), t.constant(yv, Shape{3}), 0.5);
  t.backward(l);
  // dL/dŷ_i = 0.5·100/3 · sign(ŷ_i − y_i)/(y_i + 1e-5)
  CHECK(p.grad[0] == doctest::Approx(50.0 / 3.0 / 1.00001).epsilon(1e-12));
  CHECK(p.grad[1] == 0.0);
  CHECK(p.grad[2] == doctest::Approx(-50.0 / 3.0 / 2.00001).epsilon(1e-12));
}

TEST_CASE("dropout forward: mask from counter_uniform, scaling 1/(1−p), keep rate ≈ 1−p") {
  const int64_t n = 20000;
  std::vector<float> ones(size_t(n), 1.0f);
  Tape<float> t;
  Rng rng(77);
  rng.take(5);
  NodeId x = t.constant(ones.data(), Shape{n});
  // 0.25 is k/2^24 exactly; 0.05 (the model's rate), 0.3 and 1/3 are not: the kernel's integer
  // threshold must give the float comparison's mask for both kinds
  for (double p : {0.25, 0.05, 0.3, 1.0 / 3.0}) {
    INFO("p = " << p);
    const uint64_t offset = rng.counter();
    NodeId y = ops::dropout(t, x, p, rng);
    CHECK(rng.counter() == offset + uint64_t(n));  // takes exactly n draws
    int64_t kept = 0;
    bool all_match = true;
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = double(counter_uniform(77, offset, uint64_t(i))) >= p;
      const float expect = keep ? float(1.0 / (1.0 - p)) : 0.0f;
      all_match = all_match && t.value(y)[i] == expect;
      kept += keep;
    }
    CHECK(all_match);
    CHECK(kept > int64_t((0.97 - p) * n));
    CHECK(kept < int64_t((1.03 - p) * n));
  }
  // p == 1 drops everything
  NodeId z = ops::dropout(t, x, 1.0, rng);
  bool all_zero = true;
  for (int64_t i = 0; i < n; ++i) all_zero = all_zero && t.value(z)[i] == 0.0f;
  CHECK(all_zero);
}

// ---------------------------------------------------------------------------------------------
// The checker itself, accumulation, modes.
// ---------------------------------------------------------------------------------------------

namespace {
/// y = 3·x with a backward that uses `factor` (3 is right, anything else is a planted bug).
NodeId triple_with_backward_factor(Tape<double>& t, NodeId x, double factor) {
  NodeId y = t.new_node(t.shape(x), "triple", {x});
  const int64_t n = t.value(x).numel();
  for (int64_t i = 0; i < n; ++i) t.value(y)[i] = 3.0 * t.value(x)[i];
  t.set_backward(y, [x, n, factor](Tape<double>& tp, NodeId self) {
    double* gx = tp.grad_acc(x);
    if (!gx) return;
    for (int64_t i = 0; i < n; ++i) gx[i] += factor * tp.grad_acc(self)[i];
  });
  return y;
}
}  // namespace

TEST_CASE("grad_check detects a broken backward") {
  auto x = random_param("x", Shape{2, 3}, 121);
  GradCheckResult good = grad_check({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, triple_with_backward_factor(t, t.param(x), 3.0), 122);
  });
  CHECK(good.ok);
  GradCheckResult bad = grad_check({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, triple_with_backward_factor(t, t.param(x), 2.0), 122);
  });
  CHECK_FALSE(bad.ok);
  CHECK(bad.max_rel_err > 0.3);
  CHECK(contains(bad.worst, "x["));
  CHECK(contains(bad.worst, "analytic"));
  // a slightly wrong factor (1e-3 relative) is still caught
  GradCheckResult subtle = grad_check({&x}, [&](Tape<double>& t) {
    return weighted_sum(t, triple_with_backward_factor(t, t.param(x), 3.003), 122);
  });
  CHECK_FALSE(subtle.ok);
  // bad arguments
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { grad_check({}, [&](Tape<double>& t) { return t.param(x); }); }),
                 "no parameters"));
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { grad_check({&x}, [&](Tape<double>& t) { return t.param(x); }); }),
                 "scalar"));
}

TEST_CASE("gradients accumulate when a value is used twice") {
  Parameter<double> x;
  x.name = "x";
  x.shape = Shape{3};
  x.value = {0.5, -1.0, 2.0};
  x.grad.assign(3, 0.0);
  {
    // x used by two ops: L = Σ x² + Σ 3x → dL/dx = 2x + 3
    Tape<double> t;
    NodeId px = t.param(x);
    NodeId l = ops::add(t, ops::sum(t, ops::mul(t, px, px)), ops::sum(t, ops::scale(t, px, 3.0)));
    t.backward(l);
    CHECK(x.grad == std::vector<double>{4.0, 1.0, 7.0});
    // a second backward on another tape accumulates (+=) into the parameter's gradient
    Tape<double> t2;
    NodeId px2 = t2.param(x);
    t2.backward(ops::sum(t2, ops::add(t2, px2, px2)));
    CHECK(x.grad == std::vector<double>{6.0, 3.0, 9.0});
  }
  // a parameter used in two places (two param leaves of the same weight, one intermediate
  // consumed by two ops)
  auto w = random_param("w", Shape{3, 4}, 131);
  auto a = random_param("a", Shape{2, 4}, 132);
  auto b = random_param("b", Shape{5, 4}, 133);
  expect_grads_ok({&w, &a, &b}, [&](Tape<double>& t) {
    NodeId ya = ops::linear(t, t.param(a), t.param(w));
    NodeId yb = ops::linear(t, t.param(b), t.param(w));
    NodeId h = ops::tanh(t, ya);
    NodeId both = ops::concat(t, {h, yb, ops::mul(t, h, h)}, 0);
    return weighted_sum(t, both, 134);
  });
}

TEST_CASE("every op accumulates (+=) into an input gradient that is already non-zero") {
  // x feeds the op under test first and a later scale op second; the later op's backward runs
  // first, so an op that overwrote (=) its input gradient instead of adding would fail here.
  auto x = random_param("x", Shape{4, 3}, 171, /*away_from_zero=*/true);
  auto w = random_param("w", Shape{2, 3}, 172);
  auto y = random_param("y", Shape{4, 3}, 173, false, 2.0, 3.0);
  using Build = std::function<NodeId(Tape<double>&, NodeId)>;
  std::vector<std::pair<const char*, Build>> cases = {
      {"linear", [&](Tape<double>& t, NodeId a) { return ops::linear(t, a, t.param(w)); }},
      {"linear_elu", [&](Tape<double>& t, NodeId a) { return ops::linear_elu(t, a, t.param(w)); }},
      {"add", [&](Tape<double>& t, NodeId a) { return ops::add(t, a, t.param(y)); }},
      {"mul", [&](Tape<double>& t, NodeId a) { return ops::mul(t, a, t.param(y)); }},
      {"scale", [&](Tape<double>& t, NodeId a) { return ops::scale(t, a, 1.7); }},
      {"elu", [&](Tape<double>& t, NodeId a) { return ops::elu(t, a); }},
      {"leaky_relu", [&](Tape<double>& t, NodeId a) { return ops::leaky_relu(t, a); }},
      {"sigmoid", [&](Tape<double>& t, NodeId a) { return ops::sigmoid(t, a); }},
      {"tanh", [&](Tape<double>& t, NodeId a) { return ops::tanh(t, a); }},
      {"dropout",
       [&](Tape<double>& t, NodeId a) {
         Rng r(5);
         return ops::dropout(t, a, 0.3, r);
       }},
      {"reshape", [&](Tape<double>& t, NodeId a) { return ops::reshape(t, a, Shape{12}); }},
      {"concat",
       [&](Tape<double>& t, NodeId a) {
         return ops::concat(t, {a, t.param(y)}, 1);
       }},
      {"slice", [&](Tape<double>& t, NodeId a) { return ops::slice(t, a, 0, 1, 2); }},
      {"index_select",
       [&](Tape<double>& t, NodeId a) {
         return ops::index_select(t, a, 0, {1, 1, 3});
       }},
      {"select_columns",
       [&](Tape<double>& t, NodeId a) {
         return ops::select_columns(t, a, {2, 0, 2});
       }},
      {"gather_rows",
       [&](Tape<double>& t, NodeId a) {
         return ops::gather_rows(t, {a, t.param(y)}, 3, {0, 1, 0}, {3, 0, 3}, Shape{3, 3});
       }},
      {"stack",
       [&](Tape<double>& t, NodeId a) {
         return ops::stack(t, {a, t.param(y)}, 1);
       }},
      {"broadcast_rows",
       [&](Tape<double>& t, NodeId a) {
         return ops::broadcast_rows(t, ops::slice(t, a, 0, 2, 1), 3);
       }},
      {"sum", [&](Tape<double>& t, NodeId a) { return ops::sum(t, a); }},
      {"mean", [&](Tape<double>& t, NodeId a) { return ops::mean(t, a); }},
      {"mse", [&](Tape<double>& t, NodeId a) { return ops::mse(t, a, t.param(y)); }},
      {"mape", [&](Tape<double>& t, NodeId a) { return ops::mape(t, a, t.param(y), 2.0); }},
  };
  for (auto& [name, build] : cases) {
    CAPTURE(name);
    expect_grads_ok({&x, &y}, [&](Tape<double>& t) {
      NodeId px = t.param(x);
      NodeId first = build(t, px);  // created first → its backward runs last
      NodeId later = ops::scale(t, px, 0.7);
      return ops::add(t, weighted_sum(t, first, 181), weighted_sum(t, later, 182));
    });
  }
}

TEST_CASE("no_grad mode records no closures") {
  auto w = random_param("w", Shape{3, 4}, 141);
  auto x = random_param("x", Shape{2, 4}, 142);
  Tape<double> t;
  t.set_grad_enabled(false);
  Rng rng(3);
  NodeId l =
      ops::mape(t, ops::reshape(t, ops::elu(t, ops::linear(t, t.param(x), t.param(w))), Shape{6}),
                t.full(Shape{6}, 2.0));
  NodeId s = ops::sum(t, ops::dropout(t, ops::concat(t, {t.param(x), t.param(x)}, 0), 0.5, rng));
  CHECK(t.size() > 8);
  for (NodeId i = 0; i < NodeId(t.size()); ++i) {
    CHECK_FALSE(bool(t.node(i).backward));
    CHECK_FALSE(t.requires_grad(i));
  }
  t.backward(l);
  t.backward(s);
  for (double g : w.grad) CHECK(g == 0.0);
  CHECK(std::isfinite(t.value(l)[0]));
}

TEST_CASE("eval mode and p == 0 make dropout the identity") {
  auto x = random_param("x", Shape{4, 5}, 151);
  Tape<double> t;
  t.set_training(false);
  Rng rng(9);
  NodeId px = t.param(x);
  NodeId y = ops::dropout(t, px, 0.5, rng);
  CHECK(y == px);
  CHECK(rng.counter() == 0);  // no draws taken
  t.set_training(true);
  NodeId z = ops::dropout(t, px, 0.0, rng);
  CHECK(z == px);
  NodeId w = ops::dropout(t, px, 0.5, rng);
  CHECK(w != px);
  CHECK(rng.counter() == 20);
  CHECK(
      contains(error_of<std::invalid_argument>([&] { ops::dropout(t, px, 1.5, rng); }), "dropout"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::dropout(t, px, -0.1, rng); }),
                 "dropout"));
}

// ---------------------------------------------------------------------------------------------
// Determinism, arena, errors.
// ---------------------------------------------------------------------------------------------

namespace {

struct SmallMlp {
  ParameterStore<float> store;
  std::vector<float> x, y;
  static constexpr int64_t kB = 256, kIn = 64, kHidden = 512;

  SmallMlp() {
    Rng rng(2024);
    auto fill = [&](Parameter<float>& p, double bound) {
      for (float& v : p.value) v = float(rng.uniform(-bound, bound));
    };
    fill(store.add("l1.weight", Shape{kHidden, kIn}), 0.2);
    fill(store.add("l1.bias", Shape{kHidden}), 0.1);
    fill(store.add("l2.weight", Shape{1, kHidden}), 0.1);
    fill(store.add("l2.bias", Shape{1}), 0.1);
    x.resize(size_t(kB * kIn));
    for (float& v : x) v = float(rng.uniform(-1, 1));
    y.resize(size_t(kB));
    for (float& v : y) v = float(rng.uniform(0.5, 3));
  }
  /// One forward/backward; returns the loss, gradients left in the store.
  float step(Tape<float>& t) {
    store.zero_grad();
    t.clear();
    Rng rng(99);
    NodeId h = ops::linear(t, t.constant(x.data(), Shape{kB, kIn}), t.param(store.at("l1.weight")),
                           t.param(store.at("l1.bias")));
    h = ops::dropout(t, ops::elu(t, h), 0.2, rng);
    NodeId o = ops::linear(t, h, t.param(store.at("l2.weight")), t.param(store.at("l2.bias")));
    NodeId pred = ops::leaky_relu(t, ops::reshape(t, o, Shape{kB}));
    NodeId l = ops::add(t, ops::mape(t, pred, t.constant(y.data(), Shape{kB}), 0.5f),
                        ops::scale(t, ops::mean(t, ops::mul(t, h, h)), 0.01f));
    t.backward(l);
    return t.value(l)[0];
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("determinism: same seed and thread count give bit-identical loss and gradients") {
  const int saved = num_threads();
  set_num_threads(2);
  SmallMlp m;
  Tape<float> t;
  const float l1 = m.step(t);
  std::vector<std::vector<float>> g1;
  for (auto& p : m.store.all()) g1.push_back(p.grad);
  const float l2 = m.step(t);
  CHECK(std::memcmp(&l1, &l2, sizeof(float)) == 0);
  size_t k = 0;
  bool nonzero = false;
  for (auto& p : m.store.all()) {
    CAPTURE(p.name);
    CHECK(same_bits(g1[k++], p.grad));
    for (float g : p.grad) nonzero = nonzero || g != 0.0f;
  }
  CHECK(nonzero);
  CHECK(std::isfinite(l1));
  // Reductions use fixed blocks: a large sum is bit-identical for 1 and 2 threads.
  std::vector<float> big(300000);
  Rng rng(5);
  for (float& v : big) v = float(rng.uniform(-1, 1));
  Tape<float> ta;
  set_num_threads(1);
  const float s1 = ta.value(ops::sum(ta, ta.constant(big.data(), Shape{int64_t(big.size())})))[0];
  set_num_threads(2);
  const float s2 = ta.value(ops::sum(ta, ta.constant(big.data(), Shape{int64_t(big.size())})))[0];
  CHECK(std::memcmp(&s1, &s2, sizeof(float)) == 0);
  set_num_threads(saved);
}

TEST_CASE("large tensors (OpenMP paths) match plain loops") {
  const int saved = num_threads();
  set_num_threads(2);
  const int64_t rows = 64, cols = 1000;  // 64 000 elements: above the parallel threshold
  std::vector<float> xv(size_t(rows * cols));
  Rng rng(8);
  for (float& v : xv) v = float(rng.uniform(-2, 2));
  Parameter<float> x;
  x.name = "x";
  x.shape = Shape{rows, cols};
  x.value = xv;
  x.grad.assign(xv.size(), 0.0f);
  Tape<float> t;
  NodeId px = t.param(x);
  std::vector<int64_t> index{5, 0, 5, 63, 5};
  NodeId sel = ops::index_select(t, px, 0, index);
  NodeId sel_cols = ops::index_select(t, px, 1, {999, 1, 999});
  NodeId e = ops::elu(t, px);
  NodeId s = ops::add(t, ops::add(t, ops::sum(t, sel), ops::sum(t, sel_cols)), ops::sum(t, e));
  // forward: gather and elu element by element, sum against a plain double loop
  bool gather_ok = true, elu_ok = true;
  for (size_t j = 0; j < index.size(); ++j)
    for (int64_t c = 0; c < cols; ++c)
      gather_ok =
          gather_ok && t.value(sel)[int64_t(j) * cols + c] == xv[size_t(index[j] * cols + c)];
  for (int64_t i = 0; i < rows * cols; ++i)
    elu_ok = elu_ok &&
             std::abs(t.value(e)[i] -
                      (xv[size_t(i)] > 0 ? xv[size_t(i)] : std::expm1(xv[size_t(i)]))) <= 1e-6f;
  CHECK(gather_ok);
  CHECK(elu_ok);
  double plain = 0;
  for (int64_t i = 0; i < rows * cols; ++i) plain += double(t.value(e)[i]);
  CHECK(double(t.value(ops::sum(t, e))[0]) == doctest::Approx(plain).epsilon(1e-6));
  // backward: dx = (#times row picked) + (#times col picked) + elu'(x)
  t.backward(s);
  bool grad_ok = true;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xv[size_t(r * cols + c)];
      const float picks =
          float((r == 5) * 3 + (r == 0) + (r == 63)) + float((c == 999) * 2 + (c == 1));
      const float expect = picks + (v > 0 ? 1.0f : std::exp(v));
      grad_ok = grad_ok &&
                std::abs(x.grad[size_t(r * cols + c)] - expect) <= 1e-5f * (1 + std::abs(expect));
    }
  CHECK(grad_ok);
  set_num_threads(saved);
}

TEST_CASE("arena: peak reported and memory reused after clear()") {
  SmallMlp m;
  Tape<float> t;
  m.step(t);
  const size_t peak1 = t.peak_bytes();
  const size_t cap1 = t.arena().capacity_bytes();
  // at least the [256, 512] hidden activations (value + gradient) are in the arena
  CHECK(peak1 >= size_t(2 * SmallMlp::kB * SmallMlp::kHidden * sizeof(float)));
  CHECK(cap1 >= peak1);
  for (int i = 0; i < 3; ++i) m.step(t);  // step() clears the tape first
  CHECK(t.peak_bytes() == peak1);
  CHECK(t.arena().capacity_bytes() == cap1);
  t.clear();
  CHECK(t.arena().live_bytes() == 0);
  CHECK(t.size() == 0);
}

TEST_CASE("shape errors name the op and the shapes") {
  Tape<double> t;
  NodeId x = t.full(Shape{2, 5}, 1.0);
  NodeId w = t.full(Shape{3, 4}, 1.0);
  NodeId b = t.full(Shape{4}, 1.0);
  NodeId v = t.full(Shape{3}, 1.0);
  std::string e = error_of<std::invalid_argument>([&] { ops::linear(t, x, w); });
  CHECK(contains(e, "linear"));
  CHECK(contains(e, "[2, 5]"));
  CHECK(contains(e, "[3, 4]"));
  e = error_of<std::invalid_argument>([&] { ops::linear(t, t.full(Shape{2, 4}, 1.0), w, b); });
  CHECK(contains(e, "linear"));
  CHECK(contains(e, "bias [4]"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::linear(t, x, v); }), "weight must be"));
  e = error_of<std::invalid_argument>([&] { ops::add(t, x, w); });
  CHECK(contains(e, "op add"));
  CHECK(contains(e, "[2, 5] vs [3, 4]"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::mul(t, x, w); }), "op mul"));
  e = error_of<std::invalid_argument>([&] { ops::reshape(t, x, Shape{3, 3}); });
  CHECK(contains(e, "reshape"));
  CHECK(contains(e, "[2, 5]"));
  CHECK(contains(e, "[3, 3]"));
  e = error_of<std::invalid_argument>([&] { ops::concat(t, {x, w}, 1); });
  CHECK(contains(e, "concat"));
  CHECK(contains(e, "[2, 5], [3, 4]"));
  CHECK(contains(error_of<std::invalid_argument>([&] {
                   ops::concat(t, {x, x}, 2);
                 }),
                 "dim 2 out of range"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::concat(t, {}, 0); }), "concat"));
  e = error_of<std::invalid_argument>([&] { ops::slice(t, x, 1, 3, 3); });
  CHECK(contains(e, "slice"));
  CHECK(contains(e, "[3, 6)"));
  CHECK(contains(e, "[2, 5]"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::slice(t, x, -3, 0, 1); }), "slice"));
  e = error_of<std::out_of_range>([&] { ops::index_select(t, x, 0, {0, 2}); });
  CHECK(contains(e, "index_select"));
  CHECK(contains(e, "index[1] = 2"));
  CHECK(contains(error_of<std::out_of_range>([&] { ops::index_select(t, x, 1, {-1}); }),
                 "index[0] = -1"));
  e = error_of<std::invalid_argument>([&] { ops::stack(t, {x, w}, 0); });
  CHECK(contains(e, "stack"));
  CHECK(contains(e, "[2, 5], [3, 4]"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::stack(t, {x, x}, 3); }), "stack"));
  e = error_of<std::invalid_argument>([&] { ops::broadcast_rows(t, x, 3); });
  CHECK(contains(e, "broadcast_rows"));
  CHECK(contains(e, "[2, 5]"));
  e = error_of<std::invalid_argument>([&] { ops::mse(t, v, b); });
  CHECK(contains(e, "mse"));
  CHECK(contains(e, "[3]"));
  CHECK(contains(e, "[4]"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::mape(t, v, b); }), "op mape"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::mean(t, t.full(Shape{0}, 1.0)); }),
                 "mean"));
  // the loss must be scalar for backward
  CHECK(contains(error_of<std::logic_error>([&] { t.backward(x); }), "one element"));
}

TEST_CASE("edge cases: empty selections, zero rows, scalars, rank limits") {
  Tape<double> t;
  NodeId x = t.full(Shape{3, 2}, 1.5);
  // empty index → extent 0 along dim; sum of nothing is 0; backward through it gives zeros
  Parameter<double> p;
  p.name = "p";
  p.shape = Shape{3, 2};
  p.value.assign(6, 2.0);
  p.grad.assign(6, 0.0);
  NodeId e = ops::index_select(t, t.param(p), 0, {});
  CHECK(t.shape(e) == Shape{0, 2});
  NodeId se = ops::sum(t, e);
  CHECK(t.value(se)[0] == 0.0);
  t.backward(se);
  for (double g : p.grad) CHECK(g == 0.0);
  // zero rows through linear, broadcast_rows to 0 rows, empty slice
  NodeId w = t.full(Shape{4, 2}, 1.0);
  CHECK(t.shape(ops::linear(t, t.full(Shape{0, 2}, 1.0), w)) == Shape{0, 4});
  CHECK(t.shape(ops::broadcast_rows(t, t.full(Shape{2}, 1.0), 0)) == Shape{0, 2});
  CHECK(t.shape(ops::slice(t, x, 1, 2, 0)) == Shape{3, 0});
  // scalar ↔ [1] reshape
  NodeId s = ops::sum(t, x);
  CHECK(t.value(ops::reshape(t, s, Shape{1, 1}))[0] == 9.0);
  // errors on scalars, negative windows and rank limits
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::linear(t, s, w); }), "linear"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::slice(t, s, 0, 0, 1); }), "scalar"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::slice(t, x, 0, -1, 1); }), "window"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::slice(t, x, 0, 1, -1); }), "window"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::index_select(t, s, 0, {0}); }),
                 "scalar"));
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::concat(t, {s, s}, 0); }), "scalars"));
  NodeId r4 = t.full(Shape{1, 2, 1, 2}, 0.0);
  CHECK(contains(error_of<std::invalid_argument>([&] {
                   ops::stack(t, {r4, r4}, 0);
                 }),
                 "rank would exceed 4"));
  CHECK(contains(error_of<std::invalid_argument>([&] {
                   ops::stack(t, {x, x}, -4);
                 }),
                 "out of range"));
  CHECK(contains(
      error_of<std::invalid_argument>([&] { ops::broadcast_rows(t, t.full(Shape{2}, 1.0), -1); }),
      "rows -1"));
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { ops::mse(t, t.full(Shape{0}, 1.0), t.full(Shape{0}, 1.0)); }),
                 "empty"));
  Rng rng(1);
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::dropout(t, x, std::nan(""), rng); }),
                 "dropout"));
}

TEST_CASE("device dispatch: a CUDA tensor on a CPU tape is refused (not built / mixed devices)") {
  // Without the kernels the dispatch point refuses any CUDA tensor; with them, a CUDA tensor on a
  // CPU tape (or next to a CPU tensor) is a device mix, refused before any kernel runs.
#ifdef LCM_WITH_CUDA
  const std::string why = "inputs on different devices";
#else
  const std::string why = "CUDA backend not built";
#endif
  Tape<float> t;
  NodeId x = t.full(Shape{2, 3}, 1.0f);
  NodeId w = t.full(Shape{4, 3}, 1.0f);
  t.value(w).device = Device::CUDA;
  CHECK(contains(error_of<std::logic_error>([&] { ops::linear(t, x, w); }), "op linear: " + why));
  t.value(x).device = Device::CUDA;
  CHECK(contains(error_of<std::logic_error>([&] { ops::elu(t, x); }), "op elu: " + why));
  CHECK(contains(error_of<std::logic_error>([&] { ops::sum(t, x); }), "op sum: " + why));
  CHECK(contains(error_of<std::logic_error>([&] { ops::concat(t, {x}, 0); }), "op concat: " + why));
}

TEST_CASE("float instantiation matches double on a small graph") {
  auto xd = random_param("x", Shape{3, 4}, 161);
  auto wd = random_param("w", Shape{2, 4}, 162);
  Parameter<float> xf, wf;
  xf.name = "x";
  xf.shape = xd.shape;
  wf.name = "w";
  wf.shape = wd.shape;
  for (double v : xd.value) xf.value.push_back(float(v));
  for (double v : wd.value) wf.value.push_back(float(v));
  xf.grad.assign(xf.value.size(), 0.0f);
  wf.grad.assign(wf.value.size(), 0.0f);
  Tape<double> td;
  Tape<float> tf;
  const double ld = td.value(
      weighted_sum(td, ops::sigmoid(td, ops::linear(td, td.param(xd), td.param(wd))), 7))[0];
  NodeId lf_id = weighted_sum(tf, ops::sigmoid(tf, ops::linear(tf, tf.param(xf), tf.param(wf))), 7);
  const float lf = tf.value(lf_id)[0];
  CHECK(double(lf) == doctest::Approx(ld).epsilon(1e-5));
  td.backward(weighted_sum(td, ops::sigmoid(td, ops::linear(td, td.param(xd), td.param(wd))), 7));
  tf.backward(lf_id);
  for (size_t i = 0; i < wd.grad.size(); ++i)
    CHECK(double(wf.grad[i]) == doctest::Approx(wd.grad[i]).epsilon(1e-4));
}
