// BF16 weight copies for batch-1 inference (lcm-serve --weights bf16, docs/tools.md "lcm-serve"):
// a weight rounded to BF16 (the top 16 bits of an IEEE float, round to nearest even) is kept as
// 2-byte values beside its FP32 value (itself rounded, so every product reads the same numbers),
// and the one-row products of engine/ops/gemm.hpp read the 2-byte copy — half the bytes of the
// FP32 weight — widen each value to FP32 (a 16-bit shift, exact) and accumulate in FP32 with the
// activations left in FP32. The products of more rows run the packed FP32 GEMM over the rounded
// FP32 values: the same weights, another summation order.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace lcm {

/// The BF16 bits of `x` rounded to nearest, ties to even (NaN stays a quiet NaN).
inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return uint16_t((u >> 16) | 0x0040u);  // NaN: keep it a NaN after truncation
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// The float whose bits are `b` followed by 16 zero bits (exact).
inline float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Rounds values[0..n) to BF16 in place and returns their bits.
std::vector<uint16_t> round_to_bf16(float* values, int64_t n);

/// The kernel bf16_dot_rows runs on this CPU: "avx512" (AVX-512F), "avx2" (AVX2 + FMA) or
/// "scalar" (any other, and builds for other architectures). Chosen by the ISA the build targets
/// and checked against the running CPU once (a CPU without it gets the next one down).
const char* bf16_kernel();

/// y[j·ystride] += Σ_i x[i]·bf16(W[j·ldw + i]) for j < rows, i < k: `rows` dot products of the
/// FP32 vector x [k] (contiguous) with rows of the BF16 matrix W, accumulated in FP32 (exact
/// products of the widened weights, summed in one fixed order per kernel: bit-identical run after
/// run on one machine and for any thread count).
void bf16_dot_rows(int64_t rows, int64_t k, const float* x, const uint16_t* w, int64_t ldw,
                   float* y, int64_t ystride);

/// bf16_dot_rows for m rows of x at once: y[r·ldy + j] += Σ_i x[r·ldx + i]·bf16(W[j·ldw + i])
/// for r < m, each weight row read once per 8 rows of x (a few computations or tree nodes against
/// one weight: one pass over the weight instead of m). Each output is summed exactly as
/// bf16_dot_rows sums it, so its bits do not depend on m (the memo's exactness).
void bf16_dot_rows_multi(int64_t m, int64_t rows, int64_t k, const float* x, int64_t ldx,
                         const uint16_t* w, int64_t ldw, float* y, int64_t ldy);

}  // namespace lcm
