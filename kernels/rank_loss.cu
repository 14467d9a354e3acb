// CUDA twin of the pairwise logistic (RankNet) loss of engine/ops/rank_loss.cpp: a deterministic
// reduction over a host-built pair table (fixed blocks and tree order, no atomics) and a backward
// that gathers each score's gradient over its incidence list in a fixed order (no atomics).
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"
#include "kernels/reduce.cuh"

namespace lcm::cuda {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

namespace {

using detail::block_tree_sum;
using detail::kReduceBlock;  // pairs per partial
using detail::kReduceThreads;
using detail::reduce_final_kernel;

template <class T>
__global__ void pairwise_partials_kernel(const T* s, const int64_t* pairs, int64_t n_pairs,
                                         double* partial) {
  __shared__ double sh[kReduceThreads];
  const int64_t lo = int64_t(blockIdx.x) * kReduceBlock;
  const int64_t hi = lo + kReduceBlock < n_pairs ? lo + kReduceBlock : n_pairs;
  double acc = 0;
  for (int64_t p = lo + threadIdx.x; p < hi; p += kReduceThreads)
    acc += ops::math::pair_loss(double(s[pairs[2 * p]]), double(s[pairs[2 * p + 1]]));
  sh[threadIdx.x] = acc;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class T>
__global__ void pairwise_backward_kernel(const T* s, const int64_t* pairs, const int64_t* starts,
                                         const int64_t* inc, const T* gy, T* gs, int64_t n,
                                         double mult) {
  const double c = double(gy[0]) * mult;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    gs[k] += T(ops::math::pair_grad_of_score(s, pairs, starts, inc, k, c));
  }
}

}  // namespace

template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, int64_t n_pairs, double scale,
                               T* out, double* scratch) {
  const int64_t nb = reduce_scratch_size(n_pairs);
  if (n_pairs <= 0) {
    detail::check(cudaMemsetAsync(scratch, 0, sizeof(double), 0), "pairwise_logistic_forward");
  } else {
    pairwise_partials_kernel<<<unsigned(nb), kReduceThreads>>>(s, pairs, n_pairs, scratch);
    check_launch("pairwise_logistic_forward (partials)");
  }
  reduce_final_kernel<<<1, kReduceThreads>>>(scratch, nb, scale, out);
  check_launch("pairwise_logistic_forward (final)");
}

template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const int64_t* starts,
                                const int64_t* inc, const T* gy, T* gs, int64_t n, double mult) {
  if (n <= 0) return;
  pairwise_backward_kernel<<<grid_for(n), kThreads>>>(s, pairs, starts, inc, gy, gs, n, mult);
  check_launch("pairwise_logistic_backward");
}

LCM_CUDA_RANK_LOSS_INSTANCES(float)
LCM_CUDA_RANK_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
