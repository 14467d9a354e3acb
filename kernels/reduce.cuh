// Internal device helpers of the deterministic reductions in the .cu files (loss.cu, rank_loss.cu,
// optim.cu): fixed partial blocks, a fixed-order shared-memory tree, and the one-block final sum.
// No atomics, so a sum is bit-identical run after run. Not included by C++ code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda_check.cuh"

namespace lcm::cuda::detail {

/// Elements per partial sum (as the CPU's ops::detail::kReduceBlock).
constexpr int64_t kReduceBlock = 4096;
/// Threads per block of the reduction kernels.
constexpr int kReduceThreads = 256;

/// Tree sum of the block's kReduceThreads values in shared memory `sh` (fixed order); every
/// thread of the block must call it.
__device__ inline double block_tree_sum(double* sh) {
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    __syncthreads();
    if (int(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
  }
  __syncthreads();
  return sh[0];
}

/// out[0] = T(scale · Σ partial[0..nb)): launched as one block of kReduceThreads threads (each
/// sums a fixed strided subset, then the tree).
template <class T>
__global__ void reduce_final_kernel(const double* partial, int64_t nb, double scale, T* out) {
  __shared__ double sh[kReduceThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < nb; i += kReduceThreads) s += partial[i];
  sh[threadIdx.x] = s;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) out[0] = T(scale * total);
}

/// A reduction to one value in two launches: `launch_terms()` writes the nb partial sums or terms
/// into `scratch` (only when n > 0; otherwise scratch[0] = 0 and nb must be 1), then
/// out[0] = T(scale · Σ scratch[0..nb)) (reduce_final_kernel). Errors name `what`: "<what>",
/// "<what> (<terms>)" for the first launch, "<what> (final)".
template <class T, class LaunchTerms>
void reduce_to_scalar(int64_t n, int64_t nb, double scale, T* out, double* scratch,
                      const char* what, const char* terms, LaunchTerms launch_terms) {
  if (n <= 0) {
    count_copy();
    check(cudaMemsetAsync(scratch, 0, sizeof(double), stream()), what);
  } else {
    launch_terms();
    check_launch((std::string(what) + " (" + terms + ")").c_str());
  }
  reduce_final_kernel<<<1, kReduceThreads, 0, stream()>>>(scratch, nb, scale, out);
  check_launch((std::string(what) + " (final)").c_str());
}

}  // namespace lcm::cuda::detail
