// Resident and streamed batches on a CUDA device (see device_batch_store.hpp): first-fit placement
// within the budget at start, double-buffered pinned staging with a copy stream and events.
#include "train/device_batch_store.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "model/scoring.hpp"

namespace lcm::train {

namespace {

constexpr size_t kAlign = 256;  // device alignment of every batch's inputs
constexpr size_t kChunkBytes = size_t(256)
                               << 20;  // resident batches are allocated in chunks of this

size_t aligned(size_t b) {
  return (b + kAlign - 1) / kAlign * kAlign;
}

double mib(size_t b) {
  return double(b) / double(size_t(1) << 20);
}

/// The labels of a batch: everything but the feature tensors (those go to the device).
void strip_features(lcm::data::BatchTensors& bt) {
  bt.comp = {};
  bt.loops = {};
  bt.expr = {};
}

}  // namespace

size_t resolve_gpu_memory_budget(const config::MemoryBudget& budget, int device) {
  if (!budget.is_fraction) return budget.bytes;
  size_t free_b = 0, total_b = 0;
  lcm::device_memory_info(device, &free_b, &total_b);
  return budget.resolve(free_b);
}

lcm::model::ForwardInputs<float> DeviceBatchStore::prepare(int64_t b,
                                                           lcm::data::BatchTensors* labels) const {
  lcm::data::BatchTensors bt = ds_.materialize(b);
  lcm::model::scale_features(scaling_, bt);  // step 1 of model::score_batch, done ahead
  lcm::model::ForwardInputs<float> in = model_.prepare_inputs(ds_.trees(b), bt);
  strip_features(bt);
  *labels = std::move(bt);
  return in;
}

DeviceBatchStore::DeviceBatchStore(const lcm::model::CostModel<float>& model,
                                   const lcm::data::Dataset& ds,
                                   const lcm::model::InputScaling* scaling, int device,
                                   size_t budget_bytes)
    : model_(model), ds_(ds), scaling_(scaling), device_(device), budget_(budget_bytes) {
  const int64_t M = int64_t(ds.batches.size());
  resident_.assign(size_t(M), false);
  staged_.resize(size_t(M));
  // First fit in batch order. Placed batches wait on the host (at most one chunk's worth) and are
  // copied into a chunk allocated for exactly them, so the host never holds more than a chunk.
  std::vector<int64_t> pending;
  size_t pending_bytes = 0;
  auto flush = [&] {
    if (pending.empty()) return;
    lcm::DeviceBuffer chunk;
    try {
      chunk = lcm::DeviceBuffer(device_, pending_bytes);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) +
                               " while placing batches within training.gpu_memory_budget (" +
                               std::to_string(budget_) + " bytes); lower it");
    }
    size_t at = 0;
    for (int64_t b : pending) {
      auto& in = staged_[size_t(b)].inputs;
      float* dst = reinterpret_cast<float*>(static_cast<char*>(chunk.get()) + at);
      lcm::device_upload(dst, in.host.data(), in.total);
      in.device = dst;
      in.host = {};
      at += aligned(in.bytes());
    }
    resident_bytes_ += pending_bytes;
    chunks_.push_back(std::move(chunk));
    pending.clear();
    pending_bytes = 0;
  };
  for (int64_t b = 0; b < M; ++b) {
    lcm::data::BatchTensors labels;
    lcm::model::ForwardInputs<float> in = prepare(b, &labels);
    const size_t need = aligned(in.bytes());
    if (resident_bytes_ + pending_bytes + need <= budget_) {
      if (pending_bytes + need > kChunkBytes) flush();
      resident_[size_t(b)] = true;
      staged_[size_t(b)] = StagedBatch{std::move(in), std::move(labels)};
      pending.push_back(b);
      pending_bytes += need;
    } else {
      slot_bytes_ = std::max(slot_bytes_, need);
    }
  }
  flush();
  if (slot_bytes_ > 0) {  // something is streamed: two slots, a copy stream
    stream_ = std::make_unique<lcm::DeviceStream>(device_);
    for (int k = 0; k < 2; ++k) {
      Slot s{lcm::PinnedBuffer(slot_bytes_),
             lcm::DeviceBuffer(device_, slot_bytes_),
             lcm::DeviceEvent(device_),
             lcm::DeviceEvent(device_),
             -1,
             {}};
      slots_.push_back(std::move(s));
    }
  }
}

int64_t DeviceBatchStore::resident_count() const {
  return int64_t(std::count(resident_.begin(), resident_.end(), true));
}

std::string DeviceBatchStore::summary(const std::string& what) const {
  const int64_t n = resident_count(), m = size();
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "placed %lld of %lld %s batches on cuda:%d (%.1f MiB of budget %.1f MiB); ",
      (long long)n, (long long)m, what.c_str(), device_, mib(resident_bytes_), mib(budget_));
  std::string s = buf;
  if (n == m) return s + "nothing to stream";
  std::snprintf(buf, sizeof buf,
                "streaming the rest (%lld batches through 2 pinned staging buffers of %.1f MiB)",
                (long long)(m - n), mib(slot_bytes_));
  return s + buf;
}

void DeviceBatchStore::stage(int k, int64_t b) {
  Slot& s = slots_[size_t(k)];
  s.batch = -1;
  lcm::data::BatchTensors labels;
  lcm::model::ForwardInputs<float> in = prepare(b, &labels);
  if (aligned(in.bytes()) > slot_bytes_)
    throw std::logic_error("DeviceBatchStore: batch " + std::to_string(b) +
                           " grew since it was measured");
  s.copied.synchronize();  // the previous copy out of this pinned buffer has completed
  std::memcpy(s.pinned.get(), in.host.data(), in.bytes());
  s.consumed.make_wait(stream_.get());  // the steps that read this slot's device memory are done
  stream_->copy_to_device_async(s.device.get(), s.pinned.get(), in.bytes());
  s.copied.record(stream_.get());
  in.host = {};
  in.device = static_cast<const float*>(s.device.get());
  s.staged = StagedBatch{std::move(in), std::move(labels)};
  s.batch = b;
}

const StagedBatch& DeviceBatchStore::acquire(int64_t b) {
  if (b < 0 || b >= size())
    throw std::out_of_range("DeviceBatchStore::acquire: batch " + std::to_string(b) + " of " +
                            std::to_string(size()));
  // Everything queued so far on the default stream is the work of the previous batch.
  if (last_slot_ >= 0) slots_[size_t(last_slot_)].consumed.record(nullptr);
  if (resident_[size_t(b)]) {
    last_slot_ = -1;
    return staged_[size_t(b)];
  }
  int k = slots_[0].batch == b ? 0 : slots_[1].batch == b ? 1 : -1;
  if (k < 0) {
    k = last_slot_ == 0 ? 1 : 0;
    stage(k, b);
  }
  slots_[size_t(k)].copied.make_wait(nullptr);  // the step's kernels start after the copy
  last_slot_ = k;
  return slots_[size_t(k)].staged;
}

BatchInput batch_input(const lcm::data::Dataset& ds, int64_t b, DeviceBatchStore* store,
                       const lcm::model::InputScaling* scaling) {
  BatchInput in;
  in.scaling = scaling;
  if (store) {
    in.staged = &store->acquire(b);
  } else {
    in.host = ds.materialize(b);
    lcm::model::scale_features(scaling, in.host);
  }
  return in;
}

lcm::NodeId BatchInput::forward(lcm::model::CostModel<float>& model, lcm::Tape<float>& tape,
                                const lcm::data::Dataset& ds, int64_t b, lcm::Rng& rng) const {
  const lcm::data::BatchTrees trees = ds.trees(b);
  const lcm::NodeId y = staged ? model.forward(tape, trees, staged->inputs, rng)
                               : model.forward(tape, trees, host, rng);
  if (!model.config().relative_to_identity) return y;
  const lcm::data::BatchTensors& bt = labels();
  lcm::data::Batch untransformed;  // one point per program of the batch, in bt.programs order
  for (int32_t p : bt.programs) untransformed.points.push_back({p, lcm::data::kIdentitySchedule});
  lcm::data::BatchTensors it = ds.materialize(untransformed);
  lcm::model::scale_features(scaling, it);
  const lcm::NodeId f0 = model.forward(tape, ds.trees(untransformed), it, rng);  // [P]
  return lcm::model::relative_to_untransformed(tape, y, f0, bt.program_of);
}

void DeviceBatchStore::prefetch(int64_t b) {
  if (b < 0 || b >= size() || resident_[size_t(b)]) return;
  if (slots_[0].batch == b || slots_[1].batch == b) return;
  stage(last_slot_ == 0 ? 1 : 0, b);
}

}  // namespace lcm::train
