// Atomic whole-file writes (temp + fsync + rename), whole-file reads, and the temp file names
// "<path>.tmp.<host>.<pid>" with the removal of those a killed process left.
#include "util/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool host_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '-';
}
}  // namespace

const std::string& temp_host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
      return std::string("unknown-host");
    std::string h(buf);
    for (char& ch : h)
      if (!host_char(ch)) ch = '-';
    return h;
  }();
  return name;
}

std::string temp_path_for(const std::string& path) {
  return path + ".tmp." + temp_host_name() + "." + std::to_string(::getpid());
}

std::string temp_create_reason(const std::string& path, int err) {
  std::string why = std::strerror(err);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (err == EACCES || err == EPERM || err == EROFS)
    why += " (cannot create a file in " + dir + ": is it writable?)";
  else if (err == ENOENT)
    why += " (cannot create a file in " + dir + ": does it exist?)";
  else if (err == ENAMETOOLONG) {
    // the temp file's name is the longer one: say both lengths and the limit
    const std::string name = std::filesystem::path(path).filename().string();
    const std::string tmp = std::filesystem::path(temp_path_for(path)).filename().string();
    const long max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    why += " (the file name is " + std::to_string(name.size()) + " bytes and its temp file's " +
           std::to_string(tmp.size()) + "; the limit is " +
           (max > 0 ? std::to_string(max) : std::string("usually 255")) + " bytes per name" +
           (path.size() >= 4096
                ? ", and 4095 per path (this one is " + std::to_string(path.size()) + ")"
                : "") +
           ")";
  }
  return why;
}

void remove_pending_atomic_temp() noexcept {
  if (g_pending_active) ::unlink(g_pending_tmp);
}

std::string output_refusal(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";  // absent (or unreachable: the write says why)
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "it is a device";
  if (S_ISSOCK(st.st_mode)) return "it is a socket";
  return "it is not a regular file";
}

void require_regular_output(const std::string& path) {
  const std::string why = output_refusal(path);
  if (why.empty()) return;
  if (path.empty()) throw std::runtime_error("cannot write '': " + why);
  throw std::runtime_error("cannot write " + path + ": " + why +
                           " (lcm replaces only regular files, atomically: remove it or name "
                           "another file)");
}

void atomic_write_file(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  require_regular_output(path);
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = temp_path_for(path);
  PendingTemp pending(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  // Errors name `path`, the file the caller asked for (the temp file is an implementation detail).
  if (fd < 0)
    throw std::runtime_error("cannot write " + path + ": " + temp_create_reason(path, errno));
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
  if (!output_refusal(path).empty()) {  // made a link, FIFO or device while the data was written
    ::unlink(tmp.c_str());
    require_regular_output(path);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(e) +
                             " (renaming its temp file over it)");
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

int remove_stale_temps(const std::string& dir, const std::vector<std::string>& extensions) {
  const std::string folder = dir.empty() ? std::string(".") : dir;
  DIR* d = ::opendir(folder.c_str());
  if (!d) return 0;
  int removed = 0;
  const std::string& host = temp_host_name();
  const long long self = (long long)::getpid();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    // "<stem><ext>.tmp.<host>.<pid>" or the old "<stem><ext>.tmp.<pid>"
    const size_t last_dot = name.rfind('.');
    if (last_dot == std::string::npos || !all_digits(name.substr(last_dot + 1))) continue;
    const long long pid = std::atoll(name.c_str() + last_dot + 1);
    std::string before = name.substr(0, last_dot);  // "<stem><ext>.tmp[.<host>]"
    const std::string marker = ".tmp";
    bool ours = false;
    if (before.size() > marker.size() &&
        before.compare(before.size() - marker.size(), marker.size(), marker) == 0) {
      ours = true;  // old style: no host, treated as this host's
      before.resize(before.size() - marker.size());
    } else {
      const size_t host_dot = before.rfind('.');
      if (host_dot == std::string::npos || before.substr(host_dot + 1) != host) continue;
      before.resize(host_dot);
      if (before.size() <= marker.size() ||
          before.compare(before.size() - marker.size(), marker.size(), marker) != 0)
        continue;
      ours = true;
      before.resize(before.size() - marker.size());
    }
    if (!ours) continue;
    bool known_ext = false;
    for (const std::string& ext : extensions)
      known_ext = known_ext || (before.size() >= ext.size() &&
                                before.compare(before.size() - ext.size(), ext.size(), ext) == 0);
    if (!known_ext || pid <= 0 || pid == self) continue;
    const bool dead = pid > 0x7fffffffLL || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH);
    if (!dead) continue;  // its writer may still be running (or belongs to another user)
    const std::string full = folder + "/" + name;
    if (::unlink(full.c_str()) == 0) {
      ++removed;
      std::fprintf(stderr, "lcm: removed stale temp file %s (process %lld of this host is gone)\n",
                   full.c_str(), pid);
    }
  }
  ::closedir(d);
  return removed;
}

}  // namespace lcm
