// CUDA twin of the element-wise passes of engine/ops/lstm.cpp: one fused LSTM cell step forward
// (gates, cell, hidden) and backward (gate gradients, carried dc), one thread per (row, unit).
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

__device__ inline float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }
__device__ inline double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }
__device__ inline float th(float v) { return tanhf(v); }
__device__ inline double th(double v) { return tanh(v); }

template <class T>
__global__ void cell_forward_kernel(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy, int64_t B,
                                    int64_t H) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < B * H; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = k / H, j = k - b * H;
    T* z = At + b * 4 * H;
    const T i = sigm(z[j] + bsum[j]);
    const T f = sigm(z[H + j] + bsum[H + j]);
    const T g = th(z[2 * H + j] + bsum[2 * H + j]);
    const T o = sigm(z[3 * H + j] + bsum[3 * H + j]);
    z[j] = i;
    z[H + j] = f;
    z[2 * H + j] = g;
    z[3 * H + j] = o;
    const T c = Cp ? f * Cp[k] + i * g : i * g;
    const T tc = th(c);
    Ct[k] = c;
    TCt[k] = tc;
    Yt[b * ldy + j] = o * tc;
  }
}

template <class T>
__global__ void cell_backward_kernel(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh, T* dc,
                                     T* dGt, int64_t B, int64_t H) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < B * H; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = k / H, j = k - b * H;
    const T* z = At + b * 4 * H;
    T* g = dGt + b * 4 * H;
    const T i = z[j], f = z[H + j], gg = z[2 * H + j], o = z[3 * H + j];
    const T tc = TCt[k];
    const T dhv = dh[k] + dYt[b * ldy + j];
    dh[k] = dhv;
    const T dcv = dc[k] + dhv * o * (T(1) - tc * tc);
    g[3 * H + j] = dhv * tc * o * (T(1) - o);
    g[j] = dcv * gg * i * (T(1) - i);
    g[H + j] = Cp ? dcv * Cp[k] * f * (T(1) - f) : T(0);
    g[2 * H + j] = dcv * i * (T(1) - gg * gg);
    dc[k] = dcv * f;
  }
}

}  // namespace

template <class T>
void lstm_cell_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy, int64_t B, int64_t H) {
  if (B * H <= 0) return;
  cell_forward_kernel<<<grid_for(B * H), kThreads>>>(At, bsum, Cp, Ct, TCt, Yt, ldy, B, H);
  check_launch("lstm_cell_forward");
}

template <class T>
void lstm_cell_backward(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh, T* dc, T* dGt,
                        int64_t B, int64_t H) {
  if (B * H <= 0) return;
  cell_backward_kernel<<<grid_for(B * H), kThreads>>>(At, TCt, Cp, dYt, ldy, dh, dc, dGt, B, H);
  check_launch("lstm_cell_backward");
}

#define LCM_INSTANTIATE(T)                                                                                      \
  template void lstm_cell_forward<T>(T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, int64_t);           \
  template void lstm_cell_backward<T>(const T*, const T*, const T*, const T*, int64_t, T*, T*, T*, int64_t, \
                                      int64_t);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
