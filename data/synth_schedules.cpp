// Schedules of the synthetic generator (docs/synth.md §2): per-computation-group affine
// transformations (interchange, reversal, 2-D/3-D unimodular skews), shifting, parallelization,
// tiling and unrolling, fusion of sibling loops, and the sched_str of each schedule.
#include <array>
#include <cstdio>
#include <map>

#include "data/synth_internal.hpp"
#include "data/transformations.hpp"

namespace lcm::data::synth_detail {
namespace {

/// Merges loop `b` into its sibling `a` in a copy of the tree (fusion at their depth).
bool fuse_in_tree(std::vector<LoopNode>& level, const std::string& a, const std::string& b) {
  int ia = -1, ib = -1;
  for (size_t i = 0; i < level.size(); ++i) {
    if (level[i].loop_name == a) ia = int(i);
    if (level[i].loop_name == b) ib = int(i);
  }
  if (ia >= 0 && ib >= 0) {
    LoopNode nb = std::move(level[ib]);
    for (auto& c : nb.computations) level[ia].computations.push_back(c);
    for (auto& ch : nb.children) level[ia].children.push_back(std::move(ch));
    level.erase(level.begin() + ib);
    return true;
  }
  for (auto& n : level)
    if (fuse_in_tree(n.children, a, b)) return true;
  return false;
}

int first_comp_in_subtree(const Record& rec, int l) {
  if (!rec.loops[l].comps.empty()) return rec.loops[l].comps[0];
  for (int ch : rec.loops[l].children) {
    int c = first_comp_in_subtree(rec, ch);
    if (c >= 0) return c;
  }
  return -1;
}

/// Integers (a, b, c, d) with a·d − b·c = 1 (a unimodular 2-D skew, docs/model-spec.md §3.4).
std::array<int64_t, 4> unimodular2(Rng& r) {
  if (chance(r, 0.6)) return {1, between(r, 1, 3), 0, 1};  // the classic [[1, f], [0, 1]]
  for (;;) {
    int64_t a = between(r, 1, 4), b = between(r, -3, 3);
    // extended Euclid: a·x + b·y = g
    int64_t old_r = a, rr = b, old_s = 1, s = 0, old_t = 0, t = 1;
    while (rr != 0) {
      int64_t q = old_r / rr;
      int64_t tmp = old_r - q * rr;
      old_r = rr;
      rr = tmp;
      tmp = old_s - q * s;
      old_s = s;
      s = tmp;
      tmp = old_t - q * t;
      old_t = t;
      t = tmp;
    }
    if (old_r == 1 || old_r == -1) {
      int64_t x = old_s * old_r, y = old_t * old_r;  // a·x + b·y = 1
      if (b == 0 && a == 1) continue;                // identity: not a skew
      return {a, b, -y, x};                          // a·x − b·(−y) = 1
    }
  }
}

/// A 3×3 integer matrix of determinant 1 (product of unit lower and upper triangular matrices).
std::array<int64_t, 9> unimodular3(Rng& r) {
  int64_t u1 = between(r, 0, 2), u2 = between(r, 0, 2), u3 = between(r, 0, 2);
  if (u1 == 0 && u2 == 0 && u3 == 0) u1 = 1;
  int64_t l1 = chance(r, 0.3) ? between(r, -1, 1) : 0;
  // U = [[1,u1,u2],[0,1,u3],[0,0,1]], L = [[1,0,0],[l1,1,0],[0,0,1]]; M = L·U
  return {1, u1, u2, l1, l1 * u1 + 1, l1 * u2 + u3, 0, 0, 1};
}

/// The per-group schedule (computations with the same loop nest share it).
/// Tile factors are drawn once per loop and unroll factors once per schedule (`loop_tile`,
/// `unroll`), so that computations sharing a loop never disagree (model-spec §3.8 asserts this).
Transformation random_transformation(Rng& r, TransformKind k, int n) {
  Transformation t;
  t.kind = k;
  switch (k) {
    case TransformKind::Interchange: {
      const int a = between(r, 0, n - 2);
      t.n_levels = 2;
      t.levels = {a, between(r, a + 1, n - 1), 0};
      break;
    }
    case TransformKind::Reversal:
      t.n_levels = 1;
      t.levels[0] = between(r, 0, n - 1);
      break;
    case TransformKind::Skewing:
      if (n >= 3 && chance(r, 0.3)) {
        const int i = between(r, 0, n - 3);
        const auto m = unimodular3(r);
        t.n_levels = 3;
        t.levels = {i, i + 1, i + 2};
        std::copy(m.begin(), m.end(), t.params.begin());
      } else {
        const int i = between(r, 0, n - 2);
        const auto m = unimodular2(r);
        t.n_levels = 2;
        t.levels = {i, i + 1, 0};
        std::copy(m.begin(), m.end(), t.params.begin());
      }
      t.n_params = param_count(k, t.n_levels);
      break;
    case TransformKind::Count:
      break;
  }
  return t;
}

CompSchedule random_comp_schedule(Rng& r, const Computation& comp,
                                  std::map<std::string, int64_t>& loop_tile, int64_t unroll,
                                  std::string& str) {
  CompSchedule cs;
  int n = int(comp.iterators.size());
  // affine transformations in a random order, at most 4 vectors
  std::vector<TransformKind> kinds;
  if (n >= 2 && chance(r, 0.30)) kinds.push_back(TransformKind::Interchange);
  if (chance(r, 0.15)) kinds.push_back(TransformKind::Reversal);
  if (n >= 2 && chance(r, 0.22)) kinds.push_back(TransformKind::Skewing);
  if (n >= 2 && chance(r, 0.05)) kinds.push_back(TransformKind::Interchange);  // a second one
  for (int i = int(kinds.size()) - 1; i > 0; --i)
    std::swap(kinds[i], kinds[r.below(uint64_t(i) + 1)]);
  for (TransformKind k : kinds) {
    const Transformation t = random_transformation(r, k, n);
    cs.transformations.push_back(encode(t));
    str += sched_str_term(t);
  }
  char b[160];
  if (chance(r, 0.08) && n >= 1) {
    int lv = between(r, 0, n - 1);
    int64_t f = between(r, 1, 3);
    cs.shiftings.push_back({comp.iterators[lv], f});
    std::snprintf(b, sizeof b, "Sh(L%d,%lld)", lv, (long long)f);
    str += b;
  }
  if (chance(r, 0.35)) {
    int lv = chance(r, 0.6) ? 0 : between(r, 0, n - 1);
    cs.parallelized_dim = comp.iterators[lv];
    std::snprintf(b, sizeof b, "P(L%d)", lv);
    str += b;
  }
  if (n >= 2 && chance(r, 0.35)) {
    int depth = (n >= 3 && chance(r, 0.35)) ? 3 : 2;
    int start = between(r, 0, n - depth);
    static const int64_t kF[5] = {8, 16, 32, 64, 128};
    int64_t f0 = kF[pick_weighted(r, {5, 10, 40, 25, 20})];
    std::string s = "T" + std::to_string(depth) + "(";
    for (int d = 0; d < depth; ++d) s += "L" + std::to_string(start + d) + ",";
    for (int d = 0; d < depth; ++d) {
      auto known = loop_tile.find(comp.iterators[start + d]);
      int64_t f = known != loop_tile.end() ? known->second : (chance(r, 0.6) ? f0 : kF[r.below(5)]);
      loop_tile[comp.iterators[start + d]] = f;
      cs.tiling_dims.push_back(comp.iterators[start + d]);
      cs.tiling_factors.push_back(f);
      s += std::to_string(f) + (d + 1 < depth ? "," : ")");
    }
    str += s;
  }
  if (chance(r, 0.3)) {
    cs.unrolling_factor = unroll;
    std::snprintf(b, sizeof b, "U(L%d,%lld)", n - 1, (long long)cs.unrolling_factor);
    str += b;
  }
  return cs;
}

bool comp_schedule_empty(const CompSchedule& cs) {
  return cs.parallelized_dim.empty() && cs.tiling_dims.empty() && cs.unrolling_factor == 0 &&
         cs.shiftings.empty() && cs.transformations.empty();
}

}  // namespace

ScheduleSpace schedule_space(const Record& rec, const std::vector<int>& comp_loop) {
  ScheduleSpace sp;
  const int C = int(rec.program.computations.size());
  // groups: computations with the same innermost loop share their schedule
  std::vector<int>& group_of = sp.group_of;
  std::vector<int>& group_rep = sp.group_rep;
  group_of.assign(size_t(C), 0);
  std::map<int, int> loop_group;
  for (int c = 0; c < C; ++c) {
    auto it = loop_group.find(comp_loop[c]);
    if (it == loop_group.end()) {
      it = loop_group.emplace(comp_loop[c], int(group_rep.size())).first;
      group_rep.push_back(c);
    }
    group_of[c] = it->second;
  }
  // sibling loop pairs that fusion may merge (same parent, or both roots)
  std::vector<std::pair<int, int>>& siblings = sp.siblings;
  for (size_t a = 0; a < rec.loops.size(); ++a)
    for (size_t b = a + 1; b < rec.loops.size(); ++b)
      if (rec.loops[a].parent == rec.loops[b].parent) siblings.push_back({int(a), int(b)});
  sp.tree0 = base_tree(rec);
  return sp;
}

Schedule random_schedule(Rng& r_sched, const Record& rec, const ScheduleSpace& space,
                         std::unordered_set<std::string>& seen) {
  const Program& p = rec.program;
  const int C = int(p.computations.size());
  const std::vector<int>& group_of = space.group_of;
  const std::vector<int>& group_rep = space.group_rep;
  const std::vector<std::pair<int, int>>& siblings = space.siblings;
  Schedule s;
  for (int attempt = 0; attempt < 8; ++attempt) {
    s = Schedule{};
    s.comps.assign(size_t(C), CompSchedule{});
    std::string str;
    LoopTree t = space.tree0;
    if (!siblings.empty() && chance(r_sched, 0.2)) {
      auto pr = siblings[r_sched.below(siblings.size())];
      int ca = first_comp_in_subtree(rec, pr.first), cb = first_comp_in_subtree(rec, pr.second);
      int level = rec.loops[pr.first].depth;
      if (ca >= 0 && cb >= 0) {
        s.fusions.push_back(Fusion{p.computations[ca].name, p.computations[cb].name, level});
        fuse_in_tree(t.roots, rec.loops[pr.first].name, rec.loops[pr.second].name);
        str += "F({C" + std::to_string(ca) + ",C" + std::to_string(cb) + "},L" +
               std::to_string(level) + ")";
      }
    }
    s.tree = std::move(t);
    std::vector<std::string> gstr(group_rep.size());
    std::vector<CompSchedule> gs(group_rep.size());
    std::map<std::string, int64_t> loop_tile;
    static const int64_t kU[4] = {2, 4, 8, 16};
    const int64_t unroll = kU[pick_weighted(r_sched, {10, 30, 30, 30})];
    for (size_t g = 0; g < group_rep.size(); ++g)
      gs[g] =
          random_comp_schedule(r_sched, p.computations[group_rep[g]], loop_tile, unroll, gstr[g]);
    bool any = !s.fusions.empty();
    for (const auto& cs : gs) any = any || !comp_schedule_empty(cs);
    if (!any) {  // never repeat the untransformed schedule: parallelize the outermost loop
      size_t g = r_sched.below(group_rep.size());
      gs[g].parallelized_dim = p.computations[group_rep[g]].iterators[0];
      gstr[g] += "P(L0)";
    }
    for (int c = 0; c < C; ++c) {
      s.comps[size_t(c)] = gs[size_t(group_of[c])];
      if (!gstr[size_t(group_of[c])].empty())
        str += "{" + p.computations[c].name + "}:" + gstr[size_t(group_of[c])];
    }
    s.sched_str = str;
    if (seen.insert(str).second) break;  // keep a duplicate only after 8 tries (real data has some)
  }
  return s;
}

}  // namespace lcm::data::synth_detail
