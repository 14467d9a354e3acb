// Internal to the cost model's translation units (model/cost_model*.cpp): the computation
// vector's column blocks (docs/model-spec.md §3.9), the tree's levels, the checks shared by both
// forwards and the helpers that make input leaves on a tape. Not part of the public API.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.hpp"
#include "data/features.hpp"
#include "engine/tape.hpp"
#include "model/forward_inputs.hpp"
#include "model/tape_input.hpp"

namespace lcm::model::detail {

constexpr int kFirstWidth = 33;  // columns 0–32 of the computation vector (§3.9)
constexpr int kTagsStart = 33;   // columns 33–96: 4 tag vectors of 16
constexpr int kNumTags = 4;
constexpr int kThirdStart = 97;  // columns 97–909 (813)
constexpr int kThirdWidth = data::kCompVectorWidth - kThirdStart;
constexpr int kEncoderRawColumns = 207;  // §8.2: [first 33 | tags 64 | A, b, A′ 110] kept raw

/// Throws std::invalid_argument("CostModel: " + what).
[[noreturn]] void bad(const std::string& what);

using model::input_from;
using model::make_input;

/// The leaf `l` of prepared inputs: a view of in.device on a CUDA tape (no copy; the memory must
/// stay unchanged until the tape is cleared), else a copy of the host values (uploaded on a CUDA
/// tape, as make_input). Throws std::invalid_argument when the leaf is absent or the host values
/// are missing, std::logic_error for device inputs on a CPU tape.
template <class T>
NodeId input_leaf(Tape<T>& t, const ForwardInputs<T>& in, InputLeaf l) {
  if (!in.has(l)) bad("prepared inputs lack leaf " + std::to_string(int(l)));
  const Shape& shape = in.shape(l);
  if (in.offset(l) < 0 || in.offset(l) + shape.numel() > in.total)
    bad("prepared input leaf outside its buffer");
  if (in.device) {
    if (t.device() == Device::CPU)
      throw std::logic_error(
          "CostModel::forward: inputs placed on a CUDA device given to a CPU tape");
    return t.new_view(Tensor<T>{const_cast<T*>(in.device + in.offset(l)), shape, Device::CUDA},
                      "input");
  }
  if (int64_t(in.host.size()) != in.total)
    bad("prepared inputs have neither host nor device values");
  const T* src = in.host.data() + in.offset(l);
  if (t.device() != Device::CPU) return t.constant(src, shape);
  const NodeId id = t.new_node(shape, "input");
  std::copy(src, src + shape.numel(), t.value(id).data);
  return id;
}

/// Per-node facts of a checked tree: height (leaf loops = 0) and nodes of each height.
struct TreeLevels {
  std::vector<int> height;
  std::vector<std::vector<int>> levels;  // levels[h] = nodes of height h, increasing node index
};

/// The levels of `tree`; throws std::invalid_argument for an index outside the tree or a node
/// reached twice from the roots (not a tree).
TreeLevels tree_levels(const data::ProgramTree& tree);

/// The tree-part of check_batch: indices of `tree` inside a segment of C computations, L loops.
void check_tree(const data::ProgramTree& tree, int64_t C, int64_t L);

/// One tree per segment, each checked by check_tree against its segment's C and L, and when
/// `shapes` by tree_levels; throws std::invalid_argument naming the first problem.
void check_trees(const data::BatchTrees& trees, const std::vector<data::BatchSegment>& segs,
                 bool shapes);

/// Position of computation column c (c < 33 or c ≥ 97) in z0 = [first 33 | tags Dt | third 813 |
/// expr].
inline int z0_column(int c, int tags_width) {
  return c < kFirstWidth ? c : kFirstWidth + tags_width + (c - kThirdStart);
}

/// Computation columns outside the tag block split by schedule dependence (§3.2), increasing.
struct ColumnSplit {
  std::vector<int> static_cols;                  // 764
  std::vector<int> sched_cols;                   // 82 (1–32, 157–206)
  std::vector<std::pair<int, int>> static_runs;  // static_cols as maximal [first, count) runs
};
const ColumnSplit& column_split();

/// Each computation row's expression row (that of its datapoint's program): [Σ C_b].
std::vector<int64_t> program_rows_of(const data::BatchTensors& bt, const data::BatchLayout& lay);

/// Σ points·C over segments: the computation rows of a batch.
int64_t comp_rows(const std::vector<data::BatchSegment>& segs);

}  // namespace lcm::model::detail
