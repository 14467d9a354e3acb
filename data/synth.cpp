// Synthetic program/schedule generator and its fast gzip-JSONL writer (docs/synth.md).
// Everything is a pure function of (seed, program index); chunks of programs are generated and
// raw-deflated in parallel and stitched into one gzip member (pigz-style, CRC combined).
#include "data/synth.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "engine/rng.hpp"

namespace lcm::data {
namespace {

// ---------------------------------------------------------------- small random helpers
int pick_weighted(Rng& r, const std::vector<double>& w) {
  double tot = 0;
  for (double x : w) tot += x;
  double u = r.next_double() * tot;
  for (size_t i = 0; i < w.size(); ++i) {
    if (u < w[i]) return int(i);
    u -= w[i];
  }
  return int(w.size()) - 1;
}
int between(Rng& r, int lo, int hi) { return lo + int(r.below(uint64_t(hi - lo + 1))); }  // [lo, hi]
bool chance(Rng& r, double p) { return r.next_double() < p; }

/// Standard normal by Box–Muller from two counter-based uniforms.
double normal(Rng& r) {
  double u1 = 1.0 - r.next_double();  // (0, 1]
  double u2 = r.next_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Rounds to 6 significant digits (times are written like the real data: 0.002161).
double round6(double v) {
  if (!(v > 0) || !std::isfinite(v)) return v;
  int e = int(std::floor(std::log10(v)));
  int k = 5 - e;  // decimals to keep
  if (k >= 0 && k <= 22) {
    double s = std::pow(10.0, k);
    return std::round(v * s) / s;
  }
  if (k < 0 && -k <= 22) {
    double s = std::pow(10.0, -k);
    return std::round(v / s) * s;
  }
  return v;
}

std::string two_digit(const char* prefix, int i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%02d", prefix, i);
  return b;
}

// ---------------------------------------------------------------- the generated record
struct Loop {
  int parent = -1;
  int depth = 0;                // 0 = root
  std::vector<int> children;    // loop ids, creation order
  std::vector<int> comps;       // generation-time computation ids placed directly here
  std::string name;
  double lo_mean = 0, hi_mean = 0;  // mean value of the lower / upper bound (for trip counts)
  double trip = 1;                  // mean trip count
  bool constant_bounds = true;
  int64_t lo_const = 0, hi_const = 0;
  std::string lower, upper;     // bound text
};

struct CompInfo {                // time-model facts of one computation (absolute order)
  std::vector<int> loops;        // loop ids outer→inner
  double ops = 0;                // weighted op count of the expression
  int type_size = 4;
  int type = 2;                  // 0 int32, 1 float32, 2 float64
  std::vector<std::vector<int>> matrices;  // read accesses then the write access (r × (n+1))
  std::vector<int> buffers;                // buffer id per matrix
  int reduction_level = -1;                // iterator position of the reduction, -1 if none
};

struct Record {
  Program program;
  double memory_mb = 0;
  std::vector<Loop> loops;       // index = iterator index (preorder)
  std::vector<CompInfo> info;    // by absolute order
  std::vector<uint8_t> null_times;  // per schedule: 1 = write null instead of [] when no times
};

const char* kDataTypes[3] = {"int32", "float32", "float64"};

// ---------------------------------------------------------------- program structure
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
    for (auto it = loops[l].children.rbegin(); it != loops[l].children.rend(); ++it) stack.push_back(*it);
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
    if (kind != 0 && path_product * 0.5 * double(rec.loops[a_id].hi_const - rec.loops[a_id].lo_const) > budget)
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
        if (form == 0) l.lower = a.name;
        else if (form == 1) l.lower = "(" + a.name + " + 1)";
        else l.lower = "max(0, " + a.name + ")";
        l.upper = std::to_string(a.hi_const + off);
        l.lo_mean = a_mean + double(off);
        l.hi_mean = double(a.hi_const + off);
      } else {          // upper bound = an outer iterator + 1: for (j = 0; j <= i; ...)
        l.lower = "0";
        l.upper = chance(r, 0.5) ? "(" + a.name + " + 1)" : a.name + " + 1";
        l.lo_mean = 0;
        l.hi_mean = a_mean + 1;
      }
    }
    l.trip = std::max(1.0, l.hi_mean - l.lo_mean);
  }
}

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
      if (c > 0 && chance(r, 0.25)) a.buffer_id = n_inputs + int(r.below(uint64_t(c)));  // producer
      else a.buffer_id = int(r.below(uint64_t(n_inputs)));
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
      for (const auto& row : comp.accesses[k].matrix) flat.insert(flat.end(), row.begin(), row.end());
    }
    info.matrices.push_back({});
    for (const auto& row : wm) info.matrices.back().insert(info.matrices.back().end(), row.begin(), row.end());
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

LoopNode tree_node(const Record& rec, int l) {
  LoopNode n;
  n.loop_name = rec.loops[l].name;
  for (int c : rec.loops[l].comps) n.computations.push_back(rec.program.computations[c].name);
  for (int ch : rec.loops[l].children) n.children.push_back(tree_node(rec, ch));
  return n;
}

LoopTree base_tree(const Record& rec) {
  LoopTree t;
  for (size_t l = 0; l < rec.loops.size(); ++l)
    if (rec.loops[l].parent < 0) t.roots.push_back(tree_node(rec, int(l)));
  return t;
}

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

// ---------------------------------------------------------------- schedules
/// Integers (a, b, c, d) with a·d − b·c = 1 (a unimodular 2-D skew, model-spec §3.4).
std::array<int64_t, 4> unimodular2(Rng& r) {
  if (chance(r, 0.6)) return {1, between(r, 1, 3), 0, 1};  // the classic [[1, f], [0, 1]]
  for (;;) {
    int64_t a = between(r, 1, 4), b = between(r, -3, 3);
    // extended Euclid: a·x + b·y = g
    int64_t old_r = a, rr = b, old_s = 1, s = 0, old_t = 0, t = 1;
    while (rr != 0) {
      int64_t q = old_r / rr;
      int64_t tmp = old_r - q * rr; old_r = rr; rr = tmp;
      tmp = old_s - q * s; old_s = s; s = tmp;
      tmp = old_t - q * t; old_t = t; t = tmp;
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
CompSchedule random_comp_schedule(Rng& r, const Computation& comp, std::map<std::string, int64_t>& loop_tile,
                                  int64_t unroll, std::string& str) {
  CompSchedule cs;
  int n = int(comp.iterators.size());
  // affine transformations in a random order, at most 4 vectors
  std::vector<int> kinds;
  if (n >= 2 && chance(r, 0.30)) kinds.push_back(1);
  if (chance(r, 0.15)) kinds.push_back(2);
  if (n >= 2 && chance(r, 0.22)) kinds.push_back(3);
  if (n >= 2 && chance(r, 0.05)) kinds.push_back(1);  // a second interchange
  for (int i = int(kinds.size()) - 1; i > 0; --i) std::swap(kinds[i], kinds[r.below(uint64_t(i) + 1)]);
  char b[160];
  for (int k : kinds) {
    std::array<int64_t, 16> t{};
    t[0] = k;
    if (k == 1) {
      int a = between(r, 0, n - 2);
      int c = between(r, a + 1, n - 1);
      t[1] = a;
      t[2] = c;
      std::snprintf(b, sizeof b, "I(L%d,L%d)", a, c);
    } else if (k == 2) {
      int lv = between(r, 0, n - 1);
      t[3] = lv;
      std::snprintf(b, sizeof b, "R(L%d)", lv);
    } else {
      if (n >= 3 && chance(r, 0.3)) {
        int i = between(r, 0, n - 3);
        auto m = unimodular3(r);
        t[4] = i, t[5] = i + 1, t[6] = i + 2;
        for (int q = 0; q < 9; ++q) t[7 + q] = m[q];
        std::snprintf(b, sizeof b, "S(L%d,L%d,L%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld)", i, i + 1, i + 2,
                      (long long)m[0], (long long)m[1], (long long)m[2], (long long)m[3], (long long)m[4],
                      (long long)m[5], (long long)m[6], (long long)m[7], (long long)m[8]);
      } else {
        int i = between(r, 0, n - 2);
        auto m = unimodular2(r);
        t[4] = i, t[5] = i + 1, t[6] = 0;
        for (int q = 0; q < 4; ++q) t[7 + q] = m[q];
        std::snprintf(b, sizeof b, "S(L%d,L%d,%lld,%lld,%lld,%lld)", i, i + 1, (long long)m[0], (long long)m[1],
                      (long long)m[2], (long long)m[3]);
      }
    }
    cs.transformations.push_back(t);
    str += b;
  }
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

// ---------------------------------------------------------------- the time model
/// Mean time (ms) of a schedule under the analytic model of docs/synth.md §3.
double model_time_ms(const Record& rec, const Schedule& s, const SynthTimeModel& tm) {
  const Program& p = rec.program;
  double total_ns = 0;
  for (size_t c = 0; c < p.computations.size(); ++c) {
    const Computation& comp = p.computations[c];
    const CompInfo& info = rec.info[c];
    const CompSchedule& cs = s.comps[c];
    int n = int(info.loops.size());
    // loop order after interchanges (positions → original iterator index)
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    double skew_factor = 1, misc_factor = 1;
    for (const auto& t : cs.transformations) {
      if (t[0] == 1 && t[1] < n && t[2] < n) std::swap(order[t[1]], order[t[2]]);
      if (t[0] == 2) misc_factor *= 1.01;
      if (t[0] == 3) {
        double off = t[6] > 0 ? double(std::abs(t[8]) + std::abs(t[9]) + std::abs(t[10]) + std::abs(t[12]) +
                                       std::abs(t[13]) + std::abs(t[14]))
                              : double(std::abs(t[8]) + std::abs(t[9]));
        skew_factor *= 1.0 + 0.05 * off + 0.03 * double(std::abs(t[7]) - 1);
      }
    }
    misc_factor *= std::pow(1.02, double(cs.shiftings.size()));
    std::vector<double> trip(n);
    for (int i = 0; i < n; ++i) trip[i] = rec.loops[info.loops[i]].trip;
    double points = 1;
    for (double t : trip) points *= t;
    int inner = order[n - 1];
    int second = n >= 2 ? order[n - 2] : -1;
    // footprint of the two innermost loops (after interchange); a tiled loop counts its tile
    std::vector<double> tile(n, 0.0);
    double tile_overhead = 1;
    for (size_t d = 0; d < cs.tiling_dims.size() && d < cs.tiling_factors.size(); ++d) {
      auto pos = std::find(comp.iterators.begin(), comp.iterators.end(), cs.tiling_dims[d]);
      if (pos == comp.iterators.end()) continue;
      int it = int(pos - comp.iterators.begin());
      double f = double(std::max<int64_t>(1, cs.tiling_factors[d]));
      tile[it] = f;
      tile_overhead *= 1.02 + 0.5 / f;
      if (f > trip[it]) tile_overhead *= 1.03;  // tile larger than the loop: wasted control
    }
    auto extent_in_cache = [&](int it) { return tile[it] > 0 ? std::min(tile[it], trip[it]) : trip[it]; };
    double inner_points = extent_in_cache(inner) * (second >= 0 ? extent_in_cache(second) : 1.0);
    bool tiled = tile[inner] > 0;
    double n_acc = double(info.matrices.size());
    bool over_cache = inner_points * n_acc * double(info.type_size) > tm.cache_bytes;
    double mem = 0;
    for (const auto& flat : info.matrices) {
      int cols = n + 1;
      int rows = int(flat.size()) / cols;
      bool used = false, contiguous = true;
      for (int row = 0; row < rows; ++row) {
        int coef = flat[size_t(row * cols + inner)];
        if (coef != 0) {
          used = true;
          if (row != rows - 1 || std::abs(coef) != 1) contiguous = false;
        }
      }
      double cost;
      if (!used) cost = 0.25;           // invariant in the innermost loop: kept in a register
      else if (contiguous) cost = 1.0;  // stride-1
      else cost = 1.0 + tm.strided_penalty * (tiled ? 0.5 : 1.0);
      if (over_cache && used) cost *= 1.0 + tm.capacity_penalty * (contiguous ? 0.3 : 1.0);
      mem += cost;
    }
    double compute = info.ops * (info.type == 0 ? tm.ns_per_op_int32
                                 : info.type == 1 ? tm.ns_per_op_float32 : tm.ns_per_op_float64);
    if (cs.unrolling_factor > 0) {
      double u = double(cs.unrolling_factor);
      if (u <= trip[inner]) compute *= 1.0 - 0.3 * (1.0 - 1.0 / u);
      else compute *= 1.05;
      if (info.ops * u > 96) compute *= 1.15;  // register pressure
    }
    double ns = points * (compute + tm.ns_per_access * mem) * skew_factor * misc_factor * tile_overhead;
    if (!cs.parallelized_dim.empty()) {
      int orig = int(std::find(comp.iterators.begin(), comp.iterators.end(), cs.parallelized_dim) -
                     comp.iterators.begin());
      if (orig < n) {
        int pos = int(std::find(order.begin(), order.end(), orig) - order.begin());
        double outer = 1;
        for (int q = 0; q < pos; ++q) outer *= trip[order[q]];
        double par = std::min(double(tm.cores), trip[orig]) * 0.9;
        if (orig == info.reduction_level) par = 0.5;  // parallel reduction: contention, no gain
        if (pos == n - 1) par *= 0.6;                  // innermost: loses vectorization
        ns = ns / std::max(par, 0.05) + tm.parallel_overhead_ns * outer;
      }
    }
    for (const auto& f : s.fusions) {
      if (f.comp_a != comp.name && f.comp_b != comp.name) continue;
      int other = p.computation_index(f.comp_a == comp.name ? f.comp_b : f.comp_a);
      bool shared = false;
      if (other >= 0)
        for (int b1 : info.buffers)
          for (int b2 : rec.info[size_t(other)].buffers) shared = shared || b1 == b2;
      ns *= shared ? 0.8 : 0.97;
    }
    total_ns += ns;
  }
  return total_ns * 1e-6 + 1e-4;
}

std::vector<double> measure(Rng& r, double mean_ms, const SynthTimeModel& tm) {
  int k = chance(r, 0.8) ? 30 : between(r, 1, 29);
  std::vector<double> out(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    double v = mean_ms * std::exp(tm.noise_sigma * normal(r));
    if ((i == 0 && chance(r, 0.3)) || chance(r, tm.outlier_probability)) v *= r.uniform(1.2, 3.0);
    out[size_t(i)] = round6(v);
  }
  return out;
}

Record generate(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm) {
  uint64_t base = mix64(opt.seed * 0x9E3779B97F4A7C15ull + uint64_t(index));
  Rng r_prog(base), r_sched(mix64(base ^ 1)), r_time(mix64(base ^ 2)), r_fate(mix64(base ^ 3));
  Record rec;
  Program& p = rec.program;
  char nm[64];
  std::snprintf(nm, sizeof nm, "synth_%llu_%07lld", (unsigned long long)opt.seed, (long long)index);
  p.name = nm;
  std::vector<int> comp_loop;
  if (opt.structures > 0) {  // the skeleton comes from a pool shared by all programs of the seed
    Rng r_pick(mix64(base ^ 4));
    const uint64_t skeleton = r_pick.below(uint64_t(opt.structures));
    Rng r_struct(mix64(0x57A7C7ull * 0x9E3779B97F4A7C15ull + skeleton));
    build_structure(r_struct, rec, comp_loop);
  } else {
    build_structure(r_prog, rec, comp_loop);
  }
  build_bounds(r_prog, rec);
  build_computations(r_prog, rec, comp_loop);
  fill_iterators(rec);
  const int C = int(p.computations.size());
  // groups: computations with the same innermost loop share their schedule
  std::vector<int> group_of(C);
  std::vector<int> group_rep;
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
  std::vector<std::pair<int, int>> siblings;
  for (size_t a = 0; a < rec.loops.size(); ++a)
    for (size_t b = a + 1; b < rec.loops.size(); ++b)
      if (rec.loops[a].parent == rec.loops[b].parent) siblings.push_back({int(a), int(b)});
  LoopTree tree0 = base_tree(rec);
  std::unordered_set<std::string> seen;
  const int S = opt.schedules_per_program;
  p.schedules.reserve(size_t(S));
  for (int si = 0; si < S; ++si) {
    Schedule s;
    s.comps.assign(size_t(C), CompSchedule{});
    if (si == 0) {
      s.tree = tree0;
      seen.insert("");
    } else {
      for (int attempt = 0; attempt < 8; ++attempt) {
        s = Schedule{};
        s.comps.assign(size_t(C), CompSchedule{});
        std::string str;
        LoopTree t = tree0;
        if (!siblings.empty() && chance(r_sched, 0.2)) {
          auto pr = siblings[r_sched.below(siblings.size())];
          int ca = first_comp_in_subtree(rec, pr.first), cb = first_comp_in_subtree(rec, pr.second);
          int level = rec.loops[pr.first].depth;
          if (ca >= 0 && cb >= 0) {
            s.fusions.push_back(Fusion{p.computations[ca].name, p.computations[cb].name, level});
            fuse_in_tree(t.roots, rec.loops[pr.first].name, rec.loops[pr.second].name);
            str += "F({C" + std::to_string(ca) + ",C" + std::to_string(cb) + "},L" + std::to_string(level) + ")";
          }
        }
        s.tree = std::move(t);
        std::vector<std::string> gstr(group_rep.size());
        std::vector<CompSchedule> gs(group_rep.size());
        std::map<std::string, int64_t> loop_tile;
        static const int64_t kU[4] = {2, 4, 8, 16};
        const int64_t unroll = kU[pick_weighted(r_sched, {10, 30, 30, 30})];
        for (size_t g = 0; g < group_rep.size(); ++g)
          gs[g] = random_comp_schedule(r_sched, p.computations[group_rep[g]], loop_tile, unroll, gstr[g]);
        bool any = !s.fusions.empty();
        for (const auto& cs : gs) any = any || !comp_schedule_empty(cs);
        if (!any) {  // never repeat the untransformed schedule: parallelize the outermost loop
          size_t g = r_sched.below(group_rep.size());
          gs[g].parallelized_dim = p.computations[group_rep[g]].iterators[0];
          gstr[g] += "P(L0)";
        }
        for (int c = 0; c < C; ++c) {
          s.comps[size_t(c)] = gs[size_t(group_of[c])];
          if (!gstr[size_t(group_of[c])].empty()) str += "{" + p.computations[c].name + "}:" + gstr[size_t(group_of[c])];
        }
        s.sched_str = str;
        if (seen.insert(str).second) break;  // keep a duplicate only after 8 tries (real data has some)
      }
    }
    // times: failed / missing fates come from their own stream so the knobs change nothing else
    double fate = r_fate.next_double();
    bool null_form = chance(r_fate, 0.5);
    double mean = model_time_ms(rec, s, tm);
    s.execution_times = measure(r_time, mean, tm);
    if (si > 0 && fate < opt.failed_fraction) {
      s.execution_times.assign(1, -1.0);
    } else if (si > 0 && fate < opt.failed_fraction + opt.missing_fraction) {
      s.execution_times.clear();
    }
    rec.null_times.push_back(null_form ? 1 : 0);
    p.schedules.push_back(std::move(s));
  }
  p.initial_execution_time = p.schedules[0].min_time();
  return rec;
}

// ---------------------------------------------------------------- JSON emission
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void write_str(Writer& w, const std::string& s) { w.String(s.data(), rapidjson::SizeType(s.size())); }
void key(Writer& w, const char* k) { w.Key(k); }

/// Writes an integer bound as a JSON number (or, rarely, a numeric string); other bounds as text.
void write_bound(Writer& w, const std::string& text, bool as_string) {
  bool numeric = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
  for (size_t i = 1; numeric && i < text.size(); ++i) numeric = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
  if (numeric && !as_string) w.Int64(std::stoll(text));
  else write_str(w, text);
}

void write_expr(Writer& w, const ExprNode& e) {
  w.StartObject();
  key(w, "expr_type");
  write_str(w, e.type);
  key(w, "children");
  w.StartArray();
  for (const auto& c : e.children) write_expr(w, c);
  w.EndArray();
  w.EndObject();
}

void write_node(Writer& w, const LoopNode& n) {
  w.StartObject();
  key(w, "loop_name");
  write_str(w, n.loop_name);
  key(w, "computations_list");
  w.StartArray();
  for (const auto& c : n.computations) write_str(w, c);
  w.EndArray();
  key(w, "child_list");
  w.StartArray();
  for (const auto& c : n.children) write_node(w, c);
  w.EndArray();
  w.EndObject();
}

void write_factor(Writer& w, int64_t f, bool as_string) {
  if (as_string) write_str(w, std::to_string(f));
  else w.Int64(f);
}

void write_record(const Record& rec, int64_t index, uint64_t seed, rapidjson::StringBuffer& sb) {
  const Program& p = rec.program;
  Writer w(sb);
  // formatting quirks of the real data (numeric strings) drawn from their own stream
  Rng fmt(mix64(mix64(seed ^ 0x5EEDF00Dull) + uint64_t(index)));
  w.StartObject();
  key(w, "program_name");
  write_str(w, p.name);
  key(w, "filename");
  write_str(w, "synthetic");
  key(w, "node_name");
  write_str(w, "lcm-synth");
  key(w, "program_annotation");
  w.StartObject();
  key(w, "memory_size");
  w.Double(round6(rec.memory_mb));
  key(w, "iterators");
  w.StartObject();
  for (const auto& it : p.iterators) {
    key(w, it.name.c_str());
    w.StartObject();
    key(w, "lower_bound");
    write_bound(w, it.lower.text, chance(fmt, 0.05));
    key(w, "upper_bound");
    write_bound(w, it.upper.text, chance(fmt, 0.05));
    key(w, "parent_iterator");
    if (it.parent.empty()) w.Null();
    else write_str(w, it.parent);
    key(w, "child_iterators");
    w.StartArray();
    for (const auto& c : it.children) write_str(w, c);
    w.EndArray();
    key(w, "computations_list");
    w.StartArray();
    for (const auto& c : it.computations) write_str(w, c);
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  key(w, "computations");
  w.StartObject();
  for (size_t c = 0; c < p.computations.size(); ++c) {
    const Computation& comp = p.computations[c];
    key(w, comp.name.c_str());
    w.StartObject();
    key(w, "absolute_order");
    w.Int(comp.absolute_order);
    key(w, "iterators");
    w.StartArray();
    for (const auto& i : comp.iterators) write_str(w, i);
    w.EndArray();
    key(w, "comp_is_reduction");
    w.Bool(comp.is_reduction);
    key(w, "write_access_relation");
    write_str(w, comp.write_access_relation);
    key(w, "write_buffer_id");
    w.Int(comp.write_buffer_id);
    key(w, "data_type");
    write_str(w, comp.data_type);
    key(w, "data_type_size");
    w.Int(rec.info[c].type_size);
    key(w, "accesses");
    w.StartArray();
    for (const auto& a : comp.accesses) {
      w.StartObject();
      key(w, "access_is_reduction");
      w.Bool(a.is_reduction);
      key(w, "buffer_id");
      w.Int(a.buffer_id);
      key(w, "access_matrix");
      w.StartArray();
      for (const auto& row : a.matrix) {
        w.StartArray();
        for (int v : row) w.Int(v);
        w.EndArray();
      }
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
    key(w, "expression_representation");
    write_expr(w, comp.expression);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();  // program_annotation
  key(w, "initial_execution_time");
  w.Double(p.initial_execution_time);
  key(w, "schedules_list");
  w.StartArray();
  for (size_t si = 0; si < p.schedules.size(); ++si) {
    const Schedule& s = p.schedules[si];
    w.StartObject();
    for (size_t c = 0; c < p.computations.size(); ++c) {
      const CompSchedule& cs = s.comps[c];
      key(w, p.computations[c].name.c_str());
      w.StartObject();
      key(w, "shiftings");
      if (cs.shiftings.empty()) {
        w.Null();
      } else {
        w.StartArray();
        for (const auto& sh : cs.shiftings) {
          w.StartArray();
          write_str(w, sh.first);
          w.Int64(sh.second);
          w.EndArray();
        }
        w.EndArray();
      }
      key(w, "tiling");
      w.StartObject();
      if (!cs.tiling_dims.empty()) {
        bool as_string = chance(fmt, 0.1);
        key(w, "tiling_depth");
        w.Int(int(cs.tiling_dims.size()));
        key(w, "tiling_dims");
        w.StartArray();
        for (const auto& d : cs.tiling_dims) write_str(w, d);
        w.EndArray();
        key(w, "tiling_factors");
        w.StartArray();
        for (int64_t f : cs.tiling_factors) write_factor(w, f, as_string);
        w.EndArray();
      }
      w.EndObject();
      key(w, "unrolling_factor");
      if (cs.unrolling_factor > 0) write_factor(w, cs.unrolling_factor, chance(fmt, 0.1));
      else w.Null();
      key(w, "parallelized_dim");
      if (cs.parallelized_dim.empty()) w.Null();
      else write_str(w, cs.parallelized_dim);
      key(w, "transformations_list");
      w.StartArray();
      for (const auto& t : cs.transformations) {
        w.StartArray();
        for (int64_t v : t) w.Int64(v);
        w.EndArray();
      }
      w.EndArray();
      w.EndObject();
    }
    key(w, "fusions");
    if (s.fusions.empty()) {
      w.Null();
    } else {
      w.StartArray();
      for (const auto& f : s.fusions) {
        w.StartArray();
        write_str(w, f.comp_a);
        write_str(w, f.comp_b);
        w.Int(f.level);
        w.EndArray();
      }
      w.EndArray();
    }
    key(w, "sched_str");
    write_str(w, s.sched_str);
    key(w, "tree_structure");
    w.StartObject();
    key(w, "roots");
    w.StartArray();
    for (const auto& n : s.tree->roots) write_node(w, n);
    w.EndArray();
    w.EndObject();
    key(w, "legality_check");
    w.Bool(true);
    key(w, "exploration_method");
    w.Int(1);
    key(w, "execution_times");
    if (s.execution_times.empty() && rec.null_times[si]) {
      w.Null();
    } else {
      w.StartArray();
      for (double t : s.execution_times) w.Double(t);
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void check_options(const SynthOptions& opt) {
  if (opt.schedules_per_program < 1) throw std::invalid_argument("synth: schedules_per_program must be >= 1");
  if (opt.programs < 0) throw std::invalid_argument("synth: programs must be >= 0");
  if (!(opt.failed_fraction >= 0 && opt.failed_fraction <= 1) ||
      !(opt.missing_fraction >= 0 && opt.missing_fraction <= 1) ||
      !(opt.failed_fraction + opt.missing_fraction <= 1))
    throw std::invalid_argument("synth: failed/missing fractions must lie in [0, 1] and sum to <= 1");
  if (opt.structures < 0) throw std::invalid_argument("synth: structures must be >= 0");
  if (opt.chunk_programs < 0) throw std::invalid_argument("synth: chunk_programs must be >= 0");
  if (opt.compression_level < 0 || opt.compression_level > 9)
    throw std::invalid_argument("synth: compression level must be 0..9");
}

// ---------------------------------------------------------------- parallel gzip writer
struct Chunk {
  std::string deflated;
  uLong crc = 0;
  int64_t raw_bytes = 0;
  int64_t schedules = 0;
};

/// Raw-deflates `data` (no header); a final chunk ends the stream, others end on a byte
/// boundary with a sync flush so that chunks can be concatenated (as pigz does).
std::string raw_deflate(const std::string& data, int level, bool last) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("synth: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&zs, uLong(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = uInt(data.size());
  size_t produced = 0;
  int flush = last ? Z_FINISH : Z_SYNC_FLUSH;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    zs.avail_out = uInt(out.size() - produced);
    int rc = deflate(&zs, flush);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      throw std::runtime_error("synth: deflate failed");
    }
    if ((last && rc == Z_STREAM_END) || (!last && zs.avail_in == 0 && zs.avail_out > 0)) break;
    out.resize(out.size() * 2);
  }
  deflateEnd(&zs);
  out.resize(produced);
  return out;
}

}  // namespace

Program synth_program(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm) {
  check_options(opt);
  return generate(opt, index, tm).program;
}

void synth_program_json(const SynthOptions& opt, int64_t index, std::string& out, const SynthTimeModel& tm) {
  check_options(opt);
  Record rec = generate(opt, index, tm);
  rapidjson::StringBuffer sb;
  write_record(rec, index, opt.seed, sb);
  out.append(sb.GetString(), sb.GetSize());
}

SynthStats write_synth_file(const std::string& path, const SynthOptions& opt, const SynthTimeModel& tm) {
  check_options(opt);
  const int64_t per_chunk = opt.chunk_programs > 0
                                ? opt.chunk_programs
                                : std::max<int64_t>(1, 4096 / std::max(1, opt.schedules_per_program));
  const int64_t n_chunks = std::max<int64_t>(1, (opt.programs + per_chunk - 1) / per_chunk);
  int threads = opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::min<int64_t>(threads, n_chunks));
  const int64_t window = 2 * int64_t(threads) + 2;

  std::filesystem::path target(path);
  if (target.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) throw std::runtime_error("synth: cannot create directory " + target.parent_path().string() + ": " + ec.message());
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("synth: cannot write " + tmp + ": " + std::strerror(errno));

  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, Chunk> done;
  int64_t next_chunk = 0, written = 0;
  std::string error;

  auto worker = [&]() {
    rapidjson::StringBuffer sb;
    std::string raw;
    for (;;) {
      int64_t k;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return !error.empty() || next_chunk >= n_chunks || next_chunk < written + window; });
        if (!error.empty() || next_chunk >= n_chunks) return;
        k = next_chunk++;
      }
      try {
        Chunk ch;
        raw.clear();
        int64_t lo = k * per_chunk, hi = std::min(opt.programs, lo + per_chunk);
        for (int64_t i = lo; i < hi; ++i) {
          Record rec = generate(opt, i, tm);
          sb.Clear();
          write_record(rec, i, opt.seed, sb);
          raw.append(sb.GetString(), sb.GetSize());
          raw.push_back('\n');
          ch.schedules += int64_t(rec.program.schedules.size());
        }
        ch.raw_bytes = int64_t(raw.size());
        ch.crc = crc32_z(0L, reinterpret_cast<const Bytef*>(raw.data()), raw.size());
        ch.deflated = raw_deflate(raw, opt.compression_level, k == n_chunks - 1);
        std::lock_guard<std::mutex> lk(mu);
        done.emplace(k, std::move(ch));
        cv.notify_all();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        if (error.empty()) error = e.what();
        cv.notify_all();
        return;
      }
    }
  };

  SynthStats st;
  st.programs = opt.programs;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // gzip, mtime 0, unix
  bool io_ok = std::fwrite(header, 1, sizeof header, f) == sizeof header;
  uLong crc = crc32_z(0L, Z_NULL, 0);
  uint64_t total = 0;
  int64_t compressed = sizeof header;
  while (written < n_chunks) {
    Chunk ch;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return !error.empty() || done.count(written) > 0; });
      if (!error.empty()) break;
      ch = std::move(done[written]);
      done.erase(written);
    }
    io_ok = io_ok && std::fwrite(ch.deflated.data(), 1, ch.deflated.size(), f) == ch.deflated.size();
    crc = crc32_combine(crc, ch.crc, z_off_t(ch.raw_bytes));
    total += uint64_t(ch.raw_bytes);
    compressed += int64_t(ch.deflated.size());
    st.schedules += ch.schedules;
    {
      std::lock_guard<std::mutex> lk(mu);
      ++written;
      if (!io_ok && error.empty()) error = "write failed";
      cv.notify_all();
    }
    if (!io_ok) break;
  }
  for (auto& t : pool) t.join();
  unsigned char trailer[8];
  for (int i = 0; i < 4; ++i) trailer[i] = static_cast<unsigned char>((crc >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) trailer[4 + i] = static_cast<unsigned char>((total >> (8 * i)) & 0xff);
  io_ok = io_ok && error.empty() && std::fwrite(trailer, 1, 8, f) == 8;
  io_ok = io_ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  int saved_errno = errno;
  io_ok = (std::fclose(f) == 0) && io_ok;
  if (!io_ok || !error.empty()) {
    std::remove(tmp.c_str());
    throw std::runtime_error("synth: failed writing " + path + ": " +
                             (error.empty() ? std::string(std::strerror(saved_errno)) : error));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("synth: cannot rename " + tmp + " to " + path + ": " + msg);
  }
  st.uncompressed_bytes = int64_t(total);
  st.compressed_bytes = compressed + 8;
  return st;
}

}  // namespace lcm::data
