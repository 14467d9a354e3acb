// Thread count of the CPU backend (Eigen's GEMMs and our OpenMP loops).
#pragma once

namespace lcm {

/// Sets the number of threads for Eigen and OpenMP; n <= 0 means all hardware threads.
void set_num_threads(int n);
/// The current thread count.
int num_threads();

}  // namespace lcm
