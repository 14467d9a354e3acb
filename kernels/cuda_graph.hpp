// Launch counting and CUDA graphs of the kernels layer, declared without CUDA headers so C++ code
// can include it; compiled by nvcc into lcm_kernels (kernels/cuda_graph.cu) or emulated
// (kernels/emulated/graph.cpp).
//
// Launch counts: every entry point of kernels/cuda_ops.hpp and cuda_memory.hpp that queues device
// work counts what it queues (one per kernel launch, one per cuBLAS call, one per copy or memset),
// in both backends alike, so the emulated build measures how many launches a training step makes
// (the cost that bounds a GPU step of small kernels: ~4-6 µs of host and driver time each).
//
// Graphs: between graph_begin_capture() and graph_end_capture() the kernels of the calling thread
// are recorded, not run (cudaStreamBeginCapture on a stream of their own, which every launch of the
// kernels layer, its cuBLAS calls and its copies then use); graph_launch() runs the recorded work
// again, with the same device pointers and the same kernel arguments, in one launch. Host → device
// copies made during the capture read their source at capture time (it is copied into memory the
// graph owns), so a replay uploads the same values again; reading device memory back to the host,
// synchronising, streams and events are errors during a capture (std::runtime_error naming the
// call), as in CUDA.
#pragma once
#include <cstdint>

namespace lcm::cuda {

/// Device work queued by the kernels layer since the process started (all threads, all devices).
struct LaunchCounts {
  int64_t kernels = 0;  // kernel launches
  int64_t gemms = 0;    // cuBLAS calls (emulated: GEMM calls)
  int64_t copies = 0;   // copies and memsets (host ↔ device, device → device)
  int64_t graphs = 0;   // graph launches (each replays a captured sequence in one launch)
  /// Launches the host made: kernels + gemms + copies + graphs (a graph counts once).
  int64_t total() const { return kernels + gemms + copies + graphs; }
};
/// The counts so far (never throws; relaxed atomic reads).
LaunchCounts launch_counts();

/// An opaque instantiated graph (real: cudaGraphExec_t and the host memory of its uploads).
using Graph = void*;
/// Starts recording the device work of the calling thread on the current device instead of
/// running it. Throws std::runtime_error when a capture is already under way on this thread.
void graph_begin_capture();
/// Ends the capture and instantiates what was recorded. Throws std::runtime_error (with CUDA's
/// reason, e.g. an operation not allowed during capture) when nothing was being captured or the
/// capture was invalidated; the capture is over in every case.
Graph graph_end_capture();
/// Runs graph `g` once (ordered with the kernels queued before and after it).
void graph_launch(Graph g);
/// Frees graph `g` (nullptr: no-op; never throws).
void graph_destroy(Graph g) noexcept;
/// True while the calling thread captures.
bool graph_capturing();
/// Kernels, gemms and copies recorded in graph `g` (its node count; 0 for nullptr).
int64_t graph_size(Graph g);

}  // namespace lcm::cuda
