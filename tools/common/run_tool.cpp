// Exit codes and one-line error messages of the lcm-* tools (see run_tool.hpp).
#include "tools/common/run_tool.hpp"

#include <cstdio>
#include <exception>

#include "config/cli.hpp"
#include "data/skips.hpp"

namespace lcm::tools {

int run_tool(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const lcm::config::CliExit& e) {
    return e.code;
  } catch (const lcm::config::ConfigError& e) {
    std::fprintf(stderr, "%s: config error: %s\n", tool, e.what());
    return 2;
  } catch (const lcm::data::DataError& e) {
    std::fprintf(stderr, "%s: data error: %s\n", tool, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace lcm::tools
