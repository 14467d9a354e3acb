// Thread-count control shared by Eigen and OpenMP, and the denormal mode of those threads.
#include "engine/threads.hpp"

#include <omp.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/eigen.hpp"
#include "util/log.hpp"

namespace lcm {

static int g_threads = 0;

/// Flush-to-zero + denormals-are-zero on the calling thread (x86 MXCSR is per thread).
static void flush_denormals_here() {
#if defined(__SSE__) || defined(__x86_64__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

std::string oversubscription_warning(int n) {
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0 || n <= int(hw)) return "";
  return "lcm: warning: " + std::to_string(n) + " threads requested but this machine has " +
         std::to_string(hw) +
         " hardware threads; oversubscribed threads make the CPU backend "
         "slower, not faster (0 = all hardware threads)";
}

void set_num_threads(int n) {
  if (n > kMaxThreads)
    throw std::invalid_argument("set_num_threads: " + std::to_string(n) + " threads; at most " +
                                std::to_string(kMaxThreads) + " (0 = all hardware threads)");
  if (n <= 0) n = int(std::max(1u, std::thread::hardware_concurrency()));
  static bool warned = false;
  const std::string warning = oversubscription_warning(n);
  if (!warning.empty() && !warned) {
    warned = true;
    log_line(warning);
  }
  g_threads = n;
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
  // Training drives many float32 values (Adam moments, small gradients) into the denormal range,
  // where x86 arithmetic is ~100x slower: measured, a 60-epoch run slowed from 5.5 to 12 s per
  // epoch. Flushing them to zero changes results only below 1.2e-38. LCM_KEEP_DENORMALS=1 keeps
  // IEEE denormals (for experiments).
  const char* keep = std::getenv("LCM_KEEP_DENORMALS");
  if (!(keep && keep[0] == '1')) {
    flush_denormals_here();
#pragma omp parallel num_threads(n)
    flush_denormals_here();
  }
}

int num_threads() {
  if (g_threads <= 0) set_num_threads(0);
  return g_threads;
}

}  // namespace lcm
