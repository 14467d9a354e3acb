// Tests of the ListNet, LambdaRank and Huber losses (engine/ops/rank_loss.cpp) and of their
// training_loss forms (train/losses.cpp): finite-difference gradient checks on the CPU and the
// (emulated or real) CUDA backend, values and gradients against hand computations from the papers'
// formulas on a batch of two programs (3 + 2 schedules), the LambdaRank weights against a brute
// force |ΔnDCG| from model::ndcg (model-spec §7.3), programs with one schedule ignored, and Huber
// on both sides of δ.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/tape.hpp"
#include "model/metrics.hpp"
#include "support/numeric_support.hpp"
#include "train/losses.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

using namespace lcm;

namespace {

using lcm::test::param_of;

/// The backends to check: the CPU, and cuda:0 when a (real or emulated) device is visible.
std::vector<Device> backends() {
  std::vector<Device> out{Device::CPU};
#ifdef LCM_WITH_CUDA
  std::string why;
  if (cuda::device_count(&why) > 0) out.push_back(Device::CUDA);
#endif
  return out;
}

std::string name_of(Device d) {
  return d == Device::CUDA ? "cuda" : "cpu";
}

/// Finite-difference check of `build` on device d (parameters copied to the device first).
void expect_grads_ok(Device d, Parameter<double>& p,
                     const std::function<NodeId(Tape<double>&, NodeId)>& build) {
  ParameterStore<double> store;
  Parameter<double>& q = store.add(p.name, p.shape);
  q.value = p.value;
  GradCheckResult r = grad_check({&q}, [&](Tape<double>& t) {
    if (d == Device::CUDA) {
      parameters_to_device(store, 0);
      t.set_device(Device::CUDA, 0);
    }
    return build(t, t.param(q));
  });
  INFO(name_of(d) << " worst: " << r.worst << " max_abs_err " << r.max_abs_err);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

/// The loss value and the gradient of a scalar loss of the scores `s` on device d.
std::pair<double, std::vector<double>> value_and_grad(
    Device d, const std::vector<double>& s,
    const std::function<NodeId(Tape<double>&, NodeId)>& build) {
  ParameterStore<double> store;
  Parameter<double>& q = store.add("s", Shape{int64_t(s.size())});
  q.value = s;
  q.grad.assign(s.size(), 0.0);
  Tape<double> t;
  if (d == Device::CUDA) {
    parameters_to_device(store, 0);
    t.set_device(Device::CUDA, 0);
  }
  const NodeId l = build(t, t.param(q));
  const double v = to_host(t.value(l))[0];
  t.backward(l);
  if (d == Device::CUDA) parameters_to_host(store, true);
  return {v, q.grad};
}

double softplus(double z) {
  return std::log1p(std::exp(z));
}
double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

// The batch of the value tests: program 10 has 3 schedules, program 20 has 2.
const std::vector<double> kScore{0.5, -0.3, 1.2, 0.1, 0.8};
const std::vector<double> kSpeedup{2.0, 1.0, 0.5, 3.0, 1.5};
const std::vector<int32_t> kGroup{10, 10, 10, 20, 20};

std::vector<double> logs(const std::vector<double>& y) {
  std::vector<double> out;
  for (double v : y) out.push_back(std::log(v));
  return out;
}

/// DCG of the schedules `idx` ranked by `score` descending with linear gains (no ties here).
double brute_ndcg(const std::vector<double>& gain, const std::vector<double>& score,
                  const std::vector<int>& idx) {
  std::vector<double> g, s;
  for (int i : idx) g.push_back(gain[size_t(i)]), s.push_back(score[size_t(i)]);
  return model::ndcg(g, s);
}

}  // namespace

TEST_CASE("listnet: hand value and gradient on 3 + 2 schedules (Cao et al. 2007)") {
  // Cao et al.: top-one probability P(i) = exp(φ_i) / Σ exp(φ_k); the loss is the cross-entropy
  // −Σ P_y(i) log P_s(i) per query. With φ = ln y the target P_y(i) = y_i / Σ y (temperature 1).
  const double w = 0.7;
  auto p_of = [](const std::vector<double>& y) {
    double z = 0;
    for (double v : y) z += v;
    std::vector<double> p;
    for (double v : y) p.push_back(v / z);
    return p;
  };
  auto q_of = [](const std::vector<double>& s) {
    double z = 0;
    for (double v : s) z += std::exp(v);
    std::vector<double> q;
    for (double v : s) q.push_back(std::exp(v) / z);
    return q;
  };
  const auto p0 = p_of({2.0, 1.0, 0.5}), q0 = q_of({0.5, -0.3, 1.2});
  const auto p1 = p_of({3.0, 1.5}), q1 = q_of({0.1, 0.8});
  double ce0 = 0, ce1 = 0;
  for (size_t i = 0; i < 3; ++i) ce0 -= p0[i] * std::log(q0[i]);
  for (size_t i = 0; i < 2; ++i) ce1 -= p1[i] * std::log(q1[i]);
  const double expected = w * (ce0 + ce1) / 2;
  const std::vector<double> expected_grad{w * (q0[0] - p0[0]) / 2, w * (q0[1] - p0[1]) / 2,
                                          w * (q0[2] - p0[2]) / 2, w * (q1[0] - p1[0]) / 2,
                                          w * (q1[1] - p1[1]) / 2};
  for (Device d : backends()) {
    INFO(name_of(d));
    auto [v, g] = value_and_grad(d, kScore, [&](Tape<double>& t, NodeId s) {
      return ops::listnet(t, s, logs(kSpeedup), kGroup, w);
    });
    CHECK(v == doctest::Approx(expected).epsilon(1e-12));
    for (size_t i = 0; i < g.size(); ++i)
      CHECK(g[i] == doctest::Approx(expected_grad[i]).epsilon(1e-10));
  }
  // a perfect score (s = ln y + c) reaches the minimum of the cross-entropy, the entropy of p
  double h0 = 0;
  for (double pi : p0) h0 -= pi * std::log(pi);
  Tape<double> t;
  const double perfect[] = {std::log(2.0) + 5, std::log(1.0) + 5, std::log(0.5) + 5};
  const NodeId l = ops::listnet(t, t.constant(perfect, Shape{3}), logs({2.0, 1.0, 0.5}),
                                std::vector<int32_t>{1, 1, 1});
  CHECK(t.value(l)[0] == doctest::Approx(h0).epsilon(1e-12));
}

TEST_CASE("lambdarank: weights are the brute-force |ΔnDCG| of a swap; hand value and gradient") {
  // pairs of pairwise_logistic (y_i > y_j, same program), in group then index order
  const std::vector<std::pair<int64_t, int64_t>> pairs{{0, 1}, {0, 2}, {1, 2}, {3, 4}};
  const std::vector<double> w = ops::lambdarank_weights(kScore, kSpeedup, kGroup, pairs);
  REQUIRE(w.size() == pairs.size());
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    const std::vector<int> idx =
        kGroup[size_t(i)] == 10 ? std::vector<int>{0, 1, 2} : std::vector<int>{3, 4};
    std::vector<double> swapped = kScore;
    std::swap(swapped[size_t(i)], swapped[size_t(j)]);
    const double delta =
        std::fabs(brute_ndcg(kSpeedup, swapped, idx) - brute_ndcg(kSpeedup, kScore, idx));
    INFO("pair " << i << "," << j);
    CHECK(w[p] == doctest::Approx(delta).epsilon(1e-12));
    CHECK(w[p] > 0);  // no pair here keeps nDCG when swapped
  }
  const double wt = 0.9;
  double expected = 0;
  std::vector<double> g(5, 0.0);
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    const double d = kScore[size_t(i)] - kScore[size_t(j)];
    expected += w[p] * softplus(-d);
    g[size_t(i)] -= wt * w[p] * sigmoid(-d) / 4;
    g[size_t(j)] += wt * w[p] * sigmoid(-d) / 4;
  }
  expected *= wt / 4;
  for (Device d : backends()) {
    INFO(name_of(d));
    auto [v, gr] = value_and_grad(d, kScore, [&](Tape<double>& t, NodeId s) {
      return ops::lambdarank(t, s, logs(kSpeedup), kSpeedup, kGroup, wt);
    });
    CHECK(v == doctest::Approx(expected).epsilon(1e-12));
    for (size_t i = 0; i < gr.size(); ++i) CHECK(gr[i] == doctest::Approx(g[i]).epsilon(1e-10));
  }
  // a correctly ordered program has smaller weights on its pairs' swaps at the bottom than at
  // the top: swapping ranks 2 and 3 moves less DCG than swapping ranks 1 and 2 (same gain gap)
  const std::vector<double> ws =
      ops::lambdarank_weights({3, 2, 1}, {3, 2, 1}, {0, 0, 0}, {{0, 1}, {1, 2}});
  CHECK(ws[0] > ws[1]);
}

TEST_CASE("listnet and lambdarank ignore programs with one schedule") {
  // kGroup plus program 30 with one schedule (index 5): the losses equal those without it and
  // its score gets no gradient
  std::vector<double> s = kScore, y = kSpeedup;
  std::vector<int32_t> g = kGroup;
  s.push_back(2.0), y.push_back(4.0), g.push_back(30);
  for (Device d : backends()) {
    INFO(name_of(d));
    auto [a, ga] = value_and_grad(
        d, s, [&](Tape<double>& t, NodeId x) { return ops::listnet(t, x, logs(y), g, 1.0); });
    auto [b, gb] = value_and_grad(d, kScore, [&](Tape<double>& t, NodeId x) {
      return ops::listnet(t, x, logs(kSpeedup), kGroup, 1.0);
    });
    CHECK(a == doctest::Approx(b).epsilon(1e-14));  // G = 2 both times, not 3
    CHECK(ga[5] == 0.0);
    auto [c, gc] = value_and_grad(
        d, s, [&](Tape<double>& t, NodeId x) { return ops::lambdarank(t, x, logs(y), y, g, 1.0); });
    auto [e, ge] = value_and_grad(d, kScore, [&](Tape<double>& t, NodeId x) {
      return ops::lambdarank(t, x, logs(kSpeedup), kSpeedup, kGroup, 1.0);
    });
    CHECK(c == doctest::Approx(e).epsilon(1e-14));
    CHECK(gc[5] == 0.0);
    // only singletons: 0, no gradient
    auto [z, gz] = value_and_grad(d, {1.0, 2.0}, [&](Tape<double>& t, NodeId x) {
      return ops::listnet(t, x, std::vector<double>{0.1, 0.2}, std::vector<int32_t>{1, 2}, 1.0);
    });
    CHECK(z == 0.0);
    CHECK(gz[0] == 0.0);
    CHECK(gz[1] == 0.0);
  }
}

TEST_CASE("huber: value and gradient on both sides of delta") {
  // δ = 0.5, d = pred − target = {0.3, −0.2, 1.2, −2.0}: ½d² inside, δ(|d| − ½δ) outside
  const double delta = 0.5, w = 0.8;
  const std::vector<double> pred{1.3, -0.2, 2.2, -1.0}, target{1.0, 0.0, 1.0, 1.0};
  const double terms[] = {0.5 * 0.09, 0.5 * 0.04, 0.5 * (1.2 - 0.25), 0.5 * (2.0 - 0.25)};
  const double expected = w * (terms[0] + terms[1] + terms[2] + terms[3]) / 4;
  const std::vector<double> grad{w * 0.3 / 4, w * -0.2 / 4, w * 0.5 / 4, w * -0.5 / 4};
  for (Device d : backends()) {
    INFO(name_of(d));
    auto [v, g] = value_and_grad(d, pred, [&](Tape<double>& t, NodeId x) {
      return ops::huber(t, x, t.constant(target.data(), Shape{4}), delta, w);
    });
    CHECK(v == doctest::Approx(expected).epsilon(1e-12));
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(grad[i]).epsilon(1e-10));
  }
  Tape<double> t;
  const double a[] = {1, 2}, b[] = {1};
  CHECK_THROWS_AS(ops::huber(t, t.constant(a, Shape{2}), t.constant(b, Shape{1}), 0.5),
                  std::invalid_argument);
  CHECK_THROWS_AS(ops::huber(t, t.constant(a, Shape{2}), t.constant(a, Shape{2}), 0.0),
                  std::invalid_argument);
}

TEST_CASE("gradcheck listnet, lambdarank and huber on every backend") {
  const std::vector<double> target{0.3, -1.0, 0.7, 2.0, 0.5, 1.0, -0.5, 0.25, 1.5};
  std::vector<double> gain;
  for (double v : target) gain.push_back(std::exp(v));
  const std::vector<int32_t> group{4, 4, 4, 1, 1, 7, 7, 7, 8};
  for (Device d : backends()) {
    auto p = param_of("s", {0.4, -1.1, 1.7, 0.9, -0.4, 1.2, -0.8, 0.15, 0.6});
    expect_grads_ok(d, p, [&](Tape<double>& t, NodeId s) {
      return ops::scale(t, ops::listnet(t, ops::tanh(t, s), target, group, 0.8), 3.0);
    });
    expect_grads_ok(d, p, [&](Tape<double>& t, NodeId s) {
      return ops::scale(t, ops::lambdarank(t, ops::tanh(t, s), target, gain, group, 0.6), 2.0);
    });
    // d = s − target spans both sides of δ = 0.5
    expect_grads_ok(d, p, [&](Tape<double>& t, NodeId s) {
      return ops::huber(t, s, ops::scale(t, ops::tanh(t, s), 0.1), 0.5, 1.3);
    });
  }
}

TEST_CASE("training_loss: the new objectives are the ops they name, combined with rank_weight") {
  data::BatchTensors bt;
  bt.batch = 6;
  bt.speedup = {2.0f, 1.0f, 0.5f, 3.0f, 1.5f, 4.0f};
  bt.program_of = {10, 10, 10, 20, 20, 30};
  const std::vector<float> out{0.5f, -0.3f, 1.2f, 0.1f, 0.8f, 2.0f};
  std::vector<float> ly;
  for (float y : bt.speedup) ly.push_back(std::log(y));
  auto value = [&](auto build) {
    Tape<float> t;
    return double(t.value(build(t, t.constant(out.data(), Shape{6})))[0]);
  };
  auto loss = [&](const char* name, float rw, float delta) {
    const config::Objective l = config::parse_objective(name);
    return value([&](Tape<float>& t, NodeId x) {
      return train::training_loss(t, l, x, bt, 0.75f, rw, delta);
    });
  };
  auto target = [&](Tape<float>& t) { return t.constant(ly.data(), Shape{6}); };
  const double mse = value(
      [&](Tape<float>& t, NodeId x) { return ops::scale(t, ops::mse(t, x, target(t)), 0.75f); });
  const double hub =
      value([&](Tape<float>& t, NodeId x) { return ops::huber(t, x, target(t), 0.3f, 0.75f); });
  const double ln =
      value([&](Tape<float>& t, NodeId x) { return ops::listnet(t, x, ly, bt.program_of, 1.0f); });
  const double lr = value([&](Tape<float>& t, NodeId x) {
    return ops::lambdarank(t, x, ly, bt.speedup, bt.program_of, 1.0f);
  });
  const double pw = value([&](Tape<float>& t, NodeId x) {
    return ops::pairwise_logistic(t, x, ly, bt.program_of, 1.0f);
  });
  CHECK(loss("listnet", 0.2f, 0.3f) == doctest::Approx(0.75 * ln).epsilon(1e-6));
  CHECK(loss("lambdarank", 0.2f, 0.3f) == doctest::Approx(0.75 * lr).epsilon(1e-6));
  CHECK(loss("log_huber", 0.2f, 0.3f) == doctest::Approx(hub).epsilon(1e-6));
  CHECK(loss("log_mse+listnet", 0.2f, 0.3f) ==
        doctest::Approx(mse + 0.2 * 0.75 * ln).epsilon(1e-6));
  CHECK(loss("log_mse+lambdarank", 0.2f, 0.3f) ==
        doctest::Approx(mse + 0.2 * 0.75 * lr).epsilon(1e-6));
  CHECK(loss("log_huber+pairwise", 0.2f, 0.3f) ==
        doctest::Approx(hub + 0.2 * 0.75 * pw).epsilon(1e-6));
  // the names of the config switch
  for (const char* name : {"listnet", "lambdarank", "log_mse+listnet", "log_mse+lambdarank",
                           "log_huber", "log_huber+pairwise"}) {
    INFO(name);
    const config::Objective l = config::parse_objective(name);
    CHECK(l.text() == name);
    CHECK(l.log_output());
    CHECK(l.ranking.has_value() == (std::string(name) != "log_huber"));
  }
}
