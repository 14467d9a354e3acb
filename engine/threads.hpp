// Thread count of the CPU backend (Eigen's GEMMs and our OpenMP loops).
#pragma once
#include <string>

namespace lcm {

/// The largest thread count set_num_threads accepts (as data.nb_workers' [0, 1024]): far above
/// any core count this engine runs on; libgomp crashes (SIGSEGV in GOMP_parallel) near 100000.
constexpr int kMaxThreads = 1024;

/// Sets the number of threads for Eigen and OpenMP; n <= 0 means all hardware threads.
/// Throws std::invalid_argument for n > kMaxThreads. When n exceeds the hardware threads it
/// logs oversubscription_warning(n) (log_line: stderr in the tools) once per process.
void set_num_threads(int n);
/// The current thread count.
int num_threads();

/// "" when n <= the hardware threads (or they are unknown); else one line "lcm: warning: N
/// threads requested but this machine has M hardware threads; oversubscribed threads make the
/// CPU backend slower, not faster (0 = all hardware threads)".
std::string oversubscription_warning(int n);

}  // namespace lcm
