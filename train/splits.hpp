// Glue between the configuration and data/prepare.hpp: which options a split is prepared with,
// and where its cache lives (<experiment.base_path>/cache/<split>.lcmb). Used by lcm-prepare and
// lcm-train.
#pragma once
#include <string>

#include "config/config.hpp"
#include "data/prepare.hpp"

namespace lcm::train {

/// The PrepareOptions of split "train" (data.train_file) or "valid" (data.valid_file) under
/// config `c`: feature switches, batching, max_programs, workers, strictness, and the cache folder
/// <experiment.base_path>/cache ("" when data.cache=false). With c.data.train_folds active, the
/// training split keeps those programs only and is cached as train_fold<k>of<K> /
/// train_without_fold<k>of<K> (k 1-based); with c.data.valid_folds active (data.cv_folds), the
/// validation split keeps its fold and is cached as valid_fold<k>of<K>. Relative paths stay
/// relative to the current directory. Throws config::ConfigError for another split name.
lcm::data::PrepareOptions prepare_options(const config::Config& c, const std::string& split);

/// Creates <experiment.base_path>/cache (when data.cache=true) and checks that it is writable,
/// so that a bad base_path fails before any work. Returns the folder ("" when the cache is off).
/// Throws std::runtime_error "cannot create cache folder X: reason" (or "... is not writable";
/// "X: a file of that name exists (...)" when X is an existing non-directory).
std::string ensure_cache_folder(const config::Config& c);

/// The line a tool prints on stderr when an existing cache of a split was not valid and was
/// rebuilt: "<tool>: <split>: cache rebuilt (<reason>)" (PreparedSplit::cache_note: "truncated",
/// "corrupt (checksum mismatch)", "config changed: ...", ...), the line lcm-prepare prints; ""
/// when `s` came from the cache, the cache is off, or there was no cache file yet (a first
/// build, which lcm-train does not announce).
std::string cache_rebuilt_line(const std::string& tool, const std::string& split,
                               const lcm::data::PreparedSplit& s);

/// prepare_split(prepare_options(c, split)) with progress on stderr when `progress`, printing
/// cache_rebuilt_line("lcm-train", split, ...) when the cache was rebuilt. Programs come back
/// compact (their rows placed later by the trainer) and without their sched_str (lcm-train
/// prints none).
/// Throws config::ConfigError when the split's file path is empty; DataError / std::runtime_error
/// as prepare_split.
lcm::data::PreparedSplit prepare_from_config(const config::Config& c, const std::string& split,
                                             bool progress);

}  // namespace lcm::train
