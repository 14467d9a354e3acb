// Helpers shared by the test suites: where the real sample data and the committed test data live,
// how a test that needs ../shared/data reports a skip (with the reason) when it is absent, and
// running the lcm-* tools.
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "data/synth.hpp"

namespace lcm::test {

/// Absolute path of the repository's `../shared/data` (may not exist; see shared_data_or_skip).
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("LCM_SHARED_DATA")) return env;
  return LCM_SHARED_DATA_DIR;
}

/// Path of `rel` under the shared data folder, or "" when it is absent.
inline std::string shared_data(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(shared_data_dir()) / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

/// Path of a file under the repository root.
inline std::string source_path(const std::string& rel) {
  return std::string(LCM_SOURCE_DIR) + "/" + rel;
}

/// Path of `rel` under the repository's committed test data, tests/data (the lcm-synth slice of
/// the data defaults and the Tiramisu gramschmidt record; see tests/data/README.md). Unlike
/// shared_data() it is always there: a test that reads it REQUIREs it instead of skipping.
inline std::string committed_data(const std::string& rel) {
  return source_path("tests/data/" + rel);
}

/// The message of the exception of type E thrown by f; "" when f throws nothing and
/// "WRONG TYPE: <message>" when it throws another std::exception (so substring checks fail).
template <class E = std::runtime_error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG TYPE: ") + e.what();
  }
  return "";
}

/// The deterministic generators of the tests' fuzz loops, as linear congruential generators:
/// Lcg64 with Knuth's MMIX constants (below: the state's bits 33..63 modulo n), Lcg32 with
/// Numerical Recipes' (below: bits 8..31 modulo n). next() steps and returns the new state.
struct Lcg64 {
  uint64_t state;
  uint64_t next() { return state = state * 6364136223846793005ull + 1442695040888963407ull; }
  uint64_t below(uint64_t n) { return (next() >> 33) % n; }
};
struct Lcg32 {
  uint32_t state;
  uint32_t next() { return state = state * 1664525u + 1013904223u; }
  uint32_t below(uint32_t n) { return (next() >> 8) % n; }
};

/// True when `sub` occurs in `s`.
inline bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

/// The directories made by temp_dir() in this process, removed with their contents when the test
/// executable exits (a whole ctest run leaves ~0.8 GB otherwise, and /tmp is not cleaned on these
/// machines). LCM_KEEP_TEST_DIRS=1 keeps them, to look at after a failure.
struct TempDirRegistry {
  std::vector<std::filesystem::path> dirs;
  ~TempDirRegistry() {
    if (std::getenv("LCM_KEEP_TEST_DIRS")) return;
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};
inline TempDirRegistry& temp_dir_registry() {
  static TempDirRegistry r;
  return r;
}

/// A fresh temporary directory for this test, /tmp/lcm_test_<tag>_<pid>, removed at exit (see
/// TempDirRegistry).
inline std::string temp_dir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() /
           ("lcm_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  temp_dir_registry().dirs.push_back(p);
  return p.string();
}

/// The folder of the running test executable (build/bin, where the lcm-* tools are too).
inline std::string bin_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

/// The whole text of file `p`; "" when it cannot be read.
inline std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Exit code (-1 when killed by a signal) and captured output of one tool run.
struct RunResult {
  int code = -1;
  std::string out, err;
};

/// True when `err` (a tool's stderr) holds a report of AddressSanitizer, LeakSanitizer or
/// UndefinedBehaviorSanitizer (the LCM_SANITIZE build, scripts/test_sanitize.sh). The tools print
/// none of these texts themselves.
inline bool has_sanitizer_report(const std::string& err) {
  return err.find("ERROR: AddressSanitizer") != std::string::npos ||
         err.find("ERROR: LeakSanitizer") != std::string::npos ||
         err.find(": runtime error: ") != std::string::npos;
}

/// `args` (shell words) with each key=value argument given again later dropped, so that the last
/// value of a key wins: a case's setting after a suite's common ones is what the case means, while
/// the tools refuse a key given twice on one command line. Other words are kept as given.
inline std::string last_value_of_each_key(const std::string& args) {
  std::vector<std::string> tokens;
  std::istringstream in(args);
  for (std::string t; in >> t;) tokens.push_back(t);
  std::string kept;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const size_t eq = tokens[i].find('=');
    bool repeated = false;
    if (eq != std::string::npos && eq > 0 && tokens[i][0] != '-' && tokens[i][0] != '>') {
      const std::string key = tokens[i].substr(0, eq + 1);
      for (size_t j = i + 1; j < tokens.size() && !repeated; ++j)
        repeated = tokens[j].compare(0, key.size(), key) == 0;
    }
    if (!repeated) kept += (kept.empty() ? "" : " ") + tokens[i];
  }
  return kept;
}

/// Runs <bin_dir>/<tool> with `args` (shell words), capturing stdout/stderr in files of `dir`.
/// A sanitizer report on the tool's stderr fails the running test case (with the report), also
/// where the test only asks for a non-zero exit code.
inline RunResult run_tool(const std::string& dir, const std::string& tool,
                          const std::string& args) {
  static int n = 0;
  const std::string o = dir + "/out" + std::to_string(n) + ".txt",
                    e = dir + "/err" + std::to_string(n++) + ".txt";
  const std::string cmd = bin_dir() + "/" + tool + " " + args + " > " + o + " 2> " + e;
  const int st = std::system(cmd.c_str());
  RunResult r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
  if (has_sanitizer_report(r.err))
    FAIL_CHECK(tool << " " << args << ": sanitizer report\n" << r.err);
  return r;
}

namespace layered {
/// lcm::test::run_tool with the key=value arguments of `args` layered: a key given again (a
/// case's setting after the suite's common ones) keeps its last value only, which is what the
/// cases mean; a key given twice on one command line is a config error of the tools. For the
/// suites that compose arguments in layers (`using lcm::test::layered::run_tool;`).
inline RunResult run_tool(const std::string& dir, const std::string& tool,
                          const std::string& args) {
  return lcm::test::run_tool(dir, tool, last_value_of_each_key(args));
}

/// lcm-eval (layered, arguments `args`) of the best checkpoint of the lcm-train run (experiment
/// name lcm) under `base`, writing its report there.
inline RunResult eval_best(const std::string& dir, const std::string& args,
                           const std::string& base) {
  return run_tool(dir, "lcm-eval",
                  args + " experiment.base_path=" + base + " eval.weights_path=" + base +
                      "/weights/best_model_lcm.safetensors");
}
}  // namespace layered

/// The name of the running doctest TEST_CASE ("?" outside one), for skip messages.
inline std::string current_test_name() {
  const doctest::ContextOptions* o = doctest::getContextOptions();
  return o != nullptr && o->currentTest != nullptr ? o->currentTest->m_name : "?";
}

/// Reports that the running test case skips itself: prints "SKIPPED <test case name>: <why>" and
/// logs the doctest MESSAGE "skipped: <why>", which scripts/test_summary.sh counts (the caller
/// then returns).
inline void report_skip(const std::string& why) {
  std::printf("SKIPPED %s: %s\n", current_test_name().c_str(), why.c_str());
  std::fflush(stdout);
  MESSAGE("skipped: " << why);
}

/// Path of ../shared/data/<rel> when it is there; otherwise an lcm-synth stand-in for it: `opt`'s
/// programs (LOOPerSet JSONL.gz, docs/synth.md) written once per test process to a temporary file
/// named after `rel` and `opt`. For tests whose checks hold on any LOOPerSet data, so that they
/// assert in a clone without ../shared instead of skipping. Prints which one it uses.
inline std::string shared_or_synth(const std::string& rel, const data::SynthOptions& opt) {
  const std::string real = shared_data(rel);
  if (!real.empty()) return real;
  std::string name = rel;
  for (char& c : name)
    if (c == '/' || c == '.') c = '_';
  const std::string path = temp_dir("synth") + "/" + name + "_p" + std::to_string(opt.programs) +
                           "_s" + std::to_string(opt.schedules_per_program) + "_seed" +
                           std::to_string(opt.seed) + ".jsonl.gz";
  if (!std::filesystem::exists(path)) {
    data::write_synth_file(path, opt);
    std::printf("NOTE %s: %s/%s is absent: using %lld lcm-synth programs instead (%s)\n",
                current_test_name().c_str(), shared_data_dir().c_str(), rel.c_str(),
                static_cast<long long>(opt.programs), path.c_str());
  }
  return path;
}

/// The stand-in for looperset-sample/mini.jsonl.gz (60 programs, as the real file has): 60
/// lcm-synth programs of `schedules` schedules each (seed 11), or the real file when present.
inline std::string mini_sample(int schedules = 24) {
  data::SynthOptions opt;
  opt.programs = 60;
  opt.schedules_per_program = schedules;
  opt.seed = 11;
  opt.threads = 1;
  return shared_or_synth("looperset-sample/mini.jsonl.gz", opt);
}

}  // namespace lcm::test

/// Use at the top of a TEST_CASE that needs ../shared/data/<rel>: binds `var` to its path, or
/// prints "SKIPPED <test case name>: <dir>/<rel> is absent" and returns from the test case when
/// it is absent.
#define LCM_REQUIRE_SHARED(var, rel)                                                              \
  const std::string var = lcm::test::shared_data(rel);                                            \
  if (var.empty()) {                                                                              \
    lcm::test::report_skip(lcm::test::shared_data_dir() + "/" + std::string(rel) + " is absent"); \
    return;                                                                                       \
  }

/// Use at the top of a TEST_CASE that cannot run in the sanitizer build (scripts/test_sanitize.sh
/// sets LCM_SANITIZED=1), e.g. one that needs a target that build leaves out or a program that
/// is not instrumented: reports the skip with `why` (report_skip) and returns there. Not for
/// passes that are only slow: the sanitizer step runs every real-data pass.
#define LCM_SKIP_UNDER_SANITIZER(why)                                           \
  if (const char* lcm_san = std::getenv("LCM_SANITIZED");                       \
      lcm_san && std::string(lcm_san) == "1") {                                 \
    lcm::test::report_skip(std::string(why) + " (not in the sanitizer build)"); \
    return;                                                                     \
  }
