// The command line of every lcm tool: `[--config FILE] [key=value | key value ...]` plus the
// tool's own options; --help prints every key with its value and doc, --version the release.
#pragma once
#include <functional>
#include <string>

#include "config/config.hpp"

namespace CLI {
class App;
}

namespace lcm::config {

/// Thrown by load_config() after --help or --version was printed: the tool should exit with
/// `code` (0) without doing anything else. lcm::tools::run_tool() handles it.
struct CliExit {
  int code = 0;
};

/// Parses a tool's command line: `[--config FILE] [key=value | key value ...]` plus the tool's
/// own options added by `add_options`. Layering: built-in defaults → FILE (default:
/// find_default_config()) → overrides. --help prints the options and every config key with its
/// current value and doc, then throws CliExit{0}; --version likewise. A "Usage: ..." line in
/// `description` replaces CLI11's generated one. Throws ConfigError for bad keys/values/files
/// and for unknown options.
Config load_config(int argc, char** argv, const std::string& description,
                   const std::function<void(CLI::App&)>& add_options = {});

}  // namespace lcm::config
