// Startup check of an output file a tool writes at the end (lcm-predict --out): its folder is
// created and a file can be created beside it, so a bad path fails before the work, not after.
#pragma once
#include <string>

namespace lcm::tools {

/// Creates the missing parent folders of `path` and test-creates (then removes) the temp file
/// "<path>.tmp.<pid>" that lcm::atomic_write_file will write there. Throws std::runtime_error
/// "cannot write <path>: <reason>" (the reason of the failed folder creation or open, e.g. "Not
/// a directory", "No such file or directory", "Permission denied", or "it is a directory").
/// The folders it created stay (lcm::atomic_write_file would create them too).
void require_writable_output(const std::string& path);

}  // namespace lcm::tools
