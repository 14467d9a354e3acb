// The typed in-memory model of one LOOPerSet / Tiramisu program record (docs/data-format.md,
// docs/model-spec.md §1): the untransformed program (iterators, computations, accesses,
// expressions), and every schedule with its per-computation transformations, fusions, tree and
// times.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lcm::data {

/// A loop bound as written: an integer, or an affine expression string ("i1", "(k + 1)",
/// "max(0, i1)"). Parsed later by the affine parser (features.hpp). Upper bounds are exclusive.
struct Bound {
  std::string text;  // the bound as text; integers are stored as their decimal text
};

/// One entry of `program_annotation.iterators` (key order = loop index, model-spec §1.2).
struct Iterator {
  std::string name;
  Bound lower, upper;
  std::string parent;                     // "" when the JSON has null
  std::vector<std::string> children;      // child_iterators
  std::vector<std::string> computations;  // computations_list
};

/// One read access (model-spec §1.2): rows = buffer dimensions, columns = the computation's
/// iterators + one constant column.
struct Access {
  bool is_reduction = false;
  int buffer_id = 0;
  std::vector<std::vector<int>> matrix;
};

/// An expression tree node (`expression_representation`), children left to right.
struct ExprNode {
  std::string type;  // add, sub, mul, div, sqrt, min, max, access, value, cast, minus, ...
  std::vector<ExprNode> children;
};

/// One computation of the program (model-spec §1.2).
struct Computation {
  std::string name;
  int absolute_order = 0;              // 1-based
  std::vector<std::string> iterators;  // outermost first
  bool is_reduction = false;
  std::string write_access_relation;  // ISL map text
  int write_buffer_id = 0;
  std::string data_type;  // "float32", "float64", "int32", ...
  std::vector<Access> accesses;
  ExprNode expression;
};

/// A loop node of a `tree_structure` (model-spec §2.1): loop name, computations directly inside
/// (in stored order) and child loops (in stored order).
struct LoopNode {
  std::string loop_name;
  std::vector<std::string> computations;
  std::vector<LoopNode> children;
};

/// `tree_structure`: the list of roots, each the outermost loop of one nest.
struct LoopTree {
  std::vector<LoopNode> roots;
};

/// What one schedule does to one computation (model-spec §1.3). Absent/empty/null → default.
struct CompSchedule {
  std::string parallelized_dim;          // "" = none
  std::vector<std::string> tiling_dims;  // empty = no tiling
  std::vector<int64_t> tiling_factors;   // same length as tiling_dims
  int64_t unrolling_factor = 0;          // 0 = none
  std::vector<std::pair<std::string, int64_t>> shiftings;
  std::vector<std::array<int64_t, 16>> transformations;  // tag vectors in application order
};

/// A fusion entry [computation A, computation B, level (0-based loop depth)].
struct Fusion {
  std::string comp_a, comp_b;
  int level = 0;
};

/// One entry of `schedules_list`.
struct Schedule {
  std::vector<CompSchedule> comps;  // indexed like Program::computations (absolute order)
  std::vector<Fusion> fusions;
  std::optional<LoopTree> tree;         // absent in some generations
  std::vector<double> execution_times;  // ms; may be empty (unmeasured)
  std::string sched_str;
  /// Non-empty when this schedule's record was malformed (a named reason such as
  /// "bad_execution_times" or "bad_tiling"); the reader keeps the entry so that schedule
  /// indices stay those of the file, and featurize() skips it with this reason.
  std::string parse_problem;
  std::string parse_detail;  // human-readable detail for parse_problem
  /// True when the times give a label: non-empty, all ≥ 0 and min > 0 (data-format.md).
  bool has_label() const;
  /// min(execution_times); NaN when empty.
  double min_time() const;
};

/// One program record. Computations are sorted by absolute_order (computation index 0..C-1);
/// iterators keep the JSON key order (loop index 0..L-1).
struct Program {
  std::string name;
  std::string source_file;  // where it was read (for messages)
  int64_t source_line = 0;  // 1-based line of the record in that file (JSONL), 0 if unknown
  std::vector<Iterator> iterators;
  std::vector<Computation> computations;
  double initial_execution_time = 0;  // ms
  std::vector<Schedule> schedules;    // schedules[0] is the untransformed program
  /// True when the record was merged from one-schedule-per-line lines (merge_schedule_lines):
  /// its first schedule is whichever line came first, not necessarily the untransformed one.
  bool from_schedule_lines = false;

  /// How this program's schedules were read (parse_program; summed into SplitCounts::forms):
  /// "read/structured", "read/typed", "read/sched_str:<dialect>", "read/none" (no transformation
  /// information: the identity), and per cross-checked form "check/<form>/agree" or
  /// "check/<form>/disagree", with "disagree/<kind>" per kind of difference
  /// (compare_schedules). Schedules the reader already rejected are not counted.
  std::map<std::string, int64_t> form_counts;
  /// Loop-level evidence of typed transformations_list entries (data.loop_level_base=auto): raw
  /// levels equal to 0 (proves 0-based) and equal to the depth of a computation they apply to
  /// (proves 1-based).
  int64_t typed_entries = 0;  // typed entries read (valid or not)
  int64_t typed_levels_zero = 0;
  int64_t typed_levels_at_depth = 0;

  /// Index of the iterator called `name` in key order, or -1.
  int iterator_index(const std::string& name) const;
  /// Index (absolute-order rank) of the computation called `name`, or -1.
  int computation_index(const std::string& name) const;
};

/// Deepest loop nest a tree may have (tree_structure nesting, parent_iterator chains): a guard
/// against hostile input (the model's own limit is MAX_DEPTH = 5 iterators per computation,
/// model-spec §3.1, applied by featurize as depth_gt_5).
constexpr int kMaxLoopTreeDepth = 64;

/// Why the iterators' parent/child links of `p` do not form a loop forest, or "" when they do:
/// no iterators at all, a parent_iterator or child_iterators entry that is not an iterator, an
/// iterator that is its own parent or child, child/parent links that disagree, a child listed
/// twice, iterators not under any root (a parent cycle, e.g. "i0 and i1 are not under any root
/// loop (their parent_iterator links form a cycle)"), nesting deeper than kMaxLoopTreeDepth, or
/// a computations_list entry that is not a computation. Iterative: any input is safe.
std::string iterator_tree_problem(const Program& p);

/// Why a schedule's `tree_structure` is not a loop forest, or "" when it is: no roots, a loop
/// that appears twice (e.g. "loop i1 appears twice (nested under i1)"), a computation listed in
/// two loops or twice in one. Unknown loop or computation names are left to featurize
/// (bad_tree, unknown_loop_name). The tree is at most kMaxLoopTreeDepth deep (parse_program
/// refuses deeper ones); the walk is iterative anyway.
std::string loop_tree_problem(const LoopTree& t);

/// The loop tree of a program when schedule 0 carries no `tree_structure`: roots are iterators
/// whose parent is null (iterator order), children from child_iterators, computations from
/// computations_list (model-spec §2.1 fallback). Throws DataError with iterator_tree_problem()
/// when the links do not form a loop forest.
LoopTree tree_from_iterators(const Program& p);

}  // namespace lcm::data
