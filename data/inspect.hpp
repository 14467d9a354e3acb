// What a LOOPerSet / Tiramisu program file holds, and what lcm makes of it (lcm-inspect): layout,
// record/program/schedule counts equal to lcm-prepare's "read" counts, key histograms with the
// keys lcm does not read marked, the schedule forms (docs/data-format.md "Schedule forms"), time
// shapes, loop-level base evidence of typed transformations, line granularity, and the skips
// parse_program (and, optionally, featurize) reports.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/reader.hpp"
#include "data/skips.hpp"

namespace lcm::data {

/// Version of the JSON report of inspect_json (its "version" field); raised when a field changes
/// meaning or is removed.
constexpr int kInspectReportVersion = 1;

/// Whether lcm reads a key (the tables of inspect_keys.cpp, after docs/data-format.md).
enum class KeyUse {
  Read,     // parse_program reads it
  Ignored,  // documented, and ignored by lcm (node_name, memory_size, legality_check, ...)
  Unknown,  // not in docs/data-format.md: ignored, and perhaps information lcm misses
};
/// "read", "ignored", "unknown".
const char* key_use_name(KeyUse u);

/// Key → count. At most kMaxHistogramKeys distinct keys are kept; further distinct keys are
/// counted under "(other keys)" (a hostile file cannot grow it without bound).
using Histogram = std::map<std::string, int64_t>;
constexpr size_t kMaxHistogramKeys = 10000;

/// A per-computation schedule entry that holds only keys lcm does not know (transformation
/// information lcm would otherwise ignore), e.g. `{"transformations": [...]}`.
struct UnknownEntry {
  std::string file;
  int64_t line = 0;
  std::string program;    // program_name, or "" when the record has none
  int64_t schedule = -1;  // index in schedules_list (or schedule_index of a one-schedule line)
  std::string computation;
  std::vector<std::string> keys;  // its keys, in file order
};

/// The inspection of one file, or the sum over several (files > 1).
struct InspectReport {
  std::string file;   // path; "" for a total
  int64_t files = 1;  // files summed
  Histogram layouts;  // "JSON Lines, gzip" / "legacy container, plain" / "bare record, ..." → files
  int64_t records = 0;             // records in the file: delivered + skipped by the reader
  int64_t compressed_bytes = 0;    // file size on disk
  int64_t uncompressed_bytes = 0;  // JSON text (= compressed_bytes for a plain file)

  // lcm's reading, equal to lcm-prepare's SplitCounts for the same file (data/prepare.cpp);
  // all 0 (and absent from the JSON report) when read is false.
  bool read = true;                       // parse_program was run (InspectOptions::read)
  int64_t programs_read = 0;              // records parse_program turns into a Program
  int64_t schedules_read = 0;             // their schedules + those of countable skipped records
  int64_t records_skipped_by_reader = 0;  // records - programs_read
  int64_t skipped_records_counted = 0;    // skipped records whose schedules_list could be counted
  Histogram reader_skips;  // "level/reason" → count: container, parse_program, duplicate_program
  bool features = false;   // featurize was run (the fields below are filled)
  int64_t programs_featurized = 0;  // before the footprint rule (lcm-prepare's featurized count)
  int64_t schedules_featurized = 0;
  Histogram feature_skips;  // "level/reason" → count from featurize
  Histogram forms_read;  // Program::form_counts summed ("read/structured", "check/sched_str/agree",
                         // "disagree/<kind>", ...): what lcm-prepare's summary says
  std::string loop_level_base_used;  // how lcm counts typed loop levels (choose_loop_level_base)
  /// Machine names of records whose times are keyed by several machines while no machine is
  /// chosen (lcm-prepare stops at the first such record; here they are counted): "a100, v100"
  /// → records.
  Histogram several_machines;
  std::vector<SkipEvent> first_skips;  // the first kInspectExamples skips (notes left out)

  // What the file holds (every record that is a JSON object with a record field).
  int64_t program_records = 0;  // JSON objects with a record field (docs/data-format.md)
  /// The files (of those summed) that hold no program record at all: random bytes, an empty
  /// file, a safetensors file, JSON that is not LOOPerSet. Filled by inspect_file.
  std::vector<std::string> files_without_records;
  int64_t schedules_in_file = 0;  // schedule objects: schedules_list entries, `schedule` objects,
                                  // top-level schedule fields of one-schedule lines
  int64_t computations_in_file = 0;
  Histogram top_keys, annotation_keys, computation_keys;  // program, program_annotation,
                                                          // program_annotation.computations.<c>
  Histogram schedule_keys;    // schedules_list[i] (and `schedule`) keys; a computation's name is
                              // counted as "<computation>"
  Histogram comp_entry_keys;  // keys inside those per-computation entries

  // Schedule forms (a schedule may carry several).
  int64_t form_structured = 0;   // ≥ 1 per-computation entry with a key lcm reads
  int64_t form_typed = 0;        // a schedule-level `transformations_list` array
  int64_t form_sched_str = 0;    // a `sched_str` string
  int64_t form_none = 0;         // none of the three
  Histogram sched_str_dialects;  // sched_str_dialect_name → count ("(not a string)" for others)
  Histogram form_combinations;   // "structured+sched_str" → schedules
  int64_t typed_entries = 0;
  Histogram typed_types;  // entry `type` → count ("(missing)", "(not a string)",
                          // "(not an object)" for entries without a string type)
  Histogram typed_entry_keys;
  int64_t typed_naming_computations = 0;  // entries with a `computations` list
  int64_t typed_naming_comps = 0;         // entries with a `comps` list
  int64_t unknown_only_entries = 0;
  std::vector<UnknownEntry> first_unknown_entries;  // the first kInspectExamples

  // Times: "list", "number", "numeric string", "object" (machine-keyed), "null", "missing",
  // "other" (a bool, a non-numeric string).
  Histogram execution_time_shapes, initial_time_shapes;
  Histogram execution_time_machines, initial_time_machines;  // keys of the object form

  // Loop-level base of typed entries: an entry with a level 0 proves 0-based; one with a level
  // equal to the depth of the computations it names (the program's deepest computation when it
  // names none) proves 1-based.
  int64_t level_zero_based = 0;
  int64_t level_one_based = 0;

  // Line granularity (per program record).
  int64_t lines_whole_program = 0;  // a schedules_list with ≥ 1 entries
  int64_t lines_single_schedule = 0;
  Histogram single_schedule_forms;  // "schedule object", "one-entry schedules_list + index",
                                    // "top-level schedule fields" → lines
  int64_t lines_other = 0;          // a program record with no schedule at all

  /// "0-based (proved by N entries)", "1-based (proved by N entries)", "contradictory (both
  /// seen: N entries prove 0-based, M prove 1-based)" or "not determined (0-based assumed)".
  std::string loop_level_verdict() const;
  /// What lcm does not understand, one line each: first "no LOOPerSet record found in F (...)"
  /// when a file holds no program record, then the schedule forms ("3 sched_str of dialect
  /// unknown", "2 typed entries of unknown type (foo 2)", "1 per-computation entry with only
  /// unknown keys", "contradictory loop-level evidence ..."); empty when there are records and
  /// every form is understood.
  std::vector<std::string> problems() const;
  /// Adds another report's counts (totals over files); examples are kept up to the limit.
  void merge(const InspectReport& o);
};

/// Examples kept per report (first skips, first unknown-key entries).
constexpr size_t kInspectExamples = 10;

/// Options of inspect_file.
struct InspectOptions {
  bool read = true;  // run parse_program (lcm's read counts and skips); false: the walk only
  bool features =
      false;        // also featurize (default FeatureOptions), as lcm-prepare does; needs read
  int threads = 0;  // worker threads; 0 = hardware concurrency
  /// Record bytes read and not yet counted, across the reader and the workers (as
  /// PrepareOptions::max_bytes_in_flight; a heavier record is read alone); 0 = no byte bound.
  int64_t max_bytes_in_flight = int64_t(256) << 20;
  bool progress = false;  // progress lines on stderr (every 0.5 s on a TTY, else every 5 s)
  /// How parse_program reads schedules and times, as lcm-prepare would with the same data.* keys
  /// (read.loop_level_base is set from loop_level_base per file, as lcm-prepare does).
  ReadOptions read_options;
  LoopLevelBase loop_level_base = LoopLevelBase::Auto;
  std::string progress_label = "lcm-inspect";
};

/// Inspects one file: streams it with RecordSource (one reader thread) and inspects, parses
/// (parse_program with default ReadOptions, unless opt.read is false: it costs about 2/3 of the
/// CPU time) and optionally featurises each record on
/// opt.threads workers, merged in record order. Duplicate program names are handled as
/// read_features does (program/duplicate_program; the later record's own skips are not counted),
/// so every count of lcm's reading equals lcm-prepare's for the same file. Throws DataError when
/// the file cannot be read at all (check_input_format).
InspectReport inspect_file(const std::string& path, const InspectOptions& opt = {});

/// Adds what one record holds (keys, forms, times, loop levels, granularity) to `r`; no
/// parse_program. The record's JSON is parsed with RapidJSON's iterative parser (no recursion);
/// a record that is not a JSON object with a record field adds nothing. Thread-compatible.
void inspect_record(const RawRecord& rec, InspectReport& r);

/// The human report of one file or a total (multi-line, ends with a newline).
std::string inspect_text(const InspectReport& r);

/// The JSON report: {"version", "tool", "files": [...], "total": {...}, "understood",
/// "problems"} with every number of the reports (RapidJSON writer, pretty-printed).
std::string inspect_json(const std::vector<InspectReport>& files, const InspectReport& total);

}  // namespace lcm::data
