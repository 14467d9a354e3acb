// Launch counts and CUDA graphs of the kernels layer (kernels/cuda_graph.hpp): the capture stream
// every launch of the layer uses while the calling thread captures (detail::stream()), the
// counters behind launch_counts(), and graph instantiation and replay.
#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_graph.hpp"

namespace lcm::cuda {

namespace {
struct Counters {
  std::atomic<int64_t> kernels{0}, gemms{0}, copies{0}, graphs{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
/// A graph and what it owns: the pinned host copies of the uploads captured into it, its device
/// scratch (optimizer tables).
struct GraphHolder {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<void*> pinned, scratch;
  int64_t nodes = 0;
};
/// The capture of the calling thread: its stream and what the graph-to-be will own.
struct Capture {
  cudaStream_t stream = nullptr;
  std::vector<void*> pinned, scratch;
};
thread_local Capture* t_capture = nullptr;
void free_owned(std::vector<void*>& pinned, std::vector<void*>& scratch) noexcept {
  if (pinned.empty() && scratch.empty()) return;
  cudaDeviceSynchronize();  // (a replay may still read them)
  for (void* p : pinned) cudaFreeHost(p);
  for (void* p : scratch) cudaFree(p);
  pinned.clear(), scratch.clear();
  cudaGetLastError();
}
}  // namespace

namespace detail {
cudaStream_t stream() {
  return t_capture ? t_capture->stream : nullptr;
}
bool capturing() {
  return t_capture != nullptr;
}
void forbid_in_capture(const char* what) {
  if (t_capture)
    throw std::runtime_error(std::string(what) + ": not permitted during a graph capture");
}
const void* capture_upload_source(const void* src, size_t bytes) {
  if (!t_capture || bytes == 0) return src;
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "graph capture: pinned copy of an upload");
  std::memcpy(p, src, bytes);
  t_capture->pinned.push_back(p);
  return p;
}
void* capture_device_scratch(size_t bytes) {
  if (!t_capture) throw std::logic_error("capture_device_scratch: no capture under way");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 256 : bytes), "graph capture: device scratch");
  t_capture->scratch.push_back(p);
  return p;
}
void count_kernel() {
  counters().kernels.fetch_add(1, std::memory_order_relaxed);
}
void count_gemm() {
  counters().gemms.fetch_add(1, std::memory_order_relaxed);
}
void count_copy() {
  counters().copies.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

LaunchCounts launch_counts() {
  const Counters& c = counters();
  LaunchCounts r;
  r.kernels = c.kernels.load(std::memory_order_relaxed);
  r.gemms = c.gemms.load(std::memory_order_relaxed);
  r.copies = c.copies.load(std::memory_order_relaxed);
  r.graphs = c.graphs.load(std::memory_order_relaxed);
  return r;
}

void graph_begin_capture() {
  if (t_capture) throw std::runtime_error("graph capture: a capture is already under way");
  auto* c = new Capture();
  // Queued work of the default stream first: the capture stream does not order with it.
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  // Relaxed: allocations during the capture (a tape's arena growing, pinned upload copies) are
  // made at once, outside the graph.
  if (e == cudaSuccess) e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    if (c->stream) cudaStreamDestroy(c->stream);
    delete c;  // (nothing owned yet)
    detail::check(e, "graph capture: begin");
  }
  t_capture = c;
}

Graph graph_end_capture() {
  if (!t_capture) throw std::runtime_error("graph capture: no capture under way");
  Capture* c = t_capture;
  t_capture = nullptr;
  auto* h = new GraphHolder();
  h->pinned.swap(c->pinned);
  h->scratch.swap(c->scratch);
  cudaError_t e = cudaStreamEndCapture(c->stream, &h->graph);
  cudaStreamDestroy(c->stream);
  delete c;
  if (e == cudaSuccess) {
    size_t n = 0;
    e = cudaGraphGetNodes(h->graph, nullptr, &n);
    h->nodes = int64_t(n);
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&h->exec, h->graph, 0);
  if (e != cudaSuccess) {
    graph_destroy(h);
    detail::check(e, "graph capture: end");
  }
  return h;
}

void graph_launch(Graph g) {
  if (!g) throw std::runtime_error("graph launch: no graph");
  detail::forbid_in_capture("graph launch");
  counters().graphs.fetch_add(1, std::memory_order_relaxed);
  detail::check(cudaGraphLaunch(static_cast<GraphHolder*>(g)->exec, nullptr), "cudaGraphLaunch");
}

void graph_destroy(Graph g) noexcept {
  auto* h = static_cast<GraphHolder*>(g);
  if (!h) return;
  if (h->exec) cudaGraphExecDestroy(h->exec);
  if (h->graph) cudaGraphDestroy(h->graph);
  free_owned(h->pinned, h->scratch);
  delete h;
}

bool graph_capturing() {
  return t_capture != nullptr;
}

int64_t graph_size(Graph g) {
  return g ? static_cast<GraphHolder*>(g)->nodes : 0;
}

}  // namespace lcm::cuda
