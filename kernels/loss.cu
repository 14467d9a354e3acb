// CUDA kernels of engine/ops/loss.cpp (and of the L1 loss of rank_loss.cpp): deterministic sum /
// squared-error / MAPE / absolute-error reductions (fixed blocks and a fixed tree order, no
// atomics) and the element-wise backward of the losses; the terms and gradients are
// engine/ops/loss_math.hpp's.
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"
#include "kernels/reduce.cuh"

namespace lcm::cuda {

namespace {

using detail::block_tree_sum;
using detail::kReduceBlock;
using detail::kReduceThreads;

template <class T>
__global__ void reduce_partials_kernel(LossKind k, const T* a, const T* b, int64_t n,
                                       double* partial) {
  __shared__ double sh[kReduceThreads];
  const int64_t lo = int64_t(blockIdx.x) * kReduceBlock;
  const int64_t hi = lo + kReduceBlock < n ? lo + kReduceBlock : n;
  double s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kReduceThreads)
    s += ops::math::loss_term(k, a[i], b ? b[i] : T(0));
  sh[threadIdx.x] = s;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class T>
__global__ void loss_backward_kernel(LossKind k, const T* a, const T* b, const T* gy, T* ga, T* gb,
                                     int64_t n, double mult) {
  const T c = T(double(gy[0]) * mult);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T bi = b ? b[i] : T(0);
    if (ga) ga[i] += ops::math::loss_grad_pred(k, a[i], bi, c);
    if (gb) gb[i] += ops::math::loss_grad_target(k, a[i], bi, c);
  }
}

}  // namespace

int64_t reduce_scratch_size(int64_t n) {
  return n <= 0 ? 1 : (n + kReduceBlock - 1) / kReduceBlock;
}

template <class T>
void reduce_loss(LossKind kind, const T* a, const T* b, int64_t n, double scale, T* out,
                 double* scratch) {
  const int64_t nb = reduce_scratch_size(n);
  detail::reduce_to_scalar(n, nb, scale, out, scratch, "reduce_loss", "partials", [&] {
    reduce_partials_kernel<<<unsigned(nb), kReduceThreads, 0, detail::stream()>>>(kind, a, b, n,
                                                                                  scratch);
  });
}

template <class T>
void loss_backward(LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb, int64_t n,
                   double mult) {
  if (n <= 0 || (!ga && !gb)) return;
  loss_backward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(kind, a, b, gy, ga, gb, n,
                                                                       mult);
  check_launch("loss_backward");
}

LCM_CUDA_LOSS_INSTANCES(float)
LCM_CUDA_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
