// BF16 weight copies and their one-row product kernels (engine/bf16.hpp).
#include "engine/bf16.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 headers build some results from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at every inlined use (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace lcm {

namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LCM_BF16_AVX512 1
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define LCM_BF16_AVX2 1
#endif

/// The scalar kernel: one FP32 sum per row in index order.
void dot_rows_scalar(int64_t rows, int64_t k, const float* x, const uint16_t* w, int64_t ldw,
                     float* y, int64_t ystride) {
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* wr = w + j * ldw;
    float acc = 0.0f;
    for (int64_t i = 0; i < k; ++i) acc += x[i] * from_bf16(wr[i]);
    y[j * ystride] += acc;
  }
}

/// The scalar kernel over m rows of x: each output's sum as dot_rows_scalar's.
void dot_multi_scalar(int64_t m, int64_t rows, int64_t k, const float* x, int64_t ldx,
                      const uint16_t* w, int64_t ldw, float* y, int64_t ldy) {
  for (int64_t r = 0; r < m; ++r) dot_rows_scalar(rows, k, x + r * ldx, w, ldw, y + r * ldy, 1);
}

#ifdef LCM_BF16_AVX512
/// 16 BF16 values at p widened to FP32 (the bits shifted into the high half: exact).
inline __m512 widen16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 widen16_masked(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// AVX-512: four rows at a time, two 16-lane accumulators per row (32 values per step), a masked
/// step for the last k % 16 values, then each row's lanes summed.
void dot_rows_avx512(int64_t rows, int64_t k, const float* x, const uint16_t* w, int64_t ldw,
                     float* y, int64_t ystride) {
  const int64_t k32 = k / 32 * 32, k16 = k / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (k - k16)) - 1u);
  int64_t j = 0;
  for (; j + 4 <= rows; j += 4) {
    const uint16_t* w0 = w + j * ldw;
    const uint16_t* w1 = w0 + ldw;
    const uint16_t* w2 = w1 + ldw;
    const uint16_t* w3 = w2 + ldw;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i < k32; i += 32) {
      const __m512 xa = _mm512_loadu_ps(x + i), xb = _mm512_loadu_ps(x + i + 16);
      a0 = _mm512_fmadd_ps(xa, widen16(w0 + i), a0);
      b0 = _mm512_fmadd_ps(xb, widen16(w0 + i + 16), b0);
      a1 = _mm512_fmadd_ps(xa, widen16(w1 + i), a1);
      b1 = _mm512_fmadd_ps(xb, widen16(w1 + i + 16), b1);
      a2 = _mm512_fmadd_ps(xa, widen16(w2 + i), a2);
      b2 = _mm512_fmadd_ps(xb, widen16(w2 + i + 16), b2);
      a3 = _mm512_fmadd_ps(xa, widen16(w3 + i), a3);
      b3 = _mm512_fmadd_ps(xb, widen16(w3 + i + 16), b3);
    }
    if (i < k16) {
      const __m512 xa = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(xa, widen16(w0 + i), a0);
      a1 = _mm512_fmadd_ps(xa, widen16(w1 + i), a1);
      a2 = _mm512_fmadd_ps(xa, widen16(w2 + i), a2);
      a3 = _mm512_fmadd_ps(xa, widen16(w3 + i), a3);
      i += 16;
    }
    if (i < k) {
      const __m512 xt = _mm512_maskz_loadu_ps(tail, x + i);
      b0 = _mm512_fmadd_ps(xt, widen16_masked(w0 + i, tail), b0);
      b1 = _mm512_fmadd_ps(xt, widen16_masked(w1 + i, tail), b1);
      b2 = _mm512_fmadd_ps(xt, widen16_masked(w2 + i, tail), b2);
      b3 = _mm512_fmadd_ps(xt, widen16_masked(w3 + i, tail), b3);
    }
    y[(j + 0) * ystride] += _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
    y[(j + 1) * ystride] += _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
    y[(j + 2) * ystride] += _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
    y[(j + 3) * ystride] += _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
  }
  for (; j < rows; ++j) {
    const uint16_t* wr = w + j * ldw;
    __m512 a = _mm512_setzero_ps(), b = a;
    int64_t i = 0;
    for (; i < k32; i += 32) {
      a = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), widen16(wr + i), a);
      b = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), widen16(wr + i + 16), b);
    }
    if (i < k16) {
      a = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), widen16(wr + i), a);
      i += 16;
    }
    if (i < k)
      b = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + i), widen16_masked(wr + i, tail), b);
    y[j * ystride] += _mm512_reduce_add_ps(_mm512_add_ps(a, b));
  }
}

/// dot_multi_avx512 for MR rows of x (a compile-time count, so that the 2·MR accumulators stay
/// in registers).
template <int MR>
void dot_block_avx512(int64_t rows, int64_t k, const float* x, int64_t ldx, const uint16_t* w,
                      int64_t ldw, float* y, int64_t ldy) {
  const int64_t k32 = k / 32 * 32, k16 = k / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (k - k16)) - 1u);
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* wr = w + j * ldw;
    __m512 a[MR], b[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) a[r] = b[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i < k32; i += 32) {
      const __m512 wa = widen16(wr + i), wb = widen16(wr + i + 16);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + i), wa, a[r]);
        b[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + i + 16), wb, b[r]);
      }
    }
    if (i < k16) {
      const __m512 wa = widen16(wr + i);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + i), wa, a[r]);
      i += 16;
    }
    if (i < k) {
      const __m512 wt = widen16_masked(wr + i, tail);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        b[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + r * ldx + i), wt, b[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) y[r * ldy + j] += _mm512_reduce_add_ps(_mm512_add_ps(a[r], b[r]));
  }
}

/// AVX-512 over m rows of x, 8 at a time: each weight row widened once per step and multiplied
/// with every row of the block, each output summed exactly as dot_rows_avx512 sums it (the same
/// two accumulators, steps and tails), so its bits do not depend on m.
void dot_multi_avx512(int64_t m, int64_t rows, int64_t k, const float* x, int64_t ldx,
                      const uint16_t* w, int64_t ldw, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < m; r0 += 8) {
    const float* xr = x + r0 * ldx;
    float* yr = y + r0 * ldy;
    switch (std::min<int64_t>(8, m - r0)) {
      case 1:
        dot_block_avx512<1>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 2:
        dot_block_avx512<2>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 3:
        dot_block_avx512<3>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 4:
        dot_block_avx512<4>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 5:
        dot_block_avx512<5>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 6:
        dot_block_avx512<6>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      case 7:
        dot_block_avx512<7>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
      default:
        dot_block_avx512<8>(rows, k, xr, ldx, w, ldw, yr, ldy);
        break;
    }
  }
}
#endif

#ifdef LCM_BF16_AVX2
/// 8 BF16 values at p widened to FP32.
inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
/// The sum of a's 8 lanes (a fixed order).
inline float hsum8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// AVX2 + FMA: one row at a time, two 8-lane accumulators, the last k % 8 values in scalar.
void dot_rows_avx2(int64_t rows, int64_t k, const float* x, const uint16_t* w, int64_t ldw,
                   float* y, int64_t ystride) {
  const int64_t k16 = k / 16 * 16, k8 = k / 8 * 8;
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* wr = w + j * ldw;
    __m256 a = _mm256_setzero_ps(), b = a;
    int64_t i = 0;
    for (; i < k16; i += 16) {
      a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), widen8(wr + i), a);
      b = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), widen8(wr + i + 8), b);
    }
    if (i < k8) {
      a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), widen8(wr + i), a);
      i += 8;
    }
    float acc = hsum8(_mm256_add_ps(a, b));
    for (; i < k; ++i) acc += x[i] * from_bf16(wr[i]);
    y[j * ystride] += acc;
  }
}
#endif

#ifdef LCM_BF16_AVX2
/// AVX2 over m ≤ 8 rows of x, each output summed exactly as dot_rows_avx2 sums it.
void dot_multi_avx2(int64_t m, int64_t rows, int64_t k, const float* x, int64_t ldx,
                    const uint16_t* w, int64_t ldw, float* y, int64_t ldy) {
  constexpr int64_t kMax = 8;
  const int64_t k16 = k / 16 * 16, k8 = k / 8 * 8;
  for (int64_t r0 = 0; r0 < m; r0 += kMax) {
    const int64_t mr = std::min(kMax, m - r0);
    const float* xr = x + r0 * ldx;
    for (int64_t j = 0; j < rows; ++j) {
      const uint16_t* wr = w + j * ldw;
      __m256 a[kMax], b[kMax];
      for (int64_t r = 0; r < mr; ++r) a[r] = b[r] = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i < k16; i += 16) {
        const __m256 wa = widen8(wr + i), wb = widen8(wr + i + 8);
        for (int64_t r = 0; r < mr; ++r) {
          a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + r * ldx + i), wa, a[r]);
          b[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + r * ldx + i + 8), wb, b[r]);
        }
      }
      if (i < k8) {
        const __m256 wa = widen8(wr + i);
        for (int64_t r = 0; r < mr; ++r)
          a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + r * ldx + i), wa, a[r]);
        i += 8;
      }
      for (int64_t r = 0; r < mr; ++r) {
        const float* xv = xr + r * ldx;
        float acc = hsum8(_mm256_add_ps(a[r], b[r]));
        for (int64_t q = i; q < k; ++q) acc += xv[q] * from_bf16(wr[q]);
        y[(r0 + r) * ldy + j] += acc;
      }
    }
  }
}
#endif

using DotRows = void (*)(int64_t, int64_t, const float*, const uint16_t*, int64_t, float*, int64_t);
using DotMulti = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, const uint16_t*,
                          int64_t, float*, int64_t);

struct Kernel {
  DotRows fn;
  DotMulti multi;
  const char* name;
};

/// The widest kernel this build has that the running CPU supports.
Kernel choose_kernel() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
#ifdef LCM_BF16_AVX512
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return {dot_rows_avx512, dot_multi_avx512, "avx512"};
#endif
#ifdef LCM_BF16_AVX2
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {dot_rows_avx2, dot_multi_avx2, "avx2"};
#endif
#endif
  return {dot_rows_scalar, dot_multi_scalar, "scalar"};
}

const Kernel& kernel() {
  static const Kernel k = choose_kernel();
  return k;
}

}  // namespace

std::vector<uint16_t> round_to_bf16(float* values, int64_t n) {
  std::vector<uint16_t> bits(size_t(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i) {
    bits[size_t(i)] = to_bf16(values[i]);
    values[i] = from_bf16(bits[size_t(i)]);
  }
  return bits;
}

const char* bf16_kernel() {
  return kernel().name;
}

void bf16_dot_rows(int64_t rows, int64_t k, const float* x, const uint16_t* w, int64_t ldw,
                   float* y, int64_t ystride) {
  if (rows <= 0 || k <= 0) return;
  kernel().fn(rows, k, x, w, ldw, y, ystride);
}

void bf16_dot_rows_multi(int64_t m, int64_t rows, int64_t k, const float* x, int64_t ldx,
                         const uint16_t* w, int64_t ldw, float* y, int64_t ldy) {
  if (m <= 0 || rows <= 0 || k <= 0) return;
  kernel().multi(m, rows, k, x, ldx, w, ldw, y, ldy);
}

}  // namespace lcm
