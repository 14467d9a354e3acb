// Atomic file writes: data goes to the temp file "<path>.tmp.<host>.<pid>" and is renamed over
// `path` only after a successful write + flush, so an interrupted run never leaves a half-written
// file that loads; and the stale temp files a killed run leaves are recognised by that name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace lcm {

/// The one rule of every file lcm writes: only a regular file is replaced. Returns "" when `path`
/// may be written (it does not exist, or it is a regular file), else the reason it may not:
/// "the path is empty", "it is a symbolic link", "it is a directory", "it is a FIFO (named
/// pipe)", "it is a device", "it is a socket" (lstat: a link is never followed). Never throws.
std::string output_refusal(const std::string& path);

/// Throws std::runtime_error "cannot write <path>: <output_refusal> (lcm replaces only regular
/// files, atomically: remove it or name another file)" when output_refusal(path) is not empty
/// ("cannot write '': the path is empty" for an empty path).
void require_regular_output(const std::string& path);

/// Writes `bytes` to `path` atomically (temp_path_for(path) in the same directory, fsync,
/// rename). Creates missing parent directories. Throws std::runtime_error "cannot write <path>:
/// <reason>" naming `path`, the file asked for (never the temp file); <reason> is
/// temp_create_reason() when the temp file cannot be created, or output_refusal's reason when
/// `path` is empty or names something other than a regular file (checked before and again just
/// before the rename: a link, FIFO or device is never replaced).
void atomic_write_file(const std::string& path, std::string_view bytes);

/// Removes the temp file of an atomic_write_file in progress, if any (async-signal-safe: for a
/// signal handler that exits at once, so that no temp file is left behind).
void remove_pending_atomic_temp() noexcept;

/// Reads a whole file. Throws std::runtime_error naming the path when it cannot be read.
std::string read_file(const std::string& path);

/// This host's name as temp file names carry it: gethostname() with every character outside
/// [A-Za-z0-9_-] replaced by '-' (so "node1.cluster" is "node1-cluster" and the name has no dot),
/// "unknown-host" when gethostname fails. Computed once.
const std::string& temp_host_name();

/// The temp file every atomic writer of lcm uses for `path`: "<path>.tmp.<host>.<pid>"
/// (temp_host_name(), getpid()). The host keeps two machines that share a filesystem (a base path
/// on NFS) from using one name, and lets remove_stale_temps tell this host's files from others'.
std::string temp_path_for(const std::string& path);

/// The reason part of the error of a temp file of `path` that cannot be created with errno
/// `err`: strerror(err), followed for EACCES, EPERM, EROFS and ENOENT by " (cannot create a file
/// in <folder of path>: is it writable?)" / "(... does it exist?)", for ENAMETOOLONG by the
/// lengths and the limit (" (the file name is 250 bytes and its temp file's 270; the limit is 255
/// bytes per name)"); other errors (ENOTDIR, ENOSPC, ...) are strerror(err) alone.
std::string temp_create_reason(const std::string& path, int err);

/// Removes, in folder `dir`, the temp files of atomic writers that are gone: names
/// "<stem><ext>.tmp.<host>.<pid>" whose <host> is this host (temp_host_name()) and whose process
/// is dead (kill(pid, 0) fails with ESRCH, or the pid is beyond any pid_t), for an <ext> in
/// `extensions` (".lcmb", ".safetensors", ...; a whole file name such as "p.csv" matches that
/// file's temp files only, and files ending in it). Names of another host are never touched (its
/// process cannot be checked from here). Old-style names "<stem><ext>.tmp.<pid>" without a host
/// (written before the host was part of the name) are treated as this host's. This process's own
/// temp files and those of live processes stay. Prints "lcm: removed stale temp file <file>
/// (process <pid> of this host is gone)" on stderr per removal. Returns the number removed; a
/// folder that cannot be read removes nothing (returns 0). Never throws.
int remove_stale_temps(const std::string& dir, const std::vector<std::string>& extensions);

}  // namespace lcm
