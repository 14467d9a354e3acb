// require_writable_output (see output_file.hpp): create the folder, test-open the temp file that
// atomic_write_file will use, remove it.
#include "tools/common/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace lcm::tools {

void require_writable_output(const std::string& path) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& why) { throw std::runtime_error("cannot write " + path + ": " + why); };
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("it is a directory");
  const fs::path dir = fs::path(path).parent_path();
  std::error_code dir_ec;
  if (!dir.empty()) fs::create_directories(dir, dir_ec);
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    // a folder that could not be created explains a missing folder better than ENOENT
    fail(dir_ec && err == ENOENT ? dir_ec.message() : std::string(std::strerror(err)));
  }
  ::close(fd);
  ::unlink(temp.c_str());
}

}  // namespace lcm::tools
