// Reading and writing gzip test inputs with zlib directly (independent of the reader under test),
// shared by the suites that cut the mini sample into their own files (tools, ranking tools,
// pretrain tool, prepare tool, synth, cache, reader, schedule lines).
#pragma once
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace lcm::test {

/// The whole decompressed text of gzip file `path`; REQUIRE-fails when it cannot be opened or read.
inline std::string gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  gzclose(f);
  REQUIRE(n == 0);
  return out;
}

/// The non-empty '\n'-separated lines of gzip file `path` (JSONL records), in order.
inline std::vector<std::string> gz_lines(const std::string& path) {
  const std::string text = gunzip_file(path);
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

/// Writes `text` to `path` as it is; REQUIRE-fails when it cannot.
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
}

/// Writes `text` gzip-compressed at zlib level `level` (0–9) to `path`, in pieces of at most
/// 2^28 bytes (gzwrite takes an unsigned length); REQUIRE-fails on any zlib error.
inline void write_gz(const std::string& path, const std::string& text, int level = 6) {
  const std::string mode = "wb" + std::to_string(level);
  gzFile f = gzopen(path.c_str(), mode.c_str());
  REQUIRE(f != nullptr);
  size_t off = 0;
  while (off < text.size()) {
    unsigned n = unsigned(std::min<size_t>(text.size() - off, size_t(1) << 28));
    REQUIRE(gzwrite(f, text.data() + off, n) == int(n));
    off += n;
  }
  REQUIRE(gzclose(f) == Z_OK);
}

}  // namespace lcm::test
