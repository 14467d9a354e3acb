// lcm-inspect's reports of an InspectReport (inspect.hpp): the human text and the versioned JSON.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/inspect.hpp"
#include "data/inspect_internal.hpp"
#include "data/prepare.hpp"

namespace lcm::data {

using inspect_detail::KeyLevel;
using inspect_detail::KeySection;

// ---- the human report ----
namespace {

std::string num(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return (n < 0 ? "-" : "") + s;
}

/// "a 3, b 2" in decreasing count (ties by name).
std::string inline_hist(const Histogram& h) {
  std::vector<std::pair<std::string, int64_t>> v(h.begin(), h.end());
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::string out;
  for (auto& [k, n] : v) out += (out.empty() ? "" : ", ") + k + " " + num(n);
  return out.empty() ? "-" : out;
}

/// The key histogram of `level` with each key's use.
void key_table(std::ostringstream& o, KeyLevel level, const Histogram& h) {
  o << "    " << inspect_detail::key_section(level).text_title << (h.empty() ? ": -" : ":") << "\n";
  std::vector<std::pair<std::string, int64_t>> v(h.begin(), h.end());
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (auto& [k, n] : v) {
    const KeyUse u = inspect_detail::key_use(level, k);
    char buf[160];
    std::snprintf(buf, sizeof buf, "      %-28s %12s", k.c_str(), num(n).c_str());
    o << buf
      << (u == KeyUse::Read      ? ""
          : u == KeyUse::Ignored ? "  (ignored by lcm)"
                                 : "  (UNKNOWN: not read by lcm)")
      << "\n";
  }
}

/// The file, its layout and size, and what lcm reads and featurizes from it.
void text_reads(std::ostringstream& o, const InspectReport& r) {
  o << (r.file.empty() ? "total (" + count_of(r.files, "file") + ")" : r.file) << "\n";
  o << "  layout       "
    << (r.layouts.size() == 1 && r.layouts.begin()->second == 1 ? r.layouts.begin()->first
                                                                : inline_hist(r.layouts))
    << "\n";
  o << "  bytes        " << num(r.compressed_bytes) << " on disk ("
    << human_bytes(r.compressed_bytes) << "), " << num(r.uncompressed_bytes) << " uncompressed ("
    << human_bytes(r.uncompressed_bytes) << ")\n";
  if (r.read) {
    o << "  lcm reads    " << num(r.records) << " records: " << num(r.programs_read)
      << " programs, " << num(r.schedules_read) << " schedules; "
      << num(r.records_skipped_by_reader) << " records skipped by the reader";
    const int64_t uncounted = r.records_skipped_by_reader - r.skipped_records_counted;
    if (uncounted > 0) o << " (the schedules of " << num(uncounted) << " are not counted)";
    o << "\n";
  } else {
    o << "  lcm reads    not run (--no-read): " << num(r.records) << " records\n";
  }
  if (r.read && !r.forms_read.empty()) {
    // The lines of lcm-prepare's summary: the forms read and their cross-check.
    SplitCounts c;
    c.forms = r.forms_read;
    c.loop_level_base = r.loop_level_base_used;
    ReadOptions ro;
    std::string lines = schedule_forms_summary(c, ro);
    const std::string from = "  forms      schedules read from: ";
    if (lines.rfind(from, 0) == 0)  // "forms" below is what the file holds
      lines.replace(0, from.size(), "  lcm reads    schedules from: ");
    o << lines;
  } else if (r.read && !r.loop_level_base_used.empty()) {
    o << "  levels     typed loop levels " << r.loop_level_base_used << "\n";
  }
  if (r.features)
    o << "  featurized   " << num(r.programs_featurized) << " programs, "
      << num(r.schedules_featurized)
      << " schedules kept (before the footprint rule, default feature options)\n";
}

/// What the file holds: records, lines, the keys of each level.
void text_holds(std::ostringstream& o, const InspectReport& r) {
  o << "  file holds   " << num(r.program_records) << " program records, "
    << num(r.computations_in_file) << " computations, " << num(r.schedules_in_file)
    << " schedules\n";
  o << "  lines        " << num(r.lines_whole_program) << " whole programs, "
    << num(r.lines_single_schedule) << " single schedules";
  if (!r.single_schedule_forms.empty()) o << " (" << inline_hist(r.single_schedule_forms) << ")";
  o << ", " << num(r.lines_other) << " without schedules\n";
  if (r.lines_single_schedule > 0)
    o << "               consecutive one-schedule lines of one program_name are read as one "
         "program (docs/data-format.md \"One schedule per line\")\n";
  o << "  keys (count; marked: keys lcm does not read)\n";
  for (int l = 0; l < int(KeyLevel::Count); ++l) {
    const KeySection& s = inspect_detail::key_section(KeyLevel(l));
    const Histogram& h = r.*s.keys;
    if (s.text_when_empty || !h.empty()) key_table(o, KeyLevel(l), h);
  }
}

/// The schedule forms, typed entries and per-computation entries of unknown keys only.
void text_forms(std::ostringstream& o, const InspectReport& r) {
  o << "  forms        structured " << num(r.form_structured) << ", typed " << num(r.form_typed)
    << ", sched_str " << num(r.form_sched_str) << ", none " << num(r.form_none) << "\n";
  o << "    combined   " << inline_hist(r.form_combinations) << "\n";
  o << "    sched_str  " << inline_hist(r.sched_str_dialects) << "\n";
  o << "    typed      " << num(r.typed_entries) << " entries";
  if (r.typed_entries > 0)
    o << ": " << inline_hist(r.typed_types)
      << "; naming computations: " << num(r.typed_naming_computations) << " by `computations`, "
      << num(r.typed_naming_comps) << " by `comps`";
  o << "\n";
  o << "  unknown-key entries "
    << count_of(r.unknown_only_entries, "per-computation entry", "per-computation entries")
    << " with only keys lcm does not know\n";
  for (const UnknownEntry& u : r.first_unknown_entries) {
    std::string keys;
    for (const std::string& k : u.keys) keys += (keys.empty() ? "" : ", ") + k;
    o << "    " << u.file << ":" << u.line << " program " << u.program << " schedule " << u.schedule
      << " " << u.computation << ": {" << keys << "}\n";
  }
}

/// The time shapes and machines, the loop-level base.
void text_times(std::ostringstream& o, const InspectReport& r) {
  o << "  times        execution_times: " << inline_hist(r.execution_time_shapes) << "\n";
  if (!r.execution_time_machines.empty())
    o << "               machines: " << inline_hist(r.execution_time_machines) << "\n";
  o << "               initial_execution_time: " << inline_hist(r.initial_time_shapes) << "\n";
  if (!r.initial_time_machines.empty())
    o << "               machines: " << inline_hist(r.initial_time_machines) << "\n";
  o << "  loop levels  " << r.loop_level_verdict() << "\n";
}

/// The skips by reason, the first skips, and the verdict.
void text_skips(std::ostringstream& o, const InspectReport& r) {
  auto skips = [&](const char* title, const Histogram& h) {
    o << "  " << title << (h.empty() ? " none\n" : "\n");
    for (const auto& [k, n] : h) o << "    " << k << ": " << num(n) << "\n";
  };
  if (r.read) skips("reader skips", r.reader_skips);
  if (r.features) skips("feature skips", r.feature_skips);
  if (!r.first_skips.empty()) {
    o << "  first skips\n";
    for (const SkipEvent& e : r.first_skips) {
      o << "    " << e.file << ":" << e.line << " " << e.level << "/" << e.reason;
      if (!e.program.empty()) o << " program " << e.program;
      if (e.schedule >= 0) o << " schedule " << e.schedule;
      if (!e.detail.empty()) o << ": " << e.detail;
      o << "\n";
    }
  }
  const std::vector<std::string> p = r.problems();
  if (p.empty()) {
    o << "  verdict      every schedule form is understood\n";
  } else {
    o << "  verdict      NOT UNDERSTOOD:\n";
    for (const std::string& s : p) o << "    " << s << "\n";
  }
}

}  // namespace

std::string inspect_text(const InspectReport& r) {
  std::ostringstream o;
  text_reads(o, r);
  text_holds(o, r);
  text_forms(o, r);
  text_times(o, r);
  text_skips(o, r);
  return o.str();
}

// ---- the JSON report ----
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void write_hist(Writer& w, const char* name, const Histogram& h) {
  w.Key(name);
  w.StartObject();
  for (const auto& [k, n] : h) {
    w.Key(k.c_str(), rapidjson::SizeType(k.size()));
    w.Int64(n);
  }
  w.EndObject();
}

void write_str(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), rapidjson::SizeType(v.size()));
}

void write_int(Writer& w, const char* key, int64_t v) {
  w.Key(key);
  w.Int64(v);
}

/// The key histogram of `level`: each key's count and use.
void write_keys(Writer& w, KeyLevel level, const Histogram& h) {
  w.Key(inspect_detail::key_section(level).json_name);
  w.StartObject();
  for (const auto& [k, n] : h) {
    w.Key(k.c_str(), rapidjson::SizeType(k.size()));
    w.StartObject();
    w.Key("count");
    w.Int64(n);
    w.Key("lcm");
    w.String(key_use_name(inspect_detail::key_use(level, k)));
    w.EndObject();
  }
  w.EndObject();
}

/// "understood" and "problems" of the problems `p`.
void write_problems(Writer& w, const std::vector<std::string>& p) {
  w.Key("understood");
  w.Bool(p.empty());
  w.Key("problems");
  w.StartArray();
  for (const std::string& s : p) w.String(s.c_str(), rapidjson::SizeType(s.size()));
  w.EndArray();
}

/// The file, its layout and size, and what lcm reads and featurizes from it.
void write_reads(Writer& w, const InspectReport& r) {
  if (!r.file.empty()) write_str(w, "file", r.file);
  write_int(w, "files", r.files);
  write_hist(w, "layouts", r.layouts);
  write_int(w, "records", r.records);
  w.Key("bytes");
  w.StartObject();
  write_int(w, "compressed", r.compressed_bytes);
  write_int(w, "uncompressed", r.uncompressed_bytes);
  w.EndObject();
  if (r.read) {
    w.Key("read");
    w.StartObject();
    write_int(w, "records", r.records);
    write_int(w, "programs", r.programs_read);
    write_int(w, "schedules", r.schedules_read);
    write_int(w, "records_skipped_by_reader", r.records_skipped_by_reader);
    write_int(w, "skipped_records_counted", r.skipped_records_counted);
    write_hist(w, "skips", r.reader_skips);
    write_hist(w, "forms_read", r.forms_read);
    write_hist(w, "several_machines", r.several_machines);
    w.Key("loop_level_base_used");
    w.String(r.loop_level_base_used.c_str());
    w.EndObject();
  }
  if (r.features) {
    w.Key("features");
    w.StartObject();
    write_int(w, "programs", r.programs_featurized);
    write_int(w, "schedules", r.schedules_featurized);
    write_hist(w, "skips", r.feature_skips);
    w.EndObject();
  }
}

void write_first_skips(Writer& w, const InspectReport& r) {
  w.Key("first_skips");
  w.StartArray();
  for (const SkipEvent& e : r.first_skips) {
    w.StartObject();
    write_str(w, "file", e.file);
    write_int(w, "line", e.line);
    write_str(w, "program", e.program);
    write_int(w, "schedule", e.schedule);
    write_str(w, "level", e.level);
    write_str(w, "reason", e.reason);
    write_str(w, "detail", e.detail);
    w.EndObject();
  }
  w.EndArray();
}

/// What the file holds: records, lines, the keys of each level.
void write_holds(Writer& w, const InspectReport& r) {
  write_int(w, "program_records", r.program_records);
  write_int(w, "computations_in_file", r.computations_in_file);
  write_int(w, "schedules_in_file", r.schedules_in_file);
  w.Key("lines");
  w.StartObject();
  write_int(w, "whole_program", r.lines_whole_program);
  write_int(w, "single_schedule", r.lines_single_schedule);
  write_hist(w, "single_schedule_forms", r.single_schedule_forms);
  write_int(w, "other", r.lines_other);
  w.EndObject();
  w.Key("keys");
  w.StartObject();
  for (int l = 0; l < int(KeyLevel::Count); ++l)
    write_keys(w, KeyLevel(l), r.*inspect_detail::key_section(KeyLevel(l)).keys);
  w.EndObject();
}

void write_unknown_entries(Writer& w, const InspectReport& r) {
  w.Key("unknown_key_entries");
  w.StartObject();
  write_int(w, "count", r.unknown_only_entries);
  w.Key("first");
  w.StartArray();
  for (const UnknownEntry& u : r.first_unknown_entries) {
    w.StartObject();
    write_str(w, "file", u.file);
    write_int(w, "line", u.line);
    write_str(w, "program", u.program);
    write_int(w, "schedule", u.schedule);
    write_str(w, "computation", u.computation);
    w.Key("keys");
    w.StartArray();
    for (const std::string& k : u.keys) w.String(k.c_str(), rapidjson::SizeType(k.size()));
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

/// The schedule forms, typed entries and per-computation entries of unknown keys only.
void write_forms(Writer& w, const InspectReport& r) {
  w.Key("forms");
  w.StartObject();
  write_int(w, "structured", r.form_structured);
  write_int(w, "typed", r.form_typed);
  write_int(w, "sched_str", r.form_sched_str);
  write_int(w, "none", r.form_none);
  write_hist(w, "combinations", r.form_combinations);
  write_hist(w, "sched_str_dialects", r.sched_str_dialects);
  w.EndObject();
  w.Key("typed_entries");
  w.StartObject();
  write_int(w, "count", r.typed_entries);
  write_hist(w, "types", r.typed_types);
  write_int(w, "naming_computations", r.typed_naming_computations);
  write_int(w, "naming_comps", r.typed_naming_comps);
  w.EndObject();
  write_unknown_entries(w, r);
}

/// The time shapes and machines, the loop-level base.
void write_times(Writer& w, const InspectReport& r) {
  w.Key("times");
  w.StartObject();
  write_hist(w, "execution_times", r.execution_time_shapes);
  write_hist(w, "execution_times_machines", r.execution_time_machines);
  write_hist(w, "initial_execution_time", r.initial_time_shapes);
  write_hist(w, "initial_execution_time_machines", r.initial_time_machines);
  w.EndObject();
  w.Key("loop_level_base");
  w.StartObject();
  write_str(w, "verdict", r.loop_level_verdict());
  write_int(w, "zero_based_entries", r.level_zero_based);
  write_int(w, "one_based_entries", r.level_one_based);
  w.EndObject();
}

void write_report(Writer& w, const InspectReport& r) {
  w.StartObject();
  write_reads(w, r);
  write_first_skips(w, r);
  write_holds(w, r);
  write_forms(w, r);
  write_times(w, r);
  write_problems(w, r.problems());
  w.EndObject();
}

}  // namespace

std::string inspect_json(const std::vector<InspectReport>& files, const InspectReport& total) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  write_int(w, "version", kInspectReportVersion);
  write_str(w, "tool", "lcm-inspect");
  w.Key("files");
  w.StartArray();
  for (const InspectReport& r : files) write_report(w, r);
  w.EndArray();
  w.Key("total");
  write_report(w, total);
  write_problems(w, total.problems());
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

}  // namespace lcm::data
