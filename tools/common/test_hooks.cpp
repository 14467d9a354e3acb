// The test hooks of the training tools from the environment (test_hooks.hpp).
#include "tools/common/test_hooks.hpp"

#include <cstdlib>
#include <string>

namespace lcm::tools {

lcm::train::TestHooks test_hooks_from_environment() {
  lcm::train::TestHooks h;
  if (const char* p = std::getenv("LCM_TEST_PAUSE_AT")) h.pause_at = p;
  if (const char* n = std::getenv("LCM_INTERRUPT_AFTER_STEPS")) {
    h.interrupt_after_steps = std::atoll(n);
    const char* twice = std::getenv("LCM_INTERRUPT_TWICE");
    h.interrupt_twice = twice && std::string(twice) == "1";
  }
  if (const char* f = std::getenv("LCM_TEST_FAIL_RANK")) {
    const std::string spec = f;
    const size_t colon = spec.find(':');
    h.fail_rank = std::atoi(spec.substr(0, colon).c_str());
    h.fail_after_steps = colon == std::string::npos ? 1 : std::atoll(spec.c_str() + colon + 1);
  }
  return h;
}

}  // namespace lcm::tools
