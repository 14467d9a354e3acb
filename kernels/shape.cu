// CUDA twin of engine/ops/shape.cpp: strided block copies (concat, slice, stack, broadcast),
// row gather and its deterministic scatter-add, ordered column sums, leading-dim swaps.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {

template <class T>
__global__ void copy_blocks_kernel(T* dst, int64_t dst_row, int64_t dst_off, const T* src,
                                   int64_t src_row, int64_t src_off, int64_t outer, int64_t len,
                                   bool acc) {
  LCM_GRID_LOOP(k, outer * len) {
    const int64_t o = k / len, i = k - o * len;
    const T v = src[o * src_row + src_off + i];
    T* d = dst + o * dst_row + dst_off + i;
    *d = acc ? *d + v : v;
  }
}

template <class T>
__global__ void index_rows_kernel(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m,
                                  int64_t xdim, int64_t inner) {
  LCM_GRID_LOOP(k, outer * m * inner) {
    const int64_t i = k % inner, j = (k / inner) % m, o = k / (inner * m);
    y[k] = x[(o * xdim + index[j]) * inner + i];
  }
}

template <class T>
__global__ void copy_rows_kernel(T* dst, const int64_t* dst_rows, const T* src,
                                 const int64_t* src_rows, int64_t m, int64_t width) {
  LCM_GRID_LOOP(k, m * width) {
    const int64_t j = k / width, i = k - j * width;
    dst[dst_rows[j] * width + i] = src[src_rows[j] * width + i];
  }
}

template <class T>
__global__ void scatter_add_rows_kernel(T* gx, const T* gy, const int64_t* starts,
                                        const int64_t* sources, int64_t outer, int64_t m,
                                        int64_t xdim, int64_t inner) {
  LCM_GRID_LOOP(k, outer * xdim * inner) {
    const int64_t i = k % inner, r = (k / inner) % xdim, o = k / (inner * xdim);
    const int64_t lo = starts[r], hi = starts[r + 1];
    if (lo == hi) continue;
    T s = gx[k];
    for (int64_t q = lo; q < hi; ++q) s += gy[(o * m + sources[q]) * inner + i];
    gx[k] = s;
  }
}

constexpr int kColTile = 32;  // columns per block (one warp reads 128 contiguous bytes of a row)
constexpr int kRowLanes = 8;  // row lanes per block, summed by a fixed tree

/// out[chunk, c] = Σ over rows [chunk·chunk_rows, …) of x[r, c] (or out[c] += that sum when
/// `into_g`, one chunk): grid (⌈cols/32⌉, chunks), block (32, 8); lane y sums rows y, y+8, ….
template <class T>
__global__ void column_sums_chunk_kernel(const T* x, T* out, int64_t rows, int64_t cols,
                                         int64_t chunk_rows, bool into_g) {
  __shared__ T sh[kRowLanes][kColTile];
  const int64_t c = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  T s = T(0);
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) s += x[r * cols + c];
  sh[threadIdx.y][threadIdx.x] = s;
  for (int h = kRowLanes / 2; h > 0; h >>= 1) {
    __syncthreads();
    if (int(threadIdx.y) < h) sh[threadIdx.y][threadIdx.x] += sh[threadIdx.y + h][threadIdx.x];
  }
  if (threadIdx.y == 0 && c < cols) {
    if (into_g)
      out[c] += sh[0][threadIdx.x];
    else
      out[int64_t(blockIdx.y) * cols + c] = sh[0][threadIdx.x];
  }
}

template <class T>
__global__ void swap_leading_kernel(T* dst, const T* src, int64_t A, int64_t B, int64_t W,
                                    bool acc) {
  LCM_GRID_LOOP(k, A * B * W) {
    const int64_t j = k % W, b = (k / W) % B, a = k / (W * B);  // k indexes src [A, B, W]
    T* d = dst + (b * A + a) * W + j;
    *d = acc ? *d + src[k] : src[k];
  }
}

}  // namespace

template <class T>
void copy_blocks(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row,
                 int64_t src_off, int64_t outer, int64_t len, bool accumulate) {
  if (outer <= 0 || len <= 0) return;
  copy_blocks_kernel<<<grid_for(outer * len), kThreads, 0, detail::stream()>>>(
      dst, dst_row, dst_off, src, src_row, src_off, outer, len, accumulate);
  check_launch("copy_blocks");
}
template <class T>
void index_rows(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim,
                int64_t inner) {
  if (outer * m * inner <= 0) return;
  index_rows_kernel<<<grid_for(outer * m * inner), kThreads, 0, detail::stream()>>>(
      y, x, index, outer, m, xdim, inner);
  check_launch("index_rows");
}
template <class T>
void copy_rows(T* dst, const int64_t* dst_rows, const T* src, const int64_t* src_rows, int64_t m,
               int64_t width) {
  if (m * width <= 0) return;
  copy_rows_kernel<<<grid_for(m * width), kThreads, 0, detail::stream()>>>(dst, dst_rows, src,
                                                                           src_rows, m, width);
  check_launch("copy_rows");
}
template <class T>
void scatter_add_rows(T* gx, const T* gy, const int64_t* starts, const int64_t* sources,
                      int64_t outer, int64_t m, int64_t xdim, int64_t inner) {
  if (outer * xdim * inner <= 0 || m <= 0) return;
  scatter_add_rows_kernel<<<grid_for(outer * xdim * inner), kThreads, 0, detail::stream()>>>(
      gx, gy, starts, sources, outer, m, xdim, inner);
  check_launch("scatter_add_rows");
}
template <class T>
void column_sums_add(const T* x, T* g, int64_t rows, int64_t cols, T* work) {
  if (cols <= 0 || rows <= 0) return;
  const unsigned col_blocks = unsigned((cols + kColTile - 1) / kColTile);
  const dim3 block(kColTile, kRowLanes);
  if (column_sums_work(rows, cols) == 0) {  // one chunk: straight into g
    column_sums_chunk_kernel<<<dim3(col_blocks, 1), block, 0, detail::stream()>>>(x, g, rows, cols,
                                                                                  rows, true);
    check_launch("column_sums_add");
    return;
  }
  if (!work)
    throw std::invalid_argument("column_sums_add: no work array for " + std::to_string(rows) +
                                " rows");
  const int64_t chunks = column_sums_work(rows, cols) / cols;
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  column_sums_chunk_kernel<<<dim3(col_blocks, unsigned(chunks)), block, 0, detail::stream()>>>(
      x, work, rows, cols, chunk_rows, false);
  check_launch("column_sums_add (chunks)");
  column_sums_chunk_kernel<<<dim3(col_blocks, 1), block, 0, detail::stream()>>>(work, g, chunks,
                                                                                cols, chunks, true);
  check_launch("column_sums_add (partials)");
}
template <class T>
void swap_leading(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool accumulate) {
  if (A * B * W <= 0) return;
  swap_leading_kernel<<<grid_for(A * B * W), kThreads, 0, detail::stream()>>>(dst, src, A, B, W,
                                                                              accumulate);
  check_launch("swap_leading");
}

LCM_CUDA_SHAPE_INSTANCES(float)
LCM_CUDA_SHAPE_INSTANCES(double)

}  // namespace lcm::cuda
