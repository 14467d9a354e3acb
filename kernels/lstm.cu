// CUDA twin of the element-wise passes of engine/ops/lstm.cpp: one fused LSTM cell step forward
// (gates, cell, hidden) and backward (gate gradients, carried dc), one thread per (row, unit);
// and the fused recurrence: all steps of one layer-direction in one launch, W_hh in shared memory.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "engine/ops/lstm_math.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {

namespace lm = ops::lstm_math;

template <class T>
__global__ void cell_forward_kernel(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt,
                                    int64_t ldy, int64_t B, int64_t H) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < B * H;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = k / H;
    lm::cell_step_forward(At, bsum, Cp, Ct, TCt, Yt, ldy, H, b, k - b * H);
  }
}

template <class T>
__global__ void cell_backward_kernel(const T* At, const T* TCt, const T* Cp, const T* dYt,
                                     int64_t ldy, T* dh, T* dc, T* dGt, int64_t B, int64_t H) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < B * H;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = k / H;
    lm::cell_step_backward(At, TCt, Cp, dYt, ldy, dh, dc, dGt, H, b, k - b * H);
  }
}

/// Fused forward recurrence: block (H, RG), rows row0 + y + i·RG (i < RPT) of the batch.
/// Shared memory: wt [H][4H] (W_hhᵀ: wt[k·4H + q] = w_hh[q·H + k], conflict-free across units),
/// then h [2][R][H] (double-buffered: step s writes buffer s & 1, reads the other).
template <class T, int RPT>
__global__ void forward_recurrence_kernel(T* A, const T* bsum, const T* w_hh, T* C, T* TC, T* Y,
                                          int64_t ldy, int64_t S, int64_t B, int H, bool reverse) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* wt = reinterpret_cast<T*>(smem_raw);
  const int G4 = 4 * H, RG = int(blockDim.y), R = RG * RPT;
  T* hbuf = wt + int64_t(G4) * H;
  const int j = int(threadIdx.x), y = int(threadIdx.y);
  const int64_t row0 = int64_t(blockIdx.x) * R;
  for (int idx = y * H + j; idx < G4 * H; idx += H * RG) {
    const int q = idx / H, k = idx - q * H;
    wt[k * G4 + q] = w_hh[idx];
  }
  const T bi = bsum[j], bf = bsum[H + j], bg = bsum[2 * H + j], bo = bsum[3 * H + j];
  T c[RPT] = {};  // c_{-1} = 0 (cell_forward ignores it at the first step)
  __syncthreads();
  for (int64_t st = 0; st < S; ++st) {
    const int64_t tt = reverse ? S - 1 - st : st;
    const T* hprev = hbuf + ((st + 1) & 1) * R * H;
    T* hnext = hbuf + (st & 1) * R * H;
    T zi[RPT], zf[RPT], zg[RPT], zo[RPT];
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int64_t row = row0 + y + i * RG;
      if (row < B) {
        const T* a = A + (tt * B + row) * G4;
        zi[i] = a[j] + bi;
        zf[i] = a[H + j] + bf;
        zg[i] = a[2 * H + j] + bg;
        zo[i] = a[3 * H + j] + bo;
      } else {
        zi[i] = zf[i] = zg[i] = zo[i] = T(0);
      }
    }
    if (st > 0)
      for (int k = 0; k < H; ++k) {
        const T* w = wt + k * G4;
        const T wi = w[j], wf = w[H + j], wg = w[2 * H + j], wo = w[3 * H + j];
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
          const T hv = hprev[(y + i * RG) * H + k];
          zi[i] += hv * wi;
          zf[i] += hv * wf;
          zg[i] += hv * wg;
          zo[i] += hv * wo;
        }
      }
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int64_t row = row0 + y + i * RG;
      T hv = T(0);
      if (row < B) {
        const lm::CellForward<T> r = lm::cell_forward(zi[i], zf[i], zg[i], zo[i], st > 0, c[i]);
        T* a = A + (tt * B + row) * G4;
        a[j] = r.i;
        a[H + j] = r.f;
        a[2 * H + j] = r.g;
        a[3 * H + j] = r.o;
        c[i] = r.c;
        C[(tt * B + row) * H + j] = r.c;
        TC[(tt * B + row) * H + j] = r.tc;
        hv = r.h;
        Y[(tt * B + row) * ldy + j] = hv;
      }
      hnext[(y + i * RG) * H + j] = hv;
    }
    __syncthreads();
  }
}

/// Fused backward recurrence: block (H, RG) as the forward. Shared memory: w [4H][H] (W_hh as
/// stored: w[q·H + j] is conflict-free across units), then dG of the step [R][4H].
template <class T, int RPT>
__global__ void backward_recurrence_kernel(const T* A, const T* C, const T* TC, const T* dY,
                                           int64_t ldy, const T* w_hh, const T* dh0, const T* dc0,
                                           T* dG, int64_t S, int64_t B, int H, bool reverse) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* w = reinterpret_cast<T*>(smem_raw);
  const int G4 = 4 * H, RG = int(blockDim.y), R = RG * RPT;
  T* gbuf = w + int64_t(G4) * H;
  const int j = int(threadIdx.x), y = int(threadIdx.y);
  const int64_t row0 = int64_t(blockIdx.x) * R;
  for (int idx = y * H + j; idx < G4 * H; idx += H * RG) w[idx] = w_hh[idx];
  T dh[RPT], dc[RPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int64_t row = row0 + y + i * RG;
    dh[i] = row < B ? dh0[row * H + j] : T(0);
    dc[i] = row < B ? dc0[row * H + j] : T(0);
  }
  __syncthreads();
  for (int64_t st = S - 1; st >= 0; --st) {
    const int64_t tt = reverse ? S - 1 - st : st;
    const int64_t tp = reverse ? S - st : st - 1;  // time of step st − 1 (valid when st > 0)
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int64_t row = row0 + y + i * RG;
      T* g = gbuf + (y + i * RG) * G4;
      if (row < B) {
        const T* z = A + (tt * B + row) * G4;
        const T dhv = dh[i] + dY[(tt * B + row) * ldy + j];
        const lm::CellBackward<T> r = lm::cell_backward(
            z[j], z[H + j], z[2 * H + j], z[3 * H + j], TC[(tt * B + row) * H + j], st > 0,
            st > 0 ? C[(tp * B + row) * H + j] : T(0), dhv, dc[i]);
        const T gi = r.di, gf = r.df, gc = r.dg, go = r.do_;
        dc[i] = r.dc_prev;
        T* out = dG + (tt * B + row) * G4;
        out[j] = gi;
        out[H + j] = gf;
        out[2 * H + j] = gc;
        out[3 * H + j] = go;
        g[j] = gi;
        g[H + j] = gf;
        g[2 * H + j] = gc;
        g[3 * H + j] = go;
      } else {
        g[j] = g[H + j] = g[2 * H + j] = g[3 * H + j] = T(0);
      }
    }
    __syncthreads();
    if (st > 0) {  // dh_{t−1} = dG_t·W_hh
      T acc[RPT];
#pragma unroll
      for (int i = 0; i < RPT; ++i) acc[i] = T(0);
      for (int q = 0; q < G4; ++q) {
        const T wv = w[q * H + j];
#pragma unroll
        for (int i = 0; i < RPT; ++i) acc[i] += gbuf[(y + i * RG) * G4 + q] * wv;
      }
#pragma unroll
      for (int i = 0; i < RPT; ++i) dh[i] = acc[i];
    }
    __syncthreads();  // gbuf is rewritten by the next step
  }
}

bool g_fused_recurrence = true;

/// Multiprocessors and opt-in shared memory per block of the current device (cached).
void device_limits(int* sms, size_t* smem) {
  static int cached_sms[64] = {0};
  static size_t cached_smem[64] = {0};
  int dev = 0;
  detail::check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= 64) dev = 0;
  if (cached_sms[dev] == 0) {
    int v = 0, m = 0;
    detail::check(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev),
                  "multiprocessor count");
    detail::check(cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                  "shared memory limit");
    cached_sms[dev] = v;
    cached_smem[dev] = size_t(m);
  }
  *sms = cached_sms[dev];
  *smem = cached_smem[dev];
}

template <class T, int RPT>
void launch_forward(const LstmRecurrenceShape& sh, T* A, const T* bsum, const T* w_hh, T* C, T* TC,
                    T* Y, int64_t ldy, int64_t S, int64_t B, int64_t H, bool reverse) {
  auto kernel = forward_recurrence_kernel<T, RPT>;
  detail::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(sh.smem_forward)),
                "lstm forward recurrence: shared memory");
  const unsigned blocks = unsigned((B + sh.rows_per_block - 1) / sh.rows_per_block);
  kernel<<<blocks, dim3(unsigned(H), unsigned(sh.row_groups)), sh.smem_forward, detail::stream()>>>(
      A, bsum, w_hh, C, TC, Y, ldy, S, B, int(H), reverse);
  check_launch("lstm_forward_recurrence");
}

template <class T, int RPT>
void launch_backward(const LstmRecurrenceShape& sh, const T* A, const T* C, const T* TC,
                     const T* dY, int64_t ldy, const T* w_hh, const T* dh, const T* dc, T* dG,
                     int64_t S, int64_t B, int64_t H, bool reverse) {
  auto kernel = backward_recurrence_kernel<T, RPT>;
  detail::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(sh.smem_backward)),
                "lstm backward recurrence: shared memory");
  const unsigned blocks = unsigned((B + sh.rows_per_block - 1) / sh.rows_per_block);
  kernel<<<blocks, dim3(unsigned(H), unsigned(sh.row_groups)), sh.smem_backward,
           detail::stream()>>>(A, C, TC, dY, ldy, w_hh, dh, dc, dG, S, B, int(H), reverse);
  check_launch("lstm_backward_recurrence");
}

}  // namespace

template <class T>
void lstm_cell_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy,
                       int64_t B, int64_t H) {
  if (B * H <= 0) return;
  cell_forward_kernel<<<grid_for(B * H), kThreads, 0, detail::stream()>>>(At, bsum, Cp, Ct, TCt, Yt,
                                                                          ldy, B, H);
  check_launch("lstm_cell_forward");
}

template <class T>
void lstm_cell_backward(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh,
                        T* dc, T* dGt, int64_t B, int64_t H) {
  if (B * H <= 0) return;
  cell_backward_kernel<<<grid_for(B * H), kThreads, 0, detail::stream()>>>(At, TCt, Cp, dYt, ldy,
                                                                           dh, dc, dGt, B, H);
  check_launch("lstm_cell_backward");
}

void set_lstm_fused_recurrence(bool on) {
  g_fused_recurrence = on;
}
bool lstm_fused_recurrence() {
  return g_fused_recurrence;
}

template <class T>
LstmRecurrenceShape lstm_recurrence_shape(int64_t B, int64_t H) {
  if (!g_fused_recurrence) return LstmRecurrenceShape{};
  int sms = 0;
  size_t smem_limit = 0;
  device_limits(&sms, &smem_limit);
  return lstm_recurrence_plan(B, H, sizeof(T), sms, smem_limit);
}

template <class T>
void lstm_forward_recurrence(T* A, const T* bsum, const T* w_hh, T* C, T* TC, T* Y, int64_t ldy,
                             int64_t S, int64_t B, int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  const LstmRecurrenceShape sh = lstm_recurrence_shape<T>(B, H);
  switch (sh.rows_per_thread) {
    case 1:
      return launch_forward<T, 1>(sh, A, bsum, w_hh, C, TC, Y, ldy, S, B, H, reverse);
    case 2:
      return launch_forward<T, 2>(sh, A, bsum, w_hh, C, TC, Y, ldy, S, B, H, reverse);
    case 4:
      return launch_forward<T, 4>(sh, A, bsum, w_hh, C, TC, Y, ldy, S, B, H, reverse);
    case 8:
      return launch_forward<T, 8>(sh, A, bsum, w_hh, C, TC, Y, ldy, S, B, H, reverse);
    default:
      throw std::logic_error("lstm_forward_recurrence: does not fit (hidden " + std::to_string(H) +
                             ")");
  }
}

template <class T>
void lstm_backward_recurrence(const T* A, const T* C, const T* TC, const T* dY, int64_t ldy,
                              const T* w_hh, const T* dh, const T* dc, T* dG, int64_t S, int64_t B,
                              int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  const LstmRecurrenceShape sh = lstm_recurrence_shape<T>(B, H);
  switch (sh.rows_per_thread) {
    case 1:
      return launch_backward<T, 1>(sh, A, C, TC, dY, ldy, w_hh, dh, dc, dG, S, B, H, reverse);
    case 2:
      return launch_backward<T, 2>(sh, A, C, TC, dY, ldy, w_hh, dh, dc, dG, S, B, H, reverse);
    case 4:
      return launch_backward<T, 4>(sh, A, C, TC, dY, ldy, w_hh, dh, dc, dG, S, B, H, reverse);
    case 8:
      return launch_backward<T, 8>(sh, A, C, TC, dY, ldy, w_hh, dh, dc, dG, S, B, H, reverse);
    default:
      throw std::logic_error("lstm_backward_recurrence: does not fit (hidden " + std::to_string(H) +
                             ")");
  }
}

LCM_CUDA_LSTM_INSTANCES(float)
LCM_CUDA_LSTM_INSTANCES(double)

}  // namespace lcm::cuda
