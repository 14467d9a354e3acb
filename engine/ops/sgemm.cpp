// lcm's float32 GEMM kernel for AVX-512 (see engine/ops/sgemm.hpp): packing of both operands into
// panels and a 12×32 micro-kernel holding 24 accumulators in zmm registers (12 broadcasts of A and
// 2 loads of B feed 24 FMAs per step of k). Summation order per element of C is fixed by
// kSgemmKc alone, so results never depend on the thread count or on how C is split.
#include "engine/ops/sgemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace lcm::ops::detail {

int64_t sgemm_packed_size(int64_t n, int64_t k) { return std::max<int64_t>(k, 0) * sgemm_strips(n) * kSgemmNr; }

namespace {

struct ScratchBuf {
  float* p = nullptr;
  int64_t n = 0;
  ~ScratchBuf() { std::free(p); }
};

float* scratch_of(ScratchBuf& b, int64_t n) {
  if (b.n < n) {
    std::free(b.p);
    b.p = static_cast<float*>(std::aligned_alloc(64, size_t((n * 4 + 63) / 64 * 64)));
    if (!b.p) {
      b.n = 0;
      throw std::bad_alloc();
    }
    b.n = n;
  }
  return b.p;
}

}  // namespace

float* sgemm_scratch(int slot, int64_t n) {
  static thread_local ScratchBuf bufs[2];
  if (slot < 0 || slot > 1) throw std::logic_error("sgemm_scratch: slot must be 0 or 1");
  return scratch_of(bufs[slot], n);
}

#if defined(__AVX512F__)
namespace {

/// Rows of A packed per block: 12 panels of 12 rows × kSgemmKc = 110 KB, resident in L2.
constexpr int64_t kMc = 144;

inline __mmask16 mask_of(int64_t cols) {
  return cols >= 16 ? __mmask16(0xFFFF) : cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1u);
}

/// True when gathers with 32-bit element offsets reach every element (rows·ld + k < 2^31).
inline bool gather_fits(int64_t rows, int64_t ld, int64_t k) { return double(rows) * double(ld) + double(k) < 2e9; }

/// Packs rows [i0, i0 + rows) × depth [k0, k0 + akc) of A into panels of 12 rows, each akc × 12
/// k-major; rows past `rows` in the last panel are zero. Row-major A is transposed with gathers:
/// 4 steps of k × 12 rows are 3 vectors of 16 (one gather each).
void pack_a(const float* a, int64_t lda, bool trans, int64_t i0, int64_t rows, int64_t k0, int64_t akc, float* dst) {
  const int64_t npan = (rows + kSgemmMr - 1) / kSgemmMr;
  const bool gather = !trans && gather_fits(kSgemmMr, lda, k0 + akc);
  for (int64_t p = 0; p < npan; ++p) {
    float* d = dst + p * kSgemmMr * akc;
    const int64_t r0 = p * kSgemmMr, nr = std::min(kSgemmMr, rows - r0);
    if (gather) {
      const float* base = a + (i0 + r0) * lda + k0;
      __m512i idx[3];
      __mmask16 live[3];
      for (int t = 0; t < 3; ++t) {
        alignas(64) int32_t off[16];
        uint32_t mbits = 0;
        for (int l = 0; l < 16; ++l) {
          const int q = t * 16 + l, kk = q / int(kSgemmMr), ii = q % int(kSgemmMr);
          off[l] = int32_t(ii * lda + kk);
          if (ii < nr) mbits |= 1u << l;
        }
        idx[t] = _mm512_load_si512(off);
        live[t] = __mmask16(mbits);
      }
      int64_t kk = 0;
      for (; kk + 4 <= akc; kk += 4) {
        const __m512i step = _mm512_set1_epi32(int32_t(kk));
        for (int t = 0; t < 3; ++t)
          _mm512_storeu_ps(d + kk * kSgemmMr + t * 16,
                           _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live[t], _mm512_add_epi32(idx[t], step),
                                                    base, 4));
      }
      for (; kk < akc; ++kk)
        for (int64_t ii = 0; ii < kSgemmMr; ++ii) d[kk * kSgemmMr + ii] = ii < nr ? base[ii * lda + kk] : 0.0f;
    } else if (!trans) {
      for (int64_t kk = 0; kk < akc; ++kk)
        for (int64_t ii = 0; ii < kSgemmMr; ++ii)
          d[kk * kSgemmMr + ii] = ii < nr ? a[(i0 + r0 + ii) * lda + k0 + kk] : 0.0f;
    } else {
      const __mmask16 m = mask_of(nr);
      for (int64_t kk = 0; kk < akc; ++kk)
        _mm512_mask_storeu_ps(d + kk * kSgemmMr, __mmask16(0x0FFF),
                              _mm512_maskz_loadu_ps(m, a + (k0 + kk) * lda + i0 + r0));
    }
  }
}

/// C[rows, cols] (+)= Ap[12 × akc]·Bp[akc × 32] for one micro-tile (rows ≤ 12 and the column masks
/// m0, m1 cut the padding). overwrite: C = product instead of C += product.
inline void micro_kernel(int64_t akc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc,
                         int64_t rows, __mmask16 m0, __mmask16 m1, bool overwrite) {
  __m512 acc[kSgemmMr][2];
#pragma GCC unroll 12
  for (int i = 0; i < kSgemmMr; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < akc; ++kk) {
    const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kSgemmMr; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    ap += kSgemmMr;
    bp += kSgemmNr;
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    if (overwrite) {
      _mm512_mask_storeu_ps(ci, m0, acc[i][0]);
      _mm512_mask_storeu_ps(ci + 16, m1, acc[i][1]);
    } else {
      _mm512_mask_storeu_ps(ci, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), acc[i][0]));
      _mm512_mask_storeu_ps(ci + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), acc[i][1]));
    }
  }
}

}  // namespace

void sgemm_pack_b(const SgemmPackedB& w, const float* p, int64_t ld, bool trans, int64_t s0, int64_t s1) {
  const int64_t n = w.n, k = w.k, npad = sgemm_strips(n) * kSgemmNr;
  for (int64_t k2 = 0; k2 < k; k2 += kSgemmKc) {
    const int64_t akc = std::min(kSgemmKc, k - k2);
    float* slice = w.data + k2 * npad;
    for (int64_t s = s0; s < s1; ++s) {
      float* d = slice + s * kSgemmNr * akc;
      const int64_t j0 = s * kSgemmNr, cols = std::min(kSgemmNr, n - j0);
      if (!trans) {
        const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
        for (int64_t kk = 0; kk < akc; ++kk) {
          const float* src = p + (k2 + kk) * ld + j0;
          _mm512_store_ps(d + kk * kSgemmNr, _mm512_maskz_loadu_ps(m0, src));
          _mm512_store_ps(d + kk * kSgemmNr + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
      } else if (gather_fits(kSgemmNr, ld, k2 + akc)) {  // B(kk, j) = p[j·ld + kk]: 2 gathers per step of k
        const float* base = p + j0 * ld + k2;
        alignas(64) int32_t off[32];
        for (int l = 0; l < 32; ++l) off[l] = int32_t(l * ld);
        const __m512i i0 = _mm512_load_si512(off), i1 = _mm512_load_si512(off + 16);
        const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
        for (int64_t kk = 0; kk < akc; ++kk) {
          const __m512i step = _mm512_set1_epi32(int32_t(kk));
          _mm512_store_ps(d + kk * kSgemmNr,
                          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m0, _mm512_add_epi32(i0, step), base, 4));
          _mm512_store_ps(d + kk * kSgemmNr + 16,
                          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m1, _mm512_add_epi32(i1, step), base, 4));
        }
      } else {
        if (cols < kSgemmNr) std::memset(d, 0, sizeof(float) * size_t(akc * kSgemmNr));
        for (int64_t jj = 0; jj < cols; ++jj) {
          const float* src = p + (j0 + jj) * ld + k2;
          for (int64_t kk = 0; kk < akc; ++kk) d[kk * kSgemmNr + jj] = src[kk];
        }
      }
    }
  }
}

void sgemm_prepacked_strips(int64_t m, const float* a, int64_t lda, bool trans_a, const SgemmPackedB& w,
                            int64_t s0, int64_t s1, float* c, int64_t ldc, bool accumulate) {
  const int64_t n = w.n, k = w.k, npad = sgemm_strips(n) * kSgemmNr;
  if (m <= 0 || n <= 0 || s1 <= s0) return;
  if (k <= 0) {
    if (!accumulate) {
      const int64_t j0 = s0 * kSgemmNr, j1 = std::min(n, s1 * kSgemmNr);
      for (int64_t r = 0; r < m; ++r) std::fill(c + r * ldc + j0, c + r * ldc + j1, 0.0f);
    }
    return;
  }
  static thread_local ScratchBuf a_buf;
  float* ap = scratch_of(a_buf, kMc * kSgemmKc);
  for (int64_t ic = 0; ic < m; ic += kMc) {
    const int64_t mc = std::min(kMc, m - ic), npan = (mc + kSgemmMr - 1) / kSgemmMr;
    for (int64_t k2 = 0; k2 < k; k2 += kSgemmKc) {
      const int64_t akc = std::min(kSgemmKc, k - k2);
      pack_a(a, lda, trans_a, ic, mc, k2, akc, ap);
      const float* slice = w.data + k2 * npad;
      const bool overwrite = k2 == 0 && !accumulate;
      for (int64_t s = s0; s < s1; ++s) {
        const float* bp = slice + s * kSgemmNr * akc;
        const int64_t cols = std::min(kSgemmNr, n - s * kSgemmNr);
        const __mmask16 m0 = mask_of(cols), m1 = mask_of(cols - 16);
        for (int64_t p = 0; p < npan; ++p)
          micro_kernel(akc, ap + p * kSgemmMr * akc, bp, c + (ic + p * kSgemmMr) * ldc + s * kSgemmNr, ldc,
                       std::min(kSgemmMr, mc - p * kSgemmMr), m0, m1, overwrite);
      }
    }
  }
}

#else  // no AVX-512: callers check kSgemmKernel first

void sgemm_pack_b(const SgemmPackedB&, const float*, int64_t, bool, int64_t, int64_t) {
  throw std::logic_error("sgemm_pack_b: this build has no AVX-512 kernel (kSgemmKernel is false)");
}
void sgemm_prepacked_strips(int64_t, const float*, int64_t, bool, const SgemmPackedB&, int64_t, int64_t, float*,
                            int64_t, bool) {
  throw std::logic_error("sgemm_prepacked: this build has no AVX-512 kernel (kSgemmKernel is false)");
}

#endif

void sgemm_prepacked(int64_t m, const float* a, int64_t lda, bool trans_a, const SgemmPackedB& w, float* c,
                     int64_t ldc, bool accumulate) {
  sgemm_prepacked_strips(m, a, lda, trans_a, w, 0, sgemm_strips(w.n), c, ldc, accumulate);
}

}  // namespace lcm::ops::detail
