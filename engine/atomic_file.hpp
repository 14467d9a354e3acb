// Atomic file writes: data goes to "<path>.tmp.<pid>" and is renamed over `path` only after a
// successful write + flush, so an interrupted run never leaves a half-written file that loads.
#pragma once
#include <string>
#include <string_view>

namespace lcm {

/// Writes `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
/// Creates missing parent directories. Throws std::runtime_error "cannot write <path>: <errno
/// text>" naming `path`, the file asked for (not the temp file).
void atomic_write_file(const std::string& path, std::string_view bytes);

/// Removes the temp file of an atomic_write_file in progress, if any (async-signal-safe: for a
/// signal handler that exits at once, so that no "<path>.tmp.<pid>" is left behind).
void remove_pending_atomic_temp() noexcept;

/// Reads a whole file. Throws std::runtime_error naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace lcm
