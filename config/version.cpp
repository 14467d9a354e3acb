// Version string of the lcm build.
#include "config/version.hpp"

namespace lcm {
const char* version_string() {
  return "0.1.0";
}
}  // namespace lcm
