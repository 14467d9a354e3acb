// Internal to the emulated kernels (kernels/emulated/*.cpp): how an emulated entry point queues
// its work, so that it is counted (kernels/cuda_graph.hpp launch_counts) and, while the calling
// thread captures a graph, recorded instead of run (graph.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace lcm::cuda::emu {

/// What one queued piece of work is, for launch_counts().
enum class Work { Kernel, Gemm, Copy };

/// Counts one launch of `kind`, then runs `fn` now, or, while the calling thread captures a graph,
/// appends it to the graph instead (`fn` must then own or point to everything it reads: device
/// pointers stay valid, host data must be copied into it: see snapshot()).
void launch(Work kind, std::function<void()> fn);

/// Counts `n` launches of `kind` without work (the extra launches of an entry point whose CUDA
/// version queues several: a reduction's final pass, a table upload); while capturing, they are
/// recorded as no-ops, so that a graph's size is its CUDA twin's node count.
void count(Work kind, int64_t n = 1);

/// True while the calling thread captures a graph.
bool capturing();

/// Throws std::runtime_error("<what>: not permitted during a graph capture") while capturing
/// (what CUDA refuses in a capture: reading back to the host, synchronising, other streams).
void forbid_in_capture(const char* what);

/// A copy of n values of host data that a recorded piece of work can own (the source may change
/// or vanish after the call that recorded it, as a pageable source of a captured CUDA copy).
template <class T>
std::shared_ptr<std::vector<T>> snapshot(const T* p, size_t n) {
  return std::make_shared<std::vector<T>>(p, p + n);
}

}  // namespace lcm::cuda::emu
