// Launch counts and CUDA graphs for the engine (over kernels/cuda_graph.hpp). Plain C++: without
// CUDA the counts are zero and a DeviceGraph throws throw_cuda_not_built's one clear error.
#pragma once
#include <cstdint>

namespace lcm {

/// Device work the CUDA backend queued since the process started: kernel launches, cuBLAS calls
/// (emulated build: GEMM calls), copies and memsets, graph launches. The proxy of a step's launch
/// cost (each launch costs the host and driver a few µs, which bounds a step of small kernels).
struct DeviceLaunchCounts {
  int64_t kernels = 0, gemms = 0, copies = 0, graphs = 0;
  /// kernels + gemms + copies + graphs (a graph launch counts once, however large).
  int64_t total() const { return kernels + gemms + copies + graphs; }
  /// The counts between `earlier` and this.
  DeviceLaunchCounts operator-(const DeviceLaunchCounts& earlier) const {
    return {kernels - earlier.kernels, gemms - earlier.gemms, copies - earlier.copies,
            graphs - earlier.graphs};
  }
  DeviceLaunchCounts operator+(const DeviceLaunchCounts& o) const {
    return {kernels + o.kernels, gemms + o.gemms, copies + o.copies, graphs + o.graphs};
  }
};
/// The counts so far; all zero in a build without CUDA. Never throws.
DeviceLaunchCounts device_launch_counts();

/// A captured sequence of device work, replayed in one launch (a CUDA graph; emulated build: the
/// recorded emulated kernels). Between begin_capture() and end_capture() the CUDA backend's work
/// of the calling thread is recorded instead of run: the kernels, cuBLAS calls and copies of the
/// ops and of the optimizer, with their device pointers and arguments as they are then; uploads
/// from the host are recorded with the values they have at capture time. launch() then runs the
/// recorded work (each time, on whatever the recorded pointers then hold). So a capture is
/// reusable while every buffer it touches stays allocated at the same address (a tape's arena,
/// resident inputs, parameters) and the host values it uploaded stay right for the replays.
/// During a capture, reading device memory back to the host, synchronising and other streams
/// are errors (std::runtime_error naming the call), and the capture is then void. Move-only.
class DeviceGraph {
 public:
  DeviceGraph() = default;
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&& o) noexcept;
  DeviceGraph& operator=(DeviceGraph&& o) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  /// Starts recording on cuda:`device` (drops a graph held before). Throws std::runtime_error (no
  /// CUDA in this build, no device, a capture already under way on this thread).
  void begin_capture(int device);
  /// Ends the recording and instantiates it; afterwards ready(). Throws std::runtime_error when
  /// no capture is under way or CUDA refused what was recorded (the capture is over either way).
  void end_capture();
  /// Abandons a capture under way (no-op otherwise; never throws): after an error in the
  /// captured code, so that the thread's later work runs again.
  void abort_capture() noexcept;
  /// Runs the recorded work once. Throws std::logic_error when !ready().
  void launch() const;
  bool ready() const { return g_ != nullptr; }
  bool capturing() const { return capturing_; }
  /// Recorded kernels, GEMMs and copies (0 before end_capture()).
  int64_t size() const;

 private:
  void* g_ = nullptr;
  bool capturing_ = false;
};

}  // namespace lcm
