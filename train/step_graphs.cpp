// The captured-step cache and the per-step device state of training.cuda_graphs
// (step_graphs.hpp).
#include "train/step_graphs.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace lcm::train {

CapturedStep* StepGraphCache::find(int64_t key) {
  auto it = steps_.find(key);
  return it == steps_.end() ? nullptr : it->second.get();
}

CapturedStep& StepGraphCache::add(int64_t key, CapturedStep s) {
  if (!has_room()) throw std::logic_error("StepGraphCache::add: the cache is full");
  auto [it, inserted] = steps_.emplace(key, std::make_unique<CapturedStep>(std::move(s)));
  if (!inserted) throw std::logic_error("StepGraphCache::add: key already cached");
  return *it->second;
}

int64_t StepGraphCache::nodes() const {
  int64_t n = 0;
  for (const auto& kv : steps_) n += kv.second->graph.size();
  return n;
}

StepState::StepState(int device, const lcm::Adam<float>& opt)
    : mem_(device, kScalarOffset + size_t(opt.device_scalar_count()) * sizeof(float)),
      host_(mem_.bytes(), 0),
      n_scalars_(opt.device_scalar_count()) {}

const uint64_t* StepState::counter() const {
  return static_cast<const uint64_t*>(mem_.get());
}

const float* StepState::scalars() const {
  return reinterpret_cast<const float*>(static_cast<const char*>(mem_.get()) + kScalarOffset);
}

void StepState::write(uint64_t dropout_counter, lcm::Adam<float>& opt) {
  if (opt.device_scalar_count() != n_scalars_)
    throw std::logic_error("StepState::write: the optimizer's parameters changed");
  std::memcpy(host_.data(), &dropout_counter, sizeof dropout_counter);
  std::vector<float> sc(static_cast<size_t>(n_scalars_));
  opt.device_step_scalars(sc.data());
  std::memcpy(host_.data() + kScalarOffset, sc.data(), sc.size() * sizeof(float));
  // pageable source: the copy is staged before this returns, so host_ may change afterwards
  lcm::device_upload_bytes(mem_.get(), host_.data(), host_.size());
}

std::string step_graph_summary(const StepGraphCounts& c) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "cuda graphs: %lld training steps captured (%.0f launches each on average), "
                "%lld steps replayed as one graph launch, %lld run uncaptured (%lld refused "
                "captures)",
                (long long)c.captures, c.captures ? double(c.nodes) / double(c.captures) : 0.0,
                (long long)c.replays, (long long)c.fallbacks, (long long)c.refused);
  return buf;
}

}  // namespace lcm::train
