// The CPU training step in sub-batches (training.cpu_sub_batches): a batch split into a fixed
// number of parts whose forward and backward run at once on the OpenMP threads, each on its own
// tape with its own gradient buffers, each part's ops on one thread; the gradients are summed in
// part order. Most of a step's products and element-wise loops are too small to split across
// threads (engine/ops/gemm.hpp kParallelMinFlops), so one step at a time leaves a second core
// mostly idle; parts of a batch keep every core busy. The split depends on the batch and the part
// count only, so results are identical for any thread count; they equal the unsplit step's up to
// floating-point reassociation (and dropout masks, drawn per part).
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "data/dataset.hpp"
#include "engine/parameter.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"

namespace lcm::train {

/// Datapoints `idx` (indices into bt's datapoints, ascending) of batch `bt` as a batch of their
/// own: their comp and loop rows, speedups, the programs they use (first-seen order) with those
/// programs' expression rows, and segments (a run of selected points of one segment of bt is one
/// segment, whose tree `*trees_out` gets from `trees`; adjacent runs whose trees have one shape,
/// data::footprint, are one). Throws std::invalid_argument as
/// data::batch_layout for a malformed bt, or when idx is empty, unsorted or out of range.
data::BatchTensors select_points(const data::BatchTensors& bt, const data::BatchTrees& trees,
                                 const std::vector<int32_t>& idx, data::BatchTrees* trees_out);

/// select_points into *out_bt, whose vectors are cleared and refilled (their capacity reused
/// from step to step). Same errors.
void select_points_into(const data::BatchTensors& bt, const data::BatchTrees& trees,
                        const std::vector<int32_t>& idx, data::BatchTensors* out_bt,
                        data::BatchTrees* trees_out);

/// Which datapoints of `bt` each of `parts` sub-batches trains (ascending indices; a part may be
/// empty when the batch is small). With `whole_programs` (a ranking loss: its terms couple the
/// schedules of one program) the rule of train/distributed.hpp split_batch_by_program, whole
/// programs balanced by datapoint count; else the datapoints ordered by program (bt.programs
/// order) cut into runs of ⌈B / parts⌉ or fewer (at most parts − 1 programs lie in two parts).
/// Depends on bt and parts only. Throws std::invalid_argument for parts < 1.
std::vector<std::vector<int32_t>> sub_batch_points(const data::BatchTensors& bt, int parts,
                                                   bool whole_programs);

/// One part of a batch as SubBatchStep hands it to its callbacks: its index, its datapoints in
/// the whole batch, its tensors and trees.
struct SubBatch {
  int index = 0;
  std::vector<int32_t> points;  // indices into the whole batch's datapoints
  data::BatchTensors bt;
  data::BatchTrees trees;
};

/// Forward of a part on its tape: the prediction node [part.bt.batch].
using SubForward = std::function<NodeId(Tape<float>&, const SubBatch&, Rng&)>;
/// The loss of a part (its share of the whole batch's loss, so that the parts' losses sum to it).
using SubLoss = std::function<NodeId(Tape<float>&, NodeId pred, const SubBatch&)>;

/// The sub-batch step's tapes and per-part gradient buffers, kept from step to step.
class SubBatchStep {
 public:
  /// `params`: every parameter a forward may read (their grads receive the sums); `parts` ≥ 2.
  /// Throws std::invalid_argument for parts < 2.
  SubBatchStep(std::vector<Parameter<float>*> params, int parts);

  int parts() const { return parts_; }

  /// Forward and backward of batch (bt, trees) in parts (sub_batch_points(bt, parts,
  /// whole_programs)), at most min(parts, OpenMP threads) at once. Part k's dropout draws from
  /// Rng(dropout.seed() ^ (0xD1B54A32D192ED03 · (k + 1))) from counter dropout.counter(); then
  /// `dropout` moves on by the most draws of a part (the next step's masks are fresh). Part 0's
  /// parameter gradients accumulate into Parameter::grad, part k's into its own buffers, added
  /// to Parameter::grad in part order after all parts are done (and zeroed again). Returns the
  /// sum of the parts' losses (in part order, double) and the predictions [B] in batch order in
  /// *pred. An exception of a part (bad input, a non-finite loss the callback refuses) is
  /// rethrown after every part finished (the lowest part's first); the gradients are then
  /// partial.
  double run(const data::BatchTensors& bt, const data::BatchTrees& trees, bool whole_programs,
             Rng& dropout, const SubForward& forward, const SubLoss& loss,
             std::vector<float>* pred);

  /// The host arena peaks of the parts' tapes, summed (bytes).
  size_t peak_bytes() const;

  /// For benchmarks, of the latest run(): how much longer the busiest thread's parts took than
  /// the calling thread's (thread CPU time, ms; 0 when the calling thread was the busiest). The
  /// calling thread's CPU time plus this is the step's critical path, wall time on an idle
  /// machine (bench_model).
  double critical_path_excess_ms() const { return excess_ms_; }

 private:
  std::vector<Parameter<float>*> params_;
  int parts_;
  std::vector<std::unique_ptr<Tape<float>>> tapes_;
  std::vector<SubBatch> subs_;  // the parts of the latest step (buffers reused)
  double excess_ms_ = 0;
  // parts 1..: one zeroed buffer per parameter, and the map their tapes accumulate through
  std::vector<std::vector<std::vector<float>>> grads_;
  std::vector<std::unordered_map<const Parameter<float>*, float*>> grad_maps_;
};

}  // namespace lcm::train
