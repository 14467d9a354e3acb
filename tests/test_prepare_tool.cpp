// End-to-end tests of the lcm-prepare executable (LCM_BIN_DIR/lcm-prepare): a tiny config on the
// mini sample writes the cache and exits 0, a second run reuses it, and bad input exits non-zero.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/atomic_file.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;

namespace {

/// Runs a shell command; returns its exit status (or -1 when it did not exit normally).
int run(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  if (st == -1 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

std::string tool() {
  return std::string(LCM_BIN_DIR) + "/lcm-prepare";
}

}  // namespace

TEST_CASE("lcm-prepare on a tiny config writes the cache, then reuses it") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool");
  std::string cfg = dir + "/tiny.yaml";
  std::ofstream(cfg) << "experiment:\n  base_path: " << dir << "/out\n"
                     << "data:\n  train_file: " << mini << "\n  valid_file: \"\"\n"
                     << "  batch_size: 32\n  nb_workers: 2\n  max_programs: 20\n";
  std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  int rc = run(tool() + " --config " + cfg + " data.seed=3 -q >" + out + " 2>" + err);
  CHECK(rc == 0);
  std::string cache = dir + "/out/cache/train.lcmb";
  CHECK(fs::exists(cache));
  CHECK_FALSE(fs::exists(dir + "/out/cache/valid.lcmb"));
  std::string text = lcm::read_file(out);
  CHECK(text.find("train: ") != std::string::npos);
  CHECK(text.find("records    20 read") != std::string::npos);
  CHECK(text.find("written; no cache file") != std::string::npos);
  CHECK(lcm::read_file(err).find("data.valid_file is empty") != std::string::npos);

  rc = run(tool() + " --config " + cfg + " data.seed 3 -q >" + out + " 2>" + err);
  CHECK(rc == 0);
  CHECK(lcm::read_file(out).find("reused") != std::string::npos);

  rc = run(tool() + " --config " + cfg + " data.seed=4 -q >" + out + " 2>" + err);
  CHECK(rc == 0);
  CHECK(lcm::read_file(err).find("cache rebuilt (config changed: data.seed 3 → 4)") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("lcm-prepare exits non-zero with one clear line on bad input") {
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool_bad");
  std::string err = dir + "/stderr.txt";
  int rc = run(tool() + " data.bach_size=3 2>" + err);
  CHECK(rc == 2);
  std::string e = lcm::read_file(err);
  CHECK(e.find("unknown config key 'data.bach_size'") != std::string::npos);
  CHECK(e.find("did you mean data.batch_size") != std::string::npos);

  rc = run(tool() + " data.batch_size=zero 2>" + err);
  CHECK(rc == 2);
  CHECK(lcm::read_file(err).find("data.batch_size: expected an integer >= 1, got 'zero'") !=
        std::string::npos);

  rc = run(tool() + " experiment.base_path=" + dir + " data.train_file=" + dir +
           "/missing.jsonl.gz data.valid_file= 2>" + err);
  CHECK(rc == 1);
  e = lcm::read_file(err);
  CHECK(e.find("missing.jsonl.gz") != std::string::npos);
  CHECK(std::count(e.begin(), e.end(), '\n') == 1);

  rc = run(tool() + " --help >" + dir + "/help.txt 2>&1");
  CHECK(rc == 0);
  std::string help = lcm::read_file(dir + "/help.txt");
  CHECK(help.find("data.min_functions_per_footprint") != std::string::npos);
  CHECK(help.find("training.device") != std::string::npos);
}

TEST_CASE("lcm-prepare counts a malformed line by name and keeps going; strict mode stops") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool_malformed");
  // First 3 records of mini, then a broken line, then the 4th record.
  gzFile in = gzopen(mini.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(in, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  gzclose(in);
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size() && lines.size() < 4;) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  REQUIRE(lines.size() == 4);
  std::string src = dir + "/bad.jsonl.gz";
  gzFile out = gzopen(src.c_str(), "wb");
  REQUIRE(out != nullptr);
  std::string body = lines[0] + "\n" + lines[1] + "\n" + lines[2] +
                     "\n{\"program_name\": \"broken\", \"program_annotation\": [\n" + lines[3] +
                     "\n";
  gzwrite(out, body.data(), unsigned(body.size()));
  gzclose(out);

  std::string base = tool() + " experiment.base_path=" + dir + "/out data.train_file=" + src +
                     " data.valid_file= data.min_functions_per_footprint=0 -q";
  int rc = run(base + " >" + dir + "/out.txt 2>" + dir + "/err.txt");
  CHECK(rc == 0);
  std::string o = lcm::read_file(dir + "/out.txt");
  CHECK(o.find("records    5 read, 4 parsed into programs") != std::string::npos);
  CHECK(o.find("line/malformed_json: 1") != std::string::npos);
  std::string e = lcm::read_file(dir + "/err.txt");
  CHECK(e.find("malformed_json") != std::string::npos);
  CHECK(e.find("bad.jsonl.gz:4") != std::string::npos);  // file and line of the bad record

  rc = run(base + " data.strict=true >" + dir + "/out.txt 2>" + dir + "/err.txt");
  CHECK(rc == 1);
  e = lcm::read_file(dir + "/err.txt");
  CHECK(e.find("data.strict") != std::string::npos);
  CHECK(e.find("malformed_json") != std::string::npos);
}
