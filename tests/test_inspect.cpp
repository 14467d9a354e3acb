// lcm-inspect (data/inspect.hpp, tools/lcm-inspect.cpp): every count of a mixed-form file written
// here (structured dicts, a typed transformations_list, each sched_str dialect, an entry with
// only unknown keys, machine-keyed and other time shapes, one-schedule lines, a header line, a
// duplicate program), the exit codes, the JSON report against the text one, and on the real
// sample and the mixed file the read and featurized counts against lcm-prepare's.
#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "data/inspect.hpp"
#include "data/transformations.hpp"
#include "support/test_support.hpp"
#include "support/tiny_record.hpp"
#include "util/atomic_file.hpp"

namespace {

using lcm::test::contains;

const std::string kAnnotation = R"("program_annotation":)" + lcm::test::tiny_annotation();

const std::string kComp00 =
    R"("comp00":{"shiftings":null,"tiling":{},"unrolling_factor":null,"parallelized_dim":null,)"
    R"("transformations_list":[]})";
const std::string kTree =
    R"("tree_structure":{"roots":[{"loop_name":"i0","computations_list":[],"child_list":)"
    R"([{"loop_name":"i1","computations_list":["comp00"],"child_list":[]}]}]})";

/// A structured schedule with sched_str `s` and times `t`.
std::string structured(const std::string& s, const std::string& t) {
  return "{" + kComp00 + "," + kTree + R"(,"sched_str":")" + s + R"(","execution_times":)" + t +
         "}";
}

std::string program(const std::string& name, const std::string& rest) {
  return R"({"program_name":")" + name + R"(",)" + kAnnotation + "," + rest + "}";
}

/// The mixed-form file (7 lines; see the expected counts in the first test case).
std::string mixed_text() {
  const std::string p_struct =
      program("p_struct", R"("initial_execution_time":2.0,"schedules_list":[)" +
                              structured("", "[2.0,2.5]") + "," +
                              structured("{comp00}:P(L0)", "[1.0]") + "]");
  const std::string p_typed = program(
      "p_typed",
      R"j("initial_execution_time":2.0,"schedules_list":[)j"
      R"j({"execution_times":[2.0],"transformations_list":[]},)j"
      R"j({"execution_times":1.5,"sched_str":"P({C0},L0)","transformations_list":[)j"
      R"j({"type":"interchange","loop_levels":[0,1],"computations":["comp00"]},)j"
      R"j({"type":"tiling","loop_levels":[0,1],"parameters":[32,32],"comps":["comp00"]}]},)j"
      R"j({"execution_times":"1.25","sched_str":"I(L0,L1,comps=['comp00'])"},)j"
      R"j({"execution_times":{"m1":[1.0],"m2":[1.1]},"sched_str":"F(comp00,comp01){comp00}:P(L0)"},)j"
      R"j({"execution_times":null,"sched_str":"xyz"},)j"
      R"({"comp00":{"transformations":[["interchange",0,1]]}}])");
  const std::string p_one =
      program("p_one", R"("initial_execution_time":{"m1":2.0},"schedule":{)" + kComp00 +
                           R"(,"execution_times":[1.0]},"schedule_index":3)");
  const std::string p_idx =
      program("p_idx", R"("initial_execution_time":"2.0","schedules_list":[)" +
                           structured("", "[2.0]") + R"(],"schedule_index":7)");
  const std::string p_top =
      program("p_top",
              R"j("initial_execution_time":2.0,"execution_times":[1.0],"sched_str":)j"
              R"j("{comp00}:R(L1)","transformations_list":[{"type":"reversal","loop_levels":[2]},)j"
              R"j({"type":"magic","loop_levels":[1]}])j");
  return R"({"note":"a header line"})"
         "\n" +
         p_struct + "\n" + p_typed + "\n" + p_one + "\n" + p_idx + "\n" + p_top + "\n" + p_struct +
         "\n";
}

/// `doc[path...]` as an int64 (REQUIREs it exists).
int64_t at(const rapidjson::Value& v, std::initializer_list<const char*> path) {
  const rapidjson::Value* p = &v;
  std::string where;
  for (const char* k : path) {
    where += std::string(".") + k;
    REQUIRE_MESSAGE(p->IsObject(), where);
    auto it = p->FindMember(k);
    REQUIRE_MESSAGE(it != p->MemberEnd(), "missing " << where);
    p = &it->value;
  }
  REQUIRE_MESSAGE(p->IsInt64(), where);
  return p->GetInt64();
}

/// lcm-prepare's summary numbers: records read, programs parsed, schedules read, programs and
/// schedules featurized (before the footprint rule).
struct PrepareCounts {
  int64_t records = -1, programs = -1, schedules = -1, featurized = -1, sched_featurized = -1;
};
PrepareCounts prepare_counts(const std::string& dir, const std::string& file) {
  const lcm::test::RunResult r = lcm::test::run_tool(
      dir, "lcm-prepare",
      "experiment.base_path=" + dir + "/prep data.cache=false data.train_file=" + file +
          " data.valid_file= data.min_functions_per_footprint=0 -q");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  PrepareCounts c;
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m,
                            std::regex(R"(records +(\d+) read, (\d+) parsed into programs)")));
  c.records = std::stoll(m[1]);
  c.programs = std::stoll(m[2]);
  REQUIRE(std::regex_search(
      r.out, m, std::regex(R"(programs +(\d+) read, \d+ kept, \d+ dropped \((\d+) by)")));
  c.featurized = std::stoll(m[1]) - std::stoll(m[2]);
  REQUIRE(std::regex_search(
      r.out, m, std::regex(R"(schedules +(\d+) read, \d+ kept, \d+ dropped \((\d+) by)")));
  c.schedules = std::stoll(m[1]);
  c.sched_featurized = c.schedules - std::stoll(m[2]);
  return c;
}

}  // namespace

TEST_CASE("lcm-inspect counts every form, shape and line of a mixed-form file") {
  const std::string dir = lcm::test::temp_dir("inspect_mixed");
  const std::string file = dir + "/mixed.jsonl";
  std::ofstream(file) << mixed_text();

  const lcm::data::InspectOptions defaults;
  const lcm::data::InspectReport r = lcm::data::inspect_file(file, defaults);
  CHECK(r.layouts.at("JSON Lines, plain") == 1);
  CHECK(r.records == 7);
  CHECK(r.program_records == 6);
  // p_typed's times are keyed by two machines and none is chosen: lcm-prepare would stop there;
  // lcm-inspect counts it as a record the reader skips. The one-schedule lines p_one, p_idx and
  // p_top are programs of one schedule each.
  CHECK(r.programs_read == 5);  // p_struct, p_one, p_idx, p_top and the duplicate p_struct
  CHECK(r.schedules_read == 13);
  CHECK(r.records_skipped_by_reader == 2);
  CHECK(r.skipped_records_counted == 1);
  CHECK(r.several_machines == lcm::data::Histogram{{"m1, m2", 1}});
  CHECK(r.reader_skips.at("line/not_a_program_record") == 1);
  CHECK(r.reader_skips.at("program/duplicate_program") == 1);
  // p_struct's second schedule: dicts untransformed, sched_str P(L0)
  CHECK(r.reader_skips.at("note/schedule_forms_disagree") == 1);
  CHECK(r.reader_skips.size() == 3);
  // Counted as lcm-prepare counts them: over the programs read, the duplicate included; p_top's
  // schedule (a typed entry of type "magic") is not read at all.
  CHECK(r.forms_read.at("read/structured") == 6);
  CHECK(r.forms_read.count("read/typed") == 0);
  CHECK(r.forms_read.at("check/sched_str/disagree") == 2);
  CHECK(r.forms_read.at("disagree/parallelization") == 2);
  CHECK(contains(r.loop_level_base_used, "not decided"));
  REQUIRE(r.first_skips.size() == 2);  // notes are left out
  CHECK(r.first_skips[0].reason == "not_a_program_record");
  CHECK(r.first_skips[0].line == 1);
  CHECK(r.first_skips[1].reason == "duplicate_program");
  CHECK(r.first_skips[1].line == 7);

  CHECK(r.schedules_in_file == 13);
  CHECK(r.computations_in_file == 6);
  CHECK(r.lines_whole_program == 3);
  CHECK(r.lines_single_schedule == 3);
  CHECK(r.single_schedule_forms.at("schedule object") == 1);
  CHECK(r.single_schedule_forms.at("one-entry schedules_list + index") == 1);
  CHECK(r.single_schedule_forms.at("top-level schedule fields") == 1);
  CHECK(r.lines_other == 0);

  CHECK(r.top_keys.at("schedule") == 1);
  CHECK(r.top_keys.at("schedule_index") == 2);
  CHECK(r.top_keys.at("program_annotation") == 6);
  CHECK(r.annotation_keys.at("memory_size") == 6);
  CHECK(r.computation_keys.at("data_type_size") == 6);
  CHECK(r.schedule_keys.at("<computation>") == 7);
  CHECK(r.schedule_keys.at("transformations_list") == 2);
  CHECK(r.schedule_keys.at("execution_times") == 11);  // p_typed's last schedule has none
  CHECK(r.comp_entry_keys.at("parallelized_dim") == 6);
  CHECK(r.comp_entry_keys.at("transformations") == 1);

  CHECK(r.form_structured == 6);
  CHECK(r.form_typed == 3);
  CHECK(r.form_sched_str == 10);
  CHECK(r.form_none == 1);
  CHECK(r.form_combinations == lcm::data::Histogram{{"structured+sched_str", 5},
                                                    {"typed", 1},
                                                    {"typed+sched_str", 2},
                                                    {"sched_str", 3},
                                                    {"structured", 1},
                                                    {"none", 1}});
  CHECK(r.sched_str_dialects == lcm::data::Histogram{{"empty", 3},
                                                     {"per_computation", 3},
                                                     {"looper", 1},
                                                     {"tiralib", 1},
                                                     {"per_computation_fused", 1},
                                                     {"unknown", 1}});
  CHECK(r.typed_entries == 4);
  CHECK(r.typed_types ==
        lcm::data::Histogram{{"interchange", 1}, {"tiling", 1}, {"reversal", 1}, {"magic", 1}});
  CHECK(r.typed_naming_computations == 1);
  CHECK(r.typed_naming_comps == 1);
  CHECK(r.typed_entry_keys.at("loop_levels") == 4);

  CHECK(r.unknown_only_entries == 1);
  REQUIRE(r.first_unknown_entries.size() == 1);
  CHECK(r.first_unknown_entries[0].program == "p_typed");
  CHECK(r.first_unknown_entries[0].schedule == 5);
  CHECK(r.first_unknown_entries[0].line == 3);
  CHECK(r.first_unknown_entries[0].computation == "comp00");
  CHECK(r.first_unknown_entries[0].keys == std::vector<std::string>{"transformations"});

  CHECK(r.execution_time_shapes == lcm::data::Histogram{{"list", 8},
                                                        {"number", 1},
                                                        {"numeric string", 1},
                                                        {"object", 1},
                                                        {"null", 1},
                                                        {"missing", 1}});
  CHECK(r.execution_time_machines == lcm::data::Histogram{{"m1", 1}, {"m2", 1}});
  CHECK(r.initial_time_shapes ==
        lcm::data::Histogram{{"number", 4}, {"object", 1}, {"numeric string", 1}});
  CHECK(r.initial_time_machines == lcm::data::Histogram{{"m1", 1}});

  // interchange and tiling (levels 0, 1 of comp00, depth 2) prove 0-based; the reversal at level
  // 2 names no computation: the program's depth is 2, so it proves 1-based.
  CHECK(r.level_zero_based == 2);
  CHECK(r.level_one_based == 1);
  CHECK(contains(r.loop_level_verdict(), "contradictory"));
  const std::vector<std::string> p = r.problems();
  REQUIRE(p.size() == 5);
  CHECK(p[0] == "1 sched_str of dialect unknown");
  CHECK(p[1] == "1 typed entry of unknown type (magic 1)");
  CHECK(p[2] == "1 per-computation entry with only unknown keys");
  CHECK(contains(p[3], "contradictory"));
  CHECK(contains(p[4], "1 record with times of several machines (m1, m2) and none chosen"));

  // With a machine and a loop-level base chosen, lcm-prepare reads the file, and the featurized
  // counts equal its own.
  lcm::data::InspectOptions fo;
  fo.features = true;
  fo.threads = 2;
  fo.read_options.machine = "m1";
  fo.loop_level_base = lcm::data::LoopLevelBase::Zero;
  const lcm::data::InspectReport f = lcm::data::inspect_file(file, fo);
  CHECK(f.several_machines.empty());
  CHECK(f.programs_read == 6);
  const PrepareCounts c = prepare_counts(dir, file + " data.machine=m1 data.loop_level_base=0");
  CHECK(f.records == c.records);
  CHECK(f.programs_read == c.programs);
  CHECK(f.schedules_read == c.schedules);
  CHECK(f.programs_featurized == c.featurized);
  CHECK(f.schedules_featurized == c.sched_featurized);
  CHECK(f.programs_featurized == 2);  // p_struct, p_typed; the others lack 2 labelled schedules
  CHECK(f.feature_skips.count("program/lt_2_schedules") == 1);
}

TEST_CASE("lcm-inspect: exit codes, the text report and the JSON report hold the same numbers") {
  const std::string dir = lcm::test::temp_dir("inspect_tool");
  const std::string mixed = dir + "/mixed.jsonl";
  std::ofstream(mixed) << mixed_text();
  const std::string clean = dir + "/clean.jsonl";
  std::ofstream(clean) << program("p_struct", R"("initial_execution_time":2.0,"schedules_list":[)" +
                                                  structured("", "[2.0,2.5]") + "," +
                                                  structured("", "[1.0]") + "]")
                       << "\n";

  lcm::test::RunResult r = lcm::test::run_tool(dir, "lcm-inspect", "-q " + clean);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "every schedule form is understood"));
  CHECK(contains(r.out, "not determined (0-based assumed)"));
  CHECK(contains(r.out, "1 records: 1 programs, 2 schedules"));

  r = lcm::test::run_tool(dir, "lcm-inspect", "-q " + mixed);
  CHECK(r.code == 3);
  CHECK(contains(r.out, "NOT UNDERSTOOD"));
  CHECK(contains(r.out, "7 records: 5 programs, 13 schedules"));
  CHECK(
      contains(r.out, "schedule_index                          2\n"));  // read: one-schedule lines
  CHECK(contains(r.out, "memory_size                             6  (ignored by lcm)"));
  CHECK(contains(r.out, "program p_typed schedule 5 comp00: {transformations}"));
  CHECK(contains(r.err, "lcm-inspect: not understood: 1 sched_str of dialect unknown"));

  // Two files: a total; --json on stdout equals the file --output writes.
  r = lcm::test::run_tool(
      dir, "lcm-inspect",
      "-q --json --features " + clean + " " + mixed + " --output " + dir + "/report.json");
  CHECK(r.code == 3);
  CHECK(r.out == lcm::read_file(dir + "/report.json"));
  rapidjson::Document d;
  d.Parse(r.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(at(d, {"version"}) == lcm::data::kInspectReportVersion);
  CHECK(d["understood"].IsFalse());
  REQUIRE(d["files"].Size() == 2);
  const rapidjson::Value& m = d["files"][1];
  CHECK(at(m, {"read", "records"}) == 7);
  CHECK(at(m, {"read", "programs"}) == 5);
  CHECK(at(m, {"read", "schedules"}) == 13);
  CHECK(at(m, {"read", "several_machines", "m1, m2"}) == 1);
  CHECK(at(m, {"read", "forms_read", "read/structured"}) == 6);
  CHECK(at(m, {"read", "skips", "program/duplicate_program"}) == 1);
  CHECK(at(m, {"features", "programs"}) == 1);
  CHECK(at(m, {"schedules_in_file"}) == 13);
  CHECK(at(m, {"lines", "single_schedule"}) == 3);
  CHECK(at(m, {"forms", "typed"}) == 3);
  CHECK(at(m, {"forms", "sched_str_dialects", "tiralib"}) == 1);
  CHECK(at(m, {"typed_entries", "types", "magic"}) == 1);
  CHECK(at(m, {"unknown_key_entries", "count"}) == 1);
  CHECK(at(m, {"times", "execution_times", "object"}) == 1);
  CHECK(at(m, {"times", "initial_execution_time_machines", "m1"}) == 1);
  CHECK(at(m, {"loop_level_base", "one_based_entries"}) == 1);
  CHECK(at(m, {"keys", "top_level", "schedule", "count"}) == 1);
  CHECK(std::string(m["keys"]["top_level"]["schedule"]["lcm"].GetString()) == "read");
  CHECK(d["files"][0]["understood"].IsTrue());
  CHECK(at(d, {"total", "files"}) == 2);
  CHECK(at(d, {"total", "read", "records"}) == 8);
  CHECK(at(d, {"total", "read", "schedules"}) == 15);
  CHECK(at(d, {"total", "features", "programs"}) == 2);

  // --no-read: the walk only; no read counts in the text or the JSON, the rest unchanged.
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q --json --no-read " + mixed);
  CHECK(r.code == 3);
  rapidjson::Document n;
  n.Parse(r.out.c_str());
  REQUIRE_FALSE(n.HasParseError());
  CHECK_FALSE(n["files"][0].HasMember("read"));
  CHECK(at(n["files"][0], {"records"}) == 7);
  CHECK(at(n["files"][0], {"schedules_in_file"}) == 13);
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q --no-read " + mixed);
  CHECK(contains(r.out, "not run (--no-read): 7 records"));
  CHECK_FALSE(contains(r.out, "reader skips"));
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q --no-read --features " + mixed);
  CHECK(r.code == 2);

  // Errors: a missing file is 1, bad usage 2; --help documents the exit codes.
  r = lcm::test::run_tool(dir, "lcm-inspect", dir + "/missing.jsonl.gz");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "missing.jsonl.gz"));
  r = lcm::test::run_tool(dir, "lcm-inspect", "--threads -1 " + clean);
  CHECK(r.code == 2);
  r = lcm::test::run_tool(dir, "lcm-inspect", "--help");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "3 some is not"));
}

TEST_CASE("lcm-inspect names the legacy container and bare record layouts") {
  const std::string dir = lcm::test::temp_dir("inspect_layouts");
  const std::string rec = program("p_struct", R"("initial_execution_time":2.0,"schedules_list":[)" +
                                                  structured("", "[2.0,2.5]") + "]");
  const std::string legacy = dir + "/legacy.json";
  std::ofstream(legacy) << "{\n  \"p_struct\": " << rec << "\n}\n";
  const std::string bare = dir + "/function_x_explored_schedules.json";
  std::ofstream(bare) << "{\"filename\": \"x.cpp\",\n" << rec.substr(1) << "\n";
  for (const auto& [file, layout] :
       {std::pair<std::string, std::string>{legacy, "legacy container, plain"},
        {bare, "bare record, plain"}}) {
    CAPTURE(file);
    const lcm::data::InspectOptions defaults;
    const lcm::data::InspectReport r = lcm::data::inspect_file(file, defaults);
    CHECK(r.layouts == lcm::data::Histogram{{layout, 1}});
    CHECK(r.records == 1);
    CHECK(r.programs_read == 1);
    CHECK(r.schedules_in_file == 1);
  }
}

TEST_CASE("lcm-inspect on the real sample reads what lcm-prepare reads") {
  LCM_REQUIRE_SHARED(train, "looperset-sample/train.jsonl.gz");
  const std::string dir = lcm::test::temp_dir("inspect_sample");
  const lcm::test::RunResult r =
      lcm::test::run_tool(dir, "lcm-inspect", "-q --json --features " + train);
  CHECK(r.code == 0);
  rapidjson::Document d;
  d.Parse(r.out.c_str());
  REQUIRE_FALSE(d.HasParseError());
  const rapidjson::Value& f = d["files"][0];
  const PrepareCounts c = prepare_counts(dir, train);
  CHECK(at(f, {"read", "records"}) == c.records);
  CHECK(at(f, {"read", "programs"}) == c.programs);
  CHECK(at(f, {"read", "schedules"}) == c.schedules);
  CHECK(at(f, {"features", "programs"}) == c.featurized);
  CHECK(at(f, {"features", "schedules"}) == c.sched_featurized);
  CHECK(at(f, {"read", "schedules"}) == 32980);
  CHECK(at(f, {"schedules_in_file"}) == 32980);
  CHECK(at(f, {"forms", "structured"}) == 32980);
  CHECK(at(f, {"lines", "whole_program"}) == 299);
  CHECK(at(f, {"keys", "schedule", "<computation>", "count"}) == 67411);
}

TEST_CASE("lcm-inspect: a file without any LOOPerSet record is an error, never 'understood'") {
  const std::string dir = lcm::test::temp_dir("inspect_no_records");
  // Members of the class: bytes of every kind, an empty file, a safetensors file, JSON that is
  // not LOOPerSet (objects, arrays, scalars, lines of it), whitespace.
  std::vector<std::pair<std::string, std::string>> files;
  uint64_t state = 99;
  for (int i = 0; i < 6; ++i) {
    std::string bytes;
    for (int j = 0; j < 64 + 300 * i; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      bytes += char(state >> 56);
    }
    files.emplace_back("random" + std::to_string(i) + ".bin", bytes);
  }
  files.emplace_back("empty.jsonl", "");
  files.emplace_back("blank.jsonl", "\n\n   \n");
  std::string safetensors = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string header(8, '\0');
  header[0] = char(safetensors.size());
  files.emplace_back("model.safetensors", header + safetensors + std::string(8, '\0'));
  files.emplace_back("objects.jsonl", "{\"a\": 1}\n{\"b\": [1, 2]}\n");
  files.emplace_back("array.json", "[1, 2, 3]\n");
  files.emplace_back("scalar.json", "42\n");
  files.emplace_back("text.txt", "hello world\nnot json at all\n");
  for (const auto& [name, bytes] : files) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    INFO(name);
    for (const std::string flags : {"-q ", "-q --no-read ", "-q --json "}) {
      const lcm::test::RunResult r = lcm::test::run_tool(dir, "lcm-inspect", flags + path);
      CHECK(r.code == 1);
      CHECK(!contains(r.out, "every schedule form is understood"));
      CHECK(contains(r.err, "no LOOPerSet record found in " + path));
      if (contains(flags, "--json")) {
        rapidjson::Document d;
        d.Parse(r.out.c_str());
        REQUIRE_FALSE(d.HasParseError());
        CHECK(d["understood"].IsFalse());
      }
    }
  }
  // beside a good file, the bad one is still named, and the exit is an error
  const std::string clean = dir + "/clean.jsonl";
  std::ofstream(clean) << program("p_struct", R"("initial_execution_time":2.0,"schedules_list":[)" +
                                                  structured("", "[2.0,2.5]") + "]")
                       << "\n";
  lcm::test::RunResult r = lcm::test::run_tool(dir, "lcm-inspect", "-q " + clean);
  CHECK(r.code == 0);
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q " + clean + " " + dir + "/empty.jsonl");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "no LOOPerSet record found in " + dir + "/empty.jsonl"));
}

TEST_CASE("lcm-inspect: --help lists the keys it takes; key=value sets them, each once") {
  const std::string dir = lcm::test::temp_dir("inspect_keys");
  lcm::test::RunResult r = lcm::test::run_tool(dir, "lcm-inspect", "--help");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "Config keys"));
  for (const char* key :
       {"data.machine", "data.loop_level_base", "data.schedule_source", "data.schedule_check"})
    CHECK(contains(r.out, std::string("  ") + key));
  const std::string clean = dir + "/clean.jsonl";
  std::ofstream(clean) << program("p_struct", R"("initial_execution_time":2.0,"schedules_list":[)" +
                                                  structured("", "[2.0,2.5]") + "]")
                       << "\n";
  // a key=value equals its flag
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q --json data.loop_level_base=1 " + clean);
  lcm::test::RunResult f =
      lcm::test::run_tool(dir, "lcm-inspect", "-q --json --loop-level-base 1 " + clean);
  CHECK(r.code == 0);
  CHECK(r.out == f.out);
  // given twice (two keys, or a key and its flag), a bad value, a key it does not read
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q data.machine=a data.machine=b " + clean);
  CHECK(r.code == 2);
  CHECK(contains(r.err, "'a' and 'b'"));
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q --machine a data.machine=b " + clean);
  CHECK(r.code == 2);
  CHECK(contains(r.err, "--machine 'a' and data.machine='b'"));
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q data.loop_level_base=2 " + clean);
  CHECK(r.code == 2);
  CHECK(contains(r.err, "data.loop_level_base"));
  r = lcm::test::run_tool(dir, "lcm-inspect", "-q training.lr=0.1 " + clean);
  CHECK(r.code == 2);
  CHECK(contains(r.err, "training.lr: not a key lcm-inspect reads"));
  // out-of-range numbers are refused, not clamped
  for (const char* bad : {"-1", "1025", "99999999999999999999", "1e3", "0x10", "nan"}) {
    r = lcm::test::run_tool(dir, "lcm-inspect", std::string("-q --threads ") + bad + " " + clean);
    CHECK_MESSAGE(r.code == 2, bad);
    CHECK(contains(r.err, "expected an integer in [0, 1024]"));
  }
}

TEST_CASE("every spelling the typed reader accepts is a known type to lcm-inspect") {
  // each tag-vector kind by its name and aliases (data/transformations.hpp), the other types in
  // each of their spellings: none is "of unknown type"; an unread spelling still is
  lcm::data::InspectReport r;
  std::vector<std::string> spellings = {
      "parallelization", "parallelisation", "parallel", "tiling", "tile", "unrolling",
      "unroll",          "shifting",        "shift",    "fusion", "fuse"};
  for (const lcm::data::TransformKindInfo& k : lcm::data::kTransformKinds)
    for (const char* s : {k.name, k.alias_a, k.alias_b})
      if (s) spellings.push_back(s);
  for (const std::string& s : spellings) r.typed_types[s] = 1;
  r.typed_types["skewed"] = 2;
  const std::vector<std::string> p = r.problems();
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "2 typed entries of unknown type (skewed 2)");
}
