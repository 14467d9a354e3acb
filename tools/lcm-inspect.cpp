// lcm-inspect: what a LOOPerSet / Tiramisu program file holds and what lcm makes of it (layout,
// counts equal to lcm-prepare's, key histograms with the keys lcm does not read marked, schedule
// forms, time shapes, loop-level base, line granularity, skips); data/inspect.hpp does the work.
// Exit 0: records found and every schedule form understood; 3: some form is not; 1: error (an
// unreadable file, or a file without any LOOPerSet record); 2: bad usage.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/version.hpp"
#include "data/inspect.hpp"
#include "data/reader.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/run_tool.hpp"
#include "tools/common/strict_options.hpp"
#include "util/atomic_file.hpp"

namespace {

/// Exit code when some schedule form is not understood (not 2: that is bad usage in every tool).
constexpr int kNotUnderstood = 3;

/// The config keys lcm-inspect reads (as key=value, as the other tools take them) and the flag
/// that sets each one.
const std::vector<std::pair<std::string, std::string>>& key_flags() {
  static const std::vector<std::pair<std::string, std::string>> k{
      {"data.machine", "--machine"},
      {"data.loop_level_base", "--loop-level-base"},
      {"data.schedule_source", "--schedule-source"},
      {"data.schedule_check", "--schedule-check"},
      {"data.max_bytes_in_flight", "--max-bytes-in-flight"}};
  return k;
}

/// The key of a `key=value` (or `--key=value`) argument when `arg` is one for a config key of
/// lcm (any key: those lcm-inspect does not read are refused by the caller); "" for a file.
std::string config_key_of(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) return "";
  std::string key = arg.substr(0, eq);
  if (key.rfind("--", 0) == 0) key = key.substr(2);
  for (const lcm::config::ConfigKey& k : lcm::config::config_keys())
    if (k.key == key) return key;
  return "";
}

/// Sets each variable of `flag_values` (flag → its variable) whose key is among `overrides`
/// (key=value texts, checked and parsed by the config layer: a bad value, or a key given twice,
/// is a ConfigError). A key that lcm-inspect does not read, or given both as key=value and as
/// its flag, is a ConfigError too.
void apply_key_overrides(const std::vector<std::string>& overrides, const CLI::App& app,
                         const std::map<std::string, std::string*>& flag_values) {
  if (overrides.empty()) return;
  std::string accepted;
  for (const auto& [key, flag] : key_flags()) accepted += (accepted.empty() ? "" : ", ") + key;
  for (const std::string& o : overrides) {
    const std::string key = config_key_of(o);
    bool read = false;
    for (const auto& kf : key_flags()) read = read || kf.first == key;
    if (!read)
      throw lcm::config::ConfigError(key + ": not a key lcm-inspect reads (it reads " + accepted +
                                     "; see --help)");
  }
  lcm::config::Config c;
  lcm::config::apply_overrides(c, overrides);
  for (const auto& [key, flag] : key_flags()) {
    bool given = false;
    for (const std::string& o : overrides) given = given || config_key_of(o) == key;
    if (!given) continue;
    std::string* value = flag_values.at(flag);
    const std::string v = lcm::config::get_config_value(c, key);
    if (app.count(flag) > 0)
      throw lcm::config::ConfigError(key + " given twice on the command line: " + flag + " '" +
                                     *value + "' and " + key + "='" + v + "'; give it once");
    *value = v;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-inspect", [&]() -> int {
    CLI::App app{
        "lcm-inspect: what LOOPerSet / Tiramisu program files hold and what lcm reads from them:\n"
        "layout, records, bytes, programs and schedules (the counts lcm-prepare reports as read),\n"
        "histograms of the keys of each level (keys lcm does not read are marked), schedule forms\n"
        "(structured, typed transformations_list, sched_str dialects, none), time shapes, the\n"
        "loop-level base of typed entries, lines holding whole programs or single schedules, and\n"
        "the skips of lcm's reader (first 10 with file:line). docs/tools.md, docs/data-format.md.\n"
        "The data.* keys below may also be given as key=value, as to the other tools.\n"
        "Exit codes: 0 every schedule form is understood; 3 some is not (a sched_str of unknown\n"
        "dialect, a typed entry of unknown type, a per-computation entry with only unknown keys,\n"
        "contradictory loop-level evidence); 1 error (unreadable file, or a file in which no\n"
        "LOOPerSet record is found: random bytes, an empty file, a weights file); 2 bad usage."};
    std::vector<std::string> files;
    bool json = false, features = false, quiet = false, no_read = false;
    std::string output;
    int threads = 0;
    app.add_option("FILE", files,
                   "program files (.jsonl[.gz], legacy .json[.gz]); key=value arguments set the "
                   "config keys listed below")
        ->required();
    app.add_flag("--json", json,
                 "write the JSON report (\"version\" field; same numbers) to stdout instead of "
                 "the text report");
    CLI::Option* output_opt =
        app.add_option("--output", output,
                       "write the JSON report to this file (atomically; the text report stays on "
                       "stdout)");
    app.add_flag("--features", features,
                 "also featurise (default feature options) and report the programs and schedules "
                 "kept and the feature skips, as lcm-prepare counts them before the footprint "
                 "rule");
    app.add_flag("--no-read", no_read,
                 "skip lcm's reader (parse_program): no read counts and no skips, only what the "
                 "file holds; about 2.5x less CPU time")
        ->excludes("--features");
    app.add_option("--threads", threads, "worker threads (0 = all cores)")
        ->capture_default_str()
        ->transform(lcm::tools::integer_in(0, 1024));
    std::string max_bytes = "256MiB";
    app.add_option("--max-bytes-in-flight", max_bytes,
                   "record bytes read and not yet counted, across all threads; a heavier record "
                   "is read alone (bytes with a unit, or 0 = no byte bound; "
                   "data.max_bytes_in_flight)")
        ->capture_default_str();
    std::string machine, level_base = "auto", source = "auto", check = "report";
    app.add_option("--machine", machine,
                   "read the times of this machine where they are keyed by machine name "
                   "(data.machine)");
    app.add_option("--loop-level-base", level_base,
                   "typed loop levels: auto, 0 or 1 (data.loop_level_base)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "0", "1"}));
    app.add_option("--schedule-source", source,
                   "auto, structured, typed or sched_str (data.schedule_source)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "structured", "typed", "sched_str"}));
    app.add_option("--schedule-check", check, "report, skip or off (data.schedule_check)")
        ->capture_default_str()
        ->check(CLI::IsMember({"report", "skip", "off"}));
    app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
    app.set_version_flag("--version", std::string("lcm-inspect ") + lcm::version_string());
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {  // the options, then the keys, as the other tools
      std::vector<std::string> keys;
      for (const auto& kf : key_flags()) keys.push_back(kf.first);
      std::printf("%s\nConfig keys (key=value, or the flag of each; built-in defaults):\n%s",
                  app.help().c_str(),
                  lcm::config::describe_config_keys(lcm::config::Config{}, keys).c_str());
      return 0;
    } catch (const CLI::Success& e) {  // --version
      return app.exit(e);
    } catch (const CLI::ParseError& e) {  // one line, exit 2 as the other tools' usage errors
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      std::fprintf(stderr, "lcm-inspect: %s (see --help)\n", what.c_str());
      return 2;
    }
    {  // key=value arguments are config keys, the others files
      std::vector<std::string> inputs, overrides;
      for (const std::string& f : files)
        (config_key_of(f).empty() ? inputs : overrides).push_back(f);
      apply_key_overrides(overrides, app,
                          {{"--machine", &machine},
                           {"--loop-level-base", &level_base},
                           {"--schedule-source", &source},
                           {"--schedule-check", &check},
                           {"--max-bytes-in-flight", &max_bytes}});
      if (inputs.empty())
        throw lcm::config::ConfigError("no FILE given (key=value arguments set config keys)");
      files = std::move(inputs);
    }
    // Every input is checked before anything is read or written.
    for (const std::string& f : files) lcm::data::check_input_format(f);
    lcm::tools::require_output_option("--output", output_opt->count() > 0, output,
                                      "the report on stdout");
    if (!output.empty()) {
      std::vector<std::pair<std::string, std::string>> inputs;
      for (const std::string& f : files) inputs.emplace_back("an input", f);
      lcm::tools::require_output_not_input("--output", output, inputs);
      lcm::tools::require_writable_output(output);
    }
    lcm::data::InspectOptions opt;
    opt.features = features;
    opt.read = !no_read;
    opt.threads = threads;
    {
      const lcm::config::MemoryBudget b =
          lcm::config::parse_memory_budget(max_bytes, "--max-bytes-in-flight");
      if (b.is_fraction)
        throw lcm::config::ConfigError(
            "--max-bytes-in-flight: expected bytes with a unit (e.g. 256MiB) or 0, got '" +
            max_bytes + "'");
      opt.max_bytes_in_flight = int64_t(b.bytes);
    }
    opt.progress = !quiet;
    opt.read_options.machine = machine;
    using lcm::data::LoopLevelBase;
    using lcm::data::ScheduleCheck;
    using lcm::data::ScheduleSource;
    opt.loop_level_base = level_base == "0"   ? LoopLevelBase::Zero
                          : level_base == "1" ? LoopLevelBase::One
                                              : LoopLevelBase::Auto;
    opt.read_options.schedule_source = source == "structured"  ? ScheduleSource::Structured
                                       : source == "typed"     ? ScheduleSource::Typed
                                       : source == "sched_str" ? ScheduleSource::SchedStr
                                                               : ScheduleSource::Auto;
    opt.read_options.schedule_check = check == "skip"  ? ScheduleCheck::Skip
                                      : check == "off" ? ScheduleCheck::Off
                                                       : ScheduleCheck::Report;
    std::vector<lcm::data::InspectReport> reports;
    lcm::data::InspectReport total;
    total.files = 0;
    for (const std::string& f : files) {
      reports.push_back(lcm::data::inspect_file(f, opt));
      total.merge(reports.back());
      if (!json) {
        std::printf("%s", lcm::data::inspect_text(reports.back()).c_str());
        std::fflush(stdout);
      }
    }
    total.features = features;
    if (!json && files.size() > 1) std::printf("%s", lcm::data::inspect_text(total).c_str());
    const std::string report = lcm::data::inspect_json(reports, total);
    if (json) std::printf("%s", report.c_str());
    if (!output.empty()) lcm::atomic_write_file(output, report);
    std::fflush(stdout);
    const std::vector<std::string> problems = total.problems();
    for (const std::string& p : problems)
      std::fprintf(stderr, "lcm-inspect: not understood: %s\n", p.c_str());
    // a file with nothing lcm reads is an error, not a verdict on schedule forms
    if (!total.files_without_records.empty()) return 1;
    return problems.empty() ? 0 : kNotUnderstood;
  });
}
