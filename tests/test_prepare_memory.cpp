// Tests of lcm-prepare's bounded memory: the streamed prepare (PrepareOptions::stream_to_cache)
// writes the cache the in-memory prepare writes while keeping no program in memory, whatever
// the number of programs, with any byte bound on the records in flight; the 128-bit-hash name
// set of the duplicate_program rule finds every name with its line in a bounded size a name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/cache.hpp"
#include "data/name_set.hpp"
#include "data/prepare.hpp"
#include "data/synth.hpp"
#include "support/features_fixture.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;

namespace {

/// A plain JSONL file of `programs` synthetic programs (lcm-synth, `structures` skeletons,
/// 6 schedules each) whose record 3 is repeated at the end (one duplicate_program).
std::string synth_jsonl(const std::string& dir, int64_t programs, int structures, uint64_t seed) {
  SynthOptions so;
  so.programs = programs;
  so.schedules_per_program = 6;
  so.structures = structures;
  so.seed = seed;
  so.threads = 1;
  const std::string gz = dir + "/synth_" + std::to_string(programs) + ".jsonl.gz";
  write_synth_file(gz, so);
  std::vector<std::string> lines = lcm::test::gz_lines(gz);
  REQUIRE(int64_t(lines.size()) == programs);
  lines.push_back(lines[3]);
  const std::string path = dir + "/synth_" + std::to_string(programs) + ".jsonl";
  std::ofstream out(path);
  for (const std::string& l : lines) out << l << "\n";
  return path;
}

PrepareOptions options(const std::string& src, const std::string& cache_dir) {
  PrepareOptions opt;
  opt.split = "train";
  opt.source = src;
  opt.cache_dir = cache_dir;
  opt.batching.batch_size = 16;
  opt.nb_workers = 2;
  opt.print_skips = 0;
  opt.compact_rows = true;
  return opt;
}

/// Checks that two loaded caches hold the same split (every field but the build time).
void check_same_cache(const CacheLoad& a, const CacheLoad& b) {
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  lcm::test::check_same_read_counts(a.counts, b.counts);
  CHECK(a.counts.skips == b.counts.skips);
  CHECK(a.counts.forms == b.counts.forms);
  CHECK(a.dataset.batching.groups_kept == b.dataset.batching.groups_kept);
  CHECK(a.dataset.batching.groups_dropped == b.dataset.batching.groups_dropped);
  CHECK(a.dataset.batching.programs_dropped == b.dataset.batching.programs_dropped);
  REQUIRE(a.dataset.groups.size() == b.dataset.groups.size());
  for (size_t g = 0; g < a.dataset.groups.size(); ++g) {
    CHECK(a.dataset.groups[g].footprint == b.dataset.groups[g].footprint);
    CHECK(a.dataset.groups[g].n_programs == b.dataset.groups[g].n_programs);
    CHECK(a.dataset.groups[g].n_datapoints == b.dataset.groups[g].n_datapoints);
  }
  REQUIRE(a.dataset.programs.size() == b.dataset.programs.size());
  for (size_t p = 0; p < a.dataset.programs.size(); ++p) {
    const ProgramFeatures &x = a.dataset.programs[p], &y = b.dataset.programs[p];
    CHECK(x.name == y.name);
    CHECK(x.speedup == y.speedup);
    CHECK(x.descriptor_bytes == y.descriptor_bytes);
    CHECK(x.comp_static == y.comp_static);
  }
  REQUIRE(a.dataset.batches.size() == b.dataset.batches.size());
  for (size_t i = 0; i < a.dataset.batches.size(); ++i) {
    CHECK(a.dataset.batches[i].group == b.dataset.batches[i].group);
    CHECK(a.dataset.batches[i].points == b.dataset.batches[i].points);
  }
}

}  // namespace

TEST_CASE("streamed prepare: the in-memory prepare's cache, no program held, any byte bound") {
  const std::string dir = lcm::test::temp_dir("prepmem_same");
  const std::string src = synth_jsonl(dir, 90, 30, 7);
  int round = 0;
  for (BatchingMode mode : {BatchingMode::Mixed, BatchingMode::PerFootprint})
    for (int min_fp : {0, 3})
      for (int64_t bound : {int64_t(0), int64_t(1), int64_t(40000)}) {
        INFO("mode " << int(mode) << ", min_functions_per_footprint " << min_fp << ", bound "
                     << bound);
        const std::string tag = std::to_string(round++);
        PrepareOptions held = options(src, dir + "/held" + tag);
        held.batching.mode = mode;
        held.batching.min_functions_per_footprint = min_fp;
        std::vector<std::string> held_names;
        held.on_kept_program = [&](const std::string& n) { held_names.push_back(n); };
        const PreparedSplit a = prepare_split(held);
        REQUIRE(a.programs_kept > 0);
        CHECK(a.programs_kept == int64_t(a.dataset.programs.size()));
        CHECK(a.counts.skips.at("program/duplicate_program") == 1);

        PrepareOptions streamed = options(src, dir + "/streamed" + tag);
        streamed.batching = held.batching;
        streamed.stream_to_cache = true;
        streamed.max_bytes_in_flight = bound;  // 1: every record alone
        std::vector<std::string> names;
        streamed.on_kept_program = [&](const std::string& n) { names.push_back(n); };
        const PreparedSplit b = prepare_split(streamed);
        CHECK(b.streamed);
        CHECK_FALSE(b.from_cache);
        CHECK(b.dataset.programs.empty());  // nothing of the programs is held
        CHECK(b.programs_kept == a.programs_kept);
        CHECK(b.schedules_kept == a.schedules_kept);
        CHECK(b.dataset.batches.size() == a.dataset.batches.size());
        CHECK(names == held_names);
        if (min_fp > 0) CHECK(a.dataset.batching.programs_dropped > 0);

        const CacheKey key = prepare_cache_key(held);
        check_same_cache(read_cache(held.cache_dir + "/train.lcmb", key, false),
                         read_cache(streamed.cache_dir + "/train.lcmb", key, false));
        // nothing but the cache (and its lock) is left in the folder: the spill was unnamed
        for (const auto& e : fs::directory_iterator(streamed.cache_dir)) {
          const std::string f = e.path().filename().string();
          CHECK((f == "train.lcmb" || f == "train.lcmb.lock"));
        }

        // reused: read program by program, named again, still no program held
        names.clear();
        const PreparedSplit c = prepare_split(streamed);
        CHECK(c.from_cache);
        CHECK(c.dataset.programs.empty());
        CHECK(c.programs_kept == a.programs_kept);
        CHECK(c.schedules_kept == a.schedules_kept);
        CHECK(names == held_names);
        CHECK(prepare_summary(c, streamed).find("reused") != std::string::npos);
      }
}

TEST_CASE("streamed prepare: no program held for 40 or 400 programs, with the cache off too") {
  const std::string dir = lcm::test::temp_dir("prepmem_sizes");
  for (int64_t n : {40, 400}) {
    const std::string src = synth_jsonl(dir, n, 16, uint64_t(n));
    for (bool cache : {true, false}) {
      INFO(n << " programs, cache " << cache);
      PrepareOptions opt = options(src, cache ? dir + "/cache" + std::to_string(n) : "");
      opt.stream_to_cache = true;
      int64_t named = 0;
      if (!cache) opt.on_kept_program = [&](const std::string&) { ++named; };
      const PreparedSplit s = prepare_split(opt);
      CHECK(s.dataset.programs.empty());
      CHECK(s.programs_kept == n);  // the repeated record is the one duplicate
      CHECK(s.counts.programs_read == n + 1);
      if (!cache) CHECK(named == n);
      int64_t points = 0;
      for (const Batch& b : s.dataset.batches) points += b.size();
      CHECK(points == s.schedules_kept);
      const std::string summary = prepare_summary(s, opt);
      CHECK(summary.find(std::to_string(n) + " kept") != std::string::npos);
    }
  }
}

TEST_CASE("NameSet: each of many generated names found with its value, 24-64 bytes a name") {
  std::mt19937_64 rng(41);
  NameSet set;
  std::vector<std::string> names;
  const int64_t n = 100000;
  for (int64_t i = 0; i < n; ++i)
    names.push_back("function" + std::to_string(i) + "_" + std::to_string(rng() % 1000));
  for (int64_t i = 0; i < n; ++i) CHECK_FALSE(set.insert(names[size_t(i)], i));
  CHECK(set.size() == n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* again = set.insert(names[size_t(i)], -1);  // a duplicate: the first value
    if (!again || *again != i) ++wrong;
    const int64_t* found = set.find(names[size_t(i)]);
    if (!found || *found != i) ++wrong;
    if (set.find(names[size_t(i)] + "x")) ++wrong;  // absent names are not found
  }
  CHECK(wrong == 0);
  CHECK(set.size() == n);
  CHECK(set.bytes() <= 64 * n);
  CHECK(set.bytes() >= 24 * n);
  CHECK_FALSE(name_hash("a") == name_hash("b"));
  CHECK(name_hash("function1") == name_hash(std::string("function1")));
}
