// A prepared split: the featurised programs, grouped by loop-nest footprint and cut into seeded,
// shuffled batches (docs/model-spec.md §5.5, §3.11), and the dense tensors one batch feeds to the
// model.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/features.hpp"
#include "data/options.hpp"
#include "data/skips.hpp"

namespace lcm::data {

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

/// A batch: at most batch_size datapoints. Per-footprint batching: all of one footprint group
/// (`group`). Mixed batching: `group` is -1 when the batch holds several groups; the points of one
/// program are consecutive and programs of one footprint group are consecutive, so that the batch
/// splits into one BatchSegment per group.
struct Batch {
  int32_t group = 0;                 // index into Dataset::groups; -1: several groups
  std::vector<DatapointRef> points;  // in batch order
  int64_t size() const { return int64_t(points.size()); }
};

/// A run of consecutive datapoints of a batch whose programs share one loop-nest shape (footprint,
/// C, L; model-spec §2.2): what the model's tree walk handles as one tree (CostModel::forward).
struct BatchSegment {
  int64_t points = 0;   // datapoints in the run
  int64_t n_comps = 0;  // C of its programs
  int64_t n_loops = 0;  // L of its programs
};

/// The dense inputs of one batch: B datapoints of P distinct programs in S segments (consecutive
/// datapoints sharing a tree shape). Rows are ragged across segments: datapoint b of a segment with
/// C computations and L loops owns C consecutive rows of `comp` and L of `loops`; program p (all of
/// its datapoints lie in segments of one C) owns C_p consecutive rows of `expr`. A batch of one
/// segment is exactly the dense [B, C, 910] / [B, L, 8] / [P, C, 66, 11] layout.
/// The expression tensor is schedule-independent and stored once per distinct program.
struct BatchTensors {
  int64_t batch = 0;                   // B
  int64_t n_comps = 0;                 // C when every segment has the same C, else 0
  int64_t n_loops = 0;                 // L when every segment has the same L, else 0
  std::vector<BatchSegment> segments;  // in datapoint order; empty = one segment {B, C, L}
  std::vector<float> comp;             // [Σ_b C_b, 910] float32 computation vectors (§3.2)
  std::vector<float> loops;            // [Σ_b L_b, 8] float32 loop vectors (§3.8)
  std::vector<float> speedup;          // [B] float32 labels (speedup ×, §4; NaN = unlabeled)
  std::vector<int32_t> programs;       // [P] distinct Dataset::programs indices, first-seen order
  std::vector<int32_t> program_of;     // [B] index into `programs` for each datapoint
  std::vector<float> expr;             // [Σ_p C_p, 66, 11] float32 expression rows (§3.7)

  /// The segments, with the implicit single one {batch, n_comps, n_loops} when `segments` is empty.
  std::vector<BatchSegment> segment_list() const;
  /// The per-row expression tensor [Σ_b C_b, 66, 11] (each datapoint's program's rows).
  /// Throws std::invalid_argument as batch_layout.
  std::vector<float> expr_per_datapoint() const;
};

/// The fold (0 .. count-1) of a program: a 64-bit FNV-1a hash of its name, mixed (splitmix64),
/// modulo count, so a program keeps its fold whatever the file order or the other programs.
/// Throws std::invalid_argument when count < 1.
int program_fold(const std::string& name, int count);

/// Row offsets of a BatchTensors (all arrays in rows, not values).
struct BatchLayout {
  std::vector<BatchSegment> segments;  // as BatchTensors::segment_list()
  std::vector<int64_t> segment_point;  // [S + 1] first datapoint of each segment
  std::vector<int64_t> comp_row;       // [B + 1] first comp row of each datapoint
  std::vector<int64_t> loop_row;       // [B + 1] first loop row of each datapoint
  std::vector<int64_t> expr_row;       // [P + 1] first expr row of each program
  int64_t comp_rows() const { return comp_row.back(); }
  int64_t loop_rows() const { return loop_row.back(); }
  int64_t expr_rows() const { return expr_row.back(); }
};
/// The layout of `bt`. Throws std::invalid_argument naming the problem when the segments do not
/// cover the batch, a segment has C or L < 1, program_of is not [B] or points outside programs, a
/// program is never used or its datapoints lie in segments of different C, or the sizes of comp,
/// loops or expr disagree with the layout.
BatchLayout batch_layout(const BatchTensors& bt);

/// The trees of a batch's segments, in segment order (pointers into Dataset::programs).
using BatchTrees = std::vector<const ProgramTree*>;

/// The tensors of the first `n` kept schedules (capped at p.n_schedules()) of one program, as an
/// autoscheduler's request for one program would be batched: programs = {index}, every
/// program_of = 0. Shapes as BatchTensors with B = min(n, S), C = p.n_comps, L = p.n_loops.
BatchTensors program_batch(const ProgramFeatures& p, int32_t index, int64_t n);

/// The tensors of program p's untransformed schedule (kIdentitySchedule) alone: B = 1, speedup 1,
/// programs = {index}, program_of = {0}. Throws DataError when p has no untransformed schedule
/// (ProgramFeatures::has_identity).
BatchTensors identity_batch(const ProgramFeatures& p, int32_t index);

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
  /// The loop tree shared by every datapoint of batch `b`, a batch of one segment (that of its
  /// first program; all programs of a group have the same footprint, model-spec §2.2). Throws
  /// std::out_of_range for a bad b, std::logic_error when the batch holds several tree shapes
  /// (use trees()).
  const ProgramTree& tree(int64_t b) const;
  /// The trees of batch `b`'s segments, in the order materialize(b) lays them out. Throws
  /// std::out_of_range for a bad b.
  BatchTrees trees(int64_t b) const;
  /// Dense tensors of batch `b` (shapes in BatchTensors). Throws std::out_of_range for a bad b.
  BatchTensors materialize(int64_t b) const;
  /// Dense tensors of any list of points (the segments are the maximal runs of consecutive points
  /// whose programs share footprint, C and L), and their trees. A point's schedule may be
  /// kIdentitySchedule (the program's untransformed schedule, speedup 1). Throws
  /// std::out_of_range for a point outside the dataset (or kIdentitySchedule of a program without
  /// one), std::invalid_argument when one program's points are not consecutive.
  BatchTensors materialize(const Batch& batch) const;
  BatchTrees trees(const Batch& batch) const;
};

/// Groups `ds.programs` by (footprint, C, L) in order of first appearance, drops groups with
/// fewer than min_functions_per_footprint programs AND fewer than 100× that many datapoints
/// (model-spec §3.11; one SkipLog event per group at level "footprint", reason
/// "small_footprint_group", naming the group's first program; the group's programs are removed
/// from ds.programs), then cuts batches with one lcm::Rng(seed):
///  - PerFootprint: shuffles each group's datapoints (Fisher–Yates), cuts consecutive chunks of
///    batch_size, then shuffles the batch order (model-spec §5.5).
///  - Mixed: shuffles the order of the programs and of each program's schedules. A program with
///    more than batch_size schedules fills ⌈S / batch_size⌉ batches of its own (the last partial).
///    Every other program is cut into ⌈S / program_piece⌉ pieces of near-equal size (one piece
///    when program_piece is 0), and the pieces are shuffled. They fill batches of exactly
///    batch_size in that order: when the next piece does not fit the space left, the first of the
///    next 64 pieces that fits is taken instead; when none fits, the next piece is split, its
///    first schedules completing the batch and the rest starting the next one (so every batch is
///    full but the last). Inside a batch the points are ordered by footprint group, then by
///    program (first appearance), so a batch has one BatchSegment per group and a program's
///    points are consecutive.
/// Deterministic for a given input and options. Throws std::invalid_argument if batch_size < 1.
void build_batches(Dataset& ds, const BatchingOptions& opt, SkipLog& log);

/// What batching needs of one program: its loop-nest shape (an index into a ShapeTable's
/// shapes) and its number of kept schedules.
struct ProgramShape {
  int32_t shape = 0;
  int32_t n_schedules = 0;
};

/// One distinct (footprint, C, L) and the name of its first program (named by the
/// small_footprint_group skip).
struct ShapeInfo {
  std::string footprint;
  int n_comps = 0;
  int n_loops = 0;
  std::string first_program;
};

/// The distinct shapes of a stream of programs, numbered in order of first appearance.
/// Memory: one ShapeInfo and one key a distinct shape (none a program).
class ShapeTable {
 public:
  /// The index of (footprint, C, L), added (with `program` as its first program) when new.
  int32_t shape_of(const std::string& footprint, int n_comps, int n_loops,
                   const std::string& program);
  std::vector<ShapeInfo> shapes;

 private:
  std::unordered_map<std::string, int32_t> index_;
};

/// The batches of a list of programs, without their features (build_batches' rule).
struct BatchPlan {
  std::vector<FootprintGroup> groups;  // kept groups, in order of first appearance
  std::vector<Batch> batches;          // program indices count the kept programs only, in order
  BatchingStats batching;
  std::vector<char> keep;  // [programs]: 1 when the program's group is kept
};

/// build_batches over program shapes alone (`shapes` numbered in order of first appearance, as
/// ShapeTable does), for a caller that keeps the programs elsewhere (lcm-prepare streams them to
/// disk): the same groups, drops, skip events and batches, bit for bit. Memory: about 20 bytes a
/// program and 8 bytes (16 while a per-footprint group is shuffled) a kept schedule. Throws
/// std::invalid_argument if batch_size < 1 or a shape index is out of range.
BatchPlan plan_batches(const std::vector<ProgramShape>& programs,
                       const std::vector<ShapeInfo>& shapes, const BatchingOptions& opt,
                       SkipLog& log);

/// In-place Fisher–Yates shuffle driven by rng.below() (identical on every platform).
template <class T, class R>
void fisher_yates(std::vector<T>& v, R& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = size_t(rng.below(uint64_t(i)));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace lcm::data
