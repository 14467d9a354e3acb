// Emulation of kernels/optim.cu (see device.cpp): the multi-tensor Adam/AdamW step with the
// kernel's fma order, gradient clipping's per-4096 chunk partials summed in order.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

// ---- AdamW ----
template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  const bool l2 = !decoupled && wd != T(0);
  for (int k = 0; k < n_slots; ++k) {
    const AdamSlot<T>& s = slots[k];
    for (int64_t i = 0; i < s.n; ++i) {
      T p = s.value[i], gi = s.grad[i];
      if (decoupled) p = p * decay;
      if (l2) gi = std::fma(p, wd, gi);
      const T m = std::fma(gi, one_m_beta1, s.exp_avg[i] * beta1);
      const T v = std::fma(one_m_beta2 * gi, gi, s.exp_avg_sq[i] * beta2);
      const T denom = std::sqrt(v) / s.bias_c2_sqrt + eps;
      s.exp_avg[i] = m;
      s.exp_avg_sq[i] = v;
      s.value[i] = p + (s.neg_step_size * m) / denom;
    }
  }
}

// ---- gradient clipping (kernels/optim.cu): per-4096 chunk partials summed in order ----
template <class T>
double grad_sq_norm(const GradSlot<T>* slots, int n_slots) {
  double total = 0;
  for (int k = 0; k < n_slots; ++k)
    for (int64_t b = 0; b < slots[k].n; b += 4096) {
      double part = 0;
      for (int64_t i = b; i < std::min(slots[k].n, b + 4096); ++i)
        part += double(slots[k].grad[i]) * double(slots[k].grad[i]);
      total += part;
    }
  return total;
}
template <class T>
void scale_grads(const GradSlot<T>* slots, int n_slots, T c) {
  for (int k = 0; k < n_slots; ++k)
    for (int64_t i = 0; i < slots[k].n; ++i) slots[k].grad[i] *= c;
}
template <class T>
void zero_grads(const GradSlot<T>* slots, int n_slots) {
  for (int k = 0; k < n_slots; ++k) std::fill(slots[k].grad, slots[k].grad + slots[k].n, T(0));
}

#define LCM_INSTANTIATE(T)                                                        \
  template void adam_step<T>(const AdamSlot<T>*, int, bool, T, T, T, T, T, T, T); \
  template double grad_sq_norm<T>(const GradSlot<T>*, int);                       \
  template void scale_grads<T>(const GradSlot<T>*, int, T);                       \
  template void zero_grads<T>(const GradSlot<T>*, int);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
