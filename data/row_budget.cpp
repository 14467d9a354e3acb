// Placement of the expanded schedule rows within training.host_memory_budget (row_budget.hpp).
#include "data/row_budget.hpp"

#include <cstdio>
#include <string>

namespace lcm::data {

int64_t expanded_row_bytes(const ProgramFeatures& p) {
  return p.n_schedules() *
         (int64_t(p.n_comps) * kScheduleColumns + int64_t(p.n_loops) * kLoopVectorWidth) *
         int64_t(sizeof(float));
}

int64_t resident_bytes(const ProgramFeatures& p) {
  constexpr int64_t kString = 32;  // sizeof(std::string) with the small-string buffer (libstdc++)
  constexpr int64_t kSsoCapacity = 15;
  auto vec = [](const auto& v) { return int64_t(v.capacity() * sizeof(v[0])); };
  int64_t b = vec(p.comp_static) + vec(p.expr) + vec(p.speedup) + vec(p.min_time_ms) +
              vec(p.schedule_index) + vec(p.descriptor_bytes) + vec(p.descriptor_end) +
              vec(p.identity_descriptor) + vec(p.statics.depth) + vec(p.statics.domain_offset) +
              vec(p.statics.domain);
  b += int64_t(p.sched_str.capacity()) * kString;
  for (const std::string& s : p.sched_str)
    if (int64_t(s.capacity()) > kSsoCapacity) b += int64_t(s.capacity()) + 1;
  for (const TreeNode& n : p.tree.nodes)
    b += int64_t(sizeof(TreeNode)) + vec(n.comp_indices) + vec(n.children);
  b += int64_t(p.name.capacity() + p.footprint.capacity());
  b += p.n_schedules() * int64_t(sizeof(DatapointRef));  // its points in Dataset::batches
  return b;
}

RowPlacement place_rows(const std::vector<Dataset*>& sets, int64_t budget) {
  RowPlacement r;
  r.budget = budget;
  for (const Dataset* ds : sets)
    for (const ProgramFeatures& p : ds->programs) r.bytes_resident += resident_bytes(p);
  const int64_t rows_budget = budget - r.bytes_resident;  // may be negative: every row compact
  for (Dataset* ds : sets)
    for (ProgramFeatures& p : ds->programs) {
      const int64_t bytes = expanded_row_bytes(p);
      const bool compactable = p.descriptor_end.size() == size_t(p.n_schedules());
      if (!compactable || r.bytes_held + bytes <= rows_budget) {
        if (!p.rows_in_memory()) p.load_rows();
        r.bytes_held += bytes;
        ++r.programs_held;
        r.schedules_held += p.n_schedules();
      } else {
        if (p.rows_in_memory()) p.drop_rows();
        r.bytes_compact += bytes;
        ++r.programs_compact;
        r.schedules_compact += p.n_schedules();
      }
    }
  return r;
}

std::string row_placement_summary(const RowPlacement& r) {
  const double mib = double(1 << 20);
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "host memory: %.1f MiB of compact program data and the schedule rows of %lld of "
                "%lld programs (%lld of %lld schedules, %.1f MiB) held within "
                "training.host_memory_budget (%.1f MiB); the other rows (%.1f MiB expanded) are "
                "rebuilt from their descriptors at batch time",
                double(r.bytes_resident) / mib, (long long)r.programs_held,
                (long long)(r.programs_held + r.programs_compact), (long long)r.schedules_held,
                (long long)(r.schedules_held + r.schedules_compact), double(r.bytes_held) / mib,
                double(r.budget) / mib, double(r.bytes_compact) / mib);
  std::string line = buf;
  if (r.bytes_resident > r.budget)
    line += " (the compact data alone exceeds the budget: every program stays compact)";
  return line;
}

}  // namespace lcm::data
