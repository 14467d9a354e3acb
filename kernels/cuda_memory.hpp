// Raw CUDA memory primitives behind the engine's device memory (engine/device_memory.hpp):
// device and pinned-host allocation with one-line errors, host<->device copies, fills, streams.
// Declared without CUDA headers so C++ code can include it; compiled by nvcc into lcm_kernels.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lcm::cuda {

/// Makes device `index` current for the calling thread. Throws std::runtime_error
/// "cuda:N: no CUDA device available (<why>)" or "cuda:N: device index out of range (K visible)".
void set_device(int index);

/// `bytes` of device memory on device `index` (256-byte aligned, uninitialised; bytes == 0 gives
/// a valid 256-byte block). Throws std::runtime_error with one line naming the device, the bytes
/// asked for and the free/total memory on out of memory ("cuda:0: out of memory allocating
/// 1073741824 bytes (1.00 GiB; 0.20 GiB free of 139.8 GiB)"), or the no-device reasons of
/// set_device.
void* device_alloc(int index, size_t bytes);
/// Frees memory from device_alloc (nullptr is a no-op; never throws).
void device_free(void* p) noexcept;

/// Page-locked host memory for asynchronous copies (`bytes`, uninitialised). Throws
/// std::runtime_error "pinned host memory: cannot allocate N bytes (<why>)".
void* pinned_alloc(size_t bytes);
void pinned_free(void* p) noexcept;

/// Copies on the default stream, ordered with the kernels (bytes == 0 is a no-op). Throw
/// std::runtime_error naming the direction and the CUDA error. copy_to_device returns once the
/// source may be reused, without waiting for queued kernels when the source is pageable (it is
/// staged); copy_to_host returns with the data (waits for the queued work).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void copy_on_device(void* dst, const void* src, size_t bytes);
/// Sets `bytes` of device memory to zero (default stream, ordered with the kernels).
void zero_device(void* dst, size_t bytes);

/// An opaque CUDA stream (cudaStream_t) for overlapping copies with compute.
using Stream = void*;
/// A new non-blocking stream on the current device. Throws std::runtime_error.
Stream stream_create();
void stream_destroy(Stream s) noexcept;
/// Asynchronous host->device copy on `s` (src should be pinned for true overlap).
void copy_to_device_async(void* dst, const void* src, size_t bytes, Stream s);
/// Waits for everything queued on `s` (nullptr: the whole device). Throws std::runtime_error
/// with the first asynchronous kernel error, if any.
void synchronize(Stream s = nullptr);

/// An opaque CUDA event (cudaEvent_t, created without timing) ordering work between streams.
using Event = void*;
/// A new event on the current device. Throws std::runtime_error.
Event event_create();
void event_destroy(Event e) noexcept;
/// Marks the point in `s` reached by the work queued so far (nullptr: the default stream, where
/// the kernels and synchronous copies run). Throws std::runtime_error.
void event_record(Event e, Stream s);
/// Makes later work queued on `s` (nullptr: the default stream) wait until `e` has completed,
/// without blocking the host. Throws std::runtime_error.
void stream_wait_event(Stream s, Event e);
/// Blocks the host until `e` has completed (an event never recorded completes at once). Throws
/// std::runtime_error with the first asynchronous error.
void event_synchronize(Event e);

/// Fills n values at device pointer p with v (default stream).
void fill(float* p, int64_t n, float v);
void fill(double* p, int64_t n, double v);
/// p[0] += v for one value in device memory (the tape's loss-gradient seed).
void add_scalar(float* p, float v);
void add_scalar(double* p, double v);

}  // namespace lcm::cuda
