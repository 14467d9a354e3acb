// The one device switch (`training.device=cpu|cuda:N`): parsing, and checking that the device
// exists in this build and on this machine, with one clear message when it does not.
#pragma once
#include <string>

#include "engine/tensor.hpp"

namespace lcm {

/// A parsed device: CPU, or CUDA with a device index.
struct DeviceSpec {
  Device kind = Device::CPU;
  int index = 0;
  std::string str() const { return kind == Device::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};

/// Parses "cpu", "cuda" (= cuda:0) or "cuda:N" (N ≥ 0). Throws std::invalid_argument with the
/// allowed forms for anything else.
DeviceSpec parse_device(const std::string& text);

/// True when this binary was built with the CUDA kernels (nvcc found at build time).
bool cuda_built();

/// Checks that `d` can be used here: always true for the CPU; for CUDA the build must include
/// the kernels, a device must be visible and the index in range. Throws std::runtime_error with
/// one line naming the device and the reason. Returns a description ("cpu", "cuda:0 = NVIDIA …").
std::string require_device(const DeviceSpec& d);

/// CUDA float GEMMs (cuBLAS) may use TF32 tensor cores (`on`) or stay full FP32 (default).
/// No effect in a build without CUDA or on the CPU backend.
void set_cuda_tf32(bool on);

}  // namespace lcm
