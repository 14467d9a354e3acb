// Emulation of kernels/optim.cu (see device.cpp): the multi-tensor Adam/AdamW step with the
// kernel's fma order, gradient clipping's per-4096 chunk partials summed in order.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

// ---- AdamW ----
template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  if (n_slots <= 0) return;
  // CUDA: the slot and chunk tables uploaded (one copy), then one kernel (kernels/optim.cu);
  // the slots are read now (a captured upload reads its source at capture time)
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);
  emu::launch(emu::Work::Kernel, [=] {
    const bool l2 = !decoupled && wd != T(0);
    for (int k = 0; k < n_slots; ++k) {
      const AdamSlot<T>& s = (*tab)[size_t(k)];
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
  });
}

// ---- gradient clipping (kernels/optim.cu): per-4096 chunk partials summed in order ----
template <class T>
double grad_sq_norm(const GradSlot<T>* slots, int n_slots) {
  emu::forbid_in_capture("grad_sq_norm (reads the norm back)");
  if (n_slots <= 0) return 0.0;
  emu::count(emu::Work::Copy, 2);    // tables up, the norm back (kernels/optim.cu)
  emu::count(emu::Work::Kernel, 2);  // partials, final
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
  if (n_slots <= 0) return;
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);  // the tables (kernels/optim.cu)
  emu::launch(emu::Work::Kernel, [=] {
    for (const GradSlot<T>& s : *tab)
      for (int64_t i = 0; i < s.n; ++i) s.grad[i] *= c;
  });
}
template <class T>
void zero_grads(const GradSlot<T>* slots, int n_slots) {
  if (n_slots <= 0) return;
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);  // the tables (kernels/optim.cu)
  emu::launch(emu::Work::Kernel, [=] {
    for (const GradSlot<T>& s : *tab) std::fill(s.grad, s.grad + s.n, T(0));
  });
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
