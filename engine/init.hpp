// Weight initialisers (docs/model-spec.md §5.3): Xavier-uniform, PyTorch's nn.Linear and nn.LSTM
// defaults, plain uniform and zeros. Every draw comes from an explicitly passed, seeded lcm::Rng,
// one draw per element in row-major order, so the same seed gives the same weights.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/parameter.hpp"
#include "engine/rng.hpp"

namespace lcm {

/// Blocks template argument deduction (C++20's std::type_identity), so a nullptr bias works.
template <class T>
struct NonDeduced {
  using type = T;
};

/// PyTorch's (fan_in, fan_out) of a weight (torch.nn.init._calculate_fan_in_and_fan_out):
/// rank 2 [out, in] → (in, out); rank > 2 → (shape[1]·r, shape[0]·r) with r = ∏ shape[2:].
/// A [1, H] tensor gives fan_in H, fan_out 1 (model-spec §5.3, no_comps_tensor).
/// Throws std::invalid_argument naming the parameter for rank < 2.
template <class T>
std::pair<int64_t, int64_t> fan_in_fan_out(const Parameter<T>& p);

/// Uniform in [lo, hi) per element (after rounding to T the bounds may be reached).
/// Throws std::invalid_argument if hi < lo.
template <class T>
void uniform(Parameter<T>& p, double lo, double hi, Rng& rng);

/// All values 0.
template <class T>
void zeros(Parameter<T>& p);

/// Xavier/Glorot uniform (torch.nn.init.xavier_uniform_): U(−a, a) with
/// a = gain·√(6 / (fan_in + fan_out)) (Glorot & Bengio 2010; model-spec §5.3). p: rank ≥ 2.
/// Throws std::invalid_argument for rank < 2 (see fan_in_fan_out).
template <class T>
void xavier_uniform(Parameter<T>& p, Rng& rng, double gain = 1.0);

/// PyTorch's nn.Linear.reset_parameters: weight [out, in] ~ kaiming_uniform(a = √5), i.e.
/// U(−1/√in, 1/√in); then bias [out] (may be nullptr) ~ U(−1/√in, 1/√in) (0 bound when in = 0).
/// Weight first, then bias (PyTorch's order). Throws std::invalid_argument for a weight of
/// rank < 2 or a bias whose numel is not weight.shape[0].
template <class T>
void pytorch_linear_default(Parameter<T>& weight, typename NonDeduced<Parameter<T>>::type* bias,
                            Rng& rng);

/// PyTorch's nn.LSTM.reset_parameters: every weight and bias ~ U(−1/√hidden, 1/√hidden), in the
/// given order (model-spec §5.3: ±0.1 for hidden 100, ±0.0745 for 180).
/// Throws std::invalid_argument for hidden ≤ 0 or a null pointer.
template <class T>
void lstm_default(const std::vector<Parameter<T>*>& params, int64_t hidden, Rng& rng);

}  // namespace lcm
