// The schedule rows rebuilt from compact descriptors (data/features.hpp schedule_rows,
// ScheduleDescriptor) against the per-schedule feature code featurize() used before it stored
// descriptors, kept here as the reference (model-spec §3.3–§3.5; the §3.8 loop vectors written
// loop by loop, independently of featurize's pass): every kept schedule of the real training
// sample, of the committed lcm-synth output and of the Tiramisu gramschmidt fixture must give
// bit-identical [C, 146] schedule columns and [L, 8] loop vectors; descriptors that do not fit
// their program are a DataError, never a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/reader.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;

namespace {

// ---------------------------------------------------------------- the reference (as it was)

constexpr int kSchedA0 = 1, kSchedA1 = 97, kSchedB0 = 157;
constexpr int kSchedAWidth = kSchedA1 - kSchedA0;
constexpr int kOffSlots = 1, kOffUnrolled = 31, kOffUnrollFactor = 32, kOffTags = 33, kOffAT = 157;

struct ScheduleDrop {
  std::string reason, detail;
};
struct CompInfo {
  int n = 0;
  std::vector<double> A;
};

bool shift_matches(const std::string& iter, const std::string& shift_name,
                   FeatureOptions::ShiftMatch mode) {
  if (mode == FeatureOptions::ShiftMatch::Exact) return iter == shift_name;
  return iter.compare(0, shift_name.size(), shift_name) == 0;  // Q3: iterator starts with the name
}

/// Fills the 146 schedule columns of every computation (§3.3, §3.4, §3.5 transformed domain).
void reference_comp_columns(const Program& p, const Schedule& s, const std::vector<CompInfo>& info,
                            const FeatureOptions& opt, std::vector<double>& out) {
  const int C = int(p.computations.size());
  out.assign(size_t(C) * kScheduleColumns, 0.0);
  for (int ci = 0; ci < C; ++ci) {
    const Computation& comp = p.computations[size_t(ci)];
    const CompSchedule& cs = s.comps[size_t(ci)];
    const CompInfo& in = info[size_t(ci)];
    double* row = &out[size_t(ci) * kScheduleColumns];  // index k ↔ column k + 1 for k < 96
    auto col = [&](int c) -> double& {
      return c < kSchedA1 ? row[c - kSchedA0] : row[kSchedAWidth + c - kSchedB0];
    };
    if (cs.transformations.size() > size_t(kMaxTransforms))  // featurize drops such schedules
      throw std::out_of_range(comp.name + ": more than 4 tag vectors in a kept schedule");
    // the six slots of each level d (§3.3): Parallel, Tiled, TileFactor, Fused (a fusion of this
    // computation at level d, item 4), Shifted, ShiftFactor (the first matching shift)
    for (int d = 0; d < in.n; ++d) {
      const std::string& it = comp.iterators[size_t(d)];
      double* slot = &col(kOffSlots + 6 * d);
      slot[0] = double(!cs.parallelized_dim.empty() && cs.parallelized_dim == it);
      const auto tiled = std::find(cs.tiling_dims.begin(), cs.tiling_dims.end(), it);
      if (tiled != cs.tiling_dims.end()) {
        slot[1] = 1;
        slot[2] = double(cs.tiling_factors[size_t(tiled - cs.tiling_dims.begin())]);
      }
      slot[3] = double(std::any_of(s.fusions.begin(), s.fusions.end(), [&](const auto& f) {
        return f.level == d && (f.comp_a == comp.name || f.comp_b == comp.name);
      }));
      const auto shifted = std::find_if(
          cs.shiftings.begin(), cs.shiftings.end(),
          [&](const auto& shift) { return shift_matches(it, shift.first, opt.shift_match); });
      if (shifted != cs.shiftings.end()) {
        slot[4] = 1;
        slot[5] = double(shifted->second);
      }
    }
    if (cs.unrolling_factor != 0) {
      col(kOffUnrolled) = 1;
      col(kOffUnrollFactor) = double(cs.unrolling_factor);
    }
    for (size_t t = 0; t < cs.transformations.size(); ++t)
      for (int k = 0; k < kMaxTags; ++k)
        col(kOffTags + int(t) * kMaxTags + k) = double(cs.transformations[t][size_t(k)]);
    // transformed domain A·T⁻¹ (§3.5)
    const int n = in.n;
    if (n == 0) continue;
    bool identity = true;
    for (const auto& tag : cs.transformations)
      if (tag[0] != 0) identity = false;
    if (identity) {
      for (int r = 0; r < 2 * n; ++r)
        for (int c = 0; c < n; ++c) col(kOffAT + r * kMaxDepth + c) = in.A[size_t(r) * n + c];
      continue;
    }
    std::vector<double> T, Tinv;
    try {
      T = composed_transformation(cs, n);
    } catch (const DataError& e) {
      throw ScheduleDrop{"bad_transformation", comp.name + ": " + e.what()};
    }
    try {
      Tinv = inverse_matrix(T, n);
    } catch (const DataError& e) {
      throw ScheduleDrop{"singular_transformation", comp.name + ": " + e.what()};
    }
    for (int r = 0; r < 2 * n; ++r)
      for (int c = 0; c < n; ++c) {
        double acc = 0;
        for (int k = 0; k < n; ++k) acc += in.A[size_t(r) * n + k] * Tinv[size_t(k) * n + c];
        col(kOffAT + r * kMaxDepth + c) = acc + 0.0;
      }
  }
}

/// The [L, 8] loop vectors (§3.8) including the Q2 zeroing, computed loop by loop: an
/// independent formulation of featurize's computation-by-computation pass (data/features.cpp),
/// so that the two agree only when both read §3.8 the same way. Loop `it` is parallel, tiled,
/// unrolled (the innermost loop around an unrolled computation in the schedule's tree) or
/// shifted when the schedule of some computation says so (a fused computation reads its fusion's
/// first computation's schedule; of several shifts the last one in computation order counts),
/// and fused when a fusion joins two loop nests at its level. Only for kept schedules: they name
/// known loops and computations and give every loop one factor.
void reference_loop_vectors(const Program& p, const Schedule& s, const LoopTree& tree,
                            const FeatureOptions& opt, std::vector<double>& loops) {
  const size_t L = p.iterators.size();
  loops.assign(L * kLoopVectorWidth, 0.0);
  auto comp_named = [&](const std::string& name) -> const Computation& {
    return p.computations.at(size_t(p.computation_index(name)));  // -1 → out_of_range
  };
  auto schedule_of = [&](const Computation& c) -> const CompSchedule& {
    const Computation* owner = &c;
    for (const auto& f : s.fusions)
      if (f.comp_a == c.name || f.comp_b == c.name) owner = &comp_named(f.comp_a);
    return s.comps[size_t(owner - p.computations.data())];
  };
  for (size_t li = 0; li < L; ++li) {
    const std::string& it = p.iterators[li].name;
    // Parallel, Tiled, TileFactor, Fused, Unrolled, UnrollFactor, Shifted, ShiftFactor
    double* v = &loops[li * kLoopVectorWidth];
    for (const Computation& c : p.computations) {
      const CompSchedule& cs = schedule_of(c);
      if (cs.parallelized_dim == it) v[0] = 1;
      const auto tiled = std::find(cs.tiling_dims.begin(), cs.tiling_dims.end(), it);
      if (tiled != cs.tiling_dims.end()) {
        v[1] = 1;
        v[2] = double(cs.tiling_factors[size_t(tiled - cs.tiling_dims.begin())]);
      }
      if (cs.unrolling_factor != 0) {
        const std::vector<std::string> around = enclosing_iterators(tree, c.name);
        if (!around.empty() && around.back() == it) {
          v[4] = 1;
          v[5] = double(cs.unrolling_factor);
        }
      }
      for (const auto& shift : cs.shiftings)
        if (shift.first == it) {
          v[6] = 1;
          v[7] = double(shift.second);
        }
    }
    for (const auto& f : s.fusions)
      for (const std::string* joined : {&f.comp_a, &f.comp_b})
        if (comp_named(*joined).iterators.at(size_t(f.level)) == it) v[3] = 1;
  }
  // Q2 zeroing: the loops outside `kept` lose their whole vector
  if (opt.loop_zeroing == FeatureOptions::LoopZeroing::Off || p.computations.empty()) return;
  std::vector<std::string> kept;
  if (opt.loop_zeroing == FeatureOptions::LoopZeroing::LastComp) {
    // faithful: the loops around the last computation (absolute order), and only when the
    // program has more loops than those
    kept = enclosing_iterators(tree, p.computations.back().name);
    if (L <= kept.size()) return;
  } else {
    // intended: every loop around some computation of this schedule's tree
    for (const Computation& c : p.computations)
      for (const std::string& name : enclosing_iterators(tree, c.name)) kept.push_back(name);
  }
  for (size_t li = 0; li < L; ++li)
    if (std::find(kept.begin(), kept.end(), p.iterators[li].name) == kept.end())
      std::fill_n(&loops[li * kLoopVectorWidth], kLoopVectorWidth, 0.0);
}

/// The reference rows of schedule `si` of `p` (featurize's tree choice: the schedule's own tree,
/// else schedule 0's, else tree_from_iterators), rounded to float32 as featurize stores them.
void reference_rows(const Program& p, int si, const FeatureOptions& opt, std::vector<float>& comp,
                    std::vector<float>& loops) {
  std::vector<CompInfo> info(p.computations.size());
  for (size_t ci = 0; ci < p.computations.size(); ++ci) {
    std::vector<double> b;
    info[ci].n = int(p.computations[ci].iterators.size());
    iteration_domain(p, p.computations[ci], info[ci].A, b);
  }
  const Schedule& s = p.schedules[size_t(si)];
  LoopTree fallback;
  const LoopTree* tree = nullptr;
  if (s.tree) {
    tree = &*s.tree;
  } else if (p.schedules[0].tree) {
    tree = &*p.schedules[0].tree;
  } else {
    fallback = tree_from_iterators(p);
    tree = &fallback;
  }
  std::vector<double> c, l;
  reference_comp_columns(p, s, info, opt, c);
  reference_loop_vectors(p, s, *tree, opt, l);
  comp.assign(c.begin(), c.end());
  loops.assign(l.begin(), l.end());
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

struct Tally {
  int64_t programs = 0, schedules = 0, bytes = 0, mismatches = 0;
};

/// Checks every kept schedule of every program of `progs` under `opt`.
void check_programs(const std::vector<Program>& progs, const FeatureOptions& opt, Tally& t) {
  for (const Program& p : progs) {
    SkipLog log(false, 0);
    auto f = featurize(p, opt, log);
    if (!f) continue;
    ++t.programs;
    const size_t C = size_t(f->n_comps), L = size_t(f->n_loops);
    std::vector<float> comp(C * kScheduleColumns), loops(L * kLoopVectorWidth), rc, rl;
    for (int64_t s = 0; s < f->n_schedules(); ++s) {
      const ScheduleDescriptor d = f->descriptor(s);
      t.bytes += int64_t(d.size);
      schedule_rows(f->statics, d, comp.data(), loops.data());
      reference_rows(p, f->schedule_index[size_t(s)], opt, rc, rl);
      REQUIRE(rc.size() == comp.size());
      REQUIRE(rl.size() == loops.size());
      const bool ok =
          same_bits(comp.data(), rc.data(), comp.size()) &&
          same_bits(loops.data(), rl.data(), loops.size()) &&
          same_bits(f->comp_sched.data() + size_t(s) * comp.size(), rc.data(), comp.size()) &&
          same_bits(f->loops.data() + size_t(s) * loops.size(), rl.data(), loops.size());
      if (!ok) {
        ++t.mismatches;
        MESSAGE(p.name << " schedule " << f->schedule_index[size_t(s)] << " differs");
      }
      ++t.schedules;
    }
  }
}

std::vector<FeatureOptions> all_options() {
  std::vector<FeatureOptions> v;
  for (auto z : {FeatureOptions::LoopZeroing::LastComp,
                 FeatureOptions::LoopZeroing::RemovedByFusion, FeatureOptions::LoopZeroing::Off})
    for (auto m : {FeatureOptions::ShiftMatch::Prefix, FeatureOptions::ShiftMatch::Exact}) {
      FeatureOptions o;
      o.loop_zeroing = z;
      o.shift_match = m;
      v.push_back(o);
    }
  return v;
}

}  // namespace

TEST_CASE("schedule_rows: the committed lcm-synth output and gramschmidt, every option") {
  std::vector<Program> progs;
  SkipLog rlog(false, 0);
  for (const char* f : {"synth_train.jsonl.gz", "synth_valid.jsonl.gz",
                        "tiramisu/function_gramschmidt_explored_schedules.json"}) {
    std::vector<Program> more = read_all_programs(lcm::test::committed_data(f), rlog);
    REQUIRE(!more.empty());
    for (auto& p : more) progs.push_back(std::move(p));
  }
  for (const FeatureOptions& opt : all_options()) {
    Tally t;
    check_programs(progs, opt, t);
    CHECK(t.programs >= 201);
    CHECK(t.schedules > 2400);
    CHECK(t.mismatches == 0);
  }
}

TEST_CASE("schedule_rows: every kept schedule of the real training sample, bit for bit") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/train.jsonl.gz");
  SkipLog rlog(false, 0);
  const std::vector<Program> progs = read_all_programs(path, rlog);
  Tally t;
  check_programs(progs, FeatureOptions{}, t);
  MESSAGE("train sample: " << t.programs << " programs, " << t.schedules << " schedules, "
                           << double(t.bytes) / double(std::max<int64_t>(t.schedules, 1))
                           << " descriptor bytes per schedule");
  CHECK(t.schedules > 10000);
  CHECK(t.mismatches == 0);
  CHECK(t.bytes < 100 * t.schedules);
}

TEST_CASE("schedule_rows: a descriptor that does not fit its program is a DataError") {
  std::vector<Program> progs;
  SkipLog rlog(false, 0);
  progs = read_all_programs(lcm::test::committed_data("synth_valid.jsonl.gz"), rlog);
  REQUIRE(!progs.empty());
  SkipLog log(false, 0);
  auto f = featurize(progs[0], FeatureOptions{}, log);
  REQUIRE(f);
  std::vector<float> comp(size_t(f->n_comps) * kScheduleColumns),
      loops(size_t(f->n_loops) * kLoopVectorWidth);
  int64_t checked = 0;
  for (int64_t s = 0; s < f->n_schedules(); ++s) {
    const ScheduleDescriptor d = f->descriptor(s);
    std::vector<uint8_t> bytes(d.data, d.data + d.size);
    // every proper prefix is truncated; one byte more is trailing
    for (size_t n = 0; n < bytes.size(); ++n)
      CHECK_THROWS_AS(schedule_rows(f->statics, {bytes.data(), n}, comp.data(), loops.data()),
                      DataError);
    bytes.push_back(0);
    CHECK_THROWS_AS(
        schedule_rows(f->statics, {bytes.data(), bytes.size()}, comp.data(), loops.data()),
        DataError);
    bytes.pop_back();
    // any single byte changed either still decodes or is a DataError
    for (size_t i = 0; i < bytes.size(); ++i)
      for (int v : {0x00, 0x05, 0x7f, 0x80, 0xff}) {
        std::vector<uint8_t> b = bytes;
        b[i] = uint8_t(v);
        try {
          schedule_rows(f->statics, {b.data(), b.size()}, comp.data(), loops.data());
        } catch (const DataError&) {
        }
        ++checked;
      }
  }
  CHECK(checked > 0);
  CHECK_THROWS_AS(f->descriptor(f->n_schedules()), DataError);
  ProgramStatic wrong = f->statics;
  wrong.depth.pop_back();
  CHECK_THROWS_AS(schedule_rows(wrong, f->descriptor(0), comp.data(), loops.data()), DataError);
}
