// Streaming reader of LOOPerSet (JSON Lines) and legacy Tiramisu (`{program_name: record}` or one
// bare record per file) program files, plain or gzip, into the typed model of data/program.hpp
// (docs/data-format.md, docs/model-spec.md §1). Bad input becomes counted, named skips in a
// SkipLog. Implemented by gzip_stream.cpp (byte stream, input-format checks), record_source.cpp
// (layout, records, line skips) and program_json.cpp (JSON record → Program, with the files
// json_fields.hpp names).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/program.hpp"
#include "data/schedule_forms.hpp"
#include "data/skips.hpp"

namespace lcm::data {

/// One raw program record: its JSON text (the record object, which may or may not include
/// "program_name"), where it came from, and its name when the container gives it.
struct RawRecord {
  std::string json;       // the record's JSON text (one JSONL line, or one member value verbatim)
  std::string file;       // path of the file it was read from
  int64_t line = 0;       // 1-based line where the record starts in the uncompressed text
  std::string name_hint;  // legacy container key, or a name derived from the file name; "" in JSONL
  /// JSON Lines with one schedule per line (docs/data-format.md "Line granularity"): true when
  /// `json` is a line that holds one schedule of a program (sniff_schedule_line: a `schedule`
  /// object, a one-entry `schedules_list` with a `schedule_index` or `schedule_id`, or the
  /// schedule's own fields at the top level). The record is then the group of consecutive such
  /// lines with the same program_name: `json` and `line` are its first line, the others follow
  /// below; parse_program merges the group into one program (merge_schedule_lines). False for
  /// every other record.
  bool schedule_line = false;
  /// The group's further lines, in file order (empty for a group of one line and for every
  /// other record); at most kMaxRecordBytes (1 GiB) for the whole group: a longer run of lines
  /// of one program continues in the next record, a duplicate_program.
  std::vector<std::string> more_schedule_lines{};
  /// The 1-based line numbers of more_schedule_lines (same length).
  std::vector<int64_t> more_schedule_line_numbers{};
};

/// How parse_program reads schedules and times (the data.* keys of the same names;
/// docs/data-format.md "Schedule forms", "Times").
struct ReadOptions {
  ScheduleSource schedule_source = ScheduleSource::Auto;  // data.schedule_source
  ScheduleCheck schedule_check = ScheduleCheck::Report;   // data.schedule_check
  int loop_level_base = 0;  // typed-list loop levels: 0 or 1 (data.loop_level_base, resolved)
  std::string machine;      // data.machine: "" = the only machine of a machine-keyed time object
};

/// Streams raw records from a file: gzip or plain (detected by the magic bytes 1f 8b, so a gzip
/// file need not be named .gz; a file named .gz without them is a DataError, see
/// check_input_format), in one of three layouts, chosen from the first lines of the uncompressed
/// text (as far as the first read buffer, 256 KiB to 1 MiB, holds them):
///  - JSON Lines: one program object per line, or one schedule per line (a line that holds
///    the program fields and ONE schedule: a `schedule` object, a one-entry `schedules_list`
///    with a `schedule_index`/`schedule_id`, or the schedule's fields next to
///    program_annotation; told apart by a cheap bounded scan of the line's top-level keys,
///    sniff_schedule_line, that reads a whole-program line only up to the start of its second
///    schedule). Consecutive one-schedule lines with the same program_name are one record
///    (RawRecord::schedule_line, more_schedule_lines; one line of lookahead, memory bounded by
///    the largest program); a later run of the same name is a second record (prepare skips it
///    as program/duplicate_program); both kinds of line may be mixed in one file. Chosen when the
///    text does not start with `{` (e.g. `[` or text); when the first line is one whole JSON value
///    that is not a legacy container (a record, or anything else: a `{"note": ...}` header, `{}`);
///    when the first line starts with `{` and a record field ("program_name", "program_annotation",
///    "schedules_list", "filename", ...) and ends with `}` or runs past the buffer; or when a
///    later line is one whole program record on its own (a JSON object with a record field) and
///    the line before it does not end with ':' (a legacy `"name":` line). So bad first lines (cut,
///    malformed, headers) are each one counted line skip ("malformed_json",
///    "not_a_program_record", "not_an_object") and the rest is still read.
///    Read line by line (a line may be many MB); blank lines are ignored; each whole-program line
///    is one record.
///  - legacy container `{program_name: record, ...}`: the first line is one whole object with a
///    member whose value is a program record (all on one line; several such objects may follow,
///    e.g. one `{name: record}` per line), or the first line is not a whole value and the first
///    key (on any line) is not a record field (pretty-printed, `{"name":` ...), and no later line
///    is a record as above. Each top-level member value is validated by RapidJSON's SAX reader
///    over a zlib input stream and captured verbatim as one record with name_hint = key.
///  - a bare record (first key is a record field, but the first line is not a whole object, e.g.
///    the autoscheduler's `<function>_explored_schedules.json`): the whole top-level object is one
///    record (several concatenated objects give several records); name_hint = the file name
///    without `_explored_schedules`, `.json`, `.gz` (a "program_name" field inside wins).
/// Memory is bounded by the largest record (records over 1 GiB are skipped), never the file.
/// gzip is decoded with zlib's z_stream inflate (multi-member files are read member after
/// member), so every byte decoded before a corruption or truncation is kept: all complete
/// records before that point are delivered, then one skip names the partial last record.
/// Container problems are counted in `log` at level "line": "truncated_gzip" (the partial last
/// record, or a cut trailer after complete records; then end of file), "corrupt_gzip" (bad CRC
/// or length trailer, bad deflate data, trailing garbage; same placement),
/// "malformed_json" (legacy/bare layouts stop at the first syntax error: there is no safe place
/// to resume; a bad JSONL line is reported by parse_program), "record_too_long".
/// Single-threaded: one RecordSource per reading thread.
/// Throws DataError (one line naming the file) when the file cannot be opened or read at all, is
/// a directory or not a regular file, or is compressed with a format other than gzip
/// (check_input_format).
class RecordSource {
 public:
  RecordSource(const std::string& path, SkipLog& log);
  ~RecordSource();
  RecordSource(const RecordSource&) = delete;
  RecordSource& operator=(const RecordSource&) = delete;
  /// Fills `out` with the next record; false at end of file (or after a fatal container error,
  /// which has been logged).
  bool next(RawRecord& out);
  /// Sends the skips of later next() calls to `log` instead of the constructor's (additive; the
  /// pipeline gives each record its own log, replayed in record order, so that container skips
  /// print in line order with the parse skips). `log` must outlive those calls.
  void set_log(SkipLog& log);
  /// next() as the record pipelines (prepare, lcm-inspect) read: the skips met on the way go to
  /// a new log `out_log` (replayed before the record's own skips); at end of file false, with
  /// that log moved to `trailing` (replayed after the last record).
  bool next_with_log(RawRecord& out, std::unique_ptr<SkipLog>& out_log,
                     std::unique_ptr<SkipLog>& trailing);
  /// Bytes of the file consumed so far (compressed bytes for gzip), for progress.
  int64_t compressed_bytes_read() const;
  /// Size of the file on disk in bytes.
  int64_t file_size() const;
  /// True for the JSON Lines layout.
  bool is_jsonl() const;
  /// True when the file starts with the gzip magic bytes (additive to the agreed API).
  bool is_gzip() const;
  /// Bytes of uncompressed JSON text consumed so far (for throughput reports; additive).
  int64_t uncompressed_bytes_read() const;
  /// Records met in the file but not delivered by next() (each has one line-level skip): a
  /// partial last record cut by gzip corruption/truncation, a record over 1 GiB, a malformed
  /// legacy/bare record. records delivered + records_skipped() = records in the file.
  int64_t records_skipped() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The name of an unsupported compression format recognised by the first `n` bytes `m` of a file
/// (magic bytes: "xz", "bzip2", "zstd", "lz4", "zip", "7z"), or nullptr (gzip, plain text, other).
const char* unsupported_compression(const unsigned char* m, size_t n);

/// Throws DataError "<path>: is a directory, not a data file", "<path>: not a regular file (a
/// pipe, device or socket); lcm reads data only from regular files: ..." (a file is opened more
/// than once and the cache is keyed on its size and time, so /dev/stdin or `<(zcat f)` cannot be
/// read), or "cannot open data file <path>: <why>" when it does not exist. Returns the file's
/// size in bytes.
int64_t require_regular_data_file(const std::string& path);

/// require_regular_data_file, then
/// throws DataError "<path> is xz-compressed; lcm reads gzip or plain JSON/JSONL" (likewise for
/// the other formats of unsupported_compression), "<path>: named .gz but is not gzip data (...)"
/// when the name ends in .gz (any case) but the file does not start with the gzip magic bytes
/// 1f 8b (also when it is empty), or "cannot open data file <path>: <why>".
/// RecordSource calls it; tools call it up front for every input before writing anything.
void check_input_format(const std::string& path);

/// True for the expression types a computation's expression_representation may hold
/// (data-format.md): access, value, add, sub, mul, div, sqrt, max, min, minus, cast.
bool is_known_expr_type(const std::string& type);
/// Those types as one comma-separated line (for messages).
std::string known_expr_types_text();

/// Parses one record into a Program (model-spec §1; data-format.md). Returns nullopt after logging
/// one counted, named skip (file, line, program name when known):
///  - level "line": "malformed_json" (RapidJSON error and offset in detail), "not_an_object",
///    "not_a_program_record" (an object with none of the record fields, e.g. a JSONL header line
///    `{"note": ...}`; its first key in detail);
///  - level "program": "missing_program_annotation", "empty_schedules_list" (absent, null or []),
///    "missing_absolute_order", "duplicate_absolute_order", "bad_field" (a wrong-typed or missing
///    required field; the field path, e.g. "program_annotation.computations.comp00.iterators", is
///    in detail, a run of one segment written once with a count, ".children[0]×257"; numbers are
///    shown by value: "expected an integer, got 5.5"), "unknown_expr_type" (an expr_type outside
///    is_known_expr_type(); type and path in detail), "bad_name" (a program, iterator or
///    computation name that is empty, not valid UTF-8 or holds a control character
///    U+0000..U+001F; the event's program is the name escaped, "\xff", the byte offset in
///    detail), "duplicate_key" (a key repeated in one object anywhere in the record; its path,
///    e.g. ".schedules_list[3].comp00", in detail), "bad_tree" (schedule 0's tree_structure
///    fails loop_tree_problem(), or without one the iterators fail iterator_tree_problem(); the
///    reason in detail).
/// A one-schedule-per-line group (RawRecord::schedule_line) is first merged into one record by
/// merge_schedule_lines (data/schedule_lines.hpp), each skip naming its own line: "line"
/// "malformed_json" / "not_an_object" (that line is dropped, the group's other lines are read);
/// level "schedule": "program_annotation_differs" (a later line's program_annotation text is
/// not the first line's), "bad_schedule_line" (`schedule` together with `schedules_list`, a
/// `schedules_list` not of exactly one entry, a marker key repeated), "bad_schedule_index" (a
/// schedule_index / schedule_id that is not a non-negative integer, or none where other lines of
/// the program have one), "duplicate_schedule_index" (the earlier line's schedule is kept).
/// Notes (level "note", the program is kept): "missing_program_name" (JSONL record without a name:
/// named "<file>:<line>"), "missing_comp_schedule" (one per program: some schedules have no entry
/// for some computation; a default CompSchedule is used).
/// Notes also: "schedule_forms_disagree" (one per program: with opt.schedule_check = Report, the
/// number of schedules whose forms disagree and the first with both forms; the schedule is kept
/// from the chosen form).
/// Schedules: the transformations come from the form opt.schedule_source selects (structured
/// per-computation dicts, the schedule-level typed transformations_list, or sched_str;
/// docs/data-format.md "Schedule forms") and are cross-checked against the other forms present
/// (Program::form_counts counts both). Times may be a number, a numeric string, a list or a
/// machine-keyed object (opt.machine); an object of several machines with opt.machine empty
/// throws DataError "<file>:<line>: execution_times holds times of several machines (a, b);
/// choose one with data.machine=NAME".
/// Numeric strings ("4", "0.08") are accepted wherever numbers are expected; integer bounds are
/// stored as decimal text. Unknown fields are ignored, except a computation's schedule entry of
/// unknown fields only (unknown_schedule_fields) and a non-empty transformation field of an
/// earlier generation (interchange_dims, reversed_dim, skewing, transformation_matrix,
/// transformation_matrices) without a non-empty transformations_list beside it
/// (unread_transformation_fields). Computations are sorted by absolute_order.
/// A malformed schedule is kept with Schedule::parse_problem set ("bad_execution_times",
/// "bad_transformation" (a vector that is not 16 integers), "bad_tiling", "bad_tile_factor" (a
/// tiling factor ≤ 0), "bad_unroll_factor" (an unrolling factor < 0; 0 means not unrolled, as in
/// the reference), "bad_field", "bad_tree" (a later schedule's own tree_structure fails
/// loop_tree_problem()), "bad_sched_str" (a sched_str that is not valid UTF-8 or holds a control
/// character; or, read as the schedule's form, a term lcm cannot read), "unknown_schedule_fields",
/// "unread_transformation_fields", "unknown_transformation_type", "bad_loop_level",
/// "unknown_computation", "bad_transformation_entry", "missing_schedule_form",
/// "fusion_level_unknown", "schedule_forms_disagree" (opt.schedule_check = Skip)) so that schedule
/// indices stay those of the file; execution_times null/[] give an empty list and −1 values are
/// kept as they are (featurize drops them). Every parse is iterative and every walk over the DOM is
/// depth-limited or uses an explicit stack: no input overflows the stack. Throws only DataError in
/// strict mode. Thread-safe (per-thread scratch buffers): records may be parsed by several workers
/// at once.
std::optional<Program> parse_program(const RawRecord& rec, SkipLog& log,
                                     const ReadOptions& opt = {});

/// Parses one schedule object (the JSON text of one schedules_list entry) of the already parsed
/// program `p`, as parse_program parses each of its schedules (the same forms, checks and
/// parse_problem reasons, and a schedule's own tree_structure checked by loop_tree_problem:
/// "bad_tree"); unknown fields are ignored. The text itself: "malformed_json" (RapidJSON's error
/// and offset in parse_detail), "bad_field" (not an object), "duplicate_key". A computation of
/// `p` without an entry gets the default (untransformed) schedule. Never throws for bad text
/// (the problem is in parse_problem); throws DataError as read_times does for a machine-keyed
/// time object of several machines with opt.machine empty. `p` is updated as parse_program
/// updates it (form_counts, typed-entry counts). For lcm-serve, which parses a program once and
/// its candidate schedules one query at a time.
Schedule parse_schedule_json(const std::string& json, Program& p, const ReadOptions& opt = {});

/// How the loop levels of a file's typed transformations_list entries count.
struct LoopLevelBaseChoice {
  int base = 0;          // 0 or 1
  int64_t zero = 0;      // levels equal to 0 seen by the scan (prove 0-based)
  int64_t at_depth = 0;  // levels equal to a computation's depth (prove 1-based)
  std::string text;      // for summaries, e.g. "1-based (detected: 312 levels equal a
                         // computation's depth)"; "" when the scan met no typed entry
};

/// data.loop_level_base for `path`: Zero/One as set; Auto scans the first records (at most 2,000,
/// and no further than 20 records past the last one with a typed list) with parse_program and takes
/// 1-based when some level equals the depth of a computation it applies to, 0-based when some
/// level is 0 or when the data proves neither (the text says "assumed"). Throws DataError when
/// the scan finds both proofs ("levels are both 0 and equal to a depth: set
/// data.loop_level_base"), or what parse_program throws. The scan's skips are not logged.
LoopLevelBaseChoice choose_loop_level_base(const std::string& path, LoopLevelBase setting,
                                           const ReadOptions& opt);

/// Every program of a file, in file order (for tests and small files). Throws DataError when the
/// file cannot be opened; bad records are skipped into `log` as by RecordSource / parse_program.
std::vector<Program> read_all_programs(const std::string& path, SkipLog& log,
                                       const ReadOptions& opt = {});

}  // namespace lcm::data
