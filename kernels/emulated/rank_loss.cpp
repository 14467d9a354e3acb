// Emulation of kernels/rank_loss.cu (see device.cpp): the (optionally weighted) pairwise logistic
// loss of engine/ops/loss_math.hpp over the host-built pair table, its backward over the incidence
// lists, and the ListNet group terms and gradients over the CSR member table, in the kernels'
// per-thread order.
#include <cmath>
#include <cstdint>

#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, const double* w, int64_t n_pairs,
                               double scale, T* out, double* scratch) {
  emu::count(n_pairs <= 0 ? emu::Work::Copy : emu::Work::Kernel);  // (then the final reduction)
  emu::launch(emu::Work::Kernel, [=] {
    double acc = 0;
    for (int64_t p = 0; p < n_pairs; ++p) acc += ops::math::weighted_pair_loss(s, pairs, w, p);
    scratch[0] = acc;
    out[0] = T(scale * acc);
  });
}
template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const double* w,
                                const int64_t* starts, const int64_t* inc, const T* gy, T* gs,
                                int64_t n, double mult) {
  if (n <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    const double c = double(gy[0]) * mult;
    for (int64_t k = 0; k < n; ++k) {
      gs[k] += T(ops::math::pair_grad_of_score(s, pairs, starts, inc, k, c, w));
    }
  });
}

template <class T>
void listnet_forward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                     int64_t n_groups, double scale, T* out, double* scratch) {
  emu::count(n_groups <= 0 ? emu::Work::Copy : emu::Work::Kernel);  // (then the final reduction)
  emu::launch(emu::Work::Kernel, [=] {
    double acc = 0;
    for (int64_t g = 0; g < n_groups; ++g) {
      scratch[g] = ops::math::listnet_group_term(s, p, members, starts[g], starts[g + 1]);
      acc += scratch[g];
    }
    out[0] = T(scale * acc);
  });
}
template <class T>
void listnet_backward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                      int64_t n_groups, const T* gy, T* gs, double mult) {
  if (n_groups <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    const double c = double(gy[0]) * mult;
    for (int64_t g = 0; g < n_groups; ++g) {
      const int64_t lo = starts[g], hi = starts[g + 1];
      const double lse = ops::math::group_logsumexp(s, members, lo, hi);
      for (int64_t q = lo; q < hi; ++q) {
        const int64_t k = members[q];
        gs[k] += T(c * (std::exp(double(s[k]) - lse) - p[q]));
      }
    }
  });
}

LCM_CUDA_RANK_LOSS_INSTANCES(float)
LCM_CUDA_RANK_LOSS_INSTANCES(double)

}  // namespace lcm::cuda
