// Train/valid overlap by program name and the cross-file duplicate_program skip of lcm-pretrain
// (see overlap.hpp).
#include "train/overlap.hpp"

#include <unordered_map>
#include <unordered_set>

namespace lcm::train {

std::vector<std::string> program_names(const lcm::data::Dataset& ds) {
  std::vector<std::string> out;
  out.reserve(ds.programs.size());
  for (const auto& p : ds.programs) out.push_back(p.name);
  return out;
}

ProgramOverlap program_overlap(const std::vector<std::string>& train_names,
                               const lcm::data::Dataset& valid, size_t max_names) {
  const std::unordered_set<std::string> names(train_names.begin(), train_names.end());
  ProgramOverlap o;
  for (const auto& p : valid.programs) {
    if (!names.count(p.name)) continue;
    ++o.count;
    if (o.names.size() < max_names) o.names.push_back(p.name);
  }
  return o;
}

std::string overlap_warning(const ProgramOverlap& o, const std::string& train_file,
                            const std::string& valid_file) {
  if (o.count == 0) return "";
  std::string s = "warning: " + std::to_string(o.count) +
                  " program(s) kept in both data.train_file (" + train_file +
                  ") and data.valid_file (" + valid_file + "), e.g. ";
  for (size_t i = 0; i < o.names.size(); ++i) s += (i ? ", " : "") + o.names[i];
  if (o.count > int64_t(o.names.size())) s += ", ...";
  return s + ": validation scores partly measure training data (both copies are used)";
}

std::vector<std::vector<char>> skip_repeats_across_files(
    const std::vector<const lcm::data::Dataset*>& datasets, const std::vector<std::string>& files,
    lcm::data::SkipLog& log) {
  std::unordered_map<std::string, size_t> first_file;  // program name → file it was first kept in
  std::vector<std::vector<char>> keep(datasets.size());
  for (size_t f = 0; f < datasets.size(); ++f) {
    const auto& programs = datasets[f]->programs;
    keep[f].assign(programs.size(), 1);
    for (size_t p = 0; p < programs.size(); ++p) {
      auto [it, inserted] = first_file.emplace(programs[p].name, f);
      if (inserted) continue;
      lcm::data::SkipEvent ev;
      ev.level = "program";
      ev.reason = "duplicate_program";
      ev.file = files[f];
      ev.program = programs[p].name;
      ev.detail = "the name was already read in " + files[it->second] + "; this program is skipped";
      log.add(ev);  // may throw DataError in strict mode
      keep[f][p] = 0;
    }
  }
  return keep;
}

}  // namespace lcm::train
