// CUDA twin of the ranking losses of engine/ops/rank_loss.cpp. Pairwise logistic (RankNet, and
// the |ΔnDCG|-weighted LambdaRank form): a deterministic reduction over a host-built pair table
// (fixed blocks and tree order, no atomics) and a backward that gathers each score's gradient over
// its incidence list in a fixed order (no atomics). ListNet: one thread per group (program) over a
// host-built CSR member table, the group terms summed by the fixed-order final reduction; the
// backward writes each group's disjoint members (no atomics).
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"
#include "kernels/reduce.cuh"

namespace lcm::cuda {

namespace {

using detail::block_tree_sum;
using detail::kReduceBlock;  // pairs per partial
using detail::kReduceThreads;

template <class T>
__global__ void pairwise_partials_kernel(const T* s, const int64_t* pairs, const double* w,
                                         int64_t n_pairs, double* partial) {
  __shared__ double sh[kReduceThreads];
  const int64_t lo = int64_t(blockIdx.x) * kReduceBlock;
  const int64_t hi = lo + kReduceBlock < n_pairs ? lo + kReduceBlock : n_pairs;
  double acc = 0;
  for (int64_t p = lo + threadIdx.x; p < hi; p += kReduceThreads)
    acc += ops::math::weighted_pair_loss(s, pairs, w, p);
  sh[threadIdx.x] = acc;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class T>
__global__ void pairwise_backward_kernel(const T* s, const int64_t* pairs, const double* w,
                                         const int64_t* starts, const int64_t* inc, const T* gy,
                                         T* gs, int64_t n, double mult) {
  const double c = double(gy[0]) * mult;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    gs[k] += T(ops::math::pair_grad_of_score(s, pairs, starts, inc, k, c, w));
  }
}

template <class T>
__global__ void listnet_terms_kernel(const T* s, const double* p, const int64_t* members,
                                     const int64_t* starts, int64_t n_groups, double* terms) {
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < n_groups;
       g += int64_t(gridDim.x) * blockDim.x)
    terms[g] = ops::math::listnet_group_term(s, p, members, starts[g], starts[g + 1]);
}

template <class T>
__global__ void listnet_backward_kernel(const T* s, const double* p, const int64_t* members,
                                        const int64_t* starts, int64_t n_groups, const T* gy, T* gs,
                                        double mult) {
  const double c = double(gy[0]) * mult;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < n_groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t lo = starts[g], hi = starts[g + 1];
    const double lse = ops::math::group_logsumexp(s, members, lo, hi);
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t k = members[q];
      gs[k] += T(c * (::exp(double(s[k]) - lse) - p[q]));
    }
  }
}

}  // namespace

template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, const double* w, int64_t n_pairs,
                               double scale, T* out, double* scratch) {
  const int64_t nb = reduce_scratch_size(n_pairs);
  detail::reduce_to_scalar(
      n_pairs, nb, scale, out, scratch, "pairwise_logistic_forward", "partials", [&] {
        pairwise_partials_kernel<<<unsigned(nb), kReduceThreads, 0, detail::stream()>>>(
            s, pairs, w, n_pairs, scratch);
      });
}

template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const double* w,
                                const int64_t* starts, const int64_t* inc, const T* gy, T* gs,
                                int64_t n, double mult) {
  if (n <= 0) return;
  pairwise_backward_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(s, pairs, w, starts, inc,
                                                                           gy, gs, n, mult);
  check_launch("pairwise_logistic_backward");
}

template <class T>
void listnet_forward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                     int64_t n_groups, double scale, T* out, double* scratch) {
  detail::reduce_to_scalar(
      n_groups, n_groups > 0 ? n_groups : 1, scale, out, scratch, "listnet_forward", "terms", [&] {
        listnet_terms_kernel<<<grid_for(n_groups), kThreads, 0, detail::stream()>>>(
            s, p, members, starts, n_groups, scratch);
      });
}

template <class T>
void listnet_backward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                      int64_t n_groups, const T* gy, T* gs, double mult) {
  if (n_groups <= 0) return;
  listnet_backward_kernel<<<grid_for(n_groups), kThreads, 0, detail::stream()>>>(
      s, p, members, starts, n_groups, gy, gs, mult);
  check_launch("listnet_backward");
}

LCM_CUDA_RANK_LOSS_INSTANCES(float)
LCM_CUDA_RANK_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
