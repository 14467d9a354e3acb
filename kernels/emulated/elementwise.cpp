// Emulation of kernels/elementwise.cu (see device.cpp): the same per-element formulas
// (engine/ops/elementwise_math.hpp, engine/rng.hpp), one sequential loop per kernel.
#include <cstdint>

#include "engine/rng.hpp"
#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

template <class T>
void unary_forward(Unary kind, const T* x, T* y, int64_t n, T param) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) y[i] = ops::math::unary_value(kind, x[i], param);
  });
}
template <class T>
void unary_backward(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) gx[i] += gy[i] * ops::math::unary_grad(kind, x[i], y[i], param);
  });
}
template <class T>
void unary_grad(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * ops::math::unary_grad(kind, x[i], y[i], param);
  });
}
template <class T>
void bias_unary_forward(Unary kind, T* y, const T* bias, int64_t rows, int64_t cols, T param) {
  if (rows * cols <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < rows * cols; ++i)
      y[i] = ops::math::unary_value(kind, bias ? y[i] + bias[i % cols] : y[i], param);
  });
}
template <class T>
void add(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  });
}
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
  });
}
template <class T>
void accumulate(T* g, const T* x, int64_t n) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) g[i] += x[i];
  });
}
template <class T>
void accumulate_product(T* g, const T* x, const T* w, int64_t n) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) g[i] += x[i] * w[i];
  });
}
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset0,
                     double p, T keep_scale, const uint64_t* offset_base) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    const uint64_t offset = offset_base ? offset0 + *offset_base : offset0;  // read when it runs
    const uint64_t seed_mixed = mix64(seed);
    const uint32_t threshold = dropout_threshold(p);
    for (int64_t i = 0; i < n; ++i) {
      mask[i] = dropout_keeps(seed_mixed, offset, uint64_t(i), threshold) ? 1 : 0;
      y[i] = mask[i] ? x[i] * keep_scale : T(0);
    }
  });
}
template <class T>
void dropout_backward(const T* gy, const uint8_t* mask, T* gx, int64_t n, T keep_scale) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t i = 0; i < n; ++i) gx[i] += mask[i] ? gy[i] * keep_scale : T(0);
  });
}

LCM_CUDA_ELEMENTWISE_INSTANCES(float)
LCM_CUDA_ELEMENTWISE_INSTANCES(double)

}  // namespace lcm::cuda
