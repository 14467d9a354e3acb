// Batching of concurrent one-schedule queries (lcm-serve --socket --batch-wait-us): the queries
// that several connections ask within a bounded wait are scored together, those of one program
// in as few forwards as keep every product on the one-row kernels (Scorer::score_group).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "serve/scorer.hpp"

namespace lcm::serve {

/// Gathers one-schedule queries of concurrent threads (one per socket connection) and scores
/// them together. The first query to arrive while no batch is being gathered waits up to `wait`
/// (or until `max_batch` queries are pending) for others, then scores every pending query,
/// grouped by (program, untransformed schedule) text in arrival order, one Scorer::score_group
/// per group, and hands each thread its own answer; queries arriving meanwhile form the next
/// batch. Answers are those of Scorer::score for the query alone up to float rounding
/// (Scorer::score_group). Thread-safe.
class QueryBatcher {
 public:
  /// `wait` > 0: how long the first query of a batch waits for others.
  QueryBatcher(Scorer& scorer, std::chrono::microseconds wait, size_t max_batch = 8);

  /// Scorer::score(program_json, untransformed_json, {schedule_json})[0], scored with the other
  /// threads' queries of the same batch. Throws what Scorer::score throws for this query's
  /// program (the other groups of the batch are not affected).
  ScheduleScore score(const std::string& program_json, const std::string& untransformed_json,
                      const std::string& schedule_json);

  /// Batches scored and queries in them so far.
  int64_t batches() const;
  int64_t queries() const;

 private:
  struct Pending {
    const std::string* program;
    const std::string* untransformed;
    const std::string* schedule;
    ScheduleScore out;
    std::exception_ptr error;
    bool done = false;
  };
  /// Scores `batch` (no lock held): its answers or errors into each Pending.
  void run(const std::vector<Pending*>& batch);

  Scorer& scorer_;
  std::chrono::microseconds wait_;
  size_t max_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> queue_;  // waiting for the next batch
  bool gathering_ = false;       // a thread is gathering or scoring a batch
  int64_t batches_ = 0, queries_ = 0;
};

}  // namespace lcm::serve
