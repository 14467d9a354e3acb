// Counted, named reasons for every program or schedule that is not kept, so that nothing is
// dropped silently: the first few are printed with file, line and program, all are counted.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace lcm::data {

/// "<n> <noun>" with the noun's plural unless n is 1 or -1: count_of(1, "epoch") = "1 epoch",
/// count_of(3, "epoch") = "3 epochs"; `plural` overrides the default noun + "s".
std::string count_of(int64_t n, const std::string& noun, const std::string& plural = "");

/// Thrown when `data.strict=true` and a skip happens (the message names file, line, program and
/// reason), and for unrecoverable input errors (unreadable file).
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One skip event.
struct SkipEvent {
  std::string level;   // "line", "program", "schedule", "footprint", or "note" (kept, but odd)
  std::string reason;  // stable short name, e.g. "malformed_json", "depth_gt_5"
  std::string file;
  int64_t line = 0;
  std::string program;  // may be empty when the program name could not be read
  int64_t schedule = -1;
  std::string detail;  // free text for the human
};

/// True for the events data.strict never stops on: they are policy, not malformed input —
/// level "note" (kept data), level "footprint" (small footprint groups, docs/model-spec.md §3.11),
/// level "fold" (programs of another fold of a cross-fitted calibration, prepare.hpp) and the
/// schedule reasons "no_execution_times", "negative_time", "zero_time" (ordinary failed
/// runs, docs/data-format.md).
bool strict_exempt(const std::string& level, const std::string& reason);

/// Thread-safe counter of skip events by (level, reason). Prints the first `print_limit`
/// events to stderr, then "lcm: (further skips are counted, not printed)" once when event
/// print_limit + 1 arrives (never after exactly print_limit events); notes (level "note") are
/// printed under a budget of their own ("lcm: (further notes are counted, not printed)"), so that
/// notes never hide the first dropped data; with strict == true the first event that is not
/// strict_exempt() throws DataError.
class SkipLog {
 public:
  explicit SkipLog(bool strict = false, int print_limit = 10)
      : strict_(strict), limit_(print_limit) {}
  void add(const SkipEvent& e);
  /// Count for one reason at one level (0 if never seen).
  int64_t count(const std::string& level, const std::string& reason) const;
  /// Total events at one level.
  int64_t total(const std::string& level) const;
  /// All counts, keyed "level/reason".
  std::map<std::string, int64_t> counts() const;
  /// Events kept for inspection (the first 1000).
  std::vector<SkipEvent> events() const;
  /// Adds `n` events of (level, reason) to the counts without printing them or keeping events
  /// (for a summary count such as note/duplicate_program_name; the caller prints one line).
  /// With strict, a non-exempt reason throws DataError.
  void add_count(const std::string& level, const std::string& reason, int64_t n);
  /// Adds another log's counts (used to merge worker logs).
  void merge(const SkipLog& other);
  /// Human-readable multi-line summary ("  program/depth_gt_5: 3").
  std::string summary() const;
  bool strict() const { return strict_; }
  void set_quiet(bool q) { limit_ = q ? 0 : limit_; }

 private:
  mutable std::mutex mu_;
  bool strict_;
  int limit_;
  int64_t printed_ = 0;        // events printed other than notes
  int64_t printed_notes_ = 0;  // notes printed
  std::map<std::string, int64_t> counts_;
  std::vector<SkipEvent> events_;
};

}  // namespace lcm::data
