// Deterministic multi-threaded GEMM helpers of the CPU backend (ops::linear, ops::lstm): a
// sequential GEMM kernel (oneDNN's dnnl_sgemm for float products of at least 16×16 in a build with
// LCM_WITH_ONEDNN, else Eigen 3.4's) called directly on fixed tiles of the output that OpenMP
// threads share. The tiling depends on the shape only, never on the thread count, so results are
// bit-identical.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "engine/bf16.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/eigen.hpp"

namespace lcm::ops::detail {

/// A matrix operand for gemm(): `p` with leading dimension `ld`, stored row-major (trans = false:
/// the operand is the [rows, cols] row-major matrix at p) or read transposed (trans = true: the
/// operand is the transpose of the row-major matrix at p). `bf16`: nullptr, or the BF16 bits of
/// the same matrix (same layout; p holds those values widened: engine/bf16.hpp), which gemm()'s
/// one-row products of a float weight read instead of p.
template <class T>
struct Operand {
  const T* p;
  int64_t ld;
  bool trans;
  const uint16_t* bf16 = nullptr;
};

/// The operand's sub-block starting at row r0, column c0 (in the operand's own orientation).
template <class T>
Operand<T> sub(Operand<T> a, int64_t r0, int64_t c0) {
  const int64_t off = a.trans ? c0 * a.ld + r0 : r0 * a.ld + c0;
  return Operand<T>{a.p + off, a.ld, a.trans, a.bf16 ? a.bf16 + off : nullptr};
}

/// C[m, n] += A[m, k]·B[k, n] when m == 1 or n == 1 (one row or one column of C): Eigen's
/// matrix-vector kernel, which reads the matrix operand in place instead of packing it like a
/// GEMM does — for one program's first-layer static columns (m = 1 row against a 600×864 weight)
/// the packing cost more than the product. Sequential; deterministic for a given shape.
template <class T>
void gemv(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    // One row of C against a weight with a BF16 copy read as [n, k] rows (a linear's or an
    // LSTM's W passed transposed): n dot products with a's contiguous row, FP32 sums.
    if (m == 1 && b.bf16 && b.trans && (!a.trans || k == 1)) {
      bf16_dot_rows(n, k, a.p, b.bf16, b.ld, c, 1);
      return;
    }
  }
  using Eigen::Dynamic;
  using RowMat = Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>, 0,
                            Eigen::OuterStride<>>;
  using ColMat = Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, Eigen::ColMajor>, 0,
                            Eigen::OuterStride<>>;
  using Vec = Eigen::Map<const Eigen::Matrix<T, Dynamic, 1>, 0, Eigen::InnerStride<>>;
  // The matrix operand M [r, q] is row-major at p (trans = false) or the transpose of one, i.e.
  // column-major with the same leading dimension (trans = true). The vector v has `len` elements
  // `stride` apart. out (len_out elements, `ostride` apart) += M·v or vᵀ·M.
  auto run = [&](Operand<T> mat, int64_t r, int64_t q, const T* v, int64_t vstride,
                 bool row_times_matrix) {
    const int64_t len_out = row_times_matrix ? q : r;
    const int64_t ostride = row_times_matrix ? 1 : ldc;
    Eigen::Map<Eigen::Matrix<T, Dynamic, 1>, 0, Eigen::InnerStride<>> out(
        c, len_out, Eigen::InnerStride<>(ostride));
    const Vec vec(v, row_times_matrix ? r : q, Eigen::InnerStride<>(vstride));
    if (!mat.trans) {
      const RowMat M(mat.p, r, q, Eigen::OuterStride<>(mat.ld));
      if (row_times_matrix)
        out.noalias() += M.transpose() * vec;
      else
        out.noalias() += M * vec;
    } else {
      const ColMat M(mat.p, r, q, Eigen::OuterStride<>(mat.ld));
      if (row_times_matrix)
        out.noalias() += M.transpose() * vec;
      else
        out.noalias() += M * vec;
    }
  };
  if (m ==
      1)  // c[0, :] += a[0, :]·B[k, n]: a's row is contiguous, or strided by ld when transposed
    run(b, k, n, a.p, a.trans ? a.ld : 1, true);
  else  // c[:, 0] += A[m, k]·b[:, 0]: b's column is strided by ld, or contiguous when transposed
    run(a, m, k, b.p, b.trans ? 1 : b.ld, false);
}

/// Whether gemm() hands a float product of this shape to oneDNN (a build with LCM_WITH_ONEDNN):
/// C at least kLibraryMinDim × kLibraryMinDim and at least kLibraryMinMacs multiply-adds
/// (engine/cpu_gemm.hpp says why).
constexpr bool library_shape(int64_t m, int64_t n, int64_t k) {
  return m >= kLibraryMinDim && n >= kLibraryMinDim && m * n * k >= kLibraryMinMacs;
}

#ifdef LCM_WITH_ONEDNN
/// C[m, n] (ldc) = (accumulate ? C : 0) + op(A)[m, k]·op(B)[k, n] in float by oneDNN's dnnl_sgemm
/// (row-major; an Operand with trans = true is passed as 'T'; beta = 0 without accumulation, so C
/// is written without being read), on the calling thread only (oneDNN threads only outside a
/// parallel region, and the call pins it to one thread there), so the result depends on the shape
/// alone, as gemm()'s must. It runs inside OpenMP regions, which an exception must not leave, so a
/// call oneDNN refuses (a status other than success: arguments gemm() never passes, or memory it
/// could not get) prints one line naming the status and the shape to stderr and aborts.
void onednn_sgemm(int64_t m, int64_t n, int64_t k, Operand<float> a, Operand<float> b, float* c,
                  int64_t ldc, bool accumulate) noexcept;
#endif

/// C[m, n] (ldc) += op(A)[m, k]·op(B)[k, n] by Eigen 3.4's sequential GEMM kernel (the routine
/// behind `noalias() +=`, Eigen/src/Core/products/GeneralMatrixMatrix.h) called directly, with no
/// parallel info, on the calling thread. gemm()'s kernel for double, for small float products and
/// in builds without oneDNN; bench_peak times it against the libraries.
template <class T>
void eigen_gemm_add(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b, T* c,
                    int64_t ldc) {
  using Eigen::ColMajor;
  using Eigen::Index;
  using Eigen::RowMajor;
  using namespace Eigen::internal;
  gemm_blocking_space<RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic> blocking(
      m, n, k, 1, true);
  // A transposed row-major operand is a column-major one with the same leading dimension.
  if (!a.trans && !b.trans)
    general_matrix_matrix_product<Index, T, RowMajor, false, T, RowMajor, false, RowMajor, 1>::run(
        m, n, k, a.p, a.ld, b.p, b.ld, c, 1, ldc, T(1), blocking, nullptr);
  else if (!a.trans && b.trans)
    general_matrix_matrix_product<Index, T, RowMajor, false, T, ColMajor, false, RowMajor, 1>::run(
        m, n, k, a.p, a.ld, b.p, b.ld, c, 1, ldc, T(1), blocking, nullptr);
  else if (a.trans && !b.trans)
    general_matrix_matrix_product<Index, T, ColMajor, false, T, RowMajor, false, RowMajor, 1>::run(
        m, n, k, a.p, a.ld, b.p, b.ld, c, 1, ldc, T(1), blocking, nullptr);
  else
    general_matrix_matrix_product<Index, T, ColMajor, false, T, ColMajor, false, RowMajor, 1>::run(
        m, n, k, a.p, a.ld, b.p, b.ld, c, 1, ldc, T(1), blocking, nullptr);
}

/// Rows (or columns) of C up to which gemm() runs one GEMV per row (column) instead of packing
/// the other operand, when that operand holds at least kGemvMinOperand values.
constexpr int64_t kGemvRows = 8;
constexpr int64_t kGemvMinOperand = 4096;

/// C[m, n] (row-major, leading dimension ldc) = (accumulate ? C : 0) + A[m, k]·B[k, n], on the
/// calling thread only: a matrix-vector kernel for a row or column of C (or a few of them against
/// a large operand), oneDNN for float products of library_shape (LCM_WITH_ONEDNN), else
/// eigen_gemm_add. No library threads: Eigen's own GEMM threading busy-waits without yielding,
/// which collapses on a shared machine, so the callers parallelise over fixed blocks with OpenMP
/// instead. m, n, k ≤ 0 are no-ops
/// (k ≤ 0 with accumulate = false zeroes C).
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b, T* c, int64_t ldc,
          bool accumulate) {
  if (m <= 0 || n <= 0) return;
#ifdef LCM_WITH_ONEDNN
  if constexpr (std::is_same_v<T, float>)
    if (k > 0 && library_shape(m, n, k)) {
      if (lcm::detail::g_flop_counting.load(std::memory_order_relaxed))
        lcm::detail::count_gemm(m, n, k, a.trans, b.trans);
      onednn_sgemm(m, n, k, a, b, c, ldc, accumulate);  // beta = 0 writes C without reading it
      return;
    }
#endif
  if (!accumulate)
    for (int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, T(0));
  if (k <= 0) return;
  if (lcm::detail::g_flop_counting.load(std::memory_order_relaxed))
    lcm::detail::count_gemm(m, n, k, a.trans, b.trans);
  if (m == 1 ||
      n == 1) {  // a row or column of C: Eigen's GEMV reads the matrix in place (no packing)
    gemv(m, n, k, a, b, c, ldc);
    return;
  }
  // A few rows (or columns) of C against a large operand: one GEMV per row reads that operand in
  // place m times, which costs less than packing it for the GEMM kernel (batch-1 inference: an
  // LSTM's steps, the computations of one program, the nodes of one tree level).
  if (m <= kGemvRows && int64_t(n) * k >= kGemvMinOperand) {
    if constexpr (std::is_same_v<T, float>) {
      // with a BF16 copy of the weight: every row of C in one pass over it, each row's values
      // those of the one-row kernel (gemv above)
      if (b.bf16 && b.trans && !a.trans) {
        bf16_dot_rows_multi(m, n, k, a.p, a.ld, b.bf16, b.ld, c, ldc);
        return;
      }
    }
    for (int64_t r = 0; r < m; ++r) gemv(1, n, k, sub(a, r, 0), b, c + r * ldc, ldc);
    return;
  }
  if (n <= kGemvRows && int64_t(m) * k >= kGemvMinOperand) {
    for (int64_t j = 0; j < n; ++j) gemv(m, 1, k, a, sub(b, 0, j), c + j, ldc);
    return;
  }
  eigen_gemm_add(m, n, k, a, b, c, ldc);
}

/// Multiply-adds (×2: FLOPs) of one OpenMP region below which it stays on one thread.
constexpr double kParallelMinFlops = 5e7;

/// Number of blocks of length `rb` covering `rows`.
inline int64_t blocks_of(int64_t rows, int64_t rb) {
  return (rows + rb - 1) / rb;
}

/// C[m, n] (ldc) (+)= A[m, k]·B[k, n] split into fixed blocks of `rb` rows of C run in parallel
/// (static schedule; one thread below kParallelMinFlops). Bit-identical for any thread count.
template <class T>
void gemm_rows(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b, T* c, int64_t ldc,
               bool accumulate, int64_t rb) {
  const int64_t nblk = blocks_of(m, rb);
#pragma omp parallel for schedule(static) if (nblk > 1 && 2.0 * m * n * k >= kParallelMinFlops)
  for (int64_t blk = 0; blk < nblk; ++blk) {
    const int64_t r0 = blk * rb, nr = std::min(rb, m - r0);
    gemm(nr, n, k, sub(a, r0, 0), b, c + r0 * ldc, ldc, accumulate);
  }
}

/// A split of C[m, n] into a grid of tiles of `rows` × `cols` (the last ones may be smaller).
struct TileGrid {
  int64_t rows, cols;
};

/// The tiling used by gemm_tiled for C[m, n] with reduction length k: a function of the shape only
/// (never of the thread count), so results are identical for any thread count. Every tile packs
/// its own copy of the operand it shares with its neighbours, so the split runs along the larger
/// of m and n (the smaller operand is the one packed again) into few, even-sized tiles: 1 tile
/// below 8 MFLOP (about 0.1 ms: less than it costs to wake a sleeping thread and split), else 2 (a
/// 2-core box), 4 from 1 GFLOP (load balance on a shared machine). Column tiles are multiples of 16
/// (one AVX-512 float packet), row tiles of 8.
inline TileGrid tile_grid(int64_t m, int64_t n, int64_t k) {
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int64_t nt = flops < kParallelMinFlops ? 1 : flops < 1e9 ? 2 : 4;
  if (nt == 1) return {std::max<int64_t>(m, 1), std::max<int64_t>(n, 1)};
  if (n >= m) {
    const int64_t cols = std::max<int64_t>(16, (blocks_of(n, nt) + 15) / 16 * 16);
    return {std::max<int64_t>(m, 1), cols};
  }
  const int64_t rows = std::max<int64_t>(8, (blocks_of(m, nt) + 7) / 8 * 8);
  return {rows, std::max<int64_t>(n, 1)};
}

/// A per-tile hook of gemm_tiled that does nothing.
struct NoTileHook {
  void operator()(int64_t, int64_t, int64_t, int64_t) const {}
};

/// C[m, n] (ldc) (+)= A[m, k]·B[k, n] over the tiles of tile_grid(m, n, k), run on OpenMP threads
/// (dynamic schedule: a thread slowed by another process takes fewer tiles). Each element of C is
/// computed by one sequential gemm() call over the whole of k, so the result is bit-identical run
/// after run and for any thread count.
/// `before` and `after` are called as hook(r0, rows, c0, cols) on the thread that computes a tile,
/// right before and after its product, while the tile is in that core's cache: ops::linear_elu
/// writes the bias into the tile before (with accumulate = true) and applies ELU after, instead
/// of two more passes over C from memory.
template <class T, class Before = NoTileHook, class After = NoTileHook>
void gemm_tiled(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b, T* c, int64_t ldc,
                bool accumulate, Before before = {}, After after = {}) {
  if (m <= 0 || n <= 0) return;
  const TileGrid g = tile_grid(m, n, k);
  const int64_t nr = blocks_of(m, g.rows), nc = blocks_of(n, g.cols), ntile = nr * nc;
  if (ntile == 1) {
    before(int64_t(0), m, int64_t(0), n);
    gemm(m, n, k, a, b, c, ldc, accumulate);
    after(int64_t(0), m, int64_t(0), n);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t tile = 0; tile < ntile; ++tile) {
    const int64_t r0 = (tile / nc) * g.rows, c0 = (tile % nc) * g.cols;
    const int64_t tr = std::min(g.rows, m - r0), tc = std::min(g.cols, n - c0);
    before(r0, tr, c0, tc);
    gemm(tr, tc, k, sub(a, r0, 0), sub(b, 0, c0), c + r0 * ldc + c0, ldc, accumulate);
    after(r0, tr, c0, tc);
  }
}

/// g[j] += Σ_r y[r, j] for y: [rows, cols] row-major (a bias gradient). Every column is summed in
/// row order (bit-identical for any thread count); blocks of 256 columns run on OpenMP threads
/// when rows·cols ≥ 2^18.
template <class T>
void column_sums_add(int64_t rows, int64_t cols, const T* y, T* g) {
  constexpr int64_t kColBlock = 256;
  const int64_t nblk = blocks_of(cols, kColBlock);
#pragma omp parallel for schedule(static) if (nblk > 1 && rows * cols >= (int64_t(1) << 18))
  for (int64_t blk = 0; blk < nblk; ++blk) {
    const int64_t c0 = blk * kColBlock, nc = std::min(kColBlock, cols - c0);
    T acc[kColBlock];
    std::copy(g + c0, g + c0 + nc, acc);
    for (int64_t r = 0; r < rows; ++r) {
      const T* yr = y + r * cols + c0;
      for (int64_t j = 0; j < nc; ++j) acc[j] += yr[j];
    }
    std::copy(acc, acc + nc, g + c0);
  }
}

/// Reduction length per task of gemm_weight_grad (fixed: thread-count independent).
constexpr int64_t kDepthChunk = 2048;
/// Output rows per task of gemm_weight_grad: each task packs its chunk of Bm again, so row blocks
/// are large (a 4H = 720-row LSTM weight is 2 tasks per chunk, not 8).
constexpr int64_t kWeightRowBlock = 384;

/// G[m, n] += Aᵀ·Bm with A [k, m] (lda) and Bm [k, n] (ldb) row-major: a weight gradient summed
/// over k = steps·batch rows. Tasks are (block of 384 rows of G) × (chunk of 2048 rows of k); chunk
/// results are added in chunk order (deterministic for any thread count). `partial`: scratch of
/// (chunks − 1)·m·n values, chunks = ⌈k / 2048⌉ (unused when k ≤ 2048).
template <class T>
void gemm_weight_grad(int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* Bm,
                      int64_t ldb, T* G, T* partial) {
  if (k <= 0) return;
  const int64_t nchunk = blocks_of(k, kDepthChunk), nrow = blocks_of(m, kWeightRowBlock);
  const int64_t ntask = nchunk * nrow;
#pragma omp parallel for schedule(static) if (ntask > 1 && 2.0 * m * n * k >= kParallelMinFlops)
  for (int64_t task = 0; task < ntask; ++task) {
    const int64_t ch = task / nrow, rblk = task % nrow;
    const int64_t k0 = ch * kDepthChunk, nk = std::min(kDepthChunk, k - k0);
    const int64_t r0 = rblk * kWeightRowBlock, nr = std::min(kWeightRowBlock, m - r0);
    Operand<T> a{A + k0 * lda + r0, lda, true};
    Operand<T> b{Bm + k0 * ldb, ldb, false};
    if (ch == 0)
      gemm(nr, n, nk, a, b, G + r0 * n, n, true);
    else
      gemm(nr, n, nk, a, b, partial + (ch - 1) * m * n + r0 * n, n, false);
  }
  for (int64_t ch = 1; ch < nchunk; ++ch) {
    const T* pp = partial + (ch - 1) * m * n;
    for (int64_t j = 0; j < m * n; ++j) G[j] += pp[j];
  }
}

}  // namespace lcm::ops::detail
