// The cost model as an autoscheduler's search asks it (lcm-serve, liblcm): a checkpoint loaded
// once, a program given as its annotation JSON and candidate schedules as schedule JSON objects
// (the per-computation form of the dataset records, docs/data-format.md), predicted speedups
// back. Each distinct program is parsed and featurized once, and its schedule-independent part
// of the forward (expression LSTM, static first-layer rows) computed once: a query then costs
// its schedules' features and the schedule-dependent forward only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"
#include "engine/tape.hpp"
#include "train/predictor.hpp"

namespace lcm::serve {

/// The speedup reported for a query or schedule that cannot be scored (malformed JSON, a program
/// or schedule the feature rules reject): 0, which ranks strictly below every real answer of
/// every head (model::reported_speedup answers ≥ e^−50 > 0, model/speedup.hpp) and is the value
/// the Python original's callers read once its model process has died.
constexpr double kErrorSpeedup = 0.0;

/// A query whose program cannot be scored at all. `reason` is a featurize()/parse_program()
/// reason ("malformed_json", "depth_gt_5", "accesses_gt_15", "bad_field", ...), what() the
/// one-line message with its detail.
struct QueryError : std::runtime_error {
  QueryError(std::string reason, const std::string& message)
      : std::runtime_error(message), reason(std::move(reason)) {}
  std::string reason;
};

/// One schedule's answer: its predicted speedup (×, over the untransformed program), or
/// kErrorSpeedup with the reason and detail of why it could not be scored.
struct ScheduleScore {
  double speedup = kErrorSpeedup;
  std::string reason;  // "" when scored; else a schedule reason of featurize()/parse_schedule_json
  std::string detail;
  bool ok() const { return reason.empty(); }
};

/// Counts of the program cache.
struct CacheStats {
  int64_t hits = 0;       // queries whose program was cached
  int64_t misses = 0;     // queries that parsed and featurized their program
  int64_t evictions = 0;  // least recently used programs dropped for a new one
  int64_t entries = 0;    // programs held now (≤ capacity)
  int64_t capacity = 0;
};

/// A loaded checkpoint plus an LRU cache of programs. Thread-safe: concurrent score() calls share
/// the cache and the model (the forward itself runs one call at a time). An ensemble checkpoint
/// (train/ensemble.hpp) is served as Predictor predicts it: the mean of its K members' scores, then
/// the calibration map; each cached program holds every member's per-program rows, and a query
/// costs K schedule-dependent forwards.
class Scorer {
 public:
  /// Loads eval.weights_path as train::Predictor does (training.device, training.threads, the
  /// checkpoint's sizes and input scaling), with a program cache of `cache_entries` programs
  /// (≥ 1). Throws as Predictor (ConfigError, std::runtime_error) and std::invalid_argument for
  /// cache_entries 0.
  explicit Scorer(const config::Config& c, size_t cache_entries = 64);
  ~Scorer();

  /// Predicted speedups of `schedules` (each the JSON text of one schedule object) of the program
  /// `program_json` (a program_annotation object: iterators, computations, buffers, ...; the
  /// autoscheduler's program line) whose untransformed schedule is `untransformed_json` (its
  /// tree_structure gives the loop tree the model walks; extra fields such as execution_times
  /// are ignored). An empty `untransformed_json` means "{}": the tree of the iterators'
  /// parent/child links. One level-batched forward for all schedules. A schedule that cannot be
  /// scored gets kErrorSpeedup and its reason; the others are still scored. The result follows
  /// the order of `schedules` and is the same, up to float rounding of the batch products, as
  /// lcm-predict's prediction for those schedules in a record of that program. Throws
  /// QueryError when the program itself cannot be scored (malformed JSON, a program the
  /// feature rules drop: depth_gt_5, accesses_gt_15, bad_tree, ...), std::runtime_error when a
  /// prediction is not finite (broken weights).
  std::vector<ScheduleScore> score(const std::string& program_json,
                                   const std::string& untransformed_json,
                                   const std::vector<std::string>& schedules);

  CacheStats cache_stats() const;
  const train::Predictor& predictor() const { return predictor_; }

 private:
  struct Entry;
  /// The cached program for (program_json, untransformed_json), parsed and featurized on a miss.
  std::shared_ptr<Entry> program(const std::string& program_json,
                                 const std::string& untransformed_json);
  std::shared_ptr<Entry> build(const std::string& program_json,
                               const std::string& untransformed_json);

  train::Predictor predictor_;
  data::ReadOptions read_;
  data::FeatureOptions features_;
  size_t capacity_;
  mutable std::mutex cache_mu_;
  std::list<std::shared_ptr<Entry>> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::vector<std::list<std::shared_ptr<Entry>>::iterator>> index_;
  CacheStats stats_;
  std::mutex model_mu_;  // one forward at a time: guards tape_ (and the CUDA stream)
  lcm::Tape<float> tape_;
  std::vector<std::vector<float>> sched_weight_;  // [member]: CostModel::schedule_weight() (CPU)
};

}  // namespace lcm::serve
