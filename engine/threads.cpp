// Thread-count control shared by Eigen and OpenMP.
#include "engine/threads.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <thread>

namespace lcm {

static int g_threads = 0;

void set_num_threads(int n) {
  if (n <= 0) n = int(std::max(1u, std::thread::hardware_concurrency()));
  g_threads = n;
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int num_threads() {
  if (g_threads <= 0) set_num_threads(0);
  return g_threads;
}

}  // namespace lcm
