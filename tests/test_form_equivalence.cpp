// The same real schedules written in another schedule form give bit-identical features
// (docs/data-format.md "Schedule forms"): every record of the real sample is rewritten with its
// per-computation dicts and fusions replaced by a schedule-level typed transformations_list (and,
// separately, by its sched_str alone), keeping tree_structure and the times; parse_program and
// featurize must then give the same ProgramFeatures, value for value, and the same skips.
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/schedule_forms.hpp"
#include "data/transformations.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;
using rapidjson::Value;

namespace {

std::string to_text(const Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

/// Facts of the structured form the typed form cannot carry, counted per schedule.
struct RewriteCounts {
  int64_t schedules = 0;
  int64_t entries = 0;
  int64_t kept_structured = 0;  // a tag vector the typed entries cannot reproduce exactly, or a
                                // loop named outside the computation's own nest
};

/// `rec` (one record's JSON) with each schedule's per-computation dicts and fusions replaced by
/// the typed entries that express them, each naming its computation; 0-based levels.
std::string rewrite_typed(const std::string& rec, RewriteCounts& n) {
  rapidjson::Document d;
  d.Parse(rec.c_str());
  REQUIRE(!d.HasParseError());
  auto& al = d.GetAllocator();
  const Value& comps = d["program_annotation"]["computations"];
  std::map<std::string, std::vector<std::string>> iters;
  for (auto c = comps.MemberBegin(); c != comps.MemberEnd(); ++c)
    for (const Value& it : c->value["iterators"].GetArray())
      iters[c->name.GetString()].push_back(it.GetString());
  for (Value& s : d["schedules_list"].GetArray()) {
    ++n.schedules;
    Value list(rapidjson::kArrayType);
    auto entry = [&](const char* type, std::vector<int64_t> levels, std::vector<int64_t> params,
                     std::vector<std::string> names) {
      Value e(rapidjson::kObjectType);
      e.AddMember("type", Value(type, al), al);
      Value l(rapidjson::kArrayType), p(rapidjson::kArrayType), c(rapidjson::kArrayType);
      for (int64_t x : levels) l.PushBack(Value(int64_t(x)), al);
      for (int64_t x : params) p.PushBack(Value(int64_t(x)), al);
      for (const std::string& x : names) c.PushBack(Value(x.c_str(), al), al);
      e.AddMember("loop_levels", l, al);
      e.AddMember("parameters", p, al);
      e.AddMember("computations", c, al);
      list.PushBack(e, al);
      ++n.entries;
    };
    bool typed_ok = true;
    for (auto c = comps.MemberBegin(); c != comps.MemberEnd(); ++c) {
      const std::string name = c->name.GetString();
      if (!s.HasMember(name.c_str()) || s[name.c_str()].IsNull()) continue;
      const Value& cs = s[name.c_str()];
      const std::vector<std::string>& its = iters[name];
      // A loop of another computation's nest (a fused one) has no level in this one: the typed
      // form cannot say it, and the schedule keeps its dicts.
      auto level = [&](const std::string& it) {
        for (size_t i = 0; i < its.size(); ++i)
          if (its[i] == it) return int64_t(i);
        typed_ok = false;
        return int64_t(0);
      };
      if (cs.HasMember("transformations_list") && cs["transformations_list"].IsArray()) {
        for (const Value& t : cs["transformations_list"].GetArray()) {
          std::vector<int64_t> v;
          for (const Value& x : t.GetArray()) v.push_back(x.GetInt64());
          TagVector tag{};
          for (size_t k = 0; k < v.size() && k < tag.size(); ++k) tag[k] = v[k];
          const std::optional<Transformation> tr = decode(tag);
          if (tr) {
            entry(kind_info(tr->kind).name,
                  std::vector<int64_t>(tr->levels.begin(), tr->levels.begin() + tr->n_levels),
                  std::vector<int64_t>(tr->params.begin(), tr->params.begin() + tr->n_params),
                  {name});
            if (encode(*tr) != tag) typed_ok = false;  // a value the typed form cannot say
          } else if (tag != TagVector{}) {
            typed_ok = false;  // an unknown type
          }
          if (v.size() != tag.size()) typed_ok = false;
        }
      }
      if (cs.HasMember("parallelized_dim") && cs["parallelized_dim"].IsString())
        entry("parallelization", {level(cs["parallelized_dim"].GetString())}, {}, {name});
      if (cs.HasMember("tiling") && cs["tiling"].IsObject() &&
          cs["tiling"].HasMember("tiling_dims")) {
        std::vector<int64_t> lv, pv;
        for (const Value& x : cs["tiling"]["tiling_dims"].GetArray())
          lv.push_back(level(x.GetString()));
        for (const Value& x : cs["tiling"]["tiling_factors"].GetArray())
          pv.push_back(x.IsString() ? std::stoll(x.GetString()) : x.GetInt64());
        entry("tiling", lv, pv, {name});
      }
      if (cs.HasMember("unrolling_factor") && !cs["unrolling_factor"].IsNull()) {
        const Value& u = cs["unrolling_factor"];
        const int64_t f = u.IsString() ? std::stoll(u.GetString()) : u.GetInt64();
        if (f != 0) entry("unrolling", {int64_t(its.size()) - 1}, {f}, {name});
      }
      if (cs.HasMember("shiftings") && cs["shiftings"].IsArray())
        for (const Value& sh : cs["shiftings"].GetArray())
          entry("shifting", {level(sh[0].GetString())}, {sh[1].GetInt64()}, {name});
    }
    if (s.HasMember("fusions") && s["fusions"].IsArray())
      for (const Value& f : s["fusions"].GetArray())
        entry("fusion", {f[2].GetInt64()}, {}, {f[0].GetString(), f[1].GetString()});
    if (!typed_ok) {
      ++n.kept_structured;
      continue;
    }
    for (auto c = comps.MemberBegin(); c != comps.MemberEnd(); ++c) s.RemoveMember(c->name);
    s.RemoveMember("fusions");
    s.RemoveMember("sched_str");
    s.AddMember("transformations_list", list, al);
  }
  return to_text(d);
}

/// `rec` with each schedule's per-computation dicts and fusions removed: only sched_str (and the
/// tree, the times) remain.
std::string rewrite_sched_str(const std::string& rec) {
  rapidjson::Document d;
  d.Parse(rec.c_str());
  REQUIRE(!d.HasParseError());
  const Value& comps = d["program_annotation"]["computations"];
  for (Value& s : d["schedules_list"].GetArray()) {
    for (auto c = comps.MemberBegin(); c != comps.MemberEnd(); ++c) s.RemoveMember(c->name);
    s.RemoveMember("fusions");
  }
  return to_text(d);
}

void expect_same_features(const ProgramFeatures& a, const ProgramFeatures& b) {
  CHECK(a.name == b.name);
  CHECK(a.footprint == b.footprint);
  CHECK(a.schedule_index == b.schedule_index);
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  CHECK(same_bits(a.comp_static, b.comp_static));
  CHECK(same_bits(a.expr, b.expr));
  CHECK(same_bits(a.comp_sched, b.comp_sched));
  CHECK(same_bits(a.loops, b.loops));
  CHECK(same_bits(a.speedup, b.speedup));
}

/// What check_file compared.
struct Compared {
  int64_t programs = 0, schedules = 0;  // compared value for value
  int64_t partial = 0;                  // compared without the tag vectors (Looper matrices)
  int64_t left_out = 0;                 // the forms disagree in the file itself
};

/// True when some schedule of `p` has a LOOPer-dialect sched_str (matrices: the tag vectors
/// behind them are one decomposition of several).
bool has_looper_sched_str(const Program& p) {
  for (const Schedule& s : p.schedules)
    if (sched_str_dialect(s.sched_str) == SchedStrDialect::Looper) return true;
  return false;
}

/// Featurises every record of `path` as written and as `rewrite` makes it; both must agree: value
/// for value, or (a program with LOOPer matrices, read from sched_str) on every feature but the
/// computation vectors that hold the tags. Programs whose own forms disagree (note
/// schedule_forms_disagree) are left out and counted.
template <class Rewrite>
void check_file(const std::string& path, Rewrite rewrite, const ReadOptions& opt, Compared& n) {
  SkipLog src_log(false, 0);
  RecordSource src(path, src_log);
  RawRecord rec;
  ReadOptions checked;  // finds the programs whose forms disagree in the file
  while (src.next(rec)) {
    SkipLog la(false, 0), lb(false, 0), lc(false, 0);
    std::optional<Program> a = parse_program(rec, la, opt);
    RawRecord other = rec;
    other.json = rewrite(rec.json);
    std::optional<Program> b = parse_program(other, lb, opt);
    REQUIRE(a.has_value() == b.has_value());
    if (!a) continue;
    CAPTURE(a->name);
    REQUIRE(parse_program(rec, lc, checked).has_value());
    if (lc.count("note", "schedule_forms_disagree") > 0) {
      ++n.left_out;
      continue;
    }
    std::optional<ProgramFeatures> fa = featurize(*a, FeatureOptions{}, la);
    std::optional<ProgramFeatures> fb = featurize(*b, FeatureOptions{}, lb);
    REQUIRE(fa.has_value() == fb.has_value());
    // The same drops, by reason (the forms' own notes aside).
    std::map<std::string, int64_t> ca = la.counts(), cb = lb.counts();
    for (auto* m : {&ca, &cb}) {
      m->erase("note/schedule_forms_disagree");
      m->erase("note/missing_comp_schedule");
    }
    CHECK(ca == cb);
    if (!fa) continue;
    if (opt.schedule_source == ScheduleSource::SchedStr && has_looper_sched_str(*a)) {
      CHECK(fa->schedule_index == fb->schedule_index);
      CHECK(fa->loops == fb->loops);
      CHECK(fa->speedup == fb->speedup);
      CHECK(fa->comp_static == fb->comp_static);
      ++n.partial;
      continue;
    }
    expect_same_features(*fa, *fb);
    ++n.programs;
    n.schedules += fa->n_schedules();
  }
}

}  // namespace

TEST_CASE("real schedules rewritten as a typed transformations_list give bit-identical features") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  RewriteCounts n;
  Compared c;
  ReadOptions opt;
  opt.schedule_check = ScheduleCheck::Off;
  check_file(
      path, [&](const std::string& j) { return rewrite_typed(j, n); }, opt, c);
  MESSAGE("typed: " << c.programs << " programs, " << c.schedules << " schedules compared; "
                    << n.schedules << " rewritten with " << n.entries << " entries, "
                    << n.kept_structured << " kept structured; " << c.left_out << " left out");
  // Measured on mini.jsonl.gz: 56 programs, 4,306 schedules; 2 schedules keep their dicts (a
  // fused computation parallelised on the other computation's loop), 4 programs whose
  // sched_str disagrees with their dicts are left out.
  CHECK(c.programs == 56);
  CHECK(c.schedules == 4306);
  CHECK(c.left_out == 4);
  CHECK(n.entries > n.schedules);  // the rewrite is not empty
  CHECK(n.kept_structured == 2);
}

TEST_CASE("real schedules rewritten as their sched_str alone give the same features") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/valid.jsonl.gz");
  Compared c;
  ReadOptions opt;
  opt.schedule_check = ScheduleCheck::Off;
  opt.schedule_source = ScheduleSource::SchedStr;
  check_file(path, rewrite_sched_str, opt, c);
  MESSAGE("sched_str: " << c.programs << " programs, " << c.schedules
                        << " schedules value for value; " << c.partial
                        << " programs with LOOPer matrices without their tag vectors; "
                        << c.left_out << " left out");
  // Measured on valid.jsonl.gz: 64 programs (6,776 schedules) of the per-computation dialects
  // value for value, 31 with LOOPer matrices, none whose forms disagree.
  CHECK(c.programs == 64);
  CHECK(c.schedules == 6776);
  CHECK(c.partial == 31);
  CHECK(c.left_out == 0);
}

TEST_CASE("distinct real schedules get distinct features: equal features are a repeated schedule") {
  // The model can only tell schedules apart by their features; two schedules of one program
  // with the same schedule descriptor (every schedule-dependent value of model-spec §3) must be
  // the same schedule, listed twice (measured twice), never two schedules read as one.
  LCM_REQUIRE_SHARED(path, "looperset-sample/valid.jsonl.gz");
  SkipLog src_log(false, 0);
  RecordSource src(path, src_log);
  RawRecord rec;
  int64_t programs = 0, schedules = 0, groups = 0, repeated = 0;
  while (src.next(rec)) {
    SkipLog log(false, 0);
    std::optional<Program> p = parse_program(rec, log, ReadOptions{});
    if (!p) continue;
    std::optional<ProgramFeatures> f = featurize(*p, FeatureOptions{}, log);
    if (!f) continue;
    CAPTURE(f->name);
    rapidjson::Document d;
    d.Parse(rec.json.c_str());
    REQUIRE(!d.HasParseError());
    Value& list = d["schedules_list"];
    // each kept schedule's JSON without its measurements and the search's bookkeeping
    auto schedule_text = [&](int32_t index) {
      Value& s = list[rapidjson::SizeType(index)];
      for (const char* key : {"execution_times", "exploration_method", "legality_check"})
        s.RemoveMember(key);
      return to_text(s);
    };
    std::map<std::vector<uint8_t>, std::vector<int64_t>> by_features;
    for (int64_t s = 0; s < f->n_schedules(); ++s) {
      const ScheduleDescriptor desc = f->descriptor(s);
      by_features[std::vector<uint8_t>(desc.data, desc.data + desc.size)].push_back(s);
    }
    for (const auto& [bytes, members] : by_features) {
      if (members.size() < 2) continue;
      ++groups;
      repeated += int64_t(members.size());
      const std::string first = schedule_text(f->schedule_index[size_t(members[0])]);
      for (size_t k = 1; k < members.size(); ++k)
        CHECK(schedule_text(f->schedule_index[size_t(members[k])]) == first);
    }
    ++programs;
    schedules += f->n_schedules();
  }
  MESSAGE(programs << " programs, " << schedules << " schedules; " << groups
                   << " schedules with equal features, " << repeated << " listings of them");
  // Measured on valid.jsonl.gz: 95 programs, 8,990 schedules; 17 schedules are listed twice
  // (their two measurements differ by up to 8.7x, docs/accuracy.md), no other features repeat.
  CHECK(programs == 95);
  CHECK(schedules == 8990);
  CHECK(groups == 17);
  CHECK(repeated == 34);
}
