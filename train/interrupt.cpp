// SIGINT/SIGTERM handling of the training tools (see interrupt.hpp).
#include "train/interrupt.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "data/cache.hpp"
#include "util/atomic_file.hpp"

namespace lcm::train {
namespace {

const char* g_tool = "lcm";

extern "C" void on_stop_signal(int sig) {
  if (!stop_requested().exchange(true)) return;
  // async-signal-safe: write(2), no stdio
  const char* parts[] = {g_tool, ": second interrupt, exiting without saving\n"};
  for (const char* p : parts) {
    ssize_t ignored = ::write(2, p, std::strlen(p));
    (void)ignored;
  }
  lcm::remove_pending_atomic_temp();
  lcm::data::remove_registered_cache_temp();
  ::_exit(128 + sig);
}

}  // namespace

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

void install_stop_handlers(const char* tool) {
  g_tool = tool;
  stop_requested();  // constructed before any signal can arrive
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

}  // namespace lcm::train
