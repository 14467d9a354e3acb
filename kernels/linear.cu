// CUDA twin of the GEMMs of engine/ops/linear.cpp and lstm.cpp: row-major GEMM through cuBLAS
// (one handle per device, default stream), FP32 by default, TF32 tensor cores behind set_tf32.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {

constexpr int kMaxDevices = 64;
cublasHandle_t g_handles[kMaxDevices] = {};
bool g_tf32 = false;
std::mutex g_mutex;

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what + ": " + cublasGetStatusString(s));
}

/// The cuBLAS handle of the current device (created on first use) with the current math mode.
cublasHandle_t handle() {
  int dev = 0;
  detail::check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices)
    throw std::runtime_error("cuBLAS: device index " + std::to_string(dev) + " too large");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_handles[dev]) {
    check_blas(cublasCreate(&g_handles[dev]), "cublasCreate");
    // Deterministic results: no atomics-based reductions inside cuBLAS.
    check_blas(cublasSetAtomicsMode(g_handles[dev], CUBLAS_ATOMICS_NOT_ALLOWED),
               "cublasSetAtomicsMode");
  }
  check_blas(
      cublasSetMathMode(g_handles[dev], g_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode");
  // the kernels' stream: the capture stream while this thread captures a graph
  check_blas(cublasSetStream(g_handles[dev], detail::stream()), "cublasSetStream");
  return g_handles[dev];
}

cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob, int m, int n,
                         int k, const float* alpha, const float* A, int lda, const float* B,
                         int ldb, const float* beta, float* C, int ldc) {
  return cublasSgemm(h, oa, ob, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob, int m, int n,
                         int k, const double* alpha, const double* A, int lda, const double* B,
                         int ldb, const double* beta, double* C, int ldc) {
  return cublasDgemm(h, oa, ob, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

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
  if (k <= 0) {
    if (!accumulate) {
      detail::count_copy();
      detail::check(cudaMemset2DAsync(C, size_t(ldc) * sizeof(T), 0, size_t(n) * sizeof(T),
                                      size_t(m), detail::stream()),
                    "gemm (k = 0)");
    }
    return;
  }
  const int64_t lim = int64_t(1) << 31;
  if (m >= lim || n >= lim || k >= lim || lda >= lim || ldb >= lim || ldc >= lim)
    throw std::runtime_error("cuBLAS gemm: extent beyond 2^31");
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands; a row-major
  // operand read as column-major is already its transpose, so the op flags carry over unchanged.
  const T one = T(1), beta = accumulate ? T(1) : T(0);
  detail::count_gemm();
  check_blas(gemm_call(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                       int(n), int(m), int(k), &one, B, int(ldb), A, int(lda), &beta, C, int(ldc)),
             "gemm");
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                          const float*, int64_t, float*, int64_t, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                           const double*, int64_t, double*, int64_t, bool);

}  // namespace lcm::cuda
