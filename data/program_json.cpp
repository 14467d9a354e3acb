// parse_program (reader.hpp): one raw record's JSON text → data::Program through RapidJSON's
// DOM, every malformed field a counted, named skip or a Schedule::parse_problem: the record-level
// checks and fields here, the annotation, the schedules and the typed form in the files
// json_fields.hpp names; parse_schedule_json, choose_loop_level_base, read_all_programs.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "data/json_fields.hpp"
#include "data/reader.hpp"
#include "data/record_fields.hpp"
#include "data/schedule_lines.hpp"

namespace lcm::data {

using namespace json_detail;

namespace {

/// Per-thread parse state reused across records: the mutable NUL-terminated copy needed by insitu
/// parsing and the DOM's memory (a pool whose first block grows to the largest record seen).
InsituBuffers& scratch() {
  thread_local InsituBuffers s;
  return s;
}

/// The skips of one record: each names the record's file and line.
struct RecordSkips {
  const RawRecord& rec;
  SkipLog& log;
  void operator()(const char* level, const std::string& reason, const std::string& program,
                  const std::string& detail, int64_t schedule = -1) const {
    SkipEvent e;
    e.level = level;
    e.reason = reason;
    e.file = rec.file;
    e.line = rec.line;
    e.program = program;
    e.schedule = schedule;
    e.detail = detail;
    log.add(e);
  }
};

/// False after a line skip when `doc` is no program record: malformed JSON, not an object, or an
/// object with no record field at all (e.g. a `{"note": ...}` header line of a JSONL file: one
/// line skip, instead of a note plus missing_program_annotation).
bool is_program_record(const rapidjson::Document& doc, const RawRecord& rec,
                       const RecordSkips& skip) {
  if (doc.HasParseError()) {
    std::string name = rec.name_hint.empty() ? sniff_program_name(rec.json) : rec.name_hint;
    skip("line", "malformed_json", name,
         std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at byte " +
             std::to_string(doc.GetErrorOffset()) + " of the record");
    return false;
  }
  if (!doc.IsObject()) {
    skip("line", "not_an_object", rec.name_hint, std::string("the record is ") + type_name(doc));
    return false;
  }
  if (!has_record_key(doc)) {
    std::string first = doc.MemberCount() == 0
                            ? std::string("it is empty")
                            : "its first key is \"" +
                                  std::string(doc.MemberBegin()->name.GetString(),
                                              doc.MemberBegin()->name.GetStringLength()) +
                                  "\"";
    skip("line", "not_a_program_record", rec.name_hint,
         "an object without any program record field (program_annotation, schedules_list, "
         "program_name, ...); " +
             first);
    return false;
  }
  return true;
}

/// p.name from program_name, the record's name hint, or its file and line (a note); false after a
/// program skip when the name cannot be written to outputs (bad_name) or the record repeats a
/// key (duplicate_key).
bool name_program(const rapidjson::Document& doc, const RawRecord& rec, const RecordSkips& skip,
                  Program& p) {
  bool name_from_record = true;  // false: named after the file and line
  if (const Value* n = find(doc, "program_name"); n && n->IsString() && n->GetStringLength() > 0)
    p.name.assign(n->GetString(), n->GetStringLength());
  else if (!rec.name_hint.empty())
    p.name = rec.name_hint;
  else {
    name_from_record = false;
    p.name = rec.file + ":" + std::to_string(rec.line);
    skip("note", "missing_program_name", p.name,
         "no program_name field; named after its file and line");
  }
  // A name that is not valid UTF-8 or holds a control character would corrupt every output that
  // names the program (JSON, JSONL, CSV): the program is skipped, its name shown escaped.
  if (std::string why = name_from_record ? name_problem(p.name) : std::string(); !why.empty()) {
    skip("program", "bad_name", escape_text(p.name), "program name: " + why);
    return false;
  }
  // Readers disagree on a repeated key (RapidJSON finds the first, Python's json keeps the last):
  // such a record means two different programs, so it is skipped whole.
  if (std::string dup = first_duplicate_key(doc); !dup.empty()) {
    skip("program", "duplicate_key", p.name,
         "key " + dup + " appears twice in one object (JSON readers disagree on which one counts)");
    return false;
  }
  return true;
}

/// The program-level fields: the annotation and initial_execution_time. Missing, null or empty
/// times: NaN. featurize drops such a program ("bad_initial_time") unless it only predicts
/// (keep_unlabeled): a new program an autoscheduler asks about has no measurements. A list of
/// measurements gives its least value, as execution_times do. Throws Problem.
void read_program_fields(const rapidjson::Document& doc, const Value& ann, const Value& sl,
                         const ReadOptions& opt, const RawRecord& rec, Program& p) {
  if (!ann.IsObject())
    fail("bad_field", "program_annotation", std::string("expected an object, got ") + show(ann));
  if (!sl.IsArray())
    fail("bad_field", "schedules_list", std::string("expected an array, got ") + show(sl));
  parse_annotation(ann, p);
  const auto it = doc.FindMember("initial_execution_time");
  std::vector<double> t;
  if (it != doc.MemberEnd())
    read_times(it->value, "initial_execution_time", "bad_field", opt, rec, t);
  p.initial_execution_time =
      t.empty() ? std::numeric_limits<double>::quiet_NaN() : *std::min_element(t.begin(), t.end());
}

/// The schedules of `sl` into p.schedules, with the notes they leave: computation entries
/// missing, forms that disagree.
struct ScheduleListNotes {
  int64_t missing = 0, first_missing = -1;
  int64_t first_disagreement = -1, disagreements = 0;
  std::string disagreement;
};
ScheduleListNotes read_schedules(const Value& sl, const ReadOptions& opt, const RawRecord& rec,
                                 Program& p) {
  ScheduleListNotes n;
  p.schedules.reserve(sl.Size());
  for (rapidjson::SizeType i = 0; i < sl.Size(); ++i) {
    ScheduleNotes notes;
    p.schedules.push_back(parse_schedule(sl[i], p, opt, rec, notes));
    if (notes.missing > 0 && n.first_missing < 0) n.first_missing = i;
    n.missing += notes.missing;
    if (!notes.disagreement.empty()) {
      if (n.first_disagreement < 0) {
        n.first_disagreement = i;
        n.disagreement = std::move(notes.disagreement);
      }
      ++n.disagreements;
    }
  }
  return n;
}

/// The loop tree every schedule falls back on (schedule 0's tree_structure, else the iterators'
/// parent/child links) must be a loop forest (false after a bad_tree skip); a later schedule's
/// own bad tree drops only it.
bool check_trees(Program& p, const RecordSkips& skip) {
  const Schedule& s0 = p.schedules[0];
  const std::string why = s0.tree ? loop_tree_problem(*s0.tree) : iterator_tree_problem(p);
  if (!why.empty()) {
    skip("program", "bad_tree", p.name,
         (s0.tree ? "schedules_list[0].tree_structure: " : "program_annotation.iterators: ") + why);
    return false;
  }
  for (size_t i = 1; i < p.schedules.size(); ++i) {
    Schedule& s = p.schedules[i];
    if (!s.tree || !s.parse_problem.empty()) continue;
    if (std::string w = loop_tree_problem(*s.tree); !w.empty()) {
      s.parse_problem = "bad_tree";
      s.parse_detail = "tree_structure: " + w;
    }
  }
  return true;
}

/// The notes of a kept program: forms that disagree, computation entries missing.
void note_schedules(const Program& p, const ScheduleListNotes& n, const RecordSkips& skip) {
  if (n.disagreements > 0)
    skip("note", "schedule_forms_disagree", p.name,
         std::to_string(n.disagreements) + " schedule(s) whose forms disagree, kept from the " +
             "chosen form (data.schedule_check=report); first: " + n.disagreement,
         n.first_disagreement);
  if (n.missing > 0)
    skip("note", "missing_comp_schedule", p.name,
         std::to_string(n.missing) + " computation entries missing (first in schedule " +
             std::to_string(n.first_missing) + "); default (untransformed) schedule used");
}

}  // namespace

std::optional<Program> parse_program(const RawRecord& rec, SkipLog& log, const ReadOptions& opt) {
  if (rec.schedule_line) {  // one schedule per line: the group becomes one ordinary record
    RawRecord merged;
    if (!merge_schedule_lines(rec, log, merged)) return std::nullopt;
    std::optional<Program> p = parse_program(merged, log, opt);
    if (p) p->from_schedule_lines = true;
    return p;
  }
  const RecordSkips skip{rec, log};
  InsituDocument parsed(scratch(), rec.json);
  const rapidjson::Document& doc = parsed.doc;
  if (!is_program_record(doc, rec, skip)) return std::nullopt;
  Program p;
  p.source_file = rec.file;
  p.source_line = rec.line;
  if (!name_program(doc, rec, skip, p)) return std::nullopt;
  const Value* ann = find(doc, "program_annotation");
  if (!ann || ann->IsNull()) {
    skip("program", "missing_program_annotation", p.name, "");
    return std::nullopt;
  }
  const Value* sl = find(doc, "schedules_list");
  if (!sl || sl->IsNull() || (sl->IsArray() && sl->Empty())) {
    skip("program", "empty_schedules_list", p.name,
         sl ? "schedules_list is empty" : "no schedules_list");
    return std::nullopt;
  }
  try {
    read_program_fields(doc, *ann, *sl, opt, rec, p);
  } catch (Problem& pr) {
    skip("program", pr.reason, p.name, problem_detail(pr));
    return std::nullopt;
  }
  const ScheduleListNotes notes = read_schedules(*sl, opt, rec, p);
  if (!check_trees(p, skip)) return std::nullopt;
  note_schedules(p, notes, skip);
  return p;
}

Schedule parse_schedule_json(const std::string& json, Program& p, const ReadOptions& opt) {
  auto problem = [](const char* reason, std::string detail) {
    Schedule s;
    s.parse_problem = reason;
    s.parse_detail = std::move(detail);
    return s;
  };
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError())
    return problem("malformed_json", std::string(rapidjson::GetParseError_En(doc.GetParseError())) +
                                         " at byte " + std::to_string(doc.GetErrorOffset()) +
                                         " of the schedule");
  if (!doc.IsObject())
    return problem("bad_field", std::string("expected a schedule object, got ") + show(doc));
  if (std::string dup = first_duplicate_key(doc); !dup.empty())
    return problem("duplicate_key", "key " + dup + " appears twice in one object");
  // a program annotation where a schedule belongs (a caller's lines out of step) would read as
  // the untransformed schedule: its iterators and computations are no schedule keys
  if (doc.HasMember("iterators") && doc.HasMember("computations"))
    return problem("not_a_schedule",
                   "the schedule has the program annotation's iterators and computations (are "
                   "the query's lines out of step?)");
  RawRecord rec;
  rec.file = p.source_file;
  rec.line = p.source_line;
  ScheduleNotes notes;
  Schedule s = parse_schedule(doc, p, opt, rec, notes);
  if (s.tree && s.parse_problem.empty())
    if (std::string w = loop_tree_problem(*s.tree); !w.empty()) {
      s.parse_problem = "bad_tree";
      s.parse_detail = "tree_structure: " + w;
    }
  return s;
}

LoopLevelBaseChoice choose_loop_level_base(const std::string& path, LoopLevelBase setting,
                                           const ReadOptions& opt) {
  LoopLevelBaseChoice c;
  if (setting != LoopLevelBase::Auto) {
    c.base = setting == LoopLevelBase::One ? 1 : 0;
    c.text =
        std::to_string(c.base) + "-based (data.loop_level_base=" + std::to_string(c.base) + ")";
    return c;
  }
  SkipLog quiet(false, 0);
  RecordSource src(path, quiet);
  ReadOptions scan = opt;
  scan.loop_level_base = 0;
  scan.schedule_check = ScheduleCheck::Off;
  scan.schedule_source = ScheduleSource::Typed;  // parse every typed list met
  RawRecord rec;
  int64_t records = 0, last_typed = -1;
  bool any_typed = false;
  while (records < 2000 && records - last_typed <= 20 && src.next(rec)) {
    ++records;
    // A cheap test first: most files have no typed list at all.
    if (rec.json.find("\"loop_levels\"") == std::string::npos) continue;
    const std::optional<Program> p = parse_program(rec, quiet, scan);
    if (!p) continue;
    if (p->typed_entries > 0) {
      any_typed = true;
      last_typed = records;
    }
    c.zero += p->typed_levels_zero;
    c.at_depth += p->typed_levels_at_depth;
  }
  if (c.zero > 0 && c.at_depth > 0)
    throw DataError(path + ": the loop levels of typed transformations_list entries are both 0 (" +
                    std::to_string(c.zero) + " times) and equal to a computation's depth (" +
                    std::to_string(c.at_depth) +
                    " times) in the first records: set data.loop_level_base=0 or 1");
  if (c.at_depth > 0) {
    c.base = 1;
    c.text = "1-based (detected: " + std::to_string(c.at_depth) +
             " level(s) equal a computation's depth)";
  } else if (c.zero > 0) {
    c.text = "0-based (detected: " + std::to_string(c.zero) + " level(s) are 0)";
  } else if (any_typed) {
    c.text = "0-based (assumed: the first records prove neither 0- nor 1-based)";
  }
  return c;
}

std::vector<Program> read_all_programs(const std::string& path, SkipLog& log,
                                       const ReadOptions& opt) {
  RecordSource src(path, log);
  std::vector<Program> out;
  RawRecord rec;
  while (src.next(rec))
    if (auto p = parse_program(rec, log, opt)) out.push_back(std::move(*p));
  return out;
}

}  // namespace lcm::data
