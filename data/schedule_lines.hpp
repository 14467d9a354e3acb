// JSON Lines with one schedule per line (internal to data/; docs/data-format.md "Line
// granularity"): the cheap top-level scan by which RecordSource (record_source.cpp) tells such a
// line from a whole-program line and groups the consecutive lines of one program, and
// merge_schedule_lines, by which parse_program (program_json.cpp) turns a group into one ordinary
// program record.
#pragma once
#include <cstddef>
#include <string>

#include "data/reader.hpp"
#include "data/skips.hpp"

namespace lcm::data {

/// Bytes of a line that sniff_schedule_line reads at most (16 MiB): a line whose top-level keys
/// are not settled within them is taken as what was seen so far.
constexpr size_t kScheduleSniffBytes = size_t(16) << 20;

/// What sniff_schedule_line finds in one line.
struct LineSniff {
  /// The line holds one schedule of a program: a top-level `schedule` member (shape a), a
  /// top-level `schedule_index` or `schedule_id` member (shape b: with a one-entry
  /// schedules_list), or, without a top-level `schedules_list`, a top-level schedule field
  /// (`execution_times`, `sched_str`, `fusions`, `tree_structure`, `transformations_list`;
  /// shape c).
  bool single_schedule = false;
  /// The text is not one whole JSON object as far as the scan read it (a cut line, a syntax
  /// error; not set when only kScheduleSniffBytes stopped it). RecordSource puts such a line
  /// into the group of the same name, so that merge_schedule_lines names it in the group.
  bool malformed = false;
  /// The top-level `program_name` string as written (escapes left as they are), when the line
  /// is single_schedule or malformed; "" when it has none, it is not a string, or the scan
  /// stopped before it.
  std::string name;
};

/// Classifies one JSONL line by its top-level keys without parsing it: an iterative walk over
/// the members of the top-level object that skips each nested value by bracket depth (strings,
/// escapes included; no recursion, any nesting), at most kScheduleSniffBytes. It stops as soon
/// as the answer is known: at a `schedules_list` of two or more entries seen before any marker
/// (a whole-program line: only the start of its first schedule is read), or once a
/// single-schedule marker and the name are both seen. Malformed text stops the walk (the line
/// is then reported by the parse). Cost: the bytes before the decision, typically the
/// program_annotation and one schedule.
LineSniff sniff_schedule_line(const char* text, size_t n);

/// Turns a one-schedule-per-line group (RawRecord::schedule_line: `group.json` and
/// `group.more_schedule_lines`) into one ordinary program record in `merged`: the JSON object
/// of the program fields (the is_record_key() members but `schedules_list`) of the group's first
/// readable line, followed by `"schedules_list": [...]` of the lines' schedules, copied as
/// their exact text (so numbers are read as in a whole-program line); merged.file, .line (the
/// group's first line: the program's source_line) and .name_hint are the group's. A line's
/// schedule is its `schedule` value (shape a), the one entry of its `schedules_list` (shape b),
/// or the object of its members that are neither program fields nor `schedule_index` /
/// `schedule_id` (shape c). Schedules are in line order; when some line has a top-level
/// `schedule_index` (else `schedule_id`), in the order of that index (a stable sort), so the
/// program's schedule i is the i-th of that order (its schedule_index when they run 0, 1, 2, ...).
/// Each line is validated by RapidJSON's iterative parser (kParseIterativeFlag: no recursion).
/// Skips (file and the line's own number in each), counted in `log`:
///  - "line/malformed_json" (a line that is not one whole JSON value; the parse error and byte),
///    "line/not_an_object": that line is dropped, the rest of the group is read;
///  - "schedule/program_annotation_differs": a later line whose program_annotation text differs
///    byte for byte from the program line's (a line without one is taken as the program's);
///  - "schedule/bad_schedule_line": a line with both `schedule` and `schedules_list`, a
///    `schedules_list` that is not an array of exactly one entry, or a marker key repeated;
///  - "schedule/bad_schedule_index": a schedule_index / schedule_id that is not a non-negative
///    integer (a number or a numeric string), or none on a line of a group where others have one;
///  - "schedule/duplicate_schedule_index": an index an earlier line of the group already has
///    (the earlier line's schedule is kept).
/// Returns false when no line of the group is readable (each logged); then `merged` is unset.
/// A group whose every schedule was dropped gives a record with an empty schedules_list
/// (parse_program skips it as program/empty_schedules_list). Thread-safe.
bool merge_schedule_lines(const RawRecord& group, SkipLog& log, RawRecord& merged);

}  // namespace lcm::data
