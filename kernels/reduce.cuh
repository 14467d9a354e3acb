// Internal device helpers of the deterministic reductions in the .cu files (loss.cu, rank_loss.cu,
// optim.cu): fixed partial blocks, a fixed-order shared-memory tree, and the one-block final sum.
// No atomics, so a sum is bit-identical run after run. Not included by C++ code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace lcm::cuda::detail
