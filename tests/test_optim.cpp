// Tests of Adam/AdamW (steps vs the formulas written out here; docs/model-spec.md §6), frozen
// parameters, the LR schedules (OneCycle vs PyTorch's closed form and printed values, warm-up
// cosine), clip_grad_norm, and optimizer-state save → load → resume (docs/run-state.md).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "support/test_support.hpp"

using lcm::test::contains;
using lcm::test::error_of;

using namespace lcm;

namespace {

const double kPi = 3.14159265358979323846;

/// Purely relative comparison (doctest's default Approx is absolute near 0): |x − v| < eps·|v|.
doctest::Approx rel(double v) {
  return doctest::Approx(v).scale(0).epsilon(1e-12);
}

/// Reference Adam/AdamW for one scalar in double, written out from Kingma & Ba / Loshchilov &
/// Hutter with PyTorch's placement of eps: denom = sqrt(v)/sqrt(1-b2^t) + eps.
struct RefAdam {
  double p, m = 0, v = 0;
  int t = 0;
  void step(double g, double lr, double b1, double b2, double eps, double wd, bool decoupled) {
    ++t;
    if (decoupled)
      p = p * (1 - lr * wd);
    else
      g = g + wd * p;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    double m_hat = m / (1 - std::pow(b1, t));
    double v_hat = v / (1 - std::pow(b2, t));
    (void)v_hat;
    p = p - lr * m_hat / (std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps);
  }
};

}  // namespace

TEST_CASE("Adam: two steps on a 2-element parameter match the written-out formula") {
  ParameterStore<double> s;
  auto& w = s.add("w", Shape{2});
  w.value = {0.5, -1.0};
  AdamOptions o;
  o.lr = 0.01;
  Adam<double> adam(parameter_pointers(s), o);
  CHECK(std::string(adam.kind()) == "Adam");

  // Step 1: m = 0.1 g, v = 0.001 g², m̂ = g, v̂ = g² ⇒ p ← p − lr · g / (|g| + eps).
  w.grad = {0.1, -0.2};
  adam.step();
  CHECK(w.value[0] == rel(0.5 - 0.01 * 0.1 / (0.1 + 1e-8)).epsilon(1e-14));
  CHECK(w.value[1] == rel(-1.0 + 0.01 * 0.2 / (0.2 + 1e-8)).epsilon(1e-14));
  CHECK(adam.step_count(0) == 1);
  CHECK(adam.exp_avg(0)[0] == rel(0.01));
  CHECK(adam.exp_avg_sq(0)[1] == rel(0.001 * 0.04));

  // Step 2 with g = (0.3, 0.05): written out.
  w.grad = {0.3, 0.05};
  adam.step();
  double g1[2] = {0.1, -0.2}, g2[2] = {0.3, 0.05}, p0[2] = {0.5, -1.0};
  for (int i = 0; i < 2; ++i) {
    double p1 = p0[i] - 0.01 * g1[i] / (std::abs(g1[i]) + 1e-8);
    double m = 0.9 * (0.1 * g1[i]) + 0.1 * g2[i];
    double v = 0.999 * (0.001 * g1[i] * g1[i]) + 0.001 * g2[i] * g2[i];
    double expected =
        p1 - 0.01 / (1 - 0.81) * m / (std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + 1e-8);
    CHECK(w.value[i] == rel(expected).epsilon(1e-13));
  }
}

TEST_CASE("AdamW decays decoupled; Adam with weight decay adds L2 to the gradient; they differ") {
  const double lr = 0.05, wd = 0.1;
  ParameterStore<double> sa, sw;
  sa.add("w", Shape{2}).value = {2.0, -3.0};
  sw.add("w", Shape{2}).value = {2.0, -3.0};
  AdamOptions o;
  o.lr = lr;
  o.weight_decay = wd;
  Adam<double> adam(parameter_pointers(sa), o);
  AdamW<double> adamw(parameter_pointers(sw), o);
  CHECK(std::string(adamw.kind()) == "AdamW");
  CHECK(AdamW<double>::default_options().weight_decay == 0.01);

  const double g[2] = {0.5, 0.25};
  sa.at("w").grad = {g[0], g[1]};
  sw.at("w").grad = {g[0], g[1]};
  adam.step();
  adamw.step();
  const double p0[2] = {2.0, -3.0};
  for (int i = 0; i < 2; ++i) {
    // AdamW, step 1: p·(1 − lr·wd) − lr · g/(|g| + eps).
    double w_expected = p0[i] * (1 - lr * wd) - lr * g[i] / (std::abs(g[i]) + 1e-8);
    // Adam + L2, step 1: g' = g + wd·p; p − lr · g'/(|g'| + eps).
    double gp = g[i] + wd * p0[i];
    double a_expected = p0[i] - lr * gp / (std::abs(gp) + 1e-8);
    CHECK(sw.at("w").value[i] == rel(w_expected).epsilon(1e-14));
    CHECK(sa.at("w").value[i] == rel(a_expected).epsilon(1e-14));
  }
  // Element 1: with L2, g' = 0.25 + 0.1·(−3) < 0, so Adam moves it up (−2.95); AdamW follows
  // g > 0 down and only shrinks it by the decay (−3·0.995 − 0.05 = −3.035).
  CHECK(sa.at("w").value[1] > -3.0);
  CHECK(sw.at("w").value[1] < -3.0);

  // Five more steps against the scalar reference, both variants.
  RefAdam ra[2] = {{2.0}, {-3.0}}, rw[2] = {{2.0}, {-3.0}};
  for (int i = 0; i < 2; ++i) {
    ra[i].step(g[i], lr, 0.9, 0.999, 1e-8, wd, false);
    rw[i].step(g[i], lr, 0.9, 0.999, 1e-8, wd, true);
  }
  for (int k = 0; k < 5; ++k) {
    double gk[2] = {std::sin(1.0 + k), std::cos(2.0 * k) - 0.3};
    sa.at("w").grad = {gk[0], gk[1]};
    sw.at("w").grad = {gk[0], gk[1]};
    adam.step();
    adamw.step();
    for (int i = 0; i < 2; ++i) {
      ra[i].step(gk[i], lr, 0.9, 0.999, 1e-8, wd, false);
      rw[i].step(gk[i], lr, 0.9, 0.999, 1e-8, wd, true);
      CHECK(sa.at("w").value[i] == rel(ra[i].p).epsilon(1e-12));
      CHECK(sw.at("w").value[i] == rel(rw[i].p).epsilon(1e-12));
    }
  }
}

TEST_CASE("float AdamW follows the double reference closely") {
  ParameterStore<float> sf;
  auto& pf = sf.add("w", Shape{3, 4});
  std::vector<RefAdam> ref;
  for (int i = 0; i < 12; ++i) {
    pf.value[size_t(i)] = float(0.1 * i - 0.6);
    ref.push_back({double(pf.value[size_t(i)])});
  }
  AdamOptions o;
  o.lr = 1e-3;
  o.weight_decay = 0.015;  // model-spec §6
  AdamW<float> opt(parameter_pointers(sf), o);
  for (int k = 0; k < 5; ++k) {
    opt.zero_grad();
    for (int i = 0; i < 12; ++i) pf.grad[size_t(i)] = float(std::sin(0.7 * i + k) * 0.01);
    opt.step();
    for (int i = 0; i < 12; ++i) {
      ref[size_t(i)].step(double(pf.grad[size_t(i)]), 1e-3, 0.9, 0.999, 1e-8, 0.015, true);
      CHECK(double(pf.value[size_t(i)]) == doctest::Approx(ref[size_t(i)].p).epsilon(1e-6));
    }
  }
}

TEST_CASE("frozen parameters are skipped and keep their own step count") {
  ParameterStore<float> s;
  auto& a = s.add("a", Shape{2});
  auto& b = s.add("b", Shape{2});
  a.value = {1.f, 2.f};
  b.value = {3.f, 4.f};
  b.requires_grad = false;
  AdamOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  AdamW<float> opt(parameter_pointers(s), o);
  for (int k = 0; k < 3; ++k) {
    a.grad = {1.f, -1.f};
    b.grad = {1.f, -1.f};  // present but must be ignored
    opt.step();
  }
  CHECK(b.value == std::vector<float>{3.f, 4.f});
  CHECK(opt.step_count(0) == 3);
  CHECK(opt.step_count(1) == 0);
  CHECK(opt.exp_avg(1) == std::vector<float>{0.f, 0.f});
  CHECK(a.value[0] != 1.f);
  // Unfrozen: its first update is a first step (bias corrections at t = 1).
  b.requires_grad = true;
  b.grad = {0.5f, 0.5f};
  opt.step();
  CHECK(opt.step_count(1) == 1);
  double expected = 3.0 * (1 - 0.1 * 0.5) - 0.1 * 0.5 / (0.5 + 1e-8);
  CHECK(double(b.value[0]) == rel(expected).epsilon(1e-6));
}

TEST_CASE("Adam refuses bad construction arguments") {
  ParameterStore<float> s;
  auto& a = s.add("a", Shape{2});
  AdamOptions o;
  CHECK_THROWS_AS(Adam<float>({&a, &a}, o), std::invalid_argument);
  CHECK_THROWS_AS(Adam<float>({nullptr}, o), std::invalid_argument);
  o.beta1 = 1.0;
  CHECK_THROWS_AS(Adam<float>({&a}, o), std::invalid_argument);
  o.beta1 = 0.9;
  o.lr = -1;
  CHECK_THROWS_AS(Adam<float>({&a}, o), std::invalid_argument);
  Adam<float> ok({&a});
  CHECK_THROWS_AS(ok.set_beta1(1.5), std::invalid_argument);
  CHECK_THROWS_AS(ok.set_lr(-0.1), std::invalid_argument);
}

TEST_CASE("OneCycleLr reproduces PyTorch's OneCycleLR") {
  OneCycleOptions o;
  o.max_lr = 1e-3;
  o.total_steps = 100;
  OneCycleLr s(o);
  const double lr0 = 1e-3 / 25, lr_min = lr0 / 1e4, e1 = 0.3 * 100 - 1;  // 29
  auto cos_anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
  };
  // Closed form of PyTorch's get_lr.
  CHECK(s.lr_at(0) == rel(lr0).epsilon(1e-15));
  CHECK(s.lr_at(1) == rel(cos_anneal(lr0, 1e-3, 1 / e1)).epsilon(1e-14));
  CHECK(s.lr_at(29) == rel(1e-3).epsilon(1e-15));
  CHECK(s.lr_at(30) == rel(cos_anneal(1e-3, lr_min, (30 - e1) / (99 - e1))).epsilon(1e-14));
  CHECK(s.lr_at(99) == rel(lr_min).epsilon(1e-12));
  CHECK(*s.beta1_at(0) == rel(0.95));
  CHECK(*s.beta1_at(29) == rel(0.85));
  CHECK(*s.beta1_at(99) == rel(0.95));
  // Values printed by torch 1.13 OneCycleLR(AdamW, max_lr=1e-3, total_steps=100).
  CHECK(s.lr_at(1) == rel(4.281378056590743e-05).epsilon(1e-13));
  CHECK(*s.beta1_at(1) == rel(0.9497068978577179).epsilon(1e-13));
  CHECK(s.lr_at(30) == rel(0.0009994965352845243).epsilon(1e-13));
  CHECK(*s.beta1_at(30) == rel(0.8500503466729342).epsilon(1e-13));
  CHECK(s.lr_at(100) == rel(5.074647154757324e-07).epsilon(1e-12));  // one past: allowed
  CHECK(s.lr_at(99) == rel(4e-09).epsilon(1e-12));
  // Stepping: construction is step 0; more than total_steps steps throw like PyTorch.
  Adam<float> opt({}, AdamOptions{});
  s.apply(opt);
  CHECK(opt.lr() == rel(lr0));
  CHECK(opt.beta1() == rel(0.95));
  for (int k = 0; k < 29; ++k) s.step(opt);
  CHECK(s.last_step() == 29);
  CHECK(opt.lr() == rel(1e-3));
  CHECK(opt.beta1() == rel(0.85));
  for (int k = 29; k < 100; ++k) s.step();
  std::string msg;
  try {
    s.step();
  } catch (const std::out_of_range& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "tried to step 102 times; the specified number of total steps is 100"));
  CHECK(s.last_step() == 100);
  // Degenerate settings are refused up front.
  o.total_steps = 0;
  CHECK_THROWS_AS(OneCycleLr{o}, std::invalid_argument);
  o.total_steps = 2;
  o.pct_start = 0.5;  // phase 1 ends at step 0: PyTorch divides by zero
  CHECK_THROWS_AS(OneCycleLr{o}, std::invalid_argument);
  o.pct_start = 1.5;
  CHECK_THROWS_AS(OneCycleLr{o}, std::invalid_argument);
}

TEST_CASE("OneCycleLr faithful per-epoch stepping (model-spec §6, Q1)") {
  // Sized for E·N steps, stepped once per epoch: after e epochs
  // lr(e) = lr_max + (lr0 − lr_max)/2 · (1 + cos(π·e/(0.3·E·N − 1))).
  const int E = 1000, N = 50;
  OneCycleOptions o;
  o.max_lr = 1e-3;
  o.total_steps = int64_t(E) * N;
  OneCycleLr s(o);
  const double lr0 = 4e-5;
  double prev = 0;
  for (int e = 0; e <= E; ++e) {
    double expected = 1e-3 + (lr0 - 1e-3) / 2 * (1 + std::cos(kPi * e / (0.3 * E * N - 1)));
    CHECK(s.lr() == rel(expected).epsilon(1e-12));
    CHECK(s.lr() >= prev);
    prev = s.lr();
    if (e < E) s.step();
  }
  // Torch 1.13 printed values for epochs=1000, steps_per_epoch=50.
  CHECK(s.lr_at(10) == rel(4.000105289779965e-05).epsilon(1e-13));
  CHECK(s.lr_at(500) == rel(4.262984053645953e-05).epsilon(1e-13));
  CHECK(s.lr_at(1000) == rel(5.0490545223974516e-05).epsilon(1e-13));
  CHECK(*s.beta1_at(1000) == rel(0.9489072348725026).epsilon(1e-13));
}

TEST_CASE("OneCycleLr linear annealing, three phases, no momentum cycling") {
  OneCycleOptions o;
  o.max_lr = 1.0;
  o.total_steps = 21;
  o.pct_start = 0.5;  // e1 = 9.5, e2 = 19, e3 = 20
  o.div_factor = 10;
  o.final_div_factor = 100;
  o.anneal_cos = false;
  o.three_phase = true;
  o.cycle_momentum = false;
  OneCycleLr s(o);
  CHECK(s.lr_at(0) == rel(0.1));
  CHECK(s.lr_at(5) == rel(0.1 + 0.9 * 5 / 9.5));
  CHECK(s.lr_at(10) == rel(1.0 + (0.1 - 1.0) * 0.5 / 9.5));
  CHECK(s.lr_at(19) == rel(0.1));
  CHECK(s.lr_at(20) == rel(0.001));
  CHECK(!s.beta1_at(3).has_value());
}

TEST_CASE("WarmupCosineLr: linear warm-up then cosine to min_lr") {
  WarmupCosineLr s(1e-3, 10, 110, 1e-5);
  // the first step already learns (no wasted step at lr 0); the warm-up's last step is at max_lr
  CHECK(s.lr_at(0) == rel(1e-4));
  CHECK(s.lr_at(4) == rel(5e-4));
  CHECK(s.lr_at(9) == rel(1e-3));
  CHECK(s.lr_at(10) == rel(1e-3));
  CHECK(s.lr_at(35) == rel(1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(kPi * 0.25))));
  CHECK(s.lr_at(60) == rel(1e-5 + (1e-3 - 1e-5) * 0.5));
  CHECK(s.lr_at(110) == rel(1e-5));
  CHECK(s.lr_at(500) == rel(1e-5));
  CHECK(!s.beta1().has_value());
  ConstantLr c(3e-4);
  CHECK(c.lr_at(12345) == 3e-4);
  CHECK_THROWS_AS(WarmupCosineLr(1e-3, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(WarmupCosineLr(1e-3, 0, 10, 2e-3), std::invalid_argument);
}

TEST_CASE("clip_grad_norm: PyTorch semantics") {
  ParameterStore<float> s;
  auto& a = s.add("a", Shape{2});
  auto& b = s.add("b", Shape{1});
  auto& frozen = s.add("frozen", Shape{1});
  frozen.requires_grad = false;
  auto ps = parameter_pointers(s);
  auto set = [&] {
    a.grad = {3.f, 4.f};
    b.grad = {12.f};
    frozen.grad = {100.f};
  };
  set();
  CHECK(clip_grad_norm(ps, 20.0) == rel(13.0));  // below: untouched
  CHECK(a.grad == std::vector<float>{3.f, 4.f});
  double c = 6.5 / (13.0 + 1e-6);
  CHECK(clip_grad_norm(ps, 6.5) == rel(13.0));
  CHECK(a.grad[0] == rel(3 * c).epsilon(3e-7));
  CHECK(a.grad[1] == rel(4 * c).epsilon(3e-7));
  CHECK(b.grad[0] == rel(12 * c).epsilon(3e-7));
  CHECK(frozen.grad[0] == 100.f);
  // The clipped norm is max_norm (up to the 1e-6 guard).
  CHECK(clip_grad_norm(ps, 100.0) == rel(6.5).epsilon(1e-6));
  CHECK_THROWS_AS(clip_grad_norm(ps, -1.0), std::invalid_argument);
}

namespace {

/// A deterministic toy "training": params a [2, 3], b [4]; gradient of step k is a fixed function.
struct Toy {
  ParameterStore<float> store;
  Toy() {
    auto& a = store.add("layer.weight", Shape{2, 3});
    auto& b = store.add("layer.bias", Shape{4});
    for (size_t i = 0; i < a.value.size(); ++i) a.value[i] = float(0.1 * double(i) - 0.2);
    for (size_t i = 0; i < b.value.size(); ++i) b.value[i] = float(-0.05 * double(i));
  }
  void grads(int k) {
    int j = 0;
    for (auto& p : store.all())
      for (auto& g : p.grad) g = float(std::sin(0.37 * (j++) + 1.3 * k));
  }
};

OneCycleOptions toy_schedule() {
  OneCycleOptions o;
  o.max_lr = 0.01;
  o.total_steps = 10;
  return o;
}

/// The AdamW settings of the optimizer state tests (weight decay 0.015, other defaults).
AdamOptions toy_adam() {
  AdamOptions ao;
  ao.weight_decay = 0.015;
  return ao;
}

/// Steps `from` .. `to` - 1 of `toy`: the step's gradients, an optimizer step, a schedule step.
void run_steps(Toy& toy, AdamW<float>& opt, OneCycleLr& sched, int from, int to) {
  for (int k = from; k < to; ++k) {
    toy.grads(k);
    opt.step();
    sched.step(opt);
  }
}

}  // namespace

TEST_CASE("optimizer state: save → load → continue equals an uninterrupted run") {
  std::string dir = lcm::test::temp_dir("optim_state");
  const AdamOptions ao = toy_adam();

  Toy full;
  AdamW<float> opt_full(parameter_pointers(full.store), ao);
  OneCycleLr sched_full(toy_schedule());
  sched_full.apply(opt_full);
  run_steps(full, opt_full, sched_full, 0, 10);

  Toy first;
  {
    AdamW<float> opt(parameter_pointers(first.store), ao);
    OneCycleLr sched(toy_schedule());
    sched.apply(opt);
    run_steps(first, opt, sched, 0, 4);
    save_parameters(dir + "/params.safetensors", first.store);
    opt.save_state(dir + "/optim.safetensors",
                   {{"schedule.last_step", std::to_string(sched.last_step())}});
  }
  Toy resumed;  // fresh initial values, overwritten by the checkpoint
  for (auto& p : resumed.store.all()) std::fill(p.value.begin(), p.value.end(), 7.f);
  load_parameters(dir + "/params.safetensors", resumed.store);
  AdamW<float> opt(parameter_pointers(resumed.store), ao);
  auto meta = opt.load_state(dir + "/optim.safetensors");
  CHECK(meta.at("optimizer") == "AdamW");
  OneCycleLr sched(toy_schedule());
  sched.set_last_step(std::stoll(meta.at("schedule.last_step")));
  sched.apply(opt);
  CHECK(opt.step_count(0) == 4);
  run_steps(resumed, opt, sched, 4, 10);
  for (size_t i = 0; i < full.store.size(); ++i) {
    CAPTURE(full.store.all()[i].name);
    CHECK(resumed.store.all()[i].value == full.store.all()[i].value);  // bit-identical
    CHECK(opt.exp_avg(i) == opt_full.exp_avg(i));
    CHECK(opt.exp_avg_sq(i) == opt_full.exp_avg_sq(i));
    CHECK(opt.step_count(i) == 10);
  }
  CHECK(opt.lr() == opt_full.lr());
  CHECK(opt.beta1() == opt_full.beta1());

  // The file layout is the documented one.
  SafeTensorsFile f = read_safetensors(dir + "/optim.safetensors");
  REQUIRE(f.find("exp_avg.layer.weight"));
  CHECK(f.find("exp_avg.layer.weight")->shape == std::vector<int64_t>{2, 3});
  CHECK(f.find("exp_avg_sq.layer.bias")->dtype == "F32");
  CHECK(f.metadata.at("step.layer.bias") == "4");
  CHECK(f.metadata.at("weight_decay") == "0.014999999999999999");
}

TEST_CASE("optimizer state: mismatched state is refused with a clear message, state unchanged") {
  std::string dir = lcm::test::temp_dir("optim_state_bad");
  const AdamOptions ao = toy_adam();
  Toy t;
  AdamW<float> opt(parameter_pointers(t.store), ao);
  t.grads(0);
  opt.step();
  const std::string path = dir + "/optim.safetensors";
  opt.save_state(path);

  auto refused = [&](Optimizer& o, const std::string& expect) {
    auto* adam = dynamic_cast<Adam<float>*>(&o);
    std::string msg = error_of([&] {
      if (adam) adam->load_state(path);
    });
    CAPTURE(msg);
    CHECK(contains(msg, "optimizer state " + path));
    CHECK(contains(msg, expect));
    for (size_t i = 0; i < adam->params().size(); ++i) CHECK(adam->step_count(i) == 0);
  };
  // An AdamW over a float store of `params` (name, shape) refuses the state with each of `expects`.
  auto refused_by_store = [&](const std::vector<std::pair<std::string, Shape>>& params,
                              const std::vector<std::string>& expects) {
    ParameterStore<float> s;
    for (const auto& [name, shape] : params) s.add(name, shape);
    AdamW<float> o(parameter_pointers(s), ao);
    for (const std::string& expect : expects) refused(o, expect);
  };
  SUBCASE("other shape") {
    refused_by_store({{"layer.weight", Shape{3, 2}}, {"layer.bias", Shape{4}}},
                     {"exp_avg.layer.weight: shape [2, 3] in file, [3, 2] expected"});
  }
  SUBCASE("missing and unexpected names") {
    refused_by_store({{"layer.weight", Shape{2, 3}}, {"other.bias", Shape{4}}},
                     {"exp_avg.other.bias: missing", "exp_avg.layer.bias: unexpected"});
  }
  SUBCASE("Adam vs AdamW") {
    Toy u;
    Adam<float> o(parameter_pointers(u.store), ao);
    refused(o, "state is for AdamW, this optimizer is Adam");
  }
  SUBCASE("other weight decay") {
    Toy u;
    AdamOptions other = ao;
    other.weight_decay = 0.01;
    AdamW<float> o(parameter_pointers(u.store), other);
    refused(o, "weight_decay 0.014999999999999999 in file, 0.01 in this optimizer");
  }
  SUBCASE("not an optimizer state") {
    save_parameters(path, t.store);
    Toy u;
    AdamW<float> o(parameter_pointers(u.store), ao);
    refused(o, "not an lcm optimizer-state file");
  }
  SUBCASE("double state into a float optimizer") {
    ParameterStore<double> s;
    s.add("layer.weight", Shape{2, 3});
    s.add("layer.bias", Shape{4});
    AdamW<double> od(parameter_pointers(s), ao);
    od.save_state(path);
    Toy u;
    AdamW<float> o(parameter_pointers(u.store), ao);
    refused(o, "exp_avg.layer.weight: dtype F64 in file, F32 expected");
  }
  SUBCASE("reserved extra key") {
    CHECK_THROWS_AS(opt.save_state(dir + "/x.safetensors", {{"lr", "1"}}), std::invalid_argument);
  }
}

TEST_CASE("Adam / AdamW float32 match PyTorch 1.13's own float32 results bit for bit") {
  // Fixture written by bench/reference/make_optim_fixture.py (PyTorch, not lcm).
  const std::string path = lcm::test::source_path("tests/fixtures/optim_torch_f32.safetensors");
  SafeTensorsFile f = read_safetensors(path);
  std::vector<float> init = f.find("init")->to_float();
  std::vector<float> grads = f.find("grads")->to_float();
  std::vector<double> lrs = f.find("lr")->to_double(), betas = f.find("beta1")->to_double();
  REQUIRE(init.size() == 37);
  REQUIRE(grads.size() == 5 * 37);
  for (bool decoupled : {false, true}) {
    const std::string kind = decoupled ? "adamw" : "adam";
    CAPTURE(kind);
    ParameterStore<float> s;
    auto& p = s.add("p", Shape{37});
    p.value = init;
    AdamOptions o;
    o.lr = 1e-2;
    o.weight_decay = 0.015;
    Adam<float> opt(parameter_pointers(s), o, decoupled);
    OneCycleOptions oc;
    oc.max_lr = 1e-2;
    oc.total_steps = 10;
    OneCycleLr sched(oc);
    sched.apply(opt);
    for (int k = 0; k < 5; ++k) {
      CHECK(opt.lr() == lrs[size_t(k)]);  // same double, bit for bit
      CHECK(opt.beta1() == betas[size_t(k)]);
      p.grad.assign(grads.begin() + 37 * k, grads.begin() + 37 * (k + 1));
      opt.step();
      sched.step(opt);
    }
    std::vector<float> want_p = f.find(kind + ".param")->to_float();
    std::vector<float> want_m = f.find(kind + ".exp_avg")->to_float();
    std::vector<float> want_v = f.find(kind + ".exp_avg_sq")->to_float();
    int diff_p = 0, diff_m = 0, diff_v = 0;
    double max_rel = 0;
    for (size_t i = 0; i < 37; ++i) {
      diff_p += p.value[i] != want_p[i];
      diff_m += opt.exp_avg(0)[i] != want_m[i];
      diff_v += opt.exp_avg_sq(0)[i] != want_v[i];
      max_rel =
          std::max(max_rel, std::abs(double(p.value[i]) - want_p[i]) / std::abs(double(want_p[i])));
    }
    // lcm reproduces the rounding of PyTorch's CPU kernels (explicit std::fma where they fuse,
    // IEEE sqrt/div elsewhere), so every element is identical.
    CHECK(max_rel == 0.0);
    CHECK(diff_p == 0);
    CHECK(diff_m == 0);
    CHECK(diff_v == 0);
    MESSAGE(kind << ": elements differing from PyTorch float32: param " << diff_p << ", exp_avg "
                 << diff_m << ", exp_avg_sq " << diff_v << " of 37");
  }
}
