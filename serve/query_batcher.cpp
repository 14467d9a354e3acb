// Batching of concurrent one-schedule queries (query_batcher.hpp).
#include "serve/query_batcher.hpp"

#include <utility>

namespace lcm::serve {

QueryBatcher::QueryBatcher(Scorer& scorer, std::chrono::microseconds wait, size_t max_batch)
    : scorer_(scorer), wait_(wait), max_batch_(max_batch < 1 ? 1 : max_batch) {}

ScheduleScore QueryBatcher::score(const std::string& program_json,
                                  const std::string& untransformed_json,
                                  const std::string& schedule_json) {
  Pending me{&program_json, &untransformed_json, &schedule_json, {}, nullptr, false};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  cv_.notify_all();  // a gathering thread may be waiting for a full batch
  while (!me.done) {
    if (gathering_) {
      cv_.wait(lock);
      continue;
    }
    // this thread gathers and scores the next batch (its own query among them)
    gathering_ = true;
    cv_.wait_for(lock, wait_, [&] { return queue_.size() >= max_batch_; });
    std::vector<Pending*> batch;
    batch.swap(queue_);
    lock.unlock();
    run(batch);
    lock.lock();
    for (Pending* p : batch) p->done = true;
    ++batches_;
    queries_ += int64_t(batch.size());
    gathering_ = false;
    cv_.notify_all();  // the batch's threads, and a query waiting to gather the next one
  }
  if (me.error) std::rethrow_exception(me.error);
  return std::move(me.out);
}

void QueryBatcher::run(const std::vector<Pending*>& batch) {
  std::vector<bool> taken(batch.size(), false);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (taken[i]) continue;
    // the group of batch[i]'s program, in arrival order
    std::vector<Pending*> group;
    std::vector<std::string> schedules;
    for (size_t j = i; j < batch.size(); ++j)
      if (!taken[j] && *batch[j]->program == *batch[i]->program &&
          *batch[j]->untransformed == *batch[i]->untransformed) {
        taken[j] = true;
        group.push_back(batch[j]);
        schedules.push_back(*batch[j]->schedule);
      }
    try {
      std::vector<ScheduleScore> r =
          scorer_.score_group(*batch[i]->program, *batch[i]->untransformed, schedules);
      for (size_t k = 0; k < group.size(); ++k) group[k]->out = std::move(r[k]);
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      for (Pending* p : group) p->error = e;
    }
  }
}

int64_t QueryBatcher::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

int64_t QueryBatcher::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

}  // namespace lcm::serve
