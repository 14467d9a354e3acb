// The typed form of a schedule (json_fields.hpp parse_typed_list): a schedule-level
// transformations_list of {type, loop_levels, parameters, computations|comps} entries, each
// checked and applied to the computations it names.
#include <rapidjson/document.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/json_fields.hpp"
#include "data/transformations.hpp"

namespace lcm::data::json_detail {

namespace {

/// The typed transformation types: a tag-vector kind (transformations.hpp, its name and aliases
/// there) or one of the others, with the spellings accepted for each.
enum class TypedKind { Tag, Parallelization, Tiling, Unrolling, Shifting, Fusion };
bool typed_kind_of(std::string_view v, TypedKind& out, TransformKind& tag_kind) {
  static const std::pair<const char*, TypedKind> kNames[] = {
      {"parallelization", TypedKind::Parallelization},
      {"parallelisation", TypedKind::Parallelization},
      {"parallel", TypedKind::Parallelization},
      {"tiling", TypedKind::Tiling},
      {"tile", TypedKind::Tiling},
      {"unrolling", TypedKind::Unrolling},
      {"unroll", TypedKind::Unrolling},
      {"shifting", TypedKind::Shifting},
      {"shift", TypedKind::Shifting},
      {"fusion", TypedKind::Fusion},
      {"fuse", TypedKind::Fusion}};
  if (const std::optional<TransformKind> k = kind_of_name(v)) {
    out = TypedKind::Tag;
    tag_kind = *k;
    return true;
  }
  for (const auto& [name, kind] : kNames)
    if (v == name) {
      out = kind;
      return true;
    }
  return false;
}

/// The integers of a typed entry's `loop_levels` or `parameters`: an array, a single integer, or
/// null/absent (none).
std::vector<int64_t> typed_ints(const Value* v, const char* field) {
  std::vector<int64_t> out;
  if (!v || v->IsNull()) return out;
  if (!v->IsArray()) {
    out.push_back(as_int(*v, field));
    return out;
  }
  out.reserve(v->Size());
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) out.push_back(as_int((*v)[i], field));
  return out;
}

/// One typed entry as it is read: its members, its type, its levels (0-based, `lv`) and
/// parameters, and the computations it applies to.
struct TypedEntry {
  const Value* type = nullptr;
  const Value* levels = nullptr;
  const Value* params_v = nullptr;
  const Value* comps = nullptr;
  TypedKind kind = TypedKind::Tag;
  TransformKind tag_kind = TransformKind::Count;
  const char* kind_name = nullptr;  // the type as written
  std::vector<int64_t> raw;         // loop_levels as written (base-based)
  std::vector<int64_t> lv;          // 0-based levels
  std::vector<int64_t> params;
  std::vector<int> targets;  // computation indices
  bool named = false;        // the entry names its computations
  int64_t max_level = -1;    // the deepest of lv
};

/// Fails bad_transformation_entry unless the entry has `n_levels` loop levels.
void want_levels(const TypedEntry& e, size_t n_levels) {
  if (e.lv.size() != n_levels)
    fail("bad_transformation_entry", "loop_levels",
         std::string(e.kind_name) + " needs " + std::to_string(n_levels) + " loop level(s), got " +
             std::to_string(e.lv.size()));
}

/// The tag vector of an entry of tag kind e.tag_kind. Fails bad_transformation_entry on a count
/// of levels or parameters the kind does not take.
TagVector typed_tag(const TypedEntry& e) {
  const TransformKind k = e.tag_kind;
  const std::vector<int64_t>& lv = e.lv;
  const std::vector<int64_t>& params = e.params;
  const TransformKindInfo& info = kind_info(k);
  Transformation t;
  t.kind = k;
  for (int nl = info.min_levels; nl <= info.max_levels; ++nl)
    if (lv.size() == size_t(nl) && params.size() == size_t(param_count(k, nl))) t.n_levels = nl;
  if (t.n_levels == 0) {
    if (info.typed_usage)
      fail("bad_transformation_entry", "parameters",
           std::string(info.name) + " " + info.typed_usage + ", got " + std::to_string(lv.size()) +
               " and " + std::to_string(params.size()));
    want_levels(e, size_t(info.min_levels));
    const int np = param_count(k, info.min_levels);
    fail("bad_transformation_entry", "parameters",
         np == 0 ? std::string(info.name) + " takes no parameters"
                 : std::string(info.name) + " needs " + std::to_string(np) + " parameter(s), got " +
                       std::to_string(params.size()));
  }
  for (int l = 0; l < t.n_levels; ++l) t.levels[size_t(l)] = lv[size_t(l)];
  t.n_params = int(params.size());
  for (int q = 0; q < t.n_params; ++q) t.params[size_t(q)] = params[size_t(q)];
  return encode(t);
}

/// The members of entry `t` (an object of the keys lcm reads), and its type.
TypedEntry entry_members(const Value& t) {
  if (!t.IsObject())
    fail("bad_transformation_entry", "",
         std::string("expected a {type, loop_levels, parameters} object, got ") + show(t));
  TypedEntry e;
  for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m) {
    const Value& k = m->name;
    if (key_is(k, "type"))
      e.type = &m->value;
    else if (key_is(k, "loop_levels"))
      e.levels = &m->value;
    else if (key_is(k, "parameters"))
      e.params_v = &m->value;
    else if (key_is(k, "computations") || key_is(k, "comps"))
      e.comps = &m->value;
    else
      fail("bad_transformation_entry", "",
           "unknown key \"" + escape_text(k.GetString(), k.GetStringLength(), 40) +
               "\" (lcm reads type, loop_levels, parameters, computations or comps)");
  }
  if (!e.type) fail("bad_transformation_entry", "", "no type");
  if (!e.type->IsString() ||
      !typed_kind_of(std::string_view(e.type->GetString(), e.type->GetStringLength()), e.kind,
                     e.tag_kind)) {
    std::string names;
    for (const TransformKindInfo& i : kTransformKinds) names += std::string(i.name) + ", ";
    fail("unknown_transformation_type", "type",
         "unknown transformation type " + show(*e.type) + " (lcm reads " + names +
             "parallelization, tiling, unrolling, shifting, fusion)");
  }
  e.kind_name = e.type->GetString();
  return e;
}

/// The computations the entry names (e.targets, e.named); an empty list or an unknown name fails.
void named_targets(const Program& p, TypedEntry& e) {
  if (!e.comps || e.comps->IsNull()) return;
  // an empty list names no computation: it is not "every computation"
  if (e.comps->IsArray() && e.comps->Empty())
    fail("bad_transformation_entry", "computations",
         "an empty computation list (leave the key out to apply the entry to every "
         "computation with these loop levels)");
  for (const std::string& name : as_string_list(*e.comps, "computations")) {
    const int c = p.computation_index(name);
    if (c < 0)
      fail("unknown_computation", "computations",
           "no computation \"" + escape_text(name, 40) + "\" in the program");
    e.targets.push_back(c);
  }
  e.named = !e.targets.empty();
}

/// Counts the level evidence of data.loop_level_base=auto in `p` (levels that are 0, levels that
/// equal the depth of the computations named, or of the deepest one), before any level is refused.
void count_level_evidence(Program& p, const TypedEntry& e) {
  int max_depth = 0;
  for (const Computation& c : p.computations)
    max_depth = std::max(max_depth, int(c.iterators.size()));
  for (int64_t l : e.raw) {
    if (l == 0) ++p.typed_levels_zero;
    bool at_depth = false;
    if (e.named) {
      for (int c : e.targets) at_depth |= l == int64_t(p.computations[c].iterators.size());
    } else {
      at_depth = l == max_depth;
    }
    if (at_depth) ++p.typed_levels_at_depth;
  }
}

/// e.lv from e.raw counted from `base`; without named computations, the targets are those deep
/// enough for every level. Fails bad_loop_level below `base` or beyond a target's depth.
void entry_levels(const Program& p, int base, TypedEntry& e) {
  e.lv.resize(e.raw.size());
  for (size_t i = 0; i < e.raw.size(); ++i) {
    if (e.raw[i] < base)
      fail("bad_loop_level", "loop_levels",
           "loop level " + std::to_string(e.raw[i]) + " below " + std::to_string(base) +
               " (levels are " + std::to_string(base) + "-based, data.loop_level_base)");
    e.lv[i] = e.raw[i] - base;
  }
  for (int64_t l : e.lv) e.max_level = std::max(e.max_level, l);
  if (!e.named) {
    for (size_t c = 0; c < p.computations.size(); ++c)
      if (int64_t(p.computations[c].iterators.size()) > e.max_level) e.targets.push_back(int(c));
    if (e.targets.empty())
      fail("bad_loop_level", "loop_levels",
           "loop level " + std::to_string(e.max_level + base) +
               " is beyond the depth of every computation");
  }
  for (int c : e.targets)
    if (e.max_level >= int64_t(p.computations[size_t(c)].iterators.size()))
      fail("bad_loop_level", "loop_levels",
           "loop level " + std::to_string(e.max_level + base) + " is beyond the depth " +
               std::to_string(p.computations[size_t(c)].iterators.size()) + " of " +
               p.computations[size_t(c)].name);
}

/// The arity and factor checks of the entry's kind; the tag vector of a tag kind.
TagVector check_arity(const TypedEntry& e) {
  const std::vector<int64_t>& params = e.params;
  TagVector tag{};
  switch (e.kind) {
    case TypedKind::Tag:
      tag = typed_tag(e);
      break;
    case TypedKind::Tiling:
      if (e.lv.empty() || e.lv.size() > 3 || params.size() != e.lv.size())
        fail("bad_transformation_entry", "parameters",
             "tiling needs 1 to 3 loop levels and one factor per level, got " +
                 std::to_string(e.lv.size()) + " and " + std::to_string(params.size()));
      for (int64_t f : params)
        if (f <= 0)
          fail("bad_tile_factor", "parameters",
               "tiling factor " + std::to_string(f) + " is not positive");
      break;
    case TypedKind::Parallelization:
    case TypedKind::Shifting:
    case TypedKind::Unrolling:
    case TypedKind::Fusion:
      want_levels(e, 1);
      break;
  }
  if ((e.kind == TypedKind::Unrolling || e.kind == TypedKind::Shifting) && params.size() != 1)
    fail("bad_transformation_entry", "parameters",
         std::string(e.kind_name) + " needs one parameter, got " + std::to_string(params.size()));
  if (e.kind == TypedKind::Parallelization && !params.empty())
    fail("bad_transformation_entry", "parameters", "parallelization takes no parameters");
  if (e.kind == TypedKind::Unrolling && params[0] <= 0)
    fail("bad_unroll_factor", "parameters",
         "unrolling factor " + std::to_string(params[0]) + " is not positive");
  return tag;
}

/// A fusion entry: the computations it names (or the program's two) fused pairwise at its level.
void apply_fusion(const Program& p, const TypedEntry& e, NormalSchedule& out) {
  const size_t n_comps = p.computations.size();
  if (!e.params.empty())
    fail("bad_transformation_entry", "parameters", "fusion takes no parameters");
  if (!e.named && n_comps != 2)
    fail("bad_transformation_entry", "",
         "a fusion that names no computations is ambiguous in a program of " +
             std::to_string(n_comps) + " computations");
  std::vector<int> fused = e.named ? e.targets : std::vector<int>{0, 1};
  if (fused.size() < 2)
    fail("bad_transformation_entry", "computations", "a fusion needs two computations");
  for (size_t i = 0; i + 1 < fused.size(); ++i)
    out.fusions.push_back({p.computations[size_t(fused[i])].name,
                           p.computations[size_t(fused[i + 1])].name, int(e.lv[0])});
}

/// Unrolling of computation `c` at e.lv[0]; false (not applied) when an unnamed entry's level is
/// not c's innermost loop.
bool apply_unrolling(const Program& p, int base, const TypedEntry& e, int c, CompSchedule& cs) {
  // lcm's features unroll a computation's innermost loop (model-spec §3.3): the level must be
  // that loop, in the nest as written or after its tiling.
  const Computation& comp = p.computations[size_t(c)];
  const int64_t depth = int64_t(comp.iterators.size());
  const int64_t tiled = int64_t(cs.tiling_dims.size());
  const bool innermost = e.lv[0] == depth - 1 || (tiled > 0 && e.lv[0] == depth - 1 + tiled);
  if (!innermost) {
    if (e.named)
      fail("bad_loop_level", "loop_levels",
           "unrolling of loop level " + std::to_string(e.lv[0] + base) + ", not the " +
               "innermost loop of " + comp.name + " (lcm's features unroll the innermost loop)");
    return false;
  }
  if (cs.unrolling_factor != 0 && cs.unrolling_factor != e.params[0])
    fail("bad_transformation_entry", "", comp.name + " is unrolled twice");
  cs.unrolling_factor = e.params[0];
  return true;
}

/// The entry (not a fusion) applied to computation `c`; false when it does not apply there.
bool apply_to(const Program& p, int base, const TypedEntry& e, const TagVector& tag, int c,
              CompSchedule& cs) {
  const Computation& comp = p.computations[size_t(c)];
  auto iter = [&](int64_t level) -> const std::string& { return comp.iterators[size_t(level)]; };
  switch (e.kind) {
    case TypedKind::Tag:
      cs.transformations.push_back(tag);
      break;
    case TypedKind::Parallelization:
      if (!cs.parallelized_dim.empty() && cs.parallelized_dim != iter(e.lv[0]))
        fail("bad_transformation_entry", "", comp.name + " is parallelized twice");
      cs.parallelized_dim = iter(e.lv[0]);
      break;
    case TypedKind::Tiling:
      if (!cs.tiling_dims.empty())
        fail("bad_transformation_entry", "", comp.name + " is tiled twice");
      for (size_t i = 0; i < e.lv.size(); ++i) {
        cs.tiling_dims.push_back(iter(e.lv[i]));
        cs.tiling_factors.push_back(e.params[i]);
      }
      break;
    case TypedKind::Unrolling:
      return apply_unrolling(p, base, e, c, cs);
    case TypedKind::Shifting:
      cs.shiftings.emplace_back(iter(e.lv[0]), e.params[0]);
      break;
    case TypedKind::Fusion:
      break;
  }
  return true;
}

/// One entry `t` read, checked and applied to `out`.
void parse_typed_entry(const Value& t, Program& p, int base, NormalSchedule& out) {
  TypedEntry e = entry_members(t);
  ++p.typed_entries;
  e.raw = typed_ints(e.levels, "loop_levels");
  e.params = typed_ints(e.params_v, "parameters");
  named_targets(p, e);
  count_level_evidence(p, e);
  entry_levels(p, base, e);
  const TagVector tag = check_arity(e);
  if (e.kind == TypedKind::Fusion) {
    apply_fusion(p, e, out);
    return;
  }
  bool applied = false;
  for (int c : e.targets) applied |= apply_to(p, base, e, tag, c, out.comps[size_t(c)]);
  if (!applied)
    fail("bad_loop_level", "loop_levels",
         "unrolling of loop level " + std::to_string(e.lv[0] + base) +
             ", the innermost loop of no computation (lcm's features unroll the innermost "
             "loop)");
}

}  // namespace

bool is_typed_transformation_type(std::string_view type) {
  TypedKind kind;
  TransformKind tag_kind;
  return typed_kind_of(type, kind, tag_kind);
}

void parse_typed_list(const Value& tl, Program& p, int base, NormalSchedule& out) {
  out.comps.assign(p.computations.size(), CompSchedule());
  out.fusions.clear();
  if (tl.IsNull()) return;
  if (!tl.IsArray())
    fail("bad_transformation_entry", "transformations_list",
         std::string("expected an array of transformation objects, got ") + show(tl));
  for (rapidjson::SizeType e = 0; e < tl.Size(); ++e)
    within([&] { return indexed("transformations_list", e); },
           [&] { parse_typed_entry(tl[e], p, base, out); });
}

}  // namespace lcm::data::json_detail
