// "Prepare a split": read a LOOPerSet file with one reader thread and N feature workers (output
// identical for any N), group and batch it, and keep it in the on-disk cache — or reuse the cache
// when it is still valid. Shared by lcm-prepare and lcm-train.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/cache.hpp"
#include "data/dataset.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"

namespace lcm::data {

/// Everything that decides how a split is prepared.
struct PrepareOptions {
  std::string split = "train";   // names the cache file <cache_dir>/<split>.lcmb
  std::string source;            // LOOPerSet file (.jsonl, .jsonl.gz, legacy .json)
  std::string cache_dir;         // "" = no cache (always rebuild, write nothing)
  double cache_lock_wait_s = 0;  // seconds to wait for another builder of this cache (0: fail)
  FeatureOptions features;
  ReadOptions read;  // schedule forms, cross-check, machine (read.loop_level_base is set from
                     // loop_level_base below, per file)
  LoopLevelBase loop_level_base = LoopLevelBase::Auto;  // data.loop_level_base
  BatchingOptions batching;
  int64_t max_programs = 0;    // read only the first N records; 0 = all
  int nb_workers = 0;          // feature threads; 0 = hardware concurrency
  bool strict = false;         // first non-policy skip is a DataError (see strict_exempt)
  bool progress = false;       // progress lines on stderr (every 0.5 s on a TTY, else every 5 s)
  int print_skips = 10;        // skip events printed to stderr (all are counted)
  bool compact_rows = false;   // programs come back compact (ProgramFeatures::drop_rows):
                               // featurised ones at once, a cache read without expanding rows
  bool keep_sched_str = true;  // false: programs come back without their sched_str (not read
                               // from the cache; freed after a first build has written it)
  /// Bytes of the records read and not yet taken in by the calling thread, across the reader and
  /// every worker (data.max_bytes_in_flight; run_ordered's InFlightLimit::bytes): a record
  /// heavier than this is read alone. 0 = no byte bound (only the 4 × workers + 8 records).
  int64_t max_bytes_in_flight = int64_t(256) << 20;
  /// lcm-prepare: the programs are written to the cache as they are featurised (a ProgramSpill
  /// next to the cache, then write_cache_streamed) instead of being held, and a cache that is
  /// reused is read program by program: the PreparedSplit comes back without programs (its
  /// groups, batches, stats and programs_kept / schedules_kept are there). Memory then grows by
  /// about 60 bytes a program and 8–16 a kept schedule (the batch table) instead of the
  /// programs' features. With the cache off, nothing of the programs is kept.
  bool stream_to_cache = false;
  /// Called with the name of each kept program, in order (streamed or not, built or reused). A
  /// reused cache that proves unreadable after its checksum matched is rebuilt: the programs
  /// visited before that are then named twice (make it idempotent).
  std::function<void(const std::string&)> on_kept_program;
  /// With stream_to_cache and a cache that is reused: called with each kept program as the cache
  /// is read (compact: no rows, no sched_str; with its static columns and expressions), in order,
  /// before it is freed, so that a caller keeps what it needs of each within its own memory bound
  /// (lcm-pretrain). A reused cache that proves unreadable after its checksum matched is read
  /// again or rebuilt: the programs visited before that are then visited again from the first.
  std::function<void(const ProgramFeatures&)> on_kept_features;
  /// Programs of the other folds are not featurised and are counted as skips
  /// "fold/other_fold" (a policy, like the footprint rule: never a strict-mode error).
  FoldSelection folds;
};

/// A prepared split and how it was obtained.
struct PreparedSplit {
  Dataset dataset;
  SplitCounts counts;
  SourceInfo source;
  std::string cache_path;      // "" when the cache is off
  bool from_cache = false;     // true when the dataset was loaded from the cache
  std::string cache_note;      // why the cache was rebuilt ("no cache file", "config changed: ...")
  int64_t cache_bytes = 0;     // size of the cache file (0 when off)
  int64_t programs_kept = 0;   // kept programs (dataset.programs.size() unless streamed)
  int64_t schedules_kept = 0;  // their schedules (dataset.n_datapoints() unless streamed)
  bool streamed = false;       // PrepareOptions::stream_to_cache: dataset holds no programs
  double seconds = 0;          // wall time of this prepare_split call
};

/// The cache key of a prepare (source identity + every option that changes the content).
/// Throws DataError when the source does not exist.
CacheKey prepare_cache_key(const PrepareOptions& opt);

/// Reads and featurises opt.source (docs/model-spec.md §1–§4, drops of §3.11 counted in `log`) with
/// one reader thread and opt.nb_workers workers; programs come back in file order whatever the
/// thread count. Fills `counts` (records, programs, schedules read/kept; records_read includes the
/// records the reader met but could not deliver, e.g. the partial last record of a corrupt gzip,
/// so records_read = programs_read + records skipped; schedules_read includes the schedules_list
/// entries of records the reader skipped when still countable, counted in
/// skipped_records_counted; a one-schedule-per-line group, RawRecord::schedule_line, counts one
/// schedule per line, also for the lines its merge dropped). A program is identified by its name: a
/// record whose name was already read is skipped whole as program/duplicate_program (the first
/// record wins, kept or not; its own skips are not replayed). Throws DataError for an
/// unreadable file or, with opt.strict, the first skip that is not strict_exempt(); throws
/// std::runtime_error "cannot start N worker threads: ..." when threads cannot be created.
std::vector<ProgramFeatures> read_features(const PrepareOptions& opt, SkipLog& log,
                                           SplitCounts& counts);

/// read_features handing each featurised program to `sink` in file order instead of returning
/// them all. The duplicate_program rule holds the names read as 128-bit hashes (NameSet, 24
/// bytes a name; two names share a hash with probability about 2^-128). Memory besides what
/// `sink` keeps: the records and results in flight (PrepareOptions::max_bytes_in_flight) and
/// 32–64 bytes a program read. Throws as read_features.
void read_features_to(const PrepareOptions& opt, SkipLog& log, SplitCounts& counts,
                      const std::function<void(ProgramFeatures&&)>& sink);

/// The skip of read_features (and lcm-inspect) for a program of record `rec` that featurize
/// threw DataError `what` on: level "program", reason "feature_error", the message in detail.
SkipEvent feature_error_skip(const RawRecord& rec, const std::string& program,
                             const std::string& what);
/// The skip of the record at file:line that repeats the name `program` first read at line
/// `first_line`: level "program", reason "duplicate_program".
SkipEvent duplicate_program_skip(const std::string& file, int64_t line, const std::string& program,
                                 int64_t first_line);

/// The weight of a record in the byte bound of the pipelines (its JSON text and the further
/// lines of a one-schedule-per-line group).
int64_t record_bytes(const RawRecord& r);

/// Prepares one split: loads <cache_dir>/<split>.lcmb when it matches prepare_cache_key(opt),
/// else reads + featurises + batches (build_batches) and writes the cache atomically.
/// data.strict is not in the key: with opt.strict a matching cache whose counts hold a
/// non-exempt skip throws DataError, as the rebuild would.
/// Throws DataError (bad source, strict skip) or std::runtime_error (cache write failure, or
/// "<source>: no program kept (N records read, see skips above)" when nothing is kept, or
/// "<source>: no program record in the file (it is empty or holds only blank lines)": then no
/// cache is written).
PreparedSplit prepare_split(const PrepareOptions& opt);

/// The lines of a summary that name the schedule forms read (e.g. "  forms      schedules read
/// from: 41,970 structured" and "  cross-check against sched_str: 41,310 agree, 660 disagree
/// (transformation 660; kept from the chosen form)"), and how typed loop levels were counted;
/// "" when `c` holds no form counts (a cache of an older build).
std::string schedule_forms_summary(const SplitCounts& c, const ReadOptions& opt);

/// The human summary of a prepared split (multi-line): records read / parsed / skipped, programs
/// (one per record) and schedules read / kept / dropped — read = kept + dropped on each line,
/// split into "by reader/feature rules" and "in small footprint groups"; the schedules of records
/// the reader skipped are read and dropped when countable, else the schedules line ends "; the
/// schedules of N unreadable record(s) are not counted" — the reasons, footprint groups, batches,
/// time, cache path and size.
std::string prepare_summary(const PreparedSplit& s, const PrepareOptions& opt);

/// One line (no newline) when the small-footprint rule (docs/model-spec.md §3.11) dropped more
/// than a quarter of the featurised programs of `s`, naming data.min_functions_per_footprint=0 as
/// the way to keep them; "" otherwise. Printed by prepare_summary and by lcm-train/lcm-pretrain.
std::string footprint_drop_note(const PreparedSplit& s, const PrepareOptions& opt);

/// `b` bytes for people: "1.50 GiB", "2.0 MiB", "3.0 KiB" or "12 B" (binary units; progress lines
/// and summaries of lcm-prepare and lcm-inspect).
std::string human_bytes(int64_t b);

/// Stable text names of the §11 switches ("last_comp", "prefix", ...), as in the config.
std::string loop_zeroing_name(FeatureOptions::LoopZeroing z);
std::string shift_match_name(FeatureOptions::ShiftMatch m);

}  // namespace lcm::data
