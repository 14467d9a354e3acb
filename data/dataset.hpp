// A prepared split: the featurised programs, grouped by loop-nest footprint and cut into seeded,
// shuffled batches (docs/model-spec.md §5.5, §3.11), and the dense tensors one batch feeds to the
// model.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/skips.hpp"

namespace lcm::data {

/// How datapoints are batched (data.batch_size, data.seed, data.min_functions_per_footprint).
struct BatchingOptions {
  int batch_size = 512;                 // datapoints per batch (≥ 1)
  uint64_t seed = 42;                   // seeds the in-group and the batch-order shuffles
  int min_functions_per_footprint = 2;  // §3.11 group rule; 0 keeps every group
  std::string source_file;              // names the file in footprint skip events (messages only)
};

/// One datapoint: kept schedule `schedule` (row of ProgramFeatures, not the file index) of
/// program `program` (index into Dataset::programs).
struct DatapointRef {
  int32_t program = 0;
  int32_t schedule = 0;
  bool operator==(const DatapointRef& o) const {
    return program == o.program && schedule == o.schedule;
  }
};

/// One footprint group: programs sharing footprint, C and L (so their tensors stack).
struct FootprintGroup {
  std::string footprint;
  int n_comps = 0;
  int n_loops = 0;
  int64_t n_programs = 0;
  int64_t n_datapoints = 0;
};

/// A batch: datapoints of one footprint group (all share the tree of Dataset::programs of any of
/// them), at most batch_size of them.
struct Batch {
  int32_t group = 0;                 // index into Dataset::groups
  std::vector<DatapointRef> points;  // in shuffled order
  int64_t size() const { return int64_t(points.size()); }
};

/// The dense inputs of one batch, B datapoints of P distinct programs, C computations, L loops.
/// The expression tensor is schedule-independent and stored once per distinct program.
struct BatchTensors {
  int64_t batch = 0;                // B
  int64_t n_comps = 0;              // C
  int64_t n_loops = 0;              // L
  std::vector<float> comp;          // [B, C, 910] float32 computation vectors (§3.2)
  std::vector<float> loops;         // [B, L, 8] float32 loop vectors (§3.8)
  std::vector<float> speedup;       // [B] float32 labels (speedup ×, §4; NaN = unlabeled)
  std::vector<int32_t> programs;    // [P] distinct Dataset::programs indices, first-seen order
  std::vector<int32_t> program_of;  // [B] index into `programs` for each datapoint
  std::vector<float> expr;          // [P, C, 66, 11] float32 expression rows (§3.7)

  /// The per-datapoint expression tensor [B, C, 66, 11] (expr repeated via program_of).
  std::vector<float> expr_per_datapoint() const;
};

/// The tensors of the first `n` kept schedules (capped at p.n_schedules()) of one program, as an
/// autoscheduler's request for one program would be batched: programs = {index}, every
/// program_of = 0. Shapes as BatchTensors with B = min(n, S), C = p.n_comps, L = p.n_loops.
BatchTensors program_batch(const ProgramFeatures& p, int32_t index, int64_t n);

/// Counts of what building the batches kept and dropped.
struct BatchingStats {
  int64_t groups_kept = 0;
  int64_t groups_dropped = 0;
  int64_t programs_dropped = 0;    // programs in dropped groups
  int64_t datapoints_dropped = 0;  // datapoints in dropped groups
};

/// Featurised programs plus their batches. After build_batches, `programs` holds only programs
/// of kept groups, in input order.
struct Dataset {
  std::vector<ProgramFeatures> programs;
  std::vector<FootprintGroup> groups;  // kept groups, in order of first appearance
  std::vector<Batch> batches;          // shuffled once (seeded)
  BatchingStats batching;

  /// Total datapoints over all programs (kept schedules).
  int64_t n_datapoints() const;
  /// The loop tree shared by every datapoint of batch `b` (that of its first program; all
  /// programs of a group have the same footprint, model-spec §2.2). Throws std::out_of_range.
  const ProgramTree& tree(int64_t b) const;
  /// Dense tensors of batch `b` (shapes in BatchTensors). Throws std::out_of_range for a bad b.
  BatchTensors materialize(int64_t b) const;
};

/// Groups `ds.programs` by (footprint, C, L) in order of first appearance, drops groups with
/// fewer than min_functions_per_footprint programs AND fewer than 100× that many datapoints
/// (model-spec §3.11; one SkipLog event per group at level "footprint", reason
/// "small_footprint_group", naming the group's first program; the group's programs are removed
/// from ds.programs), shuffles each group's datapoints (Fisher–Yates with lcm::Rng(seed)),
/// cuts consecutive chunks of batch_size, then shuffles the batch order with the same Rng.
/// Deterministic for a given input and options. Throws std::invalid_argument if batch_size < 1.
void build_batches(Dataset& ds, const BatchingOptions& opt, SkipLog& log);

/// In-place Fisher–Yates shuffle driven by rng.below() (identical on every platform).
template <class T, class R>
void fisher_yates(std::vector<T>& v, R& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = size_t(rng.below(uint64_t(i)));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace lcm::data
