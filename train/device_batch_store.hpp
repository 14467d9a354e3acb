// Data placement on a CUDA device: the cached batches stay in host memory; at start as
// many batches' model inputs as fit training.gpu_memory_budget are copied to the device once, the
// rest are streamed through pinned host buffers on a second stream, overlapping compute.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/memory_budget.hpp"
#include "data/dataset.hpp"
#include "engine/device_memory.hpp"
#include "engine/device_stream.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"

namespace lcm::train {

/// One batch ready for a step on the device: CostModel::forward(tape, tree, inputs, rng) reads
/// `inputs` (on the device; host values dropped) and the loss reads `labels`: the batch's
/// BatchTensors with batch, n_comps, n_loops, speedup [B], programs [P], program_of [B] and
/// empty comp/loops/expr (they live on the device, after input scaling).
struct StagedBatch {
  lcm::model::ForwardInputs<float> inputs;
  lcm::data::BatchTensors labels;
};

/// The batches of one Dataset for a model on cuda:`device`. Construction prepares every batch
/// once (materialize, input scaling, CostModel::prepare_inputs) and keeps on the device the
/// inputs of those that fit `budget_bytes` (first fit in batch order, allocated in chunks of at
/// most 256 MiB, copied once); the others are streamed: acquire()/prefetch() prepare them into one
/// of two pinned host buffers and copy them on a second stream into one of two device slots
/// (double buffering), with events so that a slot is neither overwritten while a step still
/// reads it nor read before its copy completed. Usage per step: `acquire(b)`, queue the step's
/// work, `prefetch(b + 1)` (its host work and copy then overlap the queued device work).
/// The dataset, model and scaling must outlive the store. Not thread-safe.
class DeviceBatchStore {
 public:
  /// Throws std::runtime_error naming the device and the bytes asked for when the device memory
  /// (or pinned host memory) runs out, std::logic_error for a model with a pre-trained encoder,
  /// and what Dataset::materialize / prepare_inputs throw for a bad batch.
  DeviceBatchStore(const lcm::model::CostModel<float>& model, const lcm::data::Dataset& ds,
                   const lcm::model::InputScaling* scaling, int device, size_t budget_bytes);
  DeviceBatchStore(const DeviceBatchStore&) = delete;
  DeviceBatchStore& operator=(const DeviceBatchStore&) = delete;

  /// Batch `b` on the device, for a step whose work is queued on the default stream after this
  /// call. The reference stays valid until the second acquire() or prefetch() after this one.
  /// Throws std::out_of_range for a bad index.
  const StagedBatch& acquire(int64_t b);
  /// Starts preparing and copying streamed batch `b` (no-op when resident, out of range, or
  /// already staged) into the slot the current batch does not use.
  void prefetch(int64_t b);

  int64_t size() const { return int64_t(resident_.size()); }
  bool is_resident(int64_t b) const { return resident_.at(size_t(b)); }
  int64_t resident_count() const;
  /// Device bytes reserved for the resident batches (≤ budget_bytes()).
  size_t resident_bytes() const { return resident_bytes_; }
  size_t budget_bytes() const { return budget_; }
  /// Device bytes of the two streaming slots (0 when every batch is resident); the same again
  /// in pinned host memory.
  size_t staging_bytes() const { return 2 * slot_bytes_; }
  int device() const { return device_; }
  /// "placed N of M <what> batches on cuda:D (X MiB of budget Y MiB); streaming the rest
  /// (K batches through 2 staging buffers of Z MiB)".
  std::string summary(const std::string& what) const;

 private:
  struct Slot {
    lcm::PinnedBuffer pinned;
    lcm::DeviceBuffer device;
    lcm::DeviceEvent copied;    // the copy into `device` (pinned buffer free again after it)
    lcm::DeviceEvent consumed;  // the default-stream work that read `device`
    int64_t batch = -1;
    StagedBatch staged;
  };
  lcm::model::ForwardInputs<float> prepare(int64_t b, lcm::data::BatchTensors* labels) const;
  void stage(int k, int64_t b);

  const lcm::model::CostModel<float>& model_;
  const lcm::data::Dataset& ds_;
  const lcm::model::InputScaling* scaling_;
  int device_;
  size_t budget_;
  std::vector<bool> resident_;
  std::vector<StagedBatch> staged_;  // resident batches (others: empty)
  std::vector<lcm::DeviceBuffer> chunks_;
  size_t resident_bytes_ = 0, slot_bytes_ = 0;
  std::vector<Slot> slots_;  // 0 or 2
  std::unique_ptr<lcm::DeviceStream> stream_;
  int last_slot_ = -1;  // slot of the batch acquired last (-1: resident or none)
};

/// Batch b of a Dataset for one forward pass, as every training/evaluation loop takes it: the
/// store's staged batch (device-resident or streamed in: DeviceBatchStore::acquire) when there is
/// a store, else the batch materialized on the host with the input scaling applied.
struct BatchInput {
  const StagedBatch* staged = nullptr;  // set when the batch came from a store
  lcm::data::BatchTensors host;         // the materialized batch otherwise
  /// The input scaling the batch was built with (also applied to the untransformed schedules of
  /// a relative_to_identity model); nullptr: unscaled.
  const lcm::model::InputScaling* scaling = nullptr;
  /// Speedups, batch size and the rest of the batch's host tensors.
  const lcm::data::BatchTensors& labels() const { return staged ? staged->labels : host; }
  /// CostModel::forward on this batch (the prepared-inputs overload for a staged batch): ŷ [batch],
  /// as a training step takes it (scoring goes through model::score_batch instead).
  /// For a model with config().relative_to_identity, ŷ_i = f(schedule i) − f(untransformed
  /// schedule of i's program): the batch's P programs' untransformed schedules are one more
  /// forward on the same tape (in the tape's mode, dropout drawn from `rng`), gathered per
  /// datapoint and subtracted on the tape (model::relative_to_untransformed). Throws
  /// std::out_of_range when a program has no untransformed schedule
  /// (ProgramFeatures::has_identity).
  lcm::NodeId forward(lcm::model::CostModel<float>& model, lcm::Tape<float>& tape,
                      const lcm::data::Dataset& ds, int64_t b, lcm::Rng& rng) const;
};

/// Batch b of `ds`: acquired from `store` when not nullptr, else materialized and scaled with
/// `scaling` (nullptr: unscaled). Errors as DeviceBatchStore::acquire / Dataset::materialize.
BatchInput batch_input(const lcm::data::Dataset& ds, int64_t b, DeviceBatchStore* store,
                       const lcm::model::InputScaling* scaling);

/// training.gpu_memory_budget for cuda:`device` now: a fraction × the device's free memory, or
/// the bytes. Throws std::runtime_error (no device / CUDA not built).
size_t resolve_gpu_memory_budget(const config::MemoryBudget& budget, int device);

}  // namespace lcm::train
