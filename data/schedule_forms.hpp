// The schedule forms a LOOPerSet / Tiramisu record may carry (docs/data-format.md "Schedule
// forms"), read into one normalised schedule: per computation a CompSchedule (tag vectors,
// tiling, unrolling, parallel loop, shifts) and the schedule's fusions, from which the features of
// model-spec §3 are computed unchanged. This header covers the `sched_str` dialects and the
// cross-check of two forms of one schedule; the per-computation dicts and the schedule-level typed
// `transformations_list` are read by parse_program (program_json.cpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "data/program.hpp"

namespace lcm::data {

/// Where a schedule's transformations were read from (data.schedule_source).
enum class ScheduleSource {
  Auto,        // per-computation dicts when present, else the typed list, else sched_str
  Structured,  // per-computation dicts {parallelized_dim, tiling, unrolling_factor, ...}
  Typed,       // schedule-level transformations_list of {type, loop_levels, parameters}
  SchedStr,    // the sched_str text
};

/// What to do when two forms of one schedule disagree (data.schedule_check).
enum class ScheduleCheck {
  Report,  // count and name the disagreements, keep the schedule from the chosen source
  Skip,    // a disagreement drops the schedule (schedule/schedule_forms_disagree)
  Off,     // no cross-check
};

/// The dialect of a `sched_str` (data-format.md "Schedule forms"):
///  - Empty: "" (no transformation);
///  - PerComputation: `{comp00}:S(L0,L1,1,2)I(L0,L1)R(L1)P(L0)T2(L1,L0,32,32)T3(...)U(L2,4)`,
///    one `{name}:` block per computation, loop levels 0-based positions in its nest;
///  - PerComputationFused: the same with a fusion prefix without level, `F(comp00,comp01){comp00}:`;
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
/// computation, 0-based). `tree` (the schedule's tree_structure, may be null) gives a fusion level
/// a dialect leaves out, when it can. Never throws: a term lcm cannot read (unknown letter, wrong
/// arity, a level beyond the computation's depth, an unknown computation, a matrix that is not
/// depth × depth or not unimodular, a matrix no ≤ 4 tag vectors express) sets `problem` =
/// "bad_sched_str" and `detail` to the term and why; an Unknown dialect likewise.
NormalSchedule parse_sched_str(std::string_view s, const Program& p, const LoopTree* tree);

/// How two forms of one schedule differ, or an empty `kind` when they agree on every fact both
/// carry. `kind` is one of "parallelization", "tiling", "unrolling", "shifting",
/// "transformation" (tag vectors, or the composed matrices when one side has no tag order),
/// "fusion"; `detail` names the computation and shows both values.
struct ScheduleDifference {
  std::string kind;
  std::string detail;
};
ScheduleDifference compare_schedules(const Program& p, const NormalSchedule& a,
                                     const NormalSchedule& b);

}  // namespace lcm::data
