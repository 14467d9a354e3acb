// config::Config → PrepareOptions for the train/valid splits: source file, feature switches,
// batching, workers and the cache folder <experiment.base_path>/cache (see prepare.hpp).
#include "train/splits.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace lcm::train {

namespace {
/// `s` with every run of spaces written as one (a summary line's column padding).
std::string squeeze(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != ' ' || out.empty() || out.back() != ' ') out += ch;
  return out;
}
}  // namespace

lcm::data::PrepareOptions prepare_options(const config::Config& c, const std::string& split) {
  lcm::data::PrepareOptions o;
  o.split = split;
  if (split == "train")
    o.source = c.data.train_file;
  else if (split == "valid")
    o.source = c.data.valid_file;
  else
    throw config::ConfigError("unknown split '" + split + "' (expected train or valid)");
  o.cache_dir = c.data.cache ? c.experiment.base_path + "/cache" : "";
  o.cache_lock_wait_s = double(c.data.cache_lock_wait);
  o.features = config::feature_options(c.data);
  o.read.schedule_source = c.data.schedule_source;
  o.read.schedule_check = c.data.schedule_check;
  o.read.machine = c.data.machine;
  o.loop_level_base = c.data.loop_level_base;
  o.batching.batch_size = c.data.batch_size;
  o.batching.seed = c.data.seed;
  o.batching.mode = c.data.batching;
  o.batching.program_piece = c.data.program_piece;
  // The small-footprint rule (docs/model-spec.md §3.11) thins the training set only: validation
  // keeps every program, as the reference's evaluation does (min_functions_per_tree_footprint 0).
  o.batching.min_functions_per_footprint =
      split == "train" ? c.data.min_functions_per_footprint : 0;
  o.max_programs = c.data.max_programs;
  o.nb_workers = c.data.nb_workers;
  o.max_bytes_in_flight = c.data.max_bytes_in_flight;
  o.strict = c.data.strict;
  if (split == "train" && c.data.train_folds.active()) {
    // its own cache file: the full split's cache stays valid beside it
    const lcm::data::FoldSelection& f = c.data.train_folds;
    o.folds = f;
    o.split = std::string(f.only ? "train_fold" : "train_without_fold") +
              std::to_string(f.fold + 1) + "of" + std::to_string(f.count);
  }
  if (split == "valid" && c.data.valid_folds.active()) {
    const lcm::data::FoldSelection& f = c.data.valid_folds;
    o.folds = f;
    o.split = "valid_fold" + std::to_string(f.fold + 1) + "of" + std::to_string(f.count);
  }
  return o;
}

std::string ensure_cache_folder(const config::Config& c) {
  if (!c.data.cache) return "";
  namespace fs = std::filesystem;
  const std::string dir = c.experiment.base_path + "/cache";
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::runtime_error(
        "cannot create cache folder " + dir +
        ": a file of that name exists (remove it, set data.cache=false or change "
        "experiment.base_path)");
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create cache folder " + dir + ": " + ec.message());
  if (!fs::is_directory(dir, ec))
    throw std::runtime_error("cannot create cache folder " + dir + ": not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw std::runtime_error("cannot create cache folder " + dir + ": " + std::strerror(errno));
  return dir;
}

lcm::data::PreparedSplit prepare_from_config(const config::Config& c, const std::string& split,
                                             bool progress) {
  lcm::data::PrepareOptions o = prepare_options(c, split);
  if (o.source.empty()) throw config::ConfigError("data." + split + "_file is empty");
  o.progress = progress;
  o.compact_rows = true;  // lcm-train places the rows within training.host_memory_budget
  // Training never prints a schedule's sched_str (the cache keeps them for lcm-eval): a few
  // hundred bytes per schedule, more than the rest of the compact data.
  o.keep_sched_str = false;
  lcm::data::PreparedSplit s = lcm::data::prepare_split(o);
  const std::string line = cache_rebuilt_line("lcm-train", split, s);
  if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  const std::string note = lcm::data::footprint_drop_note(s, o);
  if (!note.empty()) std::fprintf(stderr, "lcm-train: %s: %s\n", split.c_str(), note.c_str());
  // Which schedule forms were read and how they compared, one line each, when it is news: a form
  // other than the per-computation dicts, a disagreement, or typed loop levels.
  bool news = !s.counts.loop_level_base.empty();
  for (const auto& [k, v] : s.counts.forms)
    if (v > 0 && ((k.rfind("read/", 0) == 0 && k != "read/structured") ||
                  k.find("/disagree") != std::string::npos))
      news = true;
  const std::string forms = news ? lcm::data::schedule_forms_summary(s.counts, o.read) : "";
  for (size_t b = 0; b < forms.size();) {
    size_t e = forms.find('\n', b);
    if (e == std::string::npos) e = forms.size();
    size_t t = forms.find_first_not_of(' ', b);
    if (t < e)
      std::fprintf(stderr, "lcm-train: %s: %s\n", split.c_str(),
                   squeeze(forms.substr(t, e - t)).c_str());
    b = e + 1;
  }
  return s;
}

std::string cache_rebuilt_line(const std::string& tool, const std::string& split,
                               const lcm::data::PreparedSplit& s) {
  if (s.from_cache || s.cache_path.empty() || s.cache_note == lcm::data::kNoCacheFile) return "";
  return tool + ": " + split + ": cache rebuilt (" + s.cache_note + ")";
}

}  // namespace lcm::train
