// Internal helpers of the .cu files: CUDA error checking that throws one-line std::runtime_error,
// grid sizing, the fixed block sizes of the element-wise kernels and their grid-stride loop. Not
// included by C++ code.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace lcm::cuda::detail {

/// Throws std::runtime_error("<what>: <CUDA error text>") when `e` is not cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}
/// The stream every launch, cuBLAS call and copy of the kernels layer uses: the capture stream
/// while the calling thread captures a graph (kernels/cuda_graph.cu), else the legacy default
/// stream (nullptr), which orders them with each other as before.
cudaStream_t stream();
/// True while the calling thread captures a graph.
bool capturing();
/// Throws std::runtime_error("<what>: not permitted during a graph capture") while capturing
/// (reading back to the host, synchronising, other streams).
void forbid_in_capture(const char* what);
/// Outside a capture `src`; while capturing, a pinned copy of the `bytes` at `src` that the graph
/// owns (a captured upload reads its source at every replay: a pageable or temporary source
/// would be gone or changed by then).
const void* capture_upload_source(const void* src, size_t bytes);
/// `bytes` of device memory owned by the graph being captured (freed with it): scratch that a
/// captured launch reads at every replay and that calls after the capture must not reuse.
void* capture_device_scratch(size_t bytes);
/// The counters of kernels/cuda_graph.hpp launch_counts().
void count_kernel();
void count_gemm();
void count_copy();

/// Checks the launch of kernel `name` (configuration errors; execution errors surface later at
/// the next synchronising call) and counts it.
inline void check_launch(const char* name) {
  count_kernel();
  check(cudaGetLastError(), name);
}

/// Threads per block of the element-wise kernels.
constexpr int kThreads = 256;
/// Blocks for n elements with a grid-stride loop (capped: each thread then loops).
inline unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return unsigned(b);
}

}  // namespace lcm::cuda::detail

namespace lcm::cuda {
// The launch helpers every .cu file names unqualified.
using detail::check_launch;
using detail::grid_for;
using detail::kThreads;
}  // namespace lcm::cuda

/// A grid-stride loop in a kernel: `i` runs over [0, n), each thread from its global index in
/// steps of the grid's thread count (launched with grid_for(n) blocks of kThreads).
#define LCM_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)
