// The body of every lcm-* main: runs the tool and turns its exceptions into one stderr line and
// the exit codes the tools document (0 ok, 1 error, 2 bad configuration or usage).
#pragma once
#include <functional>

namespace lcm::tools {

/// Runs a tool's body: returns its exit code; lcm::config::CliExit → its code; ConfigError →
/// prints "<tool>: config error: ..." and returns 2; lcm::data::DataError → "<tool>: data error:
/// ..." and 1; any other std::exception → "<tool>: error: ..." and 1. Messages are one line.
int run_tool(const char* tool, const std::function<int()>& body);

}  // namespace lcm::tools
