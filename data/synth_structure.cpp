// Program structure of the synthetic generator (docs/synth.md §1): loop nests, iterators and
// their bounds, computations with their accesses and expressions, and the untransformed tree,
// with the facts the time model needs (CompInfo).
#include <algorithm>
#include <cstdio>

#include "data/synth_internal.hpp"

namespace lcm::data::synth_detail {
namespace {

std::string two_digit(const char* prefix, int i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%02d", prefix, i);
  return b;
}

const char* kDataTypes[3] = {"int32", "float32", "float64"};

struct BufferInfo {
  int rank = 1;
};

/// One access-matrix row set: rows map (mostly distinct) iterators with unit-ish coefficients.
std::vector<std::vector<int>> random_access_matrix(Rng& r, int rank, int n) {
  std::vector<std::vector<int>> m(rank, std::vector<int>(n + 1, 0));
  std::vector<int> its(n);
  for (int i = 0; i < n; ++i) its[i] = i;
  // choose which iterators feed the rows: the innermost ones in order (most common), or shuffled
  std::vector<int> pick;
  if (rank <= n) {
    if (chance(r, 0.7)) {
      for (int i = n - rank; i < n; ++i) pick.push_back(i);
    } else {
      for (int i = n - 1; i > 0; --i) std::swap(its[i], its[r.below(uint64_t(i) + 1)]);
      pick.assign(its.begin(), its.begin() + rank);
    }
  } else {
    for (int i = 0; i < rank; ++i) pick.push_back(i < rank - n ? -1 : i - (rank - n));
  }
  for (int row = 0; row < rank; ++row) {
    int it = pick[row];
    if (it >= 0 && chance(r, 0.05)) it = -1;  // constant index
    if (it >= 0) m[row][it] = chance(r, 0.95) ? 1 : (chance(r, 0.5) ? -1 : 2);
    if (n >= 2 && chance(r, 0.05)) {  // a second iterator in the same row (i + j)
      int j = int(r.below(uint64_t(n)));
      if (m[row][j] == 0) m[row][j] = 1;
    }
    int off = pick_weighted(r, {70, 12, 12, 3, 3});
    static const int kOff[5] = {0, 1, -1, 2, -2};
    m[row][n] = kOff[off];
  }
  return m;
}

/// Random expression with the given number of access leaves; ≤ kMaxNodes nodes, uses every op.
ExprNode random_expression(Rng& r, int n_access, double& ops) {
  constexpr int kMaxNodes = 66;
  std::vector<ExprNode> pool;
  for (int i = 0; i < n_access; ++i) pool.push_back(ExprNode{"access", {}});
  int n_values = pick_weighted(r, {40, 35, 15, 10});
  if (pool.empty() && n_values == 0) n_values = 1;
  for (int i = 0; i < n_values; ++i) pool.push_back(ExprNode{"value", {}});
  for (int i = int(pool.size()) - 1; i > 0; --i) std::swap(pool[i], pool[r.below(uint64_t(i) + 1)]);
  int nodes = int(pool.size());
  int binaries_left = int(pool.size()) - 1;
  static const char* kBinary[6] = {"add", "sub", "mul", "div", "min", "max"};
  static const double kBinaryW[6] = {30, 20, 25, 10, 7, 8};
  static const double kBinaryCost[6] = {1, 1, 1, 4, 1, 1};
  static const char* kUnary[3] = {"sqrt", "minus", "cast"};
  static const double kUnaryCost[3] = {6, 1, 1};
  ops = 0;
  while (pool.size() > 1 || (pool.size() == 1 && nodes < kMaxNodes && chance(r, 0.15))) {
    bool room = nodes + binaries_left + 1 <= kMaxNodes;
    if (room && chance(r, 0.18)) {
      size_t i = r.below(pool.size());
      int u = pick_weighted(r, {40, 35, 25});
      ExprNode n{kUnary[u], {}};
      n.children.push_back(std::move(pool[i]));
      pool[i] = std::move(n);
      ops += kUnaryCost[u];
      ++nodes;
      continue;
    }
    if (pool.size() == 1) break;
    size_t i = r.below(pool.size());
    size_t j = r.below(pool.size() - 1);
    if (j >= i) ++j;
    int b = pick_weighted(r, std::vector<double>(kBinaryW, kBinaryW + 6));
    ExprNode n{kBinary[b], {}};
    n.children.push_back(std::move(pool[i]));
    n.children.push_back(std::move(pool[j]));
    ops += kBinaryCost[b];
    size_t hi = std::max(i, j), lo = std::min(i, j);
    pool.erase(pool.begin() + long(hi));
    pool[lo] = std::move(n);
    ++nodes;
    --binaries_left;
  }
  return std::move(pool[0]);
}

LoopNode tree_node(const Record& rec, int l) {
  LoopNode n;
  n.loop_name = rec.loops[l].name;
  for (int c : rec.loops[l].comps) n.computations.push_back(rec.program.computations[c].name);
  for (int ch : rec.loops[l].children) n.children.push_back(tree_node(rec, ch));
  return n;
}

}  // namespace

/// Builds nests, names iterators (preorder) and computations (DFS order = absolute order).
void build_structure(Rng& r, Record& rec, std::vector<int>& comp_loop) {
  int n_roots = 1 + pick_weighted(r, {55, 25, 15, 5});
  int n_comps = 1 + pick_weighted(r, {28, 24, 18, 12, 10, 8});
  n_roots = std::min(n_roots, n_comps);
  std::vector<Loop> loops;
  std::vector<int> roots;
  for (int i = 0; i < n_roots; ++i) {
    loops.push_back(Loop{});
    roots.push_back(int(loops.size()) - 1);
  }
  std::vector<int> placed(n_comps);
  for (int c = 0; c < n_comps; ++c) {
    int nest = c < n_roots ? c : int(r.below(uint64_t(n_roots)));
    int depth = 1 + pick_weighted(r, {12, 28, 28, 20, 12});
    int cur = roots[nest];
    for (int d = 1; d < depth; ++d) {
      auto& ch = loops[cur].children;
      if (!ch.empty() && chance(r, 0.7)) {
        cur = ch[r.below(ch.size())];
      } else {
        Loop l;
        l.parent = cur;
        l.depth = d;
        loops.push_back(l);
        int id = int(loops.size()) - 1;
        loops[cur].children.push_back(id);
        cur = id;
      }
    }
    loops[cur].comps.push_back(c);
    placed[c] = cur;
  }
  // Preorder renumbering: iterator i<k> = k-th loop in preorder; computations numbered in DFS
  // order (a node's own computations before its children's).
  std::vector<int> order, comp_order;
  std::vector<int> stack(roots.rbegin(), roots.rend());
  while (!stack.empty()) {
    int l = stack.back();
    stack.pop_back();
    order.push_back(l);
    for (int c : loops[l].comps) comp_order.push_back(c);
    for (auto it = loops[l].children.rbegin(); it != loops[l].children.rend(); ++it)
      stack.push_back(*it);
  }
  std::vector<int> new_id(loops.size()), new_comp(n_comps);
  for (size_t k = 0; k < order.size(); ++k) new_id[order[k]] = int(k);
  for (size_t k = 0; k < comp_order.size(); ++k) new_comp[comp_order[k]] = int(k);
  rec.loops.assign(loops.size(), Loop{});
  for (size_t old = 0; old < loops.size(); ++old) {
    Loop l = loops[old];
    l.parent = l.parent < 0 ? -1 : new_id[l.parent];
    for (int& ch : l.children) ch = new_id[ch];
    for (int& c : l.comps) c = new_comp[c];
    l.name = "i" + std::to_string(new_id[old]);
    rec.loops[new_id[old]] = l;
  }
  comp_loop.assign(n_comps, 0);
  for (int c = 0; c < n_comps; ++c) comp_loop[new_comp[c]] = new_id[placed[c]];
}

/// Chooses extents and bound strings (rectangular, triangular lower/upper, max(0, i)).
void build_bounds(Rng& r, Record& rec) {
  for (size_t k = 0; k < rec.loops.size(); ++k) {  // preorder: parents first
    Loop& l = rec.loops[k];
    double path_product = 1;
    std::vector<int> anc;
    for (int a = l.parent; a >= 0; a = rec.loops[a].parent) {
      path_product *= rec.loops[a].trip;
      if (rec.loops[a].constant_bounds) anc.push_back(a);
    }
    double u = r.uniform(1.0, 11.0);
    int64_t e = std::max<int64_t>(2, int64_t(std::llround(std::pow(2.0, u))));
    if (chance(r, 0.5)) e = int64_t(1) << int64_t(std::llround(u));  // powers of two are common
    const double budget = double(1 << 23);  // iteration points along one path
    if (path_product * double(e) > budget) e = std::max<int64_t>(2, int64_t(budget / path_product));
    int kind = anc.empty() ? 0 : pick_weighted(r, {70, 15, 15});
    int a_id = kind == 0 ? -1 : anc[r.below(anc.size())];
    if (kind != 0 &&
        path_product * 0.5 * double(rec.loops[a_id].hi_const - rec.loops[a_id].lo_const) > budget)
      kind = 0;  // a triangular loop would exceed the iteration budget
    l.constant_bounds = kind == 0;
    if (kind == 0) {
      int64_t lo = chance(r, 0.8) ? 0 : 1;
      l.lo_const = lo;
      l.hi_const = lo + e;
      l.lower = std::to_string(lo);
      l.upper = std::to_string(lo + e);
      l.lo_mean = double(lo);
      l.hi_mean = double(lo + e);
    } else {
      const Loop& a = rec.loops[a_id];
      double a_mean = 0.5 * double(a.lo_const + a.hi_const - 1);
      if (kind == 1) {  // lower bound = an outer iterator: for (j = i; j < N; ...)
        int form = pick_weighted(r, {60, 20, 20});
        int64_t off = form == 1 ? 1 : 0;
        if (form == 0)
          l.lower = a.name;
        else if (form == 1)
          l.lower = "(" + a.name + " + 1)";
        else
          l.lower = "max(0, " + a.name + ")";
        l.upper = std::to_string(a.hi_const + off);
        l.lo_mean = a_mean + double(off);
        l.hi_mean = double(a.hi_const + off);
      } else {  // upper bound = an outer iterator + 1: for (j = 0; j <= i; ...)
        l.lower = "0";
        l.upper = chance(r, 0.5) ? "(" + a.name + " + 1)" : a.name + " + 1";
        l.lo_mean = 0;
        l.hi_mean = a_mean + 1;
      }
    }
    l.trip = std::max(1.0, l.hi_mean - l.lo_mean);
  }
}

void build_computations(Rng& r, Record& rec, const std::vector<int>& comp_loop) {
  Program& p = rec.program;
  int n_comps = int(comp_loop.size());
  int n_inputs = between(r, 1, 6);
  std::vector<BufferInfo> buffers(n_inputs + n_comps);
  for (int b = 0; b < n_inputs; ++b) buffers[b].rank = 1 + pick_weighted(r, {20, 35, 25, 12, 8});
  int program_type = int(r.below(3));
  p.computations.resize(n_comps);
  rec.info.resize(n_comps);
  double mem = 0;
  for (int c = 0; c < n_comps; ++c) {
    Computation& comp = p.computations[c];
    CompInfo& info = rec.info[c];
    comp.name = two_digit("comp", c);
    comp.absolute_order = c + 1;
    for (int l = comp_loop[c]; l >= 0; l = rec.loops[l].parent) info.loops.push_back(l);
    std::reverse(info.loops.begin(), info.loops.end());
    int n = int(info.loops.size());
    for (int l : info.loops) comp.iterators.push_back(rec.loops[l].name);
    int type = chance(r, 0.8) ? program_type : int(r.below(3));
    comp.data_type = kDataTypes[type];
    info.type_size = type == 2 ? 8 : 4;
    info.type = type;
    // write access: identity order of the kept iterators (a reduction drops one)
    comp.is_reduction = n >= 2 && chance(r, 0.3);
    std::vector<int> kept;
    if (comp.is_reduction) {
      info.reduction_level = chance(r, 0.7) ? n - 1 : between(r, 1, n - 1);
      for (int i = 0; i < n; ++i)
        if (i != info.reduction_level) kept.push_back(i);
    } else {
      for (int i = 0; i < n; ++i) kept.push_back(i);
    }
    if (kept.size() >= 2 && chance(r, 0.1)) std::swap(kept[kept.size() - 1], kept[kept.size() - 2]);
    int out_id = n_inputs + c;
    buffers[out_id].rank = int(kept.size());
    comp.write_buffer_id = out_id;
    std::vector<std::vector<int>> wm(kept.size(), std::vector<int>(n + 1, 0));
    for (size_t row = 0; row < kept.size(); ++row) wm[row][kept[row]] = 1;
    bool primed = chance(r, 0.1);
    std::string rel = "{ " + comp.name + "[";
    for (int i = 0; i < n; ++i) rel += (i ? ", " : "") + comp.iterators[i];
    rel += "] -> " + two_digit("buf", out_id) + "[";
    for (size_t row = 0; row < kept.size(); ++row) {
      const std::string& it = comp.iterators[kept[row]];
      rel += (row ? ", " : "") + (primed ? it + "' = " + it : it);
    }
    rel += "] }";
    comp.write_access_relation = rel;
    // read accesses
    int n_reads = pick_weighted(r, {5, 8, 22, 25, 10, 8, 4, 4, 3, 3, 2, 2, 1.5, 1.5, 0.5, 0.5});
    if (comp.is_reduction) n_reads = std::min(n_reads, 14);
    if (comp.is_reduction) {
      Access a;
      a.is_reduction = true;
      a.buffer_id = out_id;
      a.matrix = wm;
      comp.accesses.push_back(a);
    }
    for (int k = 0; k < n_reads; ++k) {
      Access a;
      if (c > 0 && chance(r, 0.25))
        a.buffer_id = n_inputs + int(r.below(uint64_t(c)));  // producer
      else
        a.buffer_id = int(r.below(uint64_t(n_inputs)));
      int rank = buffers[a.buffer_id].rank;
      a.matrix = random_access_matrix(r, rank, n);
      comp.accesses.push_back(a);
    }
    double ops = 0;
    comp.expression = random_expression(r, int(comp.accesses.size()), ops);
    info.ops = std::max(1.0, ops);
    for (const auto& a : comp.accesses) {
      info.matrices.push_back({});
      info.buffers.push_back(a.buffer_id);
    }
    for (size_t k = 0; k < comp.accesses.size(); ++k) {
      auto& flat = info.matrices[k];
      for (const auto& row : comp.accesses[k].matrix)
        flat.insert(flat.end(), row.begin(), row.end());
    }
    info.matrices.push_back({});
    for (const auto& row : wm)
      info.matrices.back().insert(info.matrices.back().end(), row.begin(), row.end());
    info.buffers.push_back(out_id);
    double elems = 1;  // the written buffer's size: product of the kept loops' trip counts
    for (int k : kept) elems *= rec.loops[info.loops[size_t(k)]].trip;
    mem += elems * info.type_size;
  }
  rec.memory_mb = mem / (1024.0 * 1024.0);
}

// ---------------------------------------------------------------- iterators and the tree
void fill_iterators(Record& rec) {
  Program& p = rec.program;
  for (const Loop& l : rec.loops) {
    Iterator it;
    it.name = l.name;
    it.lower.text = l.lower;
    it.upper.text = l.upper;
    it.parent = l.parent < 0 ? "" : rec.loops[l.parent].name;
    for (int ch : l.children) it.children.push_back(rec.loops[ch].name);
    for (int c : l.comps) it.computations.push_back(p.computations[c].name);
    p.iterators.push_back(it);
  }
}

LoopTree base_tree(const Record& rec) {
  LoopTree t;
  for (size_t l = 0; l < rec.loops.size(); ++l)
    if (rec.loops[l].parent < 0) t.roots.push_back(tree_node(rec, int(l)));
  return t;
}

}  // namespace lcm::data::synth_detail
