// CUDA kernels of engine/ops/elementwise.cpp: unary activations and their backward (the formulas
// of engine/ops/elementwise_math.hpp), add, mul, gradient accumulation, inverted dropout with the
// engine's counter-based RNG and keep rule (engine/rng.hpp: the same mask as the CPU).
#include <cuda_runtime.h>

#include "engine/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {

template <class T>
__global__ void unary_forward_kernel(Unary k, const T* x, T* y, int64_t n, T param) {
  LCM_GRID_LOOP(i, n) y[i] = ops::math::unary_value(k, x[i], param);
}
template <class T>
__global__ void unary_backward_kernel(Unary k, const T* x, const T* y, const T* gy, T* gx,
                                      int64_t n, T param) {
  LCM_GRID_LOOP(i, n) gx[i] += gy[i] * ops::math::unary_grad(k, x[i], y[i], param);
}
template <class T>
__global__ void unary_grad_kernel(Unary k, const T* x, const T* y, const T* gy, T* gx, int64_t n,
                                  T param) {
  LCM_GRID_LOOP(i, n) gx[i] = gy[i] * ops::math::unary_grad(k, x[i], y[i], param);
}
template <class T>
__global__ void bias_unary_forward_kernel(Unary k, T* y, const T* bias, int64_t rows, int64_t cols,
                                          T param) {
  LCM_GRID_LOOP(i, rows * cols) {
    const T v = bias ? y[i] + bias[i % cols] : y[i];
    y[i] = ops::math::unary_value(k, v, param);
  }
}
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t n) {
  LCM_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}
template <class T>
__global__ void mul_kernel(const T* a, const T* b, T* y, int64_t n) {
  LCM_GRID_LOOP(i, n) y[i] = a[i] * b[i];
}
template <class T>
__global__ void accumulate_kernel(T* g, const T* x, int64_t n) {
  LCM_GRID_LOOP(i, n) g[i] += x[i];
}
template <class T>
__global__ void accumulate_product_kernel(T* g, const T* x, const T* w, int64_t n) {
  LCM_GRID_LOOP(i, n) g[i] += x[i] * w[i];
}

template <class T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n,
                                       uint64_t seed_mixed, uint64_t offset, uint32_t threshold,
                                       T keep_scale, const uint64_t* offset_base) {
  if (offset_base) offset += *offset_base;
  LCM_GRID_LOOP(i, n) {
    const uint8_t m = dropout_keeps(seed_mixed, offset, uint64_t(i), threshold) ? 1 : 0;
    mask[i] = m;
    y[i] = m ? x[i] * keep_scale : T(0);
  }
}
template <class T>
__global__ void dropout_backward_kernel(const T* gy, const uint8_t* mask, T* gx, int64_t n,
                                        T keep_scale) {
  LCM_GRID_LOOP(i, n) gx[i] += mask[i] ? gy[i] * keep_scale : T(0);
}

}  // namespace

template <class T>
void unary_forward(Unary kind, const T* x, T* y, int64_t n, T param) {
  if (n <= 0) return;
  unary_forward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(kind, x, y, n, param);
  check_launch("unary_forward");
}
template <class T>
void unary_backward(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  if (n <= 0) return;
  unary_backward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(kind, x, y, gy, gx, n,
                                                                        param);
  check_launch("unary_backward");
}
template <class T>
void unary_grad(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  if (n <= 0) return;
  unary_grad_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(kind, x, y, gy, gx, n, param);
  check_launch("unary_grad");
}
template <class T>
void bias_unary_forward(Unary kind, T* y, const T* bias, int64_t rows, int64_t cols, T param) {
  if (rows * cols <= 0) return;
  bias_unary_forward_kernel<<<grid_for(rows * cols), kThreads, 0, detail::stream()>>>(
      kind, y, bias, rows, cols, param);
  check_launch("bias_unary_forward");
}
template <class T>
void add(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(a, b, y, n);
  check_launch("add");
}
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  mul_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(a, b, y, n);
  check_launch("mul");
}
template <class T>
void accumulate(T* g, const T* x, int64_t n) {
  if (n <= 0) return;
  accumulate_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(g, x, n);
  check_launch("accumulate");
}
template <class T>
void accumulate_product(T* g, const T* x, const T* w, int64_t n) {
  if (n <= 0) return;
  accumulate_product_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(g, x, w, n);
  check_launch("accumulate_product");
}
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset,
                     double p, T keep_scale, const uint64_t* offset_base) {
  if (n <= 0) return;
  dropout_forward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(
      x, y, mask, n, mix64(seed), offset, dropout_threshold(p), keep_scale, offset_base);
  check_launch("dropout_forward");
}
template <class T>
void dropout_backward(const T* gy, const uint8_t* mask, T* gx, int64_t n, T keep_scale) {
  if (n <= 0) return;
  dropout_backward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(gy, mask, gx, n,
                                                                          keep_scale);
  check_launch("dropout_backward");
}

LCM_CUDA_ELEMENTWISE_INSTANCES(float)
LCM_CUDA_ELEMENTWISE_INSTANCES(double)

}  // namespace lcm::cuda
