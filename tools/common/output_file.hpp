// Startup checks of an output file a tool writes at the end (lcm-predict --out): its folder is
// created and a file can be created beside it, so a bad path fails before the work, not after;
// and it is not one of the tool's input files (which the output would overwrite).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lcm::tools {

/// Creates the missing parent folders of `path` and test-creates (then removes) the temp file
/// lcm::temp_path_for(path) that lcm::atomic_write_file will write there. Throws
/// std::runtime_error "cannot write <path>: <reason>" (the reason of the failed folder creation,
/// or lcm::temp_create_reason of the failed open, e.g. "Not a directory", "Permission denied
/// (cannot create a file in <folder>: is it writable?)", or "it is a directory").
/// The folders it created stay (lcm::atomic_write_file would create them too). First removes the
/// temp files of `path` that killed processes of this host left (lcm::remove_stale_temps).
/// Also refuses, first, what lcm::require_regular_output refuses: an empty path, or a path that
/// names a symbolic link, FIFO, device, socket or directory ("cannot write <path>: it is a
/// symbolic link (lcm replaces only regular files, ...)").
void require_writable_output(const std::string& path);

/// The usage check of an output option that was given: `given` with an empty `path` (--out '')
/// throws ConfigError (exit 2) "<option>: an empty file name (omit <option> for <without>)", so
/// an empty value is never read as the option's absence. No-op when not given.
void require_output_option(const std::string& option, bool given, const std::string& path,
                           const std::string& without);

/// True when paths `a` and `b` name the same file: std::filesystem::equivalent when both exist
/// (symbolic and hard links included), else their weakly_canonical forms are equal. Never throws.
bool same_file(const std::string& a, const std::string& b);

/// Refuses an output path that is one of the inputs: `inputs` are (what, path) pairs such as
/// ("data.valid_file", "valid.jsonl"); empty paths are ignored. Throws ConfigError (exit 2)
/// "<option> <out> is the same file as <what> (<path>): refusing to overwrite an input".
void require_output_not_input(const std::string& option, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& inputs);

/// require_output_not_input for each output of a run: `outputs` are (what, path) pairs such as
/// ("the run's log", "<base>/log_lcm.csv"). Called before any data is read, so an input that sits
/// at an output path (eval.input_file=<base>/eval_lcm.csv) is refused before it is replaced.
void require_outputs_not_inputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                                const std::vector<std::pair<std::string, std::string>>& inputs);

/// The lower-cased extension of `path` (".csv" for "X.CSV"), "" when there is none.
std::string lower_extension(const std::string& path);

}  // namespace lcm::tools
