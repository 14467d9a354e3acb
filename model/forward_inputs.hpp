// The input leaves of CostModel::forward for one batch, prepared on the host once (CUDA data
// placement): tag blocks, static/schedule columns, expressions and loop vectors after the forward's
// own host-side selection, so they can live on a device (resident or streamed) and feed forward().
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/dataset.hpp"
#include "engine/tensor.hpp"

namespace lcm::model {

/// ForwardInputs' leaves, in the order forward() creates them (docs/model-spec.md §5.4 inputs).
enum class InputLeaf : int {
  Tags = 0,  // [U, 4, 16]: the distinct 64-value tag blocks (columns 33–96) of the batch's B·C rows
  Expr = 1,    // [Σ C_p, 66, 11] (per program) or [Σ C_b, 66, 11] (naive: per datapoint) rows
  Static = 2,  // [Σ C_p, 764] schedule-independent columns of each program's first datapoint
               // (shared path)
  Sched = 3,   // [Σ C_b, 82] schedule-dependent columns (shared path)
  First = 4,   // [Σ C_b, 33] columns 0–32 (unshared path)
  Third = 5,   // [Σ C_b, 813] columns 97–909 (unshared path)
  Loops = 6,   // [Σ L_b, 8] loop vectors
  ProgramRows = 7,  // [Σ C_p, H0] each program's static first-layer rows, computed before
                    // (CostModel::program_rows; shared path, in place of Expr and Static)
};
constexpr int kNumInputLeaves = 8;

/// What CostModel::prepare_inputs derives from a data::BatchTensors: the metadata the forward needs
/// on the host plus every input leaf as T values, concatenated in one array (each leaf at an
/// offset aligned to 64 values, so device copies of it keep 256-byte alignment for float).
/// `device`, when set, points to the same numel() values on a CUDA device (not owned; the caller,
/// e.g. tools/common/device_batch_store.hpp, keeps them alive until the tape is cleared); forward()
/// on a CUDA tape then views them without a copy. `host` may be empty once `device` is set.
template <class T>
struct ForwardInputs {
  int64_t batch = 0;                         // B
  int64_t n_comps = 0;                       // C (0: it differs between segments)
  int64_t n_loops = 0;                       // L (0: it differs between segments)
  std::vector<data::BatchSegment> segments;  // the batch's segments (data::BatchTensors)
  std::vector<int64_t> shared_row;   // [Σ C_b] when n_comps = 0: each computation row's row in
                                     // the per-program leaves (Expr, Static)
  int64_t n_programs = 0;            // P
  std::vector<int64_t> program_of;   // [B] index into the batch's programs
  std::vector<int64_t> tag_inverse;  // [B·C]: which distinct tag block (row of Tags) each row uses
  bool share_static = false;         // the shared first-layer path (Static/Sched) is used
  bool naive = false;                // forward_naive's layout: every row's tags, per-datapoint Expr
  std::array<Shape, kNumInputLeaves> shapes{};     // rank 0 = absent
  std::array<int64_t, kNumInputLeaves> offsets{};  // in values, into host / device
  int64_t total = 0;                               // values in host / device
  std::vector<T> host;
  const T* device = nullptr;
  /// Optional, CPU eval forwards only (no gradients): the first layer's schedule columns
  /// [H0, 82 + 2·lstm_embedding_size] as CostModel::schedule_weight() gives them for the current
  /// weights (not owned; valid while the weights do not change), used in place of gathering
  /// them from the weight on every forward (lcm-serve answers many queries with one model).
  const T* sched_weight = nullptr;

  bool has(InputLeaf l) const { return shapes[size_t(l)].rank > 0; }
  const Shape& shape(InputLeaf l) const { return shapes[size_t(l)]; }
  int64_t offset(InputLeaf l) const { return offsets[size_t(l)]; }
  /// Bytes of all leaves (what a device copy needs).
  size_t bytes() const { return size_t(total) * sizeof(T); }
};

}  // namespace lcm::model
