// Hand-made ProgramFeatures for the batching and cache tests: every float is a distinct,
// recognisable value derived from (program, schedule, computation, column), so that a value
// in the wrong place is detected; one speedup is NaN to check bit-exact copies. Also the check
// that two reads of one source counted the same.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/cache.hpp"
#include "data/dataset.hpp"
#include "data/features.hpp"

namespace lcm::test {

/// Appends `v` as a LEB128 varint (the ScheduleDescriptor encoding, features.hpp).
inline void put_descriptor_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  out.push_back(uint8_t(v));
}
/// Appends `f` as a descriptor value holding its float32 bits.
inline void put_descriptor_float(std::vector<uint8_t>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_descriptor_varint(out, (uint64_t(bits) << 1) | 1);
}

/// A ProgramFeatures with C computations, L loops and S schedules under footprint `fp`, whose
/// schedule rows come from real descriptors (schedule_rows), as featurize() builds them.
/// Values: static column c of comp k = 1000·id + 10·k + c/1000; computation k has depth
/// min(L, 5) and iteration domain A entries −(1000·id + 10·k + i/100); the level slots of
/// schedule s = −(id + s/100 + k/10000 + j/1e6) (j = column − 1), unrolled by s + 1, no tag
/// vector (so A·T⁻¹ = A); loops = id + s + 0.001·(l·8+j); speedup = 1 + id + s/10.
inline lcm::data::ProgramFeatures make_features(int id, const std::string& fp, int C, int L,
                                                int S) {
  using namespace lcm::data;
  ProgramFeatures p;
  p.name = "prog" + std::to_string(id);
  p.footprint = fp;
  p.n_comps = C;
  p.n_loops = L;
  TreeNode root;
  root.loop_index = 0;
  for (int k = 0; k < C; ++k) root.comp_indices.push_back(k);
  p.tree.nodes.push_back(root);
  if (L > 1) {
    TreeNode child;
    child.loop_index = 1;
    p.tree.nodes[0].children.push_back(1);
    p.tree.nodes.push_back(child);
  }
  p.tree.roots = {0};
  p.comp_static.assign(size_t(C) * kCompVectorWidth, 0.f);
  for (int k = 0; k < C; ++k)
    for (int c = 0; c < kCompVectorWidth; ++c)
      if (!is_schedule_column(c))
        p.comp_static[size_t(k) * kCompVectorWidth + size_t(c)] =
            float(1000 * id + 10 * k) + float(c) / 1000.f;
  p.expr.resize(size_t(C) * kMaxExprLen * kExprNodeWidth);
  for (size_t i = 0; i < p.expr.size(); ++i) p.expr[i] = float(id) * 0.5f + float(i % 97) * 0.01f;
  const int depth = L < kMaxDepth ? L : kMaxDepth;
  p.statics.n_comps = C;
  p.statics.n_loops = L;
  p.statics.domain_offset.push_back(0);
  for (int k = 0; k < C; ++k) {
    p.statics.depth.push_back(depth);
    for (int i = 0; i < 2 * depth * depth; ++i)
      p.statics.domain.push_back(-(1000.0 * id + 10.0 * k + i / 100.0));
    p.statics.domain_offset.push_back(int64_t(p.statics.domain.size()));
  }
  for (int s = 0; s < S; ++s) {
    std::vector<uint8_t>& d = p.descriptor_bytes;
    for (int k = 0; k < C; ++k) {
      for (int lv = 0; lv < depth; ++lv) {
        d.push_back(0x3f);
        for (int j = 6 * lv; j < 6 * lv + 6; ++j)
          put_descriptor_float(
              d, -(float(id) + float(s) / 100.f + float(k) / 10000.f + float(j) / 1e6f));
      }
      put_descriptor_float(d, float(s + 1));
      d.push_back(0);  // no tag vector
    }
    put_descriptor_varint(d, uint64_t(L));
    for (int l = 0; l < L; ++l) {
      put_descriptor_varint(d, uint64_t(l));
      d.push_back(0xff);
      for (int j = 0; j < kLoopVectorWidth; ++j)
        put_descriptor_float(d, float(id + s) + 0.001f * float(l * 8 + j));
    }
    p.descriptor_end.push_back(d.size());
    p.comp_sched.resize(size_t(s + 1) * size_t(C) * kScheduleColumns);
    p.loops.resize(size_t(s + 1) * size_t(L) * kLoopVectorWidth);
    schedule_rows(p.statics,
                  {d.data() + (s == 0 ? 0 : p.descriptor_end[size_t(s) - 1]),
                   size_t(d.size() - (s == 0 ? 0 : p.descriptor_end[size_t(s) - 1]))},
                  p.comp_sched.data() + size_t(s) * size_t(C) * kScheduleColumns,
                  p.loops.data() + size_t(s) * size_t(L) * kLoopVectorWidth);
    p.speedup.push_back(1.f + float(id) + float(s) / 10.f);
    p.min_time_ms.push_back(0.5 + s);
    p.schedule_index.push_back(s + 1);
    p.sched_str.push_back("S" + std::to_string(s) + "{I(L0,L1)}");
  }
  if (S > 1) {
    p.speedup[1] = std::nanf("");
    p.min_time_ms[1] = std::nan("");
  }
  p.initial_time_ms = 12.25 + id;
  return p;
}

/// BatchingOptions{batch_size, seed, min_functions_per_footprint, mode} (per-footprint batches
/// unless `mode` says otherwise).
inline lcm::data::BatchingOptions batching(
    int batch_size, uint64_t seed, int min_functions,
    lcm::data::BatchingMode mode = lcm::data::BatchingMode::PerFootprint) {
  lcm::data::BatchingOptions o;
  o.batch_size = batch_size;
  o.seed = seed;
  o.min_functions_per_footprint = min_functions;
  o.mode = mode;
  return o;
}

/// Field-by-field, bit-exact equality of two ProgramFeatures (NaNs compare by bits).
inline bool same_features(const lcm::data::ProgramFeatures& a,
                          const lcm::data::ProgramFeatures& b) {
  auto same_bits = [](const auto& x, const auto& y) {
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  if (a.name != b.name || a.footprint != b.footprint || a.n_comps != b.n_comps ||
      a.n_loops != b.n_loops)
    return false;
  if (a.tree.roots != b.tree.roots || a.tree.nodes.size() != b.tree.nodes.size()) return false;
  for (size_t i = 0; i < a.tree.nodes.size(); ++i) {
    const auto &x = a.tree.nodes[i], &y = b.tree.nodes[i];
    if (x.loop_index != y.loop_index || x.comp_indices != y.comp_indices ||
        x.children != y.children)
      return false;
  }
  return same_bits(a.comp_static, b.comp_static) && same_bits(a.expr, b.expr) &&
         same_bits(a.comp_sched, b.comp_sched) && same_bits(a.loops, b.loops) &&
         same_bits(a.speedup, b.speedup) && same_bits(a.min_time_ms, b.min_time_ms) &&
         a.schedule_index == b.schedule_index && a.sched_str == b.sched_str &&
         a.descriptor_bytes == b.descriptor_bytes && a.descriptor_end == b.descriptor_end &&
         a.statics.n_comps == b.statics.n_comps && a.statics.n_loops == b.statics.n_loops &&
         a.statics.depth == b.statics.depth && a.statics.domain_offset == b.statics.domain_offset &&
         same_bits(a.statics.domain, b.statics.domain) &&
         std::memcmp(&a.initial_time_ms, &b.initial_time_ms, sizeof(double)) == 0;
}

/// Equality of two datasets: programs (bit-exact), groups, batches and batching stats.
inline bool same_dataset(const lcm::data::Dataset& a, const lcm::data::Dataset& b) {
  if (a.programs.size() != b.programs.size() || a.groups.size() != b.groups.size() ||
      a.batches.size() != b.batches.size())
    return false;
  for (size_t i = 0; i < a.programs.size(); ++i)
    if (!same_features(a.programs[i], b.programs[i])) return false;
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const auto &x = a.groups[i], &y = b.groups[i];
    if (x.footprint != y.footprint || x.n_comps != y.n_comps || x.n_loops != y.n_loops ||
        x.n_programs != y.n_programs || x.n_datapoints != y.n_datapoints)
      return false;
  }
  for (size_t i = 0; i < a.batches.size(); ++i)
    if (a.batches[i].group != b.batches[i].group || !(a.batches[i].points == b.batches[i].points))
      return false;
  return a.batching.groups_kept == b.batching.groups_kept &&
         a.batching.groups_dropped == b.batching.groups_dropped &&
         a.batching.programs_dropped == b.batching.programs_dropped &&
         a.batching.datapoints_dropped == b.batching.datapoints_dropped;
}

/// CHECKs that two reads of one source counted the same records, programs and schedules.
inline void check_same_read_counts(const lcm::data::SplitCounts& a,
                                   const lcm::data::SplitCounts& b) {
  CHECK(a.records_read == b.records_read);
  CHECK(a.programs_read == b.programs_read);
  CHECK(a.programs_featurized == b.programs_featurized);
  CHECK(a.schedules_read == b.schedules_read);
  CHECK(a.schedules_featurized == b.schedules_featurized);
}

}  // namespace lcm::test
