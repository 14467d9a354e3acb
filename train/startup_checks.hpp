// Startup checks the tools run before any expensive work (reading and featurising the data), so
// that a bad input file, a missing --resume checkpoint or an unwritable experiment.base_path fails
// in the first second with one clear line; and the one-line skip summary of lcm-eval/lcm-predict.
#pragma once
#include <string>

#include "config/config.hpp"
#include "data/cache.hpp"
#include "train/checkpoint.hpp"

namespace lcm::train {

/// Checks data.train_file (when `train`) and data.valid_file (when `valid`), each when not empty:
/// the file is a regular file that can be opened and is not compressed with a format lcm cannot
/// read. Throws lcm::data::DataError "<file>: is a directory, not a data file", "<file>: not a
/// regular file (...); lcm reads data only from regular files: ..." (a pipe, /dev/stdin),
/// "<file> is xz-compressed; lcm reads gzip or plain JSON/JSONL" (bzip2, zstd, lz4, zip, 7z
/// likewise), "<file>: named .gz but is not gzip data (...)" or "cannot open data file <file>:
/// <reason>" (lcm::data::check_input_format).
void check_data_files(const config::Config& c, bool train = true, bool valid = true);

/// Cheap content check of a data file before any long work (opens it and reads up to its first
/// program record, nothing more): throws lcm::data::DataError "<key> <path>: no program record
/// in the file (it is empty or holds only blank lines)" or "<key> <path>: no readable program
/// record (<level/reason count, ...>)" when the reader delivers no record at all; format errors as
/// check_input_format. `key` names the setting, e.g. "data.valid_file". Skips met are not printed.
/// A file with records that all end up skipped is only known after preparing it (prepare_split).
void require_program_records(const std::string& path, const std::string& key);

/// Creates experiment.base_path and (when `weights`) <base>/weights when missing and checks that
/// they are writable directories. Throws std::runtime_error "experiment.base_path <dir>: <reason>"
/// ("experiment.base_path <dir>: a file of that name exists (...)" when it is a non-directory), or
/// "experiment.base_path is empty: ..." when it is empty.
void require_writable_base_path(const config::Config& c, bool weights = true);

/// For lcm-train --resume: throws std::runtime_error "--resume: <file> not found (resume needs
/// the last_model_ and last_optimizer_ files of experiment '<name>')" when paths.last or
/// paths.optimizer is not a regular file.
void require_resume_files(const RunPaths& paths, const std::string& experiment_name);

/// One line for the end of a tool's output: "<tool>: <split>: N programs read, K kept; skipped:
/// program/duplicate_program 1, schedule/negative_time 20" (counts of every skip reason, notes
/// included; "skipped: none" when there is none).
std::string skip_summary_line(const std::string& tool, const std::string& split,
                              const lcm::data::SplitCounts& counts, int64_t programs_kept);

}  // namespace lcm::train
