// Emulation of kernels/cuda_graph.cu (see device.cpp): launch counts, and graphs as the recorded
// list of the emulated kernels' work (emu.hpp), replayed in order by graph_launch.
#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_graph.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

namespace {
struct Counters {
  std::atomic<int64_t> kernels{0}, gemms{0}, copies{0}, graphs{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
/// An emulated graph: the recorded work, in order.
struct EmuGraph {
  std::vector<std::function<void()>> work;
};
thread_local EmuGraph* t_capture = nullptr;  // the graph being captured on this thread
}  // namespace

namespace emu {
void launch(Work kind, std::function<void()> fn) {
  Counters& c = counters();
  (kind == Work::Kernel ? c.kernels
   : kind == Work::Gemm ? c.gemms
                        : c.copies)
      .fetch_add(1, std::memory_order_relaxed);
  if (t_capture)
    t_capture->work.push_back(std::move(fn));
  else
    fn();
}
void count(Work kind, int64_t n) {
  Counters& c = counters();
  (kind == Work::Kernel ? c.kernels
   : kind == Work::Gemm ? c.gemms
                        : c.copies)
      .fetch_add(n, std::memory_order_relaxed);
  // a graph of the real kernels holds a node for each of them: so does the emulated one
  if (t_capture)
    for (int64_t i = 0; i < n; ++i) t_capture->work.push_back([] {});
}
bool capturing() {
  return t_capture != nullptr;
}
void forbid_in_capture(const char* what) {
  if (t_capture)
    throw std::runtime_error(std::string(what) + ": not permitted during a graph capture");
}
}  // namespace emu

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
  t_capture = new EmuGraph();
}
Graph graph_end_capture() {
  if (!t_capture) throw std::runtime_error("graph capture: no capture under way");
  EmuGraph* g = t_capture;
  t_capture = nullptr;
  return g;
}
void graph_launch(Graph g) {
  if (!g) throw std::runtime_error("graph launch: no graph");
  emu::forbid_in_capture("graph launch");
  counters().graphs.fetch_add(1, std::memory_order_relaxed);
  for (const auto& w : static_cast<EmuGraph*>(g)->work) w();
}
void graph_destroy(Graph g) noexcept {
  delete static_cast<EmuGraph*>(g);
}
bool graph_capturing() {
  return t_capture != nullptr;
}
int64_t graph_size(Graph g) {
  return g ? int64_t(static_cast<EmuGraph*>(g)->work.size()) : 0;
}

}  // namespace lcm::cuda
