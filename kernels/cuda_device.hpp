// Host-side queries of the CUDA runtime (device count, names, memory), compiled by nvcc into the
// optional lcm_kernels target. Declared here without CUDA headers so C++ code can include it.
#pragma once
#include <cstddef>
#include <string>

namespace lcm::cuda {

/// Number of CUDA devices visible to this process; 0 when there is no driver or no device
/// (never throws). `why` receives the CUDA runtime's error text when the count is 0, plus "(no
/// NVIDIA driver or GPU on this machine?)" when that is the likely cause (no driver, no device).
int device_count(std::string* why = nullptr);

/// Human-readable description of device `index`: "NVIDIA H200 (sm_90, 139.8 GiB)".
/// Throws std::runtime_error for an index out of range.
std::string device_description(int index);

/// Free and total memory of device `index` in bytes. Throws std::runtime_error on failure.
void device_memory(int index, size_t* free_bytes, size_t* total_bytes);

}  // namespace lcm::cuda
