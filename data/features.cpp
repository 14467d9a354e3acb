// Program → features (docs/model-spec.md §2–§4): tree annotation and footprint, the schedule tree
// traversal, the 910-wide computation vectors (static part once per program, 146 schedule columns
// per schedule), the 8-wide loop vectors, the speedup label, and the drop rules of §3.11 / Q6.
#include "data/features.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "data/transformations.hpp"

namespace lcm::data {

// ---------------------------------------------------------------- schedule columns (§3.2)

namespace {
// Schedule-dependent ranges of the computation vector: [1, 97) and [157, 207).
constexpr int kSchedA0 = 1, kSchedA1 = 97, kSchedB0 = 157, kSchedB1 = 207;
constexpr int kSchedAWidth = kSchedA1 - kSchedA0;  // 96
constexpr int kSchedBWidth = kSchedB1 - kSchedB0;  // 50
static_assert(kSchedAWidth + kSchedBWidth == kScheduleColumns, "146 schedule columns");

// Offsets inside the computation vector.
constexpr int kOffSlots = 1, kOffUnrolled = 31, kOffUnrollFactor = 32, kOffTags = 33, kOffA = 97,
              kOffB = 147, kOffAT = 157, kOffWriteId = 207, kOffWrite = 208, kOffReads = 250;
constexpr int kReadBlock = kAccessBlockWidth + 2;  // 44
static_assert(kOffReads + kMaxAccesses * kReadBlock == kCompVectorWidth, "910 columns");
}  // namespace

const std::vector<int>& schedule_columns() {
  static const std::vector<int> cols = [] {
    std::vector<int> v;
    for (int c = kSchedA0; c < kSchedA1; ++c) v.push_back(c);
    for (int c = kSchedB0; c < kSchedB1; ++c) v.push_back(c);
    return v;
  }();
  return cols;
}

bool is_schedule_column(int c) {
  return (c >= kSchedA0 && c < kSchedA1) || (c >= kSchedB0 && c < kSchedB1);
}

bool ProgramFeatures::rows_in_memory() const {
  const int64_t S = n_schedules();
  return int64_t(comp_sched.size()) == S * n_comps * kScheduleColumns &&
         int64_t(loops.size()) == S * n_loops * kLoopVectorWidth &&
         (!comp_sched.empty() || !loops.empty() || S * (n_comps + n_loops) == 0);
}

void ProgramFeatures::schedule_rows(int64_t s, float* comp_sched_out, float* loops_out) const {
  const bool identity = s == kIdentitySchedule;
  if (identity ? !has_identity() : (s < 0 || s >= n_schedules()))
    throw DataError("schedule_rows: schedule " + std::to_string(s) + " out of range" +
                    (identity ? " (program " + name + " has no untransformed schedule)" : ""));
  const size_t nc = size_t(n_comps) * kScheduleColumns, nl = size_t(n_loops) * kLoopVectorWidth;
  if (!identity && rows_in_memory()) {
    if (comp_sched_out && nc)
      std::memcpy(comp_sched_out, comp_sched.data() + size_t(s) * nc, sizeof(float) * nc);
    if (loops_out && nl) std::memcpy(loops_out, loops.data() + size_t(s) * nl, sizeof(float) * nl);
    return;
  }
  if (!identity && (!comp_sched.empty() || !loops.empty()))
    throw DataError("schedule_rows: program " + name + " holds rows of the wrong size");
  thread_local std::vector<float> sched_tmp, loops_tmp;
  float* cs = comp_sched_out;
  float* lp = loops_out;
  if (!cs) {
    sched_tmp.resize(nc);
    cs = sched_tmp.data();
  }
  if (!lp) {
    loops_tmp.resize(nl);
    lp = loops_tmp.data();
  }
  data::schedule_rows(
      statics,
      identity ? ScheduleDescriptor{identity_descriptor.data(), identity_descriptor.size()}
               : descriptor(s),
      cs, lp);
}

void ProgramFeatures::drop_rows() {
  if (descriptor_end.size() != size_t(n_schedules()))
    throw DataError("drop_rows: program " + name + " carries no schedule descriptors");
  std::vector<float>().swap(comp_sched);
  std::vector<float>().swap(loops);
}

void ProgramFeatures::load_rows() {
  if (rows_in_memory()) return;
  const int64_t S = n_schedules();
  const size_t nc = size_t(n_comps) * kScheduleColumns, nl = size_t(n_loops) * kLoopVectorWidth;
  std::vector<float> cs(size_t(S) * nc), lp(size_t(S) * nl);
  for (int64_t s = 0; s < S; ++s)
    data::schedule_rows(statics, descriptor(s), cs.data() + size_t(s) * nc,
                        lp.data() + size_t(s) * nl);
  comp_sched.swap(cs);
  loops.swap(lp);
}

void ProgramFeatures::comp_vectors(int64_t s, float* out, float* loops) const {
  if (s != kIdentitySchedule && (s < 0 || s >= n_schedules()))
    throw DataError("comp_vectors: schedule " + std::to_string(s) + " out of range");
  thread_local std::vector<float> sched_rows;
  sched_rows.resize(size_t(n_comps) * kScheduleColumns);
  schedule_rows(s, sched_rows.data(), loops);
  const float* sched = sched_rows.data();
  std::memcpy(out, comp_static.data(), sizeof(float) * size_t(n_comps) * kCompVectorWidth);
  for (int c = 0; c < n_comps; ++c) {
    float* row = out + size_t(c) * kCompVectorWidth;
    const float* src = sched + size_t(c) * kScheduleColumns;
    std::memcpy(row + kSchedA0, src, sizeof(float) * kSchedAWidth);
    std::memcpy(row + kSchedB0, src + kSchedAWidth, sizeof(float) * kSchedBWidth);
  }
}

double speedup_label(double initial_time_ms, double min_time_ms) {
  if (!(min_time_ms > 0) || !(initial_time_ms > 0) || !std::isfinite(min_time_ms) ||
      !std::isfinite(initial_time_ms))
    return std::numeric_limits<double>::quiet_NaN();
  return std::max(initial_time_ms / min_time_ms, 0.01);
}

// ---------------------------------------------------------------- tree (§2)

namespace {
int annotate_node(const Program& p, const LoopNode& n, ProgramTree& out, int depth) {
  if (depth > 64) throw DataError("loop tree deeper than 64 levels");
  const int id = int(out.nodes.size());
  out.nodes.emplace_back();
  TreeNode tn;
  tn.loop_index = p.iterator_index(n.loop_name);
  if (tn.loop_index < 0) throw DataError("loop tree names unknown loop \"" + n.loop_name + "\"");
  for (const auto& c : n.computations) {
    const int ci = p.computation_index(c);
    if (ci < 0)
      throw DataError("loop tree names unknown computation \"" + c + "\" in loop " + n.loop_name);
    tn.comp_indices.push_back(ci);
  }
  for (const auto& ch : n.children) tn.children.push_back(annotate_node(p, ch, out, depth + 1));
  out.nodes[size_t(id)] = std::move(tn);
  return id;
}

void footprint_node(const ProgramTree& t, int id, std::string& s) {
  const TreeNode& n = t.nodes[size_t(id)];
  const std::string li = std::to_string(n.loop_index);
  s += "<L" + li + ">";
  if (!n.comp_indices.empty()) {
    s += "[";
    for (int c : n.comp_indices) s += "C" + std::to_string(c);
    s += "]";
  }
  for (int ch : n.children) footprint_node(t, ch, s);
  s += "</L" + li + ">";
}

bool subtree_contains(const LoopNode& n, const std::string& comp) {
  for (const auto& c : n.computations)
    if (c == comp) return true;
  for (const auto& ch : n.children)
    if (subtree_contains(ch, comp)) return true;
  return false;
}
}  // namespace

ProgramTree annotate_tree(const Program& p, const LoopTree& t) {
  ProgramTree out;
  for (const auto& r : t.roots) out.roots.push_back(annotate_node(p, r, out, 0));
  return out;
}

std::string footprint(const ProgramTree& t) {
  std::string s;
  for (int r : t.roots) {
    s += "<R>";
    footprint_node(t, r, s);
  }
  s += "</R>";
  return s;
}

std::vector<std::string> enclosing_iterators(const LoopTree& t, const std::string& comp) {
  std::vector<std::string> names;
  std::vector<const LoopNode*> queue;
  for (const auto& r : t.roots)
    if (subtree_contains(r, comp)) queue.push_back(&r);
  for (size_t head = 0; head < queue.size(); ++head) {  // breadth-first, as [CM] does
    const LoopNode* n = queue[head];
    if (subtree_contains(*n, comp)) names.push_back(n->loop_name);
    for (const auto& ch : n->children) queue.push_back(&ch);
  }
  return names;
}

// ---------------------------------------------------------------- featurize (§3, §4, §3.11)

namespace {

/// A named reason for a dropped schedule, thrown inside the per-schedule code.
struct ScheduleDrop {
  std::string reason, detail;
};

/// Per-computation data computed once per program.
struct CompInfo {
  int n = 0;              // depth
  std::vector<double> A;  // 2n×n iteration-domain matrix (§3.5)
};

/// Per-schedule scratch reused across schedules.
struct Scratch {
  std::vector<uint8_t> descriptor;  // the schedule's descriptor
  std::vector<double> loops;        // [L, 8]
};

/// `x` with %.6g ("1e+308", "0.5"), for messages.
std::string short_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

/// Why a schedule has no label (reason, detail), or a null reason when it has one: every time is
/// a finite number ≥ 0 that float32 (the training dtype) holds as a finite number, the least
/// > 0. (A least time float32 turns into 0 is checked after the speedup, which then overflows
/// first unless the initial time is tiny too.)
/// True when a positive time or speedup lies below float32's smallest normal value (1.17549e-38):
/// converted for training it would be subnormal, or 0 where threads run with flush-to-zero
/// (engine/threads.cpp), so the rule is one whatever the CPU's floating-point mode.
bool below_float32_normal(double t) {
  return t > 0 && t < double(std::numeric_limits<float>::min());
}

std::pair<const char*, std::string> label_problem(const Schedule& s) {
  if (s.execution_times.empty()) return {"no_execution_times", ""};
  for (double t : s.execution_times)
    if (std::isnan(t) || std::isinf(t)) return {"bad_execution_time", ""};
  for (double t : s.execution_times)
    if (t < 0) return {"negative_time", ""};
  if (s.min_time() == 0) return {"zero_time", ""};
  for (double t : s.execution_times)
    if (!std::isfinite(float(t)))
      return {"bad_execution_time", "execution time " + short_number(t) + " ms overflows float32"};
  return {nullptr, ""};
}

/// True when `text` is a constant bound (no iterator with a non-zero coefficient, no max()); its
/// value in `v`. Bounds the affine parser refuses are not constant here (iteration_domain names
/// them).
bool constant_bound(const std::string& text, int64_t& v) {
  AffineExpr e;
  try {
    e = parse_affine(text);
  } catch (const DataError&) {
    return false;
  }
  if (e.used_max) return false;
  for (const auto& kv : e.coef)
    if (kv.second != 0) return false;
  v = e.constant;
  return true;
}

bool shift_matches(const std::string& iter, const std::string& shift_name,
                   FeatureOptions::ShiftMatch mode) {
  if (mode == FeatureOptions::ShiftMatch::Exact) return iter == shift_name;
  return iter.compare(0, shift_name.size(), shift_name) == 0;  // Q3: iterator starts with the name
}

// ---- descriptor encoding (features.hpp ScheduleDescriptor) ----

/// Columns 1..32 of one computation (slots of the levels, unrolled flag and factor).
constexpr int kSlotColumns = kOffTags - kOffSlots;  // 32

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  out.push_back(uint8_t(v));
}
uint64_t zigzag(int64_t v) {
  return (uint64_t(v) << 1) ^ uint64_t(v >> 63);
}
int64_t unzigzag(uint64_t u) {
  return int64_t(u >> 1) ^ -int64_t(u & 1);
}
/// One float32 as a descriptor value: small integers as zigzag integers, anything else (also
/// -0.0) as its bits.
void put_value(std::vector<uint8_t>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (f == std::trunc(f) && std::fabs(f) < float(1 << 30) && bits != 0x80000000u)
    put_varint(out, zigzag(int64_t(f)) << 1);
  else
    put_varint(out, (uint64_t(bits) << 1) | 1);
}
bool nonzero_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits != 0;
}

/// Bounds-checked reader of one descriptor.
struct DescriptorReader {
  const uint8_t* p;
  const uint8_t* end;
  [[noreturn]] static void bad(const char* what) {
    throw DataError(std::string("corrupt schedule descriptor (") + what + ")");
  }
  uint8_t byte() {
    if (p >= end) bad("truncated");
    return *p++;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes");
  }
  float value() {
    const uint64_t u = varint();
    if (u & 1) {
      if ((u >> 1) > 0xffffffffull) bad("float value out of range");
      const uint32_t bits = uint32_t(u >> 1);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    const int64_t i = unzigzag(u >> 1);
    if (i <= -(int64_t(1) << 30) || i >= (int64_t(1) << 30)) bad("integer value out of range");
    return float(i);
  }
};

/// Computes the slot and unrolling columns (§3.3) of a schedule validate_schedule() accepted and
/// appends each computation's descriptor block to `out`. Its own transformations_gt_4,
/// bad_transformation and singular_transformation drops only guard the descriptor (at most 4
/// tags, an invertible T, §3.4–§3.5): validate_schedule refuses those schedules first.
void describe_comps(const Program& p, const Schedule& s, const std::vector<CompInfo>& info,
                    const FeatureOptions& opt, std::vector<uint8_t>& out) {
  const int C = int(p.computations.size());
  double slots[kSlotColumns];  // index k ↔ column k + 1
  for (int ci = 0; ci < C; ++ci) {
    const Computation& comp = p.computations[size_t(ci)];
    const CompSchedule& cs = s.comps[size_t(ci)];
    const CompInfo& in = info[size_t(ci)];
    std::fill(slots, slots + kSlotColumns, 0.0);
    if (cs.transformations.size() > size_t(kMaxTransforms))
      throw ScheduleDrop{"transformations_gt_4", comp.name + " has " +
                                                     std::to_string(cs.transformations.size()) +
                                                     " transformation vectors"};
    for (int d = 0; d < in.n; ++d) {
      const std::string& it = comp.iterators[size_t(d)];
      double* slot = &slots[kOffSlots - 1 + 6 * d];
      slot[0] = (!cs.parallelized_dim.empty() && cs.parallelized_dim == it) ? 1 : 0;
      for (size_t k = 0; k < cs.tiling_dims.size(); ++k)
        if (cs.tiling_dims[k] == it) {
          slot[1] = 1;
          slot[2] = double(cs.tiling_factors[k]);
          break;
        }
      for (const auto& f : s.fusions)
        if ((f.comp_a == comp.name || f.comp_b == comp.name) && f.level == d) slot[3] = 1;
      for (const auto& sh : cs.shiftings)
        if (shift_matches(it, sh.first, opt.shift_match)) {  // first match wins
          slot[4] = 1;
          slot[5] = double(sh.second);
          break;
        }
    }
    for (int d = 0; d < in.n; ++d) {
      const double* slot = &slots[kOffSlots - 1 + 6 * d];
      uint8_t mask = 0;
      for (int k = 0; k < 6; ++k)
        if (nonzero_bits(float(slot[k]))) mask = uint8_t(mask | (1u << k));
      out.push_back(mask);
      for (int k = 0; k < 6; ++k)
        if (mask & (1u << k)) put_value(out, float(slot[k]));
    }
    put_value(out, cs.unrolling_factor != 0 ? float(double(cs.unrolling_factor)) : 0.0f);
    out.push_back(uint8_t(cs.transformations.size()));
    for (const auto& tag : cs.transformations) {
      int len = kMaxTags;
      while (len > 0 && tag[size_t(len - 1)] == 0) --len;
      out.push_back(uint8_t(len));
      for (int k = 0; k < len; ++k) put_varint(out, zigzag(tag[size_t(k)]));
    }
    // the transformed domain needs T⁻¹ (§3.5): a schedule whose T cannot be built or inverted
    // is dropped here, schedule_rows() never meets one
    const int n = in.n;
    if (n == 0) continue;
    bool identity = true;
    for (const auto& tag : cs.transformations)
      if (!is_no_transformation(tag)) identity = false;
    if (identity) continue;
    std::vector<double> T;
    try {
      T = composed_transformation(cs, n);
    } catch (const DataError& e) {
      throw ScheduleDrop{"bad_transformation", comp.name + ": " + e.what()};
    }
    try {
      (void)inverse_matrix(T, n);
    } catch (const DataError& e) {
      throw ScheduleDrop{"singular_transformation", comp.name + ": " + e.what()};
    }
  }
}

/// Appends the loop block of the descriptor: the non-zero [L, 8] loop vectors.
void describe_loops(const std::vector<double>& loops, int L, std::vector<uint8_t>& out) {
  std::vector<int> used;
  for (int li = 0; li < L; ++li)
    for (int k = 0; k < kLoopVectorWidth; ++k)
      if (nonzero_bits(float(loops[size_t(li) * kLoopVectorWidth + size_t(k)]))) {
        used.push_back(li);
        break;
      }
  put_varint(out, used.size());
  for (int li : used) {
    const double* v = &loops[size_t(li) * kLoopVectorWidth];
    uint8_t mask = 0;
    for (int k = 0; k < kLoopVectorWidth; ++k)
      if (nonzero_bits(float(v[k]))) mask = uint8_t(mask | (1u << k));
    put_varint(out, uint64_t(li));
    out.push_back(mask);
    for (int k = 0; k < kLoopVectorWidth; ++k)
      if (mask & (1u << k)) put_value(out, float(v[k]));
  }
}

/// Fills the [L, 8] loop vectors (§3.8) including the Q2 zeroing.
void schedule_loop_vectors(const Program& p, const Schedule& s, const LoopTree& tree,
                           const FeatureOptions& opt, std::vector<double>& loops) {
  const int L = int(p.iterators.size());
  const int C = int(p.computations.size());
  loops.assign(size_t(L) * kLoopVectorWidth, 0.0);
  auto loop_of = [&](const std::string& name, const char* what) {
    const int li = p.iterator_index(name);
    if (li < 0)
      throw ScheduleDrop{"unknown_loop_name",
                         std::string(what) + " names unknown loop \"" + name + "\""};
    return li;
  };
  enum {
    kPar = 0,
    kTiled = 1,
    kTileF = 2,
    kFused = 3,
    kUnr = 4,
    kUnrF = 5,
    kShift = 6,
    kShiftF = 7
  };
  auto at = [&](int li, int k) -> double& {
    return loops[size_t(li) * kLoopVectorWidth + size_t(k)];
  };
  for (int ci = 0; ci < C; ++ci) {
    const std::string& name = p.computations[size_t(ci)].name;
    const CompSchedule* cs = &s.comps[size_t(ci)];
    for (const auto& f : s.fusions)  // fused computations use fusion[0]'s entry (last match wins)
      if (f.comp_a == name || f.comp_b == name) {
        const int a = p.computation_index(f.comp_a);
        if (a < 0)
          throw ScheduleDrop{"bad_fusion", "fusion names unknown computation \"" + f.comp_a + "\""};
        cs = &s.comps[size_t(a)];
      }
    for (size_t k = 0; k < cs->tiling_dims.size(); ++k) {
      const int li = loop_of(cs->tiling_dims[k], "tiling");
      const double f = double(cs->tiling_factors[k]);
      at(li, kTiled) = 1;
      if (at(li, kTileF) != 0 && at(li, kTileF) != f)
        throw ScheduleDrop{"tile_factor_conflict",
                           "loop " + cs->tiling_dims[k] + " tiled by different factors"};
      at(li, kTileF) = f;
    }
    if (cs->unrolling_factor != 0) {
      const std::vector<std::string> enc = enclosing_iterators(tree, name);
      if (enc.empty())
        throw ScheduleDrop{"comp_not_in_tree",
                           "unrolled computation " + name + " is not in the schedule's tree"};
      const int li = loop_of(enc.back(), "tree_structure");
      const double f = double(cs->unrolling_factor);
      at(li, kUnr) = 1;
      if (at(li, kUnrF) != 0 && at(li, kUnrF) != f)
        throw ScheduleDrop{"unroll_factor_conflict",
                           "loop " + enc.back() + " unrolled by different factors"};
      at(li, kUnrF) = f;
    }
    if (!cs->parallelized_dim.empty())
      at(loop_of(cs->parallelized_dim, "parallelized_dim"), kPar) = 1;
    for (const auto& sh : cs->shiftings) {
      const int li = loop_of(sh.first, "shiftings");
      at(li, kShift) = 1;
      at(li, kShiftF) = double(sh.second);
    }
  }
  for (const auto& f : s.fusions) {
    const int a = p.computation_index(f.comp_a), b = p.computation_index(f.comp_b);
    if (a < 0 || b < 0) throw ScheduleDrop{"bad_fusion", "fusion names unknown computation"};
    const auto& ia = p.computations[size_t(a)].iterators;
    const auto& ib = p.computations[size_t(b)].iterators;
    if (f.level < 0 || size_t(f.level) >= ia.size() || size_t(f.level) >= ib.size())
      throw ScheduleDrop{"bad_fusion",
                         "fusion level " + std::to_string(f.level) + " outside the loop nests"};
    at(loop_of(ia[size_t(f.level)], "fusion"), kFused) = 1;
    at(loop_of(ib[size_t(f.level)], "fusion"), kFused) = 1;
  }
  // Q2 zeroing
  if (opt.loop_zeroing == FeatureOptions::LoopZeroing::Off || C == 0) return;
  std::vector<char> keep(size_t(L), 0);
  auto mark = [&](const std::vector<std::string>& names) {
    for (const auto& nm : names) {
      const int li = p.iterator_index(nm);
      if (li >= 0) keep[size_t(li)] = 1;
    }
  };
  if (opt.loop_zeroing == FeatureOptions::LoopZeroing::LastComp) {
    // faithful: the enclosing list of the last computation (absolute order), applied only when
    // the program has more iterators than that list
    const std::vector<std::string> enc = enclosing_iterators(tree, p.computations.back().name);
    if (size_t(L) <= enc.size()) return;
    mark(enc);
  } else {
    // intended: blank only loops that enclose no computation in this schedule's tree
    for (const auto& c : p.computations) mark(enclosing_iterators(tree, c.name));
  }
  for (int li = 0; li < L; ++li)
    if (!keep[size_t(li)])
      for (int k = 0; k < kLoopVectorWidth; ++k) at(li, k) = 0;
}

/// The detail of a bad_initial_time drop (never "nan"): "initial_execution_time missing (absent,
/// null or not a number)", "initial_execution_time is inf (not finite)", "initial_execution_time
/// is -1 ms (must be > 0)".
std::string initial_time_problem(double t) {
  if (std::isnan(t))
    return "initial_execution_time missing (absent, null or not a number): the speedups need it";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", t);
  if (!std::isfinite(t)) return std::string("initial_execution_time is ") + buf + " (not finite)";
  if (t > 0 && !std::isfinite(float(t)))
    return std::string("initial_execution_time is ") + buf + " ms (overflows float32)";
  if (below_float32_normal(t))
    return std::string("initial_execution_time is ") + buf +
           " ms (underflows float32: below its smallest normal value 1.17549e-38)";
  return std::string("initial_execution_time is ") + buf + " ms (must be > 0)";
}

/// The per-schedule rules and the descriptor of schedule `s` (appended to sc.descriptor), or the
/// named reason it is dropped: the one per-schedule path of featurize and describe_schedule.
std::optional<ScheduleProblem> describe(const Program& p, const std::vector<CompInfo>& info,
                                        const LoopTree& tree0, const Schedule& s,
                                        const FeatureOptions& opt, Scratch& sc) {
  // whether the schedule can be applied at all (schedule_validation.hpp): the one check every
  // reader, lcm-serve and liblcm run; the code below relies on it
  if (std::optional<ScheduleProblem> why = validate_schedule(p, s)) return why;
  try {
    const LoopTree& tree = s.tree ? *s.tree : tree0;
    describe_comps(p, s, info, opt, sc.descriptor);
    schedule_loop_vectors(p, s, tree, opt, sc.loops);
    describe_loops(sc.loops, int(p.iterators.size()), sc.descriptor);
  } catch (const ScheduleDrop& d) {
    return ScheduleProblem{d.reason, d.detail};
  }
  return std::nullopt;
}

}  // namespace

void schedule_rows(const ProgramStatic& p, const ScheduleDescriptor& d, float* comp_sched,
                   float* loops) {
  const int C = p.n_comps, L = p.n_loops;
  if (C < 0 || L < 0 || p.depth.size() != size_t(C) || p.domain_offset.size() != size_t(C) + 1)
    throw DataError("schedule_rows: inconsistent program static part");
  DescriptorReader r{d.data, d.data + d.size};
  std::fill(comp_sched, comp_sched + size_t(C) * kScheduleColumns, 0.0f);
  std::fill(loops, loops + size_t(L) * kLoopVectorWidth, 0.0f);
  CompSchedule cs;  // only the transformations, for composed_transformation
  for (int ci = 0; ci < C; ++ci) {
    const int n = p.depth[size_t(ci)];
    if (n < 0 || n > kMaxDepth) throw DataError("schedule_rows: computation depth out of range");
    const int64_t a0 = p.domain_offset[size_t(ci)];
    if (a0 < 0 || p.domain_offset[size_t(ci) + 1] - a0 != int64_t(2) * n * n ||
        size_t(p.domain_offset[size_t(ci) + 1]) > p.domain.size())
      throw DataError("schedule_rows: iteration domain size does not match the depth");
    const double* A = p.domain.data() + a0;
    float* row = comp_sched + size_t(ci) * kScheduleColumns;  // index k ↔ column k + 1, k < 96
    auto col = [&](int c) -> float& {
      return c < kSchedA1 ? row[c - kSchedA0] : row[kSchedAWidth + c - kSchedB0];
    };
    for (int lv = 0; lv < n; ++lv) {
      const uint8_t mask = r.byte();
      if (mask >> 6) r.bad("slot mask");
      for (int k = 0; k < 6; ++k)
        if (mask & (1u << k)) col(kOffSlots + 6 * lv + k) = r.value();
    }
    if (const float unroll = r.value(); nonzero_bits(unroll)) {
      col(kOffUnrolled) = 1;
      col(kOffUnrollFactor) = unroll;
    }
    const int m = r.byte();
    if (m > kMaxTransforms) r.bad("more than 4 tag vectors");
    cs.transformations.resize(size_t(m));
    bool identity = true;
    for (int t = 0; t < m; ++t) {
      auto& tag = cs.transformations[size_t(t)];
      tag.fill(0);
      const int len = r.byte();
      if (len > kMaxTags) r.bad("tag vector longer than 16");
      for (int k = 0; k < len; ++k) tag[size_t(k)] = unzigzag(r.varint());
      for (int k = 0; k < kMaxTags; ++k)
        col(kOffTags + t * kMaxTags + k) = float(double(tag[size_t(k)]));
      if (!is_no_transformation(tag)) identity = false;
    }
    // transformed domain A·T⁻¹ (§3.5)
    if (n == 0) continue;
    if (identity) {
      for (int rr = 0; rr < 2 * n; ++rr)
        for (int c = 0; c < n; ++c) col(kOffAT + rr * kMaxDepth + c) = float(A[size_t(rr) * n + c]);
      continue;
    }
    const std::vector<double> Tinv = inverse_matrix(composed_transformation(cs, n), n);
    for (int rr = 0; rr < 2 * n; ++rr)
      for (int c = 0; c < n; ++c) {
        double acc = 0;
        for (int k = 0; k < n; ++k) acc += A[size_t(rr) * n + k] * Tinv[size_t(k) * n + c];
        col(kOffAT + rr * kMaxDepth + c) = float(acc + 0.0);
      }
  }
  const uint64_t used = r.varint();
  if (used > uint64_t(L)) r.bad("more loop vectors than loops");
  int64_t last = -1;
  for (uint64_t i = 0; i < used; ++i) {
    const uint64_t li = r.varint();
    if (li >= uint64_t(L) || int64_t(li) <= last) r.bad("loop index");
    last = int64_t(li);
    const uint8_t mask = r.byte();
    float* v = loops + size_t(li) * kLoopVectorWidth;
    for (int k = 0; k < kLoopVectorWidth; ++k)
      if (mask & (1u << k)) v[k] = r.value();
  }
  if (r.p != r.end) r.bad("trailing bytes");
}

bool ProgramFeatures::is_identity(int64_t s) const {
  if (!has_identity() || s < 0 || s >= n_schedules() ||
      descriptor_end.size() != size_t(n_schedules()))
    return false;
  const ScheduleDescriptor d = descriptor(s);
  return d.size == identity_descriptor.size() &&
         std::equal(d.data, d.data + d.size, identity_descriptor.begin());
}

ScheduleDescriptor ProgramFeatures::descriptor(int64_t s) const {
  if (s < 0 || s >= n_schedules() || descriptor_end.size() != size_t(n_schedules()))
    throw DataError("descriptor: schedule " + std::to_string(s) + " out of range");
  const uint64_t b = s == 0 ? 0 : descriptor_end[size_t(s) - 1], e = descriptor_end[size_t(s)];
  if (b > e || e > descriptor_bytes.size())
    throw DataError("descriptor: offsets of schedule " + std::to_string(s) + " out of range");
  return ScheduleDescriptor{descriptor_bytes.data() + b, size_t(e - b)};
}

std::optional<ProgramFeatures> featurize(const Program& p, const FeatureOptions& opt,
                                         SkipLog& log) {
  auto drop_program = [&](const std::string& reason,
                          const std::string& detail) -> std::optional<ProgramFeatures> {
    log.add(SkipEvent{"program", reason, p.source_file, p.source_line, p.name, -1, detail});
    return std::nullopt;
  };
  const int C = int(p.computations.size());
  const int L = int(p.iterators.size());
  const int S_all = int(p.schedules.size());

  // ---- program-level rules (§3.11, Q6) ----
  if (S_all == 0) return drop_program("no_schedules", "schedules_list is empty");
  if (!opt.keep_unlabeled) {
    int labelled = 0;
    for (const auto& s : p.schedules)
      if (s.parse_problem.empty() && s.has_label()) ++labelled;
    if (labelled < 2)
      return drop_program("lt_2_schedules", std::to_string(labelled) + " labelled schedules");
  }
  if (C == 0) return drop_program("no_computations", "program has no computations");
  for (const auto& c : p.computations) {
    if (c.accesses.size() > size_t(kMaxAccesses))
      return drop_program("accesses_gt_15",
                          c.name + " has " + std::to_string(c.accesses.size()) + " read accesses");
    if (c.iterators.size() > size_t(kMaxDepth))
      return drop_program("depth_gt_5",
                          c.name + " has " + std::to_string(c.iterators.size()) + " iterators");
  }
  // A loop whose constant bounds leave no iteration (upper bounds are exclusive): nonsense input.
  for (const auto& it : p.iterators) {
    int64_t lo = 0, hi = 0;
    if (constant_bound(it.lower.text, lo) && constant_bound(it.upper.text, hi) && lo >= hi)
      return drop_program("empty_iteration_domain", "loop " + it.name + " has lower bound " +
                                                        std::to_string(lo) + " >= upper bound " +
                                                        std::to_string(hi) +
                                                        " (exclusive): no iteration");
  }
  // Schedule 0 is the untransformed program (data-format.md): its tree_structure is the loop tree
  // of the program. A transformed one is not taken as that: a whole-program record with a fused
  // schedule 0 is dropped (model-spec §3.11); otherwise, and always for a program merged from
  // one-schedule lines (whose first line may be any schedule), it is scored as any other schedule
  // and the loop tree comes from the iterators, with a note.
  const std::string s0_does =
      p.schedules[0].parse_problem.empty() ? first_transformation(p, p.schedules[0]) : "";
  if (!p.schedules[0].fusions.empty() && !p.from_schedule_lines)
    return drop_program("fusion_in_schedule0", "schedule 0 has fusions");
  if (!opt.keep_unlabeled &&
      !(p.initial_execution_time > 0 && std::isfinite(p.initial_execution_time) &&
        !below_float32_normal(p.initial_execution_time) &&
        std::isfinite(float(p.initial_execution_time))))
    return drop_program("bad_initial_time", initial_time_problem(p.initial_execution_time));

  ProgramFeatures pf;
  pf.name = p.name;
  pf.n_comps = C;
  pf.n_loops = L;
  pf.initial_time_ms = p.initial_execution_time;

  // ---- tree (§2.1, §2.2) ----
  LoopTree fallback_tree;
  const LoopTree* tree0 = nullptr;
  try {
    if (p.schedules[0].tree && s0_does.empty()) {
      tree0 = &*p.schedules[0].tree;
    } else {
      fallback_tree = tree_from_iterators(p);  // throws when the links are not a loop forest
      tree0 = &fallback_tree;
    }
    if (std::string why = loop_tree_problem(*tree0); !why.empty()) throw DataError(why);
    pf.tree = annotate_tree(p, *tree0);
  } catch (const DataError& e) {
    return drop_program("bad_tree", e.what());
  }
  pf.footprint = footprint(pf.tree);
  if (!s0_does.empty())
    log.add(SkipEvent{"note", "transformed_schedule0", p.source_file, p.source_line, p.name, 0,
                      "schedule 0 holds " + s0_does +
                          ": it is not the untransformed program, so it is scored as any other "
                          "schedule and the loop tree comes from the iterators"});

  // ---- static part of the computation vectors, once per program ----
  std::vector<double> stat(size_t(C) * kCompVectorWidth, 0.0);
  std::vector<CompInfo> info(static_cast<size_t>(C));
  pf.expr.assign(size_t(C) * kMaxExprLen * kExprNodeWidth, 0.0f);
  for (int ci = 0; ci < C; ++ci) {
    const Computation& c = p.computations[size_t(ci)];
    CompInfo& in = info[size_t(ci)];
    in.n = int(c.iterators.size());
    double* v = &stat[size_t(ci) * kCompVectorWidth];
    v[0] = c.is_reduction ? 1 : 0;
    for (const auto& it : c.iterators)
      if (p.iterator_index(it) < 0)
        return drop_program("unknown_iterator", c.name + " uses unknown iterator " + it);
    std::vector<double> b;
    try {
      iteration_domain(p, c, in.A, b);
    } catch (const DataError& e) {
      return drop_program("unsupported_bound", e.what());
    }
    for (int r = 0; r < 2 * in.n; ++r) {
      for (int k = 0; k < in.n; ++k) v[kOffA + r * kMaxDepth + k] = in.A[size_t(r) * in.n + k];
      v[kOffB + r] = b[size_t(r)];
    }
    std::vector<std::vector<int>> wm;
    try {
      wm = write_access_matrix(c.write_access_relation, c.iterators);
    } catch (const DataError& e) {
      return drop_program("bad_write_access", c.name + ": " + e.what());
    }
    try {
      auto padded = pad_access_matrix(wm, in.n);
      v[kOffWriteId] = double(c.write_buffer_id) + 1;
      for (int k = 0; k < kAccessBlockWidth; ++k) v[kOffWrite + k] = padded[size_t(k)];
      for (size_t a = 0; a < c.accesses.size(); ++a) {
        const Access& acc = c.accesses[a];
        auto pr = pad_access_matrix(acc.matrix, in.n);
        double* blk = v + kOffReads + a * kReadBlock;
        blk[0] = acc.is_reduction ? 1 : 0;
        blk[1] = double(acc.buffer_id) + 1;
        for (int k = 0; k < kAccessBlockWidth; ++k) blk[2 + k] = pr[size_t(k)];
      }
    } catch (const DataError& e) {
      return drop_program("bad_access_matrix", c.name + ": " + e.what());
    }
    std::vector<std::array<float, kExprNodeWidth>> rows;
    try {
      rows = expression_rows(c);
    } catch (const DataError& e) {
      return drop_program("bad_expression", c.name + ": " + e.what());
    }
    if (rows.size() > size_t(kMaxExprLen))
      return drop_program("expression_gt_66",
                          c.name + " expression has " + std::to_string(rows.size()) + " nodes");
    float* ex = &pf.expr[size_t(ci) * kMaxExprLen * kExprNodeWidth];
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(ex + r * kExprNodeWidth, rows[r].data(), sizeof(float) * kExprNodeWidth);
  }
  pf.comp_static.resize(stat.size());
  for (size_t k = 0; k < stat.size(); ++k) pf.comp_static[k] = float(stat[k]);
  pf.statics.n_comps = C;
  pf.statics.n_loops = L;
  pf.statics.domain_offset.push_back(0);
  for (const CompInfo& in : info) {
    pf.statics.depth.push_back(in.n);
    pf.statics.domain.insert(pf.statics.domain.end(), in.A.begin(), in.A.end());
    pf.statics.domain_offset.push_back(int64_t(pf.statics.domain.size()));
  }

  // ---- per schedule ----
  Scratch sc;
  {  // the untransformed program: no transformation of any kind, the program's loop tree
    Schedule identity;
    identity.comps.resize(size_t(C));
    if (!describe(p, info, *tree0, identity, opt, sc))
      pf.identity_descriptor.assign(sc.descriptor.begin(), sc.descriptor.end());
    sc.descriptor.clear();
  }
  pf.comp_sched.reserve(size_t(S_all) * size_t(C) * kScheduleColumns);
  pf.loops.reserve(size_t(S_all) * size_t(L) * kLoopVectorWidth);
  for (int si = 0; si < S_all; ++si) {
    const Schedule& s = p.schedules[size_t(si)];
    auto drop_schedule = [&](const std::string& reason, const std::string& detail) {
      log.add(SkipEvent{"schedule", reason, p.source_file, p.source_line, p.name, si, detail});
    };
    if (!s.parse_problem.empty()) {
      drop_schedule(s.parse_problem, s.parse_detail);
      continue;
    }
    double min_t = std::numeric_limits<double>::quiet_NaN(), speedup = min_t;
    if (auto [why, detail] = label_problem(s); why) {
      if (!opt.keep_unlabeled) {
        drop_schedule(why, detail);
        continue;
      }
    } else {
      min_t = s.min_time();
      speedup = speedup_label(p.initial_execution_time, min_t);
      // a label float32 cannot hold (e.g. execution_times [1e-300]) would make the loss inf
      // (inf too: 1e308 / 0.5 overflows float64 already); NaN only without an initial time under
      // keep_unlabeled, an unlabeled schedule
      const bool overflows =
          !std::isnan(speedup) && !(speedup <= double(std::numeric_limits<float>::max()));
      if (overflows || below_float32_normal(speedup)) {
        if (!opt.keep_unlabeled) {
          drop_schedule("speedup_not_finite",
                        "initial_execution_time / min(execution_times) = " +
                            short_number(p.initial_execution_time) + " / " + short_number(min_t) +
                            " = " + short_number(speedup) +
                            (overflows ? " overflows float32" : " underflows float32"));
          continue;
        }
        min_t = speedup = std::numeric_limits<double>::quiet_NaN();
      } else if (below_float32_normal(min_t)) {
        if (!opt.keep_unlabeled) {
          drop_schedule("bad_execution_time",
                        "execution time " + short_number(min_t) +
                            " ms underflows float32 (below its smallest normal value 1.17549e-38)");
          continue;
        }
        min_t = speedup = std::numeric_limits<double>::quiet_NaN();
      }
    }
    sc.descriptor.clear();
    if (auto d = describe(p, info, *tree0, s, opt, sc)) {
      drop_schedule(d->reason, d->detail);
      continue;
    }
    pf.descriptor_bytes.insert(pf.descriptor_bytes.end(), sc.descriptor.begin(),
                               sc.descriptor.end());
    pf.descriptor_end.push_back(pf.descriptor_bytes.size());
    const size_t sched0 = pf.comp_sched.size(), loops0 = pf.loops.size();
    pf.comp_sched.resize(sched0 + size_t(C) * kScheduleColumns);
    pf.loops.resize(loops0 + size_t(L) * kLoopVectorWidth);
    schedule_rows(pf.statics, {sc.descriptor.data(), sc.descriptor.size()},
                  pf.comp_sched.data() + sched0, pf.loops.data() + loops0);
    pf.speedup.push_back(float(speedup));
    pf.min_time_ms.push_back(min_t);
    pf.schedule_index.push_back(si);
    pf.sched_str.push_back(s.sched_str);
  }
  if (pf.n_schedules() == 0)
    return drop_program("no_usable_schedules", "every schedule was dropped");
  return pf;
}

std::optional<ScheduleProblem> describe_schedule(const Program& p, const ProgramFeatures& pf,
                                                 const LoopTree& tree0, const Schedule& s,
                                                 const FeatureOptions& opt,
                                                 std::vector<uint8_t>& out) {
  if (!s.parse_problem.empty()) return ScheduleProblem{s.parse_problem, s.parse_detail};
  const ProgramStatic& st = pf.statics;
  if (st.n_comps != int(p.computations.size()) || st.n_loops != int(p.iterators.size()) ||
      st.depth.size() != size_t(st.n_comps) || st.domain_offset.size() != size_t(st.n_comps) + 1)
    throw std::invalid_argument("describe_schedule: the features are not those of program " +
                                p.name);
  std::vector<CompInfo> info(size_t(st.n_comps));
  for (int c = 0; c < st.n_comps; ++c) {
    info[size_t(c)].n = st.depth[size_t(c)];
    info[size_t(c)].A.assign(st.domain.begin() + st.domain_offset[size_t(c)],
                             st.domain.begin() + st.domain_offset[size_t(c) + 1]);
  }
  Scratch sc;
  sc.descriptor.swap(out);
  const size_t before = sc.descriptor.size();
  std::optional<ScheduleProblem> d = describe(p, info, tree0, s, opt, sc);
  if (d) sc.descriptor.resize(before);  // nothing of a dropped schedule stays in `out`
  sc.descriptor.swap(out);
  return d;
}

}  // namespace lcm::data
