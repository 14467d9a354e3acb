// Programs present in more than one input: train/valid overlap (data leakage a researcher must
// hear about: lcm-train and lcm-prepare warn and keep both) and repeats across the files of
// lcm-pretrain (skipped as program/duplicate_program, as a repeat inside one file is).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/skips.hpp"

namespace lcm::train {

/// The programs (identified by name, as data/prepare.hpp does) kept in both `train` and `valid`.
struct ProgramOverlap {
  int64_t count = 0;               // programs of `valid` whose name is also a program of `train`
  std::vector<std::string> names;  // the first `max_names` of them, in `valid` order
};

/// The names of the kept programs of a prepared split, in its order.
std::vector<std::string> program_names(const lcm::data::Dataset& ds);

/// Compares the kept programs of the validation split with the training program names
/// (program_names of the training split; names only, so the training features need not be
/// kept in memory). O(programs); no errors.
ProgramOverlap program_overlap(const std::vector<std::string>& train_names,
                               const lcm::data::Dataset& valid, size_t max_names = 5);

/// One warning line ("" when o.count == 0): "warning: N program(s) kept in both data.train_file
/// (<train_file>) and data.valid_file (<valid_file>), e.g. a, b, c: validation scores partly
/// measure training data (both copies are used)". Kept programs only: a training program
/// dropped by the small-footprint rule (docs/model-spec.md §3.11) is not trained on or counted.
std::string overlap_warning(const ProgramOverlap& o, const std::string& train_file,
                            const std::string& valid_file);

/// For lcm-pretrain: keep[f][p] is false for program p of files[f] when a program of the same
/// name is in an earlier file (the first file wins, as the first record wins inside one file);
/// each such program is logged in `log` as program/duplicate_program (file = files[f], program
/// = the name, detail names the earlier file). `datasets` and `files` have the same length.
/// Throws DataError (from `log`) in strict mode at the first repeat.
std::vector<std::vector<char>> skip_repeats_across_files(
    const std::vector<const lcm::data::Dataset*>& datasets, const std::vector<std::string>& files,
    lcm::data::SkipLog& log);

}  // namespace lcm::train
