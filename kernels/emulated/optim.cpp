// Emulation of kernels/optim.cu (see device.cpp): the multi-tensor Adam/AdamW step with the
// kernel's fma order, gradient clipping's per-4096 chunk partials summed in order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

// ---- AdamW ----
/// The update of adam_step and adam_step_from_device: one function, so that both round alike
/// (out of line: the compiler's contraction of p·decay + … cannot differ between them).
/// `sc`: the step scalars from device memory (adam_step_from_device's layout), else nullptr and
/// the arguments and the slots' own.
template <class T>
[[gnu::noinline]] void emu_adam(const std::vector<AdamSlot<T>>& tab, bool decoupled, T decay, T wd,
                                T beta1, T one_m_beta1, T beta2, T one_m_beta2, T eps,
                                const T* sc) {
  if (sc) {
    decay = sc[0], wd = sc[1], beta1 = sc[2], one_m_beta1 = sc[3], beta2 = sc[4];
    one_m_beta2 = sc[5], eps = sc[6];
  }
  const bool l2 = !decoupled && wd != T(0);
  for (size_t k = 0; k < tab.size(); ++k) {
    const AdamSlot<T>& s = tab[k];
    const T neg_step_size = sc ? sc[7 + 2 * k] : s.neg_step_size;
    const T bias_c2_sqrt = sc ? sc[8 + 2 * k] : s.bias_c2_sqrt;
    for (int64_t i = 0; i < s.n; ++i) {
      T p = s.value[i], gi = s.grad[i];
      if (decoupled) p = p * decay;
      if (l2) gi = std::fma(p, wd, gi);
      const T m = std::fma(gi, one_m_beta1, s.exp_avg[i] * beta1);
      const T v = std::fma(one_m_beta2 * gi, gi, s.exp_avg_sq[i] * beta2);
      const T denom = std::sqrt(v) / bias_c2_sqrt + eps;
      s.exp_avg[i] = m;
      s.exp_avg_sq[i] = v;
      s.value[i] = p + (neg_step_size * m) / denom;
    }
  }
}

template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  if (n_slots <= 0) return;
  // CUDA: the slot and chunk tables uploaded (one copy), then one kernel (kernels/optim.cu);
  // the slots are read now (a captured upload reads its source at capture time)
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);
  emu::launch(emu::Work::Kernel, [=] {
    emu_adam(*tab, decoupled, decay, wd, beta1, one_m_beta1, beta2, one_m_beta2, eps,
             static_cast<const T*>(nullptr));
  });
}

template <class T>
void adam_step_from_device(const AdamSlot<T>* slots, int n_slots, bool decoupled,
                           const T* scalars) {
  if (n_slots <= 0) return;
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);          // the tables (kernels/optim.cu)
  emu::launch(emu::Work::Kernel, [=] {  // the scalars are read when the kernel runs
    emu_adam(*tab, decoupled, T(0), T(0), T(0), T(0), T(0), T(0), T(0), scalars);
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
/// The squared 2-norm of the slots' gradients, as grad_sq_norm sums it.
template <class T>
double emu_grad_sq_sum(const std::vector<GradSlot<T>>& slots) {
  double total = 0;
  for (const GradSlot<T>& s : slots)
    for (int64_t b = 0; b < s.n; b += 4096) {
      double part = 0;
      for (int64_t i = b; i < std::min(s.n, b + 4096); ++i)
        part += double(s.grad[i]) * double(s.grad[i]);
      total += part;
    }
  return total;
}
template <class T>
void clip_grads_on_device(const GradSlot<T>* slots, int n_slots, double max_norm) {
  if (n_slots <= 0) return;
  const auto tab = emu::snapshot(slots, size_t(n_slots));
  emu::count(emu::Work::Copy);       // the tables (kernels/optim.cu)
  emu::count(emu::Work::Kernel, 2);  // partials, final (their work is in the scale kernel here)
  emu::launch(emu::Work::Kernel, [=] {
    const double coef = max_norm / (std::sqrt(emu_grad_sq_sum(*tab)) + 1e-6);
    if (!(coef < 1.0)) return;
    const T c = T(coef);
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

#define LCM_INSTANTIATE(T)                                                         \
  template void adam_step<T>(const AdamSlot<T>*, int, bool, T, T, T, T, T, T, T);  \
  template double grad_sq_norm<T>(const GradSlot<T>*, int);                        \
  template void clip_grads_on_device<T>(const GradSlot<T>*, int, double);          \
  template void adam_step_from_device<T>(const AdamSlot<T>*, int, bool, const T*); \
  template void scale_grads<T>(const GradSlot<T>*, int, T);                        \
  template void zero_grads<T>(const GradSlot<T>*, int);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
