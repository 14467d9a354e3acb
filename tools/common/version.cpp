// Version string of the lcm build.
#include "tools/common/version.hpp"

namespace lcm {
const char* version_string() { return "0.1.0"; }
}  // namespace lcm
