// Tests of the files lcm reads and writes under hostile input and concurrent runs: the run lock
// (a second lcm-train / lcm-pretrain on one experiment stops naming the first), the removal of
// this host's stale temp files at startup, the one-line reason of a rebuilt cache in lcm-train,
// the path (not the temp file) in lcm-synth's write error, and deeply nested metadata JSON.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/autoencoder.hpp"
#include "support/test_support.hpp"
#include "train/checkpoint.hpp"
#include "train/history.hpp"
#include "train/resume.hpp"
#include "util/atomic_file.hpp"
#include "util/run_lock.hpp"

namespace fs = std::filesystem;
using lcm::test::contains;
using lcm::test::error_of;
using lcm::test::run_tool;

namespace {

std::string host_name() {
  char buf[256] = {};
  REQUIRE(::gethostname(buf, sizeof buf - 1) == 0);
  return buf;
}

/// A tiny lcm-train on the committed synthetic slice (16 programs per file, one epoch).
/// `train_file`: data.train_file ("" = the committed synthetic training slice); each key once.
std::string tiny_train_args(const std::string& base, const std::string& name,
                            const std::string& train_file = "") {
  return "model.preset=reference data.train_file=" +
         (train_file.empty() ? lcm::test::committed_data("synth_train.jsonl.gz") : train_file) +
         " data.valid_file=" + lcm::test::committed_data("synth_valid.jsonl.gz") +
         " data.max_programs=16 data.batch_size=32 data.min_functions_per_footprint=0 "
         "training.threads=1 data.nb_workers=1 model.comp_embed_layer_sizes=16,8 "
         "model.lstm_embedding_size=8 model.expr_embed_size=8 training.max_epochs=1 -q "
         "experiment.name=" +
         name + " experiment.base_path=" + base;
}

}  // namespace

TEST_CASE("RunLock: a second holder is refused naming host, pid and lock file; kill -9 frees it") {
  const std::string dir = lcm::test::temp_dir("run_lock");
  const std::string path = dir + "/sub/lcm_x.lock";
  {
    const lcm::RunLock a = lcm::RunLock::acquire(path, "experiment x in " + dir, "hint");
    CHECK(a.held());
    CHECK(lcm::test::slurp(path) == host_name() + " " + std::to_string(::getpid()) + "\n");
    // another open file description of this process conflicts too
    const std::string e =
        error_of([&] { lcm::RunLock::acquire(path, "experiment x in " + dir, "hint"); });
    CHECK(e == "experiment x in " + dir + " is in use by another run: host " + host_name() +
                   " pid " + std::to_string(::getpid()) + " holds " + path + " (hint)");
    // take = false (MPI ranks other than 0): no lock, no error
    const lcm::RunLock rank1 = lcm::RunLock::acquire(path, "x", "", false);
    CHECK_FALSE(rank1.held());
  }
  CHECK_FALSE(fs::exists(path));  // release removes the lock file
  CHECK(lcm::RunLock::acquire(path, "x", "").held());
  CHECK_FALSE(lcm::RunLock::acquire(dir + "/never.lock", "x", "", false).held());
  CHECK_FALSE(fs::exists(dir + "/never.lock"));

  // a child process holds it, then dies by SIGKILL: the kernel drops the lock
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      const lcm::RunLock held = lcm::RunLock::acquire(path, "x", "");
      if (::write(ready[1], "k", 1) != 1) ::_exit(3);
      ::pause();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  const std::string e = error_of([&] { lcm::RunLock::acquire(path, "x", ""); });
  CHECK(contains(e, " pid " + std::to_string(child) + " holds " + path));
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(lcm::RunLock::acquire(path, "x", "").held());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_CASE("lcm-train / lcm-pretrain on a locked experiment stop naming the holder; unlocked runs") {
  const std::string dir = lcm::test::temp_dir("run_lock_tool");
  const std::string base = dir + "/run";
  const std::string lock_file = base + "/lcm_locked.lock";
  const std::string refused = "experiment locked in " + base + " is in use by another run: host " +
                              host_name() + " pid " + std::to_string(::getpid()) + " holds " +
                              lock_file +
                              " (wait for it to finish, or use another experiment.name or "
                              "experiment.base_path)\n";
  const std::string host = lcm::temp_host_name();
  const std::string stale_new = base + "/weights/best_model_locked.safetensors.tmp." + host +
                                ".2147483000";  // this host, no such pid
  const std::string stale_old = base + "/log_locked.jsonl.tmp.2147483001";  // old style
  const std::string other_host = base + "/weights/last_model_locked.safetensors.tmp.other-host.1";
  {
    const lcm::RunLock held = lcm::lock_experiment(base, "locked");
    const auto r = run_tool(dir, "lcm-train", tiny_train_args(base, "locked"));
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(contains(r.err, "lcm-train: error: " + refused));
    CHECK_FALSE(fs::exists(base + "/weights/best_model_locked.safetensors"));
    const auto p = run_tool(dir, "lcm-pretrain",
                            "pretrain.kind=access_matrix pretrain.files=[" +
                                lcm::test::committed_data("synth_valid.jsonl.gz") +
                                "] pretrain.epochs=1 training.threads=1 experiment.name=locked "
                                "experiment.base_path=" +
                                base + " -q");
    INFO(p.err);
    CHECK(p.code == 1);
    CHECK(contains(p.err, "lcm-pretrain: error: " + refused));
    CHECK_FALSE(fs::exists(base + "/weights/best_autoencoder_locked.safetensors"));
  }
  // released: the run goes ahead, first removing this host's stale temp files of dead processes
  fs::create_directories(base + "/weights");
  for (const auto& p : {stale_new, stale_old, other_host}) std::ofstream(p) << "partial";
  const auto r = run_tool(dir, "lcm-train", tiny_train_args(base, "locked"));
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(fs::exists(base + "/weights/best_model_locked.safetensors"));
  CHECK_FALSE(fs::exists(stale_new));
  CHECK_FALSE(fs::exists(stale_old));
  CHECK(fs::exists(other_host));  // another host's: never touched
  CHECK(contains(r.err, "lcm: removed stale temp file " + stale_new +
                            " (process 2147483000 of this host is gone)\n"));
  CHECK(contains(r.err, "lcm: removed stale temp file " + stale_old));
  CHECK_FALSE(contains(r.err, "cache rebuilt"));  // a first build is not announced
  CHECK_FALSE(fs::exists(lock_file));             // removed when the run ends
  CHECK_FALSE(fs::exists(base + "/cache/train.lcmb.lock"));
  for (const auto& e : fs::recursive_directory_iterator(base))
    CHECK_MESSAGE(!contains(e.path().filename().string(), ".tmp." + host), e.path().string());

  {  // a damaged cache is rebuilt by lcm-train with the one-line reason
    const std::string train_cache = base + "/cache/train.lcmb";
    const std::string valid_cache = base + "/cache/valid.lcmb";
    REQUIRE(fs::exists(train_cache));
    REQUIRE(fs::exists(valid_cache));
    {  // one bit flipped near the end of the body
      std::fstream f(train_cache, std::ios::in | std::ios::out | std::ios::binary);
      const auto at = std::streamoff(fs::file_size(train_cache) - 20);
      f.seekg(at);
      char b = 0;
      f.get(b);
      f.seekp(at);
      f.put(char(b ^ 0x10));
    }
    fs::resize_file(valid_cache, fs::file_size(valid_cache) / 2);
    // (a new run over the finished one: experiment.overwrite moves that one into previous/)
    const auto again =
        run_tool(dir, "lcm-train", tiny_train_args(base, "locked") + " experiment.overwrite=true");
    INFO(again.err);
    CHECK(again.code == 0);
    CHECK(contains(again.err, "lcm-train: train: cache rebuilt (corrupt"));
    CHECK(contains(again.err, "lcm-train: valid: cache rebuilt (truncated)\n"));
    // rebuilt: a third run reads both from the cache and prints no such line
    const auto third =
        run_tool(dir, "lcm-train", tiny_train_args(base, "locked") + " experiment.overwrite=true");
    INFO(third.err);
    CHECK(third.code == 0);
    CHECK_FALSE(contains(third.err, "cache rebuilt"));
    // lcm-eval reads the validation cache too and says so when it rebuilds it
    fs::resize_file(valid_cache, fs::file_size(valid_cache) / 2);
    const auto eval = run_tool(dir, "lcm-eval",
                               tiny_train_args(base, "locked") + " eval.weights_path=" + base +
                                   "/weights/best_model_locked.safetensors");
    INFO(eval.err);
    CHECK(eval.code == 0);
    CHECK(contains(eval.err, "lcm-eval: valid: cache rebuilt (truncated)\n"));
  }
}

TEST_CASE("lcm-train and lcm-eval refuse an input that sits at one of their output paths") {
  const std::string dir = lcm::test::temp_dir("input_at_output");
  const std::string base = dir + "/run";
  fs::create_directories(base);
  const std::string valid = lcm::test::committed_data("synth_valid.jsonl.gz");
  const std::string as_report = base + "/eval_io.csv", as_log = base + "/log_io.csv";
  fs::copy_file(valid, as_report);
  fs::copy_file(valid, as_log);
  const auto size = fs::file_size(valid);
  const auto e = run_tool(dir, "lcm-eval",
                          tiny_train_args(base, "io") + " eval.input_file=" + as_report +
                              " eval.weights_path=" + base + "/none.safetensors");
  INFO(e.err);
  CHECK(e.code == 2);
  CHECK(contains(e.err, "the report " + as_report + " is the same file as eval.input_file"));
  const auto t = run_tool(dir, "lcm-train", tiny_train_args(base, "io", as_log));
  INFO(t.err);
  CHECK(t.code == 2);
  CHECK(contains(t.err, "the run's log " + as_log + " is the same file as data.train_file"));
  CHECK(fs::file_size(as_report) == size);  // neither input was replaced
  CHECK(fs::file_size(as_log) == size);
}

TEST_CASE("lcm-train names data.min_functions_per_footprint=0 when the rule drops most programs") {
  const std::string dir = lcm::test::temp_dir("footprint_note");
  const std::string base = dir + "/run";
  std::string args = tiny_train_args(base, "fp");
  const std::string keep_all = "data.min_functions_per_footprint=0";
  args.replace(args.find(keep_all), keep_all.size(), "data.min_functions_per_footprint=2");
  const auto r = run_tool(dir, "lcm-train", args);
  INFO(r.err);
  const std::string note = "lcm-train: train: the footprint rule dropped ";
  REQUIRE(contains(r.err, note));
  CHECK(contains(r.err, "data.min_functions_per_footprint=0 keeps them"));
  const auto kept = run_tool(dir, "lcm-train", tiny_train_args(base, "fp0"));
  INFO(kept.err);
  CHECK(kept.code == 0);
  CHECK_FALSE(contains(kept.err, note));
}

TEST_CASE("lcm-synth --out into a folder where no file can be created names --out, not a temp") {
  const std::string dir = lcm::test::temp_dir("synth_out_error");
  const auto r = run_tool(dir, "lcm-synth", "--programs 2 --out /proc/lcm_synth_x.jsonl.gz");
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(contains(r.err, "cannot write /proc/lcm_synth_x.jsonl.gz: "));
  CHECK(contains(r.err, "(cannot create a file in /proc: "));
  CHECK_FALSE(contains(r.err, ".tmp."));
}

TEST_CASE("the epoch history read back from its JSON holds the very bits written") {
  // 17-digit decimals that a fast, not correctly rounded, parse reads 1 ulp off (a history
  // compared with == after --resume or a checkpoint read).
  std::vector<lcm::train::EpochRecord> h;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 3000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    lcm::train::EpochRecord r;
    r.epoch = i + 1;
    r.train_mape = double(x >> 11) * 0x1p-53 * 1000;
    r.val_mape = double((x >> 3) % 1000003) / 3.7 + double(x >> 40) * 1e-9;
    r.seconds = double(x % 100000) * 1e-3 + 0.1;
    r.datapoints_per_s = 1e4 / r.seconds;
    r.lr = double(x >> 12) * 0x1p-60;
    h.push_back(r);
  }
  const std::vector<lcm::train::EpochRecord> back =
      lcm::train::history_from_json(lcm::train::history_json(h));
  REQUIRE(back.size() == h.size());
  int differ = 0;
  for (size_t i = 0; i < h.size(); ++i)
    differ += back[i].train_mape != h[i].train_mape || back[i].val_mape != h[i].val_mape ||
              back[i].seconds != h[i].seconds ||
              back[i].datapoints_per_s != h[i].datapoints_per_s || back[i].lr != h[i].lr;
  CHECK(differ == 0);
}

TEST_CASE("metadata JSON nested 200,000 deep is one clear error in every reader, no overflow") {
  const std::string deep = std::string(200000, '[');
  const std::string closed = deep + std::string(200000, ']');
  const std::string too_deep = "(bad JSON nested deeper than 64 levels (at offset ";
  for (const std::string& v : {deep, closed}) {
    CHECK(
        contains(error_of([&] { lcm::train::model_config_from_json(R"({"encoder":)" + v + "}"); }),
                 "lcm.model_config metadata is not a JSON object " + too_deep));
    CHECK(contains(
        error_of([&] { lcm::model::AutoencoderConfig::from_json(R"({"kind":)" + v + "}"); }),
        "lcm.autoencoder metadata is not a JSON object " + too_deep));
    CHECK(contains(error_of([&] { lcm::train::history_from_json(v); }),
                   "lcm.history: not a JSON array " + too_deep));
    // the run settings of --resume: a damaged lcm.run_settings is an error (read as absent, the
    // settings check would be skipped); the older input-scaling record is left out
    const lcm::train::Metadata om = {{"lcm.run_settings", R"({"a":)" + v + "}"}};
    const lcm::train::Metadata mm = {{"lcm.input_scaling", R"({"mode":)" + v + "}"}};
    CHECK(contains(error_of([&] { lcm::train::saved_run_settings(om, mm); }),
                   "lcm.run_settings is damaged (bad JSON nested deeper than 64 levels"));
    CHECK(lcm::train::saved_run_settings({}, mm).empty());
  }
  for (const char* damaged : {"garbage", "{}", "[]", R"({"training.loss":3})"}) {
    CAPTURE(damaged);
    CHECK(contains(error_of([&] {
                     lcm::train::saved_run_settings({{"lcm.run_settings", damaged}}, {});
                   }),
                   "lcm.run_settings is damaged ("));
  }
  const lcm::train::Metadata good = {{"lcm.run_settings", R"({"training.loss":"mape"})"}};
  CHECK(lcm::train::saved_run_settings(good, {}).at("training.loss") == "mape");
}
