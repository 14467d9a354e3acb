// The process-wide sink of log_line (see log.hpp).
#include "util/log.hpp"

#include <cstdio>
#include <mutex>

namespace lcm {
namespace {

// Constant-initialized, so that a line logged while other globals are constructed finds them.
std::mutex g_mu;
LogSink g_sink = stderr_log_sink;
void* g_user = nullptr;

}  // namespace

void stderr_log_sink(const char* line, void*) {
  std::fprintf(stderr, "%s\n", line);
}

void set_log_sink(LogSink sink, void* user) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sink = sink;
  g_user = user;
}

void log_line(const std::string& line) {
  LogSink sink;
  void* user;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    sink = g_sink;
    user = g_user;
  }
  if (sink) sink(line.c_str(), user);  // outside the lock: a sink may log in turn
}

}  // namespace lcm
