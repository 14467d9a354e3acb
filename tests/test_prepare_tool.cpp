// End-to-end tests of the lcm-prepare executable (LCM_BIN_DIR/lcm-prepare): a tiny config on the
// mini sample writes the cache and exits 0, a second run reuses it, bad input exits non-zero, and
// with no data arguments it prepares the committed default slice.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "util/atomic_file.hpp"

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

/// For a test of lcm-prepare (which must be built) on records of mini.jsonl.gz at `mini`: a new
/// temporary folder named after `tag`, removed with its contents when the test ends, and the
/// file's 60 lines (one record each).
struct MiniRun {
  MiniRun(const std::string& mini, const std::string& tag) {
    REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
    dir = lcm::test::temp_dir(tag);
    lines = lcm::test::gz_lines(mini);
    REQUIRE(lines.size() == 60);
  }
  ~MiniRun() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  MiniRun(const MiniRun&) = delete;
  MiniRun& operator=(const MiniRun&) = delete;
  std::string dir;
  std::vector<std::string> lines;
};

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
  const std::vector<std::string> lines = lcm::test::gz_lines(mini);
  REQUIRE(lines.size() >= 4);
  std::string src = dir + "/bad.jsonl.gz";
  std::string body = lines[0] + "\n" + lines[1] + "\n" + lines[2] +
                     "\n{\"program_name\": \"broken\", \"program_annotation\": [\n" + lines[3] +
                     "\n";
  lcm::test::write_gz(src, body);

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

// ------------------------------------------------------------------------------------------------
// Summary arithmetic, empty splits, config UX and early failures
// ------------------------------------------------------------------------------------------------

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <regex>

namespace {

/// `line` (a JSON record) after `edit` changed its DOM.
template <class F>
std::string edited(const std::string& line, F edit) {
  rapidjson::Document d;
  d.Parse(line.c_str());
  REQUIRE_FALSE(d.HasParseError());
  edit(d);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

/// The integers captured by `re` in `text` (empty when no match).
std::vector<long long> numbers(const std::string& text, const std::string& re) {
  std::smatch m;
  std::vector<long long> out;
  if (!std::regex_search(text, m, std::regex(re))) return out;
  for (size_t i = 1; i < m.size(); ++i) out.push_back(std::stoll(m[i].str()));
  return out;
}

}  // namespace

TEST_CASE("lcm-prepare summary: read = kept + dropped for records, programs, schedules") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const auto& [dir, lines] = MiniRun(mini, "prepare_tool_mix");
  std::string body;
  for (auto& l : lines) body += l + "\n";
  int bad = 0;
  body += "this is not json\n", ++bad;  // line/malformed_json
  body += "[1, 2, 3]\n", ++bad;         // line/not_an_object
  body += "{\"program_name\": \"no_annotation\", \"schedules_list\": []}\n", ++bad;  // program/...
  body += edited(lines[1],
                 [](rapidjson::Document& d) {
                   d["program_name"].SetString("empty_schedules", d.GetAllocator());
                   d["schedules_list"].SetArray();
                 }) +
          "\n",
      ++bad;  // program/empty_schedules_list
  body += edited(lines[2],
                 [](rapidjson::Document& d) {
                   d["program_name"].SetString("bad_iterators", d.GetAllocator());
                   d["program_annotation"]["iterators"].SetInt(5);
                 }) +
          "\n",
      ++bad;                // program/bad_field
  body += lines[0] + "\n";  // a repeated program name: program/duplicate_program
  // The last record is cut by a truncated gzip stream: a partial record, also a skipped record.
  std::string last = edited(lines[3], [](rapidjson::Document& d) {
    d["program_name"].SetString("cut_short", d.GetAllocator());
    std::string junk;
    uint32_t seed = 7;
    for (int i = 0; i < 600; ++i)
      junk += char('a' + ((seed = seed * 1664525u + 1013904223u) >> 24) % 26);
    d.AddMember("zz", rapidjson::Value(junk.c_str(), d.GetAllocator()), d.GetAllocator());
  });
  body += last + "\n", ++bad;
  std::string full = dir + "/full.jsonl.gz", src = dir + "/mix.jsonl.gz";
  lcm::test::write_gz(full, body);
  std::string bytes = lcm::read_file(full);
  std::ofstream(src, std::ios::binary) << bytes.substr(0, bytes.size() - 100);

  std::string out = dir + "/out.txt", err = dir + "/err.txt";
  int rc = run(tool() + " experiment.base_path=" + dir + "/out data.train_file=" + src +
               " data.valid_file= data.nb_workers=2 -q >" + out + " 2>" + err);
  CHECK(rc == 0);
  std::string o = lcm::read_file(out), e = lcm::read_file(err);
  INFO(o << e);
  auto rec = numbers(o, R"(records +(\d+) read, (\d+) parsed into programs, (\d+) skipped)");
  REQUIRE(rec.size() == 3);
  const long long n_records = 60 + bad + 1;
  CHECK(rec[0] == n_records);  // the partial record is read (and skipped) too
  CHECK(rec[1] == 61);         // mini + the repeated name
  CHECK(rec[0] == rec[1] + rec[2]);
  CHECK(rec[2] == bad);
  auto prog = numbers(
      o,
      R"(programs +(\d+) read, (\d+) kept, (\d+) dropped \((\d+) by reader/feature rules, (\d+) in small footprint groups\))");
  REQUIRE(prog.size() == 5);
  CHECK(prog[0] == n_records);
  CHECK(prog[0] == prog[1] + prog[2]);
  CHECK(prog[2] == prog[3] + prog[4]);
  CHECK(prog[3] >= bad);  // the parse skips are dropped programs
  CHECK(prog[1] > 0);
  auto sch = numbers(
      o,
      R"(schedules +(\d+) read, (\d+) kept, (\d+) dropped \((\d+) by reader/feature rules or with their program, (\d+) in small footprint groups\))");
  REQUIRE(sch.size() == 5);
  CHECK(sch[0] == sch[1] + sch[2]);
  CHECK(sch[2] == sch[3] + sch[4]);
  for (const char* reason :
       {"line/malformed_json: 1", "line/not_an_object: 1", "program/missing_program_annotation: 1",
        "program/empty_schedules_list: 1", "program/bad_field: 1", "line/truncated_gzip: 1",
        "program/duplicate_program: 1"})
    CHECK(o.find(reason) != std::string::npos);
  CHECK(o.find("duplicate_program_name") == std::string::npos);  // no longer kept with a note
  // The zlib message does not repeat the path.
  size_t t = e.find("(truncated_gzip)");
  REQUIRE(t != std::string::npos);
  std::string tline = e.substr(t, e.find('\n', t) - t);
  CHECK(tline.find(src) != std::string::npos);
  CHECK(tline.find(src, tline.find(src) + 1) == std::string::npos);
  CHECK(tline.find("program cut_short") != std::string::npos);
}

TEST_CASE("lcm-prepare: a split with no program kept exits 1 and writes nothing") {
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool_empty");
  std::ofstream(dir + "/empty.jsonl") << "";
  std::ofstream(dir + "/blank.jsonl") << "\n  \n\n";
  std::ofstream(dir + "/garbage.jsonl") << "not json\n{\"program_name\": 3}\n";
  std::ofstream(dir + "/garbage.jsonl.gz", std::ios::binary) << "\x1f\x8b\x08\x00garbage bytes";
  std::ofstream(dir + "/one_garbage.jsonl") << "not json\n";  // "1 record read", not "1 records"
  const std::pair<const char*, int> cases[] = {{"empty.jsonl", -1},
                                               {"blank.jsonl", -1},
                                               {"garbage.jsonl", 2},
                                               {"garbage.jsonl.gz", 0},
                                               {"one_garbage.jsonl", 1}};
  for (auto& [name, n] : cases) {
    INFO(name);
    std::string src = dir + "/" + name, err = dir + "/err.txt";
    int rc = run(tool() + " experiment.base_path=" + dir + "/out data.train_file=" + src +
                 " data.valid_file= -q >/dev/null 2>" + err);
    CHECK(rc == 1);
    std::string e = lcm::read_file(err);
    if (n < 0)  // nothing in the file: said so, not "see skips above" (there are none)
      CHECK(e == "lcm-prepare: error: " + src +
                     ": no program record in the file (it is empty or holds only blank lines)\n");
    else
      CHECK(e.find("lcm-prepare: error: " + src + ": no program kept (" + std::to_string(n) +
                   (n == 1 ? " record" : " records") + " read, see skips above)") !=
            std::string::npos);
    CHECK_FALSE(fs::exists(dir + "/out/cache/train.lcmb"));
  }
  // An empty path still means "skip the split".
  std::string err = dir + "/err.txt";
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  int rc = run(tool() + " experiment.base_path=" + dir + "/out data.train_file=" + mini +
               " data.valid_file= data.max_programs=30 -q >/dev/null 2>" + err);
  CHECK(rc == 0);
  CHECK(lcm::read_file(err).find("data.valid_file is empty, valid skipped") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("lcm-prepare: config UX, unwritable base_path, same train/valid file") {
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool_ux");
  std::string out = dir + "/out.txt", err = dir + "/err.txt";
  int rc = run(tool() + " data.train_file data.valid_file= 2>" + err);
  CHECK(rc == 2);
  CHECK(lcm::read_file(err).find("data.train_file: missing value") != std::string::npos);
  rc = run(tool() + " foo 2>" + err);
  CHECK(rc == 2);
  CHECK(lcm::read_file(err).find(
            "unexpected argument 'foo' (overrides are key=value or key value)") !=
        std::string::npos);
  rc = run(tool() + " data.nb_workers=100000 2>" + err);
  CHECK(rc == 2);
  CHECK(lcm::read_file(err).find("data.nb_workers: expected an integer in [0, 1024]") !=
        std::string::npos);
  rc = run(tool() + " --help >" + out + " 2>&1");
  CHECK(rc == 0);
  std::string help = lcm::read_file(out);
  size_t u = help.find("Usage");
  REQUIRE(u != std::string::npos);
  CHECK(help.find("Usage", u + 1) == std::string::npos);
  // experiment.base_path under a regular file: fails before reading anything.
  std::ofstream(dir + "/plainfile") << "x";
  rc = run(tool() + " experiment.base_path=" + dir + "/plainfile data.train_file=" + dir +
           "/nonexistent.jsonl data.valid_file= 2>" + err);
  CHECK(rc == 1);
  std::string e = lcm::read_file(err);
  CHECK(e.find("cannot create cache folder " + dir + "/plainfile/cache: ") != std::string::npos);
  CHECK(e.find("nonexistent") == std::string::npos);  // failed before the data was opened
  // The same file for train and valid: one warning line (the overlap count, as lcm-train prints
  // it), not an error, and not a second "same file" warning.
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  rc = run(tool() + " experiment.base_path=" + dir + "/out data.train_file=" + mini +
           " data.valid_file=" + mini + " data.max_programs=30 -q >" + out + " 2>" + err);
  CHECK(rc == 0);
  e = lcm::read_file(err);
  INFO(e);
  CHECK(e.find(" program(s) kept in both data.train_file") != std::string::npos);
  CHECK(e.find("same file") == std::string::npos);
  size_t warnings = 0;
  for (size_t k = e.find("warning"); k != std::string::npos; k = e.find("warning", k + 1))
    ++warnings;
  CHECK(warnings == 1);
  fs::remove_all(dir);
}

TEST_CASE("lcm-prepare killed by SIGTERM while writing the cache leaves no temp file") {
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  const std::string synth = std::string(LCM_BIN_DIR) + "/lcm-synth";
  if (!fs::exists(synth)) {
    MESSAGE("skipped: build lcm-synth first (" << synth << ")");
    return;
  }
  std::string dir = lcm::test::temp_dir("prepare_tool_kill");
  std::string src = dir + "/synth.jsonl.gz";
  REQUIRE(run(synth + " --programs 400 --schedules-per-program 100 --threads 2 --out " + src +
              " >/dev/null 2>&1") == 0);
  const std::string cache_dir = dir + "/out/cache";
  std::fflush(nullptr);  // else the child's freopen writes the parent's buffered output again
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::string base = "experiment.base_path=" + dir + "/out", train = "data.train_file=" + src;
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      ::_exit(99);
    ::execl(tool().c_str(), "lcm-prepare", base.c_str(), train.c_str(),
            "data.valid_file=", "data.nb_workers=2", "-q", static_cast<char*>(nullptr));
    ::_exit(98);
  }
  // Wait (polling, no timing assertion) until the temp file exists, then send SIGTERM.
  const std::string tmp =
      cache_dir + "/train.lcmb.tmp." + lcm::temp_host_name() + "." + std::to_string(child);
  bool seen = false, exited = false;
  int status = 0;
  for (int i = 0; i < 600000 && !seen; ++i) {  // bounded: at most ~10 minutes
    if (fs::exists(tmp))
      seen = true;
    else if (::waitpid(child, &status, WNOHANG) == child) {
      exited = true;
      break;
    } else
      ::usleep(1000);
  }
  if (seen) {
    ::kill(child, SIGTERM);
    REQUIRE(::waitpid(child, &status, 0) == child);
  } else if (!exited) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL("lcm-prepare neither wrote its temp file nor exited");
  }
  REQUIRE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  if (code == 0) {
    MESSAGE("lcm-prepare finished before SIGTERM arrived: the signal path was not exercised");
    CHECK(fs::exists(cache_dir + "/train.lcmb"));
  } else {
    CHECK(code == 143);
    CHECK_FALSE(fs::exists(cache_dir + "/train.lcmb"));
  }
  CHECK_FALSE(fs::exists(tmp));  // the temp file never outlives the run
  fs::remove_all(dir);
}

TEST_CASE("lcm-synth: usage errors are one line with exit code 2") {
  const std::string synth = std::string(LCM_BIN_DIR) + "/lcm-synth";
  REQUIRE_MESSAGE(fs::exists(synth), "build lcm-synth first: " << synth);
  std::string dir = lcm::test::temp_dir("synth_cli");
  const std::string err = dir + "/err.txt";
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--programs 2 --out " + dir + "/s.jsonl", "name it *.jsonl.gz"},
      {"--programs 2 --out ''", "name it *.jsonl.gz"},
      {"--programs 2 --schedules-per-program 1 --out " + dir + "/s.jsonl.gz",
       "schedules-per-program"},
      {"--programs x --out " + dir + "/s.jsonl.gz", "--programs"},
      {"--out " + dir + "/s.jsonl.gz", "--programs"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const int rc = run(synth + " " + c.args + " >/dev/null 2>" + err);
    CHECK(rc == 2);
    const std::string e = lcm::read_file(err);
    CHECK(e.rfind("lcm-synth: ", 0) == 0);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
    CHECK(lcm::test::contains(e, c.expect));
  }
  CHECK_FALSE(fs::exists(dir + "/s.jsonl"));
  CHECK_FALSE(fs::exists(dir + "/s.jsonl.gz"));
  CHECK(run(synth + " --help >/dev/null 2>&1") == 0);
  fs::remove_all(dir);
}

TEST_CASE(
    "lcm-prepare: an xz, bzip2 or zstd input fails with one line, before any cache is written") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  std::string dir = lcm::test::temp_dir("prepare_tool_xz");
  const std::pair<const char*, std::string> cases[] = {
      {"xz", std::string("\xFD"
                         "7zXZ\0\0\x04\xE6\xD6\xB4\x46",
                         12)},
      {"bzip2", "BZh91AY&SY\x01\x02"},
      {"zstd", std::string("\x28\xB5\x2F\xFD\x24\x00", 6)}};
  for (const auto& [kind, magic] : cases) {
    INFO(kind);
    // the training file is fine, the validation file (read second) is compressed: nothing written
    const std::string src = dir + "/valid_" + kind + ".jsonl.gz";
    std::ofstream(src, std::ios::binary) << magic << "compressed bytes";
    const std::string out = dir + "/out_" + kind, err = dir + "/err.txt";
    int rc = run(tool() + " experiment.base_path=" + out + " data.train_file=" + mini +
                 " data.valid_file=" + src + " data.max_programs=5 -q >/dev/null 2>" + err);
    CHECK(rc == 1);
    const std::string e = lcm::read_file(err);
    CHECK(e.find(src + " is " + kind + "-compressed; lcm reads gzip or plain JSON/JSONL") !=
          std::string::npos);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out + "/cache/train.lcmb"));
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "lcm-prepare counts the programs kept in both the training and the validation file and warns "
    "once") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const auto& [dir, lines] = MiniRun(mini, "prepare_tool_overlap");
  {
    std::ofstream t(dir + "/train.jsonl"), v(dir + "/valid.jsonl");
    for (size_t i = 0; i < 48; ++i) t << lines[i] << "\n";
    for (size_t i = 48; i < 60; ++i) v << lines[i] << "\n";
    for (size_t i = 0; i < 2; ++i) v << lines[i] << "\n";  // 2 training programs again
  }
  const std::string args = " experiment.base_path=" + dir + "/out data.train_file=" + dir +
                           "/train.jsonl data.min_functions_per_footprint=0 -q";
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  CHECK(run(tool() + args + " data.valid_file=" + dir + "/valid.jsonl >" + out + " 2>" + err) == 0);
  std::string o = lcm::read_file(out), e = lcm::read_file(err);
  CHECK(o.find("train/valid: 2 program(s) kept in both files") != std::string::npos);
  CHECK(e.find("lcm-prepare: warning: 2 program(s) kept in both data.train_file (" + dir +
               "/train.jsonl) and " + "data.valid_file (" + dir + "/valid.jsonl)") !=
        std::string::npos);
  CHECK(o.find("programs   14 read, 14 kept") != std::string::npos);  // both copies kept
  // disjoint files: counted as 0, no warning
  {
    std::ofstream v(dir + "/valid0.jsonl");
    for (size_t i = 48; i < 60; ++i) v << lines[i] << "\n";
  }
  CHECK(run(tool() + args + " data.valid_file=" + dir + "/valid0.jsonl >" + out + " 2>" + err) ==
        0);
  CHECK(lcm::read_file(out).find("train/valid: 0 program(s) kept in both files") !=
        std::string::npos);
  CHECK(lcm::read_file(err).find("kept in both") == std::string::npos);
}

TEST_CASE(
    "lcm-prepare: the schedules of a program skipped by the reader are counted as read and "
    "dropped") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const auto& [dir, lines] = MiniRun(mini, "prepare_tool_skipped_schedules");
  long long mini_schedules = 0, bad_schedules = 0;
  std::string body;
  for (const auto& l : lines) {
    rapidjson::Document d;
    d.Parse(l.c_str());
    REQUIRE(d.HasMember("schedules_list"));
    mini_schedules += d["schedules_list"].Size();
    body += l + "\n";
  }
  // a program with an unknown expr_type: skipped by the reader (program/unknown_expr_type)
  body += edited(lines[5],
                 [&](rapidjson::Document& d) {
                   d["program_name"].SetString("bad_expr", d.GetAllocator());
                   auto& comps = d["program_annotation"]["computations"];
                   comps.MemberBegin()->value["expression_representation"]["expr_type"].SetString(
                       "bogus", d.GetAllocator());
                   bad_schedules = d["schedules_list"].Size();
                 }) +
          "\n";
  REQUIRE(bad_schedules > 0);
  body += "this is not json\n";  // a record whose schedules cannot be counted
  std::ofstream(dir + "/train.jsonl") << body;
  const std::string out = dir + "/out.txt", err = dir + "/err.txt";
  CHECK(run(tool() + " experiment.base_path=" + dir + "/out data.train_file=" + dir +
            "/train.jsonl data.valid_file= data.min_functions_per_footprint=0 -q >" + out + " 2>" +
            err) == 0);
  const std::string o = lcm::read_file(out);
  INFO(o << lcm::read_file(err));
  CHECK(o.find("program/unknown_expr_type: 1") != std::string::npos);
  auto sch = numbers(
      o,
      R"(schedules +(\d+) read, (\d+) kept, (\d+) dropped \((\d+) by reader/feature rules or with their program, (\d+) in small footprint groups\))");
  REQUIRE(sch.size() == 5);
  CHECK(sch[0] == mini_schedules + bad_schedules);  // the skipped program's schedules are read ...
  CHECK(sch[3] >= bad_schedules);                   // ... and dropped with their program
  CHECK(sch[0] == sch[1] + sch[2]);
  CHECK(o.find("; the schedules of 1 unreadable record(s) are not counted\n") != std::string::npos);
}

TEST_CASE("lcm-prepare with no data arguments prepares the committed default slice") {
  // As in a fresh clone: run from the repository root, data.train_file / data.valid_file from
  // the defaults (tests/data/synth_{train,valid}.jsonl.gz); the counts of tests/data/README.md.
  REQUIRE_MESSAGE(fs::exists(tool()), "build lcm-prepare first: " << tool());
  const std::string dir = lcm::test::temp_dir("prepare_tool_defaults");
  const std::string out = dir + "/out.txt", err = dir + "/err.txt";
  const std::string cmd = "cd '" + std::string(LCM_SOURCE_DIR) + "' && " + tool() +
                          " experiment.base_path=" + dir + "/runs >" + out + " 2>" + err;
  CHECK(run(cmd) == 0);
  std::string o = lcm::read_file(out), e = lcm::read_file(err);
  INFO(o << e);
  const size_t v = o.find("\nvalid: ");
  REQUIRE(v != std::string::npos);
  const std::string train = o.substr(0, v), valid = o.substr(v);
  const std::string data = std::string(LCM_SOURCE_DIR) + "/tests/data/";
  CHECK(train.find("train: " + data + "synth_train.jsonl.gz\n") != std::string::npos);
  CHECK(valid.find("valid: " + data + "synth_valid.jsonl.gz\n") != std::string::npos);
  const std::string rec = R"(records +(\d+) read, (\d+) parsed into programs, (\d+) skipped)";
  const std::string prog = R"(programs +(\d+) read, (\d+) kept, (\d+) dropped \((\d+) by )"
                           R"(reader/feature rules, (\d+) in small footprint groups\))";
  const std::string sch = R"(schedules +(\d+) read, (\d+) kept, (\d+) dropped \((\d+) by )"
                          R"(reader/feature rules or with their program, (\d+) in small )"
                          R"(footprint groups\))";
  CHECK(numbers(train, rec) == std::vector<long long>{160, 160, 0});
  // the defaults keep every footprint group (data.min_functions_per_footprint=0, mixed batches)
  CHECK(numbers(train, prog) == std::vector<long long>{160, 160, 0, 0, 0});
  CHECK(numbers(train, sch) == std::vector<long long>{1920, 1920, 0, 0, 0});
  CHECK(train.find("footprints 24 groups kept, 0 dropped (min_functions_per_footprint 0)") !=
        std::string::npos);
  CHECK(numbers(valid, rec) == std::vector<long long>{40, 40, 0});
  CHECK(numbers(valid, prog) == std::vector<long long>{40, 40, 0, 0, 0});
  CHECK(numbers(valid, sch) == std::vector<long long>{480, 480, 0, 0, 0});
  CHECK(o.find("train/valid: 0 program(s) kept in both files") != std::string::npos);
  CHECK(fs::exists(dir + "/runs/cache/train.lcmb"));
  CHECK(fs::exists(dir + "/runs/cache/valid.lcmb"));
  // No skips at all.
  CHECK(e.find("skip footprint (small_footprint_group)") == std::string::npos);
  CHECK(e.find("skip schedule") == std::string::npos);
  CHECK(e.find("skip program") == std::string::npos);
  CHECK(e.find("warning") == std::string::npos);
  // A second run reuses both caches.
  CHECK(run(cmd) == 0);
  o = lcm::read_file(out);
  size_t reused = 0;
  for (size_t k = o.find(", reused)\n"); k != std::string::npos; k = o.find(", reused)\n", k + 1))
    ++reused;
  CHECK(reused == 2);
  fs::remove_all(dir);
}
