// DeviceGraph and the launch counts (device_graph.hpp) over kernels/cuda_graph.hpp; without CUDA
// the counts are zero and every graph entry point throws throw_cuda_not_built's error.
#include "engine/device_graph.hpp"

#include <stdexcept>
#include <utility>

#include "engine/device_memory.hpp"

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_graph.hpp"
#include "kernels/cuda_memory.hpp"
#endif

namespace lcm {

#ifdef LCM_WITH_CUDA
DeviceLaunchCounts device_launch_counts() {
  const cuda::LaunchCounts c = cuda::launch_counts();
  return {c.kernels, c.gemms, c.copies, c.graphs};
}
DeviceGraph::~DeviceGraph() {
  abort_capture();
  cuda::graph_destroy(g_);
}
void DeviceGraph::begin_capture(int device) {
  abort_capture();
  cuda::graph_destroy(g_);
  g_ = nullptr;
  cuda::set_device(device);
  cuda::graph_begin_capture();
  capturing_ = true;
}
void DeviceGraph::end_capture() {
  if (!capturing_) throw std::runtime_error("DeviceGraph::end_capture: no capture under way");
  capturing_ = false;
  g_ = cuda::graph_end_capture();
}
void DeviceGraph::abort_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  try {
    cuda::graph_destroy(cuda::graph_end_capture());
  } catch (...) {  // (an invalidated capture: it is over, nothing to free)
  }
}
void DeviceGraph::launch() const {
  if (!g_) throw std::logic_error("DeviceGraph::launch: nothing captured");
  cuda::graph_launch(g_);
}
int64_t DeviceGraph::size() const {
  return cuda::graph_size(g_);
}
#else
DeviceLaunchCounts device_launch_counts() {
  return {};
}
DeviceGraph::~DeviceGraph() = default;
void DeviceGraph::begin_capture(int) {
  throw_cuda_not_built("DeviceGraph");
}
void DeviceGraph::end_capture() {
  throw_cuda_not_built("DeviceGraph");
}
void DeviceGraph::abort_capture() noexcept {}
void DeviceGraph::launch() const {
  throw_cuda_not_built("DeviceGraph");
}
int64_t DeviceGraph::size() const {
  return 0;
}
#endif

DeviceGraph::DeviceGraph(DeviceGraph&& o) noexcept
    : g_(std::exchange(o.g_, nullptr)), capturing_(std::exchange(o.capturing_, false)) {}
DeviceGraph& DeviceGraph::operator=(DeviceGraph&& o) noexcept {
  if (this != &o) {
    DeviceGraph old(std::move(*this));  // frees what this held
    g_ = std::exchange(o.g_, nullptr);
    capturing_ = std::exchange(o.capturing_, false);
  }
  return *this;
}

}  // namespace lcm
