// Helpers shared by the test suites that run on a CUDA device when one is usable (test_cuda_model,
// test_device_batch_store): why the CUDA cases are skipped on this machine / build.
#pragma once
#include <doctest/doctest.h>

#include <string>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

namespace lcm::test {

/// "" when a CUDA device is usable (a real one, or the emulated cuda:0 of -DLCM_CUDA_EMULATE=ON),
/// else the reason the CUDA cases are skipped.
inline std::string no_cuda_reason() {
#ifdef LCM_WITH_CUDA
  std::string why;
  return cuda::device_count(&why) > 0 ? std::string() : "no CUDA device (" + why + ")";
#else
  return "this build has no CUDA kernels";
#endif
}

/// True, after logging "skipped: <what>: <reason>" in the running test case, when no CUDA device
/// is usable; the caller then returns. Use: `if (test::skipped_without_cuda("...")) return;`.
inline bool skipped_without_cuda(const std::string& what) {
  const std::string why = no_cuda_reason();
  if (why.empty()) return false;
  MESSAGE("skipped: " << what << ": " << why);
  return true;
}

}  // namespace lcm::test
