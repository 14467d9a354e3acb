// Tests of the schedule forms parse_program reads (docs/data-format.md "Schedule forms", "Times"):
// the schedule-level typed transformations_list (every type, every named skip), the loop-level
// base (fixed and detected per file), per-computation entries of unknown fields only, times in
// every shape (list, number, numeric string, machine-keyed object with and without data.machine),
// data.schedule_source forcing one form, and the cross-check of two forms (report and skip).
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/reader.hpp"
#include "data/schedule_forms.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;

namespace {

/// A program of two computations in one nest: comp00 in i0 → i1, comp01 in i0 → i2 (depth 2
/// each), with the schedule list `scheds` and initial time `initial`.
std::string program(const std::string& scheds, const std::string& initial = "4.0") {
  return R"({"program_name":"p","program_annotation":{"memory_size":0.5,"iterators":{)"
         R"("i0":{"lower_bound":0,"upper_bound":64,"parent_iterator":null,"child_iterators":["i1","i2"],"computations_list":[]},)"
         R"("i1":{"lower_bound":0,"upper_bound":64,"parent_iterator":"i0","child_iterators":[],"computations_list":["comp00"]},)"
         R"("i2":{"lower_bound":0,"upper_bound":64,"parent_iterator":"i0","child_iterators":[],"computations_list":["comp01"]}},)"
         R"("computations":{)"
         R"("comp00":{"absolute_order":1,"iterators":["i0","i1"],"comp_is_reduction":false,)"
         R"("write_access_relation":"{ comp00[i0, i1] -> buf00[i0, i1] }","write_buffer_id":1,)"
         R"("data_type":"float32","accesses":[{"access_is_reduction":false,"buffer_id":0,)"
         R"("access_matrix":[[1,0,0],[0,1,0]]}],"expression_representation":{"expr_type":"access","children":[]}},)"
         R"("comp01":{"absolute_order":2,"iterators":["i0","i2"],"comp_is_reduction":false,)"
         R"("write_access_relation":"{ comp01[i0, i2] -> buf01[i0, i2] }","write_buffer_id":2,)"
         R"("data_type":"float32","accesses":[{"access_is_reduction":false,"buffer_id":1,)"
         R"("access_matrix":[[1,0,0],[0,1,0]]}],"expression_representation":{"expr_type":"access","children":[]}}}},)"
         R"("initial_execution_time":)" +
         initial + R"(,"schedules_list":)" + scheds + "}";
}

/// A schedule of the typed form: `entries` is the inside of its transformations_list.
std::string typed(const std::string& entries, const std::string& times = "[1.0,1.5]") {
  return R"({"transformations_list":[)" + entries + R"(],"execution_times":)" + times + "}";
}

const std::string kUntransformed = typed("");

/// Parses `json` as one JSONL record.
std::optional<Program> parse(const std::string& json, SkipLog& log, const ReadOptions& opt = {}) {
  RawRecord rec;
  rec.json = json;
  rec.file = "forms.jsonl";
  rec.line = 1;
  return parse_program(rec, log, opt);
}

/// The schedule at `index` of a program with kUntransformed then the schedule `sched`.
Schedule second(const std::string& sched, const ReadOptions& opt = {}) {
  SkipLog log(false, 0);
  std::optional<Program> p = parse(program("[" + kUntransformed + "," + sched + "]"), log, opt);
  REQUIRE(p);
  REQUIRE(p->schedules.size() == 2);
  return p->schedules[1];
}

std::array<int64_t, 16> tag(std::initializer_list<int64_t> head) {
  std::array<int64_t, 16> t{};
  size_t i = 0;
  for (int64_t v : head) t[i++] = v;
  return t;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = lcm::test::temp_dir("schedule_forms") + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
  return path;
}

}  // namespace

TEST_CASE("typed transformations_list: every type becomes the normalised schedule") {
  const Schedule s = second(typed(
      R"({"type":"interchange","loop_levels":[0,1],"parameters":[],"computations":["comp00"]},)"
      R"({"type":"reversal","loop_levels":[1],"parameters":[]},)"
      R"({"type":"skewing","loop_levels":[0,1],"parameters":[1,1,0,1],"comps":["comp01"]},)"
      R"({"type":"tiling","loop_levels":[0,1],"parameters":[32,16]},)"
      R"({"type":"unrolling","loop_levels":[1],"parameters":[4]},)"
      R"({"type":"parallelization","loop_levels":[0],"parameters":[]},)"
      R"({"type":"shifting","loop_levels":[1],"parameters":[2],"computations":["comp01"]},)"
      R"({"type":"fusion","loop_levels":[0],"parameters":[]})"));
  CHECK(s.parse_problem == "");
  REQUIRE(s.comps.size() == 2);
  const CompSchedule& a = s.comps[0];
  const CompSchedule& b = s.comps[1];
  REQUIRE(a.transformations.size() == 2);
  CHECK(a.transformations[0] == tag({1, 0, 1}));
  CHECK(a.transformations[1] == tag({2, 0, 0, 1}));
  REQUIRE(b.transformations.size() == 2);
  CHECK(b.transformations[0] == tag({2, 0, 0, 1}));
  CHECK(b.transformations[1] == tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1}));
  CHECK(a.tiling_dims == std::vector<std::string>{"i0", "i1"});
  CHECK(b.tiling_dims == std::vector<std::string>{"i0", "i2"});
  CHECK(a.tiling_factors == std::vector<int64_t>{32, 16});
  CHECK(a.unrolling_factor == 4);
  CHECK(b.unrolling_factor == 4);
  CHECK(a.parallelized_dim == "i0");
  CHECK(b.parallelized_dim == "i0");
  CHECK(a.shiftings.empty());
  REQUIRE(b.shiftings.size() == 1);
  CHECK(b.shiftings[0] == std::pair<std::string, int64_t>{"i2", 2});
  REQUIRE(s.fusions.size() == 1);
  CHECK(s.fusions[0].comp_a == "comp00");
  CHECK(s.fusions[0].comp_b == "comp01");
  CHECK(s.fusions[0].level == 0);
  CHECK(s.execution_times == std::vector<double>{1.0, 1.5});
}

TEST_CASE("typed transformations_list: what lcm cannot read is a named schedule skip") {
  struct Case {
    std::string entry, reason, in_detail;
  };
  const Case cases[] = {
      {R"({"type":"vectorization","loop_levels":[1],"parameters":[8]})",
       "unknown_transformation_type", "\"vectorization\""},
      {R"({"type":"parallelization","loop_levels":[2],"parameters":[]})", "bad_loop_level",
       "loop level 2 is beyond the depth of every computation"},
      {R"({"type":"parallelization","loop_levels":[1],"computations":["comp09"]})",
       "unknown_computation", "comp09"},
      {R"({"type":"interchange","loop_levels":[1],"parameters":[]})", "bad_transformation_entry",
       "needs 2 loop level(s)"},
      {R"({"type":"skewing","loop_levels":[0,1],"parameters":[1,1]})", "bad_transformation_entry",
       "skewing needs"},
      {R"({"type":"tiling","loop_levels":[0,1],"parameters":[32,0]})", "bad_tile_factor",
       "not positive"},
      {R"({"type":"unrolling","loop_levels":[0],"parameters":[4],"comps":["comp00"]})",
       "bad_loop_level", "not the innermost loop of comp00"},
      {R"({"type":"unrolling","loop_levels":[1],"parameters":[]})", "bad_transformation_entry",
       "needs one parameter"},
      {R"({"type":"tiling","loop_levels":[0],"parameters":[8],"factor":2})",
       "bad_transformation_entry", "unknown key \"factor\""},
      {R"({"loop_levels":[0]})", "bad_transformation_entry", "no type"},
      {R"([1,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0])", "bad_transformation_entry",
       "expected a {type, loop_levels, parameters} object"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.entry);
    const Schedule s = second(typed(c.entry));
    CHECK(s.parse_problem == c.reason);
    CHECK(lcm::test::contains(s.parse_detail, c.in_detail));
    CHECK(lcm::test::contains(s.parse_detail, "transformations_list[0]"));
  }
  // A fusion naming no computation is only unambiguous with two computations: here it is.
  CHECK(second(typed(R"({"type":"fusion","loop_levels":[1]})")).parse_problem == "");
}

TEST_CASE("typed loop levels: 1-based levels read with data.loop_level_base=1") {
  ReadOptions one;
  one.loop_level_base = 1;
  const Schedule s = second(typed(R"({"type":"parallelization","loop_levels":[2]},)"
                                  R"({"type":"interchange","loop_levels":[1,2]})"),
                            one);
  CHECK(s.parse_problem == "");
  CHECK(s.comps[0].parallelized_dim == "i1");
  CHECK(s.comps[1].parallelized_dim == "i2");
  CHECK(s.comps[0].transformations.at(0) == tag({1, 0, 1}));
  const Schedule zero = second(typed(R"({"type":"parallelization","loop_levels":[0]})"), one);
  CHECK(zero.parse_problem == "bad_loop_level");
  CHECK(lcm::test::contains(zero.parse_detail, "below 1"));
}

TEST_CASE("typed loop levels: the base is detected per file, or assumed, and said") {
  const std::string at_depth = typed(R"({"type":"parallelization","loop_levels":[2]})");
  const std::string at_zero = typed(R"({"type":"parallelization","loop_levels":[0]})");
  const std::string neither = typed(R"({"type":"parallelization","loop_levels":[1]})");
  auto file = [&](const std::string& name, const std::string& sched) {
    return write_temp(name, program("[" + kUntransformed + "," + sched + "]") + "\n");
  };
  const ReadOptions opt;
  LoopLevelBaseChoice c =
      choose_loop_level_base(file("one.jsonl", at_depth), LoopLevelBase::Auto, opt);
  CHECK(c.base == 1);
  CHECK(c.at_depth == 1);
  CHECK(lcm::test::contains(c.text, "1-based (detected"));
  c = choose_loop_level_base(file("zero.jsonl", at_zero), LoopLevelBase::Auto, opt);
  CHECK(c.base == 0);
  CHECK(lcm::test::contains(c.text, "0-based (detected"));
  c = choose_loop_level_base(file("neither.jsonl", neither), LoopLevelBase::Auto, opt);
  CHECK(c.base == 0);
  CHECK(lcm::test::contains(c.text, "assumed"));
  c = choose_loop_level_base(file("fixed.jsonl", at_zero), LoopLevelBase::One, opt);
  CHECK(c.base == 1);
  CHECK(lcm::test::contains(c.text, "data.loop_level_base=1"));
  // No typed list at all: nothing to say.
  c = choose_loop_level_base(
      write_temp("none.jsonl", program(R"([{"execution_times":[1.0]}])") + "\n"),
      LoopLevelBase::Auto, opt);
  CHECK(c.text.empty());
  const std::string both = write_temp(
      "both.jsonl", program("[" + kUntransformed + "," + at_depth + "," + at_zero + "]") + "\n");
  CHECK(lcm::test::contains(
      lcm::test::error_of([&] { choose_loop_level_base(both, LoopLevelBase::Auto, opt); }),
      "set data.loop_level_base=0 or 1"));
}

TEST_CASE("a computation entry of unknown fields only is never read as untransformed") {
  const Schedule s =
      second(R"({"comp00":{"transformations":[{"type":"interchange"}]},"execution_times":[1.0]})");
  CHECK(s.parse_problem == "unknown_schedule_fields");
  CHECK(lcm::test::contains(s.parse_detail, "comp00 holds only fields lcm does not read"));
  CHECK(lcm::test::contains(s.parse_detail, "transformations"));
  // An empty entry says "not transformed"; known and unknown fields together read the known.
  CHECK(second(R"({"comp00":{},"execution_times":[1.0]})").parse_problem == "");
  const Schedule mixed =
      second(R"({"comp00":{"parallelized_dim":"i1","vectorized":true},"execution_times":[1.0]})");
  CHECK(mixed.parse_problem == "");
  CHECK(mixed.comps[0].parallelized_dim == "i1");
  // With a typed list beside it, auto reads the typed list.
  const Schedule t = second(
      R"({"comp00":{"transformations":[]},"transformations_list":[{"type":"parallelization",)"
      R"("loop_levels":[0]}],"execution_times":[1.0]})");
  CHECK(t.parse_problem == "");
  CHECK(t.comps[0].parallelized_dim == "i0");
}

TEST_CASE("an earlier generation's transformation fields are refused, never dropped") {
  // Each field that earlier Tiramisu generators used for a loop transformation, non-empty, in an
  // entry that also has fields lcm reads: reading the known ones alone would be another schedule.
  const std::vector<std::string> fields = {
      R"("interchange_dims":["i0","i1"])", R"("reversed_dim":"i1")",
      R"("skewing":{"skewed_dims":["i0","i1"],"skewing_factors":[1,1]})",
      R"("transformation_matrix":["0","1","1","0"])",
      R"("transformation_matrices":[["0","1","1","0"]])"};
  for (const std::string& f : fields) {
    CAPTURE(f);
    const Schedule s = second(R"({"comp00":{"parallelized_dim":"i1","tiling":{},)" + f +
                              R"(},"execution_times":[1.0]})");
    CHECK(s.parse_problem == "unread_transformation_fields");
    CHECK(lcm::test::contains(s.parse_detail, "earlier generation"));
    // Empty, they say "not applied", as every other field does.
    const std::string name = f.substr(0, f.find(':'));
    for (const char* empty : {"null", "[]", "{}", "\"\""}) {
      CAPTURE(empty);
      CHECK(second(R"({"comp00":{"parallelized_dim":"i1",)" + name + ":" + empty +
                   R"(},"execution_times":[1.0]})")
                .parse_problem == "");
    }
    // Beside a non-empty transformations_list (a later generation writing both), the tag
    // vectors are read.
    const Schedule both =
        second(R"({"comp00":{"transformations_list":[[2,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0]],)" + f +
               R"(},"execution_times":[1.0]})");
    CHECK(both.parse_problem == "");
    CHECK(both.comps[0].transformations.size() == 1);
  }
}

TEST_CASE("schedules with a typed list and no per-computation entries are parsed, not a note") {
  SkipLog log(false, 0);
  std::string scheds = "[" + kUntransformed;
  for (int l = 0; l < 2; ++l)
    scheds +=
        "," + typed(R"({"type":"parallelization","loop_levels":[)" + std::to_string(l) + "]}");
  scheds += "]";
  std::optional<Program> p = parse(program(scheds), log);
  REQUIRE(p);
  CHECK(log.count("note", "missing_comp_schedule") == 0);
  CHECK(p->form_counts.at("read/typed") == 3);
  CHECK(p->schedules[1].comps[1].parallelized_dim == "i0");
  CHECK(p->schedules[2].comps[1].parallelized_dim == "i2");
  // A computation without an entry in a structured schedule is still the note.
  SkipLog log2(false, 0);
  std::optional<Program> q =
      parse(program(R"([{"comp00":{"parallelized_dim":null},"execution_times":[1.0]},)"
                    R"({"comp00":{"parallelized_dim":"i0"},"execution_times":[1.0]}])"),
            log2);
  REQUIRE(q);
  CHECK(log2.count("note", "missing_comp_schedule") == 1);
  CHECK(q->form_counts.at("read/structured") == 2);
}

TEST_CASE("times: a list, a number, numeric strings, a machine-keyed object") {
  auto times_of = [](const std::string& t, const ReadOptions& opt = {}) {
    return second(typed("", t), opt);
  };
  CHECK(times_of("[1.0,\"2.5\"]").execution_times == std::vector<double>{1.0, 2.5});
  CHECK(times_of("3.5").execution_times == std::vector<double>{3.5});
  CHECK(times_of("\"3.5\"").execution_times == std::vector<double>{3.5});
  CHECK(times_of(R"({"a100":[2.0,1.0]})").execution_times == std::vector<double>{2.0, 1.0});
  CHECK(times_of(R"({"a100":"7"})").execution_times == std::vector<double>{7.0});
  ReadOptions v100;
  v100.machine = "v100";
  CHECK(times_of(R"({"a100":[2.0],"v100":[3.0, 4.0]})", v100).execution_times ==
        std::vector<double>{3.0, 4.0});
  const Schedule missing = times_of(R"({"a100":[2.0]})", v100);
  CHECK(missing.parse_problem == "bad_execution_times");
  CHECK(lcm::test::contains(missing.parse_detail, "no times for machine \"v100\""));
  CHECK(times_of("\"fast\"").parse_problem == "bad_execution_times");
  // Several machines and none chosen: the run stops, naming them.
  const std::string err = lcm::test::error_of([&] { times_of(R"({"a100":[2.0],"v100":[3.0]})"); });
  CHECK(lcm::test::contains(err, "forms.jsonl:1"));
  CHECK(lcm::test::contains(err, "a100, v100"));
  CHECK(lcm::test::contains(err, "data.machine=NAME"));
  // initial_execution_time in the same shapes; a list gives its least value.
  SkipLog log(false, 0);
  CHECK(parse(program("[" + kUntransformed + "]", "[5.0,4.0]"), log)->initial_execution_time ==
        4.0);
  CHECK(parse(program("[" + kUntransformed + "]", "\"6\""), log)->initial_execution_time == 6.0);
  CHECK(parse(program("[" + kUntransformed + "]", R"({"v100":[8.0]})"), log, v100)
            ->initial_execution_time == 8.0);
  CHECK(parse(program("[" + kUntransformed + "]", R"({"a100":[8.0]})"), log, v100) == std::nullopt);
  CHECK(log.count("program", "bad_field") == 1);
}

TEST_CASE("data.schedule_source forces one form; a schedule without it is a named skip") {
  const std::string both =
      R"({"comp00":{"parallelized_dim":"i1"},"transformations_list":[{"type":"parallelization",)"
      R"("loop_levels":[0]}],"execution_times":[1.0]})";
  ReadOptions off;
  off.schedule_check = ScheduleCheck::Off;
  CHECK(second(both, off).comps[0].parallelized_dim == "i1");  // auto: the dicts
  off.schedule_source = ScheduleSource::Typed;
  CHECK(second(both, off).comps[0].parallelized_dim == "i0");
  off.schedule_source = ScheduleSource::Structured;
  CHECK(second(both, off).comps[0].parallelized_dim == "i1");
  const Schedule none = second(typed(R"({"type":"parallelization","loop_levels":[0]})"), off);
  CHECK(none.parse_problem == "missing_schedule_form");
  CHECK(lcm::test::contains(none.parse_detail, "data.schedule_source=structured"));
}

TEST_CASE("two forms of one schedule are cross-checked: report keeps, skip drops") {
  const std::string agree =
      R"({"comp00":{"parallelized_dim":"i0"},"comp01":{"parallelized_dim":"i0"},)"
      R"("transformations_list":[{"type":"parallelization","loop_levels":[0]}],"execution_times":[1.0]})";
  const std::string disagree =
      R"({"comp00":{"parallelized_dim":"i1"},"comp01":{},)"
      R"("transformations_list":[{"type":"parallelization","loop_levels":[0]}],"execution_times":[1.0]})";
  SkipLog log(false, 0);
  std::optional<Program> p =
      parse(program("[" + kUntransformed + "," + agree + "," + disagree + "]"), log);
  REQUIRE(p);
  CHECK(p->form_counts.at("check/typed/agree") == 1);
  CHECK(p->form_counts.at("check/typed/disagree") == 1);
  CHECK(p->form_counts.at("disagree/parallelization") == 1);
  CHECK(p->schedules[2].parse_problem == "");
  CHECK(p->schedules[2].comps[0].parallelized_dim == "i1");  // kept from the dicts
  CHECK(log.count("note", "schedule_forms_disagree") == 1);
  const std::vector<SkipEvent> ev = log.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].schedule == 2);
  CHECK(lcm::test::contains(ev[0].detail, "structured vs typed"));

  ReadOptions skip;
  skip.schedule_check = ScheduleCheck::Skip;
  SkipLog log2(false, 0);
  p = parse(program("[" + kUntransformed + "," + agree + "," + disagree + "]"), log2, skip);
  REQUIRE(p);
  CHECK(p->schedules[1].parse_problem == "");
  CHECK(p->schedules[2].parse_problem == "schedule_forms_disagree");
  CHECK(log2.count("note", "schedule_forms_disagree") == 0);

  ReadOptions off;
  off.schedule_check = ScheduleCheck::Off;
  SkipLog log3(false, 0);
  p = parse(program("[" + kUntransformed + "," + disagree + "]"), log3, off);
  REQUIRE(p);
  CHECK(p->form_counts.count("check/typed/disagree") == 0);
  CHECK(log3.counts().empty());
}
