// lcm-inspect's logic (inspect.hpp): one DOM walk per record for what the file holds
// (inspect_walk.cpp), plus parse_program (and featurize) for what lcm reads from it, in the
// threaded, ordered pipeline of read_features (prepare.cpp), whose counts it reproduces; the
// merge of reports and their verdict. The reports are printed by inspect_report.cpp.
#include "data/inspect.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/features.hpp"
#include "data/gzip_stream.hpp"
#include "data/inspect_internal.hpp"
#include "data/name_set.hpp"
#include "data/ordered_pool.hpp"
#include "data/prepare.hpp"
#include "data/record_fields.hpp"

namespace lcm::data {

using inspect_detail::add;
using inspect_detail::add_all;

namespace {

/// "bare" when the first key of the uncompressed text (across lines) is a record field, else
/// "legacy": the rule RecordSource uses once it has ruled out JSON Lines.
std::string non_jsonl_layout(const std::string& path) {
  GzInput in;
  std::string err;
  if (!in.open(path, err) || !in.fill()) return "legacy container";
  const char* p = in.window();
  const char* e = p + in.window_size();
  if (e - p >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB &&
      (unsigned char)p[2] == 0xBF)
    p += 3;
  auto ws = [&] {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  };
  ws();
  if (p >= e || *p != '{') return "legacy container";
  ++p;
  ws();
  if (p >= e || *p != '"') return "legacy container";
  const char* k = ++p;
  while (p < e && *p != '"' && *p != '\\' && *p != '\n') ++p;
  return is_record_key(std::string(k, p)) ? "bare record" : "legacy container";
}

using Clock = std::chrono::steady_clock;

struct WorkItem {
  RawRecord record;
  std::unique_ptr<SkipLog> source_log;
};

struct WorkResult {
  std::unique_ptr<SkipLog> source_log, log, feature_log;
  bool parsed = false;
  std::string name, file;
  int64_t line = 0;
  int64_t schedules_read = 0;
  int64_t skipped_schedules = -1;
  bool featurized = false;
  int64_t schedules_featurized = 0;
  std::map<std::string, int64_t> form_counts;
  std::string several_machines;  // parse_program stopped: times of several machines, none chosen
  std::vector<UnknownEntry> unknown;
};

std::atomic<uint64_t> g_run{0};
}  // namespace

std::string InspectReport::loop_level_verdict() const {
  if (level_zero_based > 0 && level_one_based > 0)
    return "contradictory (both seen: " + count_of(level_zero_based, "entry", "entries") +
           " prove 0-based, " + std::to_string(level_one_based) + " prove 1-based)";
  if (level_zero_based > 0)
    return "0-based (proved by " + count_of(level_zero_based, "entry", "entries") + ")";
  if (level_one_based > 0)
    return "1-based (proved by " + count_of(level_one_based, "entry", "entries") + ")";
  return "not determined (0-based assumed)";
}

std::vector<std::string> InspectReport::problems() const {
  std::vector<std::string> out;
  if (!files_without_records.empty()) {
    // a file with nothing lcm reads is not "every form understood": there are no forms
    std::string names;
    for (size_t i = 0; i < files_without_records.size() && i < kInspectExamples; ++i)
      names += (i ? ", " : "") + files_without_records[i];
    if (files_without_records.size() > kInspectExamples) names += ", ...";
    out.push_back(
        "no LOOPerSet record found in " +
        (files_without_records.size() == 1
             ? names
             : count_of(int64_t(files_without_records.size()), "file") + " (" + names + ")") +
        ": no JSON object with a program record field (program_annotation, "
        "schedules_list, ...; docs/data-format.md)");
  }
  if (auto it = sched_str_dialects.find("unknown"); it != sched_str_dialects.end())
    out.push_back(count_of(it->second, "sched_str") + " of dialect unknown");
  if (auto it = sched_str_dialects.find("(not a string)"); it != sched_str_dialects.end())
    out.push_back(count_of(it->second, "sched_str") + " that are not strings");
  int64_t unknown_types = 0;
  std::string which;
  for (const auto& [t, n] : typed_types)
    if (!inspect_detail::is_known_type(t)) {
      unknown_types += n;
      which += (which.empty() ? "" : ", ") + t + " " + std::to_string(n);
    }
  if (unknown_types > 0)
    out.push_back(count_of(unknown_types, "typed entry", "typed entries") + " of unknown type (" +
                  which + ")");
  if (unknown_only_entries > 0)
    out.push_back(
        count_of(unknown_only_entries, "per-computation entry", "per-computation entries") +
        " with only unknown keys");
  if (level_zero_based > 0 && level_one_based > 0)
    out.push_back("loop levels " + loop_level_verdict());
  for (const auto& [machines, n] : several_machines)
    out.push_back(count_of(n, "record") + " with times of several machines (" + machines +
                  ") and none chosen: lcm-prepare stops at the first; choose one with "
                  "data.machine=NAME (lcm-inspect --machine NAME)");
  return out;
}

void InspectReport::merge(const InspectReport& o) {
  using R = InspectReport;
  static constexpr int64_t R::*kCounts[] = {&R::files,
                                            &R::records,
                                            &R::compressed_bytes,
                                            &R::uncompressed_bytes,
                                            &R::programs_read,
                                            &R::schedules_read,
                                            &R::records_skipped_by_reader,
                                            &R::skipped_records_counted,
                                            &R::programs_featurized,
                                            &R::schedules_featurized,
                                            &R::program_records,
                                            &R::schedules_in_file,
                                            &R::computations_in_file,
                                            &R::form_structured,
                                            &R::form_typed,
                                            &R::form_sched_str,
                                            &R::form_none,
                                            &R::typed_entries,
                                            &R::typed_naming_computations,
                                            &R::typed_naming_comps,
                                            &R::unknown_only_entries,
                                            &R::level_zero_based,
                                            &R::level_one_based,
                                            &R::lines_whole_program,
                                            &R::lines_single_schedule,
                                            &R::lines_other};
  static constexpr Histogram R::*kHistograms[] = {&R::layouts,
                                                  &R::reader_skips,
                                                  &R::forms_read,
                                                  &R::several_machines,
                                                  &R::feature_skips,
                                                  &R::top_keys,
                                                  &R::annotation_keys,
                                                  &R::computation_keys,
                                                  &R::schedule_keys,
                                                  &R::comp_entry_keys,
                                                  &R::sched_str_dialects,
                                                  &R::form_combinations,
                                                  &R::typed_types,
                                                  &R::typed_entry_keys,
                                                  &R::execution_time_shapes,
                                                  &R::initial_time_shapes,
                                                  &R::execution_time_machines,
                                                  &R::initial_time_machines,
                                                  &R::single_schedule_forms};
  for (int64_t R::*c : kCounts) this->*c += o.*c;
  for (Histogram R::*h : kHistograms) add_all(this->*h, o.*h);
  if (loop_level_base_used.empty()) loop_level_base_used = o.loop_level_base_used;
  read = read && o.read;
  features = features || o.features;
  for (const SkipEvent& e : o.first_skips)
    if (first_skips.size() < kInspectExamples) first_skips.push_back(e);
  files_without_records.insert(files_without_records.end(), o.files_without_records.begin(),
                               o.files_without_records.end());
  for (const UnknownEntry& u : o.first_unknown_entries)
    if (first_unknown_entries.size() < kInspectExamples) first_unknown_entries.push_back(u);
}

namespace {

/// inspect_file's run over one file: its records read in order, walked and parsed by the workers
/// (work), their results taken in record order (consume), the per-thread counts merged (finish).
class FileInspection {
 public:
  FileInspection(const std::string& path, const InspectOptions& opt)
      : path_(path), opt_(opt), source_(path, quiet_) {  // RecordSource throws when unreadable
    report_.file = path;
    report_.read = opt.read;
    report_.features = opt.features && opt.read;
    report_.compressed_bytes = source_.file_size();
    report_.layouts[std::string(source_.is_jsonl() ? "JSON Lines" : non_jsonl_layout(path)) + ", " +
                    (source_.is_gzip() ? "gzip" : "plain")] = 1;
    read_ = opt.read_options;
    if (opt.read) choose_base();
  }

  InspectReport run() {
    int workers = opt_.threads > 0 ? opt_.threads : int(std::thread::hardware_concurrency());
    if (workers < 1) workers = 1;
    const int64_t window = 4 * int64_t(workers) + 8;
    try {
      run_ordered<WorkItem, WorkResult>(
          workers, InFlightLimit{window, opt_.max_bytes_in_flight},
          [](const WorkItem& item) { return record_bytes(item.record); },
          [&](WorkItem& item) { return next_record(item); },
          [&](WorkItem&& item) { return work(std::move(item)); },
          [&](WorkResult&& res) { consume(std::move(res)); }, [&] { progress(); });
    } catch (...) {
      if (printed_ && tty_) std::fprintf(stderr, "\n");
      throw;
    }
    if (printed_ && tty_) std::fprintf(stderr, "\n");
    finish();
    return std::move(report_);
  }

 private:
  /// data.loop_level_base for the reader, said in the report; contradictory evidence, or several
  /// machines in the first records, is said there too.
  void choose_base() {
    try {
      const LoopLevelBaseChoice base = choose_loop_level_base(path_, opt_.loop_level_base, read_);
      read_.loop_level_base = base.base;
      report_.loop_level_base_used = base.text;
    } catch (const DataError& e) {
      report_.loop_level_base_used = std::string("not decided: ") + e.what();
    }
  }

  bool next_record(WorkItem& item) {
    if (!source_.next_with_log(item.record, item.source_log, trailing_)) return false;
    bytes_read_.store(source_.compressed_bytes_read(), std::memory_order_relaxed);
    return true;
  }

  /// This thread's accumulator of the order-free counts, merged at the end.
  InspectReport& my_acc() {
    thread_local InspectReport* acc = nullptr;
    thread_local uint64_t acc_run = 0;
    if (acc_run != run_) {
      std::lock_guard<std::mutex> lk(acc_mu_);
      accs_.push_back(std::make_unique<InspectReport>());
      acc = accs_.back().get();
      acc->files = 0;
      acc_run = run_;
    }
    return *acc;
  }

  WorkResult work(WorkItem&& item) {
    WorkResult res;
    res.source_log = std::move(item.source_log);
    res.log = std::make_unique<SkipLog>(false, 0);
    int64_t listed = inspect_detail::walk_record(item.record, my_acc(), res.unknown);
    // One schedule per line: every line of the group is walked, each one schedule read.
    for (size_t i = 0; i < item.record.more_schedule_lines.size(); ++i) {
      RawRecord line;
      line.json = item.record.more_schedule_lines[i];
      line.file = item.record.file;
      line.line = item.record.more_schedule_line_numbers[i];
      inspect_detail::walk_record(line, my_acc(), res.unknown);
    }
    if (item.record.schedule_line) listed = 1 + int64_t(item.record.more_schedule_lines.size());
    if (opt_.read) read_record(item.record, listed, res);
    return res;
  }

  /// What lcm reads from the record (parse_program, and featurize with opt.features).
  void read_record(const RawRecord& rec, int64_t listed, WorkResult& res) {
    std::optional<Program> prog;
    try {
      prog = parse_program(rec, *res.log, read_);
    } catch (const DataError& e) {
      // Times of several machines and none chosen: lcm-prepare stops here; lcm-inspect counts
      // the record and says which machines there are.
      const std::string w = e.what();
      const size_t b = w.find("machines (");
      const size_t end = b == std::string::npos ? b : w.find(')', b);
      res.several_machines = end == std::string::npos ? w : w.substr(b + 10, end - b - 10);
      res.skipped_schedules = listed;
      return;
    }
    if (!prog) {
      res.skipped_schedules = listed;
      return;
    }
    res.form_counts = std::move(prog->form_counts);
    res.parsed = true;
    res.name = prog->name;
    res.file = rec.file;
    res.line = rec.line;
    res.schedules_read = rec.schedule_line ? listed : int64_t(prog->schedules.size());
    if (!opt_.features) return;
    res.feature_log = std::make_unique<SkipLog>(false, 0);
    try {
      std::optional<ProgramFeatures> f = featurize(*prog, fopt_, *res.feature_log);
      if (f) {
        res.featurized = true;
        res.schedules_featurized = f->n_schedules();
      }
    } catch (const DataError& e) {
      res.feature_log->add(feature_error_skip(rec, prog->name, e.what()));
    }
  }

  void take_log(const SkipLog& l, Histogram& counts) {
    for (const auto& [k, v] : l.counts()) add(counts, k, v);
    for (const SkipEvent& e : l.events()) {
      if (report_.first_skips.size() >= kInspectExamples) break;
      if (e.level != "note") report_.first_skips.push_back(e);
    }
  }

  void progress() {
    if (!opt_.progress) return;
    const double t = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (t - last_ < every_) return;
    last_ = t;
    const int64_t size = report_.compressed_bytes;
    std::fprintf(stderr, "%s%s: %s: %lld records (%.0f/s), %lld schedules, %.0f%% of %s%s",
                 tty_ ? "\r" : "", opt_.progress_label.c_str(), path_.c_str(),
                 (long long)report_.records, double(report_.records) / t,
                 (long long)report_.schedules_read,
                 size > 0 ? 100.0 * double(bytes_read_.load()) / double(size) : 0.0,
                 human_bytes(size).c_str(), tty_ ? "   " : "\n");
    std::fflush(stderr);
    printed_ = true;
  }

  /// One record's result, in record order.
  void consume(WorkResult&& res) {
    report_.records += 1;
    if (res.source_log) take_log(*res.source_log, report_.reader_skips);
    const NameHash h = res.parsed ? name_hash(res.name) : NameHash{};
    const int64_t* first = res.parsed ? names_.find(h) : nullptr;
    if (first) {  // as read_features: the later record is skipped whole
      SkipLog one(false, 0);
      one.add(duplicate_program_skip(res.file, res.line, res.name, *first));
      take_log(one, report_.reader_skips);
      res.featurized = false;
    } else {
      take_log(*res.log, report_.reader_skips);
      if (res.feature_log) take_log(*res.feature_log, report_.feature_skips);
      if (res.parsed) names_.insert(h, res.line);
    }
    if (!res.several_machines.empty()) add(report_.several_machines, res.several_machines, 1);
    if (res.parsed) {
      report_.programs_read += 1;
      report_.schedules_read += res.schedules_read;
      for (const auto& [k, v] : res.form_counts) add(report_.forms_read, k, v);
    } else if (res.skipped_schedules >= 0) {
      report_.schedules_read += res.skipped_schedules;
      report_.skipped_records_counted += 1;
    }
    if (res.featurized) {
      report_.programs_featurized += 1;
      report_.schedules_featurized += res.schedules_featurized;
    }
    for (UnknownEntry& u : res.unknown)
      if (report_.first_unknown_entries.size() < kInspectExamples)
        report_.first_unknown_entries.push_back(std::move(u));
  }

  /// The counts after the last record: trailing skips, the reader's totals, the accumulators.
  void finish() {
    if (trailing_) take_log(*trailing_, report_.reader_skips);
    // Skips the reader logged while choosing the layout, before the first record (none are known
    // today; counted rather than lost).
    for (const auto& [k, v] : quiet_.counts()) add(report_.reader_skips, k, v);
    report_.records += source_.records_skipped();
    if (opt_.read) report_.records_skipped_by_reader = report_.records - report_.programs_read;
    report_.uncompressed_bytes = source_.uncompressed_bytes_read();
    for (const auto& a : accs_) {
      std::vector<UnknownEntry> keep = std::move(report_.first_unknown_entries);
      report_.merge(*a);  // counts only: the accumulators hold no examples
      report_.first_unknown_entries = std::move(keep);
    }
    if (report_.program_records == 0) report_.files_without_records.push_back(path_);
  }

  const Clock::time_point t0_ = Clock::now();
  const std::string& path_;
  const InspectOptions& opt_;
  InspectReport report_;
  SkipLog quiet_{false, 0};
  RecordSource source_;
  std::atomic<int64_t> bytes_read_{0};
  std::unique_ptr<SkipLog> trailing_;
  const uint64_t run_ = ++g_run;
  std::mutex acc_mu_;
  std::vector<std::unique_ptr<InspectReport>> accs_;
  FeatureOptions fopt_;
  ReadOptions read_;
  const bool tty_ = ::isatty(2) == 1;
  const double every_ = tty_ ? 0.5 : 5.0;
  double last_ = 0;
  bool printed_ = false;
  NameSet names_;  // program name (hashed, 24 bytes) → line of its first record
};

}  // namespace

InspectReport inspect_file(const std::string& path, const InspectOptions& opt) {
  return FileInspection(path, opt).run();
}

}  // namespace lcm::data
