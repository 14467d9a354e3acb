// Tests of JSON Lines with one schedule per line (docs/data-format.md "Line granularity";
// data/schedule_lines.hpp, RecordSource's grouping, parse_program's merge): the real sample
// rewritten one schedule per line in each shape gives the programs and features of the
// original, and each kind of bad or odd group gives its named skip. Real-data tests skip (exit
// code 77) when ../shared is absent; the synthetic ones always run.
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data/prepare.hpp"
#include "data/reader.hpp"
#include "data/schedule_lines.hpp"
#include "support/features_fixture.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "support/tiny_record.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;

namespace {

using lcm::test::write_text;

/// Writes `text` gzip-compressed at level 1.
void write_gz(const std::string& path, const std::string& text) {
  lcm::test::write_gz(path, text, 1);
}

// ---- an exact rewrite of a record: numbers keep their text ----------------------------------

/// Builds a DOM from SAX events with every number kept as its text, marked by a leading \x01 in
/// a string value (kParseNumbersAsStringsFlag), so that writing it back (RawWriter) gives the
/// number exactly as it was written.
struct MarkNumbers {
  rapidjson::Document& d;
  std::string tmp;
  bool Null() { return d.Null(); }
  bool Bool(bool b) { return d.Bool(b); }
  bool Int(int i) { return d.Int(i); }
  bool Uint(unsigned i) { return d.Uint(i); }
  bool Int64(int64_t i) { return d.Int64(i); }
  bool Uint64(uint64_t i) { return d.Uint64(i); }
  bool Double(double x) { return d.Double(x); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    tmp.assign(1, '\x01');
    tmp.append(s, n);
    return d.String(tmp.data(), rapidjson::SizeType(tmp.size()), true);
  }
  bool String(const char* s, rapidjson::SizeType n, bool c) { return d.String(s, n, c); }
  bool StartObject() { return d.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool c) { return d.Key(s, n, c); }
  bool EndObject(rapidjson::SizeType n) { return d.EndObject(n); }
  bool StartArray() { return d.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return d.EndArray(n); }
};

/// Writer that writes a \x01-marked string (MarkNumbers) as the raw number it holds.
struct RawWriter : rapidjson::Writer<rapidjson::StringBuffer> {
  using Base = rapidjson::Writer<rapidjson::StringBuffer>;
  explicit RawWriter(rapidjson::StringBuffer& b) : Base(b) {}
  bool String(const char* s, rapidjson::SizeType n, bool copy = false) {
    if (n > 0 && s[0] == '\x01') return Base::RawValue(s + 1, n - 1, rapidjson::kNumberType);
    return Base::String(s, n, copy);
  }
};

void parse_exact(const std::string& line, rapidjson::Document& d) {
  rapidjson::Reader reader;
  rapidjson::StringStream ss(line.c_str());
  MarkNumbers h{d, {}};
  auto gen = [&](rapidjson::Document&) {
    return !reader
                .Parse<rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseIterativeFlag>(ss,
                                                                                               h)
                .IsError();
  };
  d.Populate(gen);
  REQUIRE(d.IsObject());
}

/// `{member, member, ...}` of the members given as (key, value) in order.
std::string write_object(const std::vector<std::pair<std::string, const rapidjson::Value*>>& m) {
  rapidjson::StringBuffer buf;
  RawWriter w(buf);
  w.StartObject();
  for (const auto& [k, v] : m) {
    w.Key(k.c_str(), rapidjson::SizeType(k.size()));
    v->Accept(w);
  }
  w.EndObject();
  return buf.GetString();
}

/// The lines of one whole-program record `line`, one schedule per line, in shape 'a' (a
/// `schedule` object), 'b' (`schedule_index` + a one-entry `schedules_list`, the lines of a
/// program written in reverse order so that the index sorts them) or 'c' (the schedule's fields
/// at the top level). The schedule takes schedules_list's place among the program fields; the
/// lines after the first carry only program_name, program_annotation and initial_execution_time.
std::vector<std::string> split_record(const std::string& line, char shape) {
  rapidjson::Document d;
  parse_exact(line, d);
  auto sl = d.FindMember("schedules_list");
  REQUIRE(sl != d.MemberEnd());
  REQUIRE(sl->value.IsArray());
  std::vector<std::string> out;
  rapidjson::Document scratch;
  for (rapidjson::SizeType i = 0; i < sl->value.Size(); ++i) {
    const rapidjson::Value& sched = sl->value[i];
    std::vector<std::pair<std::string, const rapidjson::Value*>> m;
    rapidjson::Value index_text, list(rapidjson::kArrayType);
    const std::string idx = "\x01" + std::to_string(i);
    index_text.SetString(idx.c_str(), rapidjson::SizeType(idx.size()), scratch.GetAllocator());
    rapidjson::Value copy(sched, scratch.GetAllocator());
    list.PushBack(copy, scratch.GetAllocator());
    for (auto it = d.MemberBegin(); it != d.MemberEnd(); ++it) {
      const std::string k(it->name.GetString(), it->name.GetStringLength());
      if (k != "schedules_list") {
        // later lines repeat only what a program's lines must share (a line per schedule
        // repeating exploration_trace would be 36 times the file)
        if (i == 0 || k == "program_name" || k == "program_annotation" ||
            k == "initial_execution_time")
          m.emplace_back(k, &it->value);
        continue;
      }
      if (shape == 'a') {
        m.emplace_back("schedule", &sched);
      } else if (shape == 'b') {
        m.emplace_back("schedule_index", &index_text);
        m.emplace_back("schedules_list", &list);
      } else {
        REQUIRE(sched.IsObject());
        for (auto s = sched.MemberBegin(); s != sched.MemberEnd(); ++s)
          m.emplace_back(std::string(s->name.GetString(), s->name.GetStringLength()), &s->value);
      }
    }
    out.push_back(write_object(m));
  }
  if (shape == 'b') std::reverse(out.begin(), out.end());
  return out;
}

/// The JSONL file `src` (gzip) rewritten one schedule per line in `shape` to `dst` (gzip).
void rewrite_file(const std::string& src, const std::string& dst, char shape) {
  std::string text;
  for (const std::string& line : lcm::test::gz_lines(src))
    for (const std::string& l : split_record(line, shape)) text += l + "\n";
  write_gz(dst, text);
}

// ---- comparisons ----------------------------------------------------------------------------

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void expect_same_features(const ProgramFeatures& a, const ProgramFeatures& b) {
  INFO("program " << a.name);
  CHECK(a.name == b.name);
  CHECK(a.footprint == b.footprint);
  CHECK(a.n_comps == b.n_comps);
  CHECK(a.n_loops == b.n_loops);
  CHECK(same_bits(a.comp_static, b.comp_static));
  CHECK(same_bits(a.expr, b.expr));
  CHECK(same_bits(a.comp_sched, b.comp_sched));
  CHECK(same_bits(a.loops, b.loops));
  CHECK(same_bits(a.speedup, b.speedup));
  CHECK(same_bits(a.min_time_ms, b.min_time_ms));
  CHECK(a.schedule_index == b.schedule_index);
  CHECK(a.sched_str == b.sched_str);
  CHECK(std::memcmp(&a.initial_time_ms, &b.initial_time_ms, sizeof(double)) == 0);
  REQUIRE(a.tree.nodes.size() == b.tree.nodes.size());
  CHECK(a.tree.roots == b.tree.roots);
  for (size_t i = 0; i < a.tree.nodes.size(); ++i) {
    CHECK(a.tree.nodes[i].loop_index == b.tree.nodes[i].loop_index);
    CHECK(a.tree.nodes[i].comp_indices == b.tree.nodes[i].comp_indices);
    CHECK(a.tree.nodes[i].children == b.tree.nodes[i].children);
  }
}

struct Read {
  std::vector<ProgramFeatures> features;
  SplitCounts counts;
  std::map<std::string, int64_t> skips;
  std::vector<SkipEvent> events;
};

Read read_file(const std::string& path, int workers = 2) {
  PrepareOptions opt;
  opt.source = path;
  opt.nb_workers = workers;
  opt.print_skips = 0;
  SkipLog log(false, 0);
  Read r;
  r.features = read_features(opt, log, r.counts);
  r.skips = log.counts();
  r.events = log.events();
  return r;
}

void expect_same_read(const Read& a, const Read& b) {
  lcm::test::check_same_read_counts(a.counts, b.counts);
  CHECK(a.counts.skipped_records_counted == b.counts.skipped_records_counted);
  CHECK(a.skips == b.skips);
  REQUIRE(a.features.size() == b.features.size());
  for (size_t i = 0; i < a.features.size(); ++i) expect_same_features(a.features[i], b.features[i]);
}

// ---- synthetic records ----------------------------------------------------------------------

/// A valid schedule of the program of kFields whose execution_times are [t].
std::string schedule(double t) {
  return R"({"comp00":{"shiftings":null,"tiling":{},"unrolling_factor":null,)"
         R"("parallelized_dim":null,"transformations_list":[]},"fusions":null,)"
         R"("tree_structure":{"roots":[{"loop_name":"i0","computations_list":[],"child_list":[)"
         R"({"loop_name":"i1","computations_list":["comp00"],"child_list":[]}]}]},)"
         R"("sched_str":"","execution_times":[)" +
         std::to_string(t) + "]}";
}

/// program_annotation of a two-loop, one-computation program; `memory` varies it.
std::string annotation(const std::string& memory = "0.5") {
  return lcm::test::tiny_annotation(memory);
}

std::string head(const std::string& name, const std::string& ann) {
  return R"({"program_name":")" + name + R"(","program_annotation":)" + ann +
         R"(,"initial_execution_time":4.0)";
}

/// One line of program `name` holding the schedule with time t, in `shape` ('a', 'b' with
/// schedule_index `index`, 'c').
std::string line(const std::string& name, double t, char shape = 'a', int index = 0,
                 const std::string& ann = annotation()) {
  const std::string s = schedule(t);
  if (shape == 'a') return head(name, ann) + R"(,"schedule":)" + s + "}";
  if (shape == 'b')
    return head(name, ann) + R"(,"schedule_index":)" + std::to_string(index) +
           R"(,"schedules_list":[)" + s + "]}";
  return head(name, ann) + "," + s.substr(1);  // the schedule's members at the top level
}

/// The whole-program line of `name` with the schedules of times `ts`.
std::string whole(const std::string& name, const std::vector<double>& ts) {
  std::string l = head(name, annotation()) + R"(,"schedules_list":[)";
  for (size_t i = 0; i < ts.size(); ++i) l += (i ? "," : "") + schedule(ts[i]);
  return l + "]}";
}

std::string write_lines(const std::string& tag, const std::vector<std::string>& lines) {
  const std::string path = lcm::test::temp_dir("schedule_lines") + "/" + tag + ".jsonl";
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  write_text(path, text);
  return path;
}

std::vector<double> first_times(const Program& p) {
  std::vector<double> t;
  for (const Schedule& s : p.schedules)
    t.push_back(s.execution_times.empty() ? -1.0 : s.execution_times[0]);
  return t;
}

std::vector<SkipEvent> events_of(const std::vector<SkipEvent>& ev, const std::string& reason) {
  std::vector<SkipEvent> out;
  for (const SkipEvent& e : ev)
    if (e.reason == reason) out.push_back(e);
  return out;
}

int64_t total(const std::map<std::string, int64_t>& m) {
  int64_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}

/// Checks that `log` holds exactly one skip, `level`/`reason`, at line `line` of program
/// `program`; returns it.
SkipEvent the_only_skip(const SkipLog& log, const std::string& level, const std::string& reason,
                        int64_t line, const std::string& program) {
  CHECK(log.count(level, reason) == 1);
  CHECK(total(log.counts()) == 1);
  const auto ev = events_of(log.events(), reason);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].line == line);
  CHECK(ev[0].program == program);
  return ev[0];
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The real sample, one schedule per line
// ------------------------------------------------------------------------------------------------

// The validation file in each shape (the training file, 3.5x larger, goes through lcm-prepare in
// the next test case: CI time).
TEST_CASE("sample valid rewritten one schedule per line (shapes a, b, c): same features") {
  LCM_REQUIRE_SHARED(valid, "looperset-sample/valid.jsonl.gz");
  const std::string dir = lcm::test::temp_dir("schedule_lines_sample");
  for (const std::string& src : {valid}) {
    const Read orig = read_file(src);
    REQUIRE(orig.features.size() > 10);
    int64_t lines = 0;
    for (const ProgramFeatures& f : orig.features) lines += f.n_schedules();
    REQUIRE(lines > 1000);
    for (char shape : {'a', 'b', 'c'}) {
      INFO(src << " shape " << shape);
      const std::string dst = dir + "/" + fs::path(src).filename().string() + "_" + shape + ".gz";
      rewrite_file(src, dst, shape);
      const Read split = read_file(dst);
      expect_same_read(orig, split);
      fs::remove(dst);
    }
  }
}

TEST_CASE("lcm-prepare on the sample rewritten one schedule per line reports the same counts") {
  LCM_REQUIRE_SHARED(train, "looperset-sample/train.jsonl.gz");
  LCM_REQUIRE_SHARED(valid, "looperset-sample/valid.jsonl.gz");
  const std::string dir = lcm::test::temp_dir("schedule_lines_prepare");
  rewrite_file(train, dir + "/train_c.jsonl.gz", 'c');
  rewrite_file(valid, dir + "/valid_b.jsonl.gz", 'b');
  auto prepare = [&](const std::string& tag, const std::string& t, const std::string& v) {
    const std::string cfg = dir + "/" + tag + ".yaml";
    write_text(cfg, "experiment:\n  base_path: " + dir + "/" + tag + "\ndata:\n  train_file: " + t +
                        "\n  valid_file: " + v + "\n  nb_workers: 2\n");
    const lcm::test::RunResult r =
        lcm::test::run_tool(dir, "lcm-prepare", "--config " + cfg + " -q");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    // the count lines of both splits (not the paths, times or cache sizes)
    std::string counts;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("  records", 0) == 0 || l.rfind("  programs", 0) == 0 ||
          l.rfind("  schedules", 0) == 0 || l.rfind("  footprints", 0) == 0 ||
          l.rfind("  batches", 0) == 0 || l.rfind("    ", 0) == 0)
        counts += l + "\n";
    return counts;
  };
  const std::string a = prepare("orig", train, valid);
  const std::string b = prepare("lines", dir + "/train_c.jsonl.gz", dir + "/valid_b.jsonl.gz");
  CHECK(lcm::test::contains(a, " kept"));
  CHECK(std::count(a.begin(), a.end(), '\n') >= 10);
  CHECK(a == b);
}

// ------------------------------------------------------------------------------------------------
// Synthetic groups
// ------------------------------------------------------------------------------------------------

TEST_CASE("each shape of one-schedule lines gives the program of the whole-program line") {
  SkipLog wlog(false, 0);
  const auto ref = read_all_programs(write_lines("whole", {whole("p", {1, 2, 3})}), wlog);
  REQUIRE(ref.size() == 1);
  for (char shape : {'a', 'b', 'c'}) {
    INFO("shape " << shape);
    SkipLog log(false, 0);
    const auto ps = read_all_programs(
        write_lines(std::string("shape_") + shape,
                    {line("p", 1, shape, 0), line("p", 2, shape, 1), line("p", 3, shape, 2)}),
        log);
    CHECK(total(log.counts()) == 0);
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].name == "p");
    CHECK(ps[0].source_line == 1);
    CHECK(first_times(ps[0]) == std::vector<double>{1, 2, 3});
    CHECK(ps[0].computations.size() == ref[0].computations.size());
    CHECK(ps[0].iterators.size() == ref[0].iterators.size());
    CHECK(ps[0].initial_execution_time == ref[0].initial_execution_time);
    REQUIRE(ps[0].schedules.size() == 3);
    CHECK(ps[0].schedules[1].tree.has_value());
    CHECK(ps[0].schedules[1].comps.size() == 1);
  }
}

TEST_CASE("schedule_index orders a group; a repeated, bad or missing index is a named skip") {
  SkipLog log(false, 0);
  auto ps = read_all_programs(
      write_lines("index_order",
                  {line("p", 3, 'b', 2), line("p", 1, 'b', 0), line("p", 2, 'b', 1)}),
      log);
  REQUIRE(ps.size() == 1);
  CHECK(first_times(ps[0]) == std::vector<double>{1, 2, 3});
  CHECK(total(log.counts()) == 0);

  // line 3 repeats index 0, line 4 has "x", line 5 none: three named skips, lines 1-2 kept
  const std::string x =
      head("p", annotation()) + R"(,"schedule_index":"x","schedule":)" + schedule(7) + "}";
  SkipLog log2(false, 0);
  ps = read_all_programs(write_lines("index_bad", {line("p", 2, 'b', 1), line("p", 1, 'b', 0),
                                                   line("p", 9, 'b', 0), x, line("p", 8, 'a')}),
                         log2);
  REQUIRE(ps.size() == 1);
  CHECK(first_times(ps[0]) == std::vector<double>{1, 2});
  CHECK(log2.count("schedule", "duplicate_schedule_index") == 1);
  CHECK(log2.count("schedule", "bad_schedule_index") == 2);
  CHECK(total(log2.counts()) == 3);
  const auto ev = log2.events();
  REQUIRE(events_of(ev, "duplicate_schedule_index").size() == 1);
  CHECK(events_of(ev, "duplicate_schedule_index")[0].line == 3);
  CHECK(events_of(ev, "duplicate_schedule_index")[0].program == "p");
  CHECK(lcm::test::contains(events_of(ev, "duplicate_schedule_index")[0].detail, "line 2"));
  REQUIRE(events_of(ev, "bad_schedule_index").size() == 2);
  CHECK(events_of(ev, "bad_schedule_index")[0].line == 4);
  CHECK(events_of(ev, "bad_schedule_index")[1].line == 5);

  // a schedules_list of two entries next to a schedule_index: the line is a named skip
  const std::string two = head("p", annotation()) + R"(,"schedule_index":1,"schedules_list":[)" +
                          schedule(5) + "," + schedule(6) + "]}";
  SkipLog log3(false, 0);
  ps = read_all_programs(write_lines("index_two", {line("p", 1, 'b', 0), two}), log3);
  REQUIRE(ps.size() == 1);
  CHECK(first_times(ps[0]) == std::vector<double>{1});
  CHECK(log3.count("schedule", "bad_schedule_line") == 1);
  CHECK(total(log3.counts()) == 1);
}

TEST_CASE("a later group of a program already read is a duplicate_program named with its line") {
  const std::string path =
      write_lines("nonconsecutive", {line("p", 1), line("p", 2), whole("q", {1, 2}), line("p", 3),
                                     line("p", 4), line("r", 1, 'c'), line("r", 2, 'c')});
  const Read r = read_file(path);
  REQUIRE(r.features.size() == 3);
  CHECK(r.features[0].name == "p");
  CHECK(r.features[0].n_schedules() == 2);
  CHECK(r.features[1].name == "q");
  CHECK(r.features[2].name == "r");
  CHECK(r.counts.records_read == 4);
  CHECK(r.counts.programs_read == 4);
  CHECK(r.counts.schedules_read == 8);
  CHECK(r.skips.at("program/duplicate_program") == 1);
  CHECK(total(r.skips) == 1);
  const auto dup = events_of(r.events, "duplicate_program");
  REQUIRE(dup.size() == 1);
  CHECK(dup[0].program == "p");
  CHECK(dup[0].line == 4);
  CHECK(dup[0].detail == "the name was already read at line 1; this record is skipped");
}

TEST_CASE("a differing program_annotation drops that line's schedule, named") {
  SkipLog log(false, 0);
  const auto ps = read_all_programs(
      write_lines("annotation",
                  {line("p", 1), line("p", 2, 'a', 0, annotation("9")), line("p", 3)}),
      log);
  REQUIRE(ps.size() == 1);
  CHECK(first_times(ps[0]) == std::vector<double>{1, 3});
  const SkipEvent e = the_only_skip(log, "schedule", "program_annotation_differs", 2, "p");
  CHECK(lcm::test::contains(e.detail, "line 1"));
}

TEST_CASE("a malformed line inside a group is a named line skip; the group's other lines stay") {
  // a schedule line cut short inside its program_annotation (before its schedule), and one cut
  // inside its schedule
  const std::string cut = line("p", 2).substr(0, 300);
  const std::string cut_late = line("p", 2).substr(0, line("p", 2).size() - 20);
  const std::string path =
      write_lines("malformed", {line("p", 1), cut, line("p", 3), line("p", 4), whole("q", {1, 2})});
  SkipLog log(false, 0);
  const auto ps = read_all_programs(path, log);
  REQUIRE(ps.size() == 2);
  CHECK(first_times(ps[0]) == std::vector<double>{1, 3, 4});
  CHECK(ps[1].name == "q");
  the_only_skip(log, "line", "malformed_json", 2, "p");
  // the pipeline counts the group's 4 lines as 4 schedules read, 3 kept
  const Read r = read_file(path);
  CHECK(r.counts.records_read == 2);
  CHECK(r.counts.schedules_read == 6);
  CHECK(r.counts.schedules_featurized == 5);

  // the first line malformed: the program fields come from the next line; the program is the
  // group's and starts at its first line
  SkipLog log2(false, 0);
  const auto ps2 = read_all_programs(
      write_lines("malformed_first", {cut_late, line("p", 3), line("p", 4)}), log2);
  REQUIRE(ps2.size() == 1);
  CHECK(first_times(ps2[0]) == std::vector<double>{3, 4});
  CHECK(ps2[0].source_line == 1);
  CHECK(log2.count("line", "malformed_json") == 1);
  CHECK(total(log2.counts()) == 1);

  // every line of a group malformed: each is named, no program from it
  SkipLog log3(false, 0);
  const auto ps3 =
      read_all_programs(write_lines("malformed_all", {cut_late, cut, whole("q", {1, 2})}), log3);
  REQUIRE(ps3.size() == 1);
  CHECK(ps3[0].name == "q");
  CHECK(log3.count("line", "malformed_json") == 2);
  CHECK(total(log3.counts()) == 2);
}

TEST_CASE("a mixed file: whole-program lines and one-schedule groups of each shape") {
  const std::string path = write_lines(
      "mixed", {whole("w1", {1, 2}), line("a", 1, 'a'), line("a", 2, 'a'), whole("w2", {3, 4, 5}),
                line("b", 1, 'b', 0), line("b", 2, 'b', 1), line("b", 3, 'b', 2), line("c", 1, 'c'),
                line("c", 2, 'c'), "", whole("w3", {6, 7})});
  SkipLog log(false, 0);
  const auto ps = read_all_programs(path, log);
  CHECK(total(log.counts()) == 0);
  REQUIRE(ps.size() == 6);
  const std::vector<std::string> names = {"w1", "a", "w2", "b", "c", "w3"};
  const std::vector<int64_t> lines = {1, 2, 4, 5, 8, 11};
  const std::vector<size_t> n = {2, 2, 3, 3, 2, 2};
  for (size_t i = 0; i < ps.size(); ++i) {
    CHECK(ps[i].name == names[i]);
    CHECK(ps[i].source_line == lines[i]);
    CHECK(ps[i].schedules.size() == n[i]);
  }
  const Read r = read_file(path);
  CHECK(r.features.size() == 6);
  CHECK(r.counts.records_read == 6);
  CHECK(r.counts.schedules_read == 14);
  CHECK(total(r.skips) == 0);
}

TEST_CASE("one schedule line per program: each is a program of one schedule (lt_2_schedules)") {
  const std::string path =
      write_lines("single", {line("p", 1, 'a'), line("q", 1, 'b', 0), line("r", 1, 'c')});
  SkipLog log(false, 0);
  const auto ps = read_all_programs(path, log);
  REQUIRE(ps.size() == 3);
  for (const Program& p : ps) CHECK(p.schedules.size() == 1);
  CHECK(total(log.counts()) == 0);
  const Read r = read_file(path);
  CHECK(r.features.empty());
  CHECK(r.counts.programs_read == 3);
  CHECK(r.counts.schedules_read == 3);
  CHECK(r.skips.at("program/lt_2_schedules") == 3);
  CHECK(total(r.skips) == 3);
}

TEST_CASE("a group skipped whole by the reader still counts its lines' schedules") {
  // an unknown expr_type: the program is skipped; its 3 schedules are read and dropped
  std::string bad = annotation();
  bad.replace(bad.find("\"add\""), 5, "\"weird\"");
  const std::string path =
      write_lines("skipped_group", {line("p", 1, 'a', 0, bad), line("p", 2, 'a', 0, bad),
                                    line("p", 3, 'a', 0, bad), whole("q", {1, 2})});
  const Read r = read_file(path);
  CHECK(r.features.size() == 1);
  CHECK(r.skips.at("program/unknown_expr_type") == 1);
  CHECK(r.counts.records_read == 2);
  CHECK(r.counts.schedules_read == 5);
  CHECK(r.counts.skipped_records_counted == 1);
}

TEST_CASE("sniff_schedule_line reads top-level keys only, strings and nesting skipped whole") {
  auto sniff = [](const std::string& s) { return sniff_schedule_line(s.data(), s.size()); };
  CHECK_FALSE(sniff(whole("p", {1, 2})).single_schedule);
  CHECK(sniff(line("p", 1, 'a')).single_schedule);
  CHECK(sniff(line("p", 1, 'a')).name == "p");
  CHECK(sniff(line("p", 1, 'b')).single_schedule);
  CHECK(sniff(line("p", 1, 'c')).single_schedule);
  CHECK(sniff(line("p", 1, 'c')).name == "p");
  // a one-entry schedules_list without an index is a whole program of one schedule
  CHECK_FALSE(sniff(whole("p", {1})).single_schedule);
  // nested keys named like markers do not count; nor do keys inside strings
  CHECK_FALSE(
      sniff(R"({"program_name":"p","x":{"schedule":{}},"schedules_list":[]})").single_schedule);
  CHECK_FALSE(
      sniff(R"({"program_name":"p","x":"\",\"schedule\":{","schedules_list":[]})").single_schedule);
  CHECK(sniff(R"({"program_name":"a\"b","x":"}]\\","schedule":{}})").single_schedule);
  CHECK(sniff(R"({"program_name":"a\"b","x":"}]\\","schedule":{}})").name == R"(a\"b)");
  // the index may come after a one-entry schedules_list
  CHECK(sniff(R"({"schedules_list":[{}],"program_name":"p","schedule_id":3})").single_schedule);
  // malformed or not an object: not a schedule line (the parse reports it)
  CHECK_FALSE(sniff("[1,2]").single_schedule);
  CHECK_FALSE(sniff(R"({"program_name":"p","x":[[[)").single_schedule);
  CHECK_FALSE(sniff("").single_schedule);
  // deep nesting is no problem (no recursion)
  const std::string deep = R"({"x":)" + std::string(100000, '[') + std::string(100000, ']') +
                           R"(,"program_name":"p","execution_times":[1]})";
  CHECK(sniff(deep).single_schedule);
  CHECK(sniff(deep).name == "p");
}

TEST_CASE("a gzip cut inside a group keeps the group's complete lines") {
  std::string text;
  for (int i = 0; i < 40; ++i) text += line("p", 1 + i) + "\n";
  const std::string dir = lcm::test::temp_dir("schedule_lines_cut");
  write_gz(dir + "/full.jsonl.gz", text);
  std::string gz = lcm::test::slurp(dir + "/full.jsonl.gz");
  REQUIRE(gz.size() > 200);
  write_text(dir + "/cut.jsonl.gz", gz.substr(0, gz.size() - 60));
  SkipLog log(false, 0);
  const auto ps = read_all_programs(dir + "/cut.jsonl.gz", log);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].schedules.size() >= 1);
  CHECK(ps[0].schedules.size() < 40);
  CHECK(first_times(ps[0]).front() == 1);
  CHECK(log.count("line", "truncated_gzip") == 1);
}
