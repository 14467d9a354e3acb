// What the fuzz targets share: a private temp folder per fuzzing process and the file in it that
// each input is written to, for the loaders that read from a path (RecordSource, read_cache).
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace lcm::fuzz {

/// The per-process folder "<base>/lcm-fuzz-XXXXXX" (mkdtemp), created on first use and removed
/// with its files at a normal exit (a crashing input leaves it behind, which is why
/// scripts/test_fuzz.sh points TMPDIR into the build folder). base = $TMPDIR when set, else
/// /dev/shm when it is a folder (no disk write per input), else /tmp. Aborts when the folder
/// cannot be created: no input could be run without it.
inline const std::string& temp_dir() {
  // On the heap and never freed: the atexit handler below runs after the destructors of function
  // statics constructed before it was registered.
  static const std::string* dir = [] {
    const char* env = std::getenv("TMPDIR");
    struct stat st {};
    std::string base = "/tmp";
    if (env && *env)
      base = env;
    else if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
      base = "/dev/shm";
    std::string templ = base + "/lcm-fuzz-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::perror(("lcm fuzz: mkdtemp " + templ).c_str());
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(temp_dir(), ec);
    });
    return new std::string(templ);
  }();
  return *dir;
}

/// Writes the `size` bytes at `data` to temp_dir()/name (replacing that file) and returns its
/// path. Aborts when the write fails: a full temp folder is no finding, but must not pass as a
/// clean run either.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = temp_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f != nullptr;
  if (ok && size > 0) ok = std::fwrite(data, 1, size, f) == size;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) {
    std::perror(("lcm fuzz: cannot write " + path).c_str());
    std::abort();
  }
  return path;
}

}  // namespace lcm::fuzz
