// Whether a normalised schedule (data::Schedule, program.hpp) can be applied to its program: the
// one check every reader (through featurize), lcm-serve and liblcm (through describe_schedule)
// and lcm-synth's self-check run before a schedule is scored or written. The rules and their
// sources (Tiramisu's scheduling commands) are in docs/data-format.md § Skips, "Applicability".
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "data/program.hpp"

namespace lcm::data {

/// Why one schedule cannot be featurized or scored: a named reason (docs/data-format.md § Skips)
/// and its human-readable detail.
struct ScheduleProblem {
  std::string reason, detail;
};

/// The largest tiling, unrolling or skewing factor: Tiramisu's scheduling commands take them as
/// C++ `int` (computation::tile, computation::unroll, computation::skew in src/tiramisu_core.cpp).
constexpr int64_t kMaxScheduleFactor = std::numeric_limits<int32_t>::max();

/// Why schedule `s` cannot be applied to program `p`, or nullopt when it can. Checks, in this
/// order (the first failure is returned):
///  - `s.parse_problem` as given (a reader already refused it);
///  - `bad_schedule_comps`: not one entry per computation;
///  - per computation, in absolute order:
///    - `bad_tiling`: tiling_dims and tiling_factors of different lengths, or more than 3 tiled
///      loops (Tiramisu's computation::tile takes 2 or 3, computation::split 1). Tiled loops
///      that are not consecutive levels are accepted: LOOPerSet measured such schedules (after
///      an interchange the names are those of the original levels);
///    - `loop_tiled_twice`: one loop named twice in one computation's tiling;
///    - `unknown_loop_name`: a tiled, parallelised or shifted loop that is not a program iterator;
///    - `loop_not_in_nest`: a tiled or parallelised loop that encloses neither the computation
///      nor a computation it is fused with;
///    - `bad_tile_factor`: a tiling factor ≤ 0 or above kMaxScheduleFactor (a tile larger than
///      its loop is legal: Tiramisu splits the loop, the tile loop runs once);
///    - `bad_unroll_factor`: an unrolling factor < 0 or above kMaxScheduleFactor (0 = none);
///    - `transformations_gt_4`: more than 4 tag vectors (model-spec §3.4);
///    - `bad_transformation`: a tag of unknown type, a loop level outside the nest, a skewing
///      whose loop levels repeat, or a skewing factor beyond kMaxScheduleFactor;
///    - `singular_transformation`: a skewing whose factor matrix has determinant 0 (e.g. levels
///      [0, 0] with factors 1, 1, 1, 1);
///    - `non_unimodular_transformation`: a skewing whose factor matrix has |determinant| > 1
///      (Tiramisu's computation::skew asserts |a·d − b·c| == 1);
///  - `bad_fusion`: a fusion naming a computation the program lacks, fusing a computation with
///    itself (Tiramisu's computation::after of a computation after itself), or at a level outside
///    either nest.
/// Never throws (but std::bad_alloc).
std::optional<ScheduleProblem> validate_schedule(const Program& p, const Schedule& s);

/// True when `s` transforms nothing: no tag vector of a non-zero type, tiling, unrolling,
/// parallelisation, shift or fusion in any computation. Its tree_structure is not looked at.
bool is_untransformed(const Schedule& s);

/// What `s` does, in a few words for messages ("tiling of comp00", "a fusion"), or "" when it is
/// untransformed.
std::string first_transformation(const Program& p, const Schedule& s);

}  // namespace lcm::data
