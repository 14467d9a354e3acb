// CUDA graphs of lcm-train's training steps (training.cuda_graphs): a bounded cache of captured
// steps, one per device-resident training batch, and the device memory a replay reads its
// per-step values from (the dropout counter, the optimizer's scalars), so that a replayed step
// computes what the uncaptured step computes at that point of the run.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "engine/device_graph.hpp"
#include "engine/device_memory.hpp"
#include "engine/optim.hpp"
#include "engine/tensor.hpp"
#include "train/train_options.hpp"

namespace lcm::train {

/// One captured training step: forward, loss, backward, clipping, the optimizer update and
/// zero_grad of one batch, as one graph. `loss` and `pred` view the tape's device arena, which
/// every replay of this graph writes (valid to read after a replay, until the next step).
struct CapturedStep {
  lcm::DeviceGraph graph;
  lcm::Tensor<float> loss, pred;                    // [1] and [batch] after a replay
  const lcm::data::BatchTensors* labels = nullptr;  // the batch's speedups (host)
  uint64_t draws = 0;                               // dropout draws one step takes
};

/// The captured steps of a run, keyed by the local training batch (the key fixes the sequence of
/// kernels and their arguments: the batch's trees, index tables and labels are uploaded into the
/// graph, its features are at fixed device addresses in the DeviceBatchStore). At most `limit`
/// graphs are kept: a miss when full runs uncaptured (no eviction: the batches come round in the
/// same order every epoch, where least-recently-used eviction would drop exactly the graph needed
/// next and capture at every step). Memory: the graphs share the tape's device arena (one step's
/// activations), each holds pinned host copies of its uploads (about the batch's index tables and
/// labels) and a few KiB of device tables, plus the driver's nodes (one per launch).
class StepGraphCache {
 public:
  /// `limit` >= 0 (0: nothing is captured).
  explicit StepGraphCache(int64_t limit) : limit_(limit) {}
  /// The step of `key`, nullptr when none is cached.
  CapturedStep* find(int64_t key);
  /// True when another step can be captured (fewer than `limit` cached).
  bool has_room() const { return int64_t(steps_.size()) < limit_; }
  /// Caches `s` under `key` (which must be absent and has_room(); std::logic_error otherwise).
  CapturedStep& add(int64_t key, CapturedStep s);
  /// Marks `key` as not capturable (its capture failed): refused() is then true.
  void refuse(int64_t key) { refused_.insert(key); }
  bool refused(int64_t key) const { return refused_.count(key) > 0; }
  int64_t size() const { return int64_t(steps_.size()); }
  int64_t limit() const { return limit_; }
  /// Launches recorded in the cached graphs, together.
  int64_t nodes() const;

 private:
  int64_t limit_;
  std::map<int64_t, std::unique_ptr<CapturedStep>> steps_;  // (stable addresses)
  std::set<int64_t> refused_;
};

/// The device memory a captured step reads its per-step values from, and their host staging:
/// the dropout counter base (Rng::set_device_counter) and the optimizer's step scalars
/// (Adam::device_step_scalars). write() fills and uploads them before each replay: one copy.
class StepState {
 public:
  /// For `opt` (its device_scalar_count()) on cuda:`device`. Throws std::runtime_error (no
  /// device, out of memory).
  StepState(int device, const lcm::Adam<float>& opt);
  /// Where a captured dropout reads its counter base.
  const uint64_t* counter() const;
  /// Where a captured Adam::step_from_device reads its scalars.
  const float* scalars() const;
  /// The values of the coming step: `dropout_counter` (the host Rng's counter) and the scalars of
  /// opt.device_step_scalars() (which advances the optimizer's step counts), uploaded.
  void write(uint64_t dropout_counter, lcm::Adam<float>& opt);

 private:
  static constexpr size_t kScalarOffset = 16;  // bytes before the scalars (the counter)
  lcm::DeviceBuffer mem_;
  std::vector<unsigned char> host_;
  int64_t n_scalars_;
};

/// "cuda graphs: N steps captured (M launches each on average), R replayed, F uncaptured (K
/// refused captures)" for the training summary.
std::string step_graph_summary(const StepGraphCounts& c);

}  // namespace lcm::train
