// oneDNN's float GEMM behind ops::detail::gemm (engine/ops/gemm.hpp) in a build with
// LCM_WITH_ONEDNN: the one place lcm calls dnnl_sgemm.
#include "engine/ops/gemm.hpp"

#ifdef LCM_WITH_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>

namespace lcm {

void ops::detail::onednn_sgemm(int64_t m, int64_t n, int64_t k, Operand<float> a, Operand<float> b,
                               float* c, int64_t ldc, bool accumulate) noexcept {
  // Inside a parallel region oneDNN runs on the calling thread; outside, it would use every
  // OpenMP thread and its split of k would make the result depend on the thread count: this
  // thread's OpenMP team size is set to 1 for the call and restored after it.
  const bool nested = omp_in_parallel() != 0;
  const int team = nested ? 1 : omp_get_max_threads();
  if (!nested && team != 1) omp_set_num_threads(1);
  const dnnl_status_t st = dnnl_sgemm(a.trans ? 'T' : 'N', b.trans ? 'T' : 'N', m, n, k, 1.0f, a.p,
                                      a.ld, b.p, b.ld, accumulate ? 1.0f : 0.0f, c, ldc);
  if (!nested && team != 1) omp_set_num_threads(team);
  if (st != dnnl_success) {  // no allocation, no exception: this may run on an OpenMP worker
    std::fprintf(stderr,
                 "lcm: fatal: oneDNN dnnl_sgemm failed (status %d) for a %lldx%lldx%lld "
                 "product\n",
                 int(st), (long long)m, (long long)n, (long long)k);
    std::abort();
  }
}

}  // namespace lcm
#endif
