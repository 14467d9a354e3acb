// The request streams lcm-serve speaks (docs/tools.md "lcm-serve"): the Tiramisu/LOOPer
// autoscheduler's model-process protocol (3 lines per query), its older 2-line form, and a
// batched JSON Lines protocol, each over a pair of file descriptors (stdin/stdout, or one
// connection of the Unix-domain socket).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "serve/scorer.hpp"

namespace lcm::serve {

/// How queries arrive and answers leave (lcm-serve --protocol).
///  - Looper: per query three lines, each one JSON object: the program annotation, the
///    untransformed schedule (later queries: with "execution_times" appended), the candidate
///    schedule; answer: one line, the predicted speedup (%.9g, the float's full precision).
///    The Tiramisu autoscheduler of the LOOPer branch (tiramisu_evaluator.cpp) speaks it.
///  - Legacy: per query two lines, program and candidate schedule (Tiramisu master); the loop
///    tree comes from the program's iterator links. Answer as Looper.
///  - Jsonl: per request one line {"program": {...}, "schedules": [{...}, ...]} with an optional
///    "untransformed": {...}; answer one line {"speedups": [...]} (an unscorable schedule: the
///    error value, and "errors": [{"index": i, "reason": ..., "detail": ...}]), or {"error":
///    "reason: detail"} when the request or its program cannot be scored ("request_too_large:
///    ..." when it cannot fit the memory bound). The schedules of a request in one level-batched
///    forward, or in several when one would pass the memory bound. Learning during search
///    (Scorer::observe) is Jsonl's only: {"request": "observe", "program": {...}, "schedule":
///    {...}, "execution_times": [ms, ...]} with optional "untransformed" and "untransformed_time"
///    (ms) answers {"observed": {"measured_speedup", "predicted_speedup", "corrected_speedup",
///    "offset", "scale", "observations", "untransformed"}}; {"request": "reset"} (optional
///    "program") answers {"reset": true|false}; "request": "score" (the default) is the request
///    above. Looper and Legacy stay answer-only.
enum class Protocol { Looper, Legacy, Jsonl };

/// "looper" | "legacy" | "jsonl" → Protocol; throws std::invalid_argument naming the choices.
Protocol parse_protocol(const std::string& name);
const char* protocol_name(Protocol p);

/// Limits of one request stream.
class QueryBatcher;

struct StreamLimits {
  /// Longest line read (bytes, without the newline). A longer line is read to its end and
  /// dropped (memory stays bounded) and counts as a malformed line: "line_too_long".
  size_t max_line_bytes = size_t(64) << 20;
  /// Looper and legacy queries are scored through it (with other connections' queries,
  /// serve/query_batcher.hpp) when not nullptr; jsonl requests are not. Not owned.
  QueryBatcher* batcher = nullptr;
};

/// Most schedules one Jsonl request may hold; a larger one is answered {"error":
/// "too_many_schedules: ..."}. Memory is bounded apart from it (ScorerOptions::max_request_bytes:
/// a request is scored in forwards that fit).
constexpr size_t kMaxRequestSchedules = 4096;

/// What one stream served.
struct StreamStats {
  int64_t queries = 0;       // answers written (a Jsonl request counts once)
  int64_t schedules = 0;     // schedules scored or answered with the error value
  int64_t errors = 0;        // answers that were (or held) the error value
  double busy_seconds = 0;   // time spent scoring (parse, features, forward), not waiting
  bool ended_by_eof = true;  // false: stopped by `stop`, a read error or a write error
  /// Why the stream ended early on an I/O failure other than the client leaving (EPIPE,
  /// ECONNRESET): "cannot read the queries: Is a directory", "cannot write the answers: No space
  /// left on device"; "" otherwise.
  std::string io_error;
};

/// Serves one request stream: reads queries from `in_fd` (blocking reads, retried on EINTR
/// unless `stop` is set), answers each on `out_fd` (one write per answer line, so a pipe or
/// socket client sees it at once), until end of input, `stop`, or a write error (the client went
/// away: EPIPE; SIGPIPE must be ignored by the caller). One query at a time: a stream holds at
/// most one request being scored, and reads the next only after answering (its "queue" is
/// that one request plus the kernel's pipe or socket buffer). A query that cannot be scored
/// (malformed JSON, a line longer than limits.max_line_bytes, a program or schedule that the
/// feature rules reject, depth > 5, > 15 accesses, ...) is answered with kErrorSpeedup and one
/// line to `log` ("query N: reason: detail"); serving continues. Input ending inside a query
/// (a partial group of lines, or a last line without its newline) answers nothing for it.
/// A non-finite prediction (broken weights) is reported like a bad query. Never throws for bad
/// input.
StreamStats serve_stream(Scorer& scorer, Protocol protocol, int in_fd, int out_fd,
                         const std::atomic<bool>& stop, const StreamLimits& limits,
                         const std::function<void(const std::string&)>& log);

/// The answer line of a Jsonl request `line` (without the newline), and whether it held the error
/// value anywhere. For serve_stream and tests.
std::string answer_jsonl(Scorer& scorer, const std::string& line, int64_t& schedules,
                         bool& had_error, std::string& error_text);

}  // namespace lcm::serve
