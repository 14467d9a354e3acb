// CUDA twin of engine/ops/elementwise.cpp: unary activations and their backward, add, mul,
// gradient accumulation, inverted dropout with the engine's counter-based RNG (same mask as the
// CPU).
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

#define LCM_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

__device__ inline float dev_expm1(float v) {
  return expm1f(v);
}
__device__ inline double dev_expm1(double v) {
  return expm1(v);
}
__device__ inline float dev_exp(float v) {
  return expf(v);
}
__device__ inline double dev_exp(double v) {
  return exp(v);
}
__device__ inline float dev_tanh(float v) {
  return tanhf(v);
}
__device__ inline double dev_tanh(double v) {
  return tanh(v);
}

template <class T>
__device__ inline T unary_f(Unary k, T v, T param) {
  switch (k) {
    case Unary::Scale:
      return param * v;
    case Unary::Elu:
      return v > T(0) ? v : dev_expm1(v);
    case Unary::LeakyRelu:
      return v >= T(0) ? v : param * v;
    case Unary::Sigmoid:
      return T(1) / (T(1) + dev_exp(-v));
    default:
      return dev_tanh(v);
  }
}

template <class T>
__device__ inline T unary_d(Unary k, T v, T y, T param) {
  switch (k) {
    case Unary::Scale:
      return param;
    case Unary::Elu:
      return v > T(0) ? T(1) : y + T(1);
    case Unary::LeakyRelu:
      return v >= T(0) ? T(1) : param;
    case Unary::Sigmoid:
      return y * (T(1) - y);
    default:
      return T(1) - y * y;
  }
}

template <class T>
__global__ void unary_forward_kernel(Unary k, const T* x, T* y, int64_t n, T param) {
  LCM_GRID_LOOP(i, n) y[i] = unary_f(k, x[i], param);
}
template <class T>
__global__ void unary_backward_kernel(Unary k, const T* x, const T* y, const T* gy, T* gx,
                                      int64_t n, T param) {
  LCM_GRID_LOOP(i, n) gx[i] += gy[i] * unary_d(k, x[i], y[i], param);
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

/// engine/rng.hpp's mix64 and counter_uniform, bit for bit.
__device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n,
                                       uint64_t seed_mixed, uint64_t offset, double p,
                                       T keep_scale) {
  LCM_GRID_LOOP(i, n) {
    const uint64_t r = mix64(seed_mixed ^ (offset + uint64_t(i)));
    const float u = float(r >> 40) * (1.0f / 16777216.0f);
    const uint8_t m = double(u) >= p ? 1 : 0;
    mask[i] = m;
    y[i] = m ? x[i] * keep_scale : T(0);
  }
}
template <class T>
__global__ void dropout_backward_kernel(const T* gy, const uint8_t* mask, T* gx, int64_t n,
                                        T keep_scale) {
  LCM_GRID_LOOP(i, n) gx[i] += mask[i] ? gy[i] * keep_scale : T(0);
}

uint64_t host_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

template <class T>
void unary_forward(Unary kind, const T* x, T* y, int64_t n, T param) {
  if (n <= 0) return;
  unary_forward_kernel<<<grid_for(n), kThreads>>>(kind, x, y, n, param);
  check_launch("unary_forward");
}
template <class T>
void unary_backward(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  if (n <= 0) return;
  unary_backward_kernel<<<grid_for(n), kThreads>>>(kind, x, y, gy, gx, n, param);
  check_launch("unary_backward");
}
template <class T>
void add(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads>>>(a, b, y, n);
  check_launch("add");
}
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n) {
  if (n <= 0) return;
  mul_kernel<<<grid_for(n), kThreads>>>(a, b, y, n);
  check_launch("mul");
}
template <class T>
void accumulate(T* g, const T* x, int64_t n) {
  if (n <= 0) return;
  accumulate_kernel<<<grid_for(n), kThreads>>>(g, x, n);
  check_launch("accumulate");
}
template <class T>
void accumulate_product(T* g, const T* x, const T* w, int64_t n) {
  if (n <= 0) return;
  accumulate_product_kernel<<<grid_for(n), kThreads>>>(g, x, w, n);
  check_launch("accumulate_product");
}
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset,
                     double p, T keep_scale) {
  if (n <= 0) return;
  dropout_forward_kernel<<<grid_for(n), kThreads>>>(x, y, mask, n, host_mix64(seed), offset, p,
                                                    keep_scale);
  check_launch("dropout_forward");
}
template <class T>
void dropout_backward(const T* gy, const uint8_t* mask, T* gx, int64_t n, T keep_scale) {
  if (n <= 0) return;
  dropout_backward_kernel<<<grid_for(n), kThreads>>>(gy, mask, gx, n, keep_scale);
  check_launch("dropout_backward");
}

#define LCM_INSTANTIATE(T)                                                                      \
  template void unary_forward<T>(Unary, const T*, T*, int64_t, T);                              \
  template void unary_backward<T>(Unary, const T*, const T*, const T*, T*, int64_t, T);         \
  template void add<T>(const T*, const T*, T*, int64_t);                                        \
  template void mul<T>(const T*, const T*, T*, int64_t);                                        \
  template void accumulate<T>(T*, const T*, int64_t);                                           \
  template void accumulate_product<T>(T*, const T*, const T*, int64_t);                         \
  template void dropout_forward<T>(const T*, T*, uint8_t*, int64_t, uint64_t, uint64_t, double, \
                                   T);                                                          \
  template void dropout_backward<T>(const T*, const uint8_t*, T*, int64_t, T);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
