// Weight initialisers (docs/model-spec.md §5.3); formulas from torch.nn.init and the
// reset_parameters of nn.Linear / nn.LSTM. Explicitly instantiated for float and double.
#include "engine/init.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace lcm {

template <class T>
std::pair<int64_t, int64_t> fan_in_fan_out(const Parameter<T>& p) {
  if (p.shape.rank < 2)
    throw std::invalid_argument("init: fan in and fan out of " + p.name + " (shape " +
                                p.shape.str() + ") need a tensor of rank >= 2");
  int64_t receptive = p.shape.inner(2);
  return {p.shape[1] * receptive, p.shape[0] * receptive};
}

template <class T>
void uniform(Parameter<T>& p, double lo, double hi, Rng& rng) {
  if (!(hi >= lo))
    throw std::invalid_argument("init::uniform of " + p.name + ": hi " + std::to_string(hi) +
                                " < lo " + std::to_string(lo));
  p.value.resize(size_t(p.numel()));
  for (T& v : p.value) v = T(rng.uniform(lo, hi));
}

template <class T>
void zeros(Parameter<T>& p) {
  p.value.assign(size_t(p.numel()), T(0));
}

template <class T>
void xavier_uniform(Parameter<T>& p, Rng& rng, double gain) {
  auto [fan_in, fan_out] = fan_in_fan_out(p);
  double a = fan_in + fan_out > 0 ? gain * std::sqrt(6.0 / double(fan_in + fan_out)) : 0.0;
  uniform(p, -a, a, rng);
}

template <class T>
void pytorch_linear_default(Parameter<T>& weight, typename NonDeduced<Parameter<T>>::type* bias,
                            Rng& rng) {
  auto [fan_in, fan_out] = fan_in_fan_out(weight);
  if (bias && bias->numel() != weight.shape[0])
    throw std::invalid_argument("init: bias " + bias->name + " (shape " + bias->shape.str() +
                                ") does not match weight " + weight.name + " (shape " +
                                weight.shape.str() + ")");
  // kaiming_uniform(a=√5): gain = √(2/(1+a²)) = √(1/3), bound = √3·gain/√fan_in = 1/√fan_in.
  double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  uniform(weight, -bound, bound, rng);
  if (bias) uniform(*bias, -bound, bound, rng);
  (void)fan_out;
}

template <class T>
void lstm_default(const std::vector<Parameter<T>*>& params, int64_t hidden, Rng& rng) {
  if (hidden <= 0)
    throw std::invalid_argument("init::lstm_default: hidden must be > 0, got " +
                                std::to_string(hidden));
  double stdv = 1.0 / std::sqrt(double(hidden));
  for (Parameter<T>* p : params) {
    if (!p) throw std::invalid_argument("init::lstm_default: null parameter");
    uniform(*p, -stdv, stdv, rng);
  }
}

#define LCM_INIT_INSTANTIATE(T)                                                \
  template std::pair<int64_t, int64_t> fan_in_fan_out<T>(const Parameter<T>&); \
  template void uniform<T>(Parameter<T>&, double, double, Rng&);               \
  template void zeros<T>(Parameter<T>&);                                       \
  template void xavier_uniform<T>(Parameter<T>&, Rng&, double);                \
  template void pytorch_linear_default<T>(Parameter<T>&, Parameter<T>*, Rng&); \
  template void lstm_default<T>(const std::vector<Parameter<T>*>&, int64_t, Rng&);
LCM_INIT_INSTANTIATE(float)
LCM_INIT_INSTANTIATE(double)
#undef LCM_INIT_INSTANTIATE

}  // namespace lcm
