// RunLock (see run_lock.hpp): flock(2) on a lock file holding "<host> <pid>".
#include "util/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "util/atomic_file.hpp"

namespace lcm {

namespace {
std::string raw_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

/// The holder text of an open lock file: its first line, "unknown" when empty or unreadable.
std::string holder_of(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, size_t(n)) : std::string();
  s = s.substr(0, s.find('\n'));
  const size_t space = s.rfind(' ');
  if (s.empty() || space == std::string::npos || space == 0) return "host unknown pid unknown";
  return "host " + s.substr(0, space) + " pid " + s.substr(space + 1);
}
}  // namespace

RunLock& RunLock::operator=(RunLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void RunLock::release() noexcept {
  if (fd_ < 0) return;
  // Removed while still held: a process that opened this file meanwhile finds, once it gets the
  // flock, that the path no longer names it, and starts over (acquire's inode check).
  ::unlink(path_.c_str());
  ::close(fd_);  // closing the last descriptor drops the flock
  fd_ = -1;
}

RunLock RunLock::acquire(const std::string& lock_path, const std::string& what,
                         const std::string& hint, bool take, double wait_s) {
  RunLock lock;
  if (!take) return lock;
  const std::filesystem::path p(lock_path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  bool waiting = false;  // wait_s > 0 and another holder was met
  std::chrono::steady_clock::time_point waited_since;
  // Each retry follows a holder that removed the file: a handful at most; 1000 means something
  // keeps removing it.
  for (int attempt = 0;; ++attempt) {
    if (attempt == 1000)
      throw RunLockError("cannot lock " + lock_path + ": the file keeps being removed", EAGAIN,
                         false);
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      throw RunLockError("cannot lock " + lock_path + ": " + std::strerror(err), err, false);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        const std::string holder = holder_of(fd);
        ::close(fd);
        const auto now = std::chrono::steady_clock::now();
        if (wait_s > 0 && !waiting) {
          waiting = true;
          waited_since = now;
          std::fprintf(stderr, "lcm: waiting for %s: %s holds %s (up to %g s)\n", what.c_str(),
                       holder.c_str(), lock_path.c_str(), wait_s);
        }
        if (waiting && std::chrono::duration<double>(now - waited_since).count() < wait_s) {
          ::usleep(100000);
          --attempt;  // waiting is not a retry after a removal
          continue;
        }
        char waited[64] = "";
        if (waiting) std::snprintf(waited, sizeof waited, "waited %g s", wait_s);
        const std::string note =
            std::string(waited) + (waiting && !hint.empty() ? "; " : "") + hint;
        throw RunLockError(what + " is in use by another run: " + holder + " holds " + lock_path +
                               (note.empty() ? "" : " (" + note + ")"),
                           err, true);
      }
      ::close(fd);
      throw RunLockError("cannot lock " + lock_path + ": " + std::strerror(err), err, false);
    }
    // The holder before us may have removed the file between our open and our flock: then we
    // hold the lock of a file no one else can find, and must lock the path's current file.
    struct stat held;
    struct stat now;
    if (::fstat(fd, &held) != 0 || ::stat(lock_path.c_str(), &now) != 0 ||
        held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
      ::close(fd);
      continue;
    }
    lock.fd_ = fd;
    lock.path_ = lock_path;
    break;
  }
  const std::string text = raw_host_name() + " " + std::to_string(::getpid()) + "\n";
  // The holder text is informative only (the flock decides): a failed write leaves the lock held.
  if (::ftruncate(lock.fd_, 0) == 0) {
    const ssize_t w = ::pwrite(lock.fd_, text.data(), text.size(), 0);
    (void)w;
  }
  return lock;
}

std::string run_lock_path(const std::string& base_path, const std::string& name) {
  return (base_path.empty() ? std::string(".") : base_path) + "/lcm_" + name + ".lock";
}

RunLock lock_experiment(const std::string& base_path, const std::string& name, bool take) {
  return RunLock::acquire(run_lock_path(base_path, name), "experiment " + name + " in " + base_path,
                          "wait for it to finish, or use another experiment.name or "
                          "experiment.base_path",
                          take);
}

int remove_stale_run_temps(const std::string& base_path) {
  const std::string base = base_path.empty() ? std::string(".") : base_path;
  return remove_stale_temps(base, {".jsonl", ".csv", ".svg", ".json"}) +
         remove_stale_temps(base + "/weights", {".safetensors"}) +
         remove_stale_temps(base + "/cache", {".lcmb"});
}

}  // namespace lcm
