// Tests of the prepared-data cache: bit-exact round trip, one-line reasons for stale/changed/
// versioned/truncated/corrupt files, atomic writes, and the cached prepare path on the committed
// synth slice and on the real mini sample (counts checked against an independent count of the
// file).
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/cache.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "engine/rng.hpp"
#include "support/features_fixture.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "util/atomic_file.hpp"
#include "util/run_lock.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;

namespace {

Dataset sample_dataset() {
  Dataset ds;
  ds.programs.push_back(lcm::test::make_features(0, "<R><L0>[C0]</L0></R>", 2, 2, 6));
  ds.programs.push_back(lcm::test::make_features(1, "<R><L0>[C0]</L0></R>", 2, 2, 9));
  ds.programs.push_back(lcm::test::make_features(2, "<R><L1>[C0]</L1></R>", 1, 3, 4));
  SkipLog log(false, 0);
  build_batches(ds, lcm::test::batching(4, 9, 1), log);
  return ds;
}

SplitCounts sample_counts() {
  SplitCounts c;
  c.records_read = 5;
  c.programs_read = 4;
  c.programs_featurized = 3;
  c.schedules_read = 40;
  c.schedules_featurized = 19;
  c.skipped_records_counted = 1;
  c.skips["program/depth_gt_5"] = 1;
  c.skips["schedule/bad_execution_times"] = 21;
  c.build_seconds = 1.5;
  return c;
}

CacheKey sample_key() {
  CacheKey k;
  k.add("source.path", "/data/train.jsonl.gz");
  k.add("source.size", "1234");
  k.add("source.mtime_ns", "1700000000000000000");
  k.add("data.batch_size", "512");
  k.add("data.seed", "42");
  return k;
}

CacheKey with(CacheKey k, const std::string& key, const std::string& value) {
  for (auto& [n, v] : k.values)
    if (n == key) v = value;
  return k;
}

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

/// Independent count of a JSONL.gz file: non-blank lines and Σ len(schedules_list).
void count_jsonl(const std::string& path, int64_t& lines, int64_t& schedules) {
  const std::string all = lcm::test::gunzip_file(path);
  lines = schedules = 0;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++lines;
    rapidjson::Document d;
    d.Parse(line.c_str());
    if (!d.HasParseError() && d.IsObject() && d.HasMember("schedules_list") &&
        d["schedules_list"].IsArray())
      schedules += int64_t(d["schedules_list"].Size());
  }
}

}  // namespace

TEST_CASE("cache round trip is bit-exact (programs, batches, counts)") {
  std::string dir = lcm::test::temp_dir("cache_rt");
  std::string path = dir + "/train.lcmb";
  Dataset ds = sample_dataset();
  SplitCounts counts = sample_counts();
  int64_t bytes = write_cache(path, sample_key(), counts, ds);
  CHECK(bytes == int64_t(fs::file_size(path)));
  CacheLoad load = read_cache(path, sample_key());
  REQUIRE_MESSAGE(load.ok, load.reason);
  CHECK(load.reason.empty());
  CHECK(lcm::test::same_dataset(load.dataset, ds));
  CHECK(load.counts.records_read == 5);
  CHECK(load.counts.programs_read == 4);
  CHECK(load.counts.programs_featurized == 3);
  CHECK(load.counts.schedules_read == 40);
  CHECK(load.counts.schedules_featurized == 19);
  CHECK(load.counts.skipped_records_counted == 1);
  CHECK(load.counts.skips == counts.skips);
  CHECK(load.counts.build_seconds == 1.5);
  // Written twice from the same content → identical bytes.
  std::string first = lcm::read_file(path);
  write_cache(path, sample_key(), counts, ds);
  CHECK(lcm::read_file(path) == first);
  CHECK(first.compare(0, 8, "LCMCACHE") == 0);
}

TEST_CASE("the compact cache of real features: bit-exact rows, at most 200 bytes per schedule") {
  SkipLog rlog(false, 0), log(false, 0);
  Dataset ds;
  for (const Program& p :
       read_all_programs(lcm::test::committed_data("synth_valid.jsonl.gz"), rlog))
    if (auto f = featurize(p, FeatureOptions{}, log)) ds.programs.push_back(std::move(*f));
  REQUIRE(ds.programs.size() == 40);
  build_batches(ds, lcm::test::batching(64, 3, 0), log);
  const std::string path = lcm::test::temp_dir("cache_compact") + "/valid.lcmb";
  const int64_t bytes = write_cache(path, sample_key(), sample_counts(), ds);
  const int64_t S = ds.n_datapoints();
  MESSAGE(bytes << " bytes for " << S << " schedules: " << double(bytes) / double(S)
                << " per schedule");
  CHECK(S == 480);
  CHECK(bytes <= 200 * S);
  CacheLoad load = read_cache(path, sample_key());
  REQUIRE_MESSAGE(load.ok, load.reason);
  CHECK(lcm::test::same_dataset(load.dataset, ds));
  // a program built without descriptors cannot be written compactly: one clear error
  Dataset hand = ds;
  hand.programs[0].descriptor_end.clear();
  CHECK_THROWS_AS(write_cache(path, sample_key(), sample_counts(), hand), std::runtime_error);
  CHECK(read_cache(path, sample_key()).ok);  // the failed write left the cache as it was
  // read compact: no rows held, every batch and every schedule rebuilt to the same bits
  CacheLoad compact = read_cache(path, sample_key(), false);
  REQUIRE_MESSAGE(compact.ok, compact.reason);
  const Dataset& c = compact.dataset;
  REQUIRE(c.programs.size() == ds.programs.size());
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const ProgramFeatures& p : c.programs) {
    CHECK_FALSE(p.rows_in_memory());
    CHECK(p.comp_sched.empty());
    CHECK(p.loops.empty());
  }
  for (int64_t b = 0; b < int64_t(ds.batches.size()); ++b) {
    const BatchTensors x = ds.materialize(b), y = c.materialize(b);
    CHECK(same(x.comp, y.comp));
    CHECK(same(x.loops, y.loops));
    CHECK(same(x.expr, y.expr));
    CHECK(same(x.speedup, y.speedup));
  }
  const BatchTensors x = program_batch(ds.programs[3], 3, 100),
                     y = program_batch(c.programs[3], 3, 100);
  CHECK(same(x.comp, y.comp));
  CHECK(same(x.loops, y.loops));
  Dataset dropped = ds;
  for (ProgramFeatures& p : dropped.programs) p.drop_rows();
  CHECK(same(dropped.materialize(0).comp, ds.materialize(0).comp));
  CHECK_THROWS_AS(hand.programs[0].drop_rows(), DataError);
  // read without the sched_str (lcm-train): the same dataset but for them
  CacheLoad bare = read_cache(path, sample_key(), false, false);
  REQUIRE_MESSAGE(bare.ok, bare.reason);
  Dataset with_str = bare.dataset;
  size_t strings = 0;
  for (size_t i = 0; i < with_str.programs.size(); ++i) {
    strings += bare.dataset.programs[i].sched_str.size();
    with_str.programs[i].sched_str = c.programs[i].sched_str;
  }
  CHECK(strings == 0);
  CHECK(lcm::test::same_dataset(with_str, c));
}

TEST_CASE("a cache that does not match says why in one line") {
  std::string dir = lcm::test::temp_dir("cache_stale");
  std::string path = dir + "/valid.lcmb";
  Dataset ds = sample_dataset();
  write_cache(path, sample_key(), sample_counts(), ds);

  CHECK(read_cache(dir + "/absent.lcmb", sample_key()).reason == "no cache file");
  CacheLoad l = read_cache(path, with(sample_key(), "source.mtime_ns", "1700000000000000001"));
  CHECK_FALSE(l.ok);
  CHECK(l.reason == "cache stale: source mtime changed");
  CHECK(l.dataset.programs.empty());
  CHECK(read_cache(path, with(sample_key(), "source.size", "1")).reason ==
        "cache stale: source size changed");
  CHECK(read_cache(path, with(sample_key(), "data.batch_size", "256")).reason ==
        "config changed: data.batch_size 512 → 256");
  CacheKey more = sample_key();
  more.add("data.max_programs", "0");
  CHECK(read_cache(path, more).reason == "config changed: data.max_programs absent → 0");
  CacheKey fewer = sample_key();
  fewer.values.pop_back();
  CHECK(read_cache(path, fewer).reason == "config changed: data.seed no longer recorded");
}

TEST_CASE("version changes, truncation and corruption are never loaded") {
  std::string dir = lcm::test::temp_dir("cache_bad");
  std::string path = dir + "/train.lcmb";
  write_cache(path, sample_key(), sample_counts(), sample_dataset());
  const std::string good = lcm::read_file(path);
  auto patched = [&](size_t offset, uint32_t v) {
    std::string s = good;
    std::memcpy(&s[offset], &v, 4);
    lcm::atomic_write_file(path, s);
    return read_cache(path, sample_key());
  };
  CacheLoad l = patched(8, kCacheFormatVersion + 1);
  CHECK_FALSE(l.ok);
  CHECK(l.reason == "format version " + std::to_string(kCacheFormatVersion + 1) + " → " +
                        std::to_string(kCacheFormatVersion));
  l = patched(12, kFeatureLayoutVersion + 7);
  CHECK(l.reason == "feature layout version " + std::to_string(kFeatureLayoutVersion + 7) + " → " +
                        std::to_string(kFeatureLayoutVersion));

  // Truncations at many points (inside the header, the key, the body, the last byte).
  for (size_t cut :
       {size_t(0), size_t(5), size_t(39), size_t(60), good.size() / 2, good.size() - 1}) {
    INFO("cut at " << cut);
    lcm::atomic_write_file(path, good.substr(0, cut));
    CacheLoad t = read_cache(path, sample_key());
    CHECK_FALSE(t.ok);
    CHECK(t.reason == "truncated");
    CHECK(t.dataset.programs.empty());
  }
  lcm::atomic_write_file(path, good + "x");
  CHECK(read_cache(path, sample_key()).reason.find("corrupt") == 0);
  // A flipped bit in the float data: structure intact, checksum catches it.
  std::string flipped = good;
  flipped[good.size() - 2000] ^= 0x10;
  lcm::atomic_write_file(path, flipped);
  CacheLoad c = read_cache(path, sample_key());
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("corrupt") == 0);
  std::string magic = good;
  magic[0] = 'X';
  lcm::atomic_write_file(path, magic);
  CHECK(read_cache(path, sample_key()).reason == "not an lcm cache file (bad magic)");
  lcm::atomic_write_file(path, good);
  CHECK(read_cache(path, sample_key()).ok);
}

TEST_CASE("no single corrupted byte anywhere in the file is ever loaded") {
  std::string dir = lcm::test::temp_dir("cache_fuzz");
  std::string path = dir + "/train.lcmb";
  write_cache(path, sample_key(), sample_counts(), sample_dataset());
  const std::string good = lcm::read_file(path);
  lcm::Rng rng(2024);
  // Every header byte, then random positions in the key and body.
  std::vector<size_t> positions;
  for (size_t i = 0; i < 40; ++i) positions.push_back(i);
  for (int i = 0; i < 300; ++i) positions.push_back(40 + size_t(rng.below(good.size() - 40)));
  for (size_t pos : positions) {
    std::string bad = good;
    bad[pos] = char(bad[pos] ^ char(1 + rng.below(255)));
    lcm::atomic_write_file(path, bad);
    CacheLoad l = read_cache(path, sample_key());
    INFO("byte " << pos << ": " << l.reason);
    CHECK_FALSE(l.ok);
    CHECK_FALSE(l.reason.empty());
    CHECK(l.dataset.programs.empty());
  }
  lcm::atomic_write_file(path, good);
  CHECK(read_cache(path, with(sample_key(), "source.path", "/other.jsonl.gz")).reason ==
        "cache stale: source path changed (/data/train.jsonl.gz → /other.jsonl.gz)");
}

TEST_CASE("cache writes are atomic: no temp file is left, failures leave no file") {
  std::string dir = lcm::test::temp_dir("cache_atomic");
  std::string sub = dir + "/nested/cache";
  write_cache(sub + "/train.lcmb", sample_key(), sample_counts(), sample_dataset());
  auto entries = dir_entries(sub);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0] == "train.lcmb");
  // Parent "folder" is a file → the write fails with a message naming the path, nothing is left.
  std::ofstream(dir + "/plainfile") << "x";
  bool threw = false;
  try {
    write_cache(dir + "/plainfile/train.lcmb", sample_key(), sample_counts(), sample_dataset());
  } catch (const std::runtime_error& e) {
    threw = true;
    CHECK(std::string(e.what()).find("plainfile") != std::string::npos);
  }
  CHECK(threw);
  for (auto& e : dir_entries(dir)) CHECK(e.find(".tmp.") == std::string::npos);
}

namespace {
/// The cached prepare path on a private copy of `source` (so that its mtime can be changed) in
/// temp_dir(tag): counts against count_jsonl(), cache reuse, the rebuild reasons, thread-count
/// independence and max_programs.
void check_prepare_on(const std::string& source, const std::string& tag) {
  std::string dir = lcm::test::temp_dir(tag);
  std::string src = dir + "/" + fs::path(source).filename().string();
  fs::copy_file(source, src, fs::copy_options::overwrite_existing);
  int64_t lines = 0, schedules = 0;
  count_jsonl(src, lines, schedules);
  REQUIRE(lines > 0);

  PrepareOptions opt;
  opt.split = "train";
  opt.source = src;
  opt.cache_dir = dir + "/cache";
  opt.batching.batch_size = 64;
  opt.nb_workers = 2;
  opt.print_skips = 0;
  PreparedSplit a = prepare_split(opt);
  CHECK_FALSE(a.from_cache);
  CHECK(a.cache_note == "no cache file");
  CHECK(fs::exists(opt.cache_dir + "/train.lcmb"));
  CHECK(a.cache_bytes == int64_t(fs::file_size(opt.cache_dir + "/train.lcmb")));
  const SplitCounts& c = a.counts;
  CHECK(c.records_read == lines);
  int64_t line_skips = 0, program_skips = 0, schedule_skips = 0;
  for (auto& [k, v] : c.skips) {
    if (k.rfind("line/", 0) == 0) line_skips += v;
    if (k.rfind("program/", 0) == 0) program_skips += v;
    if (k.rfind("schedule/", 0) == 0) schedule_skips += v;
  }
  CHECK(c.programs_read + line_skips == c.records_read);
  CHECK(c.programs_featurized + program_skips == c.programs_read);
  if (c.programs_read == lines) CHECK(c.schedules_read == schedules);
  CHECK(c.schedules_featurized <= c.schedules_read);
  CHECK(a.dataset.n_datapoints() == c.schedules_featurized - a.dataset.batching.datapoints_dropped);
  CHECK(int64_t(a.dataset.programs.size()) ==
        c.programs_featurized - a.dataset.batching.programs_dropped);
  auto fp = c.skips.find("footprint/small_footprint_group");
  CHECK((fp == c.skips.end() ? 0 : fp->second) == a.dataset.batching.groups_dropped);
  CHECK(a.dataset.n_datapoints() > 0);
  int64_t in_batches = 0;
  for (auto& b : a.dataset.batches) {
    CHECK(b.size() <= 64);
    in_batches += b.size();
  }
  CHECK(in_batches == a.dataset.n_datapoints());
  for (auto& p : a.dataset.programs) {
    for (float s : p.speedup) CHECK(s >= 0.01f);
  }
  std::string summary = prepare_summary(a, opt);
  CHECK(summary.find("programs") != std::string::npos);
  CHECK(summary.find("written; no cache file") != std::string::npos);

  // Second run: reused, identical.
  PreparedSplit b = prepare_split(opt);
  CHECK(b.from_cache);
  CHECK(lcm::test::same_dataset(a.dataset, b.dataset));
  CHECK(b.counts.skips == a.counts.skips);
  CHECK(b.counts.schedules_read == a.counts.schedules_read);
  CHECK(prepare_summary(b, opt).find("reused") != std::string::npos);

  // Config change → rebuilt with the reason.
  PrepareOptions opt2 = opt;
  opt2.batching.batch_size = 32;
  PreparedSplit d = prepare_split(opt2);
  CHECK_FALSE(d.from_cache);
  CHECK(d.cache_note == "config changed: data.batch_size 64 → 32");

  // Source mtime change → rebuilt with the reason.
  fs::last_write_time(src, fs::last_write_time(src) + std::chrono::seconds(5));
  PreparedSplit e = prepare_split(opt2);
  CHECK_FALSE(e.from_cache);
  CHECK(e.cache_note == "cache stale: source mtime changed");
  CHECK(lcm::test::same_dataset(d.dataset, e.dataset));

  // Same output with 1 and 3 workers, no cache involved.
  PrepareOptions one = opt;
  one.cache_dir = "";
  one.nb_workers = 1;
  PrepareOptions three = one;
  three.nb_workers = 3;
  PreparedSplit s1 = prepare_split(one), s3 = prepare_split(three);
  CHECK(s1.cache_path.empty());
  CHECK(lcm::test::same_dataset(s1.dataset, s3.dataset));
  CHECK(lcm::test::same_dataset(s1.dataset, a.dataset));
  CHECK(s1.counts.skips == s3.counts.skips);

  // max_programs reads only the first records.
  PrepareOptions few = one;
  few.max_programs = 5;
  few.batching.min_functions_per_footprint = 0;  // 5 programs: keep every footprint group
  PreparedSplit f = prepare_split(few);
  CHECK(f.counts.records_read == std::min<int64_t>(5, lines));
  fs::remove_all(dir);  // several MB of caches
}
}  // namespace

TEST_CASE(
    "prepare on mini.jsonl.gz: counts, cache reuse, rebuild reasons, thread-count independence") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  check_prepare_on(mini, "cache_prepare");
}

TEST_CASE(
    "prepare on the committed synth slice: counts, cache reuse, rebuild reasons, thread counts") {
  const std::string path = lcm::test::committed_data("synth_train.jsonl.gz");
  REQUIRE_MESSAGE(fs::is_regular_file(path), path << " is missing (tests/data/README.md)");
  check_prepare_on(path, "cache_prepare_synth");
}

TEST_CASE("prepare of a missing source is a DataError naming the file") {
  PrepareOptions opt;
  opt.source = "/nonexistent/train.jsonl.gz";
  bool threw = false;
  try {
    prepare_split(opt);
  } catch (const DataError& e) {
    threw = true;
    CHECK(std::string(e.what()).find("/nonexistent/train.jsonl.gz") != std::string::npos);
  }
  CHECK(threw);
}

// ------------------------------------------------------------------------------------------------
// Temp files of killed runs, strictness and empty splits
// ------------------------------------------------------------------------------------------------

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

TEST_CASE("stale cache temp files of dead processes are removed, live ones are kept") {
  std::string dir = lcm::test::temp_dir("cache_stale");
  fs::create_directories(dir);
  const std::string dead = dir + "/train.lcmb.tmp.2147483000";  // no such pid (above pid_max)
  const std::string dead2 = dir + "/valid.lcmb.tmp.4194999";
  const std::string mine = dir + "/train.lcmb.tmp." + std::to_string(::getpid());
  const std::string parent = dir + "/valid.lcmb.tmp." + std::to_string(::getppid());
  const std::string other = dir + "/notes.tmp.2147483000";  // not a cache temp file
  for (auto& p : {dead, dead2, mine, parent, other}) std::ofstream(p) << "partial";
  pid_t pid_max = 0;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  const bool dead2_is_dead = ::kill(4194999, 0) != 0 && errno == ESRCH;
  int removed = remove_stale_cache_temps(dir);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(dead2) != dead2_is_dead);
  CHECK(removed == 1 + (dead2_is_dead ? 1 : 0));
  CHECK(fs::exists(mine));
  CHECK(fs::exists(parent));
  CHECK(fs::exists(other));
  // write_cache cleans its folder before writing.
  std::ofstream(dead) << "partial";
  write_cache(dir + "/train.lcmb", sample_key(), sample_counts(), sample_dataset());
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(dir + "/train.lcmb"));
  (void)pid_max;
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM / SIGINT while a cache temp file is registered remove it and exit 143 / 130") {
  std::string dir = lcm::test::temp_dir("cache_signal");
  fs::create_directories(dir);
  for (int sig : {SIGTERM, SIGINT}) {
    INFO("signal " << sig);
    const std::string tmp = dir + "/train.lcmb.tmp.sig" + std::to_string(sig);
    std::ofstream(tmp) << "a partial cache";
    REQUIRE(fs::exists(tmp));
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      install_cache_signal_handlers();
      register_cache_temp(tmp);
      ::raise(sig);
      ::_exit(0);  // not reached when the handler works
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK_FALSE(fs::exists(tmp));
  }
  // After unregister, the handler removes nothing.
  const std::string kept = dir + "/kept.lcmb.tmp.1";
  std::ofstream(kept) << "x";
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    install_cache_signal_handlers();
    register_cache_temp(kept);
    unregister_cache_temp();
    ::raise(SIGTERM);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 143);
  CHECK(fs::exists(kept));
  fs::remove_all(dir);
}

TEST_CASE("data.strict is not in the cache key; a strict run on a cache built with skips stops") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  std::string dir = lcm::test::temp_dir("cache_strict");
  fs::create_directories(dir);
  PrepareOptions opt;
  opt.split = "train";
  opt.source = mini;
  opt.batching.batch_size = 64;
  opt.nb_workers = 2;
  opt.print_skips = 0;
  PrepareOptions strict = opt;
  strict.strict = true;
  for (auto& kv : prepare_cache_key(opt).values) CHECK(kv.first != "data.strict");
  CHECK(prepare_cache_key(opt).values == prepare_cache_key(strict).values);
  // mini has only policy drops (small footprint groups, failed runs): strict does not stop.
  strict.cache_dir = dir + "/cache_ok";
  PreparedSplit s = prepare_split(strict);
  CHECK(s.dataset.programs.size() > 0);
  // A malformed line: a non-strict build writes the cache; a strict run on it stops.
  std::string bad = dir + "/bad.jsonl";
  std::ofstream(bad) << lcm::test::gunzip_file(mini) << "this is not json\n";
  PrepareOptions lax = opt;
  lax.source = bad;
  lax.cache_dir = dir + "/cache_bad";
  PreparedSplit a = prepare_split(lax);
  CHECK(a.counts.skips.at("line/malformed_json") == 1);
  PrepareOptions strict_bad = lax;
  strict_bad.strict = true;
  CHECK_THROWS_AS(prepare_split(strict_bad), DataError);
  strict_bad.cache_dir = "";  // and without a cache: stops at the line itself
  CHECK_THROWS_AS(prepare_split(strict_bad), DataError);
  fs::remove_all(dir);
}

TEST_CASE("a split that keeps no program is an error and writes no cache") {
  std::string dir = lcm::test::temp_dir("cache_empty");
  fs::create_directories(dir);
  for (std::string text : {std::string("not json\n{\"x\":1}\n"), std::string("")}) {
    INFO("text: " << text);
    std::string src = dir + "/empty.jsonl";
    std::ofstream(src) << text;
    PrepareOptions opt;
    opt.source = src;
    opt.cache_dir = dir + "/cache";
    opt.nb_workers = 1;
    opt.print_skips = 0;
    bool threw = false;
    try {
      prepare_split(opt);
    } catch (const DataError&) {
      FAIL("not a DataError: the message is a plain error");
    } catch (const std::runtime_error& e) {
      threw = true;
      std::string m = e.what();
      if (text.empty())  // no record and no skip: "see skips above" would point at nothing
        CHECK(m == src + ": no program record in the file (it is empty or holds only blank lines)");
      else
        CHECK(m.find(src + ": no program kept (2 records read, see skips above)") !=
              std::string::npos);
    }
    CHECK(threw);
    CHECK_FALSE(fs::exists(dir + "/cache/train.lcmb"));
  }
  fs::remove_all(dir);
}

TEST_CASE("a cache or atomic write that fails names the file asked for, not its temp file") {
  const std::string dir = lcm::test::temp_dir("cache_write_error");
  std::ofstream(dir + "/plain") << "x";
  const std::string path = dir + "/plain/train.lcmb";  // under a regular file
  const std::string e = lcm::test::error_of<std::runtime_error>(
      [&] { write_cache(path, sample_key(), sample_counts(), sample_dataset()); });
  CHECK(e == "cannot write cache " + path + ": Not a directory");
  const std::string a =
      lcm::test::error_of<std::runtime_error>([&] { lcm::atomic_write_file(path, "x"); });
  CHECK(a == "cannot write " + path + ": Not a directory");
  fs::remove_all(dir);
}

TEST_CASE("stale temp files <path>.tmp.<host>.<pid>: this host's dead ones go, others' stay") {
  const std::string dir = lcm::test::temp_dir("cache_stale_host");
  const std::string host = lcm::temp_host_name();
  const std::string dead = dir + "/train.lcmb.tmp." + host + ".2147483000";  // above pid_max
  const std::string dead_old = dir + "/valid.lcmb.tmp.2147483001";  // old style: this host's
  const std::string live = dir + "/train.lcmb.tmp." + host + "." + std::to_string(::getppid());
  const std::string mine = lcm::temp_path_for(dir + "/valid.lcmb");
  const std::string other_host = dir + "/train.lcmb.tmp.some-other-host.2147483000";
  const std::string not_cache = dir + "/notes.txt.tmp." + host + ".2147483000";
  for (auto& p : {dead, dead_old, live, mine, other_host, not_cache}) std::ofstream(p) << "part";
  CHECK(remove_stale_cache_temps(dir) == 2);
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dead_old));
  CHECK(fs::exists(live));
  CHECK(fs::exists(mine));
  CHECK(fs::exists(other_host));  // its process cannot be checked from this host
  CHECK(fs::exists(not_cache));
  // the generic form takes the extensions: a dead .safetensors temp of this host goes
  const std::string weights = dir + "/best_model_x.safetensors.tmp." + host + ".2147483002";
  std::ofstream(weights) << "part";
  CHECK(lcm::remove_stale_temps(dir, {".safetensors"}) == 1);
  CHECK_FALSE(fs::exists(weights));
  CHECK(fs::exists(other_host));
}

TEST_CASE("write_cache while another writer holds <cache>.lock stops naming it; then it writes") {
  const std::string dir = lcm::test::temp_dir("cache_lock");
  const std::string path = dir + "/train.lcmb";
  {
    const lcm::RunLock held = lcm::RunLock::acquire(path + ".lock", "cache " + path, "");
    const std::string e = lcm::test::error_of<std::runtime_error>(
        [&] { write_cache(path, sample_key(), sample_counts(), sample_dataset()); });
    CHECK(e.rfind("cache " + path + " is in use by another run: host ", 0) == 0);
    CHECK(lcm::test::contains(e, " pid " + std::to_string(::getpid()) + " holds " + path +
                                     ".lock (wait for it to finish writing the cache)"));
    CHECK_FALSE(fs::exists(path));
  }
  CHECK(write_cache(path, sample_key(), sample_counts(), sample_dataset()) > 0);
  CHECK(read_cache(path, sample_key()).ok);
}
