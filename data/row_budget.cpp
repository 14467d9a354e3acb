// Placement of the expanded schedule rows within training.host_memory_budget (row_budget.hpp).
#include "data/row_budget.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_set>

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

int64_t batch_tensor_bytes(const Dataset& ds, int64_t b) {
  if (b < 0 || b >= int64_t(ds.batches.size()))
    throw std::out_of_range("batch_tensor_bytes: batch " + std::to_string(b) + " of " +
                            std::to_string(ds.batches.size()));
  int64_t floats = 0;
  std::unordered_set<int32_t> programs;
  for (const DatapointRef& pt : ds.batches[size_t(b)].points) {
    const ProgramFeatures& p = ds.programs.at(size_t(pt.program));
    floats += int64_t(p.n_comps) * kCompVectorWidth + int64_t(p.n_loops) * kLoopVectorWidth + 1;
    if (programs.insert(pt.program).second)
      floats += int64_t(p.n_comps) * kMaxExprLen * kExprNodeWidth;
  }
  return floats * int64_t(sizeof(float));
}

std::string host_memory_outside_summary(const RowPlacement& r, const HostMemoryOutside& o) {
  const double mib = double(1 << 20);
  char buf[700];
  std::snprintf(buf, sizeof buf,
                "host memory outside training.host_memory_budget (%.1f MiB), which holds the "
                "training and validation data (%.1f MiB compact, %.1f MiB of expanded rows): the "
                "process before the data %.1f MiB, the model's weights, gradients and optimizer "
                "moments %.1f MiB, the batch tensors %.1f MiB (the largest batch twice: the one "
                "trained and the one built beside it) and the tape's activations (measured after "
                "the first step)",
                double(r.budget) / mib, double(r.bytes_resident) / mib, double(r.bytes_held) / mib,
                double(o.process) / mib, double(o.model_state) / mib, double(o.batches) / mib);
  std::string line = buf;
  if (r.bytes_resident > r.budget) {
    std::snprintf(buf, sizeof buf,
                  "; the compact data exceeds the budget by %.1f MiB (it is held whole: the "
                  "budget cannot shrink it)",
                  double(r.bytes_resident - r.budget) / mib);
    line += buf;
  }
  return line;
}

namespace {
/// A "Key:   123 kB" line of /proc/self/status, in bytes; 0 when absent.
int64_t proc_status_kib(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return 0;
  char line[256];
  int64_t v = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      v = std::strtoll(line + n + 1, nullptr, 10) * 1024;
      break;
    }
  std::fclose(f);
  return v;
}
}  // namespace

int64_t process_resident_bytes() {
  return proc_status_kib("VmRSS");
}
int64_t process_peak_resident_bytes() {
  return proc_status_kib("VmHWM");
}

}  // namespace lcm::data
