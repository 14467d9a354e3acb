// A second CUDA stream for copies that overlap compute, and events ordering it with the default
// stream (batch streaming), as owning engine types over kernels/cuda_memory.hpp. Plain C++:
// in a build without CUDA every entry point throws the one clear error of throw_cuda_not_built.
#pragma once
#include <cstddef>

namespace lcm {

/// A non-blocking CUDA stream on cuda:`device` (move-only; destroyed, after its queued work, on
/// destruction). Copies queued on it run concurrently with the kernels of the default stream.
/// Throws std::runtime_error (no device / CUDA not built, naming the device).
class DeviceStream {
 public:
  explicit DeviceStream(int device);
  ~DeviceStream();
  DeviceStream(DeviceStream&& o) noexcept;
  DeviceStream& operator=(DeviceStream&& o) noexcept;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  /// Queues `bytes` host → device (dst: device memory; src: host memory, pinned for a truly
  /// asynchronous copy, that must stay unchanged until the copy completed).
  void copy_to_device_async(void* dst, const void* src, size_t bytes);
  /// Blocks the host until everything queued on this stream completed.
  void synchronize();
  void* handle() const { return s_; }
  int device() const { return device_; }

 private:
  void* s_ = nullptr;
  int device_ = 0;
};

/// A CUDA event (move-only): records a point of a stream's work, which another stream or the host
/// can wait for. A never-recorded event counts as completed. Throws std::runtime_error.
class DeviceEvent {
 public:
  explicit DeviceEvent(int device);
  ~DeviceEvent();
  DeviceEvent(DeviceEvent&& o) noexcept;
  DeviceEvent& operator=(DeviceEvent&& o) noexcept;
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  /// Records the work queued so far on `stream` (nullptr: the default stream of the kernels).
  void record(const DeviceStream* stream);
  /// Work queued later on `stream` (nullptr: the default stream) waits for this event; the host
  /// does not block.
  void make_wait(const DeviceStream* stream) const;
  /// Blocks the host until the recorded work completed.
  void synchronize() const;

 private:
  void* e_ = nullptr;
};

/// Free and total bytes of cuda:`device` now. Throws std::runtime_error (no device, CUDA not
/// built).
void device_memory_info(int device, size_t* free_bytes, size_t* total_bytes);

}  // namespace lcm
