// Shared by the GPU benchmarks (bench_cuda, bench_streaming): why a benchmark on cuda:0 cannot
// run in this build or on this machine, printed as one "skipped: ..." line, and the
// --require-device flag that makes that an exit code of 1.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
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

/// Adds the flag --require-device to `app` (exit 1, not 0, when cuda:0 cannot be timed: GPU
/// checks) and parses the command line. Returns the benchmark's exit code when it must stop here:
/// a parse error or --help (CLI11's code), or cuda:0 cannot be timed (cuda_skip_reason, printed
/// as "skipped: <reason>"); -1 when the benchmark runs.
inline int parse_or_skip_without_cuda(CLI::App& app, int argc, char** argv) {
  bool need_device = false;
  app.add_flag("--require-device", need_device,
               "exit 1 (not 0) when no CUDA device can be used (GPU checks)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::string why = cuda_skip_reason();
  if (why.empty()) return -1;
  std::printf("skipped: %s\n", why.c_str());
  return need_device ? 1 : 0;
}

}  // namespace lcm::bench
