// Tests of the rule that a run never loses another run's results (docs/run-state.md "One run's
// files belong together"): a new lcm-train / lcm-pretrain run over an experiment that holds a run
// is refused, or (experiment.overwrite=true) moves that run's files whole into previous/; every
// file of a run carries its run id; lcm-train killed (SIGKILL) or interrupted (SIGINT) at each
// step leaves either the old run's complete set or the new run's files, never a mix. Also: the
// bounded wait on a cache lock held by another process, and the one rule of every output path
// (only regular files are replaced; an empty path is a usage error).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/cache.hpp"
#include "data/synth.hpp"
#include "engine/safetensors.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/run_files.hpp"
#include "train/run_state.hpp"
#include "util/atomic_file.hpp"
#include "util/run_lock.hpp"

namespace fs = std::filesystem;
using lcm::test::contains;
using lcm::test::error_of;
using lcm::train::RunTool;

namespace {

/// Files (relative name → bytes) of experiment `name`'s lcm-train run under `base`.
using Snapshot = std::map<std::string, std::string>;

Snapshot snapshot(const std::string& base, const std::string& name) {
  Snapshot s;
  for (const std::string& f : lcm::train::existing_run_files(base, name, RunTool::Train))
    s[f] = lcm::test::slurp(base + "/" + f);
  return s;
}

/// The run ids the files of `s` carry: lcm.run_id of each checkpoint, "run_id" of each JSONL
/// line ("" for a checkpoint without one).
std::set<std::string> run_ids(const std::string& base, const Snapshot& s) {
  std::set<std::string> ids;
  for (const auto& [f, bytes] : s) {
    if (f.size() > 12 && f.compare(f.size() - 12, 12, ".safetensors") == 0) {
      const auto m = lcm::read_safetensors(base + "/" + f).metadata;
      const auto it = m.find(lcm::train::meta::kRunId);
      ids.insert(it == m.end() ? "" : it->second);
    } else if (f.size() > 6 && f.compare(f.size() - 6, 6, ".jsonl") == 0) {
      size_t at = 0;
      const std::string key = "\"run_id\":\"";
      while ((at = bytes.find(key, at)) != std::string::npos) {
        at += key.size();
        ids.insert(bytes.substr(at, bytes.find('"', at) - at));
      }
    }
  }
  return ids;
}

/// The tiny training setup of tests/support/tiny_run.hpp as lcm-train arguments.
std::vector<std::string> tiny_args(const lcm::test::TinySplits& s, const std::string& base,
                                   int epochs) {
  return {"data.train_file=" + s.train,
          "data.valid_file=" + s.valid,
          "experiment.base_path=" + base,
          "experiment.name=t",
          "data.batch_size=32",
          "training.threads=1",
          "data.nb_workers=1",
          "training.max_epochs=" + std::to_string(epochs),
          "training.early_stop_patience=0",
          "model.comp_embed_layer_sizes=32,16",
          "model.drops=0.05,0.05",
          "model.lstm_embedding_size=8",
          "model.expr_embed_size=8",
          "training.calibration_folds=0",
          "-q"};
}

/// A child process of a tool, its output in files of `dir`.
struct Child {
  pid_t pid = -1;
  std::string out, err;
};

/// Starts <bin_dir>/<tool> `args` with LCM_TEST_PAUSE_AT=`pause` (unset when empty).
Child spawn(const std::string& dir, const std::string& tool, const std::vector<std::string>& args,
            const std::string& pause) {
  static int n = 0;
  Child c;
  c.out = dir + "/child_out" + std::to_string(n) + ".txt";
  c.err = dir + "/child_err" + std::to_string(n++) + ".txt";
  const std::string bin = lcm::test::bin_dir() + "/" + tool;
  std::vector<std::string> argv_s{bin};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  c.pid = ::fork();
  if (c.pid == 0) {
    if (pause.empty())
      ::unsetenv("LCM_TEST_PAUSE_AT");
    else
      ::setenv("LCM_TEST_PAUSE_AT", pause.c_str(), 1);
    const int o = ::open(c.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return c;
}

/// Waits for `c` to exit; its exit code, or 128 + signal.
int wait_exit(const Child& c) {
  int st = 0;
  while (::waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// Runs a tool to its end; exit code.
int run_child(const std::string& dir, const std::string& tool, const std::vector<std::string>& args,
              std::string* err = nullptr) {
  const Child c = spawn(dir, tool, args, "");
  const int code = wait_exit(c);
  if (err) *err = lcm::test::slurp(c.err);
  return code;
}

/// The folders under <base>/previous that hold exactly `s` (same names, same bytes).
int previous_copies(const std::string& base, const Snapshot& s) {
  int n = 0;
  std::error_code ec;
  if (!fs::is_directory(base + "/previous", ec)) return 0;
  for (const auto& d : fs::directory_iterator(base + "/previous")) {
    const std::string dir = d.path().string();
    if (d.path().filename().string().rfind(".moving", 0) == 0) continue;
    if (snapshot(dir, "t") == s) ++n;
  }
  return n;
}

/// The trained old run every crash case starts from (one lcm-train run, copied per case).
struct OldRun {
  std::string dir;
  lcm::test::TinySplits splits;
  std::string base;  // <dir>/template: the finished old run
  Snapshot files;
  std::string id;
  bool ok = false;
};

const OldRun& old_run() {
  static const OldRun r = [] {
    OldRun o;
    o.dir = lcm::test::temp_dir("run_rule");
    o.splits = lcm::test::write_tiny_splits(o.dir, 41);
    o.base = o.dir + "/template";
    std::string err;
    const int code = run_child(o.dir, "lcm-train", tiny_args(o.splits, o.base, 1), &err);
    if (code != 0) {
      MESSAGE("the old run failed: " << err);
      return o;
    }
    o.files = snapshot(o.base, "t");
    const auto ids = run_ids(o.base, o.files);
    o.id = ids.size() == 1 ? *ids.begin() : "";
    o.ok = !o.id.empty();
    return o;
  }();
  return r;
}

}  // namespace

TEST_CASE("the run files of lcm-train and lcm-pretrain of one experiment never share a name") {
  for (const std::string name : {"lcm", "a", "pretrain_a", "x.y-z", "m_fold1of3", "e_m2"}) {
    const auto t = lcm::train::run_file_names(RunTool::Train, name);
    const auto p = lcm::train::run_file_names(RunTool::Pretrain, name);
    for (const std::string& f : t) {
      INFO(name << ": " << f);
      CHECK(std::find(p.begin(), p.end(), f) == p.end());
    }
    CHECK(t.size() == 12);
    CHECK(p.size() == 5);
  }
  // and on disk: the files of one tool are never listed as the other's
  const std::string base = lcm::test::temp_dir("run_rule_names");
  fs::create_directories(base + "/weights");
  for (const std::string& f : lcm::train::run_file_names(RunTool::Pretrain, "a"))
    std::ofstream(base + "/" + f) << "x";
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train).empty());
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Pretrain).size() == 5);
}

TEST_CASE("existing_run_files: a run's fold and member runs are its files, other names are not") {
  const std::string base = lcm::test::temp_dir("run_rule_derived");
  fs::create_directories(base + "/weights");
  const std::vector<std::string> ours{"weights/best_model_a.safetensors",
                                      "weights/last_model_a_fold2of3.safetensors",
                                      "weights/best_model_a_m12.safetensors",
                                      "log_a_m1.jsonl",
                                      "eval_a.json",
                                      "objective_a.svg"};
  const std::vector<std::string> others{"weights/best_model_ab.safetensors",
                                        "weights/best_model_a_m.safetensors",
                                        "weights/best_model_a_fold2.safetensors",
                                        "weights/best_model_a_x.safetensors",
                                        "log_pretrain_a.jsonl",
                                        "log_b.jsonl",
                                        "weights/best_autoencoder_a.safetensors"};
  for (const std::string& f : ours) std::ofstream(base + "/" + f) << "x";
  for (const std::string& f : others) std::ofstream(base + "/" + f) << "x";
  std::vector<std::string> want = ours;
  std::sort(want.begin(), want.end());
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train) == want);
}

TEST_CASE(
    "claim_experiment: refused without --resume or overwrite; overwrite moves the whole run") {
  const std::string base = lcm::test::temp_dir("run_rule_claim");
  // nothing there: a new run starts
  CHECK(lcm::train::claim_experiment(base, "a", RunTool::Train, false, false, true).empty());
  fs::create_directories(base + "/weights");
  Snapshot old;
  for (const std::string& f : lcm::train::run_file_names(RunTool::Train, "a")) {
    std::ofstream(base + "/" + f) << "old " << f;
    old[f] = "old " + f;
  }
  std::ofstream(base + "/log_b.jsonl") << "b";  // another experiment of the base path
  const std::string refused = error_of(
      [&] { lcm::train::claim_experiment(base, "a", RunTool::Train, false, false, true); });
  CHECK(contains(refused, "experiment a in " + base + " already holds a run ("));
  CHECK(contains(refused,
                 "12 files): --resume continues it; experiment.overwrite=true moves its "
                 "files into " +
                     base + "/previous/ first; or choose another experiment.name"));
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train).size() == 12);
  // --resume continues: nothing moves
  CHECK(lcm::train::claim_experiment(base, "a", RunTool::Train, true, false, true).empty());
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train).size() == 12);
  // overwrite: every file in one previous/ folder, the other experiment untouched
  const std::string to = lcm::train::claim_experiment(base, "a", RunTool::Train, false, true, true);
  CHECK(fs::path(to).parent_path() == fs::path(base + "/previous"));
  CHECK(fs::path(to).filename().string().rfind("a-", 0) == 0);
  CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train).empty());
  Snapshot moved;
  for (const std::string& f : lcm::train::existing_run_files(to, "a", RunTool::Train))
    moved[f] = lcm::test::slurp(to + "/" + f);
  CHECK(moved == old);
  CHECK(lcm::test::slurp(base + "/log_b.jsonl") == "b");
  // a second overwrite in the same second gets its own folder
  std::ofstream(base + "/log_a.jsonl") << "second";
  const std::string to2 =
      lcm::train::claim_experiment(base, "a", RunTool::Train, false, true, true);
  CHECK(to2 != to);
  CHECK(lcm::test::slurp(to2 + "/log_a.jsonl") == "second");
}

TEST_CASE("claim_experiment finishes a move that was cut short, before --resume or a new run") {
  for (const bool resume : {false, true}) {
    const std::string base = lcm::test::temp_dir(resume ? "run_rule_cut_r" : "run_rule_cut");
    fs::create_directories(base + "/weights");
    fs::create_directories(base + "/previous/.moving-train-a/weights");
    // half of the run moved already, half still in place
    std::ofstream(base + "/previous/.moving-train-a/weights/best_model_a.safetensors") << "best";
    std::ofstream(base + "/log_a.jsonl") << "log";
    lcm::train::claim_experiment(base, "a", RunTool::Train, resume, false, true);
    CHECK_FALSE(fs::exists(base + "/previous/.moving-train-a"));
    CHECK(lcm::train::existing_run_files(base, "a", RunTool::Train).empty());
    int folders = 0;
    for (const auto& d : fs::directory_iterator(base + "/previous")) {
      ++folders;
      CHECK(lcm::test::slurp(d.path().string() + "/log_a.jsonl") == "log");
      CHECK(lcm::test::slurp(d.path().string() + "/weights/best_model_a.safetensors") == "best");
    }
    CHECK(folders == 1);
  }
}

TEST_CASE(
    "lcm-train killed (SIGKILL) or interrupted (SIGINT) at each step of a new run over a finished "
    "one leaves the old run's complete set or the new run's files, never a mix") {
  const OldRun& o = old_run();
  REQUIRE(o.ok);
  REQUIRE(o.files.count("weights/best_model_t.safetensors") == 1);
  REQUIRE(o.files.count("weights/last_optimizer_t.safetensors") == 1);
  REQUIRE(o.files.count("log_t.jsonl") == 1);
  int n = 0;
  for (const std::string point : {"claimed", "moving", "step", "checkpoint", "best"}) {
    for (const int sig : {SIGKILL, SIGINT}) {
      CAPTURE(point);
      CAPTURE(sig);
      const std::string base = o.dir + "/case" + std::to_string(n++);
      fs::copy(o.base, base, fs::copy_options::recursive);
      REQUIRE(snapshot(base, "t") == o.files);
      // without overwrite a new run is refused and touches nothing
      std::string err;
      CHECK(run_child(o.dir, "lcm-train", tiny_args(o.splits, base, 2), &err) == 2);
      CHECK(contains(err, "already holds a run"));
      CHECK(snapshot(base, "t") == o.files);
      // the new run, stopped at `point`
      std::vector<std::string> args = tiny_args(o.splits, base, 2);
      args.push_back("experiment.overwrite=true");
      const Child c = spawn(o.dir, "lcm-train", args, point);
      int st = 0;
      REQUIRE(::waitpid(c.pid, &st, WUNTRACED) == c.pid);
      INFO(lcm::test::slurp(c.err));
      REQUIRE(WIFSTOPPED(st));
      ::kill(c.pid, sig);
      if (sig != SIGKILL) ::kill(c.pid, SIGCONT);
      const int code = wait_exit(c);
      CHECK(code == (sig == SIGKILL ? 128 + SIGKILL : 130));
      // what the experiment folder holds now
      const Snapshot now = snapshot(base, "t");
      const std::set<std::string> ids = run_ids(base, now);
      CHECK(ids.size() <= 1);
      CHECK(ids.count("") == 0);
      const std::string staging = base + "/previous/.moving-train-t";
      if (fs::exists(staging)) {
        // a move cut short: nothing new yet, and every old file is in place or in the staging
        Snapshot both = now;
        for (const auto& [f, b] : snapshot(staging, "t")) both[f] = b;
        CHECK(both == o.files);
        CHECK((ids.empty() || *ids.begin() == o.id));
      } else if (!ids.empty() && *ids.begin() == o.id) {
        CHECK(now == o.files);  // the old run, untouched
      } else {
        CHECK(previous_copies(base, o.files) == 1);  // the old run, whole, in previous/
      }
      // the next run of that experiment finishes any move and ends with one complete new run,
      // the old one whole in previous/
      CHECK(run_child(o.dir, "lcm-train", args, &err) == 0);
      INFO(err);
      const Snapshot after = snapshot(base, "t");
      const std::set<std::string> after_ids = run_ids(base, after);
      CHECK(after_ids.size() == 1);
      CHECK(after_ids.count(o.id) == 0);
      CHECK(after.count("weights/best_model_t.safetensors") == 1);
      CHECK(after.count("weights/last_model_t.safetensors") == 1);
      CHECK(after.count("weights/last_optimizer_t.safetensors") == 1);
      CHECK(after.count("log_t.jsonl") == 1);
      CHECK(previous_copies(base, o.files) == 1);
      CHECK_FALSE(fs::exists(staging));
    }
  }
}

TEST_CASE("a resumed run keeps its run id in every file it rewrites") {
  const OldRun& o = old_run();
  REQUIRE(o.ok);
  const std::string base = o.dir + "/resumed";
  fs::copy(o.base, base, fs::copy_options::recursive);
  std::vector<std::string> args = tiny_args(o.splits, base, 2);
  args.push_back("--resume");
  std::string err;
  REQUIRE(run_child(o.dir, "lcm-train", args, &err) == 0);
  const Snapshot now = snapshot(base, "t");
  CHECK(now != o.files);  // epoch 2 was trained and saved
  CHECK(run_ids(base, now) == std::set<std::string>{o.id});
}

TEST_CASE("lcm-pretrain: a new run over an earlier one is refused; overwrite moves it whole") {
  const OldRun& o = old_run();
  REQUIRE(o.ok);
  const std::string base = o.dir + "/pretrain";
  const std::vector<std::string> args{"experiment.base_path=" + base,
                                      "experiment.name=t",
                                      "pretrain.kind=comp_vector",
                                      "pretrain.files=[" + o.splits.train + "]",
                                      "pretrain.epochs=1",
                                      "training.threads=1",
                                      "data.nb_workers=1",
                                      "-q"};
  std::string err;
  REQUIRE(run_child(o.dir, "lcm-pretrain", args, &err) == 0);
  INFO(err);
  const auto first = lcm::train::existing_run_files(base, "t", RunTool::Pretrain);
  CHECK(first.size() >= 4);
  // lcm-train in the same experiment writes none of these names, and is not refused by them
  CHECK(lcm::train::existing_run_files(base, "t", RunTool::Train).empty());
  CHECK(run_child(o.dir, "lcm-pretrain", args, &err) == 2);
  CHECK(contains(err,
                 "lcm-pretrain: config error: experiment t in " + base + " already holds a run ("));
  CHECK(contains(err, "): experiment.overwrite=true moves its files into"));
  std::vector<std::string> over = args;
  over.push_back("experiment.overwrite=true");
  CHECK(run_child(o.dir, "lcm-pretrain", over, &err) == 0);
  int folders = 0;
  for (const auto& d : fs::directory_iterator(base + "/previous")) {
    ++folders;
    CHECK(d.path().filename().string().rfind("t-pretrain-", 0) == 0);
    CHECK(lcm::train::existing_run_files(d.path().string(), "t", RunTool::Pretrain) == first);
  }
  CHECK(folders == 1);
  const auto ids = lcm::read_safetensors(base + "/weights/best_autoencoder_t.safetensors").metadata;
  CHECK_FALSE(ids.at(lcm::train::meta::kRunId).empty());
}

TEST_CASE("a cache lock held by another process is waited for (bounded, with a message)") {
  const OldRun& o = old_run();
  REQUIRE(o.ok);
  const std::string base = o.dir + "/cachewait";
  fs::create_directories(base + "/cache");
  const std::vector<std::string> args{"data.train_file=" + o.splits.train,
                                      "data.valid_file=" + o.splits.valid,
                                      "experiment.base_path=" + base, "data.nb_workers=1", "-q"};
  // this process holds the train cache's lock, as a run building that cache would
  lcm::RunLock held = lcm::data::lock_cache(base + "/cache/train.lcmb", 0);
  REQUIRE(held.held());
  {  // a bound of 1 s: a clear error after the wait
    std::vector<std::string> a = args;
    a.push_back("data.cache_lock_wait=1");
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(run_child(o.dir, "lcm-prepare", a, &err) == 1);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(900));
    CHECK(contains(err, "lcm: waiting for cache " + base + "/cache/train.lcmb: host "));
    CHECK(contains(err, "pid " + std::to_string(::getpid()) + " holds " + base +
                            "/cache/train.lcmb.lock (up to 1 s)"));
    CHECK(contains(err, "is in use by another run: "));
    CHECK(contains(err,
                   "(waited 1 s; wait for it to finish writing the cache, or raise "
                   "data.cache_lock_wait)"));
  }
  {  // released while the other waits: it goes on and prepares
    std::vector<std::string> a = args;
    a.push_back("data.cache_lock_wait=60");
    const Child c = spawn(o.dir, "lcm-prepare", a, "");
    // release only once the child says it waits (a loaded machine can take seconds to start it;
    // released earlier, it would take the lock without waiting); at most 50 s of its 60
    const std::string waiting = "lcm: waiting for cache " + base + "/cache/train.lcmb";
    const auto start = std::chrono::steady_clock::now();
    while (!contains(lcm::test::slurp(c.err), waiting) &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held.release();
    CHECK(wait_exit(c) == 0);
    const std::string err = lcm::test::slurp(c.err);
    INFO(err);
    CHECK(contains(err, "lcm: waiting for cache " + base + "/cache/train.lcmb"));
    CHECK(fs::is_regular_file(base + "/cache/train.lcmb"));
  }
  {  // data.cache_lock_wait=0: the error at once, as before
    lcm::RunLock again = lcm::data::lock_cache(base + "/cache/valid.lcmb", 0);
    fs::remove(base + "/cache/valid.lcmb");
    std::vector<std::string> a = args;
    a.push_back("data.cache_lock_wait=0");
    std::string err;
    CHECK(run_child(o.dir, "lcm-prepare", a, &err) == 1);
    CHECK_FALSE(contains(err, "waiting for"));
    CHECK(contains(err, "cache " + base + "/cache/valid.lcmb is in use by another run"));
  }
}

TEST_CASE("every writer replaces only regular files: a link, FIFO, device or folder is refused") {
  const std::string dir = lcm::test::temp_dir("run_rule_out");
  const std::string target = dir + "/target.txt";
  std::ofstream(target) << "keep";
  const std::string link = dir + "/link.csv", fifo = dir + "/fifo.csv", folder = dir + "/folder";
  fs::create_symlink(target, link);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  fs::create_directories(folder);
  const std::vector<std::pair<std::string, std::string>> cases{{link, "it is a symbolic link"},
                                                               {fifo, "it is a FIFO"},
                                                               {"/dev/null", "it is a device"},
                                                               {folder, "it is a directory"}};
  for (const auto& [path, why] : cases) {
    CAPTURE(path);
    CHECK(contains(lcm::output_refusal(path), why));
    CHECK(contains(error_of([&] { lcm::atomic_write_file(path, "x"); }),
                   "cannot write " + path + ": " + why));
    // the safetensors writer (checkpoints, optimizer state), the cache and lcm-synth's writer
    lcm::SafeTensorsFile f;
    CHECK(contains(error_of([&] { lcm::write_safetensors(path, f); }), why));
    CHECK(contains(error_of([&] {
                     lcm::data::write_cache(path, lcm::data::CacheKey{}, {}, lcm::data::Dataset{});
                   }),
                   why));
    lcm::data::SynthOptions so;
    so.programs = 1;
    CHECK(contains(error_of([&] { lcm::data::write_synth_file(path, so); }), why));
  }
  CHECK(contains(lcm::output_refusal(""), "empty"));
  CHECK(contains(error_of([] { lcm::atomic_write_file("", "x"); }), "the path is empty"));
  CHECK(fs::is_symlink(link));
  CHECK(lcm::test::slurp(target) == "keep");
  CHECK(fs::is_fifo(fifo));
  // a regular file is replaced
  lcm::atomic_write_file(target, "new");
  CHECK(lcm::test::slurp(target) == "new");
}

TEST_CASE(
    "lcm-predict, lcm-inspect, lcm-synth: an empty output path is a usage error; a link or "
    "FIFO is refused and left as it was") {
  const OldRun& o = old_run();
  REQUIRE(o.ok);
  const std::string dir = lcm::test::temp_dir("run_rule_tools");
  const std::string target = dir + "/target.csv";
  std::ofstream(target) << "keep";
  const std::string link = dir + "/link.csv", fifo = dir + "/fifo.csv";
  fs::create_symlink(target, link);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::vector<std::string> predict{
      "eval.weights_path=" + o.base + "/weights/best_model_t.safetensors",
      "eval.input_file=" + o.splits.valid, "--out"};
  std::string err;
  {
    std::vector<std::string> a = predict;
    a.push_back("");
    CHECK(run_child(dir, "lcm-predict", a, &err) == 2);
    CHECK(contains(err, "--out: an empty file name (omit --out for the table on stdout)"));
  }
  for (const std::string& out : {link, fifo}) {
    std::vector<std::string> a = predict;
    a.push_back(out);
    CHECK(run_child(dir, "lcm-predict", a, &err) == 1);
    CHECK(contains(err, "cannot write " + out + ": it is a"));
    CHECK(contains(err, "lcm replaces only regular files"));
  }
  CHECK(fs::is_symlink(link));
  CHECK(fs::is_fifo(fifo));
  CHECK(lcm::test::slurp(target) == "keep");
  {  // a regular file is replaced
    std::vector<std::string> a = predict;
    a.push_back(target);
    CHECK(run_child(dir, "lcm-predict", a, &err) == 0);
    CHECK(lcm::test::slurp(target) != "keep");
  }
  CHECK(run_child(dir, "lcm-inspect", {o.splits.valid, "--output", ""}, &err) == 2);
  CHECK(contains(err, "--output: an empty file name"));
  CHECK(run_child(dir, "lcm-inspect", {o.splits.valid, "--output", link}, &err) == 1);
  CHECK(contains(err, "it is a symbolic link"));
  const std::string gz_link = dir + "/link.jsonl.gz";
  fs::create_symlink(target, gz_link);
  CHECK(run_child(dir, "lcm-synth", {"--out", gz_link, "--programs", "1"}, &err) != 0);
  CHECK(contains(err, "it is a symbolic link"));
  CHECK(run_child(dir, "lcm-synth", {"--out", ""}, &err) == 2);
  CHECK(fs::is_symlink(gz_link));
}
