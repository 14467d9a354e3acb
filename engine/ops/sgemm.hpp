// lcm's own float32 GEMM kernel for AVX-512 CPUs (engine/ops/sgemm.cpp): a 12×32 register-blocked
// micro-kernel over packed panels (the GotoBLAS/BLIS scheme), with the weight operand packed once
// per product and shared by every thread. Eigen 3.4's kernel reached 58–60% of this machine's
// AVX-512 peak on the MLP's shapes; this one is what gemm() and gemm_tiled() use for float when
// the build targets AVX-512 (kSgemmKernel). Other builds and double use Eigen (engine/ops/gemm.hpp).
#pragma once
#include <cstdint>

namespace lcm::ops::detail {

#if defined(__AVX512F__)
/// True when this build has lcm's AVX-512 float kernel (compiled for a CPU with AVX-512F).
constexpr bool kSgemmKernel = true;
#else
constexpr bool kSgemmKernel = false;
#endif

/// Rows of C per micro-tile (A values broadcast), columns per micro-tile (two 16-float vectors)
/// and the depth of one packed slice (a 192×32 panel of B is 24 KB: it stays in the 48 KB L1
/// while 12-row panels of A stream past it).
constexpr int64_t kSgemmMr = 12, kSgemmNr = 32, kSgemmKc = 192;

/// The right operand B[k, n] of C = A·B packed for the kernel: for each slice of kSgemmKc rows of
/// k (the last one shorter), strips of 32 columns (zero-padded to 32), each akc × 32 k-major.
/// Slice k2 starts at k2·n_padded; strip s of it at s·32·akc. `data` is caller-owned, at least
/// sgemm_packed_size(n, k) floats, 64-byte aligned.
struct SgemmPackedB {
  int64_t n = 0, k = 0;
  float* data = nullptr;
};

/// Floats needed by a SgemmPackedB of B[k, n]: k·⌈n/32⌉·32.
int64_t sgemm_packed_size(int64_t n, int64_t k);

/// Number of 32-column strips of a SgemmPackedB (the unit of sgemm_pack_b's split).
inline int64_t sgemm_strips(int64_t n) { return (n + kSgemmNr - 1) / kSgemmNr; }

/// Packs strips [s0, s1) of B (row-major [k, n] at p with leading dimension ld, or with trans the
/// transpose of a row-major [n, k]) into w. Sequential; strips are independent (threads may pack
/// disjoint ranges at once). Requires kSgemmKernel (throws std::logic_error otherwise).
void sgemm_pack_b(const SgemmPackedB& w, const float* p, int64_t ld, bool trans, int64_t s0, int64_t s1);

/// C[m, w.n] (row-major, leading dimension ldc) = (accumulate ? C : 0) + A[m, w.k]·B on the calling
/// thread, with B packed in w and A row-major at a (leading dimension lda; trans: the transpose of
/// a row-major [k, m]). Each element of C is summed over k in the same order whatever m and the
/// row offset of the call, so splitting C's rows over calls or threads never changes a bit.
/// Uses a thread-local packing buffer (grows once). Requires kSgemmKernel.
void sgemm_prepacked(int64_t m, const float* a, int64_t lda, bool trans_a, const SgemmPackedB& w, float* c,
                     int64_t ldc, bool accumulate);

/// sgemm_prepacked restricted to the columns of strips [s0, s1) of C (c still points at column 0):
/// the unit of a column split of one product over threads.
void sgemm_prepacked_strips(int64_t m, const float* a, int64_t lda, bool trans_a, const SgemmPackedB& w, int64_t s0,
                            int64_t s1, float* c, int64_t ldc, bool accumulate);

/// Growable 64-byte-aligned scratch of the calling thread, one per `slot` (0 and 1 are free for
/// callers; the kernel uses its own). Never shrinks; contents are garbage. Throws std::bad_alloc.
float* sgemm_scratch(int slot, int64_t n);

}  // namespace lcm::ops::detail
