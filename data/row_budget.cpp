// Placement of the expanded schedule rows within training.host_memory_budget (row_budget.hpp).
#include "data/row_budget.hpp"

#include <cstdio>

namespace lcm::data {

int64_t expanded_row_bytes(const ProgramFeatures& p) {
  return p.n_schedules() *
         (int64_t(p.n_comps) * kScheduleColumns + int64_t(p.n_loops) * kLoopVectorWidth) *
         int64_t(sizeof(float));
}

RowPlacement place_rows(const std::vector<Dataset*>& sets, int64_t budget) {
  RowPlacement r;
  r.budget = budget;
  for (Dataset* ds : sets)
    for (ProgramFeatures& p : ds->programs) {
      const int64_t bytes = expanded_row_bytes(p);
      const bool compactable = p.descriptor_end.size() == size_t(p.n_schedules());
      if (!compactable || r.bytes_held + bytes <= budget) {
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
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "schedule rows of %lld of %lld programs (%lld of %lld schedules, %.1f MiB) held in "
                "host memory within training.host_memory_budget (%.1f MiB); the other rows "
                "(%.1f MiB expanded) are rebuilt from their descriptors at batch time",
                (long long)r.programs_held, (long long)(r.programs_held + r.programs_compact),
                (long long)r.schedules_held, (long long)(r.schedules_held + r.schedules_compact),
                double(r.bytes_held) / mib, double(r.budget) / mib, double(r.bytes_compact) / mib);
  return buf;
}

}  // namespace lcm::data
