// CUDA runtime queries behind kernels/cuda_device.hpp (device count, description, memory).
#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cuda_device.hpp"

namespace lcm::cuda {

int device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) {
      *why = cudaGetErrorString(e);
      // CUDA's words for "no driver" (cudaErrorInsufficientDriver: "CUDA driver version is
      // insufficient for CUDA runtime version") mislead a user on a machine without a GPU
      if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
        *why += " (no NVIDIA driver or GPU on this machine?)";
    }
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device (no NVIDIA driver or GPU on this machine?)";
  return n;
}

std::string device_description(int index) {
  int n = device_count();
  if (index < 0 || index >= n)
    throw std::runtime_error("cuda:" + std::to_string(index) + " is out of range (" +
                             std::to_string(n) + " CUDA device(s) visible)");
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                double(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

void device_memory(int index, size_t* free_bytes, size_t* total_bytes) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(index);
  if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, total_bytes);
  cudaSetDevice(prev);
  if (e != cudaSuccess)
    throw std::runtime_error("cuda:" + std::to_string(index) +
                             ": cudaMemGetInfo: " + cudaGetErrorString(e));
}

}  // namespace lcm::cuda
