// The applicability rules of a normalised schedule (schedule_validation.hpp, docs/data-format.md
// § Skips "Applicability").
#include "data/schedule_validation.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include "data/transformations.hpp"

namespace lcm::data {

namespace {

/// The level of loop `name` in computation `c`'s nest, else in the nest of a computation fused
/// with `c` (a fused computation's loops at and above the fusion level are its partner's), or -1.
int level_of(const Program& p, const Schedule& s, int c, const std::string& name) {
  const auto& its = p.computations[size_t(c)].iterators;
  for (size_t i = 0; i < its.size(); ++i)
    if (its[i] == name) return int(i);
  const std::string& cn = p.computations[size_t(c)].name;
  for (const Fusion& f : s.fusions) {
    const std::string* other = f.comp_a == cn ? &f.comp_b : f.comp_b == cn ? &f.comp_a : nullptr;
    if (!other) continue;
    const int o = p.computation_index(*other);
    if (o < 0) continue;
    const auto& oi = p.computations[size_t(o)].iterators;
    for (size_t i = 0; i < oi.size(); ++i)
      if (oi[i] == name) return int(i);
  }
  return -1;
}

/// The determinant of the k×k integer matrix `m` (row-major, k ≤ 3, entries ≤ 2^31 in absolute
/// value: the products fit in __int128).
__int128 determinant(const int64_t* m, int k) {
  using I = __int128;
  if (k == 2) return I(m[0]) * m[3] - I(m[1]) * m[2];
  return I(m[0]) * (I(m[4]) * m[8] - I(m[5]) * m[7]) - I(m[1]) * (I(m[3]) * m[8] - I(m[5]) * m[6]) +
         I(m[2]) * (I(m[3]) * m[7] - I(m[4]) * m[6]);
}

std::string tag_text(const std::array<int64_t, 16>& tag) {
  std::string t = "[";
  int len = 16;
  while (len > 1 && tag[size_t(len - 1)] == 0) --len;
  for (int k = 0; k < len; ++k) t += (k ? ", " : "") + std::to_string(tag[size_t(k)]);
  return t + (len < 16 ? ", 0, ...]" : "]");
}

/// Why tag vector `tag` of a computation of depth `n` cannot be applied, or nullopt.
std::optional<ScheduleProblem> tag_problem(const std::array<int64_t, 16>& tag, int n,
                                           const std::string& comp) {
  auto bad = [&](const char* reason, const std::string& why) {
    return ScheduleProblem{reason, comp + ": transformation " + tag_text(tag) + ": " + why};
  };
  if (is_no_transformation(tag)) return std::nullopt;
  const std::optional<Transformation> t = decode(tag);
  if (!t) return bad("bad_transformation", "unknown transformation type " + std::to_string(tag[0]));
  for (int i = 0; i < t->n_levels; ++i) {
    const int64_t level = t->levels[size_t(i)];
    if (level < 0 || level >= n)
      return bad("bad_transformation", "loop level " + std::to_string(level) + " outside a depth-" +
                                           std::to_string(n) + " nest");
  }
  const TransformKindInfo& info = kind_info(t->kind);
  if (!info.unimodular_block) return std::nullopt;
  // A block kind (skewing): distinct loops, int factors, a unimodular block.
  const std::string name = info.name;
  const int k = t->n_levels;
  for (int i = 0; i < k; ++i)
    for (int j = i + 1; j < k; ++j)
      if (t->levels[size_t(i)] == t->levels[size_t(j)])
        return bad("bad_transformation", name + " names loop level " +
                                             std::to_string(t->levels[size_t(i)]) + " twice (a " +
                                             name + " transforms distinct loops)");
  for (int i = 0; i < t->n_params; ++i) {
    const int64_t f = t->params[size_t(i)];
    if (f > kMaxScheduleFactor || f < -kMaxScheduleFactor)
      return bad("bad_transformation", name + " factor " + std::to_string(f) +
                                           " beyond the int range of Tiramisu's " + info.tiramisu);
  }
  if (t->stray_params)
    return bad("bad_transformation", "a " + std::to_string(k) + "-loop " + name +
                                         " with more than " + std::to_string(t->n_params) +
                                         " factors");
  const __int128 det = determinant(t->params.data(), k);
  if (det == 0)
    return bad("singular_transformation",
               "the " + name + " factors form a singular matrix (determinant 0)");
  if (det != 1 && det != -1)
    return bad("non_unimodular_transformation",
               "the " + name + " factors' determinant is " + std::to_string(int64_t(det)) +
                   ", not ±1 (Tiramisu's " + info.tiramisu + " needs a unimodular " + name + ")");
  return std::nullopt;
}

}  // namespace

std::optional<ScheduleProblem> validate_schedule(const Program& p, const Schedule& s) {
  if (!s.parse_problem.empty()) return ScheduleProblem{s.parse_problem, s.parse_detail};
  const size_t C = p.computations.size();
  if (s.comps.size() != C)
    return ScheduleProblem{"bad_schedule_comps", std::to_string(s.comps.size()) +
                                                     " computation entries for " +
                                                     std::to_string(C) + " computations"};
  for (size_t ci = 0; ci < C; ++ci) {
    const Computation& comp = p.computations[ci];
    const CompSchedule& cs = s.comps[ci];
    const int n = int(comp.iterators.size());
    // tiling (Tiramisu computation::tile: 2 or 3 loops, sizes > 0; a 1-loop tiling is
    // computation::split)
    if (cs.tiling_dims.size() != cs.tiling_factors.size())
      return ScheduleProblem{"bad_tiling", comp.name +
                                               ": tiling_dims and tiling_factors differ "
                                               "in length"};
    if (cs.tiling_dims.size() > 3)
      return ScheduleProblem{
          "bad_tiling",
          comp.name + ": " + std::to_string(cs.tiling_dims.size()) + " tiled loops (at most 3)"};
    for (size_t k = 0; k < cs.tiling_dims.size(); ++k) {
      const std::string& d = cs.tiling_dims[k];
      for (size_t j = 0; j < k; ++j)
        if (cs.tiling_dims[j] == d)
          return ScheduleProblem{"loop_tiled_twice",
                                 comp.name + ": loop " + d + " is tiled twice in one tiling"};
      if (p.iterator_index(d) < 0)
        return ScheduleProblem{"unknown_loop_name", "tiling names unknown loop \"" + d + "\""};
      if (level_of(p, s, int(ci), d) < 0)
        return ScheduleProblem{"loop_not_in_nest", comp.name + ": tiled loop " + d +
                                                       " does not enclose it (nor a computation "
                                                       "fused with it)"};
      const int64_t f = cs.tiling_factors[k];
      if (f <= 0 || f > kMaxScheduleFactor)
        return ScheduleProblem{"bad_tile_factor",
                               comp.name + ": tiling factor " + std::to_string(f) + " of loop " +
                                   d + " is not in 1.." + std::to_string(kMaxScheduleFactor)};
    }
    if (cs.unrolling_factor < 0 || cs.unrolling_factor > kMaxScheduleFactor)
      return ScheduleProblem{"bad_unroll_factor", comp.name + ": unrolling factor " +
                                                      std::to_string(cs.unrolling_factor) +
                                                      " is not in 0.." +
                                                      std::to_string(kMaxScheduleFactor)};
    if (!cs.parallelized_dim.empty()) {
      if (p.iterator_index(cs.parallelized_dim) < 0)
        return ScheduleProblem{"unknown_loop_name", "parallelized_dim names unknown loop \"" +
                                                        cs.parallelized_dim + "\""};
      if (level_of(p, s, int(ci), cs.parallelized_dim) < 0)
        return ScheduleProblem{"loop_not_in_nest", comp.name + ": parallelised loop " +
                                                       cs.parallelized_dim +
                                                       " does not enclose it (nor a computation "
                                                       "fused with it)"};
    }
    for (const auto& sh : cs.shiftings)
      if (p.iterator_index(sh.first) < 0)
        return ScheduleProblem{"unknown_loop_name",
                               "shiftings names unknown loop \"" + sh.first + "\""};
    if (cs.transformations.size() > 4)
      return ScheduleProblem{"transformations_gt_4", comp.name + " has " +
                                                         std::to_string(cs.transformations.size()) +
                                                         " transformation vectors"};
    for (const auto& tag : cs.transformations)
      if (auto why = tag_problem(tag, n, comp.name)) return why;
  }
  for (const Fusion& f : s.fusions) {
    const int a = p.computation_index(f.comp_a), b = p.computation_index(f.comp_b);
    if (a < 0 || b < 0)
      return ScheduleProblem{"bad_fusion", "fusion names unknown computation \"" +
                                               (a < 0 ? f.comp_a : f.comp_b) + "\""};
    if (a == b)
      return ScheduleProblem{"bad_fusion", "fusion of " + f.comp_a +
                                               " with itself (a computation cannot be ordered "
                                               "after itself)"};
    const size_t da = p.computations[size_t(a)].iterators.size(),
                 db = p.computations[size_t(b)].iterators.size();
    if (f.level < 0 || size_t(f.level) >= da || size_t(f.level) >= db)
      return ScheduleProblem{"bad_fusion", "fusion level " + std::to_string(f.level) +
                                               " outside the loop nests of " + f.comp_a + " and " +
                                               f.comp_b};
  }
  return std::nullopt;
}

std::string first_transformation(const Program& p, const Schedule& s) {
  for (size_t c = 0; c < s.comps.size(); ++c) {
    const CompSchedule& cs = s.comps[c];
    const std::string name =
        c < p.computations.size() ? p.computations[c].name : "computation " + std::to_string(c);
    if (!cs.tiling_dims.empty()) return "a tiling of " + name;
    if (cs.unrolling_factor != 0) return "an unrolling of " + name;
    if (!cs.parallelized_dim.empty()) return "a parallelisation of " + name;
    if (!cs.shiftings.empty()) return "a shift of " + name;
    for (const auto& t : cs.transformations)
      if (!is_no_transformation(t)) return "a transformation " + tag_text(t) + " of " + name;
  }
  if (!s.fusions.empty())
    return "a fusion of " + s.fusions[0].comp_a + " and " + s.fusions[0].comp_b;
  return "";
}

bool is_untransformed(const Schedule& s) {
  Program none;
  return first_transformation(none, s).empty();
}

}  // namespace lcm::data
