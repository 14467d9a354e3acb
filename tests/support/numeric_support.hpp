// Small numeric helpers shared by the engine and model test suites (losses, autoencoder, encoder
// model, model golden, lstm, model): a named float64 parameter for gradient checks, the normwise
// relative error used to compare a result with its reference, and a parameter store's layout.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/parameter.hpp"

namespace lcm::test {

/// A float64 parameter named `name`, shape [v.size()], value `v`, zero gradient.
inline Parameter<double> param_of(const std::string& name, const std::vector<double>& v) {
  Parameter<double> p;
  p.name = name;
  p.shape = Shape{int64_t(v.size())};
  p.value = v;
  p.grad.assign(v.size(), 0.0);
  return p;
}

/// max_i |a_i − b_i| / max(max_i |b_i|, 1e-30); b is the reference (rounding scales with the
/// operands' magnitude, so the reference's largest value is the scale). REQUIREs equal sizes.
inline double normwise(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

/// CHECKs that `store` holds exactly the parameters `want` (name, shape), in that order.
template <class T>
void check_parameter_layout(const ParameterStore<T>& store,
                            const std::vector<std::pair<std::string, Shape>>& want) {
  REQUIRE(store.size() == want.size());
  size_t k = 0;
  for (const auto& p : store.all()) {
    CHECK(p.name == want[k].first);
    CHECK(p.shape == want[k].second);
    ++k;
  }
}

}  // namespace lcm::test
