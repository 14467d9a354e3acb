// Emulation of kernels/loss.cu (see device.cpp): the terms and gradients of
// engine/ops/loss_math.hpp, summed sequentially in double.
#include <cstdint>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

int64_t reduce_scratch_size(int64_t n) {
  return n <= 0 ? 1 : (n + 4095) / 4096;
}
template <class T>
void reduce_loss(LossKind kind, const T* a, const T* b, int64_t n, double scale, T* out,
                 double* scratch) {
  // CUDA: the partials kernel (a memset when n = 0), then the final reduction (kernels/reduce.cuh)
  emu::count(n <= 0 ? emu::Work::Copy : emu::Work::Kernel);
  emu::launch(emu::Work::Kernel, [=] {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += ops::math::loss_term(kind, a[i], b ? b[i] : T(0));
    scratch[0] = s;
    out[0] = T(scale * s);
  });
}
template <class T>
void loss_backward(LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb, int64_t n,
                   double mult) {
  if (n <= 0 || (!ga && !gb)) return;
  emu::launch(emu::Work::Kernel, [=] {
    const T c = T(double(gy[0]) * mult);
    for (int64_t i = 0; i < n; ++i) {
      const T bi = b ? b[i] : T(0);
      if (ga) ga[i] += ops::math::loss_grad_pred(kind, a[i], bi, c);
      if (gb) gb[i] += ops::math::loss_grad_target(kind, a[i], bi, c);
    }
  });
}

LCM_CUDA_LOSS_INSTANCES(float)
LCM_CUDA_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
