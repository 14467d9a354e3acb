// Feature extraction of docs/model-spec.md §2–§4: program tree annotation and footprint, the
// 910-wide computation vector, the 8-wide loop vector, the 66×11 expression sequence and the
// speedup label, plus the pieces they are made of (affine bound parser, iteration-domain matrices,
// write-access ISL parser, access padding, transformation matrices), exposed for tests.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/options.hpp"
#include "data/program.hpp"
#include "data/schedule_validation.hpp"
#include "data/skips.hpp"

namespace lcm::data {

// ---- constants (model-spec §3.1) ----
constexpr int kMaxDepth = 5;
constexpr int kMaxTransforms = 4;
constexpr int kMaxTags = 16;
constexpr int kMaxExprLen = 66;
constexpr int kExprNodeWidth = 11;
constexpr int kMaxAccesses = 15;
constexpr int kLoopVectorWidth = 8;
constexpr int kCompVectorWidth = 910;
constexpr int kAccessBlockWidth = 42;  // padded 6×7
/// Columns of the computation vector that depend on the schedule (model-spec §3.2): 1–96 and
/// 157–206 (146 columns); the other 764 are identical for every schedule of a program.
constexpr int kScheduleColumns = 146;
/// The schedule-dependent column indices in increasing order (size kScheduleColumns).
const std::vector<int>& schedule_columns();
/// True when column c (0..909) of the computation vector depends on the schedule.
bool is_schedule_column(int c);

// ---- tree (model-spec §2) ----
/// A loop node annotated with indices (model-spec §2.1). Children refer into ProgramTree::nodes.
struct TreeNode {
  int loop_index = 0;             // position of the loop in program_annotation.iterators
  std::vector<int> comp_indices;  // absolute-order ranks, in the node's stored order
  std::vector<int> children;      // indices into ProgramTree::nodes, stored order
};
/// The annotated tree of schedule 0 shared by all schedules of a program.
struct ProgramTree {
  std::vector<TreeNode> nodes;
  std::vector<int> roots;  // indices into nodes, stored order
};
/// Annotates a LoopTree. Throws DataError if a loop or computation name is unknown.
ProgramTree annotate_tree(const Program& p, const LoopTree& t);
/// The footprint string of model-spec §2.2, e.g. "<R><L0>[C0C2]<L1>[C1]</L1></L0></R>".
std::string footprint(const ProgramTree& t);
/// Loop names enclosing computation `comp` in a schedule's tree (model-spec §2.3, [CM]
/// get_comp_iterators_from_tree_struct): breadth-first over the roots whose subtree contains
/// `comp`, collecting every visited loop whose subtree contains it; outermost first, the last
/// entry is the computation's innermost loop. Empty when `comp` is not in the tree.
std::vector<std::string> enclosing_iterators(const LoopTree& t, const std::string& comp);

// ---- affine bounds and the iteration domain (model-spec §3.5, Q5) ----
/// An affine form c + Σ coef[name]·name.
struct AffineExpr {
  int64_t constant = 0;
  std::map<std::string, int64_t> coef;
  bool used_max = false;  // a max(..)/Max(..) was reduced to its last argument (§3.5 step 2)
};
/// Parses integers, iterator names, binary + and −, unary −, parentheses and max(a, b, ...)
/// (keeps the last argument, model-spec §3.5). Throws DataError with the text on anything else
/// (min, *, /, unbalanced parentheses, ...).
AffineExpr parse_affine(const std::string& text);
/// The constraint matrix A (2n×n, row-major) and vector b (2n) of model-spec §3.5 for computation
/// `c` (n = its depth), in float64: row 2i = lower bound of iterator i, row 2i+1 = upper bound
/// (exclusive, stored as ≤ ub−1), with the fixed [CM] lower-bound sign rule (Q4). Throws DataError
/// (naming the bound) for an unparseable bound, a non-unit iterator coefficient, a bound using an
/// iterator that is not one of c's iterators or its own iterator, max() in an upper bound, or an
/// iterator of c that is not a program iterator.
void iteration_domain(const Program& p, const Computation& c, std::vector<double>& A,
                      std::vector<double>& b);
/// The n×n matrix of one tag vector (model-spec §3.4); throws DataError on a bad tag.
std::vector<double> transformation_matrix(const std::array<int64_t, 16>& tag, int n);
/// T = M_m ⋯ M_1 composed from a computation's transformations (n×n, row-major).
std::vector<double> composed_transformation(const CompSchedule& s, int n);
/// Float64 inverse of an n×n row-major matrix (Gauss-Jordan with partial pivoting; entries
/// within 1e-9 of an integer are snapped to it, so unimodular T gives exact integers).
/// Throws DataError when the matrix is singular (|pivot| < 1e-9).
std::vector<double> inverse_matrix(const std::vector<double>& m, int n);

// ---- accesses (model-spec §3.6) ----
/// The write-access matrix (rows = buffer dims, n+1 columns) parsed from the ISL relation text,
/// including primed forms "k' = k" (model-spec §3.6). Columns follow the relation's own domain
/// names ("{ Q_out[k, i] -> b_Q[i, k] }" → [[0,1,0],[1,0,0]] even when the computation calls its
/// iterators k, i_0); every iterator token of a buffer entry is marked, constants are ignored and
/// the constant column stays 0. Throws DataError on unparseable text or when the relation's
/// domain has a different number of dimensions than `iters`.
std::vector<std::vector<int>> write_access_matrix(const std::string& isl,
                                                  const std::vector<std::string>& iters);
/// Frames and pads an r×(n+1) access matrix to 6×7 and flattens it (42 values, §3.6).
/// Throws DataError when r > 5 or the width is not n+1 with n ≤ 5.
std::array<float, kAccessBlockWidth> pad_access_matrix(const std::vector<std::vector<int>>& m,
                                                       int n);

// ---- expression (model-spec §3.7) ----
/// Post-order 11-wide rows of the expression (no padding). The data-type one-hot comes from the
/// computation's data_type.
std::vector<std::array<float, kExprNodeWidth>> expression_rows(const Computation& c);

// ---- per program / per schedule features ----
/// What a program contributes once to the schedule-dependent rows of every one of its schedules:
/// the iteration-domain matrices that the transformed domain A·T⁻¹ (model-spec §3.5) is built
/// from. Everything else a schedule's rows need is in its ScheduleDescriptor.
struct ProgramStatic {
  int n_comps = 0;                     // C
  int n_loops = 0;                     // L (program iterators)
  std::vector<int32_t> depth;          // [C]: n, the computation's number of iterators (≤ 5)
  std::vector<int64_t> domain_offset;  // [C + 1]: where computation c's A starts in `domain`
  std::vector<double> domain;          // computation c's 2n×n matrix A (§3.5), row-major, float64
};

/// A view of one schedule's compact, normalised transformation descriptor (bytes owned by a
/// ProgramFeatures or a mapped cache file). Layout (LEB128 varints; a "value" is one varint u:
/// u even → the integer zigzag(u / 2) as float32, u odd → the float32 whose bits are u / 2):
///   per computation c (C times, depth n = ProgramStatic::depth[c]):
///     per level d < n: u8 mask of the non-zero slots k of columns 1 + 6d + k (k < 6: Parallel,
///       Tiled, TileFactor, Fused, Shifted, ShiftFactor, §3.3), then one value per set bit;
///     value of the unrolling factor (0 = not unrolled; columns 31, 32);
///     u8 number of tag vectors m ≤ 4 (§3.4), then per tag: u8 length l ≤ 16 (the entries past
///       l are 0) and l zigzag varints (int64, exact);
///   u8-bounded varint count of non-zero loop vectors, then per loop (increasing index < L):
///     varint loop index, u8 mask of its non-zero entries (§3.8), one value per set bit.
/// About 10 bytes per computation plus 3 per transformed loop for typical LOOPerSet schedules.
struct ScheduleDescriptor {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

/// Rebuilds one schedule's rows from its descriptor: comp_sched [C, 146] (the schedule columns of
/// model-spec §3.2 in schedule_columns() order: the slots, unrolling and tag columns of §3.3–§3.4
/// and the transformed domain A·T⁻¹ of §3.5, T composed by composed_transformation and inverted
/// by inverse_matrix in float64, rounded to float32 last) and loops [L, 8] (§3.8, the Q2 zeroing
/// applied). The one definition of the schedule rows: featurize() stores what this writes.
/// Throws DataError when the descriptor does not fit `p` (truncated, trailing bytes, a count,
/// length or loop index out of range, a singular or malformed transformation): a corrupt cache.
void schedule_rows(const ProgramStatic& p, const ScheduleDescriptor& d, float* comp_sched,
                   float* loops);

/// Everything the model needs from one program, with the schedule-independent parts stored
/// once and only the schedule-dependent columns stored per schedule: as expanded rows
/// (comp_sched, loops) and as descriptors, or compact (descriptors only, rows empty; a cache read
/// with rows_in_memory false, drop_rows()). Read a schedule's rows with schedule_rows(s, ...),
/// which serves both.
/// The schedule index that names a program's untransformed schedule (ProgramFeatures::
/// identity_descriptor) in schedule_rows / comp_vectors / DatapointRef: it is not one of the S
/// kept schedules and has no label of its own (its speedup is 1 by definition).
constexpr int32_t kIdentitySchedule = -1;

struct ProgramFeatures {
  std::string name;
  std::string footprint;
  ProgramTree tree;
  int n_comps = 0;                      // C
  int n_loops = 0;                      // L (program iterators)
  std::vector<float> comp_static;       // [C, 910]; schedule columns are 0 here
  std::vector<float> expr;              // [C, 66, 11]
  std::vector<float> comp_sched;        // [S, C, 146] in schedule_columns() order; empty: compact
  std::vector<float> loops;             // [S, L, 8]; empty when compact
  std::vector<float> speedup;           // [S]; NaN for unlabeled schedules (keep_unlabeled)
  std::vector<double> min_time_ms;      // [S]; NaN when unlabeled
  std::vector<int32_t> schedule_index;  // [S]: index in schedules_list
  std::vector<std::string> sched_str;   // [S]
  double initial_time_ms = 0;
  ProgramStatic statics;                  // what schedule_rows() needs once per program
  std::vector<uint8_t> descriptor_bytes;  // the S descriptors, concatenated
  std::vector<uint64_t> descriptor_end;   // [S]: end of descriptor s in descriptor_bytes
  /// The descriptor of the untransformed program (no transformation of any kind, the program's
  /// loop tree): the schedule kIdentitySchedule. Empty when unknown (a hand-built program).
  std::vector<uint8_t> identity_descriptor;

  int64_t n_schedules() const { return int64_t(schedule_index.size()); }
  /// The descriptor of kept schedule s (a view into descriptor_bytes). Throws DataError when s
  /// is out of range or the program carries no descriptors.
  ScheduleDescriptor descriptor(int64_t s) const;
  /// True when the untransformed schedule (kIdentitySchedule) can be built: identity_descriptor
  /// is set.
  bool has_identity() const { return !identity_descriptor.empty(); }
  /// True when kept schedule s is the untransformed schedule: its descriptor is the same bytes as
  /// identity_descriptor (false without descriptors or without an identity).
  bool is_identity(int64_t s) const;
  /// Assembles the full [C, 910] computation tensor of kept schedule s into out and, when `loops`
  /// is not null, its [L, 8] loop vectors there (one schedule_rows call for both: a compact
  /// program's rows are rebuilt once).
  void comp_vectors(int64_t s, float* out, float* loops = nullptr) const;
  /// True when the [S, C, 146] and [S, L, 8] rows are held in comp_sched and loops (featurize, a
  /// hand-built program); false for a compact program, whose rows schedule_rows() rebuilds from
  /// the descriptors (comp_sched and loops empty).
  bool rows_in_memory() const;
  /// The rows of kept schedule s: comp_sched [C, 146] (schedule_columns() order) and loops
  /// [L, 8], either pointer may be null. Copied from comp_sched / loops when rows_in_memory(),
  /// else rebuilt by data::schedule_rows from descriptor(s); the same bits either way. s =
  /// kIdentitySchedule: the untransformed schedule's rows, from identity_descriptor. Throws
  /// DataError when s is out of range (or kIdentitySchedule without has_identity()) or the
  /// program holds neither rows nor descriptors.
  void schedule_rows(int64_t s, float* comp_sched_out, float* loops_out) const;
  /// Frees comp_sched and loops, leaving the compact program (its descriptors). Throws DataError
  /// when it carries no descriptors (the rows could not be rebuilt).
  void drop_rows();
  /// Rebuilds every schedule's rows into comp_sched and loops (rows_in_memory() becomes true).
  /// Throws DataError when a descriptor does not fit the program.
  void load_rows();
};

/// Extracts the features of a program. Applies the drop rules of model-spec §3.11 and Q6: a
/// dropped program returns nullopt and a dropped schedule is left out, each recorded in `log`
/// with its named reason (file, line, program, schedule index). Reasons:
///  - level "program": no_schedules, lt_2_schedules (fewer than 2 labelled schedules; not applied
///    with keep_unlabeled), no_computations, accesses_gt_15, depth_gt_5, fusion_in_schedule0
///    (not for a Program::from_schedule_lines), empty_iteration_domain (a loop with constant bounds
///    lower ≥ upper, upper exclusive), bad_initial_time (missing, ≤ 0, not finite, or overflowing
///    float32 / underflowing it to 0, named as such in the detail with %.6g, never "nan"; not
///    applied with keep_unlabeled), bad_tree (schedule 0's tree names an unknown loop/computation,
///    or fails loop_tree_problem() / iterator_tree_problem() of program.hpp), unknown_iterator,
///    unsupported_bound, bad_write_access (unparseable ISL relation), bad_access_matrix (buffer
///    rank > 5 or width ≠ n+1), bad_expression, expression_gt_66, no_usable_schedules (every
///    schedule dropped);
///  - level "schedule": Schedule::parse_problem as given, no_execution_times, negative_time,
///    zero_time, bad_execution_time (NaN/inf, or a time float32 turns into inf, or a least time
///    it turns into 0; the value in detail), speedup_not_finite (the label overflows float32,
///    e.g. initial_execution_time 1e38 and execution_times [1e-10]; the detail shows the
///    quotient with %.6g) — these five are kept with NaN labels under
///    keep_unlabeled —, the applicability reasons of validate_schedule()
///    (schedule_validation.hpp: bad_schedule_comps, bad_tiling, loop_tiled_twice,
///    unknown_loop_name, loop_not_in_nest, bad_tile_factor, bad_unroll_factor,
///    transformations_gt_4, bad_transformation, singular_transformation,
///    non_unimodular_transformation, bad_fusion), then unknown_loop_name (a tree names a loop that
///    is not a program iterator), tile_factor_conflict, unroll_factor_conflict, comp_not_in_tree
///    (an unrolled computation missing from the schedule's tree);
///  - level "note": transformed_schedule0 (schedule 0 transforms something: it is scored as any
///    other schedule and the loop tree comes from tree_from_iterators(); a whole-program record
///    whose schedule 0 has fusions is still dropped as fusion_in_schedule0).
/// The schedule tree used for unrolling and the Q2 zeroing is Schedule::tree, else schedule 0's
/// tree, else tree_from_iterators(). Bad data never throws, except that a strict SkipLog throws
/// DataError at the first skip.
std::optional<ProgramFeatures> featurize(const Program& p, const FeatureOptions& opt, SkipLog& log);

/// The descriptor of one schedule `s` of program `p`, by the per-schedule rules of featurize()
/// (the same code): appends it to `out` and returns nullopt, or returns the named reason the
/// schedule is dropped (Schedule::parse_problem first; then bad_schedule_comps, bad_tiling,
/// transformations_gt_4, bad_transformation, singular_transformation, unknown_loop_name, ...)
/// and leaves `out` as it was. `pf` is featurize(p)'s result (its statics), `tree0` the program's
/// loop tree (schedule 0's tree_structure, else tree_from_iterators) that a schedule without a
/// tree of its own falls back on. Labels are not looked at (a schedule to predict has none).
/// For a caller that featurizes a program once and its schedules one by one (lcm-serve).
/// Throws std::invalid_argument when `pf` does not belong to `p` (other sizes).
std::optional<ScheduleProblem> describe_schedule(const Program& p, const ProgramFeatures& pf,
                                                 const LoopTree& tree0, const Schedule& s,
                                                 const FeatureOptions& opt,
                                                 std::vector<uint8_t>& out);

/// speedup = initial / min(times), floored at 0.01 (model-spec §4, Q9).
double speedup_label(double initial_time_ms, double min_time_ms);

}  // namespace lcm::data
