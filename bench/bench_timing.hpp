// Clocks shared by the C++ benchmarks: wall time, whole-process and calling-thread CPU time, in
// milliseconds.
#pragma once
#include <time.h>

#include <chrono>

namespace lcm::bench {

/// Monotonic wall clock, ms.
inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

/// CPU time of the whole process (all threads), ms: on a shared machine wall time is unreliable.
inline double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/// CPU time of the calling thread, ms. For a step whose work the calling thread shares with
/// OpenMP workers, it is the step's critical path as far as that thread carries it: wall time on
/// an idle machine, which a shared machine's wall clock does not give.
inline double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

}  // namespace lcm::bench
