// The threaded read → parse → featurise pipeline (one reader thread, N workers, results taken
// in record order through run_ordered), the cache-or-build logic of a split and its summary.
#include "data/prepare.hpp"

#include <rapidjson/document.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "data/cache.hpp"
#include "data/name_set.hpp"
#include "data/ordered_pool.hpp"
#include "data/reader.hpp"

namespace lcm::data {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct WorkItem {
  RawRecord record;
  std::unique_ptr<SkipLog> source_log;  // the reader's skips met before this record
};

struct WorkResult {
  std::unique_ptr<SkipLog> source_log;  // WorkItem::source_log, replayed before `log`
  std::unique_ptr<SkipLog> log;         // this record's skips, replayed in record order
  bool parsed = false;
  std::string name;  // program name when parsed (duplicate detection)
  std::string file;  // where the record is (for the duplicate_program skip)
  int64_t line = 0;
  int64_t schedules_read = 0;
  int64_t skipped_schedules = -1;  // not parsed: schedules_list entries when countable, else -1
  std::map<std::string, int64_t> form_counts;  // Program::form_counts when parsed
  std::optional<ProgramFeatures> features;
  bool other_fold = false;  // parsed, but of a fold PrepareOptions::folds leaves out
};

/// The number of schedules of a record the reader skipped (e.g. unknown_expr_type), so that the
/// summary can count them as dropped: its schedules_list entries, or, for a one-schedule-per-line
/// group (RawRecord::schedule_line), its lines (each line is one schedule, read or not); -1 when
/// the record is not a JSON object with a schedules_list array (malformed JSON, a partial
/// record, ...).
int64_t count_schedules(const RawRecord& rec) {
  if (rec.schedule_line) return 1 + int64_t(rec.more_schedule_lines.size());
  rapidjson::Document d;
  // Iterative: the record may be a hostile one skipped for its nesting (no recursion, no stack
  // overflow); the default MemoryPoolAllocator frees the DOM without walking it.
  d.Parse<rapidjson::kParseIterativeFlag>(rec.json.c_str(), rec.json.size());
  if (d.HasParseError() || !d.IsObject()) return -1;
  auto it = d.FindMember("schedules_list");
  if (it == d.MemberEnd() || !it->value.IsArray()) return -1;
  return int64_t(it->value.Size());
}

/// Replays one record's skip events into the main log in order (so printing and strict mode are
/// deterministic); falls back to a count-only merge when the record logged > 1000 events.
void replay(const SkipLog& local, SkipLog& log) {
  auto events = local.events();
  int64_t total = 0;
  for (auto& [k, v] : local.counts()) total += v;
  if (int64_t(events.size()) == total) {
    for (auto& e : events) log.add(e);
  } else {
    if (log.strict()) {  // the first non-exempt event throws; counts alone decide otherwise
      for (auto& e : events)
        if (!strict_exempt(e.level, e.reason)) log.add(e);
      for (auto& [k, v] : local.counts()) {
        auto slash = k.find('/');
        if (!strict_exempt(k.substr(0, slash), k.substr(slash + 1)))
          throw DataError("data.strict: " + std::to_string(v) + " skip(s) " + k);
      }
    }
    log.merge(local);
  }
}

}  // namespace

std::string human_bytes(int64_t b) {
  char buf[64];
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1 << 30));
  else if (b >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", (long long)b);
  return buf;
}

std::string loop_zeroing_name(FeatureOptions::LoopZeroing z) {
  switch (z) {
    case FeatureOptions::LoopZeroing::LastComp:
      return "last_comp";
    case FeatureOptions::LoopZeroing::RemovedByFusion:
      return "removed_by_fusion";
    case FeatureOptions::LoopZeroing::Off:
      return "off";
  }
  return "?";
}

std::string shift_match_name(FeatureOptions::ShiftMatch m) {
  return m == FeatureOptions::ShiftMatch::Prefix ? "prefix" : "exact";
}

CacheKey prepare_cache_key(const PrepareOptions& opt) {
  SourceInfo s = source_info(opt.source);
  CacheKey k;
  k.add("source.path", s.path);
  k.add("source.size", std::to_string(s.size));
  k.add("source.mtime_ns", std::to_string(s.mtime_ns));
  k.add("data.loop_zeroing", loop_zeroing_name(opt.features.loop_zeroing));
  k.add("data.shift_match", shift_match_name(opt.features.shift_match));
  k.add("features.keep_unlabeled", opt.features.keep_unlabeled ? "true" : "false");
  k.add("data.batch_size", std::to_string(opt.batching.batch_size));
  k.add("data.seed", std::to_string(opt.batching.seed));
  k.add("data.min_functions_per_footprint",
        std::to_string(opt.batching.min_functions_per_footprint));
  k.add("data.batching", opt.batching.mode == BatchingMode::Mixed ? "mixed" : "per_footprint");
  k.add("data.program_piece", std::to_string(opt.batching.program_piece));
  k.add("data.max_programs", std::to_string(opt.max_programs));
  static const char* kSource[] = {"auto", "structured", "typed", "sched_str"};
  static const char* kCheck[] = {"report", "skip", "off"};
  static const char* kBase[] = {"auto", "0", "1"};
  k.add("data.schedule_source", kSource[int(opt.read.schedule_source)]);
  k.add("data.schedule_check", kCheck[int(opt.read.schedule_check)]);
  k.add("data.loop_level_base", kBase[int(opt.loop_level_base)]);
  k.add("data.machine", opt.read.machine);
  if (opt.folds.active()) k.add("folds", opt.folds.text());
  // data.strict is not part of the key: it only decides whether a skip stops the run, never what
  // a successful run writes (a strict run on a cache with skips is stopped in prepare_split).
  return k;
}

SkipEvent feature_error_skip(const RawRecord& rec, const std::string& program,
                             const std::string& what) {
  SkipEvent ev;
  ev.level = "program";
  ev.reason = "feature_error";
  ev.file = rec.file;
  ev.line = rec.line;
  ev.program = program;
  ev.detail = what;
  return ev;
}

SkipEvent duplicate_program_skip(const std::string& file, int64_t line, const std::string& program,
                                 int64_t first_line) {
  SkipEvent ev;
  ev.level = "program";
  ev.reason = "duplicate_program";
  ev.file = file;
  ev.line = line;
  ev.program = program;
  ev.detail = "the name was already read at line " + std::to_string(first_line) +
              "; this record is skipped";
  return ev;
}

int64_t record_bytes(const RawRecord& r) {
  int64_t n = int64_t(r.json.size());
  for (const std::string& l : r.more_schedule_lines) n += int64_t(l.size());
  return n;
}

std::vector<ProgramFeatures> read_features(const PrepareOptions& opt, SkipLog& log,
                                           SplitCounts& counts) {
  std::vector<ProgramFeatures> out;
  read_features_to(opt, log, counts, [&](ProgramFeatures&& p) { out.push_back(std::move(p)); });
  return out;
}

void read_features_to(const PrepareOptions& opt, SkipLog& log, SplitCounts& counts,
                      const std::function<void(ProgramFeatures&&)>& sink) {
  const Clock::time_point t0 = Clock::now();
  int workers = opt.nb_workers > 0 ? opt.nb_workers : int(std::thread::hardware_concurrency());
  if (workers < 1) workers = 1;
  const int64_t window = 4 * int64_t(workers) + 8;  // records in flight (bounds memory)

  // Typed loop levels: 0- or 1-based, decided once for the file before any record is featurised.
  ReadOptions read = opt.read;
  {
    const LoopLevelBaseChoice base = choose_loop_level_base(opt.source, opt.loop_level_base, read);
    read.loop_level_base = base.base;
    counts.loop_level_base = base.text;
  }
  RecordSource source(opt.source, log);  // throws DataError when unreadable
  const int64_t file_size = source.file_size();
  std::atomic<int64_t> bytes_read{0};

  // Reader thread: the next record. The reader's own skips (a malformed legacy member, a cut
  // gzip, a line over 1 GiB) go with the next record (or, after the last one, to `trailing`)
  // and are replayed in record order with the parse skips, so that all skips print in line
  // order.
  std::unique_ptr<SkipLog> trailing;
  int64_t records_handed = 0;
  auto next_record = [&](WorkItem& item) {
    if (opt.max_programs > 0 && records_handed >= opt.max_programs) return false;
    if (!source.next_with_log(item.record, item.source_log, trailing)) return false;
    bytes_read.store(source.compressed_bytes_read(), std::memory_order_relaxed);
    ++records_handed;
    return true;
  };

  // Worker threads: parse and featurise one record into its own skip log.
  auto featurize_record = [&](WorkItem&& item) {
    WorkResult res;
    res.source_log = std::move(item.source_log);
    res.log = std::make_unique<SkipLog>(false, 0);
    std::optional<Program> prog = parse_program(item.record, *res.log, read);
    if (!prog) res.skipped_schedules = count_schedules(item.record);
    if (prog) {
      res.parsed = true;
      res.name = prog->name;
      res.file = item.record.file;
      res.line = item.record.line;
      // A one-schedule-per-line group read all its lines' schedules, also those its merge
      // dropped (a malformed line, a differing program_annotation, ...): they count as read.
      res.schedules_read = item.record.schedule_line ? count_schedules(item.record)
                                                     : int64_t(prog->schedules.size());
      res.form_counts = std::move(prog->form_counts);
      res.other_fold = !opt.folds.keeps(prog->name);
      if (res.other_fold) return res;  // counted by the calling thread, not featurised
      try {
        res.features = featurize(*prog, opt.features, *res.log);
        // compact at once: the cache and the batching need the descriptors only
        if (res.features && opt.compact_rows) res.features->drop_rows();
      } catch (const DataError& e) {
        // featurize reports its drops itself; anything it throws is still a named skip.
        res.log->add(feature_error_skip(item.record, prog->name, e.what()));
        res.features.reset();
      }
    }
    return res;
  };

  const bool tty = ::isatty(2) == 1;
  const double progress_every = tty ? 0.5 : 5.0;
  double last_progress = 0;
  bool printed_progress = false;
  // Progress line: programs/s and schedules/s so far, and the share of the file consumed.
  auto maybe_progress = [&] {
    if (!opt.progress) return;
    double t = seconds_since(t0);
    if (t - last_progress < progress_every) return;
    last_progress = t;
    double frac = file_size > 0 ? double(bytes_read.load()) / double(file_size) : 0.0;
    std::fprintf(stderr, "%s%s: %lld programs (%.0f/s), %lld schedules (%.0f/s), %.0f%% of %s%s",
                 tty ? "\r" : "", opt.split.c_str(), (long long)counts.programs_read,
                 double(counts.programs_read) / t, (long long)counts.schedules_read,
                 double(counts.schedules_read) / t, 100.0 * frac, human_bytes(file_size).c_str(),
                 tty ? "   " : "\n");
    std::fflush(stderr);
    printed_progress = true;
  };

  // Calling thread, in record order: skips replayed, duplicates dropped, features kept.
  NameSet names;  // program name (hashed) → line of its first record
  auto take_result = [&](WorkResult&& res) {
    counts.records_read += 1;
    if (res.source_log) replay(*res.source_log, log);  // may throw DataError in strict mode
    // A program is identified by its name: a later record with a name already read is skipped
    // whole (program/duplicate_program), whether the first was kept or skipped, so that every
    // tool (lcm-eval's per-program metrics, lcm-predict's groups, training) sees one program.
    const NameHash h = res.parsed ? name_hash(res.name) : NameHash{};
    const int64_t* first = res.parsed ? names.find(h) : nullptr;
    if (first) {
      // may throw DataError in strict mode
      log.add(duplicate_program_skip(res.file, res.line, res.name, *first));
      res.features.reset();
    } else {
      replay(*res.log, log);  // may throw DataError in strict mode
      if (res.parsed) names.insert(h, res.line);
      if (res.other_fold) log.add_count("fold", "other_fold", 1);
    }
    if (res.parsed) {
      counts.programs_read += 1;
      counts.schedules_read += res.schedules_read;
      for (const auto& [k, v] : res.form_counts) counts.forms[k] += v;
    } else if (res.skipped_schedules >= 0) {  // skipped by the reader: its schedules are dropped
      counts.schedules_read += res.skipped_schedules;
      counts.skipped_records_counted += 1;
    }
    if (res.features) {
      counts.programs_featurized += 1;
      counts.schedules_featurized += res.features->n_schedules();
      sink(std::move(*res.features));
    }
  };

  try {
    run_ordered<WorkItem, WorkResult>(
        workers, InFlightLimit{window, opt.max_bytes_in_flight},
        [](const WorkItem& item) { return record_bytes(item.record); }, next_record,
        featurize_record, take_result, maybe_progress);
  } catch (...) {
    if (printed_progress && tty) std::fprintf(stderr, "\n");
    throw;
  }
  if (printed_progress && tty) std::fprintf(stderr, "\n");
  if (trailing) replay(*trailing, log);  // may throw DataError in strict mode
  // Records the reader met but could not deliver (partial last record of a corrupt gzip, ...)
  // were read too: records_read = parsed + skipped.
  counts.records_read += source.records_skipped();
}

namespace {

/// prepare_split's error when nothing is kept: "<source>: no program record in the file ..." or
/// "<source>: no program kept (N records read, see skips above[; the footprint rule ...])".
void throw_if_nothing_kept(const PrepareOptions& opt, const SplitCounts& counts,
                           int64_t programs_kept, int64_t programs_dropped) {
  if (programs_kept == 0 && counts.records_read == 0 && counts.skips.empty())
    throw std::runtime_error(
        opt.source + ": no program record in the file (it is empty or holds only blank lines)");
  if (programs_kept == 0)  // nothing to train on: an error, and no cache written
    throw std::runtime_error(opt.source + ": no program kept (" +
                             count_of(counts.records_read, "record") + " read, see skips above" +
                             (programs_dropped > 0
                                  ? "; the footprint rule dropped " +
                                        count_of(programs_dropped, "program") +
                                        ": data.min_functions_per_footprint=0 keeps them"
                                  : std::string()) +
                             ")");
}

/// The build of PrepareOptions::stream_to_cache: programs go to a ProgramSpill (when there is a
/// cache to write or kept names to report) as they are featurised, batching works on their
/// shapes, and the cache is copied from the spill.
void build_streamed(const PrepareOptions& opt, const CacheKey& key, Clock::time_point t0,
                    PreparedSplit& out) {
  SkipLog log(opt.strict, opt.print_skips);
  std::unique_ptr<ProgramSpill> spill;
  if (!out.cache_path.empty() || opt.on_kept_program) {
    std::string dir = opt.cache_dir;
    if (dir.empty()) {
      std::error_code ec;
      dir = std::filesystem::temp_directory_path(ec).string();
      if (ec || dir.empty()) dir = "/tmp";
    }
    spill = std::make_unique<ProgramSpill>(dir, opt.split + ".lcmb");
  }
  ShapeTable table;
  std::vector<ProgramShape> shapes;
  read_features_to(opt, log, out.counts, [&](ProgramFeatures&& p) {
    shapes.push_back(
        {table.shape_of(p.footprint, p.n_comps, p.n_loops, p.name), int32_t(p.n_schedules())});
    if (spill) spill->add(p);
  });
  BatchingOptions batching = opt.batching;
  batching.source_file = opt.source;
  BatchPlan plan = plan_batches(shapes, table.shapes, batching, log);
  out.counts.skips = log.counts();
  for (size_t i = 0; i < shapes.size(); ++i)
    if (plan.keep[i]) {
      out.programs_kept += 1;
      out.schedules_kept += shapes[i].n_schedules;
    }
  std::vector<ProgramShape>().swap(shapes);
  throw_if_nothing_kept(opt, out.counts, out.programs_kept, plan.batching.programs_dropped);
  out.counts.build_seconds = seconds_since(t0);
  if (!out.cache_path.empty())
    out.cache_bytes = write_cache_streamed(out.cache_path, key, out.counts, plan, *spill,
                                           opt.on_kept_program, true);
  else if (opt.on_kept_program)
    spilled_kept_names(plan, *spill, opt.on_kept_program);
  out.dataset.groups = std::move(plan.groups);
  out.dataset.batches = std::move(plan.batches);
  out.dataset.batching = plan.batching;
  out.streamed = true;
}

}  // namespace

PreparedSplit prepare_split(const PrepareOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  PreparedSplit out;
  out.source = source_info(opt.source);
  CacheKey key = prepare_cache_key(opt);
  RunLock cache_writer;  // held from a cache miss to its write: one builder per cache file
  if (!opt.cache_dir.empty()) {
    out.cache_path = opt.cache_dir + "/" + opt.split + ".lcmb";
    std::function<void(const ProgramFeatures&)> visit = [&](const ProgramFeatures& p) {
      if (opt.on_kept_program) opt.on_kept_program(p.name);
      if (opt.on_kept_features) opt.on_kept_features(p);
    };
    auto read = [&] {
      return read_cache(out.cache_path, key, !opt.compact_rows && !opt.stream_to_cache,
                        opt.keep_sched_str && !opt.stream_to_cache,
                        opt.stream_to_cache ? &visit : nullptr);
    };
    CacheLoad load = read();
    if (!load.ok) {
      // Another run sharing this base path may be building this cache: wait for it (bounded,
      // data.cache_lock_wait), then read again, since it may have written what this run needs.
      std::error_code dir_ec;
      std::filesystem::create_directories(opt.cache_dir, dir_ec);
      cache_writer = lock_cache(out.cache_path, opt.cache_lock_wait_s);
      CacheLoad again = read();
      if (again.ok) load = std::move(again);
    }
    if (load.ok && opt.strict) {
      // data.strict is not in the cache key: a cache built with skips stops a strict run too.
      for (auto& [k, v] : load.counts.skips) {
        auto slash = k.find('/');
        if (v > 0 && !strict_exempt(k.substr(0, slash), k.substr(slash + 1)))
          throw DataError("data.strict: the cache " + out.cache_path + " of " + opt.source +
                          " was built with " + std::to_string(v) + " skip(s) " + k +
                          " (run without data.strict to see them)");
      }
    }
    if (load.ok) {
      out.dataset = std::move(load.dataset);
      out.counts = std::move(load.counts);
      out.programs_kept = load.programs;
      out.schedules_kept = load.schedules;
      out.streamed = opt.stream_to_cache;
      if (!opt.stream_to_cache && opt.on_kept_program)
        for (const ProgramFeatures& p : out.dataset.programs) opt.on_kept_program(p.name);
      out.from_cache = true;
      out.cache_bytes = source_info(out.cache_path).size;
      out.seconds = seconds_since(t0);
      return out;
    }
    out.cache_note = load.reason;
  }
  if (opt.stream_to_cache) {
    build_streamed(opt, key, t0, out);
    out.seconds = seconds_since(t0);
    return out;
  }
  SkipLog log(opt.strict, opt.print_skips);
  out.dataset.programs = read_features(opt, log, out.counts);
  BatchingOptions batching = opt.batching;
  batching.source_file = opt.source;
  build_batches(out.dataset, batching, log);
  out.counts.skips = log.counts();
  out.counts.build_seconds = seconds_since(t0);
  out.programs_kept = int64_t(out.dataset.programs.size());
  out.schedules_kept = out.dataset.n_datapoints();
  throw_if_nothing_kept(opt, out.counts, out.programs_kept, out.dataset.batching.programs_dropped);
  if (!out.cache_path.empty())
    out.cache_bytes = write_cache(out.cache_path, key, out.counts, out.dataset, true);
  if (!opt.keep_sched_str)
    for (ProgramFeatures& p : out.dataset.programs) std::vector<std::string>().swap(p.sched_str);
  if (opt.on_kept_program)
    for (const ProgramFeatures& p : out.dataset.programs) opt.on_kept_program(p.name);
  out.seconds = seconds_since(t0);
  return out;
}

std::string footprint_drop_note(const PreparedSplit& s, const PrepareOptions& opt) {
  // §3.11 drops whole groups of rare footprints: on a small file that can be most of it.
  const int64_t featurized = s.counts.programs_featurized;
  const int64_t dropped = s.dataset.batching.programs_dropped;
  if (featurized <= 0 || dropped * 4 <= featurized) return "";
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "the footprint rule dropped %lld of %lld programs (%.0f%%, groups of fewer than %d "
      "programs and %d schedules); data.min_functions_per_footprint=0 keeps them",
      (long long)dropped, (long long)featurized, 100.0 * double(dropped) / double(featurized),
      opt.batching.min_functions_per_footprint, 100 * opt.batching.min_functions_per_footprint);
  return buf;
}

std::string schedule_forms_summary(const SplitCounts& c, const ReadOptions& opt) {
  std::string out;
  auto num = [](int64_t v) {
    std::string d = std::to_string(v);
    for (int i = int(d.size()) - 3; i > 0; i -= 3) d.insert(size_t(i), ",");
    return d;
  };
  auto get = [&](const std::string& k) {
    const auto it = c.forms.find(k);
    return it == c.forms.end() ? int64_t(0) : it->second;
  };
  std::string read;
  for (const auto& [k, v] : c.forms)
    if (k.rfind("read/", 0) == 0)
      read += (read.empty() ? "" : ", ") + num(v) + " " +
              (k == "read/none" ? std::string("without transformation information (identity)")
                                : k.substr(5));
  if (read.empty()) return out;
  out += "  forms      schedules read from: " + read + "\n";
  std::string checks;
  for (const char* form : {"structured", "typed", "sched_str"}) {
    const int64_t agree = get(std::string("check/") + form + "/agree");
    const int64_t disagree = get(std::string("check/") + form + "/disagree");
    if (agree + disagree == 0) continue;
    checks += std::string(checks.empty() ? "" : "; ") + "against " + form + ": " + num(agree) +
              " agree, " + num(disagree) + " disagree";
  }
  if (!checks.empty()) {
    std::string kinds;
    for (const auto& [k, v] : c.forms)
      if (k.rfind("disagree/", 0) == 0)
        kinds += (kinds.empty() ? "" : ", ") + k.substr(9) + " " + num(v);
    out += "  cross-check " + checks;
    if (!kinds.empty())
      out += std::string(" (") + kinds +
             (opt.schedule_check == ScheduleCheck::Skip ? "; skipped"
                                                        : "; kept from the chosen form") +
             ")";
    out += "\n";
  } else if (opt.schedule_check == ScheduleCheck::Off) {
    out += "  cross-check off (data.schedule_check=off)\n";
  }
  if (!c.loop_level_base.empty())
    out += "  levels     typed loop levels " + c.loop_level_base + "\n";
  return out;
}

namespace {

/// One line of prepare_summary, without its newline: of `read` items (programs or schedules,
/// `what`), `kept` kept and the others dropped, read - featurized of them by `rules` and
/// `footprint` in small footprint groups (model-spec §3.11).
std::string kept_line(const char* what, int64_t read, int64_t kept, int64_t featurized,
                      const char* rules, int64_t footprint) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "  %-11s%lld read, %lld kept, %lld dropped (%lld by %s, %lld in small footprint "
                "groups)",
                what, (long long)read, (long long)kept, (long long)(read - kept),
                (long long)(read - featurized), rules, (long long)footprint);
  return buf;
}

}  // namespace

std::string prepare_summary(const PreparedSplit& s, const PrepareOptions& opt) {
  std::ostringstream o;
  const SplitCounts& c = s.counts;
  const Dataset& ds = s.dataset;
  char buf[512];
  o << opt.split << ": " << s.source.path << "\n";
  std::snprintf(buf, sizeof buf,
                "  records    %lld read, %lld parsed into programs, %lld skipped (unreadable or "
                "rejected by the reader)\n",
                (long long)c.records_read, (long long)c.programs_read,
                (long long)(c.records_read - c.programs_read));
  o << buf;
  const int64_t programs_kept = s.programs_kept;
  const int64_t schedules_kept = s.schedules_kept;
  // Every record is one program: those the reader could not parse are dropped programs too.
  o << kept_line("programs", c.records_read, programs_kept, c.programs_featurized,
                 "reader/feature rules", ds.batching.programs_dropped)
    << "\n";
  o << kept_line("schedules", c.schedules_read, schedules_kept, c.schedules_featurized,
                 "reader/feature rules or with their program", ds.batching.datapoints_dropped);
  // Records skipped by the reader count their schedules when their schedules_list could be read;
  // the others (malformed JSON, a partial record, ...) are said not to be counted.
  const int64_t uncounted = c.records_read - c.programs_read - c.skipped_records_counted;
  if (uncounted > 0)
    o << "; the schedules of " << uncounted << " unreadable record(s) are not counted";
  o << "\n";
  o << schedule_forms_summary(c, opt.read);
  bool any_drop = false, any_note = false;
  for (auto& [k, v] : c.skips) (k.rfind("note/", 0) == 0 ? any_note : any_drop) = true;
  if (any_drop) {
    o << "  dropped by reason (level/reason: count):\n";
    for (auto& [k, v] : c.skips)
      if (k.rfind("note/", 0) != 0)
        o << "    " << k << ": " << v << (k.rfind("footprint/", 0) == 0 ? " group(s)" : "") << "\n";
  }
  if (any_note) {
    o << "  notes (kept):\n";
    for (auto& [k, v] : c.skips)
      if (k.rfind("note/", 0) == 0) o << "    " << k << ": " << v << "\n";
  }
  std::snprintf(buf, sizeof buf,
                "  footprints %lld groups kept, %lld dropped (min_functions_per_footprint %d)\n",
                (long long)ds.batching.groups_kept, (long long)ds.batching.groups_dropped,
                opt.batching.min_functions_per_footprint);
  o << buf;
  const std::string footprint_note = footprint_drop_note(s, opt);
  if (!footprint_note.empty()) o << "  note       " << footprint_note << "\n";
  std::snprintf(buf, sizeof buf, "  batches    %lld (batch_size %d, seed %llu)\n",
                (long long)ds.batches.size(), opt.batching.batch_size,
                (unsigned long long)opt.batching.seed);
  o << buf;
  if (s.from_cache) {
    std::snprintf(buf, sizeof buf,
                  "  time       %.2f s (loaded from cache; the build took %.2f s)\n", s.seconds,
                  c.build_seconds);
  } else {
    const double t = s.seconds > 0 ? s.seconds : 1e-9;
    std::snprintf(buf, sizeof buf, "  time       %.2f s (%.0f programs/s, %.0f schedules/s)\n",
                  s.seconds, double(c.programs_read) / t, double(c.schedules_read) / t);
  }
  o << buf;
  if (s.cache_path.empty()) {
    o << "  cache      off\n";
  } else if (s.from_cache) {
    o << "  cache      " << s.cache_path << " (" << human_bytes(s.cache_bytes) << ", reused)\n";
  } else {
    o << "  cache      " << s.cache_path << " (" << human_bytes(s.cache_bytes) << ", written; "
      << s.cache_note << ")\n";
  }
  return o.str();
}

}  // namespace lcm::data
