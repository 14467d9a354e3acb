// Where lcm's warnings and notes go: one line at a time to a process-wide sink, stderr unless
// set otherwise. The tools keep stderr; liblcm points its own copy at the host's callback (or
// nowhere), so that a library never writes to its host's stderr.
#pragma once
#include <string>

namespace lcm {

/// Receives one line of text without its newline; `user` is the pointer given to set_log_sink.
using LogSink = void (*)(const char* line, void* user);

/// Routes log_line to `sink` with `user` (nullptr: lines are dropped). Thread-safe; the sink may
/// be called from any thread that logs, from several at once.
void set_log_sink(LogSink sink, void* user);

/// The default sink: `line` and a newline on stderr.
void stderr_log_sink(const char* line, void* user);

/// Sends one line (a warning or a note; no trailing newline) to the current sink.
void log_line(const std::string& line);

}  // namespace lcm
