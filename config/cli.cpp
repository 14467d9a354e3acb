// The command line of every lcm tool: `[--config FILE] [key=value | key value ...]` plus the
// tool's own options, --help (with every key) and --version (see cli.hpp).
#include "config/cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "config/version.hpp"

namespace lcm::config {

Config load_config(int argc, char** argv, const std::string& description,
                   const std::function<void(CLI::App&)>& add_options) {
  // A "Usage: ..." line in the description replaces CLI11's own usage line (one Usage line).
  std::string desc = description, usage_line;
  {
    size_t u = desc.find("Usage:");
    if (u != std::string::npos && (u == 0 || desc[u - 1] == '\n')) {
      size_t e = desc.find('\n', u);
      usage_line = desc.substr(u, e == std::string::npos ? std::string::npos : e - u);
      desc.erase(u, e == std::string::npos ? std::string::npos : e - u + 1);
      while (!desc.empty() && desc.back() == '\n') desc.pop_back();
    }
  }
  CLI::App app(desc);
  app.set_help_flag();  // printed by us, with the key table
  bool help = false, version = false;
  std::string config_path;
  std::vector<std::string> overrides;
  app.add_flag("-h,--help", help, "print this help (options and every config key) and exit");
  app.add_flag("--version", version, "print the lcm version and exit");
  app.add_option("--config", config_path,
                 "YAML config file (default: configs/default.yaml next to the executable or the "
                 "current directory)");
  app.add_option("overrides", overrides, "config overrides: key=value or key value");
  app.allow_extras(false);
  if (add_options) add_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  if (version) {
    std::string name = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "lcm";
    std::printf("%s %s\n", name.c_str(), lcm::version_string());
    throw CliExit{0};
  }
  Config c;
  std::string file = config_path.empty() ? find_default_config() : config_path;
  if (!file.empty()) {
    apply_config_file(c, file);
    c.config_file = file;
    // configs/default.yaml found on its own restates the built-in defaults: nothing in it is a
    // choice of this run's user (Config::given)
    if (config_path.empty()) c.given.clear();
  }
  if (help) {
    std::string help_text = app.help();
    if (!usage_line.empty()) {  // swap CLI11's generated "Usage: ..." line for the tool's own
      size_t u = help_text.find("Usage:");
      if (u != std::string::npos) {
        size_t e = help_text.find('\n', u);
        help_text.replace(u, e == std::string::npos ? std::string::npos : e - u, usage_line);
      } else {
        help_text = usage_line + "\n" + help_text;
      }
    }
    std::printf("%s\n", help_text.c_str());
    std::printf("Config keys (value after loading %s):\n%s",
                file.empty() ? "built-in defaults" : file.c_str(),
                describe_config(c, true).c_str());
    throw CliExit{0};
  }
  apply_overrides(c, overrides);
  return c;
}

}  // namespace lcm::config
