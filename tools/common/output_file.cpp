// require_writable_output (see output_file.hpp): create the folder, test-open the temp file that
// atomic_write_file will use, remove it; same_file / require_output_not_input: the output is not
// an input.
#include "tools/common/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "config/config.hpp"
#include "util/atomic_file.hpp"

namespace lcm::tools {

void require_writable_output(const std::string& path) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("cannot write " + path + ": " + why);
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("it is a directory");
  lcm::require_regular_output(path);  // a link, FIFO or device is never replaced
  const fs::path dir = fs::path(path).parent_path();
  std::error_code dir_ec;
  if (!dir.empty()) fs::create_directories(dir, dir_ec);
  // What a killed earlier write of this output left (this host's dead processes only).
  lcm::remove_stale_temps(dir.empty() ? "." : dir.string(), {fs::path(path).filename().string()});
  const std::string temp = lcm::temp_path_for(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    // a folder that could not be created explains a missing folder better than ENOENT
    fail(dir_ec && err == ENOENT ? dir_ec.message() : lcm::temp_create_reason(path, err));
  }
  ::close(fd);
  ::unlink(temp.c_str());
}

void require_output_option(const std::string& option, bool given, const std::string& path,
                           const std::string& without) {
  if (given && path.empty())
    throw lcm::config::ConfigError(option + ": an empty file name (omit " + option + " for " +
                                   without + ")");
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool eq = fs::equivalent(a, b, ec);
    if (!ec) return eq;
  }
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  if (!ea && !eb) return ca == cb;
  return fs::absolute(a, ea).lexically_normal() == fs::absolute(b, eb).lexically_normal();
}

void require_output_not_input(const std::string& option, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [what, path] : inputs)
    if (!path.empty() && same_file(out, path))
      throw lcm::config::ConfigError(option + " " + out + " is the same file as " + what + " (" +
                                     path + "): refusing to overwrite an input");
}

void require_outputs_not_inputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                                const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [what, out] : outputs) require_output_not_input(what, out, inputs);
}

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  return ext;
}

}  // namespace lcm::tools
