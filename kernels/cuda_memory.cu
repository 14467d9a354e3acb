// CUDA memory primitives behind kernels/cuda_memory.hpp: allocation with one-line errors naming
// the device and the bytes asked for, pinned host memory, copies, streams, fills.
#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_device.hpp"
#include "kernels/cuda_memory.hpp"

namespace lcm::cuda {

using detail::check;

namespace {

std::string gib(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

template <class T>
__global__ void add_scalar_kernel(T* p, T v) {
  p[0] += v;
}

}  // namespace

void set_device(int index) {
  std::string why;
  const int n = device_count(&why);
  const std::string name = "cuda:" + std::to_string(index);
  if (n == 0) throw std::runtime_error(name + ": no CUDA device available (" + why + ")");
  if (index < 0 || index >= n)
    throw std::runtime_error(name + ": device index out of range (" + std::to_string(n) +
                             " CUDA device(s) visible)");
  check(cudaSetDevice(index), (name + ": cudaSetDevice").c_str());
}

void* device_alloc(int index, size_t bytes) {
  set_device(index);
  void* p = nullptr;
  const size_t asked = bytes == 0 ? 256 : bytes;
  cudaError_t e = cudaMalloc(&p, asked);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    throw std::runtime_error(
        "cuda:" + std::to_string(index) + ": " +
        (e == cudaErrorMemoryAllocation ? "out of memory" : cudaGetErrorString(e)) +
        " allocating " + std::to_string(bytes) + " bytes (" + gib(bytes) + "; " + gib(free_b) +
        " free of " + gib(total_b) + ")");
  }
  return p;
}

void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}

void* pinned_alloc(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, bytes == 0 ? 64 : bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("pinned host memory: cannot allocate " + std::to_string(bytes) +
                             " bytes (" + cudaGetErrorString(e) + ")");
  }
  return p;
}

void pinned_free(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  detail::count_copy();
  if (detail::capturing()) {  // from the graph's own pinned copy of the source
    check(cudaMemcpyAsync(dst, detail::capture_upload_source(src, bytes), bytes,
                          cudaMemcpyHostToDevice, detail::stream()),
          "copy host->device (captured)");
    return;
  }
  // From pageable memory cudaMemcpyAsync copies the source to a staging buffer before it returns
  // (the caller may reuse it at once) and does not wait for the queued kernels, which cudaMemcpy
  // does before every copy (CUDA Runtime API, "API synchronization behavior"): the many small
  // uploads of a training step (index lists, constants) would each drain the device's queue. A
  // pinned source would be read later by the DMA engine, so it keeps the synchronous copy.
  cudaPointerAttributes a{};
  const bool pinned =
      cudaPointerGetAttributes(&a, src) == cudaSuccess && a.type == cudaMemoryTypeHost;
  cudaGetLastError();  // (an unregistered pointer may leave an error on older runtimes)
  check(pinned ? cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice)
               : cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, nullptr),
        "copy host->device");
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  detail::forbid_in_capture("copy device->host");
  if (!bytes) return;
  detail::count_copy();
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy device->host");
}
void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  detail::count_copy();
  check(detail::capturing()
            ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::stream())
            : cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
        "copy device->device");
}
void zero_device(void* dst, size_t bytes) {
  if (!bytes) return;
  detail::count_copy();
  check(cudaMemsetAsync(dst, 0, bytes, detail::stream()), "cudaMemset");
}

Stream stream_create() {
  detail::forbid_in_capture("stream_create");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}
void stream_destroy(Stream s) noexcept {
  if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
}
void copy_to_device_async(void* dst, const void* src, size_t bytes, Stream s) {
  detail::forbid_in_capture("copy_to_device_async");
  if (!bytes) return;
  detail::count_copy();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s)),
        "async copy host->device");
}
void synchronize(Stream s) {
  detail::forbid_in_capture("synchronize");
  if (s)
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  else
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Event event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}
void event_destroy(Event e) noexcept {
  if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}
void event_record(Event e, Stream s) {
  detail::forbid_in_capture("event_record");
  check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)),
        "cudaEventRecord");
}
void stream_wait_event(Stream s, Event e) {
  detail::forbid_in_capture("stream_wait_event");
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0),
        "cudaStreamWaitEvent");
}
void event_synchronize(Event e) {
  detail::forbid_in_capture("event_synchronize");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize");
}

void fill(float* p, int64_t n, float v) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(p, n, v);
  check_launch("fill");
}
void fill(double* p, int64_t n, double v) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), kThreads, 0, detail::stream()>>>(p, n, v);
  check_launch("fill");
}
void add_scalar(float* p, float v) {
  add_scalar_kernel<<<1, 1, 0, detail::stream()>>>(p, v);
  check_launch("add_scalar");
}
void add_scalar(double* p, double v) {
  add_scalar_kernel<<<1, 1, 0, detail::stream()>>>(p, v);
  check_launch("add_scalar");
}

}  // namespace lcm::cuda
