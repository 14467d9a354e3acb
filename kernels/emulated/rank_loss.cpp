// Emulation of kernels/rank_loss.cu (see device.cpp): the pairwise logistic loss of
// engine/ops/loss_math.hpp over the host-built pair table, its backward over the incidence lists.
#include <cstdint>

#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, int64_t n_pairs, double scale,
                               T* out, double* scratch) {
  double acc = 0;
  for (int64_t p = 0; p < n_pairs; ++p)
    acc += ops::math::pair_loss(double(s[pairs[2 * p]]), double(s[pairs[2 * p + 1]]));
  scratch[0] = acc;
  out[0] = T(scale * acc);
}
template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const int64_t* starts,
                                const int64_t* inc, const T* gy, T* gs, int64_t n, double mult) {
  const double c = double(gy[0]) * mult;
  for (int64_t k = 0; k < n; ++k) {
    gs[k] += T(ops::math::pair_grad_of_score(s, pairs, starts, inc, k, c));
  }
}

LCM_CUDA_RANK_LOSS_INSTANCES(float)
LCM_CUDA_RANK_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
