// Atomic whole-file writes (temp + fsync + rename) and whole-file reads.
#include "engine/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lcm {

namespace {
// The temp file being written, for remove_pending_atomic_temp() in a signal handler (a fixed
// buffer and a flag: async-signal-safe). One slot: the latest write of the process.
char g_pending_tmp[4096];
volatile sig_atomic_t g_pending_active = 0;

/// Forgets the pending temp on every exit path of atomic_write_file.
struct PendingTemp {
  explicit PendingTemp(const std::string& tmp) {
    g_pending_active = 0;
    if (tmp.size() >= sizeof g_pending_tmp) return;
    std::memcpy(g_pending_tmp, tmp.c_str(), tmp.size() + 1);
    g_pending_active = 1;
  }
  ~PendingTemp() { g_pending_active = 0; }
};
}  // namespace

void remove_pending_atomic_temp() noexcept {
  if (g_pending_active) ::unlink(g_pending_tmp);
}

void atomic_write_file(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  PendingTemp pending(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // Errors name `path`, the file the caller asked for (the temp file is an implementation detail).
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(e));
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(e) + " (flushing it)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(e) +
                             " (renaming the temp file " + tmp + " over it)");
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return ss.str();
}

}  // namespace lcm
