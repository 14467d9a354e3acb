// lcm-inspect's logic (inspect.hpp): one DOM walk per record for what the file holds, plus
// parse_program (and featurize) for what lcm reads from it, in the threaded, ordered pipeline of
// read_features (prepare.cpp), whose counts it reproduces.
#include "data/inspect.hpp"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "data/features.hpp"
#include "data/gzip_stream.hpp"
#include "data/name_set.hpp"
#include "data/ordered_pool.hpp"
#include "data/prepare.hpp"
#include "data/record_fields.hpp"
#include "data/schedule_forms.hpp"
#include "data/transformations.hpp"

namespace lcm::data {
namespace {

using Value = rapidjson::Value;

// ---- the keys lcm reads, per level (docs/data-format.md "Program record") ----
struct KnownKey {
  const char* key;
  KeyUse use;
};
const KnownKey kTopKeys[] = {
    {"program_name", KeyUse::Read},
    {"program_annotation", KeyUse::Read},
    {"schedules_list", KeyUse::Read},
    {"initial_execution_time", KeyUse::Read},
    // one schedule per line (docs/data-format.md "One schedule per line")
    {"schedule", KeyUse::Read},
    {"schedule_index", KeyUse::Read},
    {"schedule_id", KeyUse::Read},
    {"execution_times", KeyUse::Read},
    {"sched_str", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
    {"fusions", KeyUse::Read},
    {"tree_structure", KeyUse::Read},
    {"node_name", KeyUse::Ignored},
    {"filename", KeyUse::Ignored},
    {"parameters", KeyUse::Ignored},
    {"exploration_trace", KeyUse::Ignored},
    {"search_time", KeyUse::Ignored},
    {"best_schedule", KeyUse::Ignored},
};
const KnownKey kAnnotationKeys[] = {
    {"iterators", KeyUse::Read},
    {"computations", KeyUse::Read},
    {"memory_size", KeyUse::Ignored},
    {"data_type_size", KeyUse::Ignored},
    {"number_of_additions", KeyUse::Ignored},
    {"buffers", KeyUse::Ignored},
};
// The operation counts and data_type_size are in the real sample's computations; lcm derives
// its features from the expression tree and the accesses instead.
const KnownKey kComputationKeys[] = {
    {"absolute_order", KeyUse::Read},
    {"iterators", KeyUse::Read},
    {"comp_is_reduction", KeyUse::Read},
    {"write_access_relation", KeyUse::Read},
    {"write_buffer_id", KeyUse::Read},
    {"data_type", KeyUse::Read},
    {"accesses", KeyUse::Read},
    {"expression_representation", KeyUse::Read},
    {"data_type_size", KeyUse::Ignored},
    {"number_of_additions", KeyUse::Ignored},
    {"number_of_subtraction", KeyUse::Ignored},
    {"number_of_multiplication", KeyUse::Ignored},
    {"number_of_division", KeyUse::Ignored},
};
// A schedule-level transformations_list is the typed form of data.schedule_source
// (schedule_forms.hpp).
const KnownKey kScheduleKeys[] = {
    {"<computation>", KeyUse::Read},
    {"execution_times", KeyUse::Read},
    {"fusions", KeyUse::Read},
    {"tree_structure", KeyUse::Read},
    {"sched_str", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
    {"legality_check", KeyUse::Ignored},
    {"exploration_method", KeyUse::Ignored},
    {"unfuse_iterators", KeyUse::Ignored},
};
const KnownKey kCompEntryKeys[] = {
    {"parallelized_dim", KeyUse::Read},     {"tiling", KeyUse::Read},
    {"unrolling_factor", KeyUse::Read},     {"shiftings", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
};
const KnownKey kTypedEntryKeys[] = {
    {"type", KeyUse::Read},         {"loop_levels", KeyUse::Read}, {"parameters", KeyUse::Read},
    {"computations", KeyUse::Read}, {"comps", KeyUse::Read},
};
// The typed types besides the tag-vector kinds' names (data/transformations.hpp).
const char* const kKnownTypedTypes[] = {"parallelization", "tiling", "unrolling", "shifting",
                                        "fusion"};

template <size_t N>
KeyUse use_of(const KnownKey (&table)[N], std::string_view k) {
  for (const KnownKey& e : table)
    if (k == e.key) return e.use;
  return KeyUse::Unknown;
}

std::string_view sv(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

const Value* find(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

const char kOtherKeys[] = "(other keys)";

void add(Histogram& h, std::string_view k, int64_t n = 1) {
  auto it = h.lower_bound(std::string(k));
  if (it != h.end() && it->first == k) {
    it->second += n;
    return;
  }
  if (h.size() >= kMaxHistogramKeys) {
    h[kOtherKeys] += n;
    return;
  }
  h.emplace_hint(it, std::string(k), n);
}

void add_all(Histogram& into, const Histogram& from) {
  for (const auto& [k, v] : from) add(into, k, v);
}

/// A counter of keys for the hot loops of the walk: a short vector searched linearly (the levels
/// of a record have a few dozen distinct keys), folded into a Histogram at the end.
struct KeyCounter {
  std::vector<std::pair<std::string, int64_t>> v;
  void add(std::string_view k) {
    for (auto& e : v)
      if (e.first.size() == k.size() && std::memcmp(e.first.data(), k.data(), k.size()) == 0) {
        ++e.second;
        return;
      }
    if (v.size() >= 64) {  // many distinct keys: not a hot path any more
      spill_key = std::string(k);
      spill[spill_key] += 1;
      return;
    }
    v.emplace_back(std::string(k), 1);
  }
  void flush(Histogram& h) {
    for (auto& e : v) lcm::data::add(h, e.first, e.second);
    for (auto& [k, n] : spill) lcm::data::add(h, k, n);
    v.clear();
    spill.clear();
  }
  std::string spill_key;
  std::map<std::string, int64_t> spill;
};

/// A whole-string decimal number (spaces around it allowed), as the reader accepts it.
bool numeric_text(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && s[b] == ' ') ++b;
  while (e > b && s[e - 1] == ' ') --e;
  if (b == e) return false;
  bool digit = false;
  for (size_t i = b; i < e; ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9')
      digit = true;
    else if (c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E')
      return false;
  }
  if (!digit) return false;
  std::string t(s.substr(b, e - b));
  char* end = nullptr;
  std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

template <class Counter>
const char* time_shape(const Value* v, Counter& machines) {
  if (!v) return "missing";
  if (v->IsNull()) return "null";
  if (v->IsArray()) return "list";
  if (v->IsNumber()) return "number";
  if (v->IsString()) return numeric_text(sv(*v)) ? "numeric string" : "other";
  if (v->IsObject()) {
    for (auto m = v->MemberBegin(); m != v->MemberEnd(); ++m) machines.add(sv(m->name));
    return "object";
  }
  return "other";
}

/// An integer loop level (a number or an integer numeric string), or false.
bool level_of(const Value& v, int64_t& out) {
  if (v.IsInt64()) {
    out = v.GetInt64();
    return true;
  }
  if (v.IsString() && numeric_text(sv(v))) {
    char* end = nullptr;
    std::string t(sv(v));
    long long x = std::strtoll(t.c_str(), &end, 10);
    while (*end == ' ') ++end;
    if (*end != '\0') return false;
    out = x;
    return true;
  }
  return false;
}

struct Comp {
  std::string_view name;
  int64_t depth = 0;  // number of iterators
};

/// The walk of one record: counts into `r` (order-free), examples into `unknown` (in record
/// order), and the schedules_list size as count_schedules (prepare.cpp) gives it (-1 when the
/// record is not an object with a schedules_list array).
class RecordWalk {
 public:
  RecordWalk(const RawRecord& rec, InspectReport& r, std::vector<UnknownEntry>& unknown)
      : rec_(rec), r_(r), unknown_(unknown) {}

  int64_t run() {
    InsituDocument parsed(scratch(), rec_.json);
    const rapidjson::Document& doc = parsed.doc;
    if (doc.HasParseError() || !doc.IsObject()) return -1;
    const Value* sl = find(doc, "schedules_list");
    const int64_t listed = sl && sl->IsArray() ? int64_t(sl->Size()) : -1;
    if (has_record_key(doc)) walk(doc);
    return listed;
  }

 private:
  struct Scratch : InsituBuffers {
    KeyCounter top, ann, comp, sched, entry, typed;                           // key histograms
    KeyCounter dialects, times, initial, machines, initial_machines, combos;  // per schedule
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }

  void walk(const Value& doc) {
    Scratch& sc = scratch();
    ++r_.program_records;
    for (auto m = doc.MemberBegin(); m != doc.MemberEnd(); ++m) sc.top.add(sv(m->name));
    if (const Value* n = find(doc, "program_name"); n && n->IsString()) program_ = sv(*n);
    if (program_.empty()) program_ = rec_.name_hint;
    comps_.clear();
    max_depth_ = 0;
    const Value* ann = find(doc, "program_annotation");
    if (ann && ann->IsObject()) {
      for (auto m = ann->MemberBegin(); m != ann->MemberEnd(); ++m) sc.ann.add(sv(m->name));
      const Value* cs = find(*ann, "computations");
      if (cs && cs->IsObject())
        for (auto m = cs->MemberBegin(); m != cs->MemberEnd(); ++m) {
          ++r_.computations_in_file;
          Comp c;
          c.name = sv(m->name);
          if (m->value.IsObject()) {
            for (auto k = m->value.MemberBegin(); k != m->value.MemberEnd(); ++k)
              sc.comp.add(sv(k->name));
            const Value* its = find(m->value, "iterators");
            if (its && its->IsArray()) c.depth = its->Size();
          }
          max_depth_ = std::max(max_depth_, c.depth);
          comps_.push_back(c);
        }
    }
    sc.initial.add(time_shape(find(doc, "initial_execution_time"), sc.initial_machines));

    // Line granularity.
    const Value* sl = find(doc, "schedules_list");
    const size_t listed = sl && sl->IsArray() ? sl->Size() : 0;
    const Value* one = find(doc, "schedule");
    const Value* index = find(doc, "schedule_index");
    if (!index) index = find(doc, "schedule_id");
    int64_t one_index = 0;
    if (index && !level_of(*index, one_index)) one_index = -1;
    const bool top_fields =
        find(doc, "execution_times") || find(doc, "sched_str") || find(doc, "transformations_list");
    const char* single = nullptr;
    if (one && one->IsObject())
      single = "schedule object";
    else if (listed == 1 && index)
      single = "one-entry schedules_list + index";
    else if (listed == 0 && top_fields && ann)
      single = "top-level schedule fields";
    if (single) {
      ++r_.lines_single_schedule;
      add(r_.single_schedule_forms, single);
    } else if (listed >= 1) {
      ++r_.lines_whole_program;
    } else {
      ++r_.lines_other;
    }

    if (sl && sl->IsArray())
      for (rapidjson::SizeType i = 0; i < sl->Size(); ++i)
        schedule((*sl)[i], single && listed == 1 ? one_index : int64_t(i), true);
    if (one && one->IsObject()) schedule(*one, one_index, true);
    if (single && std::strcmp(single, "top-level schedule fields") == 0)
      schedule(doc, one_index, false);  // its keys are the top-level keys, counted above

    sc.top.flush(r_.top_keys);
    sc.ann.flush(r_.annotation_keys);
    sc.comp.flush(r_.computation_keys);
    sc.sched.flush(r_.schedule_keys);
    sc.entry.flush(r_.comp_entry_keys);
    sc.typed.flush(r_.typed_entry_keys);
    sc.dialects.flush(r_.sched_str_dialects);
    sc.times.flush(r_.execution_time_shapes);
    sc.initial.flush(r_.initial_time_shapes);
    sc.machines.flush(r_.execution_time_machines);
    sc.initial_machines.flush(r_.initial_time_machines);
    sc.combos.flush(r_.form_combinations);
  }

  int comp_index(std::string_view k) const {
    for (size_t c = 0; c < comps_.size(); ++c)
      if (comps_[c].name == k) return int(c);
    return -1;
  }

  void schedule(const Value& v, int64_t index, bool count_keys) {
    Scratch& sc = scratch();
    ++r_.schedules_in_file;
    if (!v.IsObject()) {
      if (count_keys) sc.sched.add("(not an object)");
      ++r_.form_none;
      sc.combos.add("(not an object)");
      sc.times.add("missing");
      return;
    }
    bool structured = false, typed = false, sched_str = false;
    const Value* times = nullptr;
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
      const std::string_view k = sv(m->name);
      const Value& x = m->value;
      const int c = comp_index(k);
      if (c >= 0) {
        if (count_keys) sc.sched.add("<computation>");
        if (!x.IsObject()) continue;
        bool known = false;
        for (auto e = x.MemberBegin(); e != x.MemberEnd(); ++e) {
          sc.entry.add(sv(e->name));
          known = known || use_of(kCompEntryKeys, sv(e->name)) == KeyUse::Read;
        }
        if (known) {
          structured = true;
        } else if (!x.ObjectEmpty()) {
          ++r_.unknown_only_entries;
          if (unknown_.size() < kInspectExamples) {
            UnknownEntry u;
            u.file = rec_.file;
            u.line = rec_.line;
            u.program = std::string(program_);
            u.schedule = index;
            u.computation = std::string(k);
            for (auto e = x.MemberBegin(); e != x.MemberEnd(); ++e)
              u.keys.emplace_back(sv(e->name));
            unknown_.push_back(std::move(u));
          }
        }
        continue;
      }
      if (count_keys) sc.sched.add(k);
      if (k == "transformations_list" && x.IsArray()) {
        typed = true;
        typed_list(x);
      } else if (k == "sched_str") {
        if (x.IsString()) {
          sched_str = true;
          sc.dialects.add(sched_str_dialect_name(sched_str_dialect(sv(x))));
        } else if (!x.IsNull()) {
          sc.dialects.add("(not a string)");
        }
      } else if (k == "execution_times") {
        times = &x;
      }
    }
    sc.times.add(time_shape(times, sc.machines));
    r_.form_structured += structured;
    r_.form_typed += typed;
    r_.form_sched_str += sched_str;
    r_.form_none += !structured && !typed && !sched_str;
    static const char* const kCombos[8] = {
        "none",      "structured",           "typed",           "structured+typed",
        "sched_str", "structured+sched_str", "typed+sched_str", "structured+typed+sched_str"};
    sc.combos.add(kCombos[int(structured) | int(typed) << 1 | int(sched_str) << 2]);
  }

  /// Adds the names of `v` (a string or an array of strings) that are computations of the
  /// program to the max depth `depth`; `named` is set when `v` names any computation at all.
  void named_depth(const Value& v, bool& named, bool& resolved, int64_t& depth) const {
    auto one = [&](const Value& s) {
      if (!s.IsString()) return;
      named = true;
      const int c = comp_index(sv(s));
      if (c >= 0) {
        resolved = true;
        depth = std::max(depth, comps_[size_t(c)].depth);
      }
    };
    if (v.IsArray())
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i) one(v[i]);
    else
      one(v);
  }

  void typed_list(const Value& list) {
    Scratch& sc = scratch();
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      const Value& e = list[i];
      ++r_.typed_entries;
      if (!e.IsObject()) {
        add(r_.typed_types, "(not an object)");
        continue;
      }
      for (auto m = e.MemberBegin(); m != e.MemberEnd(); ++m) sc.typed.add(sv(m->name));
      const Value* type = find(e, "type");
      add(r_.typed_types, !type ? "(missing)" : type->IsString() ? sv(*type) : "(not a string)");
      bool named = false, resolved = false;
      int64_t depth = 0;
      if (const Value* cs = find(e, "computations")) {
        ++r_.typed_naming_computations;
        named_depth(*cs, named, resolved, depth);
      }
      if (const Value* cs = find(e, "comps")) {
        ++r_.typed_naming_comps;
        named_depth(*cs, named, resolved, depth);
      }
      if (!named)
        depth = max_depth_;
      else if (!resolved)
        continue;  // names no computation of the program: no evidence
      const Value* lv = find(e, "loop_levels");
      if (!lv) continue;
      bool zero = false, one = false;
      auto level = [&](const Value& x) {
        int64_t l = 0;
        if (!level_of(x, l)) return;
        zero = zero || l == 0;
        one = one || (depth > 0 && l == depth);
      };
      if (lv->IsArray())
        for (rapidjson::SizeType k = 0; k < lv->Size(); ++k) level((*lv)[k]);
      else
        level(*lv);
      r_.level_zero_based += zero;
      r_.level_one_based += one;
    }
  }

  const RawRecord& rec_;
  InspectReport& r_;
  std::vector<UnknownEntry>& unknown_;
  std::string_view program_;
  std::vector<Comp> comps_;
  int64_t max_depth_ = 0;
};

bool is_known_type(const std::string& t) {
  for (const TransformKindInfo& i : kTransformKinds)
    if (t == i.name) return true;
  for (const char* k : kKnownTypedTypes)
    if (t == k) return true;
  return false;
}

/// "bare" when the first key of the uncompressed text (across lines) is a record field, else
/// "legacy": the rule RecordSource uses once it has ruled out JSON Lines.
std::string non_jsonl_layout(const std::string& path) {
  GzInput in;
  std::string err;
  if (!in.open(path, err) || !in.fill()) return "legacy container";
  const char* p = in.window();
  const char* e = p + in.window_size();
  if (e - p >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
      (unsigned char)p[2] == 0xBF)
    p += 3;
  auto ws = [&] {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  };
  ws();
  if (p >= e || *p != '{') return "legacy container";
  ++p;
  ws();
  if (p >= e || *p != '"') return "legacy container";
  const char* k = ++p;
  while (p < e && *p != '"' && *p != '\\' && *p != '\n') ++p;
  return is_record_key(std::string(k, p)) ? "bare record" : "legacy container";
}

using Clock = std::chrono::steady_clock;

struct WorkItem {
  RawRecord record;
  std::unique_ptr<SkipLog> source_log;
};

struct WorkResult {
  std::unique_ptr<SkipLog> source_log, log, feature_log;
  bool parsed = false;
  std::string name, file;
  int64_t line = 0;
  int64_t schedules_read = 0;
  int64_t skipped_schedules = -1;
  bool featurized = false;
  int64_t schedules_featurized = 0;
  std::map<std::string, int64_t> form_counts;
  std::string several_machines;  // parse_program stopped: times of several machines, none chosen
  std::vector<UnknownEntry> unknown;
};

std::atomic<uint64_t> g_run{0};

}  // namespace

const char* key_use_name(KeyUse u) {
  switch (u) {
    case KeyUse::Read:
      return "read";
    case KeyUse::Ignored:
      return "ignored";
    case KeyUse::Unknown:
      return "unknown";
  }
  return "unknown";
}

std::string InspectReport::loop_level_verdict() const {
  if (level_zero_based > 0 && level_one_based > 0)
    return "contradictory (both seen: " + count_of(level_zero_based, "entry", "entries") +
           " prove 0-based, " + std::to_string(level_one_based) + " prove 1-based)";
  if (level_zero_based > 0)
    return "0-based (proved by " + count_of(level_zero_based, "entry", "entries") + ")";
  if (level_one_based > 0)
    return "1-based (proved by " + count_of(level_one_based, "entry", "entries") + ")";
  return "not determined (0-based assumed)";
}

std::vector<std::string> InspectReport::problems() const {
  std::vector<std::string> out;
  if (!files_without_records.empty()) {
    // a file with nothing lcm reads is not "every form understood": there are no forms
    std::string names;
    for (size_t i = 0; i < files_without_records.size() && i < kInspectExamples; ++i)
      names += (i ? ", " : "") + files_without_records[i];
    if (files_without_records.size() > kInspectExamples) names += ", ...";
    out.push_back(
        "no LOOPerSet record found in " +
        (files_without_records.size() == 1
             ? names
             : count_of(int64_t(files_without_records.size()), "file") + " (" + names + ")") +
        ": no JSON object with a program record field (program_annotation, "
        "schedules_list, ...; docs/data-format.md)");
  }
  if (auto it = sched_str_dialects.find("unknown"); it != sched_str_dialects.end())
    out.push_back(count_of(it->second, "sched_str") + " of dialect unknown");
  if (auto it = sched_str_dialects.find("(not a string)"); it != sched_str_dialects.end())
    out.push_back(count_of(it->second, "sched_str") + " that are not strings");
  int64_t unknown_types = 0;
  std::string which;
  for (const auto& [t, n] : typed_types)
    if (!is_known_type(t)) {
      unknown_types += n;
      which += (which.empty() ? "" : ", ") + t + " " + std::to_string(n);
    }
  if (unknown_types > 0)
    out.push_back(count_of(unknown_types, "typed entry", "typed entries") + " of unknown type (" +
                  which + ")");
  if (unknown_only_entries > 0)
    out.push_back(
        count_of(unknown_only_entries, "per-computation entry", "per-computation entries") +
        " with only unknown keys");
  if (level_zero_based > 0 && level_one_based > 0)
    out.push_back("loop levels " + loop_level_verdict());
  for (const auto& [machines, n] : several_machines)
    out.push_back(count_of(n, "record") + " with times of several machines (" + machines +
                  ") and none chosen: lcm-prepare stops at the first; choose one with "
                  "data.machine=NAME (lcm-inspect --machine NAME)");
  return out;
}

void InspectReport::merge(const InspectReport& o) {
  files += o.files;
  add_all(layouts, o.layouts);
  records += o.records;
  compressed_bytes += o.compressed_bytes;
  uncompressed_bytes += o.uncompressed_bytes;
  programs_read += o.programs_read;
  schedules_read += o.schedules_read;
  records_skipped_by_reader += o.records_skipped_by_reader;
  skipped_records_counted += o.skipped_records_counted;
  add_all(reader_skips, o.reader_skips);
  add_all(forms_read, o.forms_read);
  add_all(several_machines, o.several_machines);
  if (loop_level_base_used.empty()) loop_level_base_used = o.loop_level_base_used;
  read = read && o.read;
  features = features || o.features;
  programs_featurized += o.programs_featurized;
  schedules_featurized += o.schedules_featurized;
  add_all(feature_skips, o.feature_skips);
  for (const SkipEvent& e : o.first_skips)
    if (first_skips.size() < kInspectExamples) first_skips.push_back(e);
  program_records += o.program_records;
  files_without_records.insert(files_without_records.end(), o.files_without_records.begin(),
                               o.files_without_records.end());
  schedules_in_file += o.schedules_in_file;
  computations_in_file += o.computations_in_file;
  add_all(top_keys, o.top_keys);
  add_all(annotation_keys, o.annotation_keys);
  add_all(computation_keys, o.computation_keys);
  add_all(schedule_keys, o.schedule_keys);
  add_all(comp_entry_keys, o.comp_entry_keys);
  form_structured += o.form_structured;
  form_typed += o.form_typed;
  form_sched_str += o.form_sched_str;
  form_none += o.form_none;
  add_all(sched_str_dialects, o.sched_str_dialects);
  add_all(form_combinations, o.form_combinations);
  typed_entries += o.typed_entries;
  add_all(typed_types, o.typed_types);
  add_all(typed_entry_keys, o.typed_entry_keys);
  typed_naming_computations += o.typed_naming_computations;
  typed_naming_comps += o.typed_naming_comps;
  unknown_only_entries += o.unknown_only_entries;
  for (const UnknownEntry& u : o.first_unknown_entries)
    if (first_unknown_entries.size() < kInspectExamples) first_unknown_entries.push_back(u);
  add_all(execution_time_shapes, o.execution_time_shapes);
  add_all(initial_time_shapes, o.initial_time_shapes);
  add_all(execution_time_machines, o.execution_time_machines);
  add_all(initial_time_machines, o.initial_time_machines);
  level_zero_based += o.level_zero_based;
  level_one_based += o.level_one_based;
  lines_whole_program += o.lines_whole_program;
  lines_single_schedule += o.lines_single_schedule;
  add_all(single_schedule_forms, o.single_schedule_forms);
  lines_other += o.lines_other;
}

void inspect_record(const RawRecord& rec, InspectReport& r) {
  std::vector<UnknownEntry> unknown;
  RecordWalk(rec, r, unknown).run();
  for (UnknownEntry& u : unknown)
    if (r.first_unknown_entries.size() < kInspectExamples)
      r.first_unknown_entries.push_back(std::move(u));
}

InspectReport inspect_file(const std::string& path, const InspectOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  InspectReport report;
  report.file = path;
  report.read = opt.read;
  report.features = opt.features && opt.read;
  int workers = opt.threads > 0 ? opt.threads : int(std::thread::hardware_concurrency());
  if (workers < 1) workers = 1;
  const int64_t window = 4 * int64_t(workers) + 8;

  SkipLog quiet(false, 0);
  RecordSource source(path, quiet);  // throws DataError when unreadable
  report.compressed_bytes = source.file_size();
  report.layouts[std::string(source.is_jsonl() ? "JSON Lines" : non_jsonl_layout(path)) + ", " +
                 (source.is_gzip() ? "gzip" : "plain")] = 1;
  std::atomic<int64_t> bytes_read{0};

  std::unique_ptr<SkipLog> trailing;
  auto next_record = [&](WorkItem& item) {
    item.source_log = std::make_unique<SkipLog>(false, 0);
    source.set_log(*item.source_log);
    if (!source.next(item.record)) {
      trailing = std::move(item.source_log);
      return false;
    }
    bytes_read.store(source.compressed_bytes_read(), std::memory_order_relaxed);
    return true;
  };

  // Per-thread accumulators of the order-free counts, merged at the end.
  const uint64_t run = ++g_run;
  std::mutex acc_mu;
  std::vector<std::unique_ptr<InspectReport>> accs;
  auto my_acc = [&]() -> InspectReport& {
    thread_local InspectReport* acc = nullptr;
    thread_local uint64_t acc_run = 0;
    if (acc_run != run) {
      std::lock_guard<std::mutex> lk(acc_mu);
      accs.push_back(std::make_unique<InspectReport>());
      acc = accs.back().get();
      acc->files = 0;
      acc_run = run;
    }
    return *acc;
  };

  FeatureOptions fopt;
  ReadOptions read = opt.read_options;
  if (opt.read) {
    try {
      const LoopLevelBaseChoice base = choose_loop_level_base(path, opt.loop_level_base, read);
      read.loop_level_base = base.base;
      report.loop_level_base_used = base.text;
    } catch (const DataError& e) {
      // contradictory evidence, or several machines in the first records: said in the report
      report.loop_level_base_used = std::string("not decided: ") + e.what();
    }
  }
  auto work = [&](WorkItem&& item) {
    WorkResult res;
    res.source_log = std::move(item.source_log);
    res.log = std::make_unique<SkipLog>(false, 0);
    int64_t listed = RecordWalk(item.record, my_acc(), res.unknown).run();
    // One schedule per line: every line of the group is walked, each one schedule read.
    for (size_t i = 0; i < item.record.more_schedule_lines.size(); ++i) {
      RawRecord line;
      line.json = item.record.more_schedule_lines[i];
      line.file = item.record.file;
      line.line = item.record.more_schedule_line_numbers[i];
      RecordWalk(line, my_acc(), res.unknown).run();
    }
    if (item.record.schedule_line) listed = 1 + int64_t(item.record.more_schedule_lines.size());
    if (!opt.read) return res;
    std::optional<Program> prog;
    try {
      prog = parse_program(item.record, *res.log, read);
    } catch (const DataError& e) {
      // Times of several machines and none chosen: lcm-prepare stops here; lcm-inspect counts
      // the record and says which machines there are.
      const std::string w = e.what();
      const size_t b = w.find("machines (");
      const size_t end = b == std::string::npos ? b : w.find(')', b);
      res.several_machines = end == std::string::npos ? w : w.substr(b + 10, end - b - 10);
      res.skipped_schedules = listed;
      return res;
    }
    if (!prog) {
      res.skipped_schedules = listed;
      return res;
    }
    res.form_counts = std::move(prog->form_counts);
    res.parsed = true;
    res.name = prog->name;
    res.file = item.record.file;
    res.line = item.record.line;
    res.schedules_read = item.record.schedule_line ? listed : int64_t(prog->schedules.size());
    if (opt.features) {
      res.feature_log = std::make_unique<SkipLog>(false, 0);
      try {
        std::optional<ProgramFeatures> f = featurize(*prog, fopt, *res.feature_log);
        if (f) {
          res.featurized = true;
          res.schedules_featurized = f->n_schedules();
        }
      } catch (const DataError& e) {
        SkipEvent ev;
        ev.level = "program";
        ev.reason = "feature_error";
        ev.file = item.record.file;
        ev.line = item.record.line;
        ev.program = prog->name;
        ev.detail = e.what();
        res.feature_log->add(ev);
      }
    }
    return res;
  };

  auto take_log = [&](const SkipLog& l, Histogram& counts) {
    for (const auto& [k, v] : l.counts()) add(counts, k, v);
    for (const SkipEvent& e : l.events()) {
      if (report.first_skips.size() >= kInspectExamples) break;
      if (e.level != "note") report.first_skips.push_back(e);
    }
  };

  const bool tty = ::isatty(2) == 1;
  const double every = tty ? 0.5 : 5.0;
  double last = 0;
  bool printed = false;
  auto progress = [&] {
    if (!opt.progress) return;
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t - last < every) return;
    last = t;
    const int64_t size = report.compressed_bytes;
    std::fprintf(stderr, "%s%s: %s: %lld records (%.0f/s), %lld schedules, %.0f%% of %s%s",
                 tty ? "\r" : "", opt.progress_label.c_str(), path.c_str(),
                 (long long)report.records, double(report.records) / t,
                 (long long)report.schedules_read,
                 size > 0 ? 100.0 * double(bytes_read.load()) / double(size) : 0.0,
                 human_bytes(size).c_str(), tty ? "   " : "\n");
    std::fflush(stderr);
    printed = true;
  };

  NameSet names;  // program name (hashed, 24 bytes) → line of its first record
  auto consume = [&](WorkResult&& res) {
    report.records += 1;
    if (res.source_log) take_log(*res.source_log, report.reader_skips);
    const NameHash h = res.parsed ? name_hash(res.name) : NameHash{};
    const int64_t* first = res.parsed ? names.find(h) : nullptr;
    if (first) {  // as read_features: the later record is skipped whole
      SkipEvent ev;
      ev.level = "program";
      ev.reason = "duplicate_program";
      ev.file = res.file;
      ev.line = res.line;
      ev.program = res.name;
      ev.detail = "the name was already read at line " + std::to_string(*first) +
                  "; this record is skipped";
      SkipLog one(false, 0);
      one.add(ev);
      take_log(one, report.reader_skips);
      res.featurized = false;
    } else {
      take_log(*res.log, report.reader_skips);
      if (res.feature_log) take_log(*res.feature_log, report.feature_skips);
      if (res.parsed) names.insert(h, res.line);
    }
    if (!res.several_machines.empty()) add(report.several_machines, res.several_machines, 1);
    if (res.parsed) {
      report.programs_read += 1;
      report.schedules_read += res.schedules_read;
      for (const auto& [k, v] : res.form_counts) add(report.forms_read, k, v);
    } else if (res.skipped_schedules >= 0) {
      report.schedules_read += res.skipped_schedules;
      report.skipped_records_counted += 1;
    }
    if (res.featurized) {
      report.programs_featurized += 1;
      report.schedules_featurized += res.schedules_featurized;
    }
    for (UnknownEntry& u : res.unknown)
      if (report.first_unknown_entries.size() < kInspectExamples)
        report.first_unknown_entries.push_back(std::move(u));
  };

  try {
    run_ordered<WorkItem, WorkResult>(
        workers, InFlightLimit{window, opt.max_bytes_in_flight},
        [](const WorkItem& item) { return record_bytes(item.record); }, next_record, work, consume,
        progress);
  } catch (...) {
    if (printed && tty) std::fprintf(stderr, "\n");
    throw;
  }
  if (printed && tty) std::fprintf(stderr, "\n");
  if (trailing) take_log(*trailing, report.reader_skips);
  // Skips the reader logged while choosing the layout, before the first record (none are known
  // today; counted rather than lost).
  for (const auto& [k, v] : quiet.counts()) add(report.reader_skips, k, v);
  report.records += source.records_skipped();
  if (opt.read) report.records_skipped_by_reader = report.records - report.programs_read;
  report.uncompressed_bytes = source.uncompressed_bytes_read();
  for (const auto& a : accs) {
    std::vector<UnknownEntry> keep = std::move(report.first_unknown_entries);
    report.merge(*a);  // counts only: the accumulators hold no examples
    report.first_unknown_entries = std::move(keep);
  }
  if (report.program_records == 0) report.files_without_records.push_back(path);
  return report;
}

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

template <size_t N>
void key_table(std::ostringstream& o, const char* title, const Histogram& h,
               const KnownKey (&table)[N]) {
  o << "    " << title << (h.empty() ? ": -" : ":") << "\n";
  std::vector<std::pair<std::string, int64_t>> v(h.begin(), h.end());
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (auto& [k, n] : v) {
    const KeyUse u = k == kOtherKeys ? KeyUse::Unknown : use_of(table, k);
    char buf[160];
    std::snprintf(buf, sizeof buf, "      %-28s %12s", k.c_str(), num(n).c_str());
    o << buf
      << (u == KeyUse::Read      ? ""
          : u == KeyUse::Ignored ? "  (ignored by lcm)"
                                 : "  (UNKNOWN: not read by lcm)")
      << "\n";
  }
}

}  // namespace

std::string inspect_text(const InspectReport& r) {
  std::ostringstream o;
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
  key_table(o, "top level", r.top_keys, kTopKeys);
  key_table(o, "program_annotation", r.annotation_keys, kAnnotationKeys);
  key_table(o, "program_annotation.computations.<c>", r.computation_keys, kComputationKeys);
  key_table(o, "schedules_list[i]", r.schedule_keys, kScheduleKeys);
  key_table(o, "schedules_list[i].<computation>", r.comp_entry_keys, kCompEntryKeys);
  if (!r.typed_entry_keys.empty())
    key_table(o, "schedules_list[i].transformations_list[k] (typed)", r.typed_entry_keys,
              kTypedEntryKeys);
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
  o << "  times        execution_times: " << inline_hist(r.execution_time_shapes) << "\n";
  if (!r.execution_time_machines.empty())
    o << "               machines: " << inline_hist(r.execution_time_machines) << "\n";
  o << "               initial_execution_time: " << inline_hist(r.initial_time_shapes) << "\n";
  if (!r.initial_time_machines.empty())
    o << "               machines: " << inline_hist(r.initial_time_machines) << "\n";
  o << "  loop levels  " << r.loop_level_verdict() << "\n";
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

template <size_t N>
void write_keys(Writer& w, const char* name, const Histogram& h, const KnownKey (&table)[N]) {
  w.Key(name);
  w.StartObject();
  for (const auto& [k, n] : h) {
    w.Key(k.c_str(), rapidjson::SizeType(k.size()));
    w.StartObject();
    w.Key("count");
    w.Int64(n);
    w.Key("lcm");
    w.String(key_use_name(k == kOtherKeys ? KeyUse::Unknown : use_of(table, k)));
    w.EndObject();
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

void write_report(Writer& w, const InspectReport& r) {
  w.StartObject();
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
  write_keys(w, "top_level", r.top_keys, kTopKeys);
  write_keys(w, "program_annotation", r.annotation_keys, kAnnotationKeys);
  write_keys(w, "computation", r.computation_keys, kComputationKeys);
  write_keys(w, "schedule", r.schedule_keys, kScheduleKeys);
  write_keys(w, "schedule_computation_entry", r.comp_entry_keys, kCompEntryKeys);
  write_keys(w, "typed_entry", r.typed_entry_keys, kTypedEntryKeys);
  w.EndObject();
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
  const std::vector<std::string> p = r.problems();
  w.Key("understood");
  w.Bool(p.empty());
  w.Key("problems");
  w.StartArray();
  for (const std::string& s : p) w.String(s.c_str(), rapidjson::SizeType(s.size()));
  w.EndArray();
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
  const std::vector<std::string> p = total.problems();
  w.Key("understood");
  w.Bool(p.empty());
  w.Key("problems");
  w.StartArray();
  for (const std::string& s : p) w.String(s.c_str(), rapidjson::SizeType(s.size()));
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

}  // namespace lcm::data
