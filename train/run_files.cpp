// The files of one run and the new-run rule (see run_files.hpp).
#include "train/run_files.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "config/config.hpp"
#include "util/atomic_file.hpp"

namespace lcm::train {

RunPaths run_paths(const config::Config& c) {
  const std::string b = c.experiment.base_path;
  const std::string n = c.experiment.name;
  RunPaths p;
  p.weights_dir = b + "/weights";
  p.best = p.weights_dir + "/best_model_" + n + ".safetensors";
  p.last = p.weights_dir + "/last_model_" + n + ".safetensors";
  p.optimizer = p.weights_dir + "/last_optimizer_" + n + ".safetensors";
  p.log_jsonl = b + "/log_" + n + ".jsonl";
  p.log_csv = b + "/log_" + n + ".csv";
  p.loss_svg = b + "/loss_" + n + ".svg";
  p.eval_json = b + "/eval_" + n + ".json";
  p.eval_csv = b + "/eval_" + n + ".csv";
  p.eval_svg = b + "/eval_" + n + ".svg";
  return p;
}

namespace {

/// One kind of run file: `dir` ("" or "weights"), name = prefix + <name> + ext.
struct Pattern {
  const char* dir;
  const char* prefix;
  const char* ext;
};

const std::vector<Pattern>& patterns(RunTool tool) {
  static const std::vector<Pattern> train{{"weights", "best_model_", ".safetensors"},
                                          {"weights", "last_model_", ".safetensors"},
                                          {"weights", "last_optimizer_", ".safetensors"},
                                          {"weights", "last_encoder_optimizer_", ".safetensors"},
                                          {"", "log_", ".jsonl"},
                                          {"", "log_", ".csv"},
                                          {"", "loss_", ".svg"},
                                          {"", "objective_", ".svg"},
                                          {"", "ranking_", ".svg"},
                                          {"", "eval_", ".json"},
                                          {"", "eval_", ".csv"},
                                          {"", "eval_", ".svg"}};
  static const std::vector<Pattern> pretrain{{"weights", "best_autoencoder_", ".safetensors"},
                                             {"weights", "last_autoencoder_", ".safetensors"},
                                             {"", "log_pretrain_", ".jsonl"},
                                             {"", "log_pretrain_", ".csv"},
                                             {"", "loss_pretrain_", ".svg"}};
  return tool == RunTool::Train ? train : pretrain;
}

bool digits(const std::string& s, size_t a, size_t b) {
  if (a >= b) return false;
  for (size_t i = a; i < b; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/// `x` is `name` or (lcm-train) one of its derived runs: <name>_fold<k>of<K>, <name>_m<k>.
bool of_run(const std::string& x, const std::string& name, RunTool tool) {
  if (x == name) return true;
  if (tool != RunTool::Train || x.size() <= name.size() + 2 || x.compare(0, name.size(), name) != 0)
    return false;
  const std::string rest = x.substr(name.size());
  if (rest.rfind("_m", 0) == 0) return digits(rest, 2, rest.size());
  if (rest.rfind("_fold", 0) == 0) {
    const size_t of = rest.find("of", 5);
    return of != std::string::npos && digits(rest, 5, of) && digits(rest, of + 2, rest.size());
  }
  return false;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

std::string base_of(const std::string& base_path) {
  return base_path.empty() ? std::string(".") : base_path;
}

const char* tool_word(RunTool tool) {
  return tool == RunTool::Train ? "train" : "pretrain";
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

/// rename(2) of `from` to `to`, throwing a runtime_error naming both on failure.
void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw std::runtime_error("cannot move " + from + " to " + to + ": " + std::strerror(errno));
}

/// Moves every file of the run still under `base` into `staging`, then renames `staging` to a
/// new folder <base>/previous/<name>-[pretrain-]<stamp>[-k]. Returns that folder.
std::string finish_move(const std::string& base, const std::string& name, RunTool tool,
                        const std::string& staging, const TestHooks& hooks) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(staging + "/weights", ec);
  if (ec)
    throw std::runtime_error("cannot create " + staging + "/weights: " + ec.message() +
                             " (moving the earlier run of experiment " + name + " aside)");
  bool first = true;
  for (const std::string& f : existing_run_files(base, name, tool)) {
    rename_or_throw(base + "/" + f, staging + "/" + f);
    if (first) hooks.pause("moving");
    first = false;
  }
  // an empty weights/ (a pretrain run without checkpoints yet) is not kept
  fs::remove(staging + "/weights", ec);
  const std::string stem = base + "/previous/" + name + "-" +
                           (tool == RunTool::Pretrain ? "pretrain-" : "") + utc_stamp();
  std::string target = stem;
  for (int k = 2; fs::exists(target, ec); ++k) target = stem + "-" + std::to_string(k);
  rename_or_throw(staging, target);
  return target;
}

}  // namespace

std::vector<std::string> run_file_names(RunTool tool, const std::string& name) {
  std::vector<std::string> out;
  for (const Pattern& p : patterns(tool))
    out.push_back(std::string(p.dir) + (*p.dir ? "/" : "") + p.prefix + name + p.ext);
  return out;
}

std::vector<std::string> existing_run_files(const std::string& base_path, const std::string& name,
                                            RunTool tool) {
  const std::string base = base_of(base_path);
  std::set<std::string> out;
  for (const std::string& dir : {std::string(), std::string("weights")}) {
    const std::string folder = dir.empty() ? base : base + "/" + dir;
    for (const std::string& f : list_dir(folder)) {
      for (const Pattern& p : patterns(tool)) {
        if (dir != p.dir) continue;
        const size_t np = std::strlen(p.prefix), ne = std::strlen(p.ext);
        if (f.size() <= np + ne || f.compare(0, np, p.prefix) != 0 ||
            f.compare(f.size() - ne, ne, p.ext) != 0)
          continue;
        if (!of_run(f.substr(np, f.size() - np - ne), name, tool)) continue;
        struct stat st {};
        // any kind of entry counts: a link or folder at a run file's name is the old run's too
        if (::lstat((folder + "/" + f).c_str(), &st) != 0) continue;
        out.insert(dir.empty() ? f : dir + "/" + f);
      }
    }
  }
  return {out.begin(), out.end()};
}

std::string new_run_id() {
  return utc_stamp() + "-" + lcm::temp_host_name() + "-" + std::to_string(::getpid());
}

std::string claim_experiment(const std::string& base_path, const std::string& name, RunTool tool,
                             bool resume, bool overwrite, bool quiet, const TestHooks& hooks) {
  namespace fs = std::filesystem;
  const std::string base = base_of(base_path);
  const std::string staging = base + "/previous/.moving-" + tool_word(tool) + "-" + name;
  const char* who = tool == RunTool::Train ? "lcm-train" : "lcm-pretrain";
  std::error_code ec;
  if (fs::is_directory(staging, ec)) {  // a move that a crash or a second Ctrl-C cut short
    const std::string to = finish_move(base, name, tool, staging, hooks);
    std::printf(
        "%s: finished moving the earlier run of experiment %s into %s (the move was "
        "interrupted)\n",
        who, name.c_str(), to.c_str());
    std::fflush(stdout);
  }
  if (resume) return "";
  const std::vector<std::string> files = existing_run_files(base, name, tool);
  if (files.empty()) return "";
  if (!overwrite)
    throw config::ConfigError(
        "experiment " + name + " in " + base + " already holds a run (" + files.front() +
        (files.size() > 1 ? ", " + std::to_string(files.size()) + " files" : "") +
        "): " + (tool == RunTool::Train ? "--resume continues it; " : "") +
        "experiment.overwrite=true moves its files into " + base +
        "/previous/ first; or choose another experiment.name");
  const std::string to = finish_move(base, name, tool, staging, hooks);
  if (!quiet) {
    std::printf("%s: moved the earlier run of experiment %s (%zu files) into %s\n", who,
                name.c_str(), files.size(), to.c_str());
    std::fflush(stdout);
  }
  return to;
}

}  // namespace lcm::train
