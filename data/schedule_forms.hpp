// The schedule forms a LOOPerSet / Tiramisu record may carry (docs/data-format.md "Schedule
// forms"), read into one normalised schedule: per computation a CompSchedule (tag vectors,
// tiling, unrolling, parallel loop, shifts) and the schedule's fusions, from which the features of
// model-spec §3 are computed unchanged. This header covers the `sched_str` dialects and the
// cross-check of two forms of one schedule; the per-computation dicts and the schedule-level typed
// `transformations_list` are read by parse_program (program_json.cpp; typed_list.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/options.hpp"
#include "data/program.hpp"

namespace lcm::data {

/// The dialect of a `sched_str` (data-format.md "Schedule forms"):
///  - Empty: "" (no transformation);
///  - PerComputation: `{comp00}:S(L0,L1,1,2)I(L0,L1)R(L1)P(L0)T2(L1,L0,32,32)T3(...)U(L2,4)`,
///    one `{name}:` block per computation, loop levels 0-based positions in its nest;
///  - PerComputationFused: the same with a fusion prefix without level,
///  `F(comp00,comp01){comp00}:`;
///  - Looper: `F({C1,C2},L2)M({C0},1,0,0,0,1,0,0,0,-1)P({C0,C1,C2},L1)U({C2},L1,4)T2({C0},L0,L1,
///    32,32)`, `{Cn}` the n-th computation by absolute order, `M` its whole unimodular matrix
///    (row-major, depth × depth);
///  - TiraLib: `|`-separated terms with `comps=['c', ...]`, e.g. `I(L0,L1,comps=['c'])|P(L0,
///    comps=['c'])` (Tiramisu-Compiler/TiraLib Schedule.from_sched_str);
///  - Unknown: none of these.
enum class SchedStrDialect { Empty, PerComputation, PerComputationFused, Looper, TiraLib, Unknown };

/// "empty", "per_computation", "per_computation_fused", "looper", "tiralib", "unknown".
const char* sched_str_dialect_name(SchedStrDialect d);

/// The dialect of `s` from its first characters (no full parse): cheap enough to call on every
/// schedule of a file (lcm-inspect).
SchedStrDialect sched_str_dialect(std::string_view s);

/// One schedule in normalised form, with the facts its source could express (the cross-check
/// compares only facts both sides carry).
struct NormalSchedule {
  std::vector<CompSchedule> comps;  // indexed like Program::computations
  std::vector<Fusion> fusions;      // Fusion::level = -1 when the form gives no level
  bool has_fusion_levels = true;    // false: the form names fused computations but no level
  bool has_tag_order = true;        // false: the form gives each computation's matrix only
                                    // (Looper `M`), so only the composed matrices compare
  bool has_shiftings = true;        // false: the form cannot express shifts
  std::string problem;              // "" when parsed; else the skip reason, e.g. "bad_sched_str"
  std::string detail;               // the offending text and why, for the skip message
};

/// Parses `s` in whichever dialect sched_str_dialect() finds, against program `p` (computation
/// names and order, each computation's iterators: a level Ln is the n-th iterator of the
/// computation's own list, 0-based, as the structured fields name it; neither an interchange
/// nor a fusion renames it, e.g. comp01 fused into comp00's i2 keeps its i3). `tree` (the
/// schedule's tree_structure, may be null) gives a fusion level a dialect leaves out: the depth
/// (0-based) of the deepest loop both computations share in it.
///
/// Meaning of the terms (checked against LOOPerSet's structured fields, docs/data-format.md
/// "sched_str dialects"):
///  - P(L): parallelized_dim = the loop at level L (L < depth);
///  - T2(La,Lb,fa,fb), T3(La,Lb,Lc,fa,fb,fc), TiraLib TG(L..,f..): tiling_dims = those loops in
///    the given order, tiling_factors = the factors (> 0);
///  - U(L,f): unrolling_factor = f (> 0); L is a level of the nest after tiling (the innermost
///    loop), so L < depth + number of tiled loops;
///  - I(La,Lb) → tag [1, La, Lb]; R(L) → tag [2, 0, 0, L]; S(La,Lb,a,b) (Tiramisu's skew of two
///    loops by factors a, b) → the 2-D skew tag [3, 0, 0, 0, La, Lb, 0, a, b, x, y] with (x, y)
///    from skew_completion(); tags in term order (= the structured transformations_list order);
///  - Looper M({Cn},m00,m01,...): the computation's whole matrix, decomposed by matrix_to_tags()
///    (has_tag_order = false);
///  - fusion: Looper F({Ca,Cb,..},L), TiraLib F(L,comps=[a,b,..]) and the PerComputationFused
///    prefix F(a,b,..) (level from `tree`, else -1 with has_fusion_levels = false): one Fusion per
///    consecutive pair of the named computations.
/// Shifts have no term in any dialect: has_shiftings = false. TiraLib's D (loop distribution)
/// and E (expansion) have no counterpart in the normalised schedule and are bad_sched_str.
/// Never throws, never recurses on the input: the first term lcm cannot read (unknown letter,
/// wrong arity, a level beyond the computation's depth, an unknown computation, a non-integer, a
/// factor ≤ 0, a second P/T/U/M for one computation, a matrix that is not depth × depth or not
/// unimodular, a matrix no ≤ 4 tag vectors express, text outside any term, brackets that do not
/// close) sets `problem` = "bad_sched_str" and `detail` to the term (escaped, at most 60 bytes)
/// and why; an Unknown dialect likewise. `comps` then holds what was read before.
NormalSchedule parse_sched_str(std::string_view s, const Program& p, const LoopTree* tree);

/// The structured form of schedule `s` (Schedule::comps and Schedule::fusions, as parse_program
/// read them) as a NormalSchedule carrying every fact (all has_* true), for compare_schedules.
NormalSchedule normal_schedule_of(const Schedule& s);

/// The bottom row (x, y) completing Tiramisu's skew(La, Lb, a, b) to the unimodular matrix
/// [[a, b], [x, y]] (a·y − b·x = 1) as LOOPerSet's structured skew tags carry it: a = 1 gives
/// (0, 1); b = −1 gives (1, 0); otherwise y is the least y ≥ 1 with b | a·y − 1 and
/// x = (a·y − 1) / b (b = 0 needs a = ±1: (0, a)). Returns false when gcd(a, b) ≠ 1 (no integer
/// completion) or x, y overflow int64.
bool skew_completion(int64_t a, int64_t b, int64_t& x, int64_t& y);

/// Tag vectors (model-spec §3.4) whose composition T = M_k ⋯ M_1 is the n×n row-major integer
/// matrix `m` (m.size() == n·n), written into `tags`; returns "" or why not. Identity → none; a
/// signed permutation → interchanges (the last-applied one fixing the deepest misplaced row
/// first) then reversals (deepest level first); else block by block, the blocks being the
/// groups of rows/columns linked by off-diagonal entries, in ascending order: a signed
/// permutation block as above, a 2×2 / 3×3 block {i<j<l} → one 2-D / 3-D skew tag holding it;
/// else (depth ≤ 5) a signed permutation L applied before (preferred) or after one skew block,
/// with the fewest tags; a tag list longer than 4 is refused. Errors: "not unimodular
/// (determinant d)", "entries too large" (the determinant overflows 128 bits), "not expressible
/// as ≤ 4 tag vectors" (a signed permutation needing more), "not expressible as ≤ 4 tag vectors
/// by lcm's decomposition (...)" (none of the forms above: some products of overlapping skews).
std::string matrix_to_tags(const std::vector<int64_t>& m, int n,
                           std::vector<std::array<int64_t, 16>>& tags);

/// T = M_k ⋯ M_1 of `tags` as an n×n row-major integer matrix (type-0 vectors skipped, as
/// data::composed_transformation does), into `out`; returns "" or why not (an unknown type, a
/// level outside 0..n−1, an entry overflowing int64). Exact integers, unlike the float64
/// composed_transformation of the features.
std::string compose_tags(const std::vector<std::array<int64_t, 16>>& tags, int n,
                         std::vector<int64_t>& out);

/// How two forms of one schedule differ, or an empty `kind` when they agree on every fact both
/// carry. `kind` is one of "parallelization", "tiling", "unrolling", "shifting" (only when both
/// have_shiftings), "transformation" (tag vectors exactly when both has_tag_order, else the
/// composed integer matrices of compose_tags), "fusion" (unordered computation pairs as
/// multisets; levels only when both has_fusion_levels), or "unparsed" (a side has a `problem`
/// or not one CompSchedule per computation of `p`: nothing to compare); `detail` names the
/// computation and shows both values (at most about 200 bytes). Computations are checked in
/// order, each kind in the order above, then fusions; the first difference is returned.
struct ScheduleDifference {
  std::string kind;
  std::string detail;
};
ScheduleDifference compare_schedules(const Program& p, const NormalSchedule& a,
                                     const NormalSchedule& b);

}  // namespace lcm::data
