// Device parsing and availability checks (see device.hpp).
#include "engine/device.hpp"

#include <cctype>
#include <stdexcept>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#include "kernels/cuda_ops.hpp"
#endif

namespace lcm {

DeviceSpec parse_device(const std::string& text) {
  const std::string allowed = " (allowed: cpu, cuda, cuda:N with N >= 0)";
  if (text == "cpu") return {Device::CPU, 0};
  if (text == "cuda") return {Device::CUDA, 0};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 9) {
    int n = 0;
    for (size_t i = 5; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i])))
        throw std::invalid_argument("bad device '" + text + "'" + allowed);
      n = n * 10 + (text[i] - '0');
    }
    return {Device::CUDA, n};
  }
  throw std::invalid_argument("bad device '" + text + "'" + allowed);
}

bool cuda_built() {
#ifdef LCM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string require_device(const DeviceSpec& d) {
  if (d.kind == Device::CPU) return "cpu";
#ifdef LCM_WITH_CUDA
  std::string why;
  int n = cuda::device_count(&why);
  if (n == 0) throw std::runtime_error(d.str() + ": no CUDA device available (" + why + ")");
  if (d.index >= n)
    throw std::runtime_error(d.str() + ": device index out of range (" + std::to_string(n) +
                             " CUDA device(s) visible)");
  return d.str() + " = " + cuda::device_description(d.index);
#else
  throw std::runtime_error(d.str() +
                           ": this lcm build has no CUDA support (nvcc was not found at build "
                           "time or -DLCM_CUDA=OFF); use training.device=cpu");
#endif
}

void set_cuda_tf32(bool on) {
#ifdef LCM_WITH_CUDA
  cuda::set_tf32(on);
#else
  (void)on;
#endif
}

}  // namespace lcm
