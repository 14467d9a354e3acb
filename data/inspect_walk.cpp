// lcm-inspect's walk of one record's DOM (inspect_internal.hpp walk_record): the keys of each
// level, the schedule forms, the sched_str dialects, the time shapes, the loop-level evidence of
// typed entries and whether a line holds a whole program or one schedule.
#include <rapidjson/document.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/inspect.hpp"
#include "data/inspect_internal.hpp"
#include "data/record_fields.hpp"
#include "data/schedule_forms.hpp"

namespace lcm::data {
namespace inspect_detail {
namespace {

using Value = rapidjson::Value;

std::string_view sv(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

const Value* find(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
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
    for (auto& e : v) inspect_detail::add(h, e.first, e.second);
    for (auto& [k, n] : spill) inspect_detail::add(h, k, n);
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
    const Value* ann = find(doc, "program_annotation");
    annotation(ann);
    sc.initial.add(time_shape(find(doc, "initial_execution_time"), sc.initial_machines));
    schedules(doc, ann);
    flush();
  }

  /// The keys of the program annotation and its computations, and their depths (comps_).
  void annotation(const Value* ann) {
    Scratch& sc = scratch();
    comps_.clear();
    max_depth_ = 0;
    if (!ann || !ann->IsObject()) return;
    for (auto m = ann->MemberBegin(); m != ann->MemberEnd(); ++m) sc.ann.add(sv(m->name));
    const Value* cs = find(*ann, "computations");
    if (!cs || !cs->IsObject()) return;
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

  /// The line's granularity (a whole program, a single schedule in one of its forms, or
  /// neither) and each of its schedules.
  void schedules(const Value& doc, const Value* ann) {
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
  }

  /// The record's counts into the report's histograms.
  void flush() {
    using R = InspectReport;
    static const std::pair<KeyCounter Scratch::*, Histogram R::*> kInto[] = {
        {&Scratch::top, &R::top_keys},
        {&Scratch::ann, &R::annotation_keys},
        {&Scratch::comp, &R::computation_keys},
        {&Scratch::sched, &R::schedule_keys},
        {&Scratch::entry, &R::comp_entry_keys},
        {&Scratch::typed, &R::typed_entry_keys},
        {&Scratch::dialects, &R::sched_str_dialects},
        {&Scratch::times, &R::execution_time_shapes},
        {&Scratch::initial, &R::initial_time_shapes},
        {&Scratch::machines, &R::execution_time_machines},
        {&Scratch::initial_machines, &R::initial_time_machines},
        {&Scratch::combos, &R::form_combinations}};
    Scratch& sc = scratch();
    for (const auto& [counter, histogram] : kInto) (sc.*counter).flush(r_.*histogram);
  }

  int comp_index(std::string_view k) const {
    for (size_t c = 0; c < comps_.size(); ++c)
      if (comps_[c].name == k) return int(c);
    return -1;
  }

  /// The entry of computation `k` in schedule `index`: true when it holds a key lcm reads; an
  /// entry of unknown keys only is counted (and kept as an example).
  bool comp_entry(std::string_view k, const Value& x, int64_t index) {
    if (!x.IsObject()) return false;
    Scratch& sc = scratch();
    bool known = false;
    for (auto e = x.MemberBegin(); e != x.MemberEnd(); ++e) {
      sc.entry.add(sv(e->name));
      known = known || key_use(KeyLevel::CompEntry, sv(e->name)) == KeyUse::Read;
    }
    if (known || x.ObjectEmpty()) return known;
    ++r_.unknown_only_entries;
    if (unknown_.size() < kInspectExamples) {
      UnknownEntry u;
      u.file = rec_.file;
      u.line = rec_.line;
      u.program = std::string(program_);
      u.schedule = index;
      u.computation = std::string(k);
      for (auto e = x.MemberBegin(); e != x.MemberEnd(); ++e) u.keys.emplace_back(sv(e->name));
      unknown_.push_back(std::move(u));
    }
    return false;
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
        structured = comp_entry(k, x, index) || structured;
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

}  // namespace

int64_t walk_record(const RawRecord& rec, InspectReport& r, std::vector<UnknownEntry>& unknown) {
  return RecordWalk(rec, r, unknown).run();
}

}  // namespace inspect_detail

void inspect_record(const RawRecord& rec, InspectReport& r) {
  std::vector<UnknownEntry> unknown;
  inspect_detail::walk_record(rec, r, unknown);
  for (UnknownEntry& u : unknown)
    if (r.first_unknown_entries.size() < kInspectExamples)
      r.first_unknown_entries.push_back(std::move(u));
}

}  // namespace lcm::data
