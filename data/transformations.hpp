// The table of transformation kinds that a tag vector encodes (model-spec §3.4,
// docs/data-format.md § Schedule forms): each kind's name, tag code, loop-level and parameter
// columns, validation rule, sched_str letter and matrix. Every reader, the validator, the
// features, the schedule comparison, lcm-synth and the tests go through this table and its
// encode/decode helpers; no other file reads or writes tag[0] == <code>.
//
// The other transformations of a schedule are not tag vectors and keep their own CompSchedule
// fields (program.hpp): tiling (tiling_dims/tiling_factors), unrolling (unrolling_factor),
// parallelisation (parallelized_dim), shifting (shiftings) and fusion (Schedule::fusions).
//
// Adding a kind: a TransformKind value before Count and its row of kTransformKinds (here), its
// case of matrix_entries (transformations.cpp), how lcm-synth draws one (synth_schedules.cpp) and
// its typed row in docs/data-format.md; tests/test_transform_kinds.cpp then covers it.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lcm::data {

/// One stored transformation: [kind code, then the kind's levels and parameters at fixed
/// columns, zeros elsewhere] (model-spec §3.4). Code 0 (all zeros) is "no transformation".
using TagVector = std::array<int64_t, 16>;

/// The code of a tag vector that transforms nothing (padding).
constexpr int64_t kNoTransformationTag = 0;

/// The kinds of tag vector, in tag-code order. 2-D and 3-D skewing are one kind with 2 or 3
/// loop levels (a 2-level skewing has 0 in its third level column).
enum class TransformKind : int { Interchange, Reversal, Skewing, Count };

constexpr int kTransformKindCount = int(TransformKind::Count);
constexpr int kMaxTransformLevels = 3;  // loop levels one tag vector names
constexpr int kMaxTransformParams = 9;  // parameters one tag vector holds

/// One row of the table: how a kind is stored, read and checked.
struct TransformKindInfo {
  TransformKind kind;
  const char* name;            // typed transformations_list "type" and messages ("skewing")
  const char* alias_a;         // other typed spellings ("skew"), nullptr when none
  const char* alias_b;         // a second one, nullptr when none
  const char* noun;            // in the reader's messages ("skew of a level with itself")
  int64_t tag;                 // tag[0]
  int level_col;               // tag column of the first loop level
  int min_levels, max_levels;  // fewer than max_levels: the trailing level columns hold 0
  int param_col;               // tag column of the first parameter
  int params;                  // parameter count, when not a block
  /// The parameters are the levels×levels block of the kind's matrix (row-major). The validator
  /// then asks distinct levels, entries within kMaxScheduleFactor, no stray parameter and a
  /// determinant of ±1 (Tiramisu's `tiramisu` command asserts it).
  bool unimodular_block;
  const char* tiramisu;  // Tiramisu's scheduling command, for messages
  /// The sched_str term letter (per_computation and tiralib dialects; looper writes matrices M).
  const char* letter;
  /// sched_str arguments when more than one count is accepted ("S takes <usage>, got N"); nullptr
  /// for one count (levels then parameters).
  const char* sched_str_usage;
  /// typed entries: "<name> <usage>, got L and P" when more than one level count is accepted.
  const char* typed_usage;
};

// clang-format off
/// The table, indexed by TransformKind.
inline constexpr std::array<TransformKindInfo, kTransformKindCount> kTransformKinds = {{
    // kind, name, aliases, noun, tag, level col, levels, param col, params, block, tiramisu,
    // letter, sched_str usage, typed usage
    {TransformKind::Interchange, "interchange", "interchanging", nullptr, "interchange", 1,
     1, 2, 2, 0, 0, false, "computation::interchange", "I", nullptr, nullptr},
    {TransformKind::Reversal, "reversal", "reverse", nullptr, "reversal", 2,
     3, 1, 1, 0, 0, false, "computation::loop_reversal", "R", nullptr, nullptr},
    {TransformKind::Skewing, "skewing", "skew", nullptr, "skew", 3,
     4, 2, 3, 7, 0, true, "computation::skew", "S",
     "4 arguments (2 levels, 2 factors), 6 (2 levels, a 2x2 block) or 12 (3 levels, a 3x3 block)",
     "needs 2 loop levels and 4 parameters or 3 and 9 (model-spec §3.4)"},
}};
// clang-format on

namespace transform_detail {
constexpr bool rows_in_kind_order() {
  for (int k = 0; k < kTransformKindCount; ++k) {
    const TransformKindInfo& i = kTransformKinds[size_t(k)];
    if (int(i.kind) != k || i.tag != k + 1) return false;
    if (i.min_levels < 1 || i.max_levels > kMaxTransformLevels || i.min_levels > i.max_levels)
      return false;
    const int np = i.unimodular_block ? i.max_levels * i.max_levels : i.params;
    if (np > kMaxTransformParams || i.level_col + i.max_levels > 16 || i.param_col + np > 16)
      return false;
  }
  return true;
}
}  // namespace transform_detail

static_assert(kTransformKinds.size() == size_t(TransformKind::Count),
              "one row of kTransformKinds per TransformKind");
static_assert(transform_detail::rows_in_kind_order(),
              "kTransformKinds rows in TransformKind order, tag codes 1..Count, columns within the "
              "16-wide tag vector");

/// The row of `k`.
const TransformKindInfo& kind_info(TransformKind k);
/// The kind whose tag code is `tag0`; nullopt for 0 and unknown codes.
std::optional<TransformKind> kind_of_tag(int64_t tag0);
/// The kind named `name` or one of its aliases (typed transformations_list "type").
std::optional<TransformKind> kind_of_name(std::string_view name);
/// The kind whose sched_str letter is `letter`.
std::optional<TransformKind> kind_of_letter(std::string_view letter);
/// Parameters of a `k` transformation of `n_levels` loop levels.
int param_count(TransformKind k, int n_levels);

/// True when `t` transforms nothing (code kNoTransformationTag).
inline bool is_no_transformation(const TagVector& t) {
  return t[0] == kNoTransformationTag;
}

/// A decoded tag vector. Levels are 0-based loop depths of the computation's nest; parameters
/// are the kind's factors (a skewing's block, row-major).
struct Transformation {
  TransformKind kind = TransformKind::Interchange;
  int n_levels = 0;
  std::array<int64_t, kMaxTransformLevels> levels{};
  int n_params = 0;
  std::array<int64_t, kMaxTransformParams> params{};
  /// Decoded only: a parameter column beyond n_params holds a non-zero value.
  bool stray_params = false;
};

/// The tag vector of `t` (levels and parameters at the kind's columns, zeros elsewhere).
TagVector encode(const Transformation& t);
/// The transformation `t` stores; nullopt for "no transformation" and for an unknown code.
/// Columns the kind does not use are not looked at, but stray parameters are flagged.
std::optional<Transformation> decode(const TagVector& t);

/// One entry of a transformation's matrix that may differ from the identity.
struct MatrixEntry {
  int64_t row, col, value;
};
/// The entries of `t`'s n×n matrix (model-spec §3.4) that may differ from the identity, to be
/// written in order over an identity matrix (later writes win). Levels are not checked.
struct MatrixEntries {
  int size = 0;
  std::array<MatrixEntry, kMaxTransformParams> at{};
};
MatrixEntries matrix_entries(const Transformation& t);

/// The sched_str term of `t` in the per_computation dialect: "I(L0,L1)", "R(L2)",
/// "S(L0,L1,1,0,1,1)" (the tiralib dialect adds ",comps=[...]").
std::string sched_str_term(const Transformation& t);

/// A short text of tag vector `t` for messages: "none", "I(0,1)", "R(2)", "S(0,1,0;1,0,1,1)"
/// (every level column, then the parameters). An unknown code prints with skewing's layout.
std::string tag_short_text(const TagVector& t);

}  // namespace lcm::data
