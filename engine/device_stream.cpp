// The owning stream/event types of device_stream.hpp over kernels/cuda_memory.hpp; without CUDA
// every constructor throws throw_cuda_not_built's one clear error.
#include "engine/device_stream.hpp"

#include <string>
#include <utility>

#include "engine/device_memory.hpp"

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#include "kernels/cuda_memory.hpp"
#endif

namespace lcm {

#ifdef LCM_WITH_CUDA
DeviceStream::DeviceStream(int device) : device_(device) {
  cuda::set_device(device);
  s_ = cuda::stream_create();
}
DeviceStream::~DeviceStream() {
  cuda::stream_destroy(s_);
}
void DeviceStream::copy_to_device_async(void* dst, const void* src, size_t bytes) {
  cuda::copy_to_device_async(dst, src, bytes, s_);
}
void DeviceStream::synchronize() {
  cuda::synchronize(s_);
}

DeviceEvent::DeviceEvent(int device) {
  cuda::set_device(device);
  e_ = cuda::event_create();
}
DeviceEvent::~DeviceEvent() {
  cuda::event_destroy(e_);
}
void DeviceEvent::record(const DeviceStream* stream) {
  cuda::event_record(e_, stream ? stream->handle() : nullptr);
}
void DeviceEvent::make_wait(const DeviceStream* stream) const {
  cuda::stream_wait_event(stream ? stream->handle() : nullptr, e_);
}
void DeviceEvent::synchronize() const {
  cuda::event_synchronize(e_);
}

void device_memory_info(int device, size_t* free_bytes, size_t* total_bytes) {
  cuda::set_device(device);
  cuda::device_memory(device, free_bytes, total_bytes);
}
#else
namespace {
std::string device_name(int device) {
  return "cuda:" + std::to_string(device);
}
}  // namespace
DeviceStream::DeviceStream(int device) : device_(device) {
  throw_cuda_not_built(device_name(device).c_str());
}
DeviceStream::~DeviceStream() = default;
void DeviceStream::copy_to_device_async(void*, const void*, size_t) {
  throw_cuda_not_built("DeviceStream");
}
void DeviceStream::synchronize() {
  throw_cuda_not_built("DeviceStream");
}
DeviceEvent::DeviceEvent(int device) {
  throw_cuda_not_built(device_name(device).c_str());
}
DeviceEvent::~DeviceEvent() = default;
void DeviceEvent::record(const DeviceStream*) {
  throw_cuda_not_built("DeviceEvent");
}
void DeviceEvent::make_wait(const DeviceStream*) const {
  throw_cuda_not_built("DeviceEvent");
}
void DeviceEvent::synchronize() const {
  throw_cuda_not_built("DeviceEvent");
}
void device_memory_info(int device, size_t*, size_t*) {
  throw_cuda_not_built(device_name(device).c_str());
}
#endif

DeviceStream::DeviceStream(DeviceStream&& o) noexcept
    : s_(std::exchange(o.s_, nullptr)), device_(o.device_) {}
DeviceStream& DeviceStream::operator=(DeviceStream&& o) noexcept {
  if (this != &o) {
    DeviceStream old(std::move(*this));
    s_ = std::exchange(o.s_, nullptr);
    device_ = o.device_;
  }
  return *this;
}
DeviceEvent::DeviceEvent(DeviceEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
DeviceEvent& DeviceEvent::operator=(DeviceEvent&& o) noexcept {
  if (this != &o) {
    DeviceEvent old(std::move(*this));
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}

}  // namespace lcm
