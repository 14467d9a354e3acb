// lcm-prepare: reads data.train_file and data.valid_file, extracts features with data.nb_workers
// threads, batches them by footprint and writes the cache <experiment.base_path>/cache/<split>.lcmb
// (or reuses it when still valid), then prints a summary per split. A split that keeps no program
// is an error (exit 1, nothing written); SIGINT/SIGTERM remove the cache temp file (exit 130/143).
// Programs in both files are counted (one warning line; both kept).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "config/cli.hpp"
#include "config/config.hpp"
#include "data/cache.hpp"
#include "data/name_set.hpp"
#include "data/prepare.hpp"
#include "tools/common/run_tool.hpp"
#include "train/overlap.hpp"
#include "train/splits.hpp"
#include "train/startup_checks.hpp"

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-prepare", [&] {
    bool quiet = false;
    lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-prepare: featurise and batch the training and validation files into the cache.\n"
        "Usage: lcm-prepare [--config FILE] [key=value | key value ...]",
        [&](CLI::App& app) { app.add_flag("-q,--quiet", quiet, "no progress lines"); });
    // A kill while the cache is written removes the temp file and exits with 130 / 143.
    lcm::data::install_cache_signal_handlers();
    if (!c.data.train_file.empty() || !c.data.valid_file.empty())
      lcm::train::ensure_cache_folder(c);  // fail early on a bad experiment.base_path
    lcm::train::check_data_files(c);  // an xz/bzip2/zstd input fails before any cache is written
    // The same file for train and valid is reported by the overlap warning below (every program
    // is in both), as lcm-train does: one warning, not two.
    int prepared = 0;
    // The train/valid overlap: the training programs' names as 128-bit hashes (24 bytes a
    // program, data/name_set.hpp), the validation programs checked against them as they stream.
    lcm::data::NameSet train_names, overlap_seen;
    lcm::train::ProgramOverlap overlap;
    bool have_train = false;
    for (const std::string split : {"train", "valid"}) {
      const std::string& file = split == "train" ? c.data.train_file : c.data.valid_file;
      if (file.empty()) {
        std::fprintf(stderr, "lcm-prepare: data.%s_file is empty, %s skipped\n", split.c_str(),
                     split.c_str());
        continue;
      }
      lcm::data::PrepareOptions opt = lcm::train::prepare_options(c, split);
      opt.progress = !quiet;
      opt.compact_rows = true;  // the summary needs no schedule rows
      // programs go to the cache as they come: memory does not grow with their features
      opt.stream_to_cache = true;
      if (split == "train" && !c.data.valid_file.empty())
        opt.on_kept_program = [&](const std::string& name) { train_names.insert(name, 0); };
      else if (split == "valid" && have_train)
        opt.on_kept_program = [&](const std::string& name) {
          // idempotent: a program named twice (a reused cache rebuilt half-way) counts once
          if (!train_names.find(name) || overlap_seen.insert(name, 0)) return;
          overlap.count += 1;
          if (overlap.names.size() < 5) overlap.names.push_back(name);
        };
      lcm::data::PreparedSplit s = lcm::data::prepare_split(opt);
      if (!s.from_cache && !s.cache_path.empty())
        std::fprintf(stderr, "lcm-prepare: %s: cache rebuilt (%s)\n", split.c_str(),
                     s.cache_note.c_str());
      std::printf("%s", lcm::data::prepare_summary(s, opt).c_str());
      std::fflush(stdout);
      ++prepared;
      if (split == "train") {
        have_train = true;
      } else if (have_train) {  // both files: programs in both are data leakage (kept, counted)
        const lcm::train::ProgramOverlap& o = overlap;
        std::printf("train/valid: %lld program(s) kept in both files\n", (long long)o.count);
        if (o.count > 0)
          std::fprintf(
              stderr, "lcm-prepare: %s\n",
              lcm::train::overlap_warning(o, c.data.train_file, c.data.valid_file).c_str());
      }
    }
    if (prepared == 0)
      throw lcm::config::ConfigError("both data.train_file and data.valid_file are empty");
    return 0;
  });
}
