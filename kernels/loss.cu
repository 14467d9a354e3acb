// CUDA twin of engine/ops/loss.cpp (and of the L1 loss of rank_loss.cpp): deterministic sum /
// squared-error / MAPE / absolute-error reductions (fixed blocks and a fixed tree order, no
// atomics) and the element-wise backward of the losses.
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
using detail::kReduceBlock;
using detail::kReduceThreads;
using detail::reduce_final_kernel;

template <class T>
__device__ inline double loss_term(LossKind k, const T* a, const T* b, int64_t i) {
  switch (k) {
    case LossKind::Sum:
      return double(a[i]);
    case LossKind::SquaredError: {
      const double d = double(a[i]) - double(b[i]);
      return d * d;
    }
    case LossKind::AbsError: {
      const double d = double(a[i]) - double(b[i]);
      return d < 0 ? -d : d;
    }
    default: {
      const T eps = T(1e-5);
      const T diff = b[i] - a[i];
      return double((diff < T(0) ? -diff : diff) / (b[i] + eps));
    }
  }
}

template <class T>
__global__ void reduce_partials_kernel(LossKind k, const T* a, const T* b, int64_t n,
                                       double* partial) {
  __shared__ double sh[kReduceThreads];
  const int64_t lo = int64_t(blockIdx.x) * kReduceBlock;
  const int64_t hi = lo + kReduceBlock < n ? lo + kReduceBlock : n;
  double s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kReduceThreads) s += loss_term(k, a, b, i);
  sh[threadIdx.x] = s;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class T>
__device__ inline T sign_of(T v) {
  return T((v > T(0)) - (v < T(0)));
}

template <class T>
__global__ void loss_backward_kernel(LossKind k, const T* a, const T* b, const T* gy, T* ga, T* gb,
                                     int64_t n, double mult) {
  const T c = T(double(gy[0]) * mult);
  const T eps = T(1e-5);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    switch (k) {
      case LossKind::Sum:
        if (ga) ga[i] += c;
        break;
      case LossKind::SquaredError:
        if (ga) ga[i] += c * (a[i] - b[i]);
        if (gb) gb[i] += -c * (a[i] - b[i]);
        break;
      case LossKind::AbsError: {
        const T g = c * sign_of(a[i] - b[i]);
        if (ga) ga[i] += g;
        if (gb) gb[i] -= g;
        break;
      }
      default: {
        if (ga) ga[i] += c * sign_of(a[i] - b[i]) / (b[i] + eps);
        if (gb) {
          const T den = b[i] + eps, diff = b[i] - a[i];
          gb[i] += c * (sign_of(diff) / den - (diff < T(0) ? -diff : diff) / (den * den));
        }
      }
    }
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
  if (n <= 0) {
    detail::check(cudaMemsetAsync(scratch, 0, sizeof(double), 0), "reduce_loss");
  } else {
    reduce_partials_kernel<<<unsigned(nb), kReduceThreads>>>(kind, a, b, n, scratch);
    check_launch("reduce_loss (partials)");
  }
  reduce_final_kernel<<<1, kReduceThreads>>>(scratch, nb, scale, out);
  check_launch("reduce_loss (final)");
}

template <class T>
void loss_backward(LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb, int64_t n,
                   double mult) {
  if (n <= 0 || (!ga && !gb)) return;
  loss_backward_kernel<<<grid_for(n), kThreads>>>(kind, a, b, gy, ga, gb, n, mult);
  check_launch("loss_backward");
}

#define LCM_INSTANTIATE(T)                                                                  \
  template void reduce_loss<T>(LossKind, const T*, const T*, int64_t, double, T*, double*); \
  template void loss_backward<T>(LossKind, const T*, const T*, const T*, T*, T*, int64_t, double);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
