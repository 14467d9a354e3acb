// One schedule of a record (json_fields.hpp parse_schedule): its members, the structured form
// (per-computation entries: tiling, unrolling, shiftings, tag vectors; fusions), its
// tree_structure and times, the choice of the form read and the cross-check of the others.
#include <rapidjson/document.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "data/json_fields.hpp"
#include "data/reader.hpp"

namespace lcm::data::json_detail {

namespace {

LoopNode parse_loop_node(const Value& v, int depth) {
  expect_node(v, depth, kMaxTreeDepth, "loop tree", "a loop node object");
  LoopNode n;
  n.loop_name = as_string(require(v, "loop_name"), "loop_name");
  n.computations = optional_string_list(v, "computations_list");
  if (const Value* ch = find(v, "child_list"))
    parse_list(*ch, "child_list", n.children,
               [&](const Value& e) { return parse_loop_node(e, depth + 1); });
  return n;
}

void parse_tiling(const Value& t, CompSchedule& cs) {
  if (is_empty_value(t)) return;
  if (!t.IsObject())
    fail("bad_tiling", "tiling", std::string("expected an object, got ") + show(t));
  const Value* dims = find(t, "tiling_dims");
  const Value* facs = find(t, "tiling_factors");
  if (!dims || !facs || !dims->IsArray() || !facs->IsArray())
    fail("bad_tiling", "tiling", "needs the arrays tiling_dims and tiling_factors");
  within("tiling", [&] {
    cs.tiling_dims = as_string_list(*dims, "tiling_dims");
    cs.tiling_factors.reserve(facs->Size());
    for (rapidjson::SizeType i = 0; i < facs->Size(); ++i)
      cs.tiling_factors.push_back(as_int((*facs)[i], "tiling_factors"));
  });
  for (size_t i = 0; i < cs.tiling_factors.size(); ++i)
    if (cs.tiling_factors[i] <= 0)
      fail("bad_tile_factor", indexed("tiling.tiling_factors", i),
           "tiling factor " + std::to_string(cs.tiling_factors[i]) + " is not positive");
  if (cs.tiling_dims.size() != cs.tiling_factors.size())
    fail("bad_tiling", "tiling",
         std::to_string(cs.tiling_dims.size()) + " tiling_dims but " +
             std::to_string(cs.tiling_factors.size()) + " tiling_factors");
  if (const Value* d = find(t, "tiling_depth"); d && !d->IsNull()) {
    int64_t depth = as_int(*d, "tiling.tiling_depth");
    if (depth != int64_t(cs.tiling_dims.size()))
      fail("bad_tiling", "tiling",
           "tiling_depth " + std::to_string(depth) + " but " +
               std::to_string(cs.tiling_dims.size()) + " tiling_dims");
  }
}

void parse_shiftings(const Value& s, CompSchedule& cs) {
  if (s.IsNull()) return;
  if (!s.IsArray())
    fail("bad_field", "shiftings", std::string("expected an array, got ") + show(s));
  for (rapidjson::SizeType i = 0; i < s.Size(); ++i) {
    const Value& e = s[i];
    if (!e.IsArray() || e.Size() != 2 || !e[0].IsString())
      fail("bad_field", indexed("shiftings", i), "expected [iterator name, shift factor]");
    within([&] { return indexed("shiftings", i); },
           [&] { cs.shiftings.emplace_back(e[0].GetString(), as_int(e[1], "")); });
  }
}

void parse_transformations(const Value& tl, CompSchedule& cs) {
  if (tl.IsNull()) return;
  if (!tl.IsArray())
    fail("bad_transformation", "transformations_list",
         std::string("expected an array, got ") + show(tl));
  cs.transformations.resize(tl.Size());
  for (rapidjson::SizeType i = 0; i < tl.Size(); ++i) {
    const Value& t = tl[i];
    if (!t.IsArray() || t.Size() != 16)
      fail("bad_transformation", indexed("transformations_list", i),
           t.IsArray() ? "expected 16 integers, got " + std::to_string(t.Size())
                       : std::string("expected an array of 16 integers, got ") + show(t));
    for (rapidjson::SizeType k = 0; k < 16; ++k) {
      if (t[k].IsInt64()) {
        cs.transformations[i][k] = t[k].GetInt64();
        continue;
      }
      try {
        cs.transformations[i][k] = as_int(t[k], "");
      } catch (Problem&) {
        fail("bad_transformation", indexed("transformations_list", i),
             std::string("expected an integer, got ") + show(t[k]));
      }
    }
  }
}

/// The per-computation fields in which earlier generations of the Tiramisu dataset generator
/// wrote loop transformations before `transformations_list` (interchange_dims, reversed_dim,
/// skewing, and the composed matrices): lcm does not read them, so a schedule that applies a
/// transformation through one of them is refused rather than read without it.
bool is_unread_transformation_field(const Value& k) {
  return key_is(k, "interchange_dims") || key_is(k, "reversed_dim") || key_is(k, "skewing") ||
         key_is(k, "transformation_matrix") || key_is(k, "transformation_matrices");
}

/// One computation's entry of a structured schedule; returns how many of its keys lcm knows
/// (the caller refuses a non-empty entry of unknown keys only). A non-empty field of an earlier
/// generation's transformation encoding (is_unread_transformation_field) without a non-empty
/// `transformations_list` beside it is `unread_transformation_fields`.
int parse_comp_schedule(const Value& v, CompSchedule& cs) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  const Value* tags = find(v, "transformations_list");
  const bool has_tags = tags != nullptr && !is_empty_value(*tags);
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m)
    if (!has_tags && is_unread_transformation_field(m->name) && !is_empty_value(m->value))
      fail("unread_transformation_fields", m->name.GetString(),
           std::string(m->name.GetString()) + " = " + show(m->value) +
               " is a transformation in an earlier generation's encoding, which lcm does not "
               "read; the schedule would be read as another one without it");
  int known = 0;
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    ++known;
    const Value& k = m->name;
    const Value& x = m->value;
    if (key_is(k, "parallelized_dim")) {
      cs.parallelized_dim = as_name_or_empty(x, "parallelized_dim");
    } else if (key_is(k, "tiling")) {
      parse_tiling(x, cs);
    } else if (key_is(k, "unrolling_factor")) {
      if (!x.IsNull() && !(x.IsString() && x.GetStringLength() == 0))
        cs.unrolling_factor = as_int(x, "unrolling_factor");
      // 0 means "not unrolled" (the reference tests the factor's truthiness); below 0 is nonsense.
      if (cs.unrolling_factor < 0)
        fail("bad_unroll_factor", "unrolling_factor",
             "unrolling factor " + std::to_string(cs.unrolling_factor) + " is negative");
    } else if (key_is(k, "shiftings")) {
      parse_shiftings(x, cs);
    } else if (key_is(k, "transformations_list")) {
      parse_transformations(x, cs);
    } else {
      --known;  // unknown fields are ignored (when the entry has known ones)
    }
  }
  return known;
}

void parse_fusions(const Value& f, std::vector<Fusion>& fusions) {
  if (f.IsNull()) return;
  if (!f.IsArray()) fail("bad_field", "fusions", std::string("expected an array, got ") + show(f));
  for (rapidjson::SizeType i = 0; i < f.Size(); ++i) {
    const Value& e = f[i];
    if (!e.IsArray() || e.Size() < 3 || !e[0].IsString() || !e[1].IsString())
      fail("bad_field", indexed("fusions", i), "expected [computation, computation, level]");
    Fusion fu;
    fu.comp_a = e[0].GetString();
    fu.comp_b = e[1].GetString();
    within([&] { return indexed("fusions", i); }, [&] { fu.level = as_int32(e[2], ""); });
    fusions.push_back(std::move(fu));
  }
}

void parse_tree(const Value& t, Schedule& s) {
  if (t.IsNull()) return;
  within("tree_structure", [&] {
    if (!t.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(t));
    LoopTree tree;
    parse_list(require_array(t, "roots"), "roots", tree.roots,
               [](const Value& e) { return parse_loop_node(e, 0); });
    s.tree = std::move(tree);
  });
}

/// Appends the time `x` (a number or a numeric string) to `out`; false when it is neither.
bool append_time(const Value& x, std::vector<double>& out) {
  double d;
  if (x.IsNumber())
    d = x.GetDouble();
  else if (!x.IsString() || !parse_double_text(x.GetString(), x.GetStringLength(), d))
    return false;
  out.push_back(d);
  return true;
}

/// A time value in any shape the generations write: a number, a numeric string, or a list of
/// them. Appends to `out`; `field` names it in errors ("bad_execution_times").
void append_times(const Value& t, const std::string& field, const char* reason,
                  std::vector<double>& out) {
  if (t.IsNull()) return;
  if (t.IsArray()) {
    out.reserve(out.size() + t.Size());
    for (rapidjson::SizeType i = 0; i < t.Size(); ++i)
      if (!append_time(t[i], out))
        fail(reason, indexed(field.c_str(), i),
             std::string("expected a number, got ") + show(t[i]));
    return;
  }
  if (!append_time(t, out))
    fail(reason, field,
         std::string("expected a number, a numeric string or a list of them, got ") + show(t));
}

/// The name a schedule form is counted under: "structured", "typed", "sched_str:<dialect>".
std::string form_name(ScheduleSource src, const std::string& sched_str) {
  switch (src) {
    case ScheduleSource::Structured:
      return "structured";
    case ScheduleSource::Typed:
      return "typed";
    case ScheduleSource::SchedStr:
      return std::string("sched_str:") + sched_str_dialect_name(sched_str_dialect(sched_str));
    case ScheduleSource::Auto:
      break;
  }
  return "none";
}

}  // namespace

void read_times(const Value& t, const std::string& field, const char* reason,
                const ReadOptions& opt, const RawRecord& rec, std::vector<double>& out) {
  if (!t.IsObject()) {
    append_times(t, field, reason, out);
    return;
  }
  if (t.ObjectEmpty()) return;
  if (!opt.machine.empty()) {
    for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m)
      if (m->name.GetStringLength() == opt.machine.size() &&
          std::memcmp(m->name.GetString(), opt.machine.data(), opt.machine.size()) == 0) {
        append_times(m->value, field + "." + opt.machine, reason, out);
        return;
      }
    fail(reason, field,
         "no times for machine \"" + escape_text(opt.machine, 40) +
             "\" (data.machine); this record has " + member_names(t));
  }
  if (t.MemberCount() > 1)
    throw DataError(rec.file + ":" + std::to_string(rec.line) + ": " + field +
                    " holds times of several machines (" + member_names(t) +
                    "); choose one with data.machine=NAME");
  append_times(t.MemberBegin()->value, field, reason, out);
}

namespace {

/// The reading of one schedule object, step by step: its members (read_members), the form that
/// gives its transformations (choose_source, chosen), the other forms' cross-check
/// (cross_check). Every step throws Problem; parse_schedule records it.
class ScheduleReader {
 public:
  ScheduleReader(Program& p, const ReadOptions& opt, const RawRecord& rec, ScheduleNotes& notes,
                 Schedule& s)
      : p_(p), opt_(opt), rec_(rec), notes_(notes), s_(s), n_comps_(p.computations.size()) {
    structured_.comps.resize(n_comps_);
  }

  void run(const Value& v) {
    if (!v.IsObject())
      fail("bad_field", "", std::string("expected a schedule object, got ") + show(v));
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) member(m->name, m->value);
    choose_source();
    NormalSchedule& chosen = this->chosen();
    const std::string chosen_name = form_name(src_, s_.sched_str);
    p_.form_counts["read/" + chosen_name] += 1;
    if (opt_.schedule_check != ScheduleCheck::Off) cross_check(chosen, chosen_name);
    s_.comps = std::move(chosen.comps);
    s_.fusions = std::move(chosen.fusions);
  }

 private:
  /// One member of the schedule object.
  void member(const Value& k, const Value& x) {
    if (key_is(k, "execution_times")) {
      read_times(x, "execution_times", "bad_execution_times", opt_, rec_, s_.execution_times);
    } else if (key_is(k, "fusions")) {
      parse_fusions(x, structured_.fusions);
    } else if (key_is(k, "tree_structure")) {
      parse_tree(x, s_);
    } else if (key_is(k, "transformations_list")) {
      typed_ = &x;
    } else if (key_is(k, "sched_str")) {
      sched_str(x);
    } else {
      comp_entry(k, x);  // other schedule-level keys are ignored
    }
  }

  void sched_str(const Value& x) {
    if (x.IsString()) {
      // written to lcm-predict's and lcm-eval's outputs: no invalid UTF-8, no control bytes
      std::string why =
          x.GetStringLength() ? name_problem(x.GetString(), x.GetStringLength()) : std::string();
      if (!why.empty()) fail("bad_sched_str", "sched_str", why);
      s_.sched_str.assign(x.GetString(), x.GetStringLength());
      // An empty sched_str carries no facts (hand-written and legacy records leave it blank
      // beside transformed dicts): it is not a form to read or cross-check.
      has_sched_str_ = x.GetStringLength() > 0;
    } else if (!x.IsNull()) {
      fail("bad_sched_str", "sched_str", std::string("expected a string, got ") + show(x));
    }
  }

  /// The index of the computation named `k`, or -1.
  int comp_of(const Value& k) const {
    for (size_t c = 0; c < n_comps_; ++c) {
      const std::string& name = p_.computations[c].name;
      if (name.size() == k.GetStringLength() &&
          std::memcmp(name.data(), k.GetString(), name.size()) == 0)
        return int(c);
    }
    return -1;
  }

  /// A member that may be a computation's entry of the structured form.
  void comp_entry(const Value& k, const Value& x) {
    const int c = comp_of(k);
    // An entry shaped like a computation's (an object with a per-computation field) for a
    // computation the program lacks is a schedule of another program, never ignored.
    if (c < 0) {
      if (x.IsObject())
        for (auto f = x.MemberBegin(); f != x.MemberEnd(); ++f)
          if (key_is(f->name, "parallelized_dim") || key_is(f->name, "tiling") ||
              key_is(f->name, "unrolling_factor") || key_is(f->name, "shiftings") ||
              key_is(f->name, "transformations_list"))
            fail("unknown_computation", "",
                 "an entry for computation \"" +
                     escape_text(k.GetString(), k.GetStringLength(), 40) +
                     "\", which the program does not have");
      return;
    }
    if (x.IsNull()) return;
    const std::string& name = p_.computations[size_t(c)].name;
    int known = 0;
    within(name, [&] { known = parse_comp_schedule(x, structured_.comps[size_t(c)]); });
    if (known > 0 || x.ObjectEmpty())
      ++seen_;
    else if (unknown_only_.empty())
      unknown_only_ = name + " holds only fields lcm does not read (" + member_names(x) + ")";
  }

  /// src_: opt.schedule_source, or under Auto the first form present (structured, typed,
  /// sched_str). An entry of unknown fields only is transformation information lcm cannot read:
  /// it is never taken as "untransformed".
  void choose_source() {
    has_structured_ = seen_ > 0 || !structured_.fusions.empty();
    const bool has_typed = typed_ != nullptr;
    src_ = opt_.schedule_source;
    if (src_ == ScheduleSource::Auto) {
      src_ = has_structured_  ? ScheduleSource::Structured
             : has_typed      ? ScheduleSource::Typed
             : has_sched_str_ ? ScheduleSource::SchedStr
                              : ScheduleSource::Auto;  // no transformation information
    } else {
      const bool present = src_ == ScheduleSource::Structured
                               ? has_structured_ || !unknown_only_.empty()
                           : src_ == ScheduleSource::Typed ? has_typed
                                                           : has_sched_str_;
      if (!present)
        fail("missing_schedule_form", "",
             std::string("data.schedule_source=") +
                 (src_ == ScheduleSource::Structured ? "structured"
                  : src_ == ScheduleSource::Typed    ? "typed"
                                                     : "sched_str") +
                 " but this schedule has no such form");
    }
    if (!unknown_only_.empty() &&
        (src_ == ScheduleSource::Structured || src_ == ScheduleSource::Auto))
      fail("unknown_schedule_fields", "", unknown_only_);
  }

  /// The typed form, parsed once.
  NormalSchedule& typed_form() {
    if (!typed_done_) {
      typed_done_ = true;
      try {
        parse_typed_list(*typed_, p_, opt_.loop_level_base, typed_form_);
      } catch (Problem& pr) {
        typed_form_.problem = pr.reason;
        typed_form_.detail = problem_detail(pr);
      }
    }
    return typed_form_;
  }

  /// The sched_str form, parsed once.
  NormalSchedule& str_form() {
    if (!str_done_) {
      str_done_ = true;
      str_form_ = parse_sched_str(s_.sched_str, p_, s_.tree ? &*s_.tree : nullptr);
    }
    return str_form_;
  }

  /// The form of src_, refused when it cannot be read or leaves a fusion without a loop level.
  NormalSchedule& chosen() {
    NormalSchedule* chosen = nullptr;
    switch (src_) {
      case ScheduleSource::Structured:
        chosen = &structured_;
        notes_.missing += int64_t(n_comps_ - std::min(seen_, n_comps_));
        break;
      case ScheduleSource::Typed:
        chosen = &typed_form();
        break;
      case ScheduleSource::SchedStr:
        chosen = &str_form();
        break;
      case ScheduleSource::Auto:
        identity_.comps.resize(n_comps_);
        chosen = &identity_;
        break;
    }
    if (!chosen->problem.empty()) {
      if (src_ == ScheduleSource::Typed) throw Problem{chosen->problem, "", chosen->detail};
      fail(chosen->problem.c_str(), "sched_str", chosen->detail);
    }
    if (!chosen->has_fusion_levels)
      for (const Fusion& f : chosen->fusions)
        if (f.level < 0)
          fail("fusion_level_unknown", "sched_str",
               "the fusion of " + f.comp_a + " and " + f.comp_b +
                   " has no loop level and the schedule's tree_structure does not give one");
    return *chosen;
  }

  /// The other forms present compared with the chosen one, counted in p.form_counts; a
  /// difference fails schedule_forms_disagree (data.schedule_check=skip) or is noted.
  void cross_check(const NormalSchedule& chosen, const std::string& chosen_name) {
    auto check = [&](NormalSchedule& other, const std::string& other_name) {
      std::string kind, detail;
      if (!other.problem.empty()) {
        kind = "unreadable";
        detail = other_name + " cannot be read: " + other.detail;
      } else {
        ScheduleDifference d = compare_schedules(p_, chosen, other);
        kind = d.kind;
        detail = d.detail;
      }
      const std::string key = "check/" + other_name.substr(0, other_name.find(':'));
      if (kind.empty()) {
        p_.form_counts[key + "/agree"] += 1;
        return;
      }
      p_.form_counts[key + "/disagree"] += 1;
      p_.form_counts["disagree/" + kind] += 1;
      const std::string text = kind + ": " + chosen_name + " vs " + other_name + ": " + detail;
      if (opt_.schedule_check == ScheduleCheck::Skip) fail("schedule_forms_disagree", "", text);
      if (notes_.disagreement.empty()) notes_.disagreement = text;
    };
    if (src_ != ScheduleSource::Structured && has_structured_) check(structured_, "structured");
    if (src_ != ScheduleSource::Typed && typed_) check(typed_form(), "typed");
    if (src_ != ScheduleSource::SchedStr && has_sched_str_)
      check(str_form(), form_name(ScheduleSource::SchedStr, s_.sched_str));
  }

  Program& p_;
  const ReadOptions& opt_;
  const RawRecord& rec_;
  ScheduleNotes& notes_;
  Schedule& s_;
  const size_t n_comps_;
  NormalSchedule structured_;
  size_t seen_ = 0;           // computation entries with fields lcm reads
  std::string unknown_only_;  // the first entry of unknown fields only, with its keys
  const Value* typed_ = nullptr;
  bool has_sched_str_ = false;
  bool has_structured_ = false;
  ScheduleSource src_ = ScheduleSource::Auto;
  NormalSchedule typed_form_, str_form_, identity_;
  bool typed_done_ = false, str_done_ = false;  // each form is parsed at most once
};

}  // namespace

Schedule parse_schedule(const Value& v, Program& p, const ReadOptions& opt, const RawRecord& rec,
                        ScheduleNotes& notes) {
  Schedule s;
  try {
    ScheduleReader(p, opt, rec, notes, s).run(v);
  } catch (Problem& pr) {
    s.parse_problem = pr.reason;
    s.parse_detail = problem_detail(pr);
  }
  return s;
}

}  // namespace lcm::data::json_detail
