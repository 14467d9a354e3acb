// Device (CUDA) memory of the engine: the activation arena of a CUDA tape (grows on demand,
// reports its peak), owning device and pinned-host buffers, host<->device copies of tensors and of
// a ParameterStore. Plain C++: in a build without CUDA every entry point throws one clear error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/arena.hpp"
#include "engine/parameter.hpp"
#include "engine/tensor.hpp"

namespace lcm {

/// The error of every device entry point in a build without the CUDA kernels.
[[noreturn]] void throw_cuda_not_built(const char* what);

/// Device memory of cuda:`device` that is freed on destruction (move-only). Throws
/// std::runtime_error naming the device and the bytes asked for when the allocation fails.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

/// Page-locked host memory (cudaMallocHost) for streaming batches to the device with copies that
/// overlap compute. Move-only; freed on destruction. Throws std::runtime_error when it fails.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

/// The activation memory of a CUDA tape: a chunked bump allocator over device memory with the
/// same contract as lcm::Arena (engine/arena.hpp). It grows on demand (a new chunk, at least
/// double the last, when the current ones are full; allocations never move), reset() makes all of
/// it reusable without freeing (a caching allocator across training steps), and it reports the
/// peak bytes handed out between resets. Allocations are 256-byte aligned. Not thread-safe.
/// Out of memory: std::runtime_error "cuda:N: out of memory allocating B bytes (...)".
/// alloc<T>(n) and alloc_zero<T>(n) (TypedArenaAllocs) give device storage for n values of T.
class DeviceArena : public TypedArenaAllocs<DeviceArena> {
 public:
  explicit DeviceArena(int device, size_t first_chunk_bytes = size_t(16) << 20);
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  void* alloc_bytes(size_t bytes);
  void reset();
  int device() const { return device_; }
  size_t live_bytes() const { return live_; }
  size_t peak_bytes() const { return peak_; }
  /// Device bytes reserved (the sum of the chunk sizes).
  size_t capacity_bytes() const;

 private:
  friend class TypedArenaAllocs<DeviceArena>;
  static void zero(void* p, size_t bytes);
  struct Chunk {
    DeviceBuffer mem;
    size_t used = 0;
  };
  int device_;
  size_t first_chunk_;
  std::vector<Chunk> chunks_;
  size_t cur_ = 0, live_ = 0, peak_ = 0;
};

// ---- helpers the tape and the ops use on device pointers (default stream) ----

/// dst[0..n) (device) ← src[0..n) (host).
template <class T>
void device_upload(T* dst, const T* src, int64_t n);
/// dst[0..n) (host) ← src[0..n) (device).
template <class T>
void device_download(T* dst, const T* src, int64_t n);
/// Fills n device values with v.
template <class T>
void device_fill(T* p, int64_t n, T v);
/// p[0] += v on the device.
template <class T>
void device_add_scalar(T* p, T v);
/// `bytes` bytes device ← host (any trivially copyable data, e.g. int64 index tables).
void device_upload_bytes(void* dst, const void* src, size_t bytes);
/// Zeroes `bytes` of device memory.
void device_zero(void* p, size_t bytes);
/// Waits for all queued device work; throws std::runtime_error with the first kernel error.
void device_synchronize();

/// The values of `t` on the host (a copy; works for CPU and CUDA tensors).
template <class T>
std::vector<T> to_host(const Tensor<T>& t);

/// Copies every parameter's value to cuda:`device` (allocating a device value and a zeroed
/// device gradient per parameter; later calls reuse them and copy the values again). After this,
/// a tape on that device views Parameter::device_value. Throws std::runtime_error (no device,
/// out of memory: naming the device and the bytes).
template <class T>
void parameters_to_device(ParameterStore<T>& store, int device);
/// Copies device values (and, with `grads`, device gradients) back into the host vectors of
/// every parameter that has them (others untouched).
template <class T>
void parameters_to_host(ParameterStore<T>& store, bool grads = false);
/// Zeroes the device gradient of every parameter that has one.
template <class T>
void zero_device_grads(ParameterStore<T>& store);

}  // namespace lcm
