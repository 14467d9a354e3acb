// The on-disk cache of a prepared split (<experiment.base_path>/cache/<split>.lcmb): a versioned,
// checksummed binary file holding the featurised programs (static parts once, per schedule only
// its compact descriptor, label and times), the batches and the prepare counts.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.hpp"
#include "util/run_lock.hpp"

namespace lcm::data {

/// Version of the file layout written by write_cache (bump on any change to cache.cpp's layout).
/// 2: SplitCounts::skipped_records_counted. 4: per program the ProgramStatic and per schedule
/// its descriptor (features.hpp ScheduleDescriptor); also a batch's group may be -1 (mixed-
/// footprint batches, data.batching=mixed). 5: the compact layout (per schedule only its
/// descriptor, label, times and index; static parts and sched_str deflated; read mapped).
/// 6: both of those in one layout. 7: per program the untransformed schedule's descriptor.
constexpr uint32_t kCacheFormatVersion = 7;
/// Version of the feature semantics (bump whenever features.cpp changes the meaning or order of
/// any column of the computation, loop or expression vectors, or which programs/schedules are kept,
/// so that old caches are rebuilt). 3: the drop rules bad_tile_factor, bad_unroll_factor,
/// unknown_expr_type, empty_iteration_domain and duplicate_program. 4: the drop rule
/// unread_transformation_fields (earlier generations' interchange_dims, skewing, ...).
constexpr uint32_t kFeatureLayoutVersion = 4;
/// The first 8 bytes of a cache file.
constexpr char kCacheMagic[9] = "LCMCACHE";

/// What reading and featurising one source file counted (what the summary prints).
struct SplitCounts {
  int64_t records_read = 0;             // records (lines) met: delivered + skipped by the reader
  int64_t programs_read = 0;            // records parsed into a Program
  int64_t programs_featurized = 0;      // programs kept by featurize (before the footprint rule)
  int64_t schedules_read = 0;           // schedules_list entries of parsed programs, and of the
                                        // records the reader skipped when still countable
  int64_t skipped_records_counted = 0;  // records skipped by the reader (e.g. unknown_expr_type)
                                        // whose schedules_list could be counted (in schedules_read)
  int64_t schedules_featurized = 0;     // schedules kept by featurize (before the footprint rule)
  std::map<std::string, int64_t> skips;  // "level/reason" → count (SkipLog::counts())
  std::map<std::string, int64_t> forms;  // schedule forms read and cross-checked, summed over the
                                         // programs read (Program::form_counts)
  std::string loop_level_base;  // how typed loop levels were counted ("" = no typed list read)
  double build_seconds = 0;     // wall time of the build that wrote the cache
};

/// Identity of a source file: absolute path, size (bytes) and modification time (ns since epoch).
struct SourceInfo {
  std::string path;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};
/// Stats `path`. Throws DataError naming the path when it does not exist, or is a directory or
/// not a regular file (require_regular_data_file).
SourceInfo source_info(const std::string& path);

/// What a cache must match to be reused: named values, compared one by one. Conventionally
/// "source.path", "source.size", "source.mtime_ns" and the config keys that change the content
/// ("data.batch_size", "data.seed", ...). Order is kept.
struct CacheKey {
  std::vector<std::pair<std::string, std::string>> values;
  /// Appends one value.
  void add(const std::string& key, const std::string& value) { values.emplace_back(key, value); }
};

/// CacheLoad::reason when the cache file does not exist (a first build, not a rebuild).
constexpr const char* kNoCacheFile = "no cache file";

/// The result of trying to load a cache.
struct CacheLoad {
  bool ok = false;
  /// Why it was not loaded (empty when ok): "no cache file", "cache stale: source mtime changed",
  /// "config changed: data.batch_size 512 → 256", "format version 1 → 2", "truncated", ...
  std::string reason;
  SplitCounts counts;
  Dataset dataset;        // without programs when read_cache was given a visitor
  int64_t programs = 0;   // programs in the cache (kept or visited)
  int64_t schedules = 0;  // their schedules (datapoints)
};

/// Writes the cache file atomically (streamed to lcm::temp_path_for(path) =
/// "<path>.tmp.<host>.<pid>", fsync, rename; parent folders created; the temp file is removed on
/// failure), holding the lock "<path>.lock" (lcm::RunLock) while it writes. Layout
/// (little-endian):
///   [0,8) magic "LCMCACHE" · u32 format version · u32 feature-layout version · u64 key bytes ·
///   u64 body bytes · u32 CRC-32 of key · u32 CRC-32 of body · key · body
/// key = u32 n, n × (string name, string value); body = counts, batching stats, groups, programs,
/// batches. Strings are u64 length + bytes, vectors u64 count + elements. A program is its name,
/// footprint, tree, C, L and initial time, its ProgramStatic (depth, domain offsets, domains),
/// u64 raw size + deflated bytes of comp_static [C,910] then expr [C,66,11] (float32), u64 S and S
/// schedule records of 24 bytes (f32 speedup, i32 file index, f64 min time in ms, u32 end of its
/// descriptor, u32 end of its sched_str), the concatenated descriptors (features.hpp
/// ScheduleDescriptor), u64 raw size + deflated bytes of the concatenated sched_str. About 85
/// bytes per schedule on LOOPerSet (the [C,146] and [L,8] rows are rebuilt by schedule_rows).
/// Throws std::runtime_error when a program carries no descriptors (one not built by featurize).
/// Returns the file size in bytes. Throws std::runtime_error naming the path on I/O failure
/// ("cannot write cache <path>: <reason>", lcm::temp_create_reason when the temp file cannot be
/// created), or lcm::RunLockError "cache <path> is in use by another run: host H pid P holds
/// <path>.lock (...)" when another process is writing the same cache.
/// `caller_holds_lock`: the caller holds "<path>.lock" already (lock_cache), so write_cache does
/// not take it again.
int64_t write_cache(const std::string& path, const CacheKey& key, const SplitCounts& counts,
                    const Dataset& ds, bool caller_holds_lock = false);

/// Takes the writer's lock "<path>.lock" of cache `path` (lcm::RunLock), waiting up to `wait_s`
/// seconds (data.cache_lock_wait) while another process holds it, with one stderr line "lcm:
/// waiting for cache <path>: host H pid P holds <path>.lock (up to S s)". Throws
/// lcm::RunLockError "cache <path> is in use by another run: host H pid P holds <path>.lock
/// (waited S s; wait for it to finish writing the cache, or raise data.cache_lock_wait)" after
/// the wait, std::runtime_error "cannot write cache <path>: <reason>" when the lock file cannot
/// be created.
RunLock lock_cache(const std::string& path, double wait_s);

/// Stale temp files: lcm::remove_stale_temps(dir, {".lcmb"}): removes every
/// "<name>.lcmb.tmp.<host>.<pid>" of this host (and old-style "<name>.lcmb.tmp.<pid>") in `dir`
/// whose writer process is gone (kill(pid, 0) fails with ESRCH; our own pid, live processes and
/// other hosts' files are left alone), printing one line per file on stderr. Called by
/// write_cache before it writes. Returns the number removed.
int remove_stale_cache_temps(const std::string& dir);

/// Installs SIGINT/SIGTERM handlers that remove the cache temp file being written (if any) and
/// exit with 128 + signal (130 / 143). For tools that write caches (lcm-prepare, lcm-train).
void install_cache_signal_handlers();
/// The temp file the handler removes (write_cache registers its own; paths over 4095 bytes are
/// not registered). unregister_cache_temp() forgets it.
void register_cache_temp(const std::string& tmp_path);
void unregister_cache_temp();
/// Removes the registered temp file, if any (async-signal-safe; for another tool's signal handler
/// that exits at once, e.g. lcm-train's second interrupt).
void remove_registered_cache_temp() noexcept;

/// Loads the cache if it exists and matches `expected` exactly (versions, then every key value),
/// has the exact length its header announces and both checksums match; otherwise returns
/// ok == false with a one-line reason. The file is read through a read-only mapping, never copied
/// whole: the checksum pass drops each 8 MiB piece from the resident set once summed, and each
/// program's schedule rows are rebuilt from its descriptors (checking them). Never throws on a bad
/// file (I/O or format problems, a descriptor that does not fit its program, become the reason).
/// With rows_in_memory false the programs stay compact (ProgramFeatures::rows_in_memory() false: no
/// [S,C,146] / [S,L,8] rows held, each batch rebuilds its rows from the descriptors). With
/// keep_sched_str false the programs' sched_str are not read (ProgramFeatures::sched_str empty;
/// their offsets are still checked). The pages of the programs already read are dropped from the
/// resident set as the reader moves on.
/// With `visit`, each program is handed to (*visit) as it is read (compact: no rows) and then
/// freed: the dataset comes back without programs (its groups, batches and stats are there) and
/// memory holds 16 bytes a program for the batch checks — lcm-prepare's summary of a cache it
/// reuses. A visitor's exception propagates.
CacheLoad read_cache(const std::string& path, const CacheKey& expected, bool rows_in_memory = true,
                     bool keep_sched_str = true,
                     const std::function<void(const ProgramFeatures&)>* visit = nullptr);

/// Featurised programs written one by one, in write_cache's program layout, to an unnamed
/// temporary file (created in `dir` as <stem>.spill.XXXXXX and unlinked at once, so that a killed
/// run leaves nothing behind): lcm-prepare's way to build a cache without holding its programs.
/// Memory: 8 bytes a program (where each one ends) and a 1 MiB write buffer.
class ProgramSpill {
 public:
  /// Throws std::runtime_error naming the file when it cannot be created.
  ProgramSpill(const std::string& dir, const std::string& stem);
  ~ProgramSpill();
  ProgramSpill(const ProgramSpill&) = delete;
  ProgramSpill& operator=(const ProgramSpill&) = delete;
  /// Appends `p` (write_cache's layout). Throws std::runtime_error on a write failure or for a
  /// program without descriptors.
  void add(const ProgramFeatures& p);
  /// Programs added.
  int64_t size() const { return int64_t(ends_.size()); }
  /// Bytes written.
  int64_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<uint64_t> ends_;
  friend int64_t write_cache_streamed(const std::string&, const CacheKey&, const SplitCounts&,
                                      const BatchPlan&, ProgramSpill&,
                                      const std::function<void(const std::string&)>&, bool);
  friend void spilled_kept_names(const BatchPlan&, ProgramSpill&,
                                 const std::function<void(const std::string&)>&);
};

/// write_cache for programs held in a ProgramSpill rather than in memory: the same file, byte for
/// byte, as write_cache of the Dataset whose programs are the spilled ones that plan.keep keeps
/// (in order) and whose groups, batches and stats are the plan's. `on_kept(name)` is called for
/// each kept program in order. Throws as write_cache, and std::runtime_error when the plan and
/// the spill disagree on the number of programs or the spill cannot be read back.
/// `caller_holds_lock`: as write_cache's.
int64_t write_cache_streamed(const std::string& path, const CacheKey& key,
                             const SplitCounts& counts, const BatchPlan& plan, ProgramSpill& spill,
                             const std::function<void(const std::string&)>& on_kept,
                             bool caller_holds_lock = false);

/// Calls on_kept(name) for each spilled program that plan.keep keeps, in order, writing nothing
/// (a streamed prepare with the cache off). Throws std::runtime_error as write_cache_streamed.
void spilled_kept_names(const BatchPlan& plan, ProgramSpill& spill,
                        const std::function<void(const std::string&)>& on_kept);

}  // namespace lcm::data
