// Emulation of kernels/linear.cu (see device.cpp): a row-major triple-loop GEMM in place of cuBLAS.
#include <cstdint>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

namespace {
bool g_tf32 = false;
}  // namespace

void set_tf32(bool on) {
  g_tf32 = on;
}
bool tf32() {
  return g_tf32;
}
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 && accumulate) return;  // (as cuBLAS is skipped: C unchanged)
  // k = 0 without accumulate: a memset on the GPU
  emu::launch(k <= 0 ? emu::Work::Copy : emu::Work::Gemm, [=] {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T s = T(0);
        for (int64_t q = 0; q < k; ++q)
          s += (ta ? A[q * lda + i] : A[i * lda + q]) * (tb ? B[j * ldb + q] : B[q * ldb + j]);
        C[i * ldc + j] = accumulate ? C[i * ldc + j] + s : s;
      }
  });
}

#define LCM_INSTANTIATE(T)                                                                  \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, \
                        int64_t, T*, int64_t, bool);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
