// The one way lcm's code includes Eigen (Core and Dense).
// GCC 12's AVX-512 intrinsics start from an uninitialised vector (avx512fintrin.h:
// `__m512 __Y = __Y;` in _mm512_undefined_ps), so every Eigen AVX-512 packet operation that
// inlines one (ptranspose, unpack, shuffle) warns -Wuninitialized / -Wmaybe-uninitialized at
// -O1 (the sanitizer build: some 150 warnings per GEMM-heavy file on an AVX-512 machine). Those
// are false positives, GCC bug 105593, fixed in GCC 13. GCC 12 applies a diagnostic pragma at any
// location of a warning's inlining chain, so these two warnings are off for Eigen's code only:
// the pragmas cover the text of its headers (and of the intrinsics headers it includes first),
// never lcm's own code.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Dense>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
