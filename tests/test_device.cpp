// Tests of the device switch: parsing of training.device values and the clear errors when a
// CUDA device is asked for where none exists (GPU-only checks report a skip without a GPU).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "engine/device.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

using namespace lcm;

TEST_CASE("parse_device accepts cpu, cuda, cuda:N") {
  CHECK(parse_device("cpu").kind == Device::CPU);
  CHECK(parse_device("cuda").kind == Device::CUDA);
  CHECK(parse_device("cuda").index == 0);
  CHECK(parse_device("cuda:3").index == 3);
  CHECK(parse_device("cuda:12").str() == "cuda:12");
}

TEST_CASE("parse_device rejects anything else with the allowed forms") {
  for (const char* bad :
       {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", "cuda:1:2", "cuda:99999999"}) {
    try {
      parse_device(bad);
      FAIL("accepted " << bad);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("allowed: cpu, cuda, cuda:N") != std::string::npos);
    }
  }
}

TEST_CASE("require_device: cpu always, cuda only where it exists") {
  CHECK(require_device(parse_device("cpu")) == "cpu");
  int visible = 0;
#ifdef LCM_WITH_CUDA
  visible = cuda::device_count();
#endif
  if (visible == 0) {
    // No GPU (or no CUDA build): asking for one is one clear error naming the device.
    try {
      require_device(parse_device("cuda:0"));
      FAIL("cuda:0 accepted without a GPU");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).rfind("cuda:0: ", 0) == 0);
    }
  } else {
    CHECK(require_device(parse_device("cuda:0")).find("cuda:0 = ") == 0);
    try {
      require_device(parse_device("cuda:" + std::to_string(visible)));
      FAIL("out-of-range device accepted");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find("out of range") != std::string::npos);
    }
  }
}
