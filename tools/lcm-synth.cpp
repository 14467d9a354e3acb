// lcm-synth: writes random LOOPerSet-like programs and schedules (docs/synth.md) as a
// gzip-compressed JSONL file, e.g. as unlabeled pre-training data or for pipeline tests.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>

#include "config/version.hpp"
#include "data/synth.hpp"
#include "tools/common/strict_options.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "lcm-synth: generate synthetic programs and schedules (docs/synth.md) as JSONL.gz.\n"
      "It reads no config file and no config keys: every setting is one of the options below,\n"
      "each with the values it accepts (a value outside them is bad usage, exit 2)."};
  lcm::data::SynthOptions opt;
  std::string out;
  app.add_option("--programs", opt.programs, "number of programs (lines) to write")
      ->required()
      ->transform(lcm::tools::integer_in(int64_t(0), int64_t(1) << 40));
  app.add_option("--out", out, "output file (.jsonl.gz), written atomically")->required();
  app.add_option("--seed", opt.seed, "random seed; the output is a pure function of the options")
      ->capture_default_str()
      ->transform(lcm::tools::integer_in(uint64_t(0), std::numeric_limits<uint64_t>::max()));
  app.add_option("--schedules-per-program", opt.schedules_per_program,
                 "schedules per program, including the untransformed schedule 0")
      ->capture_default_str()
      // fewer than 2 labelled schedules: every tool drops the program
      ->transform(lcm::tools::integer_in(2, 1000000));
  app.add_option("--failed-fraction", opt.failed_fraction,
                 "fraction of schedules (after 0) whose execution_times are [-1]")
      ->capture_default_str()
      ->check(lcm::tools::finite_in(0.0, 1.0));
  app.add_option("--missing-fraction", opt.missing_fraction,
                 "fraction of schedules (after 0) without execution_times (null or [])")
      ->capture_default_str()
      ->check(lcm::tools::finite_in(0.0, 1.0));
  app.add_option(
         "--structures", opt.structures,
         "distinct loop-tree skeletons (footprints) to draw programs from; 0 = one per program")
      ->capture_default_str()
      ->transform(lcm::tools::integer_in(0, 1 << 30));
  app.add_option("--threads", opt.threads,
                 "worker threads (0 = all cores); does not change the output")
      ->capture_default_str()
      ->transform(lcm::tools::integer_in(0, 1024));
  app.add_option("--level", opt.compression_level, "gzip compression level 0..9")
      ->capture_default_str()
      ->transform(lcm::tools::integer_in(0, 9));
  app.set_version_flag("--version", std::string("lcm-synth ") + lcm::version_string());
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (
      const CLI::ParseError& e) {  // one line, the same exit code as the other tools' usage errors
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "lcm-synth: %s (see --help)\n", what.c_str());
    return 2;
  }
  const std::string gz = ".gz";
  if (out.size() <= gz.size() || out.compare(out.size() - gz.size(), gz.size(), gz) != 0) {
    std::fprintf(stderr,
                 "lcm-synth: --out '%s': the output is gzip-compressed JSONL; name it *.jsonl.gz\n",
                 out.c_str());
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    lcm::data::SynthStats st = lcm::data::write_synth_file(out, opt);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(
        stderr,
        "lcm-synth: wrote %s: %lld programs, %lld schedules, %.1f MB JSON, %.1f MB gzip, %.2f s\n",
        out.c_str(), (long long)st.programs, (long long)st.schedules, st.uncompressed_bytes / 1e6,
        st.compressed_bytes / 1e6, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lcm-synth: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
