// Shared by the GPU benchmarks (bench_cuda, bench_streaming): why a benchmark on cuda:0 cannot
// run in this build or on this machine, printed as one "skipped: ..." line by the caller.
#pragma once
#include <string>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

namespace lcm::bench {

/// "" when cuda:0 can be timed; else the reason: no CUDA kernels in this build, the host
/// emulation of LCM_CUDA_EMULATE (its timings mean nothing), or no usable CUDA device.
inline std::string cuda_skip_reason() {
#ifndef LCM_WITH_CUDA
  return "this build has no CUDA kernels (nvcc not found or -DLCM_CUDA=OFF)";
#elif defined(LCM_CUDA_EMULATED)
  return "emulated CUDA build (LCM_CUDA_EMULATE): no timings of a host emulation";
#else
  std::string why;
  return cuda::device_count(&why) > 0 ? std::string() : "no CUDA device (" + why + ")";
#endif
}

}  // namespace lcm::bench
