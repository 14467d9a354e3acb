// Emulation of kernels/shape.cu (see device.cpp): block copies, row gather and its deterministic
// scatter-add, the column sums in the kernel's fixed chunk and lane order, leading-dim swaps.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

template <class T>
void copy_blocks(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row,
                 int64_t src_off, int64_t outer, int64_t len, bool acc) {
  if (outer <= 0 || len <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < len; ++i) {
        T* d = dst + o * dst_row + dst_off + i;
        const T v = src[o * src_row + src_off + i];
        *d = acc ? *d + v : v;
      }
  });
}
template <class T>
void index_rows(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim,
                int64_t inner) {
  if (outer * m * inner <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t i = 0; i < inner; ++i)
          y[(o * m + j) * inner + i] = x[(o * xdim + index[j]) * inner + i];
  });
}
template <class T>
void copy_rows(T* dst, const int64_t* dst_rows, const T* src, const int64_t* src_rows, int64_t m,
               int64_t width) {
  if (m * width <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t j = 0; j < m; ++j)
      for (int64_t i = 0; i < width; ++i)
        dst[dst_rows[j] * width + i] = src[src_rows[j] * width + i];
  });
}
template <class T>
void scatter_add_rows(T* gx, const T* gy, const int64_t* starts, const int64_t* sources,
                      int64_t outer, int64_t m, int64_t xdim, int64_t inner) {
  if (outer * xdim * inner <= 0 || m <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < xdim; ++r)
        for (int64_t i = 0; i < inner; ++i) {
          T s = gx[(o * xdim + r) * inner + i];
          for (int64_t q = starts[r]; q < starts[r + 1]; ++q)
            s += gy[(o * m + sources[q]) * inner + i];
          gx[(o * xdim + r) * inner + i] = s;
        }
  });
}
template <class T>
void column_sums_add(const T* x, T* g, int64_t rows, int64_t cols, T* work) {
  // The kernel's arithmetic (kernels/shape.cu): fixed chunks, 8 strided row lanes per chunk, a
  // lane tree (4, 2, 1), then the chunk partials by the same scheme.
  constexpr int64_t kLanes = 8;
  auto chunk_sum = [](const T* src, int64_t r0, int64_t r1, int64_t ld, int64_t c) {
    T lane[kLanes];
    for (int64_t y = 0; y < kLanes; ++y) {
      lane[y] = T(0);
      for (int64_t r = r0 + y; r < r1; r += kLanes) lane[y] += src[r * ld + c];
    }
    for (int64_t h = kLanes / 2; h > 0; h >>= 1)
      for (int64_t y = 0; y < h; ++y) lane[y] += lane[y + h];
    return lane[0];
  };
  if (cols <= 0 || rows <= 0) return;
  const int64_t work_n = column_sums_work(rows, cols);
  if (work_n == 0) {
    emu::launch(emu::Work::Kernel, [=] {
      for (int64_t c = 0; c < cols; ++c) g[c] += chunk_sum(x, 0, rows, cols, c);
    });
    return;
  }
  if (!work)
    throw std::invalid_argument("column_sums_add: no work array for " + std::to_string(rows) +
                                " rows");
  const int64_t chunks = work_n / cols, chunk_rows = (rows + chunks - 1) / chunks;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t c = 0; c < cols; ++c)
        work[k * cols + c] =
            chunk_sum(x, k * chunk_rows, std::min(rows, (k + 1) * chunk_rows), cols, c);
  });
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t c = 0; c < cols; ++c) g[c] += chunk_sum(work, 0, chunks, cols, c);
  });
}
template <class T>
void swap_leading(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool acc) {
  if (A * B * W <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < W; ++j) {
          T* d = dst + (b * A + a) * W + j;
          const T v = src[(a * B + b) * W + j];
          *d = acc ? *d + v : v;
        }
  });
}

LCM_CUDA_SHAPE_INSTANCES(float)
LCM_CUDA_SHAPE_INSTANCES(double)

}  // namespace lcm::cuda
