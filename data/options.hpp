// The option types of data/ that the configuration binds keys to (config/keys.cpp): feature
// switches, schedule forms, batching and fold selection. Declarations only, so that config/ sees
// what data/ can be asked to do without seeing how; the member functions of FoldSelection are
// defined in dataset.cpp.
#pragma once
#include <cstdint>
#include <string>

namespace lcm::data {

/// Where a schedule's transformations were read from (data.schedule_source).
enum class ScheduleSource {
  Auto,        // per-computation dicts when present, else the typed list, else sched_str
  Structured,  // per-computation dicts {parallelized_dim, tiling, unrolling_factor, ...}
  Typed,       // schedule-level transformations_list of {type, loop_levels, parameters}
  SchedStr,    // the sched_str text
};

/// What to do when two forms of one schedule disagree (data.schedule_check).
enum class ScheduleCheck {
  Report,  // count and name the disagreements, keep the schedule from the chosen source
  Skip,    // a disagreement drops the schedule (schedule/schedule_forms_disagree)
  Off,     // no cross-check
};

/// How the loop levels of typed transformations_list entries count (data.loop_level_base): Auto
/// is decided per file from the data (detect_loop_level_base in reader.hpp).
enum class LoopLevelBase { Auto, Zero, One };

/// Switches for model-spec §11 quirks (recommended defaults = the faithful behaviour).
struct FeatureOptions {
  enum class LoopZeroing { LastComp, RemovedByFusion, Off };
  enum class ShiftMatch { Prefix, Exact };
  LoopZeroing loop_zeroing = LoopZeroing::LastComp;  // Q2 (data.loop_zeroing)
  ShiftMatch shift_match = ShiftMatch::Prefix;       // Q3 (data.shift_match)
  bool keep_unlabeled = false;  // keep schedules without a label (prediction); label = NaN
};

/// How a split's datapoints are cut into batches (data.batching).
enum class BatchingMode {
  /// Batches of any mix of footprints, each program's schedules kept together (the default): every
  /// batch is full but the last, and a program with more schedules than batch_size fills whole
  /// batches of its own (build_batches).
  Mixed,
  /// One footprint group per batch (docs/model-spec.md §5.5; the faithful reference behaviour).
  PerFootprint,
};

/// How datapoints are batched (data.batch_size, data.seed, data.min_functions_per_footprint,
/// data.batching).
struct BatchingOptions {
  int batch_size = 512;                 // datapoints per batch (≥ 1)
  uint64_t seed = 42;                   // seeds the shuffles
  int min_functions_per_footprint = 0;  // §3.11 group rule; 0 keeps every group
  BatchingMode mode = BatchingMode::PerFootprint;
  /// Mixed batching: a program's schedules go into a batch in pieces of at most this many (0 =
  /// whole programs), so that a batch holds many programs (data.program_piece).
  int program_piece = 32;
  std::string source_file;  // names the file in footprint skip events (messages only)
};

/// Which programs of a file a split keeps when its programs are cut into folds (cross-fitted
/// calibration, training.calibration_folds): every program belongs to fold program_fold(name,
/// count) (dataset.hpp); `only` keeps the programs of fold `fold` (the held-out set a fold model
/// predicts), otherwise the others (the fold model's training set). count 0: every program.
struct FoldSelection {
  int count = 0;      // K folds; 0 = no selection
  int fold = 0;       // 0 .. K-1
  bool only = false;  // keep fold `fold` (true) or every other fold (false)

  bool active() const { return count > 0; }
  /// True when a program named `name` is kept.
  bool keeps(const std::string& name) const;
  /// "fold 2 of 3 only" / "without fold 2 of 3" (1-based, for people and cache keys).
  std::string text() const;
};

}  // namespace lcm::data
