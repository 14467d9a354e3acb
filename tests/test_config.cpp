// Tests of the configuration: built-in defaults equal configs/default.yaml, layering (file then
// overrides in both syntaxes), unknown-key and bad-value messages, training.device syntax, --help.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/cli.hpp"
#include "config/config.hpp"
#include "support/test_support.hpp"
#include "tools/common/run_tool.hpp"
#include "train/splits.hpp"

using lcm::test::contains;
using lcm::test::error_of;

using lcm::config::Config;
using lcm::config::ConfigError;

namespace {

/// The message of the ConfigError thrown by f, or "" when nothing is thrown.
Config load(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string name = "lcm-test";
  argv.push_back(name.data());
  for (auto& a : args) argv.push_back(a.data());
  return lcm::config::load_config(int(argv.size()), argv.data(), "test tool");
}

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = lcm::test::temp_dir("config") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

/// A default Config after setting `key` to `value` in it, which must be refused with a
/// ConfigError whose message names the key and contains `expected`.
Config after_refusal(const std::string& key, const std::string& value,
                     const std::string& expected) {
  INFO(key << " = '" << value << "'");
  Config c;
  const std::string m =
      error_of<ConfigError>([&] { lcm::config::set_config_value(c, key, value); });
  CHECK(m.find(key) != std::string::npos);
  CHECK(m.find(expected) != std::string::npos);
  return c;
}

}  // namespace

TEST_CASE("every committed configs/*.yaml loads over the defaults") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(lcm::test::source_path("configs"))) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    lcm::config::Config c;
    CHECK_NOTHROW(lcm::config::apply_config_file(c, e.path().string()));
    ++n;
  }
  CHECK(n >= 3);  // default, pact25, ensemble
  lcm::config::Config c;
  lcm::config::apply_config_file(c, lcm::test::source_path("configs/ensemble.yaml"));
  CHECK(c.training.ensemble == 5);
}

TEST_CASE("built-in defaults equal configs/default.yaml, key by key") {
  Config builtin;
  Config from_file;
  lcm::config::apply_config_file(from_file, lcm::test::source_path("configs/default.yaml"));
  for (auto& k : lcm::config::config_keys()) {
    INFO("key " << k.key);
    CHECK(k.get(builtin) == k.get(from_file));
  }
  CHECK(builtin.data.batch_size == 512);
  CHECK(builtin.data.min_functions_per_footprint == 0);  // nothing dropped (reference preset: 2)
  CHECK(builtin.data.batching == lcm::data::BatchingMode::Mixed);
  CHECK(builtin.data.train_file == "tests/data/synth_train.jsonl.gz");
  CHECK(builtin.data.valid_file == "tests/data/synth_valid.jsonl.gz");
  // The default data is committed (tests/data/README.md): a fresh clone trains with no arguments.
  CHECK(std::filesystem::is_regular_file(lcm::test::source_path(builtin.data.train_file)));
  CHECK(std::filesystem::is_regular_file(lcm::test::source_path(builtin.data.valid_file)));
}

TEST_CASE("configs/default.yaml gives every key of the key table, and only those") {
  // The key-by-key comparison above cannot see a key missing from the file (the built-in default
  // fills it): read the file's dotted keys and compare the two lists.
  std::set<std::string> in_file;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n,
                                                                        const std::string& at) {
    if (!n.IsMap()) {
      in_file.insert(at);
      return;
    }
    for (const auto& kv : n)
      walk(kv.second, (at.empty() ? "" : at + ".") + kv.first.as<std::string>());
  };
  walk(YAML::LoadFile(lcm::test::source_path("configs/default.yaml")), "");
  std::set<std::string> in_table;
  for (const auto& k : lcm::config::config_keys()) in_table.insert(k.key);
  for (const std::string& k : in_table) {
    INFO("key of the table missing from configs/default.yaml: " << k);
    CHECK(in_file.count(k) == 1);
  }
  for (const std::string& k : in_file) {
    INFO("key of configs/default.yaml not in the table: " << k);
    CHECK(in_table.count(k) == 1);
  }
  CHECK(in_table.size() > 50);
}

TEST_CASE("every key round-trips through its text form and has docs") {
  Config c;
  for (auto& k : lcm::config::config_keys()) {
    INFO("key " << k.key);
    CHECK(!k.doc.empty());
    CHECK(!k.type.empty());
    Config d;
    lcm::config::set_config_value(d, k.key, k.get(c));
    CHECK(k.get(d) == k.get(c));
  }
}

TEST_CASE("layering: file over defaults, overrides over file, both override syntaxes") {
  std::string file =
      write_temp("layer.yaml",
                 "data:\n  batch_size: 256\n  seed: 7\ntraining:\n  lr: 0.5\n  device: cuda:1\n");
  Config c = load(
      {"--config", file, "data.batch_size=128", "training.optimizer", "adam", "data.strict=yes"});
  CHECK(c.config_file == file);
  CHECK(c.data.batch_size == 128);  // override wins over the file
  CHECK(c.data.seed == 7);          // from the file
  CHECK(c.training.lr == doctest::Approx(0.5));
  CHECK(c.training.device.str() == "cuda:1");
  CHECK(c.training.optimizer == lcm::config::OptimizerKind::Adam);  // "key value" syntax
  CHECK(c.data.strict);
  CHECK(c.data.loop_zeroing ==
        lcm::data::FeatureOptions::LoopZeroing::LastComp);  // untouched default
  CHECK(c.training.device.kind == lcm::Device::CUDA);
  CHECK(c.training.device.index == 1);

  // Without --config the default file is found (cwd = repo root or the executable's tree).
  Config d = load({"data.max_programs=5"});
  CHECK(d.config_file.find("configs/default.yaml") != std::string::npos);
  CHECK(d.data.max_programs == 5);
}

TEST_CASE("Config::given names the keys the user set and where; defaults are not given") {
  const std::string file = write_temp("given.yaml", "data:\n  shift_match: exact\n");
  const Config c = load({"--config", file, "data.batch_size=128"});
  CHECK(c.given.size() == 2);
  CHECK(c.given.at("data.shift_match") == file);
  CHECK(c.given.at("data.batch_size") == "command line");
  // configs/default.yaml found on its own restates the defaults: nothing in it is given
  const Config d = load({"data.max_programs=5"});
  REQUIRE(!d.config_file.empty());
  CHECK(d.given.size() == 1);
  CHECK(d.given.count("data.max_programs") == 1);
  // set_config_value (a program's own setting) records nothing
  Config e;
  lcm::config::set_config_value(e, "training.threads", "2");
  CHECK(e.given.empty());
}

TEST_CASE("the keys that change features are marked and recorded by checkpoints") {
  // the switches of model-spec §11 and the schedule reading that decides the tag vectors
  const std::vector<std::string> keys = lcm::config::feature_keys();
  for (const char* k :
       {"data.loop_zeroing", "data.shift_match", "data.schedule_source", "data.loop_level_base"})
    CHECK(std::find(keys.begin(), keys.end(), k) != keys.end());
  // each is refused on --resume as well: a run cannot change its features halfway
  const std::vector<std::string> refused =
      lcm::config::keys_on_resume(lcm::config::OnResume::Refuse);
  for (const std::string& k : keys)
    CHECK(std::find(refused.begin(), refused.end(), k) != refused.end());
}

TEST_CASE("unknown keys are named, with close suggestions") {
  Config c;
  std::string m =
      error_of<ConfigError>([&] { lcm::config::set_config_value(c, "data.bach_size", "3"); });
  CHECK(m.find("unknown config key 'data.bach_size'") != std::string::npos);
  CHECK(m.find("did you mean data.batch_size") != std::string::npos);

  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"batch_size=3"}); });
  CHECK(m.find("'batch_size'") != std::string::npos);
  CHECK(m.find("data.batch_size") != std::string::npos);

  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"zzz.qqq=1"}); });
  CHECK(m.find("unknown config key 'zzz.qqq'") != std::string::npos);

  m = error_of<ConfigError>(
      [&] { lcm::config::apply_config_yaml(c, "data:\n  nb_workerz: 2\n", "my.yaml"); });
  CHECK(m.find("'data.nb_workerz'") != std::string::npos);
  CHECK(m.find("my.yaml") != std::string::npos);
  CHECK(m.find("data.nb_workers") != std::string::npos);

  m = error_of<ConfigError>([&] {
    load({"--config", write_temp("bad.yaml", "training:\n  lrr: 1\n")});
  });
  CHECK(m.find("training.lrr") != std::string::npos);
}

TEST_CASE("bad values name the key and the expected type or values") {
  Config c;
  auto msg = [&](const std::string& key, const std::string& value) {
    return error_of<ConfigError>([&] { lcm::config::set_config_value(c, key, value); });
  };
  std::string m = msg("data.batch_size", "abc");
  CHECK(m.find("data.batch_size") != std::string::npos);
  CHECK(m.find("integer >= 1") != std::string::npos);
  CHECK(m.find("'abc'") != std::string::npos);
  CHECK(msg("data.batch_size", "0").find("integer >= 1") != std::string::npos);
  CHECK(msg("data.batch_size", "12x").find("data.batch_size") != std::string::npos);
  CHECK(msg("data.batch_size", "99999999999").find("data.batch_size") != std::string::npos);
  CHECK(msg("data.nb_workers", "-1").find("an integer in [0, 1024]") != std::string::npos);
  CHECK(msg("data.seed", "-3").find("unsigned") != std::string::npos);
  CHECK(msg("data.loop_zeroing", "first").find("last_comp|removed_by_fusion|off") !=
        std::string::npos);
  CHECK(msg("data.shift_match", "").find("prefix|exact") != std::string::npos);
  CHECK(msg("training.optimizer", "sgd").find("adam|adamw") != std::string::npos);
  CHECK(msg("data.strict", "maybe").find("boolean") != std::string::npos);
  CHECK(msg("training.lr", "0").find("> 0") != std::string::npos);
  CHECK(msg("training.lr", "nan").find("training.lr") != std::string::npos);
  CHECK(msg("training.weight_decay", "-0.1").find(">= 0") != std::string::npos);
  // A failed set leaves the value unchanged.
  CHECK(c.data.batch_size == 512);

  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"data.batch_size"}); });
  CHECK(m.find("data.batch_size: missing value") != std::string::npos);
  m = error_of(
      [&] { lcm::config::apply_config_yaml(c, "data:\n  batch_size: [1, 2]\n", "x.yaml"); });
  CHECK(m.find("data.batch_size") != std::string::npos);
  CHECK(m.find("list") != std::string::npos);
  m = error_of<ConfigError>(
      [&] { lcm::config::apply_config_yaml(c, "data: [1\n", "broken.yaml"); });
  CHECK(m.find("broken.yaml") != std::string::npos);
  m = error_of<ConfigError>([&] { load({"--config", "/nonexistent/lcm.yaml"}); });
  CHECK(m.find("config file not found: /nonexistent/lcm.yaml") != std::string::npos);
  m = error_of<ConfigError>([&] { load({"--no-such-option"}); });
  CHECK(!m.empty());
}

TEST_CASE("training.device accepts cpu, cuda and cuda:N only") {
  using lcm::parse_device;
  CHECK_FALSE(parse_device("cpu").kind == lcm::Device::CUDA);
  CHECK(parse_device("cuda:0").kind == lcm::Device::CUDA);
  CHECK(parse_device("cuda:0").index == 0);
  CHECK(parse_device("cuda:12").index == 12);
  for (const char* bad : {"cuda:", "cuda:-1", "cuda:x", "gpu", "CPU", "cuda:1 ", "cuda:1.5", ""}) {
    CAPTURE(bad);
    CHECK(after_refusal("training.device", bad, "cpu or cuda:N").training.device.str() == "cpu");
  }
}

TEST_CASE("--help lists the keys and stops the tool with exit code 0") {
  bool exited = false;
  try {
    load({"--help"});
  } catch (const lcm::config::CliExit& e) {
    exited = true;
    CHECK(e.code == 0);
  }
  CHECK(exited);
  std::string listing = lcm::config::describe_config(Config{}, true);
  for (auto& k : lcm::config::config_keys()) CHECK(listing.find(k.key) != std::string::npos);
  CHECK(listing.find("one of last_comp|removed_by_fusion|off") != std::string::npos);
}

TEST_CASE("feature options follow data.loop_zeroing and data.shift_match") {
  using FO = lcm::data::FeatureOptions;
  Config c;
  CHECK(lcm::config::feature_options(c.data).loop_zeroing == FO::LoopZeroing::LastComp);
  CHECK(lcm::config::feature_options(c.data).shift_match == FO::ShiftMatch::Prefix);
  lcm::config::apply_overrides(c,
                               {"data.loop_zeroing=removed_by_fusion", "data.shift_match=exact"});
  CHECK(lcm::config::feature_options(c.data).loop_zeroing == FO::LoopZeroing::RemovedByFusion);
  CHECK(lcm::config::feature_options(c.data).shift_match == FO::ShiftMatch::Exact);
  lcm::config::apply_overrides(c, {"data.loop_zeroing", "off"});
  CHECK(lcm::config::feature_options(c.data).loop_zeroing == FO::LoopZeroing::Off);
}

TEST_CASE("run_tool maps errors to exit codes") {
  CHECK(lcm::tools::run_tool("t", [] { return 0; }) == 0);
  CHECK(lcm::tools::run_tool("t", []() -> int { throw ConfigError("x"); }) == 2);
  CHECK(lcm::tools::run_tool("t", []() -> int { throw std::runtime_error("y"); }) == 1);
  CHECK(lcm::tools::run_tool("t", []() -> int { throw lcm::config::CliExit{0}; }) == 0);
}

TEST_CASE("prepare_options maps the config onto a split's PrepareOptions") {
  Config c;
  lcm::config::apply_overrides(
      c, {"experiment.base_path=/tmp/x", "data.batch_size=64", "data.seed=9",
          "data.min_functions_per_footprint=0", "data.max_programs=3", "data.nb_workers=2",
          "data.strict=true", "data.shift_match=exact"});
  lcm::data::PrepareOptions t = lcm::train::prepare_options(c, "train");
  CHECK(t.split == "train");
  CHECK(t.source == c.data.train_file);
  CHECK(t.cache_dir == "/tmp/x/cache");
  CHECK(t.batching.batch_size == 64);
  CHECK(t.batching.seed == 9);
  CHECK(t.batching.min_functions_per_footprint == 0);
  CHECK(t.max_programs == 3);
  CHECK(t.nb_workers == 2);
  CHECK(t.strict);
  CHECK(t.features.shift_match == lcm::data::FeatureOptions::ShiftMatch::Exact);
  CHECK(lcm::train::prepare_options(c, "valid").source == c.data.valid_file);
  lcm::config::set_config_value(c, "data.cache", "false");
  CHECK(lcm::train::prepare_options(c, "valid").cache_dir.empty());
  CHECK_THROWS_AS(lcm::train::prepare_options(c, "test"), ConfigError);
  lcm::config::set_config_value(c, "data.valid_file", "");
  CHECK_THROWS_AS(lcm::train::prepare_from_config(c, "valid", false), ConfigError);
}

TEST_CASE("data.nb_workers is bounded by 1024 with a clear message") {
  Config c;
  std::string m =
      error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"data.nb_workers=100000"}); });
  CHECK(m.find("data.nb_workers: expected an integer in [0, 1024], got '100000'") !=
        std::string::npos);
  lcm::config::apply_overrides(c, {"data.nb_workers=1024"});
  CHECK(c.data.nb_workers == 1024);
  CHECK(error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"data.nb_workers=-1"}); }) !=
        "");
}

TEST_CASE("override syntax: `key value` never swallows a key=value token; stray arguments") {
  Config c;
  std::string m = error_of<ConfigError>([&] {
    lcm::config::apply_overrides(c, {"data.train_file", "data.valid_file="});
  });
  CHECK(m.find("data.train_file: missing value") != std::string::npos);
  CHECK(c.data.train_file == Config{}.data.train_file);  // untouched
  // A value that merely contains '=' is still a value.
  lcm::config::apply_overrides(c, {"data.train_file", "a=b.jsonl.gz"});
  CHECK(c.data.train_file == "a=b.jsonl.gz");
  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"foo"}); });
  CHECK(m.find("unexpected argument 'foo' (overrides are key=value or key value)") !=
        std::string::npos);
  CHECK(m.find("did you mean") == std::string::npos);  // nothing close to "foo"
  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"train.jsonl.gz"}); });
  CHECK(m.find("unexpected argument 'train.jsonl.gz'") != std::string::npos);
  CHECK(m.find("did you mean") == std::string::npos);
  // A typo of a key in the space form still gets a close suggestion.
  m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, {"data.bach_size", "3"}); });
  CHECK(m.find("unexpected argument 'data.bach_size'") != std::string::npos);
  CHECK(m.find("did you mean data.batch_size") != std::string::npos);
  // Far-fetched suggestions are gone: only keys within a small edit distance.
  m = error_of<ConfigError>([&] { lcm::config::set_config_value(c, "data.size", "1"); });
  CHECK(m.find("unknown config key 'data.size'") != std::string::npos);
  CHECK(m.find("data.seed") == std::string::npos);
  CHECK(m.find("experiment.name") == std::string::npos);
}

TEST_CASE("--help prints one Usage line") {
  std::string dir = lcm::test::temp_dir("config_help");
  std::string out = dir + "/help.txt";
  std::fflush(stdout);
  int saved = ::dup(1);
  REQUIRE(saved >= 0);
  FILE* f = std::freopen(out.c_str(), "w", stdout);
  REQUIRE(f != nullptr);
  std::vector<std::string> args = {"lcm-test", "--help"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool exited = false;
  try {
    lcm::config::load_config(int(argv.size()), argv.data(),
                             "test tool: does things.\nUsage: lcm-test [key=value ...]");
  } catch (const lcm::config::CliExit&) {
    exited = true;
  }
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  CHECK(exited);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t first = text.find("Usage");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("Usage", first + 1) == std::string::npos);
  CHECK(text.find("Usage: lcm-test [key=value ...]") != std::string::npos);
  CHECK(text.find("test tool: does things.") != std::string::npos);
}

TEST_CASE("ensure_cache_folder creates <base_path>/cache or fails early naming it") {
  std::string dir = lcm::test::temp_dir("config_cachedir");
  Config c;
  c.experiment.base_path = dir + "/runs";
  CHECK(lcm::train::ensure_cache_folder(c) == dir + "/runs/cache");
  std::ofstream(dir + "/plainfile") << "x";
  c.experiment.base_path = dir + "/plainfile";
  bool threw = false;
  try {
    lcm::train::ensure_cache_folder(c);
  } catch (const std::runtime_error& e) {
    threw = true;
    CHECK(std::string(e.what()).find("cannot create cache folder " + dir + "/plainfile/cache: ") !=
          std::string::npos);
  }
  CHECK(threw);
  // <base_path>/cache itself a regular file: named as such
  std::filesystem::create_directories(dir + "/base2");
  std::ofstream(dir + "/base2/cache") << "x";
  c.experiment.base_path = dir + "/base2";
  CHECK(lcm::test::contains(
      lcm::test::error_of<std::runtime_error>([&] { lcm::train::ensure_cache_folder(c); }),
      "cannot create cache folder " + dir + "/base2/cache: a file of that name exists"));
  c.data.cache = false;
  CHECK(lcm::train::ensure_cache_folder(c) == "");
}

TEST_CASE("experiment.name must be a plain file-name part") {
  for (const char* bad : {"", "a/b", "../../etc/x", ".hidden", "a b", "name\t"}) {
    CAPTURE(bad);
    CHECK(after_refusal("experiment.name", bad, "letters, digits").experiment.name == "lcm");
  }
  Config c;
  lcm::config::set_config_value(c, "experiment.name", "f10_comp-vector.s1");
  CHECK(c.experiment.name == "f10_comp-vector.s1");
}

TEST_CASE("LCM_CONFIG naming a missing file is an error, not a silent fallback") {
  ::setenv("LCM_CONFIG", "/nonexistent/lcm.yaml", 1);
  std::string m = error_of<ConfigError>([&] { load({}); });
  ::unsetenv("LCM_CONFIG");
  CHECK(m.find("LCM_CONFIG=/nonexistent/lcm.yaml: no such file") != std::string::npos);
  CHECK_NOTHROW(load({}));  // unset: the usual search
}

TEST_CASE("a key given twice in a YAML config is an error naming the key, file and lines") {
  Config c;
  auto yaml_error = [&](const std::string& text) {
    return error_of<ConfigError>([&] { lcm::config::apply_config_yaml(c, text, "run.yaml"); });
  };
  // in one section: the first value is not silently replaced by the second
  std::string m = yaml_error("training:\n  lr: 0.1\n  lr: 0.2\n");
  CHECK(contains(m, "duplicate config key 'training.lr'"));
  CHECK(contains(m, "run.yaml line 3"));
  CHECK(contains(m, "first at line 2"));
  // nested deeper, and flow style
  CHECK(contains(yaml_error("data: {batch_size: 8, batch_size: 16}\n"),
                 "duplicate config key 'data.batch_size'"));
  // a section given twice (yaml-cpp keeps both: they would merge)
  m = yaml_error("training:\n  lr: 0.1\ndata:\n  batch_size: 8\ntraining:\n  max_epochs: 3\n");
  CHECK(contains(m, "duplicate config key 'training'"));
  CHECK(contains(m, "line 5"));
  // one key once dotted and once under its section
  CHECK(contains(yaml_error("training.lr: 0.1\ntraining:\n  lr: 0.2\n"),
                 "duplicate config key 'training.lr'"));
  // the file name reaches the message through --config
  const std::string f = write_temp("dup.yaml", "experiment:\n  name: a\n  name: b\n");
  CHECK(contains(error_of<ConfigError>([&] { load({"--config", f}); }), f + " line 3"));
  // distinct keys are still fine, and the value is the one given
  lcm::config::apply_config_yaml(c, "training:\n  lr: 0.25\ndata:\n  batch_size: 8\n", "ok.yaml");
  CHECK(c.training.lr == 0.25);
}

TEST_CASE("a YAML config of several documents is an error, not its first document alone") {
  Config c;
  auto yaml_error = [&](const std::string& text) {
    return error_of<ConfigError>([&] { lcm::config::apply_config_yaml(c, text, "run.yaml"); });
  };
  CHECK(contains(yaml_error("training:\n  lr: 0.1\n---\ntraining:\n  lr: 0.2\n"),
                 "run.yaml: holds 2 YAML documents"));
  // malformed text after an end marker is read, not ignored
  CHECK(contains(yaml_error("training:\n  lr: 0.1\n...\n: [\n"), "run.yaml: malformed YAML"));
  // one document with a leading --- or a trailing ... is fine
  lcm::config::apply_config_yaml(c, "---\ntraining:\n  lr: 0.3\n...\n", "one.yaml");
  CHECK(c.training.lr == 0.3);
}

TEST_CASE("--config: an empty file and /dev/null are empty configs; other non-files say what") {
  const Config defaults;
  const Config empty = load({"--config", write_temp("empty.yaml", "")});
  CHECK(empty.data.batch_size == defaults.data.batch_size);
  CHECK(empty.config_file != "");
  const Config devnull = load({"--config", "/dev/null", "data.batch_size=7"});
  CHECK(devnull.data.batch_size == 7);
  CHECK(devnull.config_file == "/dev/null");
  // a pipe is read once, like a file
  const std::string fifo = lcm::test::temp_dir("config") + "/fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::system(("(printf 'data:\\n  batch_size: 9\\n' > " + fifo + ") &").c_str());
  CHECK(load({"--config", fifo}).data.batch_size == 9);
  // an endless device is refused, not read forever; a missing file is still "not found"
  std::string m = error_of<ConfigError>([&] { load({"--config", "/dev/zero"}); });
  CHECK(contains(m, "/dev/zero: a character device"));
  CHECK(contains(m, "more than 1 MiB"));
  m = error_of<ConfigError>([&] { load({"--config", "/nonexistent/x.yaml"}); });
  CHECK(contains(m, "config file not found"));
}

TEST_CASE("--help lists every word a boolean accepts, each of which parses") {
  const std::string listing = lcm::config::describe_config(Config{}, true);
  CHECK(contains(listing, "a boolean (true|yes|on|1 or false|no|off|0, any case)"));
  CHECK_FALSE(contains(listing, "(true|false)"));
  Config c;
  for (const char* w : {"true", "YES", "On", "1"}) {
    lcm::config::set_config_value(c, "data.strict", "false");
    lcm::config::set_config_value(c, "data.strict", w);
    CHECK(c.data.strict);
  }
  for (const char* w : {"false", "No", "OFF", "0"}) {
    lcm::config::set_config_value(c, "data.strict", "true");
    lcm::config::set_config_value(c, "data.strict", w);
    CHECK_FALSE(c.data.strict);
  }
  CHECK(
      contains(error_of<ConfigError>([&] { lcm::config::set_config_value(c, "data.strict", "y"); }),
               "true|yes|on|1 or false|no|off|0"));
}

TEST_CASE("an integer key given another number shows the value and why it is refused") {
  Config c;
  auto msg = [&](const std::string& key, const std::string& value) {
    return error_of<ConfigError>([&] { lcm::config::set_config_value(c, key, value); });
  };
  CHECK(contains(msg("data.batch_size", "5.5"), "got '5.5' (not a whole number)"));
  CHECK(contains(msg("data.max_programs", "1e23"), "got '1e23' (out of range)"));
  CHECK(contains(msg("data.max_programs", "1180591620717411303424"), "(out of range)"));
  CHECK(contains(msg("data.seed", "1e40"), "got '1e40' (out of range)"));
  CHECK(contains(msg("data.batch_size", "1e3"),
                 "(written in floating-point notation; write it "
                 "as 1000)"));
  CHECK(contains(msg("data.batch_size", "99999999999"), "the largest accepted is 2147483647"));
  // not a number at all: the value, no reason
  const std::string m = msg("data.batch_size", "2^70");
  CHECK(contains(m, "got '2^70'"));
  CHECK_FALSE(contains(m, "out of range"));
  // through a YAML file too
  CHECK(contains(error_of<ConfigError>([&] {
                   lcm::config::apply_config_yaml(c, "data:\n  batch_size: 5.5\n", "f.yaml");
                 }),
                 "'5.5' (not a whole number) (in f.yaml)"));
}

namespace {

/// The ConfigError of applying `text` as a YAML config named "gen.yaml" ("" when it applies);
/// any other exception is reported as "WRONG TYPE: ...".
std::string yaml_error(const std::string& text) {
  Config c;
  return error_of<ConfigError>([&] { lcm::config::apply_config_yaml(c, text, "gen.yaml"); });
}

/// `n` nested maps in block style, key `k` at each level, the scalar 1 at the bottom.
std::string block_nesting(int n, const std::string& k = "training") {
  std::string t;
  for (int i = 0; i < n; ++i)
    t += std::string(size_t(2 * i), ' ') + k + ":" + (i + 1 < n ? "\n" : " 1\n");
  return t;
}

/// `n` nested maps in flow style on one line.
std::string flow_nesting(int n) {
  std::string t;
  for (int i = 0; i < n; ++i) t += "{a: ";
  t += "1";
  for (int i = 0; i < n; ++i) t += "}";
  return t + "\n";
}

}  // namespace

TEST_CASE("YAML alias cycles are a config error naming the file and the alias's line") {
  // A chain of `depth` block-style keys; the map under key `anchor_at` is anchored &t and the
  // last key's value is *t: every such alias is inside the collection it names.
  int cases = 0;
  for (int depth = 2; depth <= 8; ++depth)
    for (int anchor_at = 0; anchor_at + 1 < depth; ++anchor_at)
      for (const std::string key : {"training", "data", "x"}) {
        std::string t;
        for (int i = 0; i < depth; ++i) {
          t += std::string(size_t(2 * i), ' ') + (i == 0 ? key : "k" + std::to_string(i)) + ":";
          if (i == anchor_at) t += " &t";
          t += i + 1 < depth ? "\n" : " *t\n";
        }
        INFO(t);
        const std::string m = yaml_error(t);
        CHECK(contains(m, "gen.yaml line " + std::to_string(depth) +
                              ": alias *t refers to the "
                              "collection that holds it"));
        CHECK(contains(m, "anchored &t at line " + std::to_string(anchor_at + 1)));
        ++cases;
      }
  // the file, flow style, a sequence holding itself, the alias as a key, the root
  for (const auto& [text, line] :
       std::vector<std::pair<std::string, int>>{{"training: &t\n  x: *t\n", 2},
                                                {"training: &t {x: {y: *t}}\n", 1},
                                                {"data:\n  train_file: &f [a, *f]\n", 2},
                                                {"data:\n  files: &f [[[*f]]]\n", 2},
                                                {"training: &t\n  ? *t\n  : 1\n", 2},
                                                {"&root {training: *root}\n", 1},
                                                {"&root\ntraining:\n  lr: *root\n", 3},
                                                {"a: &a {b: &b {c: *b}}\n", 1},
                                                {"a: &a\n  - &b\n    - *a\n", 3}}) {
    INFO(text);
    const std::string m = yaml_error(text);
    CHECK(contains(m, "gen.yaml line " + std::to_string(line) + ": alias *"));
    CHECK(contains(m, "an alias cycle"));
    ++cases;
  }
  CHECK(cases > 40);
  // through --config: the file's path is named
  const std::string f = write_temp("cycle.yaml", "training: &t\n  x: *t\n");
  CHECK(contains(error_of<ConfigError>([&] { load({"--config", f}); }), f + " line 2: alias *t"));
  // an alias that is not a cycle still works: a scalar given twice by name
  Config c;
  lcm::config::apply_config_yaml(c, "experiment:\n  name: &n run7\ndata:\n  machine: *n\n",
                                 "ok.yaml");
  CHECK(c.experiment.name == "run7");
  CHECK(c.data.machine == "run7");
}

TEST_CASE("YAML nested past kMaxConfigDepth says 'nested deeper than N', never 'malformed'") {
  const int limit = lcm::config::kMaxConfigDepth;
  const std::string deeper = "nested deeper than " + std::to_string(limit) + " levels";
  for (int n = 1; n <= limit + 8; ++n) {
    INFO("depth " << n);
    for (const std::string& text : {block_nesting(n), flow_nesting(n)}) {
      const std::string m = yaml_error(text);
      CHECK(!contains(m, "WRONG TYPE"));
      CHECK(!contains(m, "malformed"));
      CHECK(contains(m, deeper) == (n > limit));
      if (n > limit) CHECK(contains(m, "gen.yaml line "));
    }
  }
  // far past yaml-cpp's own limit of 2000 levels, and past any stack
  for (int n : {500, 2001, 5000, 200000}) {
    INFO("depth " << n);
    CHECK(contains(yaml_error(flow_nesting(n)), deeper));
    CHECK(contains(yaml_error("data:\n  files: " + std::string(size_t(n), '[') + "\n"), deeper));
    if (n <= 500) CHECK(contains(yaml_error(block_nesting(n)), deeper));  // n² bytes
  }
  // depth brought by an alias counts: an anchored collection `m` levels deep used `l` levels
  // down is l + m deep
  for (int m = 1; m <= 12; ++m)
    for (int l = 1; l <= 12; ++l) {
      std::string anchored = "{a: 1}";
      for (int i = 1; i < m; ++i) anchored = "{a: " + anchored + "}";
      std::string use = "*x";
      for (int i = 0; i < l; ++i) use = "{b: " + use + "}";
      // the root map holds `def` (level 2 on) and `use` (its maps are levels 1..l, the alias
      // sits in l of them)
      const std::string text =
          "def: &x " + anchored + "\nuse: " + use.substr(4, use.size() - 5) + "\n";
      INFO(text);
      const std::string msg = yaml_error(text);
      CHECK(contains(msg, deeper) == (l + m > limit));
      if (l + m > limit) CHECK(contains(msg, "through the alias *x"));
    }
}

TEST_CASE("generated YAML with anchors and aliases: a ConfigError or success, never a crash") {
  // Random small documents of maps, sequences, scalars, anchors and aliases (to earlier anchors,
  // open or closed): each either applies or throws ConfigError.
  lcm::test::Lcg64 rng{12345};
  auto next = [&](uint64_t n) { return rng.below(n); };
  int errors = 0, applied = 0;
  for (int doc = 0; doc < 400; ++doc) {
    int anchors = 0;
    std::function<std::string(int)> node = [&](int depth) -> std::string {
      std::string anchor;
      if (next(3) == 0) anchor = "&a" + std::to_string(anchors++) + " ";
      const uint64_t kind = depth > 24 ? 0 : next(5);
      if (kind == 0) return anchor + (next(2) ? "1" : "x");
      if (kind == 1 && anchors > 0) return "*a" + std::to_string(next(uint64_t(anchors)));
      if (kind <= 3) {
        std::string t = anchor + "{";
        for (uint64_t i = 0, n = 1 + next(3); i < n; ++i)
          t += (i ? ", " : "") + std::string(next(2) ? "training" : "k" + std::to_string(i)) +
               ": " + node(depth + 1);
        return t + "}";
      }
      std::string t = anchor + "[";
      for (uint64_t i = 0, n = next(3); i < n; ++i) t += (i ? ", " : "") + node(depth + 1);
      return t + "]";
    };
    const std::string text = node(0) + "\n";
    INFO(text);
    const std::string m = yaml_error(text);
    CHECK(!contains(m, "WRONG TYPE"));
    (m.empty() ? applied : errors) += 1;
  }
  CHECK(errors > 0);
}

TEST_CASE("a key given twice on the command line is an error naming both values, every key") {
  // two texts each key accepts (its default, and another when one of these is accepted)
  const std::vector<std::string> others = {"1",    "2",     "0",          "true", "false",
                                           "none", "other", "0.5",        "cpu",  "report",
                                           "skip", "auto",  "a.jsonl.gz", "3",    "mixed"};
  int with_two_values = 0;
  for (const auto& k : lcm::config::config_keys()) {
    const std::string v1 = k.get(Config{});
    std::string v2 = v1;
    for (const std::string& o : others) {
      Config probe;
      try {
        k.set(probe, o);
      } catch (const ConfigError&) {
        continue;
      }
      if (k.get(probe) != v1) {
        v2 = o;
        break;
      }
    }
    with_two_values += v2 != v1;
    const std::string both = "'" + v1 + "' and '" + v2 + "'";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{k.key + "=" + v1, k.key + "=" + v2},
          std::vector<std::string>{k.key, v1, k.key + "=" + v2},
          std::vector<std::string>{"--" + k.key + "=" + v1, k.key, v2}}) {
      INFO(k.key << ": " << args.size() << " arguments");
      Config c;
      const std::string m = error_of<ConfigError>([&] { lcm::config::apply_overrides(c, args); });
      CHECK(contains(m, "config key '" + k.key + "' given twice on the command line: " + both));
    }
  }
  CHECK(with_two_values > 50);
  // through a tool's command line, and distinct keys stay fine
  CHECK(contains(error_of<ConfigError>([&] {
                   load({"training.lr=0.1", "training.lr", "0.2"});
                 }),
                 "'0.1' and '0.2'"));
  CHECK(load({"training.lr=0.1", "data.batch_size=8"}).data.batch_size == 8);
}

TEST_CASE("an experiment.name too long says its length and the limit, at every length") {
  const size_t limit = lcm::config::kMaxExperimentName;
  for (size_t n = 1; n <= limit + 200; ++n) {
    const std::string name(n, 'r');
    Config c;
    const std::string m =
        error_of<ConfigError>([&] { lcm::config::set_config_value(c, "experiment.name", name); });
    if (n <= limit) {
      CHECK_MESSAGE(m.empty(), m);
      CHECK(c.experiment.name == name);
    } else {
      INFO("length " << n);
      CHECK(contains(
          m, std::to_string(n) + " characters long; the limit is " + std::to_string(limit)));
      CHECK(c.experiment.name == "lcm");
    }
  }
}

TEST_CASE("a config larger than 1 MiB is refused before it is parsed, naming its size") {
  const size_t limit = size_t(1) << 20;  // the limit docs/tools.md gives
  const std::string line = "# a comment line of a config that is too large to be one\n";
  std::string text;
  while (text.size() + line.size() <= limit) text += line;
  text += std::string(limit - text.size(), '#');  // exactly the limit: accepted
  const std::string at_limit = write_temp("at_limit.yaml", text);
  Config c;
  CHECK_NOTHROW(lcm::config::apply_config_file(c, at_limit));
  for (const size_t extra : {size_t(1), size_t(1000), limit}) {
    const std::string f = write_temp("large.yaml", text + std::string(extra, '#'));
    const std::string m = error_of<ConfigError>([&] { lcm::config::apply_config_file(c, f); });
    CHECK(contains(m, f + ": " + std::to_string(limit + extra) + " bytes; a config is at most " +
                          std::to_string(limit) + " bytes"));
    CHECK(contains(yaml_error(text + std::string(extra, '#')), "bytes; a config is at most"));
  }
}
