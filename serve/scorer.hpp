// The cost model as an autoscheduler's search asks it (lcm-serve, liblcm): a checkpoint loaded
// once, a program given as its annotation JSON and candidate schedules as schedule JSON objects
// (the per-computation form of the dataset records, docs/data-format.md), predicted speedups
// back. Each distinct program is parsed and featurized once, and its schedule-independent part
// of the forward (expression LSTM, static first-layer rows) computed once: a query then costs
// its schedules' features and the schedule-dependent forward only.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"
#include "engine/tape.hpp"
#include "model/adaptation.hpp"
#include "serve/finetune.hpp"
#include "serve/request_memory.hpp"
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
  bool untransformed = false;  // the schedule is the program's untransformed one
  bool ok() const { return reason.empty(); }
};

/// What Scorer::observe learned from one measured schedule.
struct Observed {
  double measured_speedup = 0;   // untransformed time / min(execution_times), floored at 0.01
  double predicted_speedup = 0;  // the model's answer for it, before any correction
  double corrected_speedup = 0;  // its answer after this observation
  model::Correction correction;  // the program's correction after this observation
  bool untransformed = false;    // the schedule was the untransformed one (its time is kept)
};

/// ScorerOptions::memo_bytes by default: 2 MiB per program and member (≈ 2,000 distinct loop-tree
/// nodes and computation rows of 180 floats with their keys).
constexpr size_t kDefaultMemoBytes = size_t(2) << 20;

/// How a Scorer bounds its memory (docs/tools.md "lcm-serve", § Memory).
struct ScorerOptions {
  size_t cache_entries = 64;  // programs kept parsed and featurized (≥ 1)
  /// The server's memory while it scores (bytes): the model, the process's own memory
  /// (kProcessBytes), the program cache and the requests being scored, each request's by its
  /// estimate (RequestMemory) before it allocates. A request's schedules are scored in chunks
  /// whose forwards fit; a request that does not fit with one schedule per forward (or whose
  /// program alone does not) is refused with QueryError "request_too_large". The cache holds at
  /// most half of what the model leaves, and is evicted (least recently used first) to make
  /// room for a request.
  size_t max_request_bytes = kDefaultMaxRequestBytes;
  /// What observe() learns (docs/tools.md "Learning during search"). The fine-tuned weights
  /// (Learning::Finetune, Both) are outside the memory bound above: at most
  /// finetune.max_programs copies of the model's weights (4 bytes per parameter per member:
  /// 8.4 MB for the release sizes), their replay buffers (finetune.buffer schedule texts each),
  /// and while the worker trains one program, a copy with gradients and AdamW moments (4 more
  /// times the weights) and its tape.
  Learning learning = Learning::Correction;
  FinetuneOptions finetune;
  /// Bytes of each cached program's memo per ensemble member (model/forward_memo.hpp; docs/tools.md
  /// "lcm-serve", § Memoised sub-results): the computation rows, loop-tree nodes and outputs
  /// computed for its earlier queries, reused when a query's exact inputs recur. Counted in each
  /// cached program's bytes (the cache's byte bound); a memo that passes it is emptied. 0: no memo
  /// (every query runs the whole schedule-dependent forward). The answers are the same either way
  /// (tests/test_serve_memo.cpp).
  size_t memo_bytes = kDefaultMemoBytes;
  /// Serve with BF16 weight copies (lcm-serve --weights bf16; train::Predictor::use_bf16_weights):
  /// the weight matrices rounded to BF16, batch-1 products read 2 bytes per weight, FP32 sums.
  /// The answers differ from FP32's by the rounding (docs/tools.md "lcm-serve"). CPU only.
  bool bf16_weights = false;
};

/// The process's own memory counted in every bound besides the model: code, libraries, thread
/// stacks, the request stream's line buffers of ordinary requests, the engine arena kept between
/// requests (≤ kArenaKeepBytes).
constexpr size_t kProcessBytes = size_t(96) << 20;
/// The engine arena's memory kept for the next request; a forward that grew it beyond this gives
/// it back.
constexpr size_t kArenaKeepBytes = size_t(32) << 20;

/// Counts of the program cache.
struct CacheStats {
  int64_t hits = 0;       // queries whose program was cached
  int64_t misses = 0;     // queries that parsed and featurized their program
  int64_t evictions = 0;  // least recently used programs dropped for a new one
  int64_t entries = 0;    // programs held now (≤ capacity)
  int64_t capacity = 0;
  size_t bytes = 0;  // estimated bytes of the programs held now (≤ capacity_bytes)
  size_t capacity_bytes = 0;
  int64_t chunked = 0;  // requests whose schedules were scored in more than one forward
  int64_t refused = 0;  // requests refused as request_too_large
  // The memos of the programs held now (ScorerOptions::memo_bytes), summed over programs and
  // members: loop-tree nodes found / computed, outputs found / computed, times a full memo was
  // emptied.
  int64_t memo_node_hits = 0, memo_node_misses = 0, memo_output_hits = 0, memo_output_misses = 0,
          memo_clears = 0;
};

/// Counts of the fine-tuning (Learning::Finetune, Both).
struct LearningStats {
  int64_t queued = 0;     // fine-tuning jobs queued by observe()
  int64_t completed = 0;  // jobs whose weights were published
  int64_t discarded = 0;  // jobs whose program was reset or dropped before they finished
  int64_t failed = 0;     // jobs that threw (a non-finite loss): the weights stay as they were
  int64_t programs = 0;   // programs with learning state now (≤ finetune.max_programs)
  int64_t adapted = 0;    // of those, programs with published adapted weights
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
  /// As above with the memory bound of `o` (max_request_bytes must leave 16 MiB beside the model
  /// and kProcessBytes: config::ConfigError otherwise).
  Scorer(const config::Config& c, const ScorerOptions& o);
  ~Scorer();

  /// Predicted speedups of `schedules` (each the JSON text of one schedule object) of the program
  /// `program_json` (a program_annotation object: iterators, computations, buffers, ...; the
  /// autoscheduler's program line) whose untransformed schedule is `untransformed_json` (its
  /// tree_structure gives the loop tree the model walks; extra fields such as execution_times
  /// are ignored). An empty `untransformed_json` means "{}": the tree of the iterators'
  /// parent/child links. One level-batched forward for all schedules. A schedule that cannot be
  /// scored gets kErrorSpeedup and its reason; the others are still scored. The result follows
  /// the order of `schedules` and is the same, up to float rounding of the batch products, as
  /// lcm-predict's prediction for those schedules in a record of that program. Schedules whose
  /// one forward would pass the memory bound are scored in consecutive chunks (the same answers:
  /// each schedule's forward does not depend on the others of its batch). Throws
  /// QueryError when the program itself cannot be scored (malformed JSON, a program the
  /// feature rules drop: depth_gt_5, accesses_gt_15, bad_tree, ...; "request_too_large" when the
  /// program, or one schedule's forward beside it, does not fit the memory bound),
  /// std::runtime_error when a prediction is not finite (broken weights). A program with
  /// fine-tuned weights (Learning::Finetune, Both) is scored with the latest weights its
  /// fine-tuning completed (the whole forward: the cached per-program rows belong to the
  /// checkpoint's weights); the query never waits for a running fine-tuning (it takes the
  /// published weights under a lock held only to copy a pointer). The program's correction
  /// learned by observe() is applied to each answer. A program that observe() has not adapted
  /// gets the model's answers, bit for bit.
  std::vector<ScheduleScore> score(const std::string& program_json,
                                   const std::string& untransformed_json,
                                   const std::vector<std::string>& schedules);
  /// score() of one-schedule queries of one program that arrived together (lcm-serve's batching
  /// of concurrent connections, QueryBatcher): as many of them per forward as keep every product
  /// on the one-row kernels (CostModel::memo_matches_forward with that many datapoints), one at a
  /// time (with the memo) where two would not: a larger product would run the packed GEMM
  /// without the memo, slower than the queries alone. The answers are those of the queries
  /// alone up to float rounding (a forward of several datapoints rounds some element-wise steps
  /// differently; tests/test_serve_batch.cpp). Throws as score().
  std::vector<ScheduleScore> score_group(const std::string& program_json,
                                         const std::string& untransformed_json,
                                         const std::vector<std::string>& schedules);
  /// score() without the program's correction (the model's own answers, with the program's
  /// fine-tuned weights when it has some).
  std::vector<ScheduleScore> score_uncorrected(const std::string& program_json,
                                               const std::string& untransformed_json,
                                               const std::vector<std::string>& schedules);

  /// Learning during search (docs/tools.md "Learning during search"): the measured
  /// `execution_times_ms` (each > 0 and finite) of the schedule `schedule_json` of the program
  /// are compared with the model's answer for it, and the program's correction
  /// (model::ProgramCorrections, keyed by the program annotation's text) is refitted; score()
  /// applies it to every later answer for that program, and to no other program's. The measured
  /// speedup is data::speedup_label(untransformed time, min(times)): the untransformed time is
  /// `untransformed_time_ms` when it is finite, else the time of an earlier observation of the
  /// program's untransformed schedule (observing the untransformed schedule records its time).
  /// Throws QueryError: "bad_execution_times" (none, or one ≤ 0 or not finite),
  /// "bad_untransformed_time" (given, but ≤ 0 or infinite), "no_untransformed_time" (neither
  /// given nor observed), the schedule's reason when it cannot be scored (cannot be applied to
  /// the program), and score()'s errors for the program. Bounded time: one forward of one
  /// schedule and a closed-form fit over at most ProgramCorrections::kMaxObservations points.
  Observed observe(const std::string& program_json, const std::string& untransformed_json,
                   const std::string& schedule_json, const std::vector<double>& execution_times_ms,
                   double untransformed_time_ms);
  /// Blocks until every fine-tuning job queued so far has finished (published, discarded or
  /// failed): with it an asynchronous Scorer gives the synchronous one's results.
  void wait_for_learning();
  /// The learning variant and fine-tuning options in force.
  Learning learning() const { return learning_; }
  const FinetuneOptions& finetune_options() const { return ft_; }
  LearningStats learning_stats() const;
  /// Tests only: `hook` runs in the worker after a job's steps and before its weights are
  /// published (a test blocks in it to check that queries do not wait). Empty: none.
  void set_learning_hook_for_test(std::function<void()> hook);
  /// Forgets what was observed of `program_json` (false: nothing was), or of every program
  /// (corrections, replay buffers and fine-tuned weights; a queued fine-tuning of it is
  /// discarded).
  bool reset_observations(const std::string& program_json);
  void reset_observations();
  /// The adaptation state as text (model::ProgramCorrections::to_json; "model" is model_id()).
  std::string adaptation_json() const;
  /// Replaces the adaptation state with `text`; throws QueryError "bad_adaptation" (state
  /// unchanged) when it is not one, or was learned with another checkpoint.
  void load_adaptation_json(const std::string& text);
  /// adaptation_json() written atomically to `path` (temp + rename); std::runtime_error naming
  /// the path when it cannot be written.
  void save_adaptation(const std::string& path) const;
  /// load_adaptation_json of the file `path`; QueryError "bad_adaptation" when it cannot be read.
  void load_adaptation(const std::string& path);
  /// The checkpoint's identity in an adaptation file: FNV-1a 64 of every member's weights.
  const std::string& model_id() const { return model_id_; }

  CacheStats cache_stats() const;
  const train::Predictor& predictor() const { return predictor_; }
  /// The estimates this scorer checks requests with.
  const RequestMemory& memory_model() const { return memory_; }
  const MemoryGate& memory_gate() const { return gate_; }
  /// Most schedules of `program_json` that one forward takes within the bound (0: none fits);
  /// score() splits a request into forwards of at most this many. Throws as score().
  int64_t max_schedules_per_forward(const std::string& program_json);
  /// Reserves `bytes` for a request's own text (the protocol's line and its parse) until the
  /// Reservation ends; throws QueryError "request_too_large" naming `what` when they cannot fit.
  Reservation reserve(size_t bytes, const std::string& what);
  /// The engine arena's peak bytes since the scorer was made (calibration, tests).
  size_t arena_peak_bytes() const { return std::max(peak_seen_, tape_->peak_bytes()); }
  /// Gives the engine arena's memory back now (a new tape, whose peak starts at 0).
  void release_arena();

 private:
  struct Entry;
  /// The cached program for (program_json, untransformed_json), parsed and featurized on a miss.
  std::shared_ptr<Entry> program(const std::string& program_json,
                                 const std::string& untransformed_json);
  std::shared_ptr<Entry> build(const std::string& program_json,
                               const std::string& untransformed_json);
  /// Scores schedules [begin, end) of `schedules` into `out` in one forward, with `adapted`'s
  /// weights when not nullptr (the whole forward), else the checkpoint's over the cached rows.
  void score_chunk(Entry& e, const std::vector<std::string>& schedules, size_t begin, size_t end,
                   std::vector<ScheduleScore>& out, const AdaptedModels* adapted);
  /// The features of schedules [begin, end) of `schedules` that can be scored as one batch of
  /// e's program (out[i] gets the reason of one that cannot); `scored` their indices and
  /// `identity` whether each is the untransformed schedule. Takes e.mu.
  data::BatchTensors featurize(Entry& e, const std::vector<std::string>& schedules, size_t begin,
                               size_t end, std::vector<ScheduleScore>& out,
                               std::vector<size_t>& scored, std::vector<bool>& identity);
  /// One program's fine-tuning state (learn_mu_ guards it).
  struct Learned {
    std::deque<std::pair<std::string, double>> buffer;  // schedule JSON, measured speedup
    std::shared_ptr<const AdaptedModels> adapted;       // latest published weights
    int64_t observations = 0;
    uint64_t serial = 0;    // a new one after every reset: a job of an older one is discarded
    uint64_t last_use = 0;  // LRU clock
  };
  /// A fine-tuning job: the replay buffer as one batch when observe() queued it.
  struct Job {
    std::string key;
    uint64_t serial = 0;
    int64_t observations = 0;
    std::shared_ptr<Entry> entry;  // keeps the batch's trees alive
    FinetuneBatch batch;
  };
  /// The published adapted weights of program `key` (nullptr: none); marks it used.
  std::shared_ptr<const AdaptedModels> adapted_weights(const std::string& key);
  /// Appends the observation to the program's buffer and queues a job for it (finetune).
  void queue_finetune(const std::shared_ptr<Entry>& e, const std::string& key,
                      const std::string& schedule_json, double measured_speedup);
  void worker_loop();
  void stop_worker();
  /// Drops the least recently used cached program no request is using; false when none is left.
  bool evict_one();
  /// Removes the cached program at `it` from the index, the byte count and the LRU list, counted
  /// as an eviction; returns the next position. cache_mu_ held.
  std::list<std::shared_ptr<Entry>>::iterator evict(std::list<std::shared_ptr<Entry>>::iterator it);
  size_t cached_bytes() const;
  /// Gives back the engine arena's memory beyond kArenaKeepBytes (a new tape); model_mu_ held.
  void trim_tape();

  train::Predictor predictor_;
  data::ReadOptions read_;
  data::FeatureOptions features_;
  size_t capacity_;
  RequestMemory memory_;
  MemoryGate gate_;
  size_t cache_capacity_bytes_ = 0;
  size_t memo_bytes_ = 0;  // ScorerOptions::memo_bytes (0 on a CUDA tape: forward_memo is CPU only)
  mutable std::mutex cache_mu_;
  std::list<std::shared_ptr<Entry>> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::vector<std::list<std::shared_ptr<Entry>>::iterator>> index_;
  CacheStats stats_;
  mutable std::mutex model_mu_;  // one forward at a time: guards tape_ (and the CUDA stream)
  std::unique_ptr<lcm::Tape<float>> tape_;
  size_t peak_seen_ = 0;  // the arena's peak of tapes given back since release_arena()
  std::vector<std::vector<float>> sched_weight_;  // [member]: CostModel::schedule_weight() (CPU)
  model::ProgramCorrections corrections_;         // learned during search (observe)
  std::string model_id_;
  // Fine-tuning (Learning::Finetune, Both): per-program state, the job queue and its worker.
  Learning learning_ = Learning::Correction;
  FinetuneOptions ft_;
  mutable std::mutex learn_mu_;
  std::condition_variable learn_cv_, idle_cv_;
  std::map<std::string, Learned> learned_;
  std::deque<Job> jobs_;
  bool busy_ = false, stop_ = false;
  uint64_t learn_clock_ = 0, next_serial_ = 1;
  LearningStats learn_stats_;
  std::function<void()> learn_hook_;
  std::thread worker_;  // started by the first queued job
};

}  // namespace lcm::serve
