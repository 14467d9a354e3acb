// CUDA twin of engine/ops/shape.cpp: strided block copies (concat, slice, stack, broadcast),
// row gather and its deterministic scatter-add, ordered column sums, leading-dim swaps.
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

#define LCM_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void copy_blocks_kernel(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row,
                                   int64_t src_off, int64_t outer, int64_t len, bool acc) {
  LCM_GRID_LOOP(k, outer * len) {
    const int64_t o = k / len, i = k - o * len;
    const T v = src[o * src_row + src_off + i];
    T* d = dst + o * dst_row + dst_off + i;
    *d = acc ? *d + v : v;
  }
}

template <class T>
__global__ void gather_rows_kernel(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim,
                                   int64_t inner) {
  LCM_GRID_LOOP(k, outer * m * inner) {
    const int64_t i = k % inner, j = (k / inner) % m, o = k / (inner * m);
    y[k] = x[(o * xdim + index[j]) * inner + i];
  }
}

template <class T>
__global__ void scatter_add_rows_kernel(T* gx, const T* gy, const int64_t* starts, const int64_t* sources,
                                        int64_t outer, int64_t m, int64_t xdim, int64_t inner) {
  LCM_GRID_LOOP(k, outer * xdim * inner) {
    const int64_t i = k % inner, r = (k / inner) % xdim, o = k / (inner * xdim);
    const int64_t lo = starts[r], hi = starts[r + 1];
    if (lo == hi) continue;
    T s = gx[k];
    for (int64_t q = lo; q < hi; ++q) s += gy[(o * m + sources[q]) * inner + i];
    gx[k] = s;
  }
}

template <class T>
__global__ void column_sums_add_kernel(const T* x, T* g, int64_t rows, int64_t cols) {
  LCM_GRID_LOOP(c, cols) {
    T s = T(0);
    for (int64_t r = 0; r < rows; ++r) s += x[r * cols + c];
    g[c] += s;
  }
}

template <class T>
__global__ void swap_leading_kernel(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool acc) {
  LCM_GRID_LOOP(k, A * B * W) {
    const int64_t j = k % W, b = (k / W) % B, a = k / (W * B);  // k indexes src [A, B, W]
    T* d = dst + (b * A + a) * W + j;
    *d = acc ? *d + src[k] : src[k];
  }
}

}  // namespace

template <class T>
void copy_blocks(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row, int64_t src_off,
                 int64_t outer, int64_t len, bool accumulate) {
  if (outer <= 0 || len <= 0) return;
  copy_blocks_kernel<<<grid_for(outer * len), kThreads>>>(dst, dst_row, dst_off, src, src_row, src_off, outer, len,
                                                          accumulate);
  check_launch("copy_blocks");
}
template <class T>
void gather_rows(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim, int64_t inner) {
  if (outer * m * inner <= 0) return;
  gather_rows_kernel<<<grid_for(outer * m * inner), kThreads>>>(y, x, index, outer, m, xdim, inner);
  check_launch("gather_rows");
}
template <class T>
void scatter_add_rows(T* gx, const T* gy, const int64_t* starts, const int64_t* sources, int64_t outer, int64_t m,
                      int64_t xdim, int64_t inner) {
  if (outer * xdim * inner <= 0 || m <= 0) return;
  scatter_add_rows_kernel<<<grid_for(outer * xdim * inner), kThreads>>>(gx, gy, starts, sources, outer, m, xdim,
                                                                        inner);
  check_launch("scatter_add_rows");
}
template <class T>
void column_sums_add(const T* x, T* g, int64_t rows, int64_t cols) {
  if (cols <= 0 || rows <= 0) return;
  column_sums_add_kernel<<<grid_for(cols), kThreads>>>(x, g, rows, cols);
  check_launch("column_sums_add");
}
template <class T>
void swap_leading(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool accumulate) {
  if (A * B * W <= 0) return;
  swap_leading_kernel<<<grid_for(A * B * W), kThreads>>>(dst, src, A, B, W, accumulate);
  check_launch("swap_leading");
}

#define LCM_INSTANTIATE(T)                                                                                    \
  template void copy_blocks<T>(T*, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, bool);     \
  template void gather_rows<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t);             \
  template void scatter_add_rows<T>(T*, const T*, const int64_t*, const int64_t*, int64_t, int64_t, int64_t, \
                                    int64_t);                                                                 \
  template void column_sums_add<T>(const T*, T*, int64_t, int64_t);                                           \
  template void swap_leading<T>(T*, const T*, int64_t, int64_t, int64_t, bool);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
