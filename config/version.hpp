// Version strings of lcm and of the formats it writes (printed by --version, stored in files).
#pragma once

namespace lcm {
/// The lcm release, e.g. "0.1.0".
const char* version_string();
}  // namespace lcm
