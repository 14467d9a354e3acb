// Tests of the weight initialisers (docs/model-spec.md §5.3): bounds from the closed-form fans, the
// moments of U(−a, a) on large tensors, determinism per seed, and bad-input errors.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/init.hpp"

using namespace lcm;

namespace {

struct Moments {
  double mean, var, max_abs;
};

template <class T>
Moments moments(const std::vector<T>& v) {
  double s = 0, s2 = 0, m = 0;
  for (T x : v) {
    s += double(x);
    m = std::max(m, std::abs(double(x)));
  }
  double mean = s / double(v.size());
  for (T x : v) s2 += (double(x) - mean) * (double(x) - mean);
  return {mean, s2 / double(v.size()), m};
}

/// Checks values lie in [−a, a], reach close to ±a, and have mean ≈ 0 and variance ≈ a²/3.
template <class T>
void check_uniform_sym(const std::vector<T>& v, double a) {
  Moments mo = moments(v);
  double n = double(v.size());
  CHECK(mo.max_abs <= a * (1 + 1e-6));
  CHECK(mo.max_abs >= a * 0.99);  // n ≥ 10^4 draws: max within 1% of the bound
  double sd = a / std::sqrt(3.0);
  CHECK(std::abs(mo.mean) < 5 * sd / std::sqrt(n));
  CHECK(mo.var == doctest::Approx(a * a / 3).epsilon(0.03));
}

}  // namespace

TEST_CASE("xavier_uniform: bound sqrt(6/(fan_in+fan_out)), moments of U(-a, a)") {
  ParameterStore<float> s;
  auto& w = s.add("comp_embedding_layers.0.weight", Shape{600, 1146});
  Rng rng(1);
  xavier_uniform(w, rng);
  check_uniform_sym(w.value, std::sqrt(6.0 / (1146 + 600)));

  // [1, H] tensor: fan_in H, fan_out 1 (no_comps_tensor, bound ≈ 0.182).
  auto& nc = s.add("no_comps_tensor", Shape{1, 180});
  auto fans = fan_in_fan_out(nc);
  CHECK(fans.first == 180);
  CHECK(fans.second == 1);
  xavier_uniform(nc, rng);
  double a = std::sqrt(6.0 / 181.0);
  CHECK(a == doctest::Approx(0.182).epsilon(0.005));
  for (float v : nc.value) CHECK(std::abs(v) <= a);

  // Rank 3: receptive field multiplies both fans (torch _calculate_fan_in_and_fan_out).
  auto& conv = s.add("conv", Shape{4, 5, 6});
  fans = fan_in_fan_out(conv);
  CHECK(fans.first == 30);
  CHECK(fans.second == 24);

  // Gain scales the bound.
  ParameterStore<double> sd;
  auto& g = sd.add("g", Shape{100, 100});
  xavier_uniform(g, rng, 2.0);
  check_uniform_sym(g.value, 2.0 * std::sqrt(6.0 / 200.0));

  auto& bias = s.add("bias", Shape{7});
  CHECK_THROWS_AS(xavier_uniform(bias, rng), std::invalid_argument);
}

TEST_CASE("pytorch_linear_default and lstm_default bounds") {
  ParameterStore<float> s;
  auto& w = s.add("predict.weight", Shape{200, 180});
  auto& b = s.add("predict.bias", Shape{200});
  Rng rng(7);
  pytorch_linear_default(w, &b, rng);
  double a = 1.0 / std::sqrt(180.0);
  check_uniform_sym(w.value, a);
  Moments mb = moments(b.value);
  CHECK(mb.max_abs <= a);
  CHECK(mb.max_abs > 0.5 * a);
  // Weight without bias is fine; a mismatched bias is refused.
  CHECK_NOTHROW(pytorch_linear_default(w, nullptr, rng));
  auto& wrong = s.add("wrong.bias", Shape{199});
  CHECK_THROWS_AS(pytorch_linear_default(w, &wrong, rng), std::invalid_argument);

  auto& wih = s.add("comps_lstm.weight_ih_l0", Shape{720, 180});
  auto& whh = s.add("comps_lstm.weight_hh_l0", Shape{720, 180});
  auto& bih = s.add("comps_lstm.bias_ih_l0", Shape{720});
  auto& bhh = s.add("comps_lstm.bias_hh_l0", Shape{720});
  lstm_default<float>({&wih, &whh, &bih, &bhh}, 180, rng);
  double h = 1.0 / std::sqrt(180.0);
  CHECK(h == doctest::Approx(0.0745).epsilon(0.001));  // model-spec §5.3
  check_uniform_sym(wih.value, h);
  check_uniform_sym(whh.value, h);
  for (float v : bih.value) CHECK(std::abs(v) <= h);
  CHECK(moments(bhh.value).max_abs > 0.9 * h);
  CHECK_THROWS_AS(lstm_default<float>({&wih}, 0, rng), std::invalid_argument);
  CHECK_THROWS_AS(lstm_default<float>({nullptr}, 10, rng), std::invalid_argument);
}

TEST_CASE("uniform and zeros") {
  ParameterStore<float> s;
  auto& p = s.add("p", Shape{100, 100});
  Rng rng(3);
  uniform(p, 2.0, 5.0, rng);
  Moments m = moments(p.value);
  CHECK(m.mean == doctest::Approx(3.5).epsilon(0.01));
  CHECK(m.var == doctest::Approx(0.75).epsilon(0.03));
  for (float v : p.value) {
    CHECK(v >= 2.0f);
    CHECK(v <= 5.0f);
  }
  zeros(p);
  for (float v : p.value) CHECK(v == 0.0f);
  CHECK_THROWS_AS(uniform(p, 1.0, 0.0, rng), std::invalid_argument);
}

TEST_CASE("same seed gives the same weights, another seed other weights") {
  auto draw = [](uint64_t seed) {
    ParameterStore<float> s;
    auto& w = s.add("w", Shape{30, 20});
    auto& b = s.add("b", Shape{30});
    Rng rng(seed);
    pytorch_linear_default(w, &b, rng);
    std::vector<float> all = w.value;
    all.insert(all.end(), b.value.begin(), b.value.end());
    return all;
  };
  std::vector<float> a = draw(42), b = draw(42), c = draw(43);
  CHECK(a == b);
  CHECK(a != c);
  int equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == c[i];
  CHECK(equal < 3);
  // Weight and bias are drawn from successive parts of the stream, not repeated.
  CHECK(std::vector<float>(a.begin(), a.begin() + 30) != std::vector<float>(a.end() - 30, a.end()));
}
