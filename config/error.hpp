// The one error type of the configuration (ConfigError), apart from the key table so that the
// parsers of single values (memory_budget.hpp) throw it without seeing the whole configuration.
#pragma once
#include <stdexcept>

namespace lcm::config {

/// A bad configuration: unknown key (the message names it and suggests close keys), bad value
/// (names the key and the allowed values or type), unreadable or malformed YAML file, or a
/// combination of values that cannot work (named by the code that finds it). Tools exit with 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace lcm::config
