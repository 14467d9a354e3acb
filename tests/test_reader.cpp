// Tests of the LOOPerSet / legacy Tiramisu reader (data/reader.hpp): real sample files (counts,
// key order, legacy vs JSONL equality), the committed synth slice and gramschmidt record (always
// present), and one test per kind of bad input, each asserting the exact skip reason and count.
// Small inputs are written to a temp dir (gzip ones with zlib).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "data/cache.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "support/tiny_record.hpp"
#include "train/checkpoint.hpp"
#include "train/startup_checks.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;

namespace {

using lcm::test::write_gz;
using lcm::test::write_text;

/// The committed copy of the Tiramisu gramschmidt record (under tests/data, MIT licence).
const char* kGramschmidt = "tiramisu/function_gramschmidt_explored_schedules.json";

/// write_gz when `gz`, else write_text.
void write_file(const std::string& path, const std::string& text, bool gz) {
  if (gz)
    write_gz(path, text);
  else
    write_text(path, text);
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Replaces the first occurrence of `from` (which must occur) by `to`.
std::string sub(std::string s, const std::string& from, const std::string& to) {
  size_t k = s.find(from);
  REQUIRE_MESSAGE(k != std::string::npos, "test template lacks: " << from);
  return s.replace(k, from.size(), to);
}

const std::string kSchedule =
    R"({"comp00":{"shiftings":null,"tiling":{},"unrolling_factor":null,"parallelized_dim":null,)"
    R"("transformations_list":[]},"fusions":null,"tree_structure":{"roots":[{"loop_name":"i0",)"
    R"("computations_list":[],"child_list":[{"loop_name":"i1","computations_list":["comp00"],)"
    R"("child_list":[]}]}]},"sched_str":"","legality_check":true,"execution_times":[2.0,2.5]})";

/// A small valid JSONL record (two loops, one computation) with the schedule list `scheds`.
std::string record(const std::string& name, const std::string& scheds = "[" + kSchedule + "]") {
  return R"({"program_name":")" + name + R"(","program_annotation":)" +
         lcm::test::tiny_annotation() + R"(,"initial_execution_time":2.0,"schedules_list":)" +
         scheds + "}";
}

/// `rec` with an extra field of `n` pseudo-random letters at its end, so that the end of a gzip
/// stream holds this record's own bytes (truncation tests cut there).
std::string with_random_tail(std::string rec, int n, uint32_t seed) {
  std::string junk;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    junk += char('a' + (seed >> 24) % 26);
  }
  rec.pop_back();  // the closing '}'
  return rec + ",\"zz\":\"" + junk + "\"}";
}

/// Reads every program of a file written from `text` (gzip when `gz`), quietly.
std::vector<Program> read_text(const std::string& text, SkipLog& log, const std::string& tag,
                               bool gz = false) {
  std::string path = lcm::test::temp_dir("reader") + "/" + tag + (gz ? ".jsonl.gz" : ".jsonl");
  write_file(path, text, gz);
  return read_all_programs(path, log);
}

int64_t total_events(const SkipLog& log) {
  int64_t n = 0;
  for (auto& [k, v] : log.counts()) n += v;
  return n;
}

/// One skip count a bad-input case expects: SkipLog::count(kind, reason) == n.
struct Skip {
  const char* kind;
  const char* reason;
  int64_t n;
};

/// Reads the lines `bad` followed by record("ok") (file tag `tag`) and CHECKs that exactly the
/// skips `want` were counted and that only "ok" was kept.
void expect_only_ok_kept(const std::vector<std::string>& bad, const std::string& tag,
                         std::initializer_list<Skip> want) {
  std::string text;
  for (const std::string& line : bad) text += line + "\n";
  SkipLog log(false, 0);
  auto progs = read_text(text + record("ok") + "\n", log, tag);
  int64_t total = 0;
  for (const Skip& w : want) {
    CHECK_MESSAGE(log.count(w.kind, w.reason) == w.n, w.kind << "/" << w.reason);
    total += w.n;
  }
  CHECK(total_events(log) == total);
  REQUIRE(progs.size() == 1);
  CHECK(progs[0].name == "ok");
}

void expect_same_expr(const ExprNode& a, const ExprNode& b) {
  CHECK(a.type == b.type);
  REQUIRE(a.children.size() == b.children.size());
  for (size_t i = 0; i < a.children.size(); ++i) expect_same_expr(a.children[i], b.children[i]);
}
void expect_same_node(const LoopNode& a, const LoopNode& b) {
  CHECK(a.loop_name == b.loop_name);
  CHECK(a.computations == b.computations);
  REQUIRE(a.children.size() == b.children.size());
  for (size_t i = 0; i < a.children.size(); ++i) expect_same_node(a.children[i], b.children[i]);
}

/// Field-by-field equality of two programs (not their source file/line).
void expect_same_program(const Program& a, const Program& b) {
  CHECK(a.name == b.name);
  CHECK(a.initial_execution_time == b.initial_execution_time);
  REQUIRE(a.iterators.size() == b.iterators.size());
  for (size_t i = 0; i < a.iterators.size(); ++i) {
    const Iterator &x = a.iterators[i], &y = b.iterators[i];
    CHECK(x.name == y.name);
    CHECK(x.lower.text == y.lower.text);
    CHECK(x.upper.text == y.upper.text);
    CHECK(x.parent == y.parent);
    CHECK(x.children == y.children);
    CHECK(x.computations == y.computations);
  }
  REQUIRE(a.computations.size() == b.computations.size());
  for (size_t i = 0; i < a.computations.size(); ++i) {
    const Computation &x = a.computations[i], &y = b.computations[i];
    CHECK(x.name == y.name);
    CHECK(x.absolute_order == y.absolute_order);
    CHECK(x.iterators == y.iterators);
    CHECK(x.is_reduction == y.is_reduction);
    CHECK(x.write_access_relation == y.write_access_relation);
    CHECK(x.write_buffer_id == y.write_buffer_id);
    CHECK(x.data_type == y.data_type);
    REQUIRE(x.accesses.size() == y.accesses.size());
    for (size_t k = 0; k < x.accesses.size(); ++k) {
      CHECK(x.accesses[k].is_reduction == y.accesses[k].is_reduction);
      CHECK(x.accesses[k].buffer_id == y.accesses[k].buffer_id);
      CHECK(x.accesses[k].matrix == y.accesses[k].matrix);
    }
    expect_same_expr(x.expression, y.expression);
  }
  REQUIRE(a.schedules.size() == b.schedules.size());
  for (size_t s = 0; s < a.schedules.size(); ++s) {
    const Schedule &x = a.schedules[s], &y = b.schedules[s];
    CHECK(x.execution_times == y.execution_times);
    CHECK(x.sched_str == y.sched_str);
    CHECK(x.parse_problem == y.parse_problem);
    REQUIRE(x.fusions.size() == y.fusions.size());
    for (size_t k = 0; k < x.fusions.size(); ++k) {
      CHECK(x.fusions[k].comp_a == y.fusions[k].comp_a);
      CHECK(x.fusions[k].comp_b == y.fusions[k].comp_b);
      CHECK(x.fusions[k].level == y.fusions[k].level);
    }
    REQUIRE(x.tree.has_value() == y.tree.has_value());
    if (x.tree) {
      REQUIRE(x.tree->roots.size() == y.tree->roots.size());
      for (size_t k = 0; k < x.tree->roots.size(); ++k)
        expect_same_node(x.tree->roots[k], y.tree->roots[k]);
    }
    REQUIRE(x.comps.size() == y.comps.size());
    for (size_t c = 0; c < x.comps.size(); ++c) {
      const CompSchedule &p = x.comps[c], &q = y.comps[c];
      CHECK(p.parallelized_dim == q.parallelized_dim);
      CHECK(p.tiling_dims == q.tiling_dims);
      CHECK(p.tiling_factors == q.tiling_factors);
      CHECK(p.unrolling_factor == q.unrolling_factor);
      CHECK(p.shiftings == q.shiftings);
      CHECK(p.transformations == q.transformations);
    }
  }
}

/// The tallies of the reader's count tests over a file's programs (definitions in the committed
/// synth slice test).
struct RecordCounts {
  int64_t schedules = 0, iterators = 0, comps = 0, string_bounds = 0, accesses = 0, fusions = 0;
  int64_t tiled = 0, unrolled = 0, parallel = 0, transforms = 0, times = 0;
};

/// Tallies `progs`, CHECKing that every schedule parsed cleanly and has one entry per computation.
RecordCounts count_records(const std::vector<Program>& progs) {
  RecordCounts n;
  for (const Program& p : progs) {
    n.schedules += int64_t(p.schedules.size());
    n.iterators += int64_t(p.iterators.size());
    n.comps += int64_t(p.computations.size());
    for (const Iterator& it : p.iterators)
      for (const Bound* b : {&it.lower, &it.upper})
        n.string_bounds += b->text.find_first_not_of("-0123456789") != std::string::npos;
    for (const Computation& c : p.computations) n.accesses += int64_t(c.accesses.size());
    for (const Schedule& s : p.schedules) {
      CHECK(s.parse_problem.empty());
      n.fusions += int64_t(s.fusions.size());
      n.times += int64_t(s.execution_times.size());
      REQUIRE(s.comps.size() == p.computations.size());
      for (const CompSchedule& cs : s.comps) {
        n.tiled += !cs.tiling_dims.empty();
        n.unrolled += cs.unrolling_factor != 0;
        n.parallel += !cs.parallelized_dim.empty();
        n.transforms += int64_t(cs.transformations.size());
      }
    }
  }
  return n;
}

/// CHECKs each tally of `got` against `want`.
void check_counts(const RecordCounts& got, const RecordCounts& want) {
  CHECK(got.schedules == want.schedules);
  CHECK(got.iterators == want.iterators);
  CHECK(got.comps == want.comps);
  CHECK(got.string_bounds == want.string_bounds);
  CHECK(got.accesses == want.accesses);
  CHECK(got.fusions == want.fusions);
  CHECK(got.tiled == want.tiled);
  CHECK(got.unrolled == want.unrolled);
  CHECK(got.parallel == want.parallel);
  CHECK(got.transforms == want.transforms);
  CHECK(got.times == want.times);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Real files
// ------------------------------------------------------------------------------------------------

TEST_CASE("mini.jsonl.gz: counts match an independent reading of the file") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  // Expected numbers were computed once with python3's gzip + json modules (not with this code):
  //   for each line: r = json.loads(line); count programs, len(schedules_list),
  //   len(program_annotation.iterators/computations), string-typed bounds, accesses, and per
  //   schedule len(fusions or []), truthy tiling / unrolling_factor / parallelized_dim per
  //   computation, len(transformations_list), len(execution_times).
  // Result: 60 programs, 4778 schedules, 442 iterators, 285 computations, 86 string bounds,
  // 891 read accesses, 1017 fusions, 704 tiled / 153 unrolled / 984 parallelized computation
  // schedules, 18857 transformation vectors, 142333 execution times; first function003306, last
  // function1179865.
  SkipLog log(false, 0);
  RecordSource src(path, log);
  CHECK(src.is_jsonl());
  CHECK(src.is_gzip());
  CHECK(src.file_size() == int64_t(fs::file_size(path)));
  std::vector<Program> progs;
  RawRecord rec;
  int64_t last_line = 0;
  while (src.next(rec)) {
    CHECK(rec.line == last_line + 1);
    last_line = rec.line;
    auto p = parse_program(rec, log);
    REQUIRE(p.has_value());
    progs.push_back(std::move(*p));
  }
  CHECK(src.compressed_bytes_read() == src.file_size());
  // The only events: 4 programs whose sched_str disagrees with their dicts somewhere (measured:
  // function1132304, function1153231, function1162234, function1163192; the schedules are kept).
  CHECK(log.count("note", "schedule_forms_disagree") == 4);
  CHECK(total_events(log) == 4);
  REQUIRE(progs.size() == 60);
  check_counts(count_records(progs), {4778, 442, 285, 86, 891, 1017, 704, 153, 984, 18857, 142333});
  CHECK(progs.front().name == "function003306");
  CHECK(progs.back().name == "function1179865");
  CHECK(progs.front().source_line == 1);
  CHECK(progs.back().source_line == 60);
}

TEST_CASE("committed synth slice: counts match an independent reading of the files") {
  // Expected numbers were computed once with python3's gzip + json modules (not with this code),
  // with the definitions of the mini.jsonl.gz test above: string bounds = bound texts with a
  // character other than -0123456789; tiled = non-empty tiling_dims; unrolled = a non-zero
  // unrolling_factor (number or numeric string); execution times = len(execution_times or []).
  struct Expected {
    const char* file;
    int64_t programs;
    RecordCounts counts;
    const char *first, *last;
  };
  const Expected files[] = {{"synth_train.jsonl.gz",
                             160,
                             {1920, 838, 393, 147, 1682, 128, 1443, 1318, 1567, 2890, 51545},
                             "synth_1_0000000",
                             "synth_1_0000159"},
                            {"synth_valid.jsonl.gz",
                             40,
                             {480, 208, 110, 41, 410, 37, 388, 381, 447, 823, 13158},
                             "synth_2_0000000",
                             "synth_2_0000039"}};
  std::set<std::string> names[2];
  for (int k = 0; k < 2; ++k) {
    const Expected& x = files[k];
    CAPTURE(x.file);
    const std::string path = lcm::test::committed_data(x.file);
    REQUIRE_MESSAGE(fs::is_regular_file(path), path << " is missing (tests/data/README.md)");
    SkipLog log(false, 0);
    RecordSource src(path, log);
    CHECK(src.is_jsonl());
    CHECK(src.is_gzip());
    std::vector<Program> progs;
    RawRecord rec;
    while (src.next(rec)) {
      auto p = parse_program(rec, log);
      REQUIRE(p.has_value());
      progs.push_back(std::move(*p));
    }
    CHECK(src.compressed_bytes_read() == src.file_size());
    CHECK(total_events(log) == 0);
    REQUIRE(int64_t(progs.size()) == x.programs);
    for (const Program& p : progs) names[k].insert(p.name);
    check_counts(count_records(progs), x.counts);
    CHECK(progs.front().name == x.first);
    CHECK(progs.back().name == x.last);
    CHECK(int64_t(names[k].size()) == x.programs);  // names are unique within a file
  }
  // Training and validation share no program name (different lcm-synth seeds).
  for (const std::string& n : names[1]) CHECK_MESSAGE(names[0].count(n) == 0, n);
}

TEST_CASE("gramschmidt: bare legacy record, iterator key order, absolute order, numeric strings") {
  const std::string path = lcm::test::committed_data(kGramschmidt);
  REQUIRE_MESSAGE(fs::is_regular_file(path), path << " is missing (tests/data/README.md)");
  SkipLog log(false, 0);
  {
    RecordSource src(path, log);
    CHECK_FALSE(src.is_jsonl());
    CHECK_FALSE(src.is_gzip());
  }
  auto progs = read_all_programs(path, log);
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 1);
  const Program& p = progs[0];
  CHECK(p.name == "function_gramschmidt");  // from the file name: the record has no program_name
  std::vector<std::string> its;
  for (auto& it : p.iterators) its.push_back(it.name);
  CHECK(its == std::vector<std::string>{"k", "i", "i_0", "j", "i_1", "i_2"});  // model-spec §13
  std::vector<std::string> comps;
  for (auto& c : p.computations) comps.push_back(c.name);
  CHECK(comps == std::vector<std::string>{"nrm_init", "nrm_comp", "R_diag", "Q_out", "R_up_init",
                                          "R_up", "A_out"});
  for (size_t i = 0; i < p.computations.size(); ++i)
    CHECK(p.computations[i].absolute_order == int(i) + 1);
  // Bounds are strings in this file: "0", "30", "(k + 1)".
  CHECK(p.iterators[0].lower.text == "0");
  CHECK(p.iterators[0].upper.text == "30");
  CHECK(p.iterators[3].lower.text == "(k + 1)");
  CHECK(p.iterators[0].parent == "");
  CHECK(p.iterators[3].parent == "k");
  CHECK(p.iterators[0].children == std::vector<std::string>{"i", "i_0", "j"});
  CHECK(p.computation_index("R_up_init") == 4);
  CHECK(p.computations[4].write_access_relation == "{ R_up_init[k, j] -> b_R[k' = k, j' = j] }");
  CHECK(p.computations[1].is_reduction);
  CHECK(p.computations[1].accesses.size() == 3);
  CHECK(p.computations[1].accesses[1].matrix ==
        std::vector<std::vector<int>>{{0, 1, 0}, {1, 0, 0}});
  CHECK(p.computations[1].expression.type == "add");
  CHECK(p.computations[1].expression.children[1].type == "mul");
  CHECK(p.initial_execution_time == doctest::Approx(0.010381));
  REQUIRE(p.schedules.size() == 25);
  CHECK(p.schedules[0].execution_times.size() == 30);
  CHECK(p.schedules[0].execution_times[0] == doctest::Approx(0.015247));
  // Schedule 10 unrolls nrm_comp by the string "4"; schedule 5 parallelizes R_up_init on j.
  CHECK(p.schedules[10].comps[1].unrolling_factor == 4);
  CHECK(p.schedules[10].comps[0].unrolling_factor == 0);
  CHECK(p.schedules[5].comps[4].parallelized_dim == "j");
  // Tree of schedule 0 (docs/model-spec.md §13): one root k [nrm_init, R_diag] with children i,
  // i_0, j.
  REQUIRE(p.schedules[0].tree.has_value());
  const LoopTree& t = *p.schedules[0].tree;
  REQUIRE(t.roots.size() == 1);
  CHECK(t.roots[0].loop_name == "k");
  CHECK(t.roots[0].computations == std::vector<std::string>{"nrm_init", "R_diag"});
  REQUIRE(t.roots[0].children.size() == 3);
  CHECK(t.roots[0].children[2].loop_name == "j");
  CHECK(t.roots[0].children[2].children[1].computations == std::vector<std::string>{"A_out"});
}

TEST_CASE(
    "the same program read from a legacy Jathu03 file and from the JSONL sample is identical") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  LCM_REQUIRE_SHARED(legacy_dir, "raw/Jathu03__Halide_New/Tiramisu");
  SkipLog log(false, 0);
  ReadOptions unchecked;  // this test is about the two containers, not the cross-check
  unchecked.schedule_check = ScheduleCheck::Off;
  auto jsonl = read_all_programs(mini, log, unchecked);
  // function1115489 has fusions, tiling and string bounds; function003306 is the first program.
  for (std::string name : {"function003306", "function1115489"}) {
    CAPTURE(name);
    std::string lpath = legacy_dir + "/" + name + ".json.gz";
    REQUIRE(fs::exists(lpath));
    RecordSource src(lpath, log);
    CHECK_FALSE(src.is_jsonl());
    CHECK(src.is_gzip());
    RawRecord rec;
    REQUIRE(src.next(rec));
    CHECK(rec.name_hint == name);
    CHECK(rec.line == 2);  // `{` on line 1, the member on line 2 (pretty-printed)
    auto legacy = parse_program(rec, log, unchecked);
    REQUIRE(legacy.has_value());
    CHECK_FALSE(src.next(rec));
    const Program* j = nullptr;
    for (auto& p : jsonl)
      if (p.name == name) j = &p;
    REQUIRE(j != nullptr);
    expect_same_program(*legacy, *j);
  }
  CHECK(total_events(log) == 0);
}

TEST_CASE(
    "truncated real gzip: the partial record is one truncated_gzip skip, earlier ones are kept") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  std::string bytes = read_bytes(mini);
  std::string cut = lcm::test::temp_dir("reader") + "/cut.jsonl.gz";
  write_text(cut, bytes.substr(0, bytes.size() / 2));
  SkipLog full_log(false, 0), log(false, 0);
  ReadOptions unchecked;  // this test is about the gzip cut, not the cross-check
  unchecked.schedule_check = ScheduleCheck::Off;
  auto all = read_all_programs(mini, full_log, unchecked);
  auto part = read_all_programs(cut, log, unchecked);
  CHECK(log.count("line", "truncated_gzip") == 1);
  CHECK(total_events(log) == 1);
  REQUIRE(part.size() > 0);
  REQUIRE(part.size() < all.size());
  for (size_t i = 0; i < part.size(); ++i) CHECK(part[i].name == all[i].name);
  auto ev = log.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].file == cut);
  CHECK(ev[0].line == int64_t(part.size()) + 1);
  CHECK(ev[0].program == all[part.size()].name);  // named from the partial line
}

// ------------------------------------------------------------------------------------------------
// Layouts and quirks (synthetic inputs)
// ------------------------------------------------------------------------------------------------

TEST_CASE("member order of iterators is preserved; computations sorted by absolute_order") {
  std::string r = record("p");
  // Three iterators in non-alphabetical key order, two computations listed in reverse order.
  r = sub(
      r, R"("iterators":{"i0":)",
      R"("iterators":{"z":{"lower_bound":0,"upper_bound":3},"a":{"lower_bound":0,"upper_bound":4},"i0":)");
  r = sub(
      r, R"("computations":{"comp00":)",
      R"("computations":{"comp09":{"absolute_order":2,"iterators":["i0"],"comp_is_reduction":false,)"
      R"("write_access_relation":"{ comp09[i0] -> b[i0] }","write_buffer_id":2,"data_type":"int32",)"
      R"("accesses":[],"expression_representation":{"expr_type":"value","children":[]}},"comp00":)");
  r = sub(r, R"({"comp00":{"shiftings":null)",
          R"({"comp09":{"parallelized_dim":"i0"},"comp00":{"shiftings":null)");
  SkipLog log(false, 0);
  auto progs = read_text(r + "\n", log, "order");
  REQUIRE(progs.size() == 1);
  const Program& p = progs[0];
  REQUIRE(p.iterators.size() == 4);
  CHECK(p.iterators[0].name == "z");
  CHECK(p.iterators[1].name == "a");
  CHECK(p.iterators[2].name == "i0");
  CHECK(p.iterators[3].name == "i1");
  REQUIRE(p.computations.size() == 2);
  CHECK(p.computations[0].name == "comp00");
  CHECK(p.computations[1].name == "comp09");
  // Schedule entries follow the computation index, not the key order of the schedule object.
  CHECK(p.schedules[0].comps[0].parallelized_dim == "");
  CHECK(p.schedules[0].comps[1].parallelized_dim == "i0");
  CHECK(log.count("note", "missing_comp_schedule") == 0);
}

TEST_CASE("numeric strings are accepted wherever numbers are expected") {
  std::string s = kSchedule;
  s = sub(s, R"("tiling":{})",
          R"("tiling":{"tiling_depth":"2","tiling_dims":["i0","i1"],"tiling_factors":["32",64]})");
  s = sub(s, R"("unrolling_factor":null)", R"("unrolling_factor":"4")");
  s = sub(s, R"("shiftings":null)", R"("shiftings":[["i1","2"]])");
  s = sub(s, R"("transformations_list":[])",
          R"("transformations_list":[[2,0,"1",0,0,0,0,0,0,0,0,0,0,0,0,0]])");
  s = sub(s, R"("fusions":null)", R"("fusions":[["comp00","comp00","1"]])");
  s = sub(s, R"("execution_times":[2.0,2.5])", R"("execution_times":["0.5",1,"2e-1"])");
  std::string r = record("p", "[" + s + "]");
  r = sub(r, R"("upper_bound":20)", R"("upper_bound":" 30 ")");
  r = sub(r, R"("lower_bound":0)", R"("lower_bound":"4")");
  r = sub(r, R"("memory_size":0.5)", R"("memory_size":"0.08")");
  r = sub(r, R"("absolute_order":1)", R"("absolute_order":"1")");
  r = sub(r, R"("write_buffer_id":1)", R"("write_buffer_id":"1")");
  r = sub(r, R"("initial_execution_time":2.0)", R"("initial_execution_time":"3.5")");
  SkipLog log(false, 0);
  auto progs = read_text(r + "\n", log, "numstr");
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 1);
  const Program& p = progs[0];
  CHECK(p.iterators[0].lower.text == "4");
  CHECK(p.iterators[1].upper.text == "30");
  CHECK(p.iterators[0].upper.text == "10");  // integer bound stored as its decimal text
  CHECK(p.computations[0].absolute_order == 1);
  CHECK(p.computations[0].write_buffer_id == 1);
  CHECK(p.initial_execution_time == 3.5);
  const Schedule& sc = p.schedules[0];
  CHECK(sc.parse_problem == "");
  const CompSchedule& cs = sc.comps[0];
  CHECK(cs.tiling_dims == std::vector<std::string>{"i0", "i1"});
  CHECK(cs.tiling_factors == std::vector<int64_t>{32, 64});
  CHECK(cs.unrolling_factor == 4);
  REQUIRE(cs.shiftings.size() == 1);
  CHECK(cs.shiftings[0].first == "i1");
  CHECK(cs.shiftings[0].second == 2);
  REQUIRE(cs.transformations.size() == 1);
  CHECK(cs.transformations[0][0] == 2);
  CHECK(cs.transformations[0][2] == 1);
  REQUIRE(sc.fusions.size() == 1);
  CHECK(sc.fusions[0].level == 1);
  CHECK(sc.execution_times == std::vector<double>{0.5, 1.0, 0.2});
}

TEST_CASE("optional fields: fusions null/absent/unfuse_iterators, tree absent, parent null") {
  std::string s1 = sub(kSchedule, R"("fusions":null,)", "");
  std::string s2 = sub(kSchedule, R"("fusions":null)", R"("unfuse_iterators":[])");
  std::string s3 = sub(
      kSchedule,
      R"("tree_structure":{"roots":[{"loop_name":"i0","computations_list":[],"child_list":[{"loop_name":"i1","computations_list":["comp00"],"child_list":[]}]}]},)",
      "");
  SkipLog log(false, 0);
  auto progs = read_text(record("p", "[" + kSchedule + "," + s1 + "," + s2 + "," + s3 + "]") + "\n",
                         log, "optional");
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 1);
  const Program& p = progs[0];
  REQUIRE(p.schedules.size() == 4);
  for (auto& s : p.schedules) {
    CHECK(s.parse_problem == "");
    CHECK(s.fusions.empty());
  }
  CHECK(p.schedules[0].tree.has_value());
  CHECK(p.schedules[2].tree.has_value());
  CHECK_FALSE(p.schedules[3].tree.has_value());
  CHECK(p.iterators[0].parent == "");
  CHECK(p.iterators[1].parent == "i0");
  CHECK(p.schedules[0].has_label());
}

TEST_CASE("legacy container: several programs, pretty-printed, gzip; keys give the names") {
  std::string r1 = sub(record("ignored1"), R"("program_name":"ignored1",)", "");
  std::string r2 = sub(record("ignored2"), R"("program_name":"ignored2",)", "");
  r2 = sub(r2, R"("initial_execution_time":2.0)", R"("initial_execution_time":7.0)");
  // Pretty-print crudely: a newline after every ',' and '{' (outside of strings none occur here
  // except in the ISL text, where a newline inside a string would be invalid, so keep those).
  auto pretty = [](const std::string& s) {
    std::string out;
    bool in_str = false;
    for (char c : s) {
      out += c;
      if (c == '"') in_str = !in_str;
      if (!in_str && (c == ',' || c == '{' || c == '[')) out += "\n    ";
    }
    return out;
  };
  std::string text = "{\n  \"progA\": " + pretty(r1) + ",\n  \"progB\" :\n" + pretty(r2) + "\n}\n";
  std::string path = lcm::test::temp_dir("reader") + "/legacy_multi.json.gz";
  write_gz(path, text);
  SkipLog log(false, 0);
  RecordSource src(path, log);
  CHECK_FALSE(src.is_jsonl());
  CHECK(src.is_gzip());
  std::vector<RawRecord> recs;
  RawRecord rec;
  while (src.next(rec)) recs.push_back(rec);
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].name_hint == "progA");
  CHECK(recs[1].name_hint == "progB");
  CHECK(recs[0].line == 2);
  // progB's value starts on the line after `"progB" :`.
  size_t b_at = text.find("\"progB\" :\n") + 10;
  CHECK(recs[1].line == 1 + int64_t(std::count(text.begin(), text.begin() + b_at, '\n')));
  auto a = parse_program(recs[0], log);
  auto b = parse_program(recs[1], log);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->name == "progA");
  CHECK(b->name == "progB");
  CHECK(a->initial_execution_time == 2.0);
  CHECK(b->initial_execution_time == 7.0);
  CHECK(b->schedules.size() == 1);
  CHECK(total_events(log) == 0);
  // A one-line legacy file (no pretty-printing) reads the same way.
  SkipLog log2(false, 0);
  auto progs = read_text("{\"x\":" + r1 + ",\"y\":" + r2 + "}", log2, "legacy_oneline");
  REQUIRE(progs.size() == 2);
  CHECK(progs[1].name == "y");
  CHECK(total_events(log2) == 0);
  // One `{name: record}` object per line (several containers in a row).
  SkipLog log3(false, 0);
  auto progs3 = read_text("{\"x\":" + r1 + "}\n{\"y\":" + r2 + ", \"z\": " + r1 + "}\n", log3,
                          "legacy_lines");
  REQUIRE(progs3.size() == 3);
  CHECK(progs3[0].name == "x");
  CHECK(progs3[1].name == "y");
  CHECK(progs3[2].name == "z");
  CHECK(progs3[2].source_line == 2);
  CHECK(total_events(log3) == 0);
}

TEST_CASE(
    "container detection uses magic bytes: gzip named .json is read, plain named .jsonl is read") {
  std::string dir = lcm::test::temp_dir("reader");
  write_text(dir + "/plain_named.jsonl", record("a") + "\n");
  write_gz(dir + "/gzip_named.json", record("b") + "\n");
  SkipLog log(false, 0);
  RecordSource s1(dir + "/plain_named.jsonl", log), s2(dir + "/gzip_named.json", log);
  CHECK_FALSE(s1.is_gzip());
  CHECK(s2.is_gzip());
  CHECK(s1.is_jsonl());
  CHECK(s2.is_jsonl());
  RawRecord r;
  REQUIRE(s1.next(r));
  CHECK(parse_program(r, log)->name == "a");
  REQUIRE(s2.next(r));
  CHECK(parse_program(r, log)->name == "b");
  CHECK(total_events(log) == 0);
}

TEST_CASE(
    "a file named .gz that is not gzip data is one clear error at open, not malformed lines") {
  std::string dir = lcm::test::temp_dir("reader");
  // a plain JSONL file renamed .gz, text that is not JSON, an empty file, an upper-case .GZ
  write_text(dir + "/plain.jsonl.gz", record("a") + "\n" + record("b") + "\n");
  write_text(dir + "/text.jsonl.gz", "this is not gzip\nnor json\n");
  write_text(dir + "/empty.json.gz", "");
  write_text(dir + "/upper.JSONL.GZ", record("a") + "\n");
  for (const char* name : {"plain.jsonl.gz", "text.jsonl.gz", "empty.json.gz", "upper.JSONL.GZ"}) {
    CAPTURE(name);
    const std::string path = dir + "/" + name;
    SkipLog log(false, 0);
    const std::string m1 = lcm::test::error_of<DataError>([&] { RecordSource s(path, log); });
    CHECK(m1.rfind(path + ": named .gz but is not gzip data (", 0) == 0);
    CHECK(m1.find('\n') == std::string::npos);
    CHECK(lcm::test::error_of<DataError>([&] { read_all_programs(path, log); }) == m1);
    CHECK(lcm::test::error_of<DataError>([&] { check_input_format(path); }) == m1);
    CHECK(total_events(log) == 0);  // nothing counted as malformed_json
  }
  SkipLog log(false, 0);
  CHECK(lcm::test::contains(
      lcm::test::error_of<DataError>([&] { check_input_format(dir + "/empty.json.gz"); }),
      "(the file is empty)"));
  // a real gzip file keeps working under its .gz name, and the same text unnamed .gz is read as is
  write_gz(dir + "/real.jsonl.gz", record("a") + "\n");
  write_text(dir + "/plain.jsonl", record("a") + "\n");
  for (const char* name : {"real.jsonl.gz", "plain.jsonl"}) {
    CAPTURE(name);
    CHECK_NOTHROW(check_input_format(dir + "/" + name));
    auto progs = read_all_programs(dir + "/" + name, log);
    REQUIRE(progs.size() == 1);
    CHECK(progs[0].name == "a");
  }
  CHECK(total_events(log) == 0);
  // an xz file named .gz keeps the more precise message
  write_text(dir + "/xz.jsonl.gz", std::string("\xFD"
                                               "7zXZ",
                                               5) +
                                       std::string(1, '\0') + "rest");
  CHECK(lcm::test::contains(
      lcm::test::error_of<DataError>([&] { check_input_format(dir + "/xz.jsonl.gz"); }),
      "is xz-compressed"));
}

TEST_CASE("a 10 MB JSONL line is read whole") {
  std::string scheds = "[";
  size_t n = 0;
  while (scheds.size() < 11u * 1000 * 1000) scheds += kSchedule + ",", ++n;
  scheds.back() = ']';
  std::string text =
      record("small1") + "\n" + record("huge", scheds) + "\n" + record("small2") + "\n";
  REQUIRE(text.size() > 10u * 1000 * 1000);
  SkipLog log(false, 0);
  auto progs = read_text(text, log, "huge", /*gz=*/true);
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 3);
  CHECK(progs[1].name == "huge");
  CHECK(progs[1].schedules.size() == n);
  CHECK(progs[1].source_line == 2);
  CHECK(progs[2].name == "small2");
  CHECK(progs[2].source_line == 3);
}

TEST_CASE("bare record layout: pretty-printed records concatenated in one file") {
  std::string r = sub(record("fromfield"), "{\"program_name\"", "{\n  \"program_name\"");
  std::string r2 = sub(record("x"), R"("program_name":"x",)", "");
  r2 = sub(r2, "{\"program_annotation\"", "{\n\"program_annotation\"");
  std::string path = lcm::test::temp_dir("reader") + "/function_bare_explored_schedules.json";
  write_text(path, r + "\n" + r2 + "\n");
  SkipLog log(false, 0);
  RecordSource src(path, log);
  CHECK_FALSE(src.is_jsonl());
  auto progs = read_all_programs(path, log);
  REQUIRE(progs.size() == 2);
  CHECK(progs[0].name == "fromfield");      // the record's own program_name wins
  CHECK(progs[1].name == "function_bare");  // else the file name
  CHECK(progs[1].source_line == 3);
  CHECK(total_events(log) == 0);
  // '{' and the first key on one line, but the record continues on later lines: still one record.
  std::string r3 = sub(record("samelinestart"), R"("program_name":"samelinestart",)",
                       "\"program_name\":\"samelinestart\",\n");
  write_text(path, r3 + "\n");
  SkipLog log3(false, 0);
  RecordSource src3(path, log3);
  CHECK_FALSE(src3.is_jsonl());
  auto progs3 = read_all_programs(path, log3);
  REQUIRE(progs3.size() == 1);
  CHECK(progs3[0].name == "samelinestart");
  CHECK(total_events(log3) == 0);
}

namespace {
/// Every record of `path` delivered by RecordSource, parsed; `met` = delivered + skipped records.
std::vector<Program> read_counting(const std::string& path, SkipLog& log, bool& jsonl,
                                   int64_t& met) {
  RecordSource src(path, log);
  jsonl = src.is_jsonl();
  std::vector<Program> out;
  RawRecord r;
  met = 0;
  while (src.next(r)) {
    ++met;
    if (auto p = parse_program(r, log)) out.push_back(std::move(*p));
  }
  met += src.records_skipped();
  return out;
}
}  // namespace

TEST_CASE("JSON Lines with a bad first line: that line is one named line skip, the rest is read") {
  std::string good;
  for (int i = 0; i < 5; ++i) good += record("p" + std::to_string(i)) + "\n";
  std::string long_scheds = "[";
  while (long_scheds.size() < 8000) long_scheds += kSchedule + ",";
  long_scheds.back() = ']';
  const std::string cut = record("cut", long_scheds).substr(0, 5000);
  struct Case {
    const char* tag;
    std::string first;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"badjson", "{bad", "malformed_json"},
      {"cut", cut, "malformed_json"},
      {"header", R"({"note": "header"})", "not_a_program_record"},
      {"empty_object", "{}", "not_a_program_record"},
      {"legacy_like", R"({"note": {"x": 1}})", "not_a_program_record"},
  };
  std::string dir = lcm::test::temp_dir("reader");
  for (const Case& c : cases) {
    for (const char* gap : {"\n", "\n\n  \r\n"}) {  // blank lines before the second record
      for (bool gz : {false, true}) {
        CAPTURE(c.tag);
        CAPTURE(gz);
        std::string path = dir + "/" + c.tag + (gz ? ".jsonl.gz" : ".jsonl");
        std::string text = c.first + gap + good;
        write_file(path, text, gz);
        SkipLog log(false, 0);
        bool jsonl = false;
        int64_t met = 0;
        auto progs = read_counting(path, log, jsonl, met);
        CHECK(jsonl);
        REQUIRE(progs.size() == 5);
        CHECK(progs[0].name == "p0");
        CHECK(progs[4].name == "p4");
        CHECK(met == 6);  // the bad line is a record read, and skipped
        CHECK(total_events(log) == 1);
        CHECK(log.count("line", c.reason) == 1);
        REQUIRE(log.events().size() == 1);
        CHECK(log.events()[0].line == 1);
        if (std::string(c.tag) == "cut") CHECK(log.events()[0].program == "cut");
        if (std::string(c.tag) == "header")
          CHECK(lcm::test::contains(log.events()[0].detail, "\"note\""));
      }
    }
  }
}

TEST_CASE("legacy containers stay legacy whatever their second line looks like") {
  const std::string a = record("a"), b = record("b");
  const std::vector<std::string> texts = {
      "{\"a\": " + a + ", \"b\": " + b + "}\n",           // single line
      "{\n  \"a\": " + a + ",\n  \"b\": " + b + "\n}\n",  // pretty-printed members
      "{\"a\": " + a + "}\n{\"b\": " + b + "}\n",         // one container per line
      "{\"a\":\n" + a + ",\n\"b\":\n" + b + "}\n",        // record on the line after its key
      "{\"a\":\n" + a + "\n,\"b\":\n" + b + "\n}\n",      // ... and a whole record line
      "{\"a\": " + a + ",\n\"b\":\n" + b + "\n}\n",
  };
  std::string dir = lcm::test::temp_dir("reader");
  for (size_t i = 0; i < texts.size(); ++i) {
    CAPTURE(i);
    std::string path = dir + "/legacy_" + std::to_string(i) + ".json";
    write_text(path, texts[i]);
    SkipLog log(false, 0);
    bool jsonl = true;
    int64_t met = 0;
    auto progs = read_counting(path, log, jsonl, met);
    CHECK_FALSE(jsonl);
    CHECK(total_events(log) == 0);
    REQUIRE(progs.size() == 2);
    CHECK(progs[0].name == "a");
    CHECK(progs[1].name == "b");
  }
}

// ------------------------------------------------------------------------------------------------
// Bad input: one test per kind, exact reason and count
// ------------------------------------------------------------------------------------------------

TEST_CASE("bad input: unreadable or missing file is a DataError") {
  SkipLog log(false, 0);
  CHECK_THROWS_AS(RecordSource("/nonexistent/dir/x.jsonl.gz", log), DataError);
  CHECK_THROWS_AS(read_all_programs("/nonexistent/x.json", log), DataError);
  CHECK_THROWS_AS(RecordSource(lcm::test::temp_dir("reader"), log), DataError);  // a directory
  try {
    RecordSource s("/nonexistent/x.json", log);
  } catch (const DataError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/x.json") != std::string::npos);
  }
}

TEST_CASE("bad input: truncated gzip (synthetic), inside a record and inside the trailer") {
  std::string text =
      record("a") + "\n" + record("b") + "\n" + with_random_tail(record("c"), 400, 7) + "\n";
  std::string dir = lcm::test::temp_dir("reader");
  write_gz(dir + "/full.jsonl.gz", text);
  std::string bytes = read_bytes(dir + "/full.jsonl.gz");
  // Cut inside the compressed data: the last record is partial.
  write_text(dir + "/cut_data.jsonl.gz", bytes.substr(0, bytes.size() - 60));
  SkipLog log(false, 0);
  auto progs = read_all_programs(dir + "/cut_data.jsonl.gz", log);
  CHECK(log.count("line", "truncated_gzip") == 1);
  CHECK(total_events(log) == 1);
  CHECK(progs.size() == 2);
  REQUIRE(log.events().size() == 1);
  CHECK(log.events()[0].program == "c");
  CHECK(log.events()[0].line == 3);
  // Cut inside the 8-byte trailer only: every record is complete, the truncation is still reported.
  write_text(dir + "/cut_trailer.jsonl.gz", bytes.substr(0, bytes.size() - 4));
  SkipLog log2(false, 0);
  auto progs2 = read_all_programs(dir + "/cut_trailer.jsonl.gz", log2);
  CHECK(progs2.size() == 3);
  CHECK(log2.count("line", "truncated_gzip") == 1);
  CHECK(total_events(log2) == 1);
  // Legacy container truncated: one skip, named by the member key.
  std::string legacy =
      "{\"pA\": " + record("a") + ",\n\"pB\": " + with_random_tail(record("b"), 400, 9) + "}";
  write_gz(dir + "/legacy_full.json.gz", legacy);
  std::string lb = read_bytes(dir + "/legacy_full.json.gz");
  write_text(dir + "/legacy_cut.json.gz", lb.substr(0, lb.size() - 40));
  SkipLog log3(false, 0);
  auto progs3 = read_all_programs(dir + "/legacy_cut.json.gz", log3);
  CHECK(progs3.size() == 1);
  CHECK(log3.count("line", "truncated_gzip") == 1);
  CHECK(total_events(log3) == 1);
  REQUIRE(log3.events().size() == 1);
  CHECK(log3.events()[0].program == "pB");
}

TEST_CASE("bad input: corrupt gzip data") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += record("p" + std::to_string(i)) + "\n";
  std::string dir = lcm::test::temp_dir("reader");
  write_gz(dir + "/ok.jsonl.gz", text);
  std::string bytes = read_bytes(dir + "/ok.jsonl.gz");
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i) bytes[i] = char(~bytes[i]);
  write_text(dir + "/corrupt.jsonl.gz", bytes);
  SkipLog log(false, 0);
  auto progs = read_all_programs(dir + "/corrupt.jsonl.gz", log);
  CHECK(log.count("line", "corrupt_gzip") + log.count("line", "malformed_json") >= 1);
  CHECK(log.count("line", "corrupt_gzip") == 1);
  CHECK(progs.size() < 50);
}

TEST_CASE("bad input: a non-JSON line is malformed_json; the next lines are still read") {
  std::string text = record("a") + "\n" + "this is not json\n" + sub(record("b"), "}}}}", "}}") +
                     "\n" + record("c") + "\n";
  SkipLog log(false, 0);
  auto progs = read_text(text, log, "malformed");
  CHECK(log.count("line", "malformed_json") == 2);
  CHECK(total_events(log) == 2);
  REQUIRE(progs.size() == 2);
  CHECK(progs[0].name == "a");
  CHECK(progs[1].name == "c");
  CHECK(progs[1].source_line == 4);
  auto ev = log.events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].line == 2);
  CHECK(ev[1].line == 3);
  CHECK(ev[1].program == "b");  // sniffed from the broken line
}

TEST_CASE("bad input: JSON values that are not objects are not_an_object") {
  std::string text = "[1,2]\n\"text\"\n42\nnull\n" + record("ok") + "\n";
  SkipLog log(false, 0);
  auto progs = read_text(text, log, "notobj");
  CHECK(log.count("line", "not_an_object") == 4);
  CHECK(total_events(log) == 4);
  CHECK(progs.size() == 1);
  // Legacy container whose member value is not an object.
  SkipLog log2(false, 0);
  auto progs2 = read_text("{\"a\": 5, \"b\": " + record("b") + "}", log2, "notobj_legacy");
  CHECK(log2.count("line", "not_an_object") == 1);
  REQUIRE(progs2.size() == 1);
  CHECK(progs2[0].name == "b");
}

TEST_CASE("bad input: missing program_annotation") {
  std::string r = record("a");
  size_t b = r.find("\"program_annotation\"");
  size_t e = r.find("\"initial_execution_time\"");
  r.erase(b, e - b);
  SkipLog log(false, 0);
  auto progs = read_text(r + "\n" + record("ok") + "\n", log, "noann");
  CHECK(log.count("program", "missing_program_annotation") == 1);
  CHECK(total_events(log) == 1);
  CHECK(progs.size() == 1);
  REQUIRE(log.events().size() == 1);
  CHECK(log.events()[0].program == "a");
  CHECK(log.events()[0].line == 1);
}

TEST_CASE("missing or null initial_execution_time reads as NaN (a program to predict)") {
  std::string missing = sub(record("a"), R"("initial_execution_time":2.0,)", "");
  std::string null_ =
      sub(record("b"), R"("initial_execution_time":2.0)", R"("initial_execution_time":null)");
  REQUIRE(missing != record("a"));
  SkipLog log(false, 0);
  auto progs = read_text(missing + "\n" + null_ + "\n", log, "noinit");
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 2);
  CHECK(std::isnan(progs[0].initial_execution_time));
  CHECK(std::isnan(progs[1].initial_execution_time));
}

TEST_CASE("bad input: missing, null or empty schedules_list") {
  std::string none = sub(record("a"), ",\"schedules_list\":[" + kSchedule + "]", "");
  std::string null_ = record("b", "null");
  std::string empty = record("c", "[]");
  expect_only_ok_kept({none, null_, empty}, "nosched", {{"program", "empty_schedules_list", 3}});
}

TEST_CASE(
    "bad input: execution_times null/empty/-1 kept; non-numeric string → bad_execution_times") {
  std::string s_null = sub(kSchedule, "[2.0,2.5]", "null");
  std::string s_empty = sub(kSchedule, "[2.0,2.5]", "[]");
  std::string s_neg = sub(kSchedule, "[2.0,2.5]", "[-1,3.0]");
  std::string s_bad = sub(kSchedule, "[2.0,2.5]", "[1.0,\"fast\"]");
  std::string s_absent = sub(kSchedule, ",\"execution_times\":[2.0,2.5]", "");
  SkipLog log(false, 0);
  auto progs = read_text(record("a", "[" + kSchedule + "," + s_null + "," + s_empty + "," + s_neg +
                                         "," + s_bad + "," + s_absent + "]") +
                             "\n",
                         log, "times");
  CHECK(total_events(log) == 0);  // schedule problems are recorded on the schedule, not logged here
  REQUIRE(progs.size() == 1);
  const auto& s = progs[0].schedules;
  REQUIRE(s.size() == 6);
  CHECK(s[0].has_label());
  CHECK(s[1].execution_times.empty());
  CHECK(s[1].parse_problem == "");
  CHECK_FALSE(s[1].has_label());
  CHECK(s[2].execution_times.empty());
  CHECK(s[2].parse_problem == "");
  CHECK(s[3].execution_times == std::vector<double>{-1.0, 3.0});
  CHECK(s[3].parse_problem == "");
  CHECK_FALSE(s[3].has_label());
  CHECK(s[4].parse_problem == "bad_execution_times");
  CHECK(s[4].parse_detail.find("fast") != std::string::npos);
  CHECK(s[5].execution_times.empty());
  CHECK(s[5].parse_problem == "");
}

TEST_CASE("bad input: JSONL record without a program name is kept as <file>:<line> and counted") {
  std::string r = sub(record("x"), R"("program_name":"x",)", "");
  SkipLog log(false, 0);
  std::string dir = lcm::test::temp_dir("reader");
  write_text(dir + "/noname.jsonl", record("a") + "\n" + r + "\n");
  auto progs = read_all_programs(dir + "/noname.jsonl", log);
  REQUIRE(progs.size() == 2);
  CHECK(progs[1].name == dir + "/noname.jsonl:2");
  CHECK(log.count("note", "missing_program_name") == 1);
  CHECK(total_events(log) == 1);
}

TEST_CASE("bad input: wrong-typed fields are bad_field with the field path") {
  struct Case {
    std::string from, to, path;
  };
  std::vector<Case> cases = {
      {R"("iterators":{"i0")", R"("iterators":[],"x":{"i0")", "program_annotation.iterators"},
      {R"("iterators":["i0","i1"])", R"("iterators":"i0")",
       "program_annotation.computations.comp00.iterators"},
      {R"("upper_bound":10)", R"("upper_bound":[10])",
       "program_annotation.iterators.i0.upper_bound"},
      {R"("upper_bound":10)", R"("upper_bound":null)",
       "program_annotation.iterators.i0.upper_bound"},
      {R"("write_buffer_id":1)", R"("write_buffer_id":"one")",
       "program_annotation.computations.comp00.write_buffer_id"},
      {R"("access_matrix":[[1,0,0],[0,1,0]])", R"("access_matrix":[[1,0,0],[0,"x",0]])",
       "program_annotation.computations.comp00.accesses[0].access_matrix[1]"},
      {R"({"expr_type":"value","children":[]})", R"({"expr_type":3,"children":[]})",
       "program_annotation.computations.comp00.expression_representation.children[1].expr_type"},
      {R"("initial_execution_time":2.0)", R"("initial_execution_time":"slow")",
       "initial_execution_time"},
      {R"("data_type":"float32",)", "", "program_annotation.computations.comp00.data_type"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    SkipLog log(false, 0);
    auto progs =
        read_text(sub(record("a"), c.from, c.to) + "\n" + record("ok") + "\n", log, "badfield");
    CHECK(log.count("program", "bad_field") == 1);
    CHECK(total_events(log) == 1);
    CHECK(progs.size() == 1);
    auto ev = log.events();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].program == "a");
    CHECK(ev[0].detail.rfind(c.path + ":", 0) == 0);
  }
  // A repeated iterator name is a repeated key: duplicate_key (any object), with its path.
  SkipLog log(false, 0);
  auto progs = read_text(sub(record("a"), R"("i1":{"lower_bound":0)", R"("i0":{"lower_bound":0)") +
                             "\n" + record("ok") + "\n",
                         log, "badfield");
  CHECK(progs.size() == 1);
  CHECK(total_events(log) == 1);
  CHECK(log.count("program", "duplicate_key") == 1);
  auto ev = log.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].detail.rfind("key .program_annotation.iterators.i0 appears twice", 0) == 0);
}

TEST_CASE("bad input: malformed schedules keep their index with a parse_problem") {
  std::string bad_tiling =
      sub(kSchedule, R"("tiling":{})",
          R"("tiling":{"tiling_depth":2,"tiling_dims":["i0","i1"],"tiling_factors":[32]})");
  std::string bad_tiling2 = sub(kSchedule, R"("tiling":{})", R"("tiling":"32x32")");
  std::string bad_tr = sub(kSchedule, R"("transformations_list":[])",
                           R"("transformations_list":[[1,0,1,0,0,0,0,0]])");
  std::string bad_fusion = sub(kSchedule, R"("fusions":null)", R"("fusions":"comp00")");
  std::string bad_par = sub(kSchedule, R"("parallelized_dim":null)", R"("parallelized_dim":7)");
  SkipLog log(false, 0);
  auto progs =
      read_text(record("a", "[" + kSchedule + "," + bad_tiling + "," + bad_tiling2 + "," + bad_tr +
                                "," + bad_fusion + "," + bad_par + ",17," + kSchedule + "]") +
                    "\n",
                log, "badsched");
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 1);
  const auto& s = progs[0].schedules;
  REQUIRE(s.size() == 8);
  CHECK(s[0].parse_problem == "");
  CHECK(s[1].parse_problem == "bad_tiling");
  CHECK(s[2].parse_problem == "bad_tiling");
  CHECK(s[3].parse_problem == "bad_transformation");
  CHECK(s[3].parse_detail.find("comp00.transformations_list[0]") == 0);
  CHECK(s[4].parse_problem == "bad_field");
  CHECK(s[4].parse_detail.find("fusions") == 0);
  CHECK(s[5].parse_problem == "bad_field");
  CHECK(s[5].parse_detail.find("comp00.parallelized_dim") == 0);
  CHECK(s[6].parse_problem == "bad_field");  // a schedule that is not an object
  CHECK(s[7].parse_problem == "");
  CHECK(s[7].has_label());
}

TEST_CASE("bad input: missing or duplicate absolute_order skips the program") {
  std::string two =
      R"("computations":{"comp01":{"absolute_order":1,"iterators":["i0"],"comp_is_reduction":false,)"
      R"("write_access_relation":"{ comp01[i0] -> b[i0] }","write_buffer_id":2,"data_type":"int32",)"
      R"("accesses":[],"expression_representation":{"expr_type":"value","children":[]}},"comp00":)";
  std::string dup = sub(record("dup"), R"("computations":{"comp00":)", two);
  std::string missing = sub(record("missing"), R"("absolute_order":1,)", "");
  expect_only_ok_kept(
      {dup, missing}, "order_bad",
      {{"program", "duplicate_absolute_order", 1}, {"program", "missing_absolute_order", 1}});
}

TEST_CASE("a schedule without computation entries or other forms is the identity, without a note") {
  // Its sched_str is empty: no transformation information at all. (A
  // computation missing beside others that have an entry is the note missing_comp_schedule:
  // tests/test_schedule_forms.cpp.)
  std::string s = sub(
      kSchedule,
      R"({"comp00":{"shiftings":null,"tiling":{},"unrolling_factor":null,"parallelized_dim":null,"transformations_list":[]},)",
      "{");
  SkipLog log(false, 0);
  auto progs =
      read_text(record("a", "[" + kSchedule + "," + s + "," + s + "]") + "\n", log, "nocomp");
  REQUIRE(progs.size() == 1);
  CHECK(log.count("note", "missing_comp_schedule") == 0);
  CHECK(total_events(log) == 0);
  CHECK(progs[0].form_counts.at("read/none") == 2);
  CHECK(progs[0].form_counts.at("read/structured") == 1);
  REQUIRE(progs[0].schedules.size() == 3);
  const Schedule& sc = progs[0].schedules[1];
  CHECK(sc.parse_problem == "");
  REQUIRE(sc.comps.size() == 1);
  CHECK(sc.comps[0].tiling_dims.empty());
  CHECK(sc.comps[0].unrolling_factor == 0);
  CHECK(sc.comps[0].transformations.empty());
}

TEST_CASE("blank lines are ignored and are not skips") {
  std::string text = "\n" + record("a") + "\n\n   \n\r\n" + record("b") + "\r\n\n";
  SkipLog log(false, 0);
  auto progs = read_text(text, log, "blank", true);
  CHECK(total_events(log) == 0);
  REQUIRE(progs.size() == 2);
  CHECK(progs[0].source_line == 2);
  CHECK(progs[1].source_line == 6);
}

TEST_CASE("bad input: malformed legacy container stops with one malformed_json skip") {
  // Missing ',' between two members: the first program is kept, the rest cannot be resynchronised.
  std::string text = "{\"a\": " + record("a") + "\n \"b\": " + record("b") + "}";
  SkipLog log(false, 0);
  auto progs = read_text(text, log, "legacy_bad");
  CHECK(log.count("line", "malformed_json") == 1);
  CHECK(total_events(log) == 1);
  REQUIRE(progs.size() == 1);
  CHECK(progs[0].name == "a");
  // A syntax error inside a member value: named by its key.
  SkipLog log2(false, 0);
  auto progs2 = read_text("{\"a\": " + record("a") + ", \"b\": {\"x\": [1,}}", log2, "legacy_bad2");
  CHECK(log2.count("line", "malformed_json") == 1);
  REQUIRE(log2.events().size() == 1);
  CHECK(log2.events()[0].program == "b");
  CHECK(progs2.size() == 1);
  // The record that could not be read is counted as read and skipped (lcm-prepare's "N records
  // read" is not 0 when a container is broken).
  std::string dir = lcm::test::temp_dir("reader");
  const std::vector<std::pair<std::string, int64_t>> broken = {
      {"{bad", 1},                                                       // one line, not JSON
      {"{\"a\": " + record("a") + "\n \"b\": " + record("b") + "}", 2},  // a kept, then ',' missing
      {"{\"a\" " + record("a") + "}", 1},                                // ':' missing
  };
  for (auto& [text, met_expected] : broken) {
    CAPTURE(text.substr(0, 20));
    write_text(dir + "/legacy_broken.json", text);
    SkipLog log3(false, 0);
    bool jsonl = true;
    int64_t met = 0;
    read_counting(dir + "/legacy_broken.json", log3, jsonl, met);
    CHECK_FALSE(jsonl);
    CHECK(log3.count("line", "malformed_json") == 1);
    CHECK(met == met_expected);
  }
}

TEST_CASE("bad input: hostile nesting does not crash") {
  // 100000 nested arrays on a JSONL line: valid JSON, not an object.
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  // A 10000-deep expression tree inside an otherwise valid record.
  std::string expr;
  for (int i = 0; i < 10000; ++i) expr += R"({"expr_type":"minus","children":[)";
  expr += R"({"expr_type":"value","children":[]})";
  for (int i = 0; i < 10000; ++i) expr += "]}";
  std::string r = sub(record("deep"), R"({"expr_type":"value","children":[]})", expr);
  expect_only_ok_kept({deep, r}, "deep",
                      {{"line", "not_an_object", 1}, {"program", "bad_field", 1}});
}

TEST_CASE("strict SkipLog turns the first skip into a DataError") {
  SkipLog log(true, 0);
  std::string dir = lcm::test::temp_dir("reader");
  write_text(dir + "/strict.jsonl", record("a") + "\nnot json\n");
  CHECK_THROWS_AS(read_all_programs(dir + "/strict.jsonl", log), DataError);
}

TEST_CASE("fuzz: mutated records give a Program or exactly one named skip, never a crash") {
  // Deterministic byte mutations (LCG) of a valid two-schedule record: delete, duplicate or
  // replace a byte with a JSON-significant character.
  const std::string base = record("fz", "[" + kSchedule + "," + kSchedule + "]");
  const char alphabet[] = "{}[]\":,0-1e.xn\\ ";
  lcm::test::Lcg32 rng{12345};
  auto rnd = [&](uint32_t n) { return rng.below(n); };
  int kept = 0, skipped = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = base;
    int edits = 1 + int(rnd(3));
    for (int e = 0; e < edits; ++e) {
      size_t at = rnd(uint32_t(s.size()));
      switch (rnd(3)) {
        case 0:
          s.erase(at, 1);
          break;
        case 1:
          s.insert(at, 1, s[at]);
          break;
        default:
          s[at] = alphabet[rnd(sizeof(alphabet) - 1)];
          break;
      }
    }
    SkipLog log(false, 0);
    RawRecord rec{s, "fuzz.jsonl", iter + 1, ""};
    std::optional<Program> p;
    CHECK_NOTHROW(p = parse_program(rec, log));
    int64_t hard = log.total("line") + log.total("program");
    if (p) {
      ++kept;
      CHECK(hard == 0);
      CHECK(p->schedules.size() >= 1);
    } else {
      ++skipped;
      CHECK(hard == 1);
    }
  }
  CHECK(kept > 0);
  CHECK(skipped > 0);
}

TEST_CASE("fuzz: a gzip file cut at many points gives exactly one truncated_gzip skip each") {
  std::string text;
  for (int i = 0; i < 5; ++i)
    text += with_random_tail(record("p" + std::to_string(i)), 300, 100 + i) + "\n";
  std::string dir = lcm::test::temp_dir("reader");
  write_gz(dir + "/whole.jsonl.gz", text);
  const std::string bytes = read_bytes(dir + "/whole.jsonl.gz");
  size_t previous = 0;
  for (size_t cut = 20; cut < bytes.size(); cut += 37) {
    CAPTURE(cut);
    write_text(dir + "/cut_n.jsonl.gz", bytes.substr(0, cut));
    SkipLog log(false, 0);
    std::vector<Program> progs;
    CHECK_NOTHROW(progs = read_all_programs(dir + "/cut_n.jsonl.gz", log));
    CHECK(log.count("line", "truncated_gzip") == 1);
    CHECK(total_events(log) == 1);
    CHECK(progs.size() >= previous);  // a longer prefix never yields fewer programs
    previous = progs.size();
  }
  CHECK(previous >= 4);
}

TEST_CASE("fuzz: mutated legacy containers never crash or hang") {
  const std::string base = "{\"a\": " + record("a") + ",\n \"b\": " + record("b") + "}\n";
  const char alphabet[] = "{}[]\":,0\\ \n";
  lcm::test::Lcg32 rng{777};
  auto rnd = [&](uint32_t n) { return rng.below(n); };
  std::string dir = lcm::test::temp_dir("reader");
  int complete = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string s = base;
    size_t at = rnd(uint32_t(s.size()));
    if (rnd(2))
      s.erase(at, 1);
    else
      s[at] = alphabet[rnd(sizeof(alphabet) - 1)];
    write_text(dir + "/fz.json", s);
    SkipLog log(false, 0);
    std::vector<Program> progs;
    CHECK_NOTHROW(progs = read_all_programs(dir + "/fz.json", log));
    CHECK(progs.size() <= 3);
    complete += progs.size() == 2 && total_events(log) == 0;
  }
  CHECK(complete > 0);  // some mutations (e.g. inside whitespace) leave the file valid
}

// ------------------------------------------------------------------------------------------------
// gzip decoded with z_stream inflate: nothing decoded before a corruption is lost
// ------------------------------------------------------------------------------------------------

namespace {

/// Writes `lines` as one gzip member with a full flush after each line (so every line before a
/// cut can be decoded); returns the compressed offset after each line's flush.
std::vector<size_t> write_flushed_gz(const std::string& path, const std::vector<std::string>& lines,
                                     std::string& bytes) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<size_t> ends;
  std::vector<unsigned char> out(1 << 16);
  bytes.clear();
  auto pump = [&](const std::string& in, int flush) {
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = uInt(in.size());
    int r;
    do {
      zs.next_out = out.data();
      zs.avail_out = uInt(out.size());
      r = deflate(&zs, flush);
      REQUIRE(r != Z_STREAM_ERROR);
      bytes.append(reinterpret_cast<char*>(out.data()), out.size() - zs.avail_out);
    } while (zs.avail_out == 0);
    return r;
  };
  for (auto& l : lines) {
    pump(l + "\n", Z_FULL_FLUSH);
    ends.push_back(bytes.size());
  }
  REQUIRE(pump("", Z_FINISH) == Z_STREAM_END);
  deflateEnd(&zs);
  write_text(path, bytes);
  return ends;
}

}  // namespace

TEST_CASE("gzip with a wrong CRC trailer keeps every record (mini.jsonl.gz, zcat-like)") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  SkipLog ok_log(false, 0);
  const size_t n_ok = read_all_programs(mini, ok_log).size();
  REQUIRE(n_ok == 60);
  std::string bytes = read_bytes(mini);
  for (size_t i = bytes.size() - 8; i < bytes.size() - 4; ++i) bytes[i] = 0;  // CRC-32 := 0
  std::string path = lcm::test::temp_dir("reader") + "/bad_crc.jsonl.gz";
  write_text(path, bytes);
  SkipLog log(false, 0);
  RecordSource src(path, log);
  RawRecord r;
  size_t n = 0;
  while (src.next(r)) ++n;
  CHECK(n == n_ok);                   // before the fix: 51 (the last 1 MiB chunk was discarded)
  CHECK(src.records_skipped() == 0);  // no partial record: only the trailer is bad
  CHECK(log.count("line", "corrupt_gzip") == 1);
  CHECK(total_events(log) == 1);
  REQUIRE(log.events().size() == 1);
  // The message names the file once (SkipEvent::file), not again inside the zlib detail.
  CHECK(log.events()[0].detail.find(path) == std::string::npos);
  CHECK(log.events()[0].detail.find("incorrect data check") != std::string::npos);
}

TEST_CASE("gzip cut or corrupted mid-file: every complete record before the damage is kept") {
  std::vector<std::string> lines;
  for (int i = 0; i < 200; ++i)
    lines.push_back(with_random_tail(record("p" + std::to_string(i)), 300, i));
  std::string dir = lcm::test::temp_dir("reader");
  std::string bytes;
  std::vector<size_t> ends = write_flushed_gz(dir + "/flushed.jsonl.gz", lines, bytes);
  {
    SkipLog log(false, 0);
    CHECK(read_all_programs(dir + "/flushed.jsonl.gz", log).size() == 200);
    CHECK(total_events(log) == 0);
  }
  for (int keep : {1, 37, 150, 198}) {
    INFO("complete lines before the cut: " << keep);
    const size_t at = ends[keep - 1] + 150;  // 150 compressed bytes into the next line
    REQUIRE(at < ends[keep]);
    // Truncated file.
    write_text(dir + "/cut.jsonl.gz", bytes.substr(0, at));
    SkipLog log(false, 0);
    RecordSource src(dir + "/cut.jsonl.gz", log);
    RawRecord r;
    int n = 0;
    while (src.next(r)) {
      CHECK(r.line == n + 1);
      ++n;
    }
    CHECK(n == keep);
    CHECK(log.count("line", "truncated_gzip") == 1);
    CHECK(total_events(log) == 1);
    CHECK(src.records_skipped() == 1);  // the partial record
    REQUIRE(log.events().size() == 1);
    CHECK(log.events()[0].program == "p" + std::to_string(keep));
    CHECK(log.events()[0].line == keep + 1);
    // Corrupted bytes at the same place (the rest of the file is still there).
    std::string bad = bytes;
    for (size_t i = at; i < at + 8 && i < bad.size(); ++i) bad[i] = char(bad[i] ^ 0x5a);
    write_text(dir + "/flip.jsonl.gz", bad);
    SkipLog log2(false, 0);
    auto progs = read_all_programs(dir + "/flip.jsonl.gz", log2);
    CHECK(int(progs.size()) >= keep);  // complete lines before the damage are all kept
    for (int i = 0; i < keep && i < int(progs.size()); ++i)
      CHECK(progs[i].name == "p" + std::to_string(i));
    CHECK(log2.count("line", "corrupt_gzip") == 1);
  }
}

TEST_CASE("multi-member gzip (concatenated files) is read member after member") {
  std::string dir = lcm::test::temp_dir("reader");
  write_gz(dir + "/m1.gz", record("a") + "\n" + record("b") + "\n");
  write_gz(dir + "/m2.gz", record("c") + "\n");
  write_text(dir + "/multi.jsonl.gz", read_bytes(dir + "/m1.gz") + read_bytes(dir + "/m2.gz"));
  SkipLog log(false, 0);
  auto progs = read_all_programs(dir + "/multi.jsonl.gz", log);
  REQUIRE(progs.size() == 3);
  CHECK(progs[2].name == "c");
  CHECK(total_events(log) == 0);
  // Garbage after the last member is reported, the records are kept.
  write_text(dir + "/garbage.jsonl.gz", read_bytes(dir + "/m1.gz") + "not gzip at all");
  SkipLog log2(false, 0);
  CHECK(read_all_programs(dir + "/garbage.jsonl.gz", log2).size() == 2);
  CHECK(log2.count("line", "corrupt_gzip") == 1);
}

TEST_CASE("strict mode stops on malformed input, not on policy drops") {
  SkipLog log(true, 0);
  auto ev = [](const char* level, const char* reason) {
    SkipEvent e;
    e.level = level;
    e.reason = reason;
    e.file = "f";
    return e;
  };
  CHECK_NOTHROW(log.add(ev("footprint", "small_footprint_group")));
  CHECK_NOTHROW(log.add(ev("note", "missing_comp_schedule")));
  CHECK_NOTHROW(log.add(ev("schedule", "no_execution_times")));
  CHECK_NOTHROW(log.add(ev("schedule", "negative_time")));
  CHECK_NOTHROW(log.add(ev("schedule", "zero_time")));
  CHECK(log.count("schedule", "zero_time") == 1);
  CHECK_THROWS_AS(log.add(ev("schedule", "bad_transformation")), DataError);
  CHECK_THROWS_AS(log.add(ev("program", "bad_field")), DataError);
  CHECK_THROWS_AS(log.add(ev("line", "malformed_json")), DataError);
  CHECK_NOTHROW(log.add_count("note", "duplicate_program_name", 3));
  CHECK(log.count("note", "duplicate_program_name") == 3);
}

TEST_CASE("bad input: a tiling factor <= 0 or a negative unrolling factor drops that schedule") {
  auto tiled = [](const std::string& factors) {
    return sub(kSchedule, R"("tiling":{})",
               R"("tiling":{"tiling_depth":2,"tiling_dims":["i0","i1"],"tiling_factors":)" +
                   factors + "}");
  };
  auto unrolled = [](const std::string& f) {
    return sub(kSchedule, R"("unrolling_factor":null)", R"("unrolling_factor":)" + f);
  };
  SkipLog log(false, 0);
  auto progs =
      read_text(record("a", "[" + kSchedule + "," + tiled("[32,0]") + "," + tiled("[\"-4\",8]") +
                                "," + tiled("[32,8]") + "," + unrolled("-2") + "," + unrolled("0") +
                                "," + unrolled("\"4\"") + "]") +
                    "\n",
                log, "badfactors");
  CHECK(total_events(log) == 0);  // schedule problems are reported by featurize, per schedule
  REQUIRE(progs.size() == 1);
  const auto& s = progs[0].schedules;
  REQUIRE(s.size() == 7);
  CHECK(s[0].parse_problem == "");
  CHECK(s[1].parse_problem == "bad_tile_factor");
  CHECK(s[1].parse_detail.find("comp00.tiling.tiling_factors[1]") == 0);
  CHECK(lcm::test::contains(s[1].parse_detail, "tiling factor 0 is not positive"));
  CHECK(s[2].parse_problem == "bad_tile_factor");
  CHECK(lcm::test::contains(s[2].parse_detail, "tiling factor -4"));
  CHECK(s[3].parse_problem == "");
  CHECK(s[3].comps[0].tiling_factors == std::vector<int64_t>{32, 8});
  CHECK(s[4].parse_problem == "bad_unroll_factor");
  CHECK(lcm::test::contains(s[4].parse_detail, "unrolling factor -2 is negative"));
  CHECK(s[5].parse_problem == "");  // 0 = not unrolled, as the reference reads it
  CHECK(s[5].comps[0].unrolling_factor == 0);
  CHECK(s[6].parse_problem == "");
  CHECK(s[6].comps[0].unrolling_factor == 4);
}

TEST_CASE("bad input: an unknown expr_type skips the program with its path and type") {
  for (const std::string t : {"frobnicate", "", "ADD"}) {
    SkipLog log(false, 0);
    std::string rec = sub(record("a"), R"({"expr_type":"value","children":[]})",
                          R"({"expr_type":")" + t + R"(","children":[]})");
    auto progs = read_text(rec + "\n" + record("b") + "\n", log, "badexpr");
    REQUIRE(progs.size() == 1);
    CHECK(progs[0].name == "b");
    CHECK(log.count("program", "unknown_expr_type") == 1);
    CHECK(total_events(log) == 1);
    auto ev = log.events();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].program == "a");
    CHECK(ev[0].line == 1);
    CHECK(lcm::test::contains(
        ev[0].detail, "computations.comp00.expression_representation.children[1].expr_type"));
    CHECK(lcm::test::contains(ev[0].detail, "unknown expression type \"" + t + "\""));
  }
  // every type of docs/data-format.md is accepted
  for (const char* t :
       {"access", "value", "add", "sub", "mul", "div", "sqrt", "max", "min", "minus", "cast"})
    CHECK(is_known_expr_type(t));
}

TEST_CASE("bad input: xz, bzip2, zstd files fail with one line naming the file and the format") {
  const std::string dir = lcm::test::temp_dir("reader");
  struct Case {
    const char* name;
    std::string magic;
  };
  const Case cases[] = {{"xz", std::string("\xFD"
                                           "7zXZ\0\0\x04",
                                           8)},
                        {"bzip2", "BZh91AY&SY"},
                        {"zstd", std::string("\x28\xB5\x2F\xFD\x04\x58", 6)}};
  for (const Case& c : cases) {
    const std::string path = dir + "/data_" + c.name + ".jsonl";  // the name does not say it
    write_text(path, c.magic + "garbage that is not JSON\n");
    SkipLog log(false, 0);
    const std::string err = lcm::test::error_of<DataError>([&] { RecordSource s(path, log); });
    CHECK(err == path + " is " + c.name + "-compressed; lcm reads gzip or plain JSON/JSONL");
    CHECK(lcm::test::error_of<DataError>([&] { check_input_format(path); }) == err);
    CHECK(total_events(log) == 0);
  }
  // plain JSON and gzip pass; a plain file starting with "BZh" but no block-size digit is text
  write_text(dir + "/plain.jsonl", record("a") + "\n");
  write_gz(dir + "/gz.jsonl", record("a") + "\n");
  CHECK_NOTHROW(check_input_format(dir + "/plain.jsonl"));
  CHECK_NOTHROW(check_input_format(dir + "/gz.jsonl"));
  const unsigned char bz_text[] = {'B', 'Z', 'h', 'x'};
  CHECK(unsupported_compression(bz_text, 4) == nullptr);
}

TEST_CASE("read_features: a repeated program name is one named skip, the first record wins") {
  const std::string dir = lcm::test::temp_dir("reader");
  const std::string two = "[" + kSchedule + "," + kSchedule + "]";
  std::string first = record("a", two),
              again = sub(record("a", two), "\"memory_size\":0.5", "\"memory_size\":9");
  // the first "b" is skipped (lt_2_schedules): its name is still taken
  write_text(dir + "/dups.jsonl", first + "\n" + record("b") + "\n" + again + "\n" +
                                      record("b", two) + "\n" + record("c", two) + "\n");
  PrepareOptions opt;
  opt.source = dir + "/dups.jsonl";
  opt.nb_workers = 2;
  SkipLog log(false, 0);
  SplitCounts counts;
  auto feats = read_features(opt, log, counts);
  REQUIRE(feats.size() == 2);
  CHECK(feats[0].name == "a");
  CHECK(feats[1].name == "c");
  CHECK(log.count("program", "duplicate_program") == 2);
  CHECK(log.count("program", "lt_2_schedules") == 1);
  CHECK(total_events(log) == 3);
  CHECK(counts.records_read == 5);
  CHECK(counts.programs_read == 5);
  CHECK(counts.programs_featurized == 2);
  std::vector<SkipEvent> dups;
  for (const auto& e : log.events())
    if (e.reason == "duplicate_program") dups.push_back(e);
  REQUIRE(dups.size() == 2);
  CHECK(dups[0].level == "program");
  CHECK(dups[0].program == "a");
  CHECK(dups[0].file == opt.source);
  CHECK(dups[0].line == 3);
  CHECK(dups[0].detail == "the name was already read at line 1; this record is skipped");
  CHECK(dups[1].program == "b");
  CHECK(dups[1].line == 4);
  // strict mode stops on it
  SkipLog strict(true, 0);
  SplitCounts c2;
  write_text(dir + "/dups2.jsonl", first + "\n" + first + "\n");
  opt.source = dir + "/dups2.jsonl";
  CHECK(lcm::test::contains(lcm::test::error_of<DataError>([&] { read_features(opt, strict, c2); }),
                            "duplicate_program"));
}

TEST_CASE(
    "JSON Lines whose first two lines are not records: both are counted skips, the rest is read") {
  // A new user's file: two header lines (or a cut record and a garbage line) before 60 records
  // was taken for a legacy container and every record was lost.
  std::string good;
  for (int i = 0; i < 60; ++i) good += record("p" + std::to_string(i)) + "\n";
  const std::string cut = record("cut").substr(0, 300);
  struct Case {
    std::string tag;
    std::string first, second;
    const char* reason1;
    const char* reason2;
  };
  const std::vector<Case> cases = {
      {"two_headers", R"({"note": "made by hand"})", R"({"note": "second header", "n": 60})",
       "not_a_program_record", "not_a_program_record"},
      {"header_obj_values", R"({"meta": {"version": 2}})", R"({"meta2": {"x": [1, 2]}})",
       "not_a_program_record", "not_a_program_record"},
      {"cut_then_garbage", cut, "garbage ### not json", "malformed_json", "malformed_json"},
      {"cut_then_header", cut, R"({"note": "x"})", "malformed_json", "not_a_program_record"},
      {"empty_then_array", "{}", "[]", "not_a_program_record", "not_an_object"},
      {"header_then_cut", R"({"note": "x"})", cut, "not_a_program_record", "malformed_json"},
  };
  std::string dir = lcm::test::temp_dir("reader");
  for (const Case& c : cases) {
    for (bool gz : {false, true}) {
      CAPTURE(c.tag);
      CAPTURE(gz);
      std::string path = dir + "/two_bad_" + c.tag + (gz ? ".jsonl.gz" : ".jsonl");
      std::string text = c.first + "\n" + c.second + "\n" + good;
      write_file(path, text, gz);
      SkipLog log(false, 0);
      bool jsonl = false;
      int64_t met = 0;
      auto progs = read_counting(path, log, jsonl, met);
      CHECK(jsonl);
      REQUIRE(progs.size() == 60);
      CHECK(progs[0].name == "p0");
      CHECK(progs[0].source_line == 3);
      CHECK(progs[59].name == "p59");
      CHECK(met == 62);
      CHECK(total_events(log) == 2);
      const auto ev = log.events();
      REQUIRE(ev.size() == 2);
      CHECK(ev[0].line == 1);
      CHECK(ev[0].reason == c.reason1);
      CHECK(ev[0].file == path);
      CHECK(ev[1].line == 2);
      CHECK(ev[1].reason == c.reason2);
    }
  }
}

TEST_CASE("legacy containers on one line are still legacy when a member is not a record") {
  const std::string a = record("a"), b = record("b");
  std::string dir = lcm::test::temp_dir("reader");
  // a leading non-record member (kept as one skip) and containers one per line
  write_text(dir + "/legacy_mixed.json",
             "{\"meta\": \"x\", \"a\": " + a + "}\n{\"b\": " + b + "}\n");
  SkipLog log(false, 0);
  bool jsonl = true;
  int64_t met = 0;
  auto progs = read_counting(dir + "/legacy_mixed.json", log, jsonl, met);
  CHECK_FALSE(jsonl);
  REQUIRE(progs.size() == 2);
  CHECK(progs[0].name == "a");
  CHECK(progs[1].name == "b");
  CHECK(total_events(log) == 1);
  CHECK(log.count("line", "not_an_object") == 1);
  // a pretty-printed legacy container whose records are on their own lines after '"name":' lines
  write_text(dir + "/legacy_after_colon.json", "{\n\"a\":\n" + a + ",\n\"b\":\n" + b + "\n}\n");
  SkipLog log2(false, 0);
  auto progs2 = read_counting(dir + "/legacy_after_colon.json", log2, jsonl, met);
  CHECK_FALSE(jsonl);
  REQUIRE(progs2.size() == 2);
  CHECK(total_events(log2) == 0);
}

TEST_CASE("a directory or a pipe given as a data, weights or config file is named as such") {
  using lcm::test::contains;
  using lcm::test::error_of;
  const std::string dir = lcm::test::temp_dir("reader");
  const std::string adir = dir + "/adir.jsonl.gz";  // a directory named like a data file
  fs::create_directories(adir);
  // every entry point a tool reaches for a data file says "is a directory", never "not gzip data"
  for (const std::string& m :
       {error_of<DataError>([&] { check_input_format(adir); }), error_of<DataError>([&] {
          SkipLog log(false, 0);
          RecordSource s(adir, log);
        }),
        error_of<DataError>([&] { source_info(adir); }),
        error_of<DataError>([&] { lcm::train::require_program_records(adir, "data.valid_file"); }),
        error_of<DataError>([&] {
          lcm::config::Config c;
          c.data.train_file = adir;
          c.data.valid_file = "";
          lcm::train::check_data_files(c);
        })}) {
    CAPTURE(m);
    CHECK(contains(m, adir + ": is a directory, not a data file"));
    CHECK_FALSE(contains(m, "gzip"));
  }
  // a pipe (what /dev/stdin or <(zcat f) is): not a regular file, and why only those are read
  const std::string fifo = dir + "/pipe.jsonl";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& m :
       {error_of<DataError>([&] { check_input_format(fifo); }), error_of<DataError>([&] {
          SkipLog log(false, 0);
          RecordSource s(fifo, log);
        }),
        error_of<DataError>([&] { source_info(fifo); })}) {
    CAPTURE(m);
    CHECK(contains(m, fifo + ": not a regular file"));
    CHECK(contains(m, "only from regular files"));
  }
  fs::remove(fifo);
  // eval.weights_path=<dir> and --config <dir>
  const std::string wdir = dir + "/weights.safetensors";
  fs::create_directories(wdir);
  const std::string w = error_of<std::runtime_error>(
      [&] { lcm::train::load_checkpoint(wdir, lcm::config::Config{}); });
  CHECK(contains(w, wdir + ": is a directory"));
  CHECK_FALSE(contains(w, "not found"));
  const std::string cdir = dir + "/conf.yaml";
  fs::create_directories(cdir);
  lcm::config::Config c;
  const std::string cm =
      error_of<lcm::config::ConfigError>([&] { lcm::config::apply_config_file(c, cdir); });
  CHECK(contains(cm, cdir + ": is a directory"));
  CHECK_FALSE(contains(cm, "not found"));
}

TEST_CASE("a missing initial_execution_time is named missing in the skip, not printed as nan") {
  const std::string two = "[" + kSchedule + "," + kSchedule + "]";
  const std::string missing = sub(record("nt", two), R"("initial_execution_time":2.0,)", "");
  const std::string null_time =
      sub(record("nl", two), R"("initial_execution_time":2.0)", R"("initial_execution_time":null)");
  const std::string negative =
      sub(record("ng", two), R"("initial_execution_time":2.0)", R"("initial_execution_time":-1)");
  SkipLog rlog(false, 0);
  auto progs =
      read_text(missing + "\n" + null_time + "\n" + negative + "\n", rlog, "no_initial_time");
  REQUIRE(progs.size() == 3);
  const std::vector<std::string> want = {"initial_execution_time missing",
                                         "initial_execution_time missing",
                                         "initial_execution_time is -1 ms (must be > 0)"};
  for (size_t i = 0; i < progs.size(); ++i) {
    CAPTURE(i);
    SkipLog log(false, 0);
    CHECK_FALSE(featurize(progs[i], FeatureOptions{}, log).has_value());
    CHECK(log.count("program", "bad_initial_time") == 1);
    REQUIRE(log.events().size() == 1);
    const std::string detail = log.events()[0].detail;
    CAPTURE(detail);
    CHECK(lcm::test::contains(detail, want[i]));
    CHECK_FALSE(lcm::test::contains(detail, "nan"));
  }
}

TEST_CASE("read_features: the reader's own skips print in line order with the parse skips") {
  // A legacy container whose first member is not a record (a parse skip, line 1), ten records,
  // then garbage after the container (a skip of the reader itself, line 2): the reader's skip
  // used to be logged at once, before the worker's skip of line 1 was replayed.
  std::string members = "\"bad\": 1";
  for (int i = 0; i < 10; ++i) members += ", \"p" + std::to_string(i) + "\": " + record("x");
  const std::string dir = lcm::test::temp_dir("reader");
  write_text(dir + "/order.json", "{" + members + "}\n[]\n");
  PrepareOptions opt;
  opt.source = dir + "/order.json";
  opt.nb_workers = 2;
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    SkipLog log(false, 0);
    SplitCounts counts;
    read_features(opt, log, counts);
    CHECK(counts.records_read == 11);
    CHECK(log.count("line", "not_an_object") == 1);
    CHECK(log.count("line", "malformed_json") == 1);
    std::vector<int64_t> lines;
    for (const auto& e : log.events())
      if (e.level == "line") lines.push_back(e.line);
    CHECK(lines == std::vector<int64_t>{1, 2});
  }
  // strict mode still stops on the reader's skip (now replayed in order by the main thread)
  write_text(dir + "/order2.json",
             "{\"p\": " + record("x", "[" + kSchedule + "," + kSchedule + "]") + "}\n[]\n");
  opt.source = dir + "/order2.json";
  SkipLog strict(true, 0);
  SplitCounts c2;
  CHECK(lcm::test::contains(lcm::test::error_of<DataError>([&] { read_features(opt, strict, c2); }),
                            "malformed_json"));
}
