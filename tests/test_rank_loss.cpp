// Tests of the ranking losses (engine/ops/rank_loss.cpp, docs/accuracy.md): finite-difference
// gradient checks of l1 and pairwise_logistic, hand-computed forward values and gradients, the
// pair selection (same group only, min_gap) and shape errors.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/tape.hpp"
#include "support/numeric_support.hpp"
#include "support/test_support.hpp"

using namespace lcm;

namespace {

using lcm::test::param_of;

void expect_grads_ok(std::vector<Parameter<double>*> params,
                     const std::function<NodeId(Tape<double>&)>& build) {
  GradCheckResult r = grad_check(params, build);
  INFO("worst: " << r.worst << " max_abs_err " << r.max_abs_err);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("gradcheck l1 and pairwise_logistic") {
  auto p = param_of("pred", {0.3, -1.2, 2.0, 0.9, -0.4, 1.7});
  auto y = param_of("target", {1.0, -0.2, 1.1, 0.1, -1.5, 0.5});  // |p − y| ≥ 0.4: off the kink
  expect_grads_ok({&p, &y},
                  [&](Tape<double>& t) { return ops::l1(t, t.param(p), t.param(y), 0.8); });
  // pairwise: two groups, several ties in the target (tied pairs are not used), weight 0.7
  const std::vector<double> target{1.0, 0.5, 1.0, 2.0, -1.0, 0.5};
  const std::vector<int32_t> group{0, 0, 0, 1, 1, 1};
  expect_grads_ok({&p}, [&](Tape<double>& t) {
    return ops::pairwise_logistic(t, t.param(p), target, group, 0.7);
  });
  // through a further op, so the incoming gradient is not 1
  expect_grads_ok({&p}, [&](Tape<double>& t) {
    NodeId a = ops::pairwise_logistic(t, ops::tanh(t, t.param(p)), target, group, 1.0, 0.2);
    return ops::scale(t, a, 3.0);
  });
}

TEST_CASE("l1: hand values") {
  Tape<double> t;
  const double pv[] = {1, 2, 4}, yv[] = {2, 2, 1};
  NodeId l = ops::l1(t, t.constant(pv, Shape{3}), t.constant(yv, Shape{3}), 0.5);
  CHECK(t.value(l)[0] == doctest::Approx(0.5 * 4.0 / 3.0));  // (1 + 0 + 3) / 3 · 0.5
}

TEST_CASE("pairwise_logistic: hand values, gradients and pair selection") {
  // group 0 = {s0, s1}: target 3 > 1 → one pair; softplus(−(1 − 0)) = ln(1 + e^−1)
  // group 1 = {s2} alone → no pair. σ(−1) = 0.2689414213699951 → ds0 = −σ, ds1 = +σ, ds2 = 0.
  auto s = param_of("s", {1.0, 0.0, 2.0});
  Tape<double> t;
  NodeId l = ops::pairwise_logistic(t, t.param(s), std::vector<double>{3, 1, 2}, {0, 0, 1});
  CHECK(t.value(l)[0] == doctest::Approx(0.31326168751822286));
  t.backward(l);
  CHECK(s.grad[0] == doctest::Approx(-0.2689414213699951));
  CHECK(s.grad[1] == doctest::Approx(0.2689414213699951));
  CHECK(s.grad[2] == 0.0);
  // one group: pairs (0,1), (0,2), (2,1): softplus(−1) + softplus(1) + softplus(−2), mean of 3
  Tape<double> t2;
  NodeId l2 = ops::pairwise_logistic(t2, t2.param(s), std::vector<double>{3, 1, 2}, {0, 0, 0});
  CHECK(t2.value(l2)[0] ==
        doctest::Approx((0.31326168751822286 + 1.3132616875182228 + 0.12692801104297263) / 3));
  // min_gap 0.6 with targets [3, 1, 2.5]: (0,2) differs by 0.5 only → pairs (0,1), (2,1):
  // (softplus(−1) + softplus(−2)) / 2
  Tape<double> t3;
  NodeId l3 =
      ops::pairwise_logistic(t3, t3.param(s), std::vector<double>{3, 1, 2.5}, {0, 0, 0}, 1.0, 0.6);
  CHECK(t3.value(l3)[0] == doctest::Approx((0.31326168751822286 + 0.12692801104297263) / 2));
  // no pair at all (equal targets, or every program alone): loss 0, no gradient
  auto s2 = param_of("s2", {1.0, 0.0});
  Tape<double> t4;
  NodeId l4 = ops::pairwise_logistic(t4, t4.param(s2), std::vector<double>{2, 2}, {0, 0});
  CHECK(t4.value(l4)[0] == 0.0);
  t4.backward(l4);
  CHECK(s2.grad[0] == 0.0);
  // a correctly ordered pair with a large margin costs almost nothing; a reversed one a lot
  Tape<double> t5;
  const double good[] = {10.0, 0.0}, bad[] = {0.0, 10.0};
  NodeId lg =
      ops::pairwise_logistic(t5, t5.constant(good, Shape{2}), std::vector<double>{1, 0}, {4, 4});
  NodeId lb =
      ops::pairwise_logistic(t5, t5.constant(bad, Shape{2}), std::vector<double>{1, 0}, {4, 4});
  CHECK(t5.value(lg)[0] < 1e-4);
  CHECK(t5.value(lb)[0] == doctest::Approx(10.0).epsilon(1e-4));
}

TEST_CASE("rank losses: shape errors") {
  Tape<double> t;
  const double a[] = {1, 2, 3}, b[] = {1, 2};
  NodeId x = t.constant(a, Shape{3}), y = t.constant(b, Shape{2});
  CHECK_THROWS_AS(ops::l1(t, x, y), std::invalid_argument);
  CHECK_THROWS_AS(ops::pairwise_logistic(t, x, std::vector<double>{1, 2}, {0, 0, 0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::pairwise_logistic(t, x, std::vector<double>{1, 2, 3}, {0, 0}),
                  std::invalid_argument);
  NodeId m = t.constant(a, Shape{1, 3});
  CHECK_THROWS_AS(ops::pairwise_logistic(t, m, std::vector<double>{1, 2, 3}, {0, 0, 0}),
                  std::invalid_argument);
}
