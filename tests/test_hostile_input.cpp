// Hostile records through the reader (parse_program), featurize, the prepare pipeline
// (read_features, prepare_split) and the lcm-prepare tool: deep nesting, deep or cyclic loop
// trees, repeated loops, labels float32 cannot hold, names that are not valid UTF-8 or hold
// control bytes, duplicate keys. Each gives one named, counted skip (or one clear error), never
// a crash or a silently different result. Big inputs are generated here, never committed.
#include <doctest/doctest.h>
#include <xmmintrin.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;

namespace {

/// Replaces the first occurrence of `from` (which must occur) by `to`.
std::string sub(std::string s, const std::string& from, const std::string& to) {
  size_t k = s.find(from);
  REQUIRE_MESSAGE(k != std::string::npos, "test template lacks: " << from);
  return s.replace(k, from.size(), to);
}

const std::string kTree =
    R"("tree_structure":{"roots":[{"loop_name":"i0","computations_list":[],"child_list":[)"
    R"({"loop_name":"i1","computations_list":["comp00"],"child_list":[]}]}]},)";

/// One schedule of the record below, its times `times`.
std::string schedule(const std::string& times = "[2.0,2.5]", const std::string& tree = kTree) {
  return R"({"comp00":{"shiftings":null,"tiling":{},"unrolling_factor":null,)"
         R"("parallelized_dim":null,"transformations_list":[]},"fusions":null,)" +
         tree + R"("sched_str":"","execution_times":)" + times + "}";
}

const std::string kIterators =
    R"("iterators":{"i0":{"lower_bound":0,"upper_bound":10,"parent_iterator":null,)"
    R"("child_iterators":["i1"],"computations_list":[]},"i1":{"lower_bound":0,"upper_bound":20,)"
    R"("parent_iterator":"i0","child_iterators":[],"computations_list":["comp00"]}},)";

const std::string kExpr = R"({"expr_type":"add","children":[{"expr_type":"access","children":[]},)"
                          R"({"expr_type":"value","children":[]}]})";

/// A small valid record (two loops, one computation, two schedules).
std::string record(const std::string& name, const std::string& iterators = kIterators,
                   const std::string& expr = kExpr,
                   const std::string& scheds = "[" + schedule() + "," + schedule("[1.0]") + "]",
                   const std::string& initial = "2.0") {
  return R"({"program_name":")" + name + R"(","program_annotation":{)" + iterators +
         R"("computations":{"comp00":{"absolute_order":1,"iterators":["i0","i1"],)"
         R"("comp_is_reduction":false,"write_access_relation":)"
         R"("{ comp00[i0, i1] -> buf00[i0, i1] }","write_buffer_id":1,"data_type":"float32",)"
         R"("accesses":[{"access_is_reduction":false,"buffer_id":0,)"
         R"("access_matrix":[[1,0,0],[0,1,0]]}],"expression_representation":)" +
         expr + R"(}}},"initial_execution_time":)" + initial + R"(,"schedules_list":)" + scheds +
         "}";
}

/// An expression nested `depth` levels deep (model-spec §3.7 allows 66 nodes).
std::string deep_expr(int depth) {
  std::string s;
  s.reserve(size_t(depth) * 40);
  for (int i = 0; i < depth; ++i) s += R"({"expr_type":"add","children":[)";
  s += R"({"expr_type":"value","children":[]})";
  for (int i = 0; i < depth; ++i) s += "]}";
  return s;
}

/// `n` iterators chained i0 → i1 → ... (each the only child of the one before).
std::string chained_iterators(int n) {
  std::string s = "\"iterators\":{";
  for (int i = 0; i < n; ++i) {
    if (i) s += ",";
    s += "\"i" + std::to_string(i) +
         "\":{\"lower_bound\":0,\"upper_bound\":10,\"parent_iterator\":" +
         (i ? "\"i" + std::to_string(i - 1) + "\"" : std::string("null")) +
         ",\"child_iterators\":[" + (i + 1 < n ? "\"i" + std::to_string(i + 1) + "\"" : "") +
         "],\"computations_list\":[" + (i == 1 ? "\"comp00\"" : "") + "]}";
  }
  return s + "},";
}

std::optional<Program> parse(const std::string& json, SkipLog& log, const std::string& hint = "") {
  RawRecord r;
  r.json = json;
  r.file = "hostile.jsonl";
  r.line = 1;
  r.name_hint = hint;
  return parse_program(r, log);
}

int64_t total_events(const SkipLog& log) {
  int64_t n = 0;
  for (auto& [k, v] : log.counts()) n += v;
  return n;
}

/// The detail of the only event in `log` (which must hold exactly one).
SkipEvent only_event(const SkipLog& log) {
  REQUIRE(total_events(log) == 1);
  auto ev = log.events();
  REQUIRE(ev.size() == 1);
  return ev[0];
}

/// The only event of parsing `json` (which must be refused): a program skip named `reason`.
SkipEvent only_program_skip(const std::string& json, const std::string& reason) {
  SkipLog log(false, 0);
  CHECK_FALSE(parse(json, log));
  const SkipEvent e = only_event(log);
  CHECK(e.level == "program");
  CHECK(e.reason == reason);
  return e;
}

std::string write_jsonl(const std::string& tag, const std::vector<std::string>& records) {
  const std::string path = lcm::test::temp_dir("hostile") + "/" + tag + ".jsonl";
  std::ofstream f(path, std::ios::binary);
  for (const auto& r : records) f << r << "\n";
  REQUIRE(f.good());
  return path;
}

}  // namespace

TEST_CASE("the record template is a kept program (the hostile cases below differ by one thing)") {
  SkipLog log(false, 0);
  auto p = parse(record("ok"), log);
  REQUIRE(p);
  CHECK(total_events(log) == 0);
  auto f = featurize(*p, FeatureOptions{}, log);
  REQUIRE(f);
  CHECK(f->n_schedules() == 2);
  CHECK(total_events(log) == 0);
}

TEST_CASE("hostile: an expression 100,000 deep is one bad_field skip with a short path") {
  SkipLog log(false, 0);
  CHECK_FALSE(parse(record("deep", kIterators, deep_expr(100000)), log));
  const SkipEvent e = only_event(log);
  CHECK(e.level == "program");
  CHECK(e.reason == "bad_field");
  CHECK(e.detail.find("expression nested too deeply") != std::string::npos);
  CHECK(e.detail.find("expression_representation.children[0]\u00d7257") != std::string::npos);
  CHECK(e.detail.size() < 200);
}

TEST_CASE("hostile: deep records through the prepare pipeline are counted skips, not a crash") {
  // The skipped record is read again for its schedule count (count_schedules): that parse must
  // not recurse either. 100,000 deep expression; 200,000 deep unknown field in a record skipped
  // for another reason (no program_annotation); the same field in a kept record.
  std::string deep_field = "\"zz\":" + std::string(200000, '[') + std::string(200000, ']') + ",";
  std::string skipped_for_other =
      sub(record("other"), "\"program_annotation\":", deep_field + "\"x\":");
  std::string kept_with_field =
      sub(record("kept2"), "\"initial_execution_time\"", deep_field + "\"initial_execution_time\"");
  const std::string path =
      write_jsonl("deep", {record("deep", kIterators, deep_expr(100000)), skipped_for_other,
                           record("kept1"), kept_with_field});
  PrepareOptions opt;
  opt.source = path;
  opt.nb_workers = 1;
  opt.print_skips = 0;
  opt.batching.min_functions_per_footprint = 0;
  PreparedSplit s = prepare_split(opt);
  CHECK(s.dataset.programs.size() == 2);
  CHECK(s.counts.records_read == 4);
  CHECK(s.counts.skips["program/bad_field"] == 1);
  CHECK(s.counts.skips["program/missing_program_annotation"] == 1);
  CHECK(s.counts.skipped_records_counted == 2);  // both skipped records' schedules are counted
  CHECK(s.counts.schedules_read == 8);

  // Through the tool, one worker thread.
  const std::string dir = lcm::test::temp_dir("hostile_tool");
  auto r = lcm::test::run_tool(dir, "lcm-prepare",
                               "experiment.base_path=" + dir + " data.train_file=" + path +
                                   " data.valid_file= data.nb_workers=1 "
                                   "data.min_functions_per_footprint=0");
  CHECK(r.code == 0);
  CHECK(r.err.find("skip program (bad_field)") != std::string::npos);
  CHECK(r.err.find("skip program (missing_program_annotation)") != std::string::npos);
  CHECK(r.out.find("records    4 read, 2 parsed") != std::string::npos);
}

TEST_CASE("hostile: 200,000 iterators chained parent to child is one bad_tree skip") {
  const std::string json = record("chain", chained_iterators(200000), kExpr,
                                  "[" + schedule("[2.0]", "") + "," + schedule("[1.0]", "") + "]");
  SkipLog log(false, 0);
  CHECK_FALSE(parse(json, log));
  const SkipEvent e = only_event(log);
  CHECK(e.reason == "bad_tree");
  CHECK(e.detail.find("deeper than 64") != std::string::npos);
  // tree_from_iterators on such a Program (built without the reader) throws instead of recursing.
  Program p;
  p.iterators.resize(200000);
  for (size_t i = 0; i < p.iterators.size(); ++i) {
    p.iterators[i].name = "i" + std::to_string(i);
    if (i) p.iterators[i].parent = p.iterators[i - 1].name;
    if (i + 1 < p.iterators.size()) p.iterators[i].children = {"i" + std::to_string(i + 1)};
  }
  CHECK_THROWS_AS(tree_from_iterators(p), DataError);
}

TEST_CASE("hostile: iterator links that are not a loop forest are bad_tree, with the reason") {
  const std::string no_tree = "[" + schedule("[2.0]", "") + "," + schedule("[1.0]", "") + "]";
  struct Case {
    std::string iterators, why;
  };
  const std::vector<Case> cases = {
      {sub(kIterators, R"("parent_iterator":null)", R"("parent_iterator":"i0")"),
       "iterator i0 is its own parent_iterator"},
      {sub(sub(kIterators, R"("parent_iterator":null)", R"("parent_iterator":"i1")"),
           R"("child_iterators":[],)", R"("child_iterators":["i0"],)"),
       "iterators i0, i1 are not under any root loop"},
      {sub(kIterators, R"("child_iterators":["i1"])", R"("child_iterators":[])"),
       "the child_iterators of i0 do not list it"},
      {sub(kIterators, R"("child_iterators":["i1"])", R"("child_iterators":["i1","i1"])"),
       "lists child i1 twice"},
      {sub(kIterators, R"("child_iterators":["i1"])", R"("child_iterators":["i1","i7"])"),
       "lists child i7, which is not an iterator"},
      {sub(sub(kIterators, R"("parent_iterator":"i0")", R"("parent_iterator":"i9")"),
           R"("child_iterators":["i1"])", R"("child_iterators":[])"),
       "iterator i1's parent_iterator i9 is not an iterator"},
      {sub(kIterators, R"(["comp00"])", R"(["comp00","comp77"])"),
       "lists computation comp77, which is not a computation"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    const SkipEvent e = only_program_skip(record("links", c.iterators, kExpr, no_tree), "bad_tree");
    CHECK(e.program == "links");
    CHECK(e.detail.find(c.why) != std::string::npos);
  }
  // The same links under a schedule 0 tree_structure are not what the tree is built from.
  SkipLog log(false, 0);
  CHECK(parse(record("links", cases[0].iterators), log));
}

TEST_CASE("hostile: a loop repeated in tree_structure is bad_tree (program for schedule 0)") {
  const std::string repeated = sub(kTree, R"("child_list":[]})",
                                   R"("child_list":[{"loop_name":"i1","computations_list":[],)"
                                   R"("child_list":[]}]})");
  {
    SkipLog log(false, 0);
    CHECK_FALSE(parse(record("rep", kIterators, kExpr,
                             "[" + schedule("[2.0]", repeated) + "," + schedule() + "]"),
                      log));
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_tree");
    CHECK(e.detail.find("loop i1 appears twice") != std::string::npos);
    CHECK(e.detail.find("nested under i1") != std::string::npos);
  }
  {  // a later schedule's own tree: that schedule only
    SkipLog log(false, 0);
    auto p =
        parse(record("rep", kIterators, kExpr,
                     "[" + schedule() + "," + schedule() + "," + schedule("[1.0]", repeated) + "]"),
              log);
    REQUIRE(p);
    CHECK(p->schedules[2].parse_problem == "bad_tree");
    auto f = featurize(*p, FeatureOptions{}, log);
    REQUIRE(f);
    CHECK(f->n_schedules() == 2);
    CHECK(log.count("schedule", "bad_tree") == 1);
  }
  {  // a computation in two loops
    SkipLog log(false, 0);
    const std::string twice =
        sub(kTree, R"("computations_list":[])", R"("computations_list":["comp00"])");
    CHECK_FALSE(parse(
        record("twice", kIterators, kExpr, "[" + schedule("[2.0]", twice) + "," + schedule() + "]"),
        log));
    CHECK(only_event(log).detail.find("computation comp00 is listed twice") != std::string::npos);
  }
  {  // no roots
    SkipLog log(false, 0);
    CHECK_FALSE(parse(record("none", kIterators, kExpr,
                             "[" + schedule("[2.0]", R"("tree_structure":{"roots":[]},)") + "," +
                                 schedule() + "]"),
                      log));
    CHECK(only_event(log).detail.find("no roots") != std::string::npos);
  }
}

TEST_CASE("hostile: labels and times float32 cannot hold are named skips") {
  auto run = [](const std::string& json, SkipLog& log) {
    auto p = parse(json, log);
    REQUIRE(p);
    return featurize(*p, FeatureOptions{}, log);
  };
  {  // initial_execution_time 1e308: every speedup overflows; the program goes, by name
    SkipLog log(false, 0);
    CHECK_FALSE(run(record("huge", kIterators, kExpr,
                           "[" + schedule("[0.5]") + "," + schedule("[1e300]") + "]", "1e308"),
                    log));
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_initial_time");
    CHECK(e.detail == "initial_execution_time is 1e+308 ms (overflows float32)");
  }
  {  // a finite speedup beyond float32: short value, not 300 digits
    SkipLog log(false, 0);
    auto f =
        run(record("big", kIterators, kExpr,
                   "[" + schedule("[1e-10]") + "," + schedule() + "," + schedule() + "]", "1e38"),
            log);
    REQUIRE(f);
    CHECK(f->n_schedules() == 2);
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "speedup_not_finite");
    CHECK(e.detail ==
          "initial_execution_time / min(execution_times) = 1e+38 / 1e-10 = 1e+48 overflows "
          "float32");
    for (float s : f->speedup) CHECK(std::isfinite(s));
  }
  {  // a time that overflows float32
    SkipLog log(false, 0);
    auto f = run(record("times", kIterators, kExpr,
                        "[" + schedule() + "," + schedule("[1e39]") + "," + schedule() + "]"),
                 log);
    REQUIRE(f);
    CHECK(f->n_schedules() == 2);
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_execution_time");
    CHECK(e.detail == "execution time 1e+39 ms overflows float32");
  }
  {  // a least time float32 turns into 0 (the speedup itself stays in range)
    SkipLog log(false, 0);
    auto f =
        run(record("tiny", kIterators, kExpr,
                   "[" + schedule() + "," + schedule("[1e-50]") + "," + schedule() + "]", "1e-37"),
            log);
    REQUIRE(f);
    CHECK(f->n_schedules() == 2);
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_execution_time");
    CHECK(
        e.detail ==
        "execution time 1e-50 ms underflows float32 (below its smallest normal value 1.17549e-38)");
    for (double t : f->min_time_ms) CHECK(float(t) > 0);
  }
  // a subnormal least time (1e-40 ms: float32 holds it only as a subnormal, 0 under flush-to-zero)
  // is skipped whatever the floating-point mode of the thread that featurises
  for (const bool flush_to_zero : {false, true}) {
    CAPTURE(flush_to_zero);
    const unsigned saved = _mm_getcsr();
    if (flush_to_zero) _mm_setcsr(saved | 0x8040);  // FTZ (bit 15) and DAZ (bit 6)
    SkipLog log(false, 0);
    auto f = run(
        record("subnormal", kIterators, kExpr,
               "[" + schedule() + "," + schedule("[1e-40]") + "," + schedule() + "]", "0.000155"),
        log);
    _mm_setcsr(saved);
    REQUIRE(f);
    CHECK(f->n_schedules() == 2);
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_execution_time");
    CHECK(e.detail.find("1e-40 ms underflows float32") != std::string::npos);
  }
}

TEST_CASE("hostile: names that are not valid UTF-8 or hold control bytes are bad_name") {
  struct Case {
    std::string json, program, why;
  };
  const std::vector<Case> cases = {
      {record("ab\xff\xfe"), "ab\\xff\\xfe", "program name: invalid UTF-8 byte \\xff at byte 2"},
      {record("a\\u0000b"), "a\\x00b", "program name: control character \\x00 at byte 1"},
      {record("tab\\tname"), "tab\\x09name", "control character \\x09 at byte 3"},
      {record("cut\xc3"), "cut\\xc3", "UTF-8 sequence cut short"},
      {record("over\xc0\xaf"), "over\\xc0\\xaf", "invalid UTF-8 byte \\xc0 at byte 4"},
      {record("sur\xed\xa0\x80"), "sur\\xed\\xa0\\x80", "invalid UTF-8 byte \\xa0 at byte 4"},
      {sub(record("it"), "\"i1\":{", "\"i\xff\":{"), "it", "iterators.i\\xff: iterator name"},
      {sub(record("co"), "\"comp00\":{\"absolute_order\"", "\"c\\u0001\":{\"absolute_order\""),
       "co", "computation name: control character \\x01 at byte 1"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    const SkipEvent e = only_program_skip(c.json, "bad_name");
    CHECK(e.program == c.program);
    CHECK(e.detail.find(c.why) != std::string::npos);
  }
  {  // valid UTF-8 is a name like any other
    SkipLog log(false, 0);
    auto p = parse(record("caf\xc3\xa9_\xe2\x82\xac_\xf0\x9f\x98\x80"), log);
    REQUIRE(p);
    CHECK(total_events(log) == 0);
  }
  {  // a legacy container's key is the name: checked the same way
    SkipLog log(false, 0);
    std::string json = sub(record("x"), "\"program_name\":\"x\",", "");
    CHECK_FALSE(parse(json, log, "legacy\x01"));
    CHECK(only_event(log).reason == "bad_name");
  }
  {  // a sched_str with a newline drops that schedule only
    SkipLog log(false, 0);
    std::string s = sub(schedule(), "\"sched_str\":\"\"", "\"sched_str\":\"I(L0)\\nX\"");
    auto p = parse(
        record("ss", kIterators, kExpr, "[" + schedule() + "," + schedule() + "," + s + "]"), log);
    REQUIRE(p);
    CHECK(p->schedules[2].parse_problem == "bad_sched_str");
    CHECK(p->schedules[2].parse_detail.find("control character \\x0a at byte 5") !=
          std::string::npos);
  }
}

TEST_CASE("hostile: a key repeated in one object is a duplicate_key skip with its path") {
  struct Case {
    std::string json, path;
  };
  const std::string sched_dup =
      sub(schedule(), "\"fusions\":null,", "\"fusions\":null,\"comp00\":{\"tiling\":{}},");
  std::string wide = "{";  // 20 members: the sorted path of duplicate_member
  for (int i = 0; i < 20; ++i)
    wide += "\"k" + std::to_string(i % 19) + "\":" + std::to_string(i) + ",";
  wide.back() = '}';
  const std::vector<Case> cases = {
      {sub(record("d1"), "\"initial_execution_time\":2.0",
           "\"initial_execution_time\":2.0,\"initial_execution_time\":946"),
       ".initial_execution_time"},
      {sub(record("d2"), "\"program_name\":\"d2\",",
           "\"program_name\":\"d2\",\"program_name\":\"e\","),
       ".program_name"},
      {record("d3", kIterators, kExpr,
              "[" + schedule() + "," + schedule() + "," + schedule() + "," + sched_dup + "]"),
       ".schedules_list[3].comp00"},
      {sub(record("d4"), "\"program_annotation\":{", "\"program_annotation\":{\"w\":" + wide + ","),
       ".program_annotation.w.k0"},
      {sub(record("d5"), "\"i1\":{", "\"i0\":{"), ".program_annotation.iterators.i0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    const SkipEvent e = only_program_skip(c.json, "duplicate_key");
    CHECK(e.detail.find("key " + c.path + " appears twice") != std::string::npos);
  }
}

TEST_CASE("hostile: numbers in messages are shown by value") {
  struct Case {
    std::string value, shown;
  };
  for (const Case& c : std::vector<Case>{{"1180591620717411303424", "got 1.18059162071741e+21"},
                                         {"5.5", "got 5.5"},
                                         {"1e23", "got 1e+23"}}) {
    CAPTURE(c.value);
    SkipLog log(false, 0);
    CHECK_FALSE(
        parse(sub(record("n"), "\"write_buffer_id\":1", "\"write_buffer_id\":" + c.value), log));
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_field");
    CHECK(e.detail.find("expected an integer, " + c.shown) != std::string::npos);
  }
  SkipLog log(false, 0);
  CHECK_FALSE(
      parse(sub(record("n"), "\"write_buffer_id\":1", "\"write_buffer_id\":3000000000"), log));
  CHECK(only_event(log).detail.find("integer 3000000000 out of the 32-bit range") !=
        std::string::npos);
}

TEST_CASE("hostile: numeric strings with a NUL inside or in C's hexadecimal form are bad_field") {
  // strtod would stop at the NUL ("4\u0000x" read as 4) and accepts 0x10 / 0x1p-12, which
  // Python's float() refuses: both would be a silently different value
  for (const std::string value : {R"("4\u0000x")", R"("0x10")", R"("0X1p+2")"}) {
    CAPTURE(value);
    SkipLog log(false, 0);
    CHECK_FALSE(
        parse(sub(record("n"), "\"write_buffer_id\":1", "\"write_buffer_id\":" + value), log));
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_field");
    CHECK(e.detail.find("expected an integer") != std::string::npos);
  }
  for (const std::string initial : {R"("2.0\u0000x")", R"("0x1p-12")"}) {
    CAPTURE(initial);
    SkipLog log(false, 0);
    CHECK_FALSE(parse(record("n", kIterators, kExpr, "[" + schedule() + "]", initial), log));
    const SkipEvent e = only_event(log);
    CHECK(e.reason == "bad_field");
    CHECK(e.detail.find("expected a number") != std::string::npos);
  }
  SkipLog log(false, 0);  // the plain numeric strings stay accepted
  CHECK(parse(sub(record("n"), "\"write_buffer_id\":1", "\"write_buffer_id\":\" 1 \""), log));
  CHECK(parse(record("n", kIterators, kExpr, "[" + schedule() + "]", "\"2.5e-1\""), log));
  CHECK(log.counts().empty());
}

TEST_CASE(
    "the summary names data.min_functions_per_footprint=0 when the footprint rule drops many") {
  // Two programs share a footprint; a third (three loops) is alone in its group.
  const std::string three_loops =
      sub(kIterators, "}},",
          R"(},"i2":{"lower_bound":0,"upper_bound":5,"parent_iterator":null,)"
          R"("child_iterators":[],"computations_list":[]}},)");
  const std::string path =
      write_jsonl("footprint", {record("a"), record("b"), record("c", three_loops)});
  PrepareOptions opt;
  opt.source = path;
  opt.nb_workers = 1;
  opt.print_skips = 0;
  opt.batching.min_functions_per_footprint = 2;  // the reference preset's rule (default 0)
  PreparedSplit s = prepare_split(opt);
  CHECK(s.dataset.programs.size() == 2);
  const std::string text = prepare_summary(s, opt);
  CHECK(text.find("the footprint rule dropped 1 of 3 programs (33%") != std::string::npos);
  CHECK(text.find("data.min_functions_per_footprint=0 keeps them") != std::string::npos);
  // Below the share: no note.
  const std::string path2 = write_jsonl(
      "footprint2", {record("a"), record("b"), record("d"), record("e"), record("c", three_loops)});
  opt.source = path2;
  PreparedSplit s2 = prepare_split(opt);
  CHECK(prepare_summary(s2, opt).find("keeps them") == std::string::npos);
  // Everything dropped: the error says so.
  opt.source = write_jsonl("footprint3", {record("a"), record("c", three_loops)});
  try {
    prepare_split(opt);
    FAIL("expected no program kept");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("data.min_functions_per_footprint=0 keeps them") !=
          std::string::npos);
  }
}
