// Edge cases of the command lines found by a new-user test: out-of-range thread counts and bench
// options (crashes before), lcm-predict --out equal to its input (data loss before), upper-case
// extensions, wrong weights files, device names, the no-GPU hint. Unit checks plus subprocesses.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif
#include "config/config.hpp"
#include "engine/device.hpp"
#include "engine/parameter.hpp"
#include "engine/safetensors.hpp"
#include "engine/threads.hpp"
#include "model/cost_model.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "tools/common/output_file.hpp"
#include "tools/common/strict_options.hpp"
#include "train/checkpoint.hpp"
#include "train/encoder.hpp"
#include "train/weights_check.hpp"
#include "util/atomic_file.hpp"

namespace fs = std::filesystem;
using lcm::config::Config;
using lcm::config::ConfigError;
using lcm::test::bin_dir;
using lcm::test::contains;
using lcm::test::error_of;
using lcm::test::run_tool;
using lcm::test::RunResult;
using lcm::test::slurp;

namespace {

/// Small model sizes (fast) for the checkpoint below; the tools read them from its metadata.
Config small_config() {
  Config c;
  lcm::config::set_config_value(c, "model.comp_embed_layer_sizes", "64,32");
  lcm::config::set_config_value(c, "model.lstm_embedding_size", "8");
  lcm::config::set_config_value(c, "model.expr_embed_size", "8");
  return c;
}

/// Temp folder with valid.jsonl (3 programs of the mini sample) and model.safetensors (a fresh
/// small cost model saved by save_checkpoint, sizes in its metadata). "" dir when the shared
/// data is absent.
struct PredictFixture {
  std::string dir, valid, weights;
};

const PredictFixture& predict_fixture() {
  static PredictFixture f = [] {
    PredictFixture x;
    const std::string mini = lcm::test::shared_data("looperset-sample/mini.jsonl.gz");
    if (mini.empty()) return x;
    x.dir = lcm::test::temp_dir("cli_edges");
    x.valid = x.dir + "/valid.jsonl";
    x.weights = x.dir + "/model.safetensors";
    const auto lines = lcm::test::gz_lines(mini);
    REQUIRE(lines.size() >= 3);
    std::ofstream v(x.valid);
    for (size_t i = 0; i < 3; ++i) v << lines[i] << "\n";
    v.close();
    const Config c = small_config();
    lcm::model::CostModel<float> m(lcm::train::model_config(c), 3);
    lcm::train::save_checkpoint(x.weights, m);
    return x;
  }();
  return f;
}

std::string predict_args(const PredictFixture& f) {
  return "eval.weights_path=" + f.weights + " data.valid_file=" + f.valid +
         " training.threads=1 experiment.base_path=" + f.dir + "/runs";
}

}  // namespace

TEST_CASE("training.threads accepts [0, 1024] and names the range otherwise") {
  for (const char* ok : {"0", "1", "1024"}) {
    Config c;
    lcm::config::set_config_value(c, "training.threads", ok);
    CHECK(c.training.threads == std::stoi(ok));
  }
  for (const char* bad : {"100000", "1025", "-1", "2147483648"}) {
    INFO("training.threads=" << bad);
    Config c;
    const std::string m =
        error_of<ConfigError>([&] { lcm::config::set_config_value(c, "training.threads", bad); });
    CHECK(contains(m, "training.threads"));
    CHECK(contains(m, "[0, 1024]"));
  }
}

TEST_CASE("set_num_threads refuses more than kMaxThreads; oversubscription is a warning") {
  const int saved = lcm::num_threads();
  CHECK_THROWS_AS(lcm::set_num_threads(lcm::kMaxThreads + 1), std::invalid_argument);
  CHECK(lcm::num_threads() == saved);  // unchanged by the refused call
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0) {
    CHECK(lcm::oversubscription_warning(int(hw)).empty());
    const std::string w = lcm::oversubscription_warning(int(hw) + 1);
    CHECK(contains(w, "warning"));
    CHECK(contains(w, std::to_string(hw) + " hardware threads"));
  }
  CHECK(lcm::oversubscription_warning(1).empty());
}

TEST_CASE("training.device accepts what lcm::parse_device accepts (cuda = cuda:0)") {
  for (const char* text : {"cpu", "cuda", "cuda:0", "cuda:7", "cuda:1234", "gpu", "banana",
                           "cuda:", "cuda:x", "CUDA", "cuda:12345", ""}) {
    INFO("device '" << text << "'");
    bool engine_ok = true, config_ok = true;
    lcm::DeviceSpec engine;
    try {
      engine = lcm::parse_device(text);
    } catch (const std::invalid_argument&) {
      engine_ok = false;
    }
    Config c;
    try {
      lcm::config::set_config_value(c, "training.device", text);
    } catch (const ConfigError&) {
      config_ok = false;
    }
    CHECK(engine_ok == config_ok);
    if (engine_ok && config_ok) {
      const lcm::DeviceSpec t = c.training.device;
      CHECK(t.kind == engine.kind);
      CHECK(t.index == engine.index);
    }
  }
}

TEST_CASE("same_file: links and spellings of one file; require_output_not_input refuses it") {
  const std::string dir = lcm::test::temp_dir("cli_edges_same");
  const std::string a = dir + "/a.jsonl", b = dir + "/b.jsonl";
  std::ofstream(a) << "x\n";
  std::ofstream(b) << "y\n";
  fs::create_symlink(a, dir + "/link.jsonl");
  fs::create_directories(dir + "/sub");
  CHECK(lcm::tools::same_file(a, a));
  CHECK(lcm::tools::same_file(a, dir + "/sub/../a.jsonl"));
  CHECK(lcm::tools::same_file(a, dir + "/link.jsonl"));
  CHECK(lcm::tools::same_file(dir + "/./new.csv", dir + "/new.csv"));  // neither exists
  CHECK_FALSE(lcm::tools::same_file(a, b));
  CHECK_FALSE(lcm::tools::same_file(a, dir + "/new.csv"));
  const std::string m = error_of<ConfigError>([&] {
    lcm::tools::require_output_not_input("--out", dir + "/link.jsonl",
                                         {{"eval.weights_path", b}, {"data.valid_file", a}});
  });
  CHECK(contains(m, "same file as data.valid_file"));
  CHECK(contains(m, "refusing to overwrite"));
  lcm::tools::require_output_not_input("--out", dir + "/new.csv",
                                       {{"data.valid_file", a}, {"x", ""}});
  CHECK(slurp(a) == "x\n");
  fs::remove_all(dir);
}

TEST_CASE("lower_extension") {
  CHECK(lcm::tools::lower_extension("X.CSV") == ".csv");
  CHECK(lcm::tools::lower_extension("dir.d/p.JsonL") == ".jsonl");
  CHECK(lcm::tools::lower_extension("dir.d/noext") == "");
}

TEST_CASE("load_parameters lists at most 5 problems, then how many more") {
  const std::string dir = lcm::test::temp_dir("cli_edges_cap");
  lcm::ParameterStore<float> saved, other;
  for (int i = 0; i < 12; ++i) {
    saved.add("file_tensor_" + std::to_string(i), lcm::Shape{2});
    other.add("model_param_" + std::to_string(i), lcm::Shape{2});
  }
  lcm::save_parameters(dir + "/w.safetensors", saved);
  const std::string m = error_of([&] { lcm::load_parameters(dir + "/w.safetensors", other); });
  CHECK(std::count(m.begin(), m.end(), ';') == 5);  // 5 problems, then "; ... and 19 more"
  CHECK(contains(m, "... and 19 more"));
  fs::remove_all(dir);
}

TEST_CASE("an optimizer state or an autoencoder as eval.weights_path: one short line") {
  std::string m =
      lcm::train::weights_kind_problem("runs/weights/last_optimizer_x.safetensors",
                                       {{"lcm.format", "optimizer-state"}}, {"exp_avg.a"});
  CHECK(contains(m, "is an optimizer-state file"));
  CHECK(contains(m,
                 "runs/weights/best_model_x.safetensors or runs/weights/last_model_x.safetensors"));
  m = lcm::train::weights_kind_problem("ae.safetensors", {{"format", "pt"}},
                                       {"encoder.weight_ih_l0", "decoder.weight", "decoder.bias"});
  CHECK(contains(m, "is an autoencoder's weights"));
  CHECK(lcm::train::weights_kind_problem("m.safetensors", {{"lcm.format", "parameters"}},
                                         {"encoder.weight_ih_l0", "predict.weight"})
            .empty());
  // the published autoencoder itself
  LCM_REQUIRE_SHARED(ae, "pretrained/access_matrix_autoencoder_published.safetensors");
  m = error_of<ConfigError>([&] { lcm::train::require_cost_model_weights(ae); });
  CHECK(contains(m, "eval.weights_path: "));
  CHECK(contains(m, "autoencoder"));
  CHECK(m.size() < 400);
}

#ifdef LCM_WITH_CUDA
TEST_CASE("without a GPU the device error says so in plain words") {
  std::string why;
  if (lcm::cuda::device_count(&why) > 0) {
    MESSAGE("skipped: a CUDA device is visible");
    return;
  }
  const std::string m = error_of([] { lcm::require_device(lcm::parse_device("cuda")); });
  CHECK(contains(m, "cuda:0: no CUDA device available"));
  CHECK(contains(m, "no NVIDIA driver or GPU on this machine?"));
}
#endif

TEST_CASE("lcm-eval / lcm-train refuse training.threads=100000 with a config error") {
  const std::string dir = lcm::test::temp_dir("cli_edges_threads");
  for (const char* tool : {"lcm-eval", "lcm-train"}) {
    INFO(tool);
    const RunResult r = run_tool(dir, tool,
                                 "training.threads=100000 eval.weights_path=x.safetensors "
                                 "experiment.base_path=" +
                                     dir + "/runs");
    CHECK(r.code == 2);
    CHECK(contains(r.err, "training.threads"));
    CHECK(contains(r.err, "[0, 1024]"));
  }
  fs::remove_all(dir);
}

TEST_CASE("lcm-predict: --out never overwrites an input; X.CSV is CSV; replacing is said") {
  const PredictFixture& f = predict_fixture();
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const std::string input = slurp(f.valid), weights = slurp(f.weights);
  REQUIRE(!input.empty());
  // --out = the input, spelled differently or through a link: refused before any work
  fs::create_symlink(f.valid, f.dir + "/link.csv");
  for (const std::string& out : {f.valid, f.dir + "/./valid.jsonl", f.dir + "/link.csv"}) {
    INFO("--out " << out);
    const RunResult r = run_tool(f.dir, "lcm-predict", predict_args(f) + " --out " + out);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "refusing to overwrite an input"));
  }
  CHECK(slurp(f.valid) == input);
  CHECK(slurp(f.weights) == weights);
  // an upper-case extension is the same format
  const std::string out = f.dir + "/pred.CSV";
  RunResult r = run_tool(f.dir, "lcm-predict", predict_args(f) + " --out " + out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(slurp(out).rfind("program,schedule_index,sched_str,predicted_speedup", 0) == 0);
  CHECK_FALSE(contains(r.err, "replacing existing"));
  // a second run replaces its own earlier output, and says so
  r = run_tool(f.dir, "lcm-predict", predict_args(f) + " --out " + out);
  CHECK(r.code == 0);
  CHECK(contains(r.err, "lcm-predict: replacing existing " + out));
}

TEST_CASE("lcm-eval / lcm-predict: an optimizer-state file as the checkpoint is named as such") {
  const PredictFixture& f = predict_fixture();
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  // an optimizer state as lcm-train writes it (engine/optim.cpp metadata)
  lcm::SafeTensorsFile opt;
  opt.metadata["lcm.format"] = "optimizer-state";
  const float zero[2] = {0.f, 0.f};
  for (int i = 0; i < 30; ++i)
    opt.add("exp_avg.param_" + std::to_string(i), lcm::SafeTensor::from_f32({2}, zero));
  fs::create_directories(f.dir + "/w");
  const std::string opt_path = f.dir + "/w/last_optimizer_run.safetensors";
  lcm::write_safetensors(opt_path, opt);
  for (const char* tool : {"lcm-eval", "lcm-predict"}) {
    INFO(tool);
    const RunResult r = run_tool(f.dir, tool,
                                 "eval.weights_path=" + opt_path + " data.valid_file=" + f.valid +
                                     " training.threads=1 experiment.base_path=" + f.dir + "/runs");
    CHECK(r.code == 2);
    CHECK(contains(r.err, "is an optimizer-state file"));
    CHECK(contains(r.err, f.dir + "/w/best_model_run.safetensors"));
    CHECK(r.err.size() < 500);
  }
}

TEST_CASE("bench_model: out-of-range options and bad devices are usage errors (exit 2)") {
  const std::string dir = lcm::test::temp_dir("cli_edges_bench");
  if (!fs::is_regular_file(bin_dir() + "/bench_model")) {  // built unless LCM_BUILD_BENCH=OFF
    MESSAGE("skipped: no " << bin_dir() << "/bench_model");
    return;
  }
  for (const char* args :
       {"--infer-reps 0", "--infer-reps -3", "--epochs -1", "--batches -1", "--batch-size 0",
        "--threads 100000", "--device gpu", "--device banana"}) {
    INFO("bench_model " << args);
    const RunResult r =
        run_tool(dir, "bench_model", std::string(args) + " --data /nonexistent.jsonl");
    CHECK(r.code == 2);
    CHECK(!r.err.empty());
  }
  const RunResult r = run_tool(dir, "bench_model", "--epochs 0 --batch-dir " + dir);
  CHECK(r.code == 2);
  CHECK(contains(r.err, "nothing to run"));
  fs::remove_all(dir);
}

TEST_CASE("bench_model --epochs 0 without --infer-dir measures inference on --data") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  if (!fs::is_regular_file(bin_dir() + "/bench_model")) {
    MESSAGE("skipped: no " << bin_dir() << "/bench_model");
    return;
  }
  const std::string dir = lcm::test::temp_dir("cli_edges_bench0");
  const RunResult r = run_tool(
      dir, "bench_model",
      "--threads 1 --epochs 0 --infer-reps 1 --data " + mini + " --cache-dir " + dir + "/cache");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "inference (1 threads): program "));
  CHECK_FALSE(contains(r.out, "training ("));
  fs::remove_all(dir);
}

TEST_CASE("bench_reference.py: a bad --device is bad usage (exit 2), not 'no CUDA device'") {
  if (!fs::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: /usr/bin/python3 with torch is absent");
    return;
  }
  const std::string dir = lcm::test::temp_dir("cli_edges_ref");
  const std::string script = lcm::test::source_path("bench/reference/bench_reference.py");
  const std::string e = dir + "/err.txt";
  const int st =
      std::system(("/usr/bin/python3 " + script + " --device gpu > /dev/null 2> " + e).c_str());
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  CHECK(contains(slurp(e), "bad device 'gpu' (allowed: cpu, cuda, cuda:N"));
  fs::remove_all(dir);
}

TEST_CASE("model.encoder_weights naming a directory says so (not 'not found')") {
  const std::string dir = lcm::test::temp_dir("encoder_dir");
  const std::string msg = error_of<std::runtime_error>(
      [&] { lcm::train::encoder_config_of(dir, lcm::model::EncoderKind::AccessMatrix); });
  CHECK(contains(msg, "is a directory"));
  CHECK(!contains(msg, "not found"));
  const std::string missing = error_of<std::runtime_error>([&] {
    lcm::train::encoder_config_of(dir + "/nope.safetensors", lcm::model::EncoderKind::AccessMatrix);
  });
  CHECK(contains(missing, "not found"));
}

TEST_CASE(
    "every tool that reads --config refuses an alias cycle and deep nesting, naming file and "
    "line") {
  const std::string dir = lcm::test::temp_dir("config_shape");
  const std::string cycle = dir + "/cycle.yaml", deep = dir + "/deep.yaml";
  std::ofstream(cycle) << "training: &t\n  x: *t\n";
  std::string nested;
  for (int i = 0; i < 3000; ++i) nested += "{a: ";
  nested += "1" + std::string(3000, '}') + "\n";
  std::ofstream(deep) << nested;
  const std::string deeper =
      "nested deeper than " + std::to_string(lcm::config::kMaxConfigDepth) + " levels";
  for (const char* tool :
       {"lcm-train", "lcm-eval", "lcm-predict", "lcm-prepare", "lcm-pretrain", "lcm-serve"}) {
    INFO(tool);
    RunResult r = run_tool(dir, tool, "--config " + cycle);
    CHECK(r.code == 2);
    CHECK(contains(r.err, cycle + " line 2: alias *t refers to the collection that holds it"));
    r = run_tool(dir, tool, "--config " + deep + " --help");
    CHECK(r.code == 2);
    CHECK(contains(r.err, deep + " line 1: " + deeper));
  }
}

TEST_CASE("lcm-synth: numbers out of range are usage errors naming the range, never wrapped") {
  const std::string dir = lcm::test::temp_dir("synth_ranges");
  const std::string out = " --out " + dir + "/s.jsonl.gz";
  struct Case {
    std::string option, value, range;
  };
  std::vector<Case> cases;
  for (const char* v : {"-1", "-18446744073709551615", "18446744073709551616",
                        "99999999999999999999999", "1e3", "1.5", "0x10", "+5", " 5", ""})
    cases.push_back({"--seed", v, "[0, 18446744073709551615]"});
  for (const char* v : {"-1", "1099511627777", "1e30"})
    cases.push_back({"--programs", v, "[0, 1099511627776]"});
  for (const char* v : {"1", "1000001", "-2"})
    cases.push_back({"--schedules-per-program", v, "[2, 1000000]"});
  for (const char* v : {"-1", "10", "010"}) cases.push_back({"--level", v, "[0, 9]"});
  for (const char* v : {"1025", "-1"}) cases.push_back({"--threads", v, "[0, 1024]"});
  for (const char* v : {"nan", "inf", "-0.5", "1.5", "x"})
    cases.push_back({"--failed-fraction", v, "[0, 1]"});
  for (const Case& c : cases) {
    INFO(c.option << " '" << c.value << "'");
    const std::string programs = c.option == "--programs" ? "" : " --programs 1";
    const RunResult r =
        run_tool(dir, "lcm-synth", programs + out + " " + c.option + " '" + c.value + "'");
    CHECK(r.code == 2);
    CHECK(contains(r.err, c.option));
    CHECK(contains(r.err, c.range));
    CHECK(!fs::exists(dir + "/s.jsonl.gz"));
  }
  // the largest seed is taken as given (not wrapped): two different seeds, two different files
  RunResult r = run_tool(dir, "lcm-synth",
                         "--programs 2 --out " + dir + "/a.jsonl.gz --seed 18446744073709551615");
  REQUIRE(r.code == 0);
  r = run_tool(dir, "lcm-synth", "--programs 2 --out " + dir + "/b.jsonl.gz --seed 0");
  REQUIRE(r.code == 0);
  CHECK(slurp(dir + "/a.jsonl.gz") != slurp(dir + "/b.jsonl.gz"));
  // leading zeros are decimal, not octal: 010 = 10
  r = run_tool(dir, "lcm-synth", "--programs 2 --out " + dir + "/c.jsonl.gz --seed 010");
  REQUIRE(r.code == 0);
  r = run_tool(dir, "lcm-synth", "--programs 2 --out " + dir + "/d.jsonl.gz --seed 10");
  REQUIRE(r.code == 0);
  CHECK(slurp(dir + "/c.jsonl.gz") == slurp(dir + "/d.jsonl.gz"));
}

TEST_CASE("parse_decimal_integer: exact at the bounds of every integer type") {
  using lcm::tools::parse_decimal_integer;
  int64_t i = 0;
  CHECK(parse_decimal_integer<int64_t>("-9223372036854775808", INT64_MIN, INT64_MAX, i).empty());
  CHECK(i == INT64_MIN);
  CHECK(!parse_decimal_integer<int64_t>("-9223372036854775809", INT64_MIN, INT64_MAX, i).empty());
  CHECK(parse_decimal_integer<int64_t>("9223372036854775807", INT64_MIN, INT64_MAX, i).empty());
  CHECK(i == INT64_MAX);
  CHECK(!parse_decimal_integer<int64_t>("9223372036854775808", INT64_MIN, INT64_MAX, i).empty());
  uint64_t u = 0;
  CHECK(parse_decimal_integer<uint64_t>("18446744073709551615", 0, UINT64_MAX, u).empty());
  CHECK(u == UINT64_MAX);
  CHECK(!parse_decimal_integer<uint64_t>("18446744073709551616", 0, UINT64_MAX, u).empty());
  CHECK(!parse_decimal_integer<uint64_t>("-1", 0, UINT64_MAX, u).empty());
  CHECK(parse_decimal_integer<uint64_t>("-0", 0, UINT64_MAX, u).empty());
  CHECK(u == 0);
  // every value of a small range and its neighbours
  for (int v = -20; v <= 20; ++v) {
    int got = 0;
    const std::string why = parse_decimal_integer<int>(std::to_string(v), -10, 10, got);
    CHECK(why.empty() == (v >= -10 && v <= 10));
    if (why.empty())
      CHECK(got == v);
    else
      CHECK(contains(why, "expected an integer in [-10, 10], got '" + std::to_string(v) + "'"));
  }
}

TEST_CASE("an output name too long for the file system says its length and the limit") {
  const std::string dir = lcm::test::temp_dir("long_names");
  const long max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  REQUIRE(max > 0);
  const size_t temp_extra = lcm::temp_path_for(dir + "/x").size() - (dir + "/x").size();
  int refused = 0;
  for (size_t n = size_t(max) - temp_extra - 3; n <= size_t(max) + 40; ++n) {
    const std::string name = std::string(n - 6, 'o') + ".jsonl";
    const std::string path = dir + "/" + name;
    const std::string m = error_of<std::runtime_error>([&] { lcm::atomic_write_file(path, "x"); });
    INFO("name of " << n << " bytes: " << m);
    if (n + temp_extra <= size_t(max)) {
      CHECK(m.empty());
      continue;
    }
    ++refused;
    CHECK(contains(m, "the file name is " + std::to_string(n) + " bytes"));
    CHECK(contains(m, "its temp file's " + std::to_string(n + temp_extra)));
    CHECK(contains(m, "the limit is " + std::to_string(max) + " bytes per name"));
    // the startup check of the tools' outputs says the same
    CHECK(contains(error_of<std::runtime_error>([&] { lcm::tools::require_writable_output(path); }),
                   "the limit is " + std::to_string(max)));
  }
  CHECK(refused > 40);
}
