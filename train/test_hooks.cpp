// Test hooks of the training tools (test_hooks.hpp).
#include "train/test_hooks.hpp"

#include <csignal>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "train/interrupt.hpp"

namespace lcm::train {

void TestHooks::pause(const char* point) const {
  if (pause_at.empty()) return;
  static std::set<std::string> done;
  const std::string p = point;
  const std::string list = "," + pause_at + ",";
  if (list.find("," + p + ",") == std::string::npos || !done.insert(p).second) return;
  std::fflush(stdout);
  std::fflush(stderr);
  ::raise(SIGSTOP);
}

void TestHooks::after_step(int64_t steps, int rank) const {
  if (interrupt_after_steps > 0 && steps == interrupt_after_steps) {
    if (interrupt_twice) {
      std::raise(SIGINT);
      std::raise(SIGINT);
    }
    stop_requested().store(true);
  }
  if (fail_rank >= 0 && rank == fail_rank && steps == fail_after_steps)
    throw std::runtime_error("injected fault on rank " + std::to_string(rank) + " after step " +
                             std::to_string(fail_after_steps) + " (LCM_TEST_FAIL_RANK)");
}

}  // namespace lcm::train
