// Startup checks (input formats, writable output folder, --resume files) and the skip summary
// line of lcm-eval / lcm-predict; see startup.hpp.
#include "train/startup_checks.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "data/reader.hpp"

namespace lcm::train {

void check_data_files(const config::Config& c, bool train, bool valid) {
  if (train && !c.data.train_file.empty()) lcm::data::check_input_format(c.data.train_file);
  if (valid && !c.data.valid_file.empty()) lcm::data::check_input_format(c.data.valid_file);
}

void require_program_records(const std::string& path, const std::string& key) {
  lcm::data::SkipLog quiet(false, 0);  // the real preparation prints and counts the skips
  lcm::data::RecordSource source(path, quiet);
  lcm::data::RawRecord first;
  if (source.next(first)) return;
  std::string skips;
  for (const auto& [k, v] : quiet.counts())
    if (v > 0) skips += std::string(skips.empty() ? "" : ", ") + k + " " + std::to_string(v);
  if (skips.empty())
    throw lcm::data::DataError(
        key + " " + path +
        ": no program record in the file (it is empty or holds only blank lines)");
  throw lcm::data::DataError(key + " " + path + ": no readable program record (" + skips + ")");
}

void require_writable_base_path(const config::Config& c, bool weights) {
  namespace fs = std::filesystem;
  const std::string& base = c.experiment.base_path;
  if (base.empty())
    throw std::runtime_error("experiment.base_path is empty: give the folder for the outputs");
  std::error_code ec0;
  if (fs::exists(base, ec0) && !fs::is_directory(base, ec0))
    throw std::runtime_error(
        "experiment.base_path " + base +
        ": a file of that name exists (remove it or change experiment.base_path)");
  for (const std::string& dir : {base, base + "/weights"}) {
    if (dir != base && !weights) continue;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw std::runtime_error("experiment.base_path " + base + ": cannot create " + dir + ": " +
                               ec.message());
    if (!fs::is_directory(dir, ec))
      throw std::runtime_error("experiment.base_path " + base + ": " + dir + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw std::runtime_error("experiment.base_path " + base + ": " + dir +
                               " is not writable: " + std::strerror(errno));
  }
}

void require_resume_files(const RunPaths& paths, const std::string& experiment_name) {
  std::error_code ec;
  for (const std::string& f : {paths.last, paths.optimizer})
    if (!std::filesystem::is_regular_file(f, ec))
      throw std::runtime_error("--resume: " + f +
                               " not found (resume needs the last_model_ and "
                               "last_optimizer_ files of experiment '" +
                               experiment_name + "')");
}

std::string skip_summary_line(const std::string& tool, const std::string& split,
                              const lcm::data::SplitCounts& counts, int64_t programs_kept) {
  std::string s = tool + ": " + split + ": " + std::to_string(counts.records_read) +
                  " programs read, " + std::to_string(programs_kept) + " kept; skipped:";
  bool any = false;
  for (const auto& [k, v] : counts.skips) {
    if (v <= 0) continue;
    s += std::string(any ? "," : "") + " " + k + " " + std::to_string(v);
    any = true;
  }
  if (!any) s += " none";
  return s;
}

}  // namespace lcm::train
