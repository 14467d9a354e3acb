// In-process tests of the training library (train/trainer.hpp and its parts): a run on synthetic
// data writes what it reports, a stopped run resumed in-process equals an uninterrupted one bit for
// bit, --resume's policy (refused and warned settings, nothing to do), the run-state metadata
// round trip, and the LR-schedule factory.
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/row_budget.hpp"
#include "data/synth.hpp"
#include "engine/safetensors.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "train/evaluate.hpp"
#include "train/interrupt.hpp"
#include "train/pretrainer.hpp"
#include "train/resume.hpp"
#include "train/run.hpp"
#include "train/run_state.hpp"
#include "train/schedules.hpp"
#include "train/splits.hpp"

namespace fs = std::filesystem;
using lcm::config::Config;
using lcm::test::contains;

namespace {

/// A small synthetic training and validation file pair (shared across the test cases).
struct SynthFiles {
  std::string train, valid;
  SynthFiles() {
    const std::string dir = lcm::test::temp_dir("trainer_data");
    train = dir + "/train.jsonl.gz";
    valid = dir + "/valid.jsonl.gz";
    lcm::data::SynthOptions o;
    o.programs = 24;
    o.schedules_per_program = 12;
    o.structures = 3;
    o.threads = 1;
    o.seed = 11;
    lcm::data::write_synth_file(train, o);
    o.programs = 8;
    o.seed = 12;
    lcm::data::write_synth_file(valid, o);
  }
};

const SynthFiles& files() {
  static const SynthFiles f;
  return f;
}

/// A config for a tiny, fast, deterministic run under `dir` (one thread, small model; the
/// calibration map fitted on the training split, without fold runs: test_crossfit has those).
Config small_config(const std::string& dir, int epochs = 2) {
  Config c;
  lcm::config::apply_overrides(
      c,
      {"data.train_file=" + files().train, "data.valid_file=" + files().valid,
       "experiment.base_path=" + dir, "data.batch_size=32", "data.min_functions_per_footprint=0",
       "training.threads=1", "data.nb_workers=1", "training.max_epochs=" + std::to_string(epochs),
       "training.early_stop_patience=0", "model.comp_embed_layer_sizes=32,16",
       "model.drops=0.05,0.05", "model.lstm_embedding_size=8", "model.expr_embed_size=8",
       "training.calibration_folds=0"});
  return c;
}

lcm::train::TrainOptions quiet_options() {
  lcm::train::TrainOptions o;
  o.quiet = true;
  return o;
}

/// Every tensor of a safetensors file as raw bytes, by name.
std::map<std::string, std::string> tensor_bytes(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : lcm::read_safetensors(path).tensors) out[name] = t.bytes;
  return out;
}

/// Resumes (training.resume, quietly) the run of `cut` that `stop` interrupted, with `stop`
/// cleared and watched again.
lcm::train::TrainResult resume_stopped(const Config& cut, std::atomic<bool>& stop) {
  stop.store(false);
  lcm::train::TrainOptions ro = quiet_options();
  ro.resume = true;
  ro.stop = &stop;
  return lcm::train::train(cut, ro);
}

/// An epoch metric that a resumed or re-placed run must reproduce exactly.
struct EpochField {
  const char* name;
  double lcm::train::EpochRecord::*value;
};
const EpochField kTrainMape{"train_mape", &lcm::train::EpochRecord::train_mape};
const EpochField kValMape{"val_mape", &lcm::train::EpochRecord::val_mape};
const EpochField kTrainLoss{"train_loss", &lcm::train::EpochRecord::train_loss};
const EpochField kLr{"lr", &lcm::train::EpochRecord::lr};
const EpochField kValSpearman{"val_spearman", &lcm::train::EpochRecord::val_spearman};

/// CHECKs that run `b` retraced run `a`: as many epochs, each with the same `fields`.
void check_same_history(const lcm::train::TrainResult& b, const lcm::train::TrainResult& a,
                        std::initializer_list<EpochField> fields) {
  REQUIRE(b.history.size() == a.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) {
    INFO("epoch " << i + 1);
    for (const EpochField& f : fields) {
      INFO(f.name);
      CHECK(b.history[i].*f.value == a.history[i].*f.value);
    }
  }
}

}  // namespace

TEST_CASE("train() runs the epochs, returns the history and writes every file it names") {
  const std::string dir = lcm::test::temp_dir("trainer_run");
  const Config c = small_config(dir + "/run");
  const lcm::train::TrainResult r = lcm::train::train(c, quiet_options());
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.nothing_to_do);
  REQUIRE(r.history.size() == 2);
  CHECK(r.history[0].epoch == 1);
  CHECK(r.history[1].epoch == 2);
  for (const auto& e : r.history) {
    CHECK(std::isfinite(e.train_mape));
    CHECK(std::isfinite(e.val_mape));
    CHECK(e.datapoints > 0);
  }
  CHECK(std::isfinite(r.best_val_mape));
  for (const std::string& f : {r.paths.best, r.paths.last, r.paths.optimizer, r.paths.log_jsonl,
                               r.paths.log_csv, r.paths.loss_svg}) {
    INFO(f);
    CHECK(fs::is_regular_file(f));
  }
  // the best checkpoint is the epoch with the best validation Spearman (the default select metric)
  const auto best_meta = lcm::read_safetensors(r.paths.best).metadata;
  const int best_epoch = r.history[0].val_spearman > r.history[1].val_spearman ? 1 : 2;
  CHECK(best_meta.at(lcm::train::meta::kEpoch) == std::to_string(best_epoch));
  CHECK(best_meta.at(lcm::train::meta::kSelectMetric) == "spearman");
  CHECK(best_meta.at(lcm::train::meta::kSelection) == "best");
  CHECK(r.best_epoch == best_epoch);
  // the optimizer state records the run as RunState reads it back
  const auto om = lcm::read_safetensors(r.paths.optimizer).metadata;
  const lcm::train::RunState s = lcm::train::RunState::from_metadata(om, r.paths.optimizer);
  CHECK(s.epochs_done == 2);
  CHECK(s.batches_done == 0);
  REQUIRE(s.history.size() == 2);
  CHECK(s.history[1].val_mape == r.history[1].val_mape);
  CHECK(s.best_val_mape == r.best_val_mape);
}

TEST_CASE("a run stopped mid-epoch and resumed in-process equals the uninterrupted run") {
  const std::string dir = lcm::test::temp_dir("trainer_resume");
  const Config whole = small_config(dir + "/whole");
  const lcm::train::TrainResult a = lcm::train::train(whole, quiet_options());
  REQUIRE(a.exit_code == 0);

  Config cut = small_config(dir + "/cut");
  std::atomic<bool> stop{false};
  lcm::train::TrainOptions o = quiet_options();
  o.stop = &stop;
  o.after_step = [&](int64_t steps) {
    if (steps == 3) stop.store(true);  // inside epoch 1 (more than 3 batches per epoch)
  };
  const lcm::train::TrainResult b = lcm::train::train(cut, o);
  CHECK(b.exit_code == 130);
  CHECK(b.history.empty());  // no epoch finished
  const auto om = lcm::read_safetensors(b.paths.optimizer).metadata;
  CHECK(om.at(lcm::train::meta::kBatchesDone) == "3");

  const lcm::train::TrainResult r = resume_stopped(cut, stop);
  CHECK(r.exit_code == 0);
  check_same_history(r, a, {kTrainMape, kValMape, kTrainLoss, kLr});
  CHECK(tensor_bytes(r.paths.last) == tensor_bytes(a.paths.last));
  CHECK(tensor_bytes(r.paths.best) == tensor_bytes(a.paths.best));
}

TEST_CASE("test hooks are TrainOptions fields: an interrupt after step N, a fault on a rank") {
  const std::string dir = lcm::test::temp_dir("trainer_hooks");
  // the library reads no environment for its hooks: this variable is the tool's business
  ::setenv("LCM_INTERRUPT_AFTER_STEPS", "1", 1);
  lcm::train::TrainOptions o = quiet_options();
  o.hooks.interrupt_after_steps = 2;  // as Ctrl-C right after step 2 (inside epoch 1)
  const lcm::train::TrainResult r = lcm::train::train(small_config(dir + "/cut"), o);
  ::unsetenv("LCM_INTERRUPT_AFTER_STEPS");
  const bool stopped = lcm::train::stop_requested().exchange(false);
  CHECK(stopped);
  CHECK(r.exit_code == 130);
  CHECK(r.history.empty());
  CHECK(lcm::read_safetensors(r.paths.optimizer).metadata.at(lcm::train::meta::kBatchesDone) ==
        "2");

  lcm::train::TrainOptions f = quiet_options();
  f.hooks.fail_rank = 0;  // this process is rank 0 of 1
  f.hooks.fail_after_steps = 3;
  CHECK_THROWS_WITH_AS(lcm::train::train(small_config(dir + "/fail"), f),
                       "injected fault on rank 0 after step 3 (LCM_TEST_FAIL_RANK)",
                       std::runtime_error);
}

TEST_CASE("a run over a cache larger than training.host_memory_budget equals the in-memory run") {
  // Run a builds the cache and keeps every row in memory; the other runs read that cache compact
  // and rebuild the rows of the programs outside the budget at batch time: 0 (every program
  // compact, the cache larger than the budget) and the programs' compact data + 100 KiB (some
  // programs' rows held, the others rebuilt).
  const std::string dir = lcm::test::temp_dir("trainer_host_budget");
  auto config = [&](const std::string& name, const std::string& budget) {
    Config c = small_config(dir);
    lcm::config::apply_overrides(
        c, {"experiment.name=" + name, "data.cache=true", "training.host_memory_budget=" + budget});
    return c;
  };
  const lcm::train::TrainResult a = lcm::train::train(config("a", "4GiB"), quiet_options());
  REQUIRE(a.exit_code == 0);
  const std::string cache = dir + "/cache/train.lcmb";
  REQUIRE(fs::is_regular_file(cache));
  CHECK(fs::file_size(cache) > 8 * 1024);
  // the compact data lcm-train holds of both splits (prepared as it prepares them)
  std::vector<lcm::data::PreparedSplit> splits;
  int64_t resident = 0;
  for (const char* split : {"train", "valid"}) {
    splits.push_back(lcm::train::prepare_from_config(config("a", "0"), split, false));
    for (const auto& p : splits.back().dataset.programs) resident += lcm::data::resident_bytes(p);
  }
  const std::string partial = std::to_string(resident / 1024 + 100) + "KiB";
  {  // that budget holds some programs' rows and leaves others compact
    const lcm::data::RowPlacement r = lcm::data::place_rows(
        {&splits[0].dataset, &splits[1].dataset}, (resident / 1024 + 100) * 1024);
    CHECK(r.bytes_resident == resident);
    CHECK(r.programs_held > 0);
    CHECK(r.programs_compact > 0);
  }
  for (const std::string& budget : {std::string("0"), partial}) {
    INFO("training.host_memory_budget=" << budget);
    const lcm::train::TrainResult b = lcm::train::train(
        config(std::string("b") + (budget == "0" ? "0" : "partial"), budget), quiet_options());
    REQUIRE(b.exit_code == 0);
    check_same_history(b, a, {kTrainMape, kValMape, kTrainLoss});
    CHECK(tensor_bytes(b.paths.last) == tensor_bytes(a.paths.last));
    CHECK(tensor_bytes(b.paths.best) == tensor_bytes(a.paths.best));
  }
}

TEST_CASE("--resume: a finished run has nothing to do; refused and warned settings") {
  const std::string dir = lcm::test::temp_dir("trainer_policy");
  Config c = small_config(dir + "/run", 1);
  REQUIRE(lcm::train::train(c, quiet_options()).exit_code == 0);
  const auto stamp = fs::last_write_time(lcm::train::run_paths(c).last);

  lcm::train::TrainOptions ro = quiet_options();
  ro.resume = true;
  const lcm::train::TrainResult done = lcm::train::train(c, ro);
  CHECK(done.exit_code == 0);
  CHECK(done.nothing_to_do);
  CHECK(fs::last_write_time(done.paths.last) == stamp);  // nothing rewritten

  // a Refuse key (the objective) is refused before any data is read
  Config other = c;
  lcm::config::set_config_value(other, "training.loss", "log_mse");
  const std::string m =
      lcm::test::error_of<lcm::config::ConfigError>([&] { lcm::train::train(other, ro); });
  CHECK(contains(
      m,
      "--resume with other settings than the saved run: training.loss=log_mse (the run used "
      "log_huber+pairwise)"));

  // a Warn key gives a warning line, through the same table
  const lcm::train::Metadata saved = {{"training.lr", "0.001"},
                                      {"training.loss", "log_huber+pairwise"}};
  Config faster = c;
  lcm::config::set_config_value(faster, "training.lr", "0.002");
  const std::vector<std::string> w = lcm::train::check_resume_settings(faster, saved);
  REQUIRE(w.size() == 1);
  CHECK(contains(w[0], "--resume with training.lr 0.001 -> 0.002"));
  // numbers compare by value
  lcm::config::set_config_value(faster, "training.lr", "1e-3");
  CHECK(lcm::train::check_resume_settings(faster, saved).empty());
}

TEST_CASE("run_settings_json holds every Refuse and Warn key and nothing else") {
  const Config c;
  const std::string json = lcm::train::run_settings_json(c);
  for (const auto& k : lcm::config::config_keys()) {
    INFO(k.key);
    CHECK(contains(json, "\"" + k.key + "\"") == (k.on_resume != lcm::config::OnResume::Free));
  }
  CHECK(contains(json, "\"training.loss\":\"log_huber+pairwise\""));
}

TEST_CASE("RunState round-trips through metadata and names missing or malformed keys") {
  lcm::train::RunState s;
  s.epochs_done = 3;
  s.batches_done = 7;
  s.schedule_step = 40;
  s.rng_counter = 123456789012345ull;
  s.best_val_mape = 42.5;
  s.history.resize(3);
  s.history[2].epoch = 3;
  s.history[2].val_mape = 41.25;
  s.run_settings = "{}";
  s.partial_loss_sum = 1.5;
  s.partial_ape_sum = 2.25;
  s.epoch_lr = 0.0005;
  const lcm::train::Metadata m = s.to_metadata();
  const lcm::train::RunState r = lcm::train::RunState::from_metadata(m, "opt.safetensors");
  CHECK(r.epochs_done == 3);
  CHECK(r.batches_done == 7);
  CHECK(r.schedule_step == 40);
  CHECK(r.rng_counter == 123456789012345ull);
  CHECK(r.best_val_mape == 42.5);
  REQUIRE(r.history.size() == 3);
  CHECK(r.history[2].val_mape == 41.25);
  CHECK(r.partial_ape_sum == 2.25);
  CHECK(r.epoch_lr == 0.0005);
  // at an epoch boundary the partial sums are not written
  lcm::train::RunState boundary = s;
  boundary.batches_done = 0;
  CHECK(boundary.to_metadata().count(lcm::train::meta::kPartialLossSum) == 0);
  CHECK(lcm::train::RunState::from_metadata(boundary.to_metadata(), "o").batches_done == 0);

  lcm::train::Metadata missing = m;
  missing.erase(lcm::train::meta::kScheduleStep);
  CHECK(lcm::test::error_of<std::runtime_error>([&] {
          lcm::train::RunState::from_metadata(missing, "o.st");
        }) == "--resume: o.st lacks metadata lcm.schedule_step");
  lcm::train::Metadata bad = m;
  bad[lcm::train::meta::kEpoch] = "3x";
  CHECK(lcm::test::error_of<std::runtime_error>([&] {
          lcm::train::RunState::from_metadata(bad, "o.st");
        }) == "--resume: o.st: metadata lcm.epoch is not a number: '3x'");
}

TEST_CASE(
    "make_schedule follows training.lr_schedule and refuses a warm-up that takes every step") {
  Config c;
  lcm::config::apply_overrides(
      c, {"training.lr=0.01", "training.max_epochs=2", "training.lr_schedule=constant"});
  CHECK(lcm::train::make_schedule(c, 10)->lr_at(7) == doctest::Approx(0.01));
  lcm::config::apply_overrides(c,
                               {"training.lr_schedule=warmup_cosine", "training.warmup_pct=0.5"});
  const auto w = lcm::train::make_schedule(c, 10);  // 20 steps, 10 of warm-up
  CHECK(w->lr_at(0) == doctest::Approx(0.001));     // lr·(t+1)/W
  CHECK(w->lr_at(9) == doctest::Approx(0.01));
  CHECK(w->lr_at(19) < 0.001);
  lcm::config::apply_overrides(c, {"training.max_epochs=1", "training.warmup_pct=0.99"});
  CHECK(contains(
      lcm::test::error_of<lcm::config::ConfigError>([&] { lcm::train::make_schedule(c, 1); }),
      "training.warmup_pct=0.99: the warm-up takes 1 of the 1 batch steps"));
  // the encoder's own schedule: constant unless the reference's per-epoch one-cycle
  CHECK(lcm::train::make_encoder_schedule(c, 10)->lr_at(5) ==
        doctest::Approx(c.training.fine_tune_lr));
}

TEST_CASE(
    "pretrain() trains an autoencoder in-process; a file given twice counts its programs once") {
  const std::string dir = lcm::test::temp_dir("trainer_pretrain");
  Config c;
  lcm::config::apply_overrides(
      c, {"experiment.base_path=" + dir + "/run", "pretrain.kind=access_matrix",
          "pretrain.files=[" + files().train + "," + files().train + "]", "pretrain.epochs=2",
          "pretrain.batch_size=64", "pretrain.valid_fraction=0.25", "training.threads=1",
          "data.nb_workers=1"});
  lcm::train::PretrainOptions o;
  o.quiet = true;
  const lcm::train::PretrainResult r = lcm::train::pretrain(c, o);
  CHECK(r.exit_code == 0);
  CHECK(r.programs == 24);  // the second copy of the file is skipped program by program
  CHECK(r.held_out == 6);   // round(0.25 x 24)
  CHECK(r.train_samples + r.valid_samples > r.programs);
  REQUIRE(r.history.size() == 2);
  CHECK(std::isfinite(r.history[1].train_mse));
  CHECK(std::isfinite(r.history[1].val_mse));
  CHECK(r.best_mse == std::min(r.history[0].val_mse, r.history[1].val_mse));
  const auto meta = lcm::read_safetensors(r.best_path).metadata;
  CHECK(meta.at(lcm::train::meta::kFormat) == "autoencoder");
  CHECK(meta.at(lcm::train::meta::kAutoencoderKind) == "access_matrix");
  CHECK(fs::is_regular_file(r.last_path));
  CHECK(fs::is_regular_file(dir + "/run/log_pretrain_lcm.jsonl"));
  // an empty pretrain.files is a config error
  lcm::config::set_config_value(c, "pretrain.files", "");
  CHECK(contains(lcm::test::error_of<lcm::config::ConfigError>([&] { lcm::train::pretrain(c, o); }),
                 "pretrain.files is empty"));
}

TEST_CASE("no epoch with a defined selection metric: the last epoch's weights are the best model") {
  // every schedule of every validation program measured as fast as the program itself: constant
  // measured speedups, so validation Spearman is NaN in every epoch and no epoch ever improves it
  const std::string dir = lcm::test::temp_dir("trainer_nan_select");
  const std::string valid = dir + "/valid_constant.jsonl";
  {
    std::ofstream out(valid);
    for (const std::string& line : lcm::test::gz_lines(files().valid)) {
      rapidjson::Document d;
      d.Parse(line.c_str());
      REQUIRE(!d.HasParseError());
      const double t0 = d["initial_execution_time"].GetDouble();
      for (auto& sched : d["schedules_list"].GetArray())
        for (auto& t : sched["execution_times"].GetArray()) t.SetDouble(t0);
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> w(sb);
      d.Accept(w);
      out << sb.GetString() << "\n";
    }
  }
  Config c = small_config(dir + "/run");
  lcm::config::set_config_value(c, "data.valid_file", valid);
  REQUIRE(c.training.select_metric == lcm::config::SelectMetric::Spearman);
  const lcm::train::TrainResult r = lcm::train::train(c, quiet_options());
  CHECK(r.exit_code == 0);
  REQUIRE(r.history.size() == 2);
  for (const auto& e : r.history) CHECK(std::isnan(e.val_spearman));
  // the checkpoint it reports exists and is the last epoch's, marked as not selected by the metric
  REQUIRE(fs::is_regular_file(r.paths.best));
  const auto meta = lcm::read_safetensors(r.paths.best).metadata;
  CHECK(meta.at(lcm::train::meta::kSelection) == "last_epoch");
  CHECK(meta.at(lcm::train::meta::kEpoch) == "2");
  CHECK(tensor_bytes(r.paths.best) == tensor_bytes(r.paths.last));
  CHECK(r.best_epoch == 2);
  CHECK(r.best_val_mape == r.history[1].val_mape);
  // the reason of the NaN, as the run states it
  lcm::model::MetricsSummary m;
  m.programs.resize(2);
  m.programs[0].n_schedules = 5;
  m.programs[1].n_schedules = 1;
  m.mean_spearman = NAN;
  CHECK(contains(lcm::train::undefined_metric_reason(m, "spearman"),
                 "1 of the 2 programs have fewer than 2 schedules, the other 1 have constant"));
  CHECK(lcm::train::undefined_metric_reason(m, "mape").empty());  // mean_mape 0: defined
}

TEST_CASE(
    "ReduceOnPlateauLr: the LR is multiplied after exactly `patience` epochs without a "
    "better score") {
  lcm::ReduceOnPlateauLr s(1e-3, 0.5, 2);
  CHECK(s.lr() == 1e-3);
  // scores (larger is better) and the LR the next epoch must run at, worked out by hand:
  // 0.1 best, 0.2 best, 0.15 bad 1, 0.18 bad 2 → halve, 0.19 bad 1, 0.2 a tie (counts as
  // better), 0.1 bad 1, NaN bad 2 → halve, 0.3 best, 0.29 bad 1
  const double nan = std::nan("");
  const std::vector<std::pair<double, double>> steps{
      {0.1, 1e-3}, {0.2, 1e-3}, {0.15, 1e-3},  {0.18, 5e-4},  {0.19, 5e-4},
      {0.2, 5e-4}, {0.1, 5e-4}, {nan, 2.5e-4}, {0.3, 2.5e-4}, {0.29, 2.5e-4}};
  int reductions = 0;
  for (size_t e = 0; e < steps.size(); ++e) {
    INFO("epoch " << e + 1);
    const bool reduced = s.observe(steps[e].first);
    reductions += reduced;
    CHECK(reduced == (e == 3 || e == 7));
    CHECK(s.lr() == steps[e].second);
    CHECK(s.lr_at(12345) == s.lr());  // not a function of the step
  }
  CHECK(s.reductions() == reductions);
  CHECK_THROWS_AS(lcm::ReduceOnPlateauLr(1e-3, 1.0, 2), std::invalid_argument);
  CHECK_THROWS_AS(lcm::ReduceOnPlateauLr(1e-3, 0.5, 0), std::invalid_argument);
  // the config switch and its keys
  Config c;
  lcm::config::apply_overrides(c, {"training.lr_schedule=reduce_on_plateau", "training.lr=0.01",
                                   "training.plateau_factor=0.25", "training.plateau_patience=3"});
  const auto made = lcm::train::make_schedule(c, 10);
  auto* p = dynamic_cast<lcm::ReduceOnPlateauLr*>(made.get());
  REQUIRE(p != nullptr);
  for (double v : {0.5, 0.4, 0.4, 0.3}) p->observe(v);  // best, then 3 bad epochs
  CHECK(p->lr() == doctest::Approx(0.0025));
  CHECK_THROWS_AS(lcm::config::apply_overrides(c, {"training.plateau_factor=1"}),
                  lcm::config::ConfigError);
  CHECK_THROWS_AS(lcm::config::apply_overrides(c, {"training.plateau_factor=0"}),
                  lcm::config::ConfigError);
  CHECK_THROWS_AS(lcm::config::apply_overrides(c, {"training.plateau_patience=0"}),
                  lcm::config::ConfigError);
}

TEST_CASE(
    "reduce_on_plateau in a run: the LR follows the validation metric, and a run resumed "
    "mid-epoch continues the same LR sequence bit for bit") {
  const std::string dir = lcm::test::temp_dir("trainer_plateau");
  auto plateau_config = [&](const std::string& sub) {
    Config c = small_config(dir + "/" + sub, 7);
    lcm::config::apply_overrides(c, {"training.lr_schedule=reduce_on_plateau", "training.lr=0.003",
                                     "training.plateau_patience=2", "training.plateau_factor=0.5",
                                     "training.select_metric=spearman"});
    return c;
  };
  int64_t steps = 0;
  lcm::train::TrainOptions count = quiet_options();
  count.after_step = [&](int64_t s) { steps = s; };
  const Config whole = plateau_config("whole");
  const lcm::train::TrainResult a = lcm::train::train(whole, count);
  REQUIRE(a.exit_code == 0);
  REQUIRE(a.history.size() == 7);
  const int64_t per_epoch = steps / 7;
  REQUIRE(per_epoch * 7 == steps);
  REQUIRE(per_epoch > 3);
  // The rule worked out from the history: the LR of epoch e + 1 is that of epoch e, halved when
  // epoch e is the second in a row whose Spearman is below the best so far (patience 2; a tie
  // counts as better; the count restarts after a halving).
  double best = -INFINITY, lr = 0.003;
  int halvings = 0, bad = 0;
  for (size_t e = 0; e < a.history.size(); ++e) {
    INFO("epoch " << e + 1);
    CHECK(a.history[e].lr == doctest::Approx(lr).epsilon(1e-12));
    const double v = a.history[e].val_spearman;
    if (v >= best) {
      best = v;
      bad = 0;
    } else if (++bad == 2) {
      lr *= 0.5, ++halvings, bad = 0;
    }
  }
  CHECK(halvings > 0);  // the test exercises a reduction (7 epochs at lr 3e-3 on 24 programs)

  // stopped inside epoch 5 (after a reduction or not, the state comes from the history), resumed
  Config cut = plateau_config("cut");
  std::atomic<bool> stop{false};
  lcm::train::TrainOptions o = quiet_options();
  o.stop = &stop;
  o.after_step = [&](int64_t s) {
    if (s == 4 * per_epoch + 2) stop.store(true);
  };
  const lcm::train::TrainResult b = lcm::train::train(cut, o);
  CHECK(b.exit_code == 130);
  CHECK(b.history.size() == 4);
  const lcm::train::TrainResult r = resume_stopped(cut, stop);
  CHECK(r.exit_code == 0);
  check_same_history(r, a, {kLr, kTrainLoss, kValSpearman});
  CHECK(tensor_bytes(r.paths.last) == tensor_bytes(a.paths.last));
  CHECK(tensor_bytes(r.paths.optimizer) == tensor_bytes(a.paths.optimizer));
}
