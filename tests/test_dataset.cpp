// Tests of footprint grouping and batching (docs/model-spec.md §5.5, §3.11) on hand-made
// ProgramFeatures: group rule with its named skip, seeded determinism, batch sizes, and the
// materialised tensors; the same on the committed synth slice (tests/data) with the data
// defaults. Also the SkipLog print limit (the "further skips" line).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "engine/rng.hpp"
#include "support/features_fixture.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;
using lcm::test::make_features;

namespace {

/// Footprint "A": 3 programs × 10 schedules; "B": 1 program × 5 schedules; "C": 1 program ×
/// 250 schedules (kept by the 100× datapoint rule); "D" same footprint as A but other C.
Dataset sample() {
  Dataset ds;
  ds.programs.push_back(make_features(0, "A", 2, 2, 10));
  ds.programs.push_back(make_features(1, "B", 1, 1, 5));
  ds.programs.push_back(make_features(2, "A", 2, 2, 10));
  ds.programs.push_back(make_features(3, "C", 1, 2, 250));
  ds.programs.push_back(make_features(4, "A", 2, 2, 10));
  ds.programs.push_back(make_features(5, "A", 3, 2, 7));
  return ds;
}

int64_t total_points(const Dataset& ds) {
  int64_t n = 0;
  for (auto& b : ds.batches) n += b.size();
  return n;
}

}  // namespace

TEST_CASE("groups by footprint and drops small groups with a named skip") {
  Dataset ds = sample();
  SkipLog log(false, 0);
  build_batches(ds, lcm::test::batching(4, 1, 2), log);
  // B (1 program, 5 < 200 points) and the 3-computation "A" (1 program, 7 points) are dropped;
  // C has 1 program but 250 ≥ 200 datapoints, so it stays.
  CHECK(log.count("footprint", "small_footprint_group") == 2);
  CHECK(ds.batching.groups_dropped == 2);
  CHECK(ds.batching.programs_dropped == 2);
  CHECK(ds.batching.datapoints_dropped == 12);
  REQUIRE(ds.groups.size() == 2);
  CHECK(ds.groups[0].footprint == "A");
  CHECK(ds.groups[0].n_programs == 3);
  CHECK(ds.groups[0].n_datapoints == 30);
  CHECK(ds.groups[1].footprint == "C");
  REQUIRE(ds.programs.size() == 4);  // kept programs, input order
  CHECK(ds.programs[0].name == "prog0");
  CHECK(ds.programs[1].name == "prog2");
  CHECK(ds.programs[2].name == "prog3");
  CHECK(ds.programs[3].name == "prog4");
  CHECK(ds.n_datapoints() == 280);
  auto ev = log.events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].level == "footprint");
  CHECK(ev[0].program == "prog1");
  CHECK(ev[0].detail.find("footprint B") != std::string::npos);
}

TEST_CASE("the datapoint threshold is 100x min_functions, and 0 keeps every group") {
  Dataset a;
  a.programs.push_back(make_features(0, "X", 1, 1, 199));
  Dataset b;
  b.programs.push_back(make_features(0, "X", 1, 1, 200));
  SkipLog log(false, 0);
  build_batches(a, lcm::test::batching(64, 1, 2), log);
  build_batches(b, lcm::test::batching(64, 1, 2), log);
  CHECK(a.batches.empty());
  CHECK(a.programs.empty());
  CHECK(b.batches.size() == 4);  // 200 / 64 → 64, 64, 64, 8
  CHECK(log.count("footprint", "small_footprint_group") == 1);

  Dataset c = sample();
  SkipLog log0(false, 0);
  build_batches(c, lcm::test::batching(4, 1, 0), log0);
  CHECK(log0.total("footprint") == 0);
  CHECK(c.groups.size() == 4);
  CHECK(total_points(c) == 10 * 3 + 5 + 250 + 7);

  // Small footprint groups are a policy drop, not malformed input: data.strict does not stop on
  // them.
  SkipLog strict(true, 0);
  Dataset d = sample();
  CHECK_NOTHROW(build_batches(d, lcm::test::batching(4, 1, 2), strict));
  SkipLog lenient(false, 0);
  Dataset e = sample();
  build_batches(e, lcm::test::batching(4, 1, 2), lenient);
  CHECK(strict.count("footprint", "small_footprint_group") > 0);
  CHECK(strict.count("footprint", "small_footprint_group") ==
        lenient.count("footprint", "small_footprint_group"));
  CHECK(d.groups.size() == e.groups.size());
  CHECK_THROWS_AS(build_batches(c, lcm::test::batching(0, 1, 2), log0), std::invalid_argument);
}

TEST_CASE("batches: at most batch_size, one group each, every datapoint exactly once") {
  Dataset ds = sample();
  SkipLog log(false, 0);
  build_batches(ds, lcm::test::batching(7, 3, 0), log);
  std::set<std::pair<int, int>> seen;
  std::map<int, int64_t> per_group_points, per_group_batches, per_group_small;
  for (auto& b : ds.batches) {
    CHECK(b.size() >= 1);
    CHECK(b.size() <= 7);
    per_group_points[b.group] += b.size();
    per_group_batches[b.group] += 1;
    if (b.size() < 7) per_group_small[b.group] += 1;
    for (auto& r : b.points) {
      CHECK(seen.insert({r.program, r.schedule}).second);
      const ProgramFeatures& p = ds.programs[size_t(r.program)];
      CHECK(p.footprint == ds.groups[size_t(b.group)].footprint);
      CHECK(p.n_comps == ds.groups[size_t(b.group)].n_comps);
      CHECK(r.schedule < p.n_schedules());
    }
  }
  CHECK(int64_t(seen.size()) == ds.n_datapoints());
  for (size_t g = 0; g < ds.groups.size(); ++g) {
    const int64_t n = ds.groups[g].n_datapoints;
    CHECK(per_group_points[int(g)] == n);
    CHECK(per_group_batches[int(g)] == (n + 6) / 7);  // consecutive chunks: only the last is short
    CHECK(per_group_small[int(g)] == (n % 7 ? 1 : 0));
  }
}

namespace {

/// Checks the mixed-batching rules of build_batches on `ds` (batched with batch size `cap` and
/// program pieces of at most `piece` schedules, 0 = whole programs): every datapoint exactly once;
/// a program with more than `cap` schedules alone in its batches, all full but its last; every
/// other batch full but the last; a program's points consecutive in a batch and in at most two
/// batches per piece; footprint groups consecutive in a batch, `group` -1 exactly when several;
/// materialize and trees agree on the segments. Returns the number of programs in more batches
/// than they have pieces.
int check_mixed(const Dataset& ds, int64_t cap, int64_t piece = 0) {
  std::set<std::pair<int, int>> seen;
  std::map<int32_t, std::set<size_t>> batches_of;
  int64_t short_batches = 0;
  for (size_t bi = 0; bi < ds.batches.size(); ++bi) {
    const Batch& b = ds.batches[bi];
    CAPTURE(bi);
    REQUIRE(b.size() >= 1);
    CHECK(b.size() <= cap);
    std::vector<int32_t> run_programs, run_groups;
    for (const DatapointRef& r : b.points) {
      CHECK(seen.insert({r.program, r.schedule}).second);
      batches_of[r.program].insert(bi);
      if (run_programs.empty() || run_programs.back() != r.program)
        run_programs.push_back(r.program);
    }
    std::set<int32_t> programs(run_programs.begin(), run_programs.end());
    CHECK(programs.size() == run_programs.size());  // a program's points are consecutive
    const bool big = ds.programs[size_t(b.points[0].program)].n_schedules() > cap;
    if (big) {
      CHECK(programs.size() == 1);
    } else {
      short_batches += b.size() < cap;
      for (int32_t p : programs) CHECK(ds.programs[size_t(p)].n_schedules() <= cap);
    }
    // groups consecutive: the footprint changes at most (groups - 1) times
    std::set<std::string> groups;
    int changes = 0;
    for (size_t i = 0; i < b.points.size(); ++i) {
      const ProgramFeatures& p = ds.programs[size_t(b.points[i].program)];
      groups.insert(p.footprint + "|" + std::to_string(p.n_comps) + "|" +
                    std::to_string(p.n_loops));
      if (i && (p.footprint != ds.programs[size_t(b.points[i - 1].program)].footprint ||
                p.n_comps != ds.programs[size_t(b.points[i - 1].program)].n_comps ||
                p.n_loops != ds.programs[size_t(b.points[i - 1].program)].n_loops))
        ++changes;
    }
    CHECK(changes == int(groups.size()) - 1);
    CHECK((b.group == -1) == (groups.size() > 1));
    const BatchTensors t = ds.materialize(int64_t(bi));
    CHECK(t.segment_list().size() == groups.size());
    CHECK(ds.trees(int64_t(bi)).size() == groups.size());
    CHECK(batch_layout(t).comp_rows() * 910 == int64_t(t.comp.size()));
  }
  CHECK(short_batches <= 1);
  CHECK(int64_t(seen.size()) == ds.n_datapoints());
  int split = 0;
  for (const auto& [p, in] : batches_of) {
    const int64_t S = ds.programs[size_t(p)].n_schedules();
    const int64_t pieces = piece > 0 ? (S + piece - 1) / piece : 1;
    if (S > cap) {
      CHECK(int64_t(in.size()) == (S + cap - 1) / cap);
    } else {
      CHECK(int64_t(in.size()) <= 2 * pieces);
      split += int64_t(in.size()) > pieces;
    }
  }
  return split;
}

}  // namespace

TEST_CASE("mixed batches: full batches of any footprints, programs together, big ones alone") {
  Dataset ds;
  // sizes chosen so that packing needs the look-ahead and a split: 64-point batches
  const int sizes[] = {10, 30, 5, 40, 250, 64, 7, 33, 1, 20, 65, 12, 9};
  const char* fps[] = {"A", "B", "A", "C", "D", "B", "E", "A", "F", "C", "B", "A", "E"};
  for (int i = 0; i < 13; ++i)
    ds.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
  SkipLog log(false, 0);
  auto mixed = [](int batch_size, uint64_t seed, int min_functions, int piece) {
    BatchingOptions o = lcm::test::batching(batch_size, seed, min_functions, BatchingMode::Mixed);
    o.program_piece = piece;
    return o;
  };
  build_batches(ds, mixed(64, 5, 0, 0), log);  // whole programs
  CHECK(log.counts().empty());
  int64_t total = 0;
  for (int s : sizes) total += s;
  CHECK(ds.n_datapoints() == total);
  const int split = check_mixed(ds, 64);
  CHECK(split <= int(ds.batches.size()));
  int n_mixed = 0;
  for (const Batch& b : ds.batches) n_mixed += b.group == -1;
  CHECK(n_mixed >= 2);
  // the 250-schedule and the 65-schedule programs: 4 + 2 batches of their own
  int64_t alone = 0;
  for (const Batch& b : ds.batches)
    alone += ds.programs[size_t(b.points[0].program)].n_schedules() > 64;
  CHECK(alone == 6);
  // deterministic for a seed, another seed another order
  Dataset a, b2, c;
  for (int i = 0; i < 13; ++i) {
    a.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
    b2.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
    c.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
  }
  build_batches(a, mixed(64, 5, 0, 0), log);
  build_batches(b2, mixed(64, 5, 0, 0), log);
  build_batches(c, mixed(64, 6, 0, 0), log);
  CHECK(lcm::test::same_dataset(a, b2));
  CHECK_FALSE(lcm::test::same_dataset(a, c));
  check_mixed(c, 64);
  // pieces of at most 8 schedules (the default is 32): more programs per batch, same rules
  Dataset f;
  for (int i = 0; i < 13; ++i)
    f.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
  build_batches(f, mixed(64, 5, 0, 8), log);
  check_mixed(f, 64, 8);
  size_t most = 0, most_whole = 0;
  for (const Batch& b : f.batches) {
    std::set<int32_t> progs;
    for (const DatapointRef& r : b.points) progs.insert(r.program);
    most = std::max(most, progs.size());
  }
  for (const Batch& b : ds.batches) {
    std::set<int32_t> progs;
    for (const DatapointRef& r : b.points) progs.insert(r.program);
    most_whole = std::max(most_whole, progs.size());
  }
  CHECK(most > most_whole);
  // the §3.11 rule still applies before batching when asked for
  Dataset d;
  for (int i = 0; i < 13; ++i)
    d.programs.push_back(make_features(i, fps[i], 1 + i % 3, 2 + i % 2, sizes[i]));
  build_batches(d, mixed(64, 5, 2, 0), log);
  CHECK(d.batching.groups_dropped > 0);
  check_mixed(d, 64);
  // batch size 1: one datapoint per batch
  Dataset e;
  for (int i = 0; i < 4; ++i) e.programs.push_back(make_features(i, fps[i], 1, 2, sizes[i]));
  build_batches(e, mixed(1, 5, 0, 32), log);
  CHECK(int64_t(e.batches.size()) == e.n_datapoints());
}

TEST_CASE("batching is deterministic for a seed and differs for another seed") {
  auto run = [](uint64_t seed) {
    Dataset ds = sample();
    SkipLog log(false, 0);
    build_batches(ds, lcm::test::batching(4, seed, 2), log);
    return ds;
  };
  Dataset a = run(42), b = run(42), c = run(43);
  CHECK(lcm::test::same_dataset(a, b));
  CHECK_FALSE(lcm::test::same_dataset(a, c));
  // The in-group order is shuffled: the first batch of group A is not simply schedules 0..3 of
  // program 0 for both seeds.
  bool any_mixed = false;
  for (auto& bt : a.batches)
    for (size_t i = 1; i < bt.points.size(); ++i)
      if (bt.points[i].program != bt.points[0].program) any_mixed = true;
  CHECK(any_mixed);
}

TEST_CASE("fisher_yates is a permutation driven by the seed") {
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[size_t(i)] = i;
  auto a = v, b = v, c = v;
  lcm::Rng r1(5), r2(5), r3(6);
  fisher_yates(a, r1);
  fisher_yates(b, r2);
  fisher_yates(c, r3);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != v);
  std::sort(a.begin(), a.end());
  CHECK(a == v);
}

TEST_CASE("materialised tensors equal the ProgramFeatures content") {
  Dataset ds = sample();
  SkipLog log(false, 0);
  build_batches(ds, lcm::test::batching(8, 11, 2), log);
  const auto& cols = schedule_columns();
  REQUIRE(cols.size() == size_t(kScheduleColumns));
  for (int64_t bi = 0; bi < int64_t(ds.batches.size()); ++bi) {
    const Batch& b = ds.batches[size_t(bi)];
    BatchTensors t = ds.materialize(bi);
    const int64_t B = b.size(), C = ds.groups[size_t(b.group)].n_comps,
                  L = ds.groups[size_t(b.group)].n_loops;
    REQUIRE(t.batch == B);
    REQUIRE(t.n_comps == C);
    REQUIRE(t.n_loops == L);
    REQUIRE(int64_t(t.comp.size()) == B * C * kCompVectorWidth);
    REQUIRE(int64_t(t.loops.size()) == B * L * kLoopVectorWidth);
    REQUIRE(int64_t(t.speedup.size()) == B);
    REQUIRE(int64_t(t.expr.size()) ==
            int64_t(t.programs.size()) * C * kMaxExprLen * kExprNodeWidth);
    std::vector<float> expr_b = t.expr_per_datapoint();
    REQUIRE(int64_t(expr_b.size()) == B * C * kMaxExprLen * kExprNodeWidth);
    for (int64_t i = 0; i < B; ++i) {
      const DatapointRef r = b.points[size_t(i)];
      const ProgramFeatures& p = ds.programs[size_t(r.program)];
      CHECK(t.programs[size_t(t.program_of[size_t(i)])] == r.program);
      // Computation vectors: static columns from comp_static, schedule columns from comp_sched.
      for (int64_t k = 0; k < C; ++k) {
        const float* row = t.comp.data() + (i * C + k) * kCompVectorWidth;
        int mismatches = 0;
        for (int c = 0; c < kCompVectorWidth; ++c)
          if (!is_schedule_column(c) && row[c] != p.comp_static[size_t(k * kCompVectorWidth + c)])
            ++mismatches;
        for (int j = 0; j < kScheduleColumns; ++j)
          if (row[cols[size_t(j)]] !=
              p.comp_sched[size_t((int64_t(r.schedule) * C + k) * kScheduleColumns + j)])
            ++mismatches;
        CHECK(mismatches == 0);
      }
      CHECK(std::memcmp(t.loops.data() + i * L * kLoopVectorWidth,
                        p.loops.data() + int64_t(r.schedule) * L * kLoopVectorWidth,
                        sizeof(float) * size_t(L * kLoopVectorWidth)) == 0);
      const float want = p.speedup[size_t(r.schedule)];
      if (std::isnan(want))
        CHECK(std::isnan(t.speedup[size_t(i)]));
      else
        CHECK(t.speedup[size_t(i)] == want);
      const int64_t per = C * kMaxExprLen * kExprNodeWidth;
      CHECK(std::memcmp(expr_b.data() + i * per, p.expr.data(), sizeof(float) * size_t(per)) == 0);
    }
    // Distinct programs are listed once.
    std::set<int32_t> distinct(t.programs.begin(), t.programs.end());
    CHECK(distinct.size() == t.programs.size());
  }
  for (int64_t bi = 0; bi < int64_t(ds.batches.size()); ++bi) {
    const ProgramTree& t = ds.tree(bi);
    CHECK(&t == &ds.programs[size_t(ds.batches[size_t(bi)].points[0].program)].tree);
    CHECK(t.nodes.size() ==
          size_t(ds.groups[size_t(ds.batches[size_t(bi)].group)].n_loops > 1 ? 2 : 1));
  }
  CHECK_THROWS_AS(ds.tree(-1), std::out_of_range);
  CHECK_THROWS_AS(ds.materialize(int64_t(ds.batches.size())), std::out_of_range);
  CHECK_THROWS_AS(ds.materialize(-1), std::out_of_range);
}

namespace {
/// What `fn` writes to stderr (fd 2 redirected to a temp file while it runs).
template <class Fn>
std::string stderr_of(Fn fn) {
  const std::string path = lcm::test::temp_dir("skiplog_stderr") + "/err.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  ::dup2(::fileno(f), 2);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(f);
  return lcm::test::slurp(path);
}
}  // namespace

TEST_CASE(
    "SkipLog: '(further skips are counted, not printed)' only once a skip is left unprinted") {
  auto skips = [](int n) {
    return stderr_of([n] {
      SkipLog log(false, 10);
      for (int i = 0; i < n; ++i) log.add({"line", "malformed_json", "f.jsonl", i + 1, "", -1, ""});
      CHECK(log.count("line", "malformed_json") == n);
    });
  };
  const std::string note = "lcm: (further skips are counted, not printed)\n";
  const std::string ten = skips(10), eleven = skips(11), twelve = skips(12);
  INFO(ten << eleven << twelve);
  CHECK(std::count(ten.begin(), ten.end(), '\n') == 10);  // exactly 10 skips: all printed, no note
  CHECK_FALSE(lcm::test::contains(ten, note));
  CHECK(std::count(eleven.begin(), eleven.end(), '\n') == 11);  // 10 printed + the note, once
  CHECK(lcm::test::contains(eleven, "f.jsonl:10\n" + note));
  CHECK_FALSE(lcm::test::contains(eleven, "f.jsonl:11"));
  CHECK(twelve == eleven);
  CHECK(skips(3).find("further") == std::string::npos);
  SkipLog quiet(false, 0);  // print limit 0: nothing at all
  CHECK(stderr_of([&] { quiet.add({"line", "malformed_json", "f", 1, "", -1, ""}); }).empty());
  // Notes have their own budget: twelve notes never hide the first dropped record.
  const std::string mixed = stderr_of([] {
    SkipLog log(false, 10);
    for (int i = 0; i < 12; ++i)
      log.add({"note", "schedule_forms_disagree", "f.jsonl", i + 1, "", -1, ""});
    log.add({"line", "malformed_json", "f.jsonl", 13, "", -1, ""});
  });
  INFO(mixed);
  CHECK(lcm::test::contains(mixed, "lcm: (further notes are counted, not printed)\n"));
  CHECK(lcm::test::contains(mixed, "skip line (malformed_json): f.jsonl:13"));
  CHECK_FALSE(lcm::test::contains(mixed, note));
  CHECK(std::count(mixed.begin(), mixed.end(), '\n') == 12);  // 10 notes, their line, the skip
}

TEST_CASE("committed synth slice: footprint groups, drops and batches (reference and defaults)") {
  // The numbers of tests/data/README.md (lcm-prepare with model.preset=reference's batching, and
  // with the defaults); the dropped groups are cross-checked against an independent grouping of
  // the featurised programs.
  const std::string path = lcm::test::committed_data("synth_train.jsonl.gz");
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path),
                  path << " is missing (tests/data/README.md)");
  PrepareOptions opt;
  opt.source = path;
  opt.nb_workers = 2;
  opt.print_skips = 0;
  SkipLog log(false, 0);
  SplitCounts counts;
  Dataset ds;
  ds.programs = read_features(opt, log, counts);
  REQUIRE(ds.programs.size() == 160);
  CHECK(log.counts().empty());
  std::map<std::tuple<std::string, int, int>, std::vector<std::string>> by_group;
  for (const ProgramFeatures& p : ds.programs)
    by_group[{p.footprint, p.n_comps, p.n_loops}].push_back(p.name);
  std::set<std::string> alone;  // programs alone in their group (12 datapoints < 200: dropped)
  for (const auto& [key, names] : by_group)
    if (names.size() == 1) alone.insert(names[0]);
  CHECK(by_group.size() == 24);
  CHECK(alone == std::set<std::string>{"synth_1_0000052", "synth_1_0000122"});

  Dataset all = ds;
  build_batches(ds, lcm::test::batching(512, 42, 2), log);  // the reference preset's batching
  CHECK(log.count("footprint", "small_footprint_group") == 2);
  std::set<std::string> named;
  for (const SkipEvent& e : log.events()) named.insert(e.program);
  CHECK(named == alone);
  CHECK(ds.batching.groups_kept == 22);
  CHECK(ds.batching.groups_dropped == 2);
  CHECK(ds.batching.programs_dropped == 2);
  CHECK(ds.batching.datapoints_dropped == 24);
  REQUIRE(ds.groups.size() == 22);
  CHECK(ds.programs.size() == 158);
  CHECK(ds.n_datapoints() == 1896);
  int64_t expected_batches = 0;
  for (const FootprintGroup& g : ds.groups) expected_batches += (g.n_datapoints + 511) / 512;
  CHECK(int64_t(ds.batches.size()) == expected_batches);
  std::set<std::pair<int, int>> seen;
  for (size_t b = 0; b < ds.batches.size(); ++b) {
    const Batch& batch = ds.batches[b];
    CHECK(batch.size() >= 1);
    CHECK(batch.size() <= 512);
    for (const DatapointRef& r : batch.points) {
      CHECK(seen.insert({r.program, r.schedule}).second);
      CHECK(ds.programs[size_t(r.program)].footprint == ds.groups[size_t(batch.group)].footprint);
    }
    BatchTensors t = ds.materialize(int64_t(b));
    CHECK(t.batch == batch.size());
    CHECK(t.comp.size() == size_t(t.batch * t.n_comps * 910));
    bool labelled = true;
    for (float s : t.speedup) labelled &= std::isfinite(s) && s >= 0.01f;
    CHECK(labelled);
  }
  CHECK(int64_t(seen.size()) == ds.n_datapoints());

  // min_functions 0 (the default) with mixed batches: nothing dropped, batches 512, 512, 512, 384
  // of all 160 programs.
  SkipLog dlog(false, 0);
  build_batches(all, lcm::test::batching(512, 42, 0, BatchingMode::Mixed), dlog);
  CHECK(dlog.counts().empty());
  CHECK(all.programs.size() == 160);
  CHECK(all.n_datapoints() == 1920);
  REQUIRE(all.batches.size() == 4);
  check_mixed(all, 512, 32);

  // Validation (min_functions_per_footprint 0, as lcm-prepare uses it there) keeps everything.
  opt.source = lcm::test::committed_data("synth_valid.jsonl.gz");
  SkipLog vlog(false, 0);
  SplitCounts vcounts;
  Dataset valid;
  valid.programs = read_features(opt, vlog, vcounts);
  build_batches(valid, lcm::test::batching(512, 42, 0), vlog);
  CHECK(vlog.counts().empty());
  CHECK(valid.programs.size() == 40);
  CHECK(valid.n_datapoints() == 480);
  CHECK(valid.groups.size() == 22);
}
