// The scalar formulas of the element-wise ops, written once (docs/model-spec.md §5.2): each unary
// op's value and derivative, used by the CPU op (engine/ops/elementwise.cpp, ops::linear_elu), the
// CUDA kernels (kernels/elementwise.cu) and their emulation (kernels/emulated/elementwise.cpp).
// The CPU's ELU runs on detail::expm1, a vectorisable polynomial (≤ 2 ulp against the library's
// expm1, tests/test_gemm.cpp); the kernels and the emulation use the library's expm1.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/hd.hpp"

namespace lcm::ops {

/// The unary element-wise ops: y = f(x), backward dx += dy ⊙ f'(x, y). `param` is the factor
/// (Scale) or the negative slope (LeakyRelu), unused otherwise. Shared by the op and the kernels.
/// Count is the number of kinds, not a kind: tests enumerate every kind as k < Count, and every
/// switch over Unary names each kind (no default), so -Wswitch names a kind a switch misses.
enum class Unary : int { Scale = 0, Elu = 1, LeakyRelu = 2, Sigmoid = 3, Tanh = 4, Count = 5 };

namespace math {

/// The library's exp, expm1 and tanh, for float and double, on the host and the device.
#define LCM_LIB_FUNCTION(name, float_fn, double_fn) \
  LCM_HD inline float name(float x) {               \
    return ::float_fn(x);                           \
  }                                                 \
  LCM_HD inline double name(double x) {             \
    return ::double_fn(x);                          \
  }
LCM_LIB_FUNCTION(lib_exp, expf, exp)
LCM_LIB_FUNCTION(lib_expm1, expm1f, expm1)
LCM_LIB_FUNCTION(lib_tanh, tanhf, tanh)
#undef LCM_LIB_FUNCTION

/// ELU with α = 1 (§5.2): x if x > 0 else expm1(x), with `em1` the expm1 to use (the CPU passes
/// its polynomial detail::expm1).
template <class T, class Expm1>
LCM_HD inline T elu(T x, Expm1 em1) {
  return x > T(0) ? x : em1(x);
}
template <class T>
LCM_HD inline T elu(T x) {
  return x > T(0) ? x : lib_expm1(x);
}
/// dELU/dx from x and y = elu(x): 1 if x > 0 else y + 1 (= eˣ).
template <class T>
LCM_HD inline T elu_grad(T x, T y) {
  return x > T(0) ? T(1) : y + T(1);
}
/// LeakyReLU (§5.2): x if x ≥ 0 else slope·x; derivative 1 or slope (1 at 0, as PyTorch).
template <class T>
LCM_HD inline T leaky_relu(T x, T slope) {
  return x >= T(0) ? x : slope * x;
}
template <class T>
LCM_HD inline T leaky_relu_grad(T x, T slope) {
  return x >= T(0) ? T(1) : slope;
}
/// σ(x) = 1 / (1 + e^−x); derivative from y = σ(x): y (1 − y).
template <class T>
LCM_HD inline T sigmoid(T x) {
  return T(1) / (T(1) + lib_exp(-x));
}
template <class T>
LCM_HD inline T sigmoid_grad(T y) {
  return y * (T(1) - y);
}
/// tanh; derivative from y = tanh(x): 1 − y².
template <class T>
LCM_HD inline T tanh_grad(T y) {
  return T(1) - y * y;
}

/// f(x) of `kind` (see Unary), with the library's functions; NaN for Count or a value outside
/// the enum.
template <class T>
LCM_HD inline T unary_value(Unary kind, T x, T param) {
  switch (kind) {
    case Unary::Scale:
      return param * x;
    case Unary::Elu:
      return elu(x);
    case Unary::LeakyRelu:
      return leaky_relu(x, param);
    case Unary::Sigmoid:
      return sigmoid(x);
    case Unary::Tanh:
      return lib_tanh(x);
    case Unary::Count:  // not a kind
      break;
  }
  return T(NAN);  // Count or a value outside the enum: no op's value
}
/// f'(x) of `kind` from x and y = f(x); NaN for Count or a value outside the enum.
template <class T>
LCM_HD inline T unary_grad(Unary kind, T x, T y, T param) {
  switch (kind) {
    case Unary::Scale:
      return param;
    case Unary::Elu:
      return elu_grad(x, y);
    case Unary::LeakyRelu:
      return leaky_relu_grad(x, param);
    case Unary::Sigmoid:
      return sigmoid_grad(y);
    case Unary::Tanh:
      return tanh_grad(y);
    case Unary::Count:  // not a kind
      break;
  }
  return T(NAN);  // Count or a value outside the enum: no op's derivative
}

}  // namespace math

namespace detail {

/// exp(x) − 1 for float without a library call, so that loops over it vectorise (`omp simd`):
/// glibc's expm1f is scalar (~4 ns/element; it was ~20% of the MLP stack's time in ELU). The CPU's
/// definition of ELU's expm1. Method (Cody–Waite, as Cephes/Sleef expm1f): k = round(x / ln 2),
/// r = x − k·ln 2 (|r| ≤ 0.35) split in a high and a low part, expm1(r) by its Taylor series to
/// r⁸/8! (truncation < 1e-9 relative), then expm1(x) = 2ᵏ·expm1(r) + (2ᵏ − 1) with one fused
/// multiply-add. Max error ≈ 2 ulp against std::expm1 for all finite x (tests/test_gemm.cpp);
/// x < −87 (and −inf) gives −1, x > ln(FLT_MAX) (and +inf) +inf, NaN and ±0 are returned
/// unchanged. The polynomial itself runs on x clamped to [−87, ln(FLT_MAX)] with NaN mapped to
/// −87, so that k is always in [−126, 127] and 2ᵏ is built from a valid exponent field (a NaN k
/// would convert to INT_MIN, and its shift is undefined). Host only. The double overload is
/// std::expm1 (exact reference for gradient checks).
inline float expm1(float x) {
  // The comparisons are false for NaN, which therefore takes the −87 branch.
  const float xc = x > -87.0f ? (x < 88.7228394f ? x : 88.7228394f) : -87.0f;
  constexpr float kRound = 12582912.0f;  // 1.5·2²³: adding and subtracting rounds to an integer
  float kf = (xc * 1.44269504088896341f + kRound) - kRound;
  kf = kf > 127.0f ? 127.0f : kf;  // x in (88.03, 88.72]: r up to 0.69, still ≈ 2 ulp
  const float r0 = std::fma(kf, -0.693359375f, xc);  // ln 2 high part (exact product for |k| ≤ 128)
  const float r =
      std::fma(kf, 2.12194440e-4f, r0);  // ln 2 low part: ln 2 = 0.693359375 − 2.12194440e-4
  float p = 1.0f / 40320.0f;
  p = std::fma(p, r, 1.0f / 5040.0f);
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  const float em1 = std::fma(p * r, r, r);  // expm1(r) = r + r²·(1/2 + r/6 + …)
  const int32_t bits = (int32_t(kf) + 127) << 23;
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  const float y = std::fma(two_k, em1, two_k - 1.0f);
  // Beyond ln(FLT_MAX) the result overflows; NaN and ±0 are returned as they are.
  return x > 88.7228394f ? HUGE_VALF : (x != x || x == 0.0f) ? x : y;
}
inline double expm1(double x) {
  return std::expm1(x);
}

/// The CPU's ELU: math::elu on detail::expm1.
template <class T>
inline T cpu_elu(T x) {
  return math::elu(x, [](T v) { return expm1(v); });
}

}  // namespace detail
}  // namespace lcm::ops
