// Tests of the ranking switches (docs/accuracy.md) through the tools (mini sample, 48 training / 12
// validation programs): the input scaling is fitted on the training split only, stored in the
// checkpoint and reapplied by lcm-eval / lcm-predict; log-output checkpoints predict speedups;
// model.preset=reference; early stopping; the eval report carries top-1 / top-5 recovered.
#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/safetensors.hpp"
#include "model/input_scaling.hpp"
#include "model/scoring.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/early_stopping.hpp"
#include "train/evaluate.hpp"
#include "train/losses.hpp"
#include "train/predictor.hpp"
#include "train/splits.hpp"

namespace fs = std::filesystem;

namespace {

using lcm::test::bin_dir;

using lcm::test::RunResult;
using lcm::test::slurp;
using lcm::test::layered::run_tool;

struct Fixture {
  std::string dir, common;
  RunResult train;
  bool ok = false;
};

/// One 12-epoch run with log_standardize scaling and the log_mse+pairwise loss, on per-footprint
/// batches: the end-to-end ranking check below compares against a constant predictor on 12
/// validation programs, where one seed is a coin toss between batchings (mean nDCG over seeds
/// 1–3: per_footprint 0.871, mixed 0.873, constant 0.859; data.seed=42 mixed alone 0.846). The
/// mixed batching of the defaults is checked by test_model and test_dataset.
const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    const std::string mini = lcm::test::shared_data("looperset-sample/mini.jsonl.gz");
    if (mini.empty()) return x;
    for (const char* tool : {"lcm-train", "lcm-eval", "lcm-predict"}) {
      INFO("build the tools first: missing " << bin_dir() << "/" << tool);
      REQUIRE(fs::is_regular_file(bin_dir() + "/" + tool));
    }
    x.dir = lcm::test::temp_dir("ranking_tools");
    auto lines = lcm::test::gz_lines(mini);
    REQUIRE(lines.size() == 60);
    std::ofstream t(x.dir + "/train.jsonl"), v(x.dir + "/valid.jsonl");
    for (size_t i = 0; i < 60; ++i) (i < 48 ? t : v) << lines[i] << "\n";
    t.close();
    v.close();
    x.common =
        "data.train_file=" + x.dir + "/train.jsonl data.valid_file=" + x.dir +
        "/valid.jsonl data.batch_size=32 data.min_functions_per_footprint=0 training.threads=1 "
        "data.batching=per_footprint training.lr=0.003 training.optimizer=adam "
        "training.weight_decay=0 "
        "model.comp_embed_layer_sizes=64,32 model.lstm_embedding_size=8 model.expr_embed_size=8 "
        "training.calibration_folds=0 -q";  // the in-sample map (test_crossfit has fold runs)
    x.train = run_tool(x.dir, "lcm-train",
                       x.common + " experiment.base_path=" + x.dir +
                           "/run training.max_epochs=12 "
                           "model.input_scaling=log_standardize training.loss=log_mse+pairwise "
                           "training.select_metric=spearman");
    x.ok = true;
    return x;
  }();
  return f;
}

/// fixture(), REQUIREd to be set up and its training run to have succeeded.
const Fixture& trained_fixture() {
  const Fixture& f = fixture();
  REQUIRE(f.ok);
  REQUIRE(f.train.code == 0);
  return f;
}

lcm::config::Config config_of(const Fixture& f, const std::string& split_file) {
  lcm::config::Config c;
  lcm::config::apply_overrides(
      c, {"data.valid_file=" + split_file, "data.train_file=" + f.dir + "/train.jsonl",
          "data.cache=false", "data.batch_size=32", "data.min_functions_per_footprint=0",
          "data.batching=per_footprint", "model.comp_embed_layer_sizes=64,32",
          "model.lstm_embedding_size=8", "model.expr_embed_size=8"});
  return c;
}

}  // namespace

TEST_CASE("input scaling: fitted on the training split only and stored in the checkpoint") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture();
  REQUIRE(f.ok);
  INFO(f.train.out << f.train.err);
  REQUIRE(f.train.code == 0);
  const std::string ck = f.dir + "/run/weights/best_model_lcm.safetensors";
  auto meta = lcm::read_safetensors(ck).metadata;
  REQUIRE(meta.count("lcm.input_scaling"));
  CHECK(meta["lcm.loss"] == "log_mse+pairwise");
  CHECK(lcm::train::model_config_from_json(meta["lcm.model_config"]).log_output);
  const lcm::model::InputScaling stored = lcm::train::load_input_scaling(ck);
  CHECK(stored.mode == "log_standardize");
  lcm::config::Config c = config_of(f, f.dir + "/valid.jsonl");
  auto train = lcm::train::prepare_from_config(c, "train", false);
  auto valid = lcm::train::prepare_from_config(c, "valid", false);
  const auto on_train = lcm::model::fit_input_scaling("log_standardize", train.dataset);
  const auto on_valid = lcm::model::fit_input_scaling("log_standardize", valid.dataset);
  REQUIRE(stored.comp_mean.size() == on_train.comp_mean.size());
  bool equal_train = true, equal_valid = true;
  for (size_t j = 0; j < stored.comp_mean.size(); ++j) {
    equal_train = equal_train && std::fabs(stored.comp_mean[j] - on_train.comp_mean[j]) <=
                                     1e-12 * (1 + std::fabs(on_train.comp_mean[j]));
    equal_valid = equal_valid && stored.comp_mean[j] == on_valid.comp_mean[j];
  }
  CHECK(equal_train);
  CHECK_FALSE(equal_valid);
}

TEST_CASE(
    "lcm-predict reapplies the checkpoint's scaling and reports speedups of a log-output model") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = trained_fixture();
  const std::string ck = f.dir + "/run/weights/best_model_lcm.safetensors";
  auto p = run_tool(f.dir, "lcm-predict",
                    f.common + " eval.weights_path=" + ck + " --out " + f.dir + "/pred.jsonl");
  INFO(p.err);
  REQUIRE(p.code == 0);
  std::map<std::pair<std::string, int>, double> tool;
  std::stringstream ls(slurp(f.dir + "/pred.jsonl"));
  std::string line;
  while (std::getline(ls, line)) {
    rapidjson::Document r;
    r.Parse(line.c_str());
    REQUIRE(!r.HasParseError());
    tool[{r["program"].GetString(), r["schedule_index"].GetInt()}] =
        r["predicted_speedup"].GetDouble();
  }
  REQUIRE(!tool.empty());
  // in-process: same checkpoint, with and without its scaling
  lcm::config::Config c = config_of(f, f.dir + "/valid.jsonl");
  auto split = lcm::train::prepare_from_config(c, "valid", false);
  auto model = lcm::train::load_checkpoint(ck, c);
  const auto scaling = lcm::train::load_input_scaling(ck);
  // and the calibration map lcm-train fitted and stored (training.calibrate=true by default)
  const lcm::model::Calibration cal = lcm::train::load_calibration(ck);
  CHECK(cal.active());
  lcm::model::ScoringModels scored;
  scored.members = {model.get()};
  scored.calibration = &cal;
  auto without = lcm::train::predict_dataset(scored, split.dataset);
  scored.scaling = &scaling;
  auto with = lcm::train::predict_dataset(scored, split.dataset);
  int matched = 0, differ = 0;
  bool positive = true;
  for (size_t i = 0; i < with.size(); ++i) {
    const auto& pf = split.dataset.programs[size_t(with[i].program)];
    auto it = tool.find({pf.name, pf.schedule_index[size_t(with[i].schedule)]});
    if (it == tool.end()) continue;
    ++matched;
    CHECK(it->second == doctest::Approx(with[i].predicted).epsilon(1e-5));
    positive = positive && with[i].predicted > 0;  // exp of the ln-speedup output
    differ += std::fabs(with[i].predicted - without[i].predicted) > 1e-6 * with[i].predicted;
  }
  CHECK(matched == int(with.size()));
  CHECK(positive);
  CHECK(differ > 0);  // the scaling really changes the model's input
}

TEST_CASE("lcm-eval reports top-1 / top-5 recovered; lcm-train logs ranking metrics") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = trained_fixture();
  const std::string ck = f.dir + "/run/weights/best_model_lcm.safetensors";
  auto e = lcm::test::layered::eval_best(f.dir, f.common, f.dir + "/run");
  INFO(e.out << e.err);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("top-1 speedup recovered") != std::string::npos);
  rapidjson::Document d;
  d.Parse(slurp(f.dir + "/run/eval_lcm.json").c_str());
  REQUIRE(!d.HasParseError());
  CHECK(d["format_version"].GetInt() == 2);
  // the map it applied and how it was fitted, in the table and the report
  CHECK(e.out.find("the checkpoint's calibration map, fitted on the model's training predictions, "
                   "minimising the per-program squared ln error, changes values only") !=
        std::string::npos);
  REQUIRE(d["calibrated"].GetBool());
  CHECK(d["calibration"]["folds"].GetInt() == 0);
  CHECK(std::string(d["calibration"]["weighting"].GetString()) == "program");
  CHECK(std::string(d["calibration"]["objective"].GetString()) == "squared_log_error");
  // the uncalibrated values' symmetric errors beside their MAPE, in the table and the report
  CHECK(e.out.find("median factor before calib.") != std::string::npos);
  CHECK(e.out.find("within 2x before calib.") != std::string::npos);
  REQUIRE(d["uncalibrated"]["median_error_factor"].IsNumber());
  CHECK(d["uncalibrated"]["median_error_factor"].GetDouble() >= 1.0);
  REQUIRE(d["uncalibrated"]["within_2x"].IsNumber());
  // the symmetric error of the reported speedups beside MAPE
  CHECK(e.out.find("median error factor") != std::string::npos);
  REQUIRE(d["median_error_factor"].IsNumber());
  CHECK(d["median_error_factor"].GetDouble() >= 1.0);
  CHECK(d["within_2x"].GetDouble() >= 0.0);
  CHECK(d["within_2x"].GetDouble() <= 1.0);
  const double top1 = d["mean"]["top1_recovered"].GetDouble(),
               top5 = d["mean"]["top5_recovered"].GetDouble();
  CHECK(top1 > 0);
  CHECK(top1 <= top5);  // the best of the top 5 is at least the first
  CHECK(top5 <= 1.0 + 1e-12);
  // End to end, on the default (ranking) objective: the trained model ranks the schedules of
  // the programs it was trained on better than a constant predictor (all ties). On the 12
  // validation programs this tiny model is near the constant either way (its nDCG moves by more
  // than the gap with float rounding: the sanitizer build's -O1 gave 0.857 against 0.859), so
  // that pair is only reported. (Under the faithful MAPE preset the model collapses towards a
  // constant, so there even the training split is a coin toss.)
  {
    auto constant_ndcg = [&](const lcm::data::Dataset& ds) {
      lcm::model::CostModel<float> any(lcm::train::model_config(config_of(f, "")), 7);
      auto pc = lcm::train::predict_dataset(any, ds);
      REQUIRE(!pc.empty());
      for (auto& p : pc) p.predicted = 1.0;
      return lcm::train::evaluate_predictions(ds, pc).mean_ndcg;
    };
    lcm::config::Config c = config_of(f, f.dir + "/train.jsonl");
    lcm::config::apply_overrides(c, {"eval.weights_path=" + ck, "training.threads=1"});
    const lcm::train::Predictor trained_model(c);
    auto train_split = lcm::train::prepare_from_config(c, "valid", false);
    const double trained_on_train =
        lcm::train::evaluate_predictions(train_split.dataset,
                                         trained_model.predict(train_split.dataset))
            .mean_ndcg;
    const double constant_on_train = constant_ndcg(train_split.dataset);
    auto valid_split =
        lcm::train::prepare_from_config(config_of(f, f.dir + "/valid.jsonl"), "valid", false);
    MESSAGE("mean nDCG, training programs: trained "
            << trained_on_train << ", constant " << constant_on_train
            << "; validation programs: trained " << d["mean"]["ndcg"].GetDouble() << ", constant "
            << constant_ndcg(valid_split.dataset));
    CHECK(trained_on_train > constant_on_train);
  }
  CHECK(slurp(f.dir + "/run/eval_lcm.csv").find("top1_recovered,top5_recovered") !=
        std::string::npos);
  const std::string log = slurp(f.dir + "/run/log_lcm.csv");
  CHECK(log.find("val_spearman") != std::string::npos);
  CHECK(fs::is_regular_file(f.dir + "/run/ranking_lcm.svg"));
}

TEST_CASE("model.preset=reference sets the faithful switches; later keys override") {
  lcm::config::Config c;
  lcm::config::apply_overrides(
      c, {"training.loss=log_mse", "model.input_scaling=log", "training.lr_schedule=warmup_cosine",
          "training.early_stop_patience=3", "model.preset=reference"});
  CHECK(lcm::config::get_config_value(c, "training.loss") == "mape");
  CHECK(lcm::config::get_config_value(c, "model.input_scaling") == "none");
  CHECK(lcm::config::get_config_value(c, "training.lr_schedule") == "constant");
  CHECK(c.training.early_stop_patience == 0);
  CHECK(lcm::config::get_config_value(c, "training.select_metric") == "mape");
  CHECK(c.data.min_functions_per_footprint == 2);  // §3.11 and one footprint per batch (§5.5)
  CHECK(lcm::config::get_config_value(c, "data.batching") == "per_footprint");
  CHECK(lcm::train::model_config(c).log_output == false);
  lcm::config::apply_overrides(c, {"training.loss=pairwise"});
  CHECK(lcm::config::get_config_value(c, "training.loss") == "pairwise");
  CHECK(lcm::train::model_config(c).log_output);
  CHECK_THROWS_AS(lcm::config::apply_overrides(c, {"model.preset=faithful"}),
                  lcm::config::ConfigError);
  for (const char* delta : {"training.huber_delta=1e-300", "training.huber_delta=1e300"})
    CHECK_THROWS_AS(lcm::config::apply_overrides(c, {delta}), lcm::config::ConfigError);
  CHECK_NOTHROW(lcm::config::apply_overrides(c, {"training.huber_delta=1e-6"}));
  CHECK_THROWS_AS(lcm::config::apply_overrides(c, {"training.loss=hinge"}),
                  lcm::config::ConfigError);
}

TEST_CASE("early stopping: best on ties, stops after `patience` epochs without improvement") {
  lcm::train::EarlyStopping s;
  s.patience = 2;
  CHECK(s.update(0.1, 1));
  CHECK(s.update(0.3, 2));
  CHECK_FALSE(s.update(0.2, 3));
  CHECK_FALSE(s.should_stop());
  CHECK(s.update(0.3, 4));  // a tie keeps the later checkpoint and resets the count
  CHECK_FALSE(s.update(0.25, 5));
  CHECK_FALSE(s.update(NAN, 6));
  CHECK(s.should_stop());
  lcm::train::EarlyStopping off;  // patience 0: never stops
  off.update(1.0, 1);
  for (int i = 0; i < 5; ++i) off.update(0.0, 2 + i);
  CHECK_FALSE(off.should_stop());
}

TEST_CASE("early stopping never stops while a pre-trained encoder is still frozen") {
  using lcm::train::fine_tuning_count_from;
  CHECK(fine_tuning_count_from(true, 15, 30) == 16);  // fine-tuned from epoch index 15
  CHECK(fine_tuning_count_from(true, 0, 30) == 1);    // fine-tuned from the start
  CHECK(fine_tuning_count_from(true, 30, 30) == 1);   // never fine-tuned: counts as usual
  CHECK(fine_tuning_count_from(false, 15, 30) == 1);  // no encoder
  lcm::train::EarlyStopping s;
  s.patience = 2;
  s.count_from_epoch = fine_tuning_count_from(true, 4, 10);
  CHECK(s.update(0.5, 1));
  for (int e = 2; e <= 4; ++e) {  // frozen epochs without improvement: not counted
    CHECK_FALSE(s.update(0.1, e));
    CHECK_FALSE(s.should_stop());
  }
  CHECK(s.bad_epochs == 0);
  CHECK_FALSE(s.update(0.1, 5));  // the first fine-tuning epoch counts
  CHECK_FALSE(s.should_stop());
  CHECK(s.update(0.6, 6));  // the frozen phase's best is still the bar to beat
  CHECK_FALSE(s.update(0.2, 7));
  CHECK_FALSE(s.update(0.2, 8));
  CHECK(s.should_stop());
}

TEST_CASE("early stopping counts from training.early_stop_from_epoch") {
  using lcm::train::early_stop_count_from;
  CHECK(early_stop_count_from(10, false, 0, 30) == 10);
  CHECK(early_stop_count_from(1, false, 0, 30) == 1);
  CHECK(early_stop_count_from(0, false, 0, 30) == 1);    // below 1 counts as from the start
  CHECK(early_stop_count_from(10, true, 15, 30) == 16);  // the later of the two rules
  CHECK(early_stop_count_from(20, true, 15, 30) == 20);
  // a run that peaks at epoch 4 and then stalls until epoch 12 (the slow first phase) is not
  // stopped by patience 5 counted from epoch 10, and goes on to its real peak
  lcm::train::EarlyStopping s;
  s.patience = 5;
  s.count_from_epoch = early_stop_count_from(10, false, 0, 30);
  for (int e = 1; e <= 4; ++e) CHECK(s.update(0.1 * e, e));
  for (int e = 5; e <= 11; ++e) {
    CHECK_FALSE(s.update(0.2, e));
    CHECK_FALSE(s.should_stop());
  }
  CHECK(s.bad_epochs == 2);  // epochs 10 and 11
  CHECK(s.update(0.5, 12));
  for (int e = 13; e <= 16; ++e) CHECK_FALSE(s.update(0.4, e));
  CHECK_FALSE(s.should_stop());
  CHECK_FALSE(s.update(0.4, 17));
  CHECK(s.should_stop());
  // counted from the start, the same scores stop the run at epoch 9
  lcm::train::EarlyStopping first;
  first.patience = 5;
  int stopped = 0;
  for (int e = 1; e <= 12 && !stopped; ++e) {
    first.update(e <= 4 ? 0.1 * e : (e == 12 ? 0.5 : 0.2), e);
    if (first.should_stop()) stopped = e;
  }
  CHECK(stopped == 9);
}

TEST_CASE("lcm-train stops early when validation stops improving") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture();
  REQUIRE(f.ok);
  // a learning rate this large destroys the model after the first steps: validation MAPE cannot
  // keep improving for 8 epochs, so patience 1 must stop the run before max_epochs
  auto r = run_tool(f.dir, "lcm-train",
                    f.common + " experiment.base_path=" + f.dir +
                        "/stop training.max_epochs=8 training.early_stop_patience=1 "
                        "training.early_stop_from_epoch=1 training.lr=5 "
                        "training.select_metric=mape");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("early stop after epoch") != std::string::npos);
  int rows = -1;
  for (char ch : slurp(f.dir + "/stop/log_lcm.csv")) rows += ch == '\n';
  CHECK(rows < 8);
  // the same run with the default training.early_stop_from_epoch (10): epochs 1-8 do not count,
  // so it trains all 8
  auto late = run_tool(f.dir, "lcm-train",
                       f.common + " experiment.base_path=" + f.dir +
                           "/stop_late training.max_epochs=8 training.early_stop_patience=1 "
                           "training.lr=5 training.select_metric=mape");
  INFO(late.out << late.err);
  REQUIRE(late.code == 0);
  CHECK(late.out.find("early stop after epoch") == std::string::npos);
  int late_rows = -1;
  for (char ch : slurp(f.dir + "/stop_late/log_lcm.csv")) late_rows += ch == '\n';
  CHECK(late_rows == 8);
}

TEST_CASE(
    "the default configuration (the ranking switches) trains, and --resume continues the same "
    "curve") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture();
  REQUIRE(f.ok);
  // no loss/scaling/schedule keys: the built-in defaults (log_huber+pairwise, log_standardize,
  // warmup_cosine, clipping, early stopping on validation Spearman)
  const std::string full = f.dir + "/defaults_full", part = f.dir + "/defaults_part";
  auto a = run_tool(f.dir, "lcm-train",
                    f.common + " experiment.base_path=" + full + " training.max_epochs=3");
  INFO(a.out << a.err);
  REQUIRE(a.code == 0);
  CHECK(a.out.find("(warmup_cosine), input scaling log_standardize\n") != std::string::npos);
  // the objective actually optimised and the metric that picks the best checkpoint, by name
  CHECK(a.out.find("lcm-train: objective (training.loss) log_huber+pairwise, column train_loss; "
                   "MAPE is measured, not optimised; best checkpoint: highest validation spearman "
                   "(training.select_metric)") != std::string::npos);
  CHECK(a.out.find("lcm-train: experiment lcm: cost model with ") != std::string::npos);
  CHECK(a.out.find("lcm-train: best checkpoint: epoch ") != std::string::npos);
  CHECK(a.out.find("objective log_huber+pairwise; weights ") != std::string::npos);
  const std::string loss_svg = slurp(full + "/loss_lcm.svg");
  CHECK(loss_svg.find("training objective (training.loss): log_huber+pairwise") !=
        std::string::npos);
  CHECK(slurp(full + "/objective_lcm.svg").find("train log_huber+pairwise") != std::string::npos);
  // resume: a per-batch schedule is sized by max_epochs, so a 2-then-3-epoch run only matches a
  // 3-epoch run at a constant LR; the scaling, loss and early-stopping state are what is tested
  const std::string constant = " training.lr_schedule=constant";
  REQUIRE(
      run_tool(f.dir, "lcm-train",
               f.common + " experiment.base_path=" + full + "_c training.max_epochs=3" + constant)
          .code == 0);
  REQUIRE(run_tool(f.dir, "lcm-train",
                   f.common + " experiment.base_path=" + part + " training.max_epochs=2" + constant)
              .code == 0);
  auto r = run_tool(
      f.dir, "lcm-train",
      f.common + " experiment.base_path=" + part + " training.max_epochs=3 --resume" + constant);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // same values (to 1e-9: the resumed part of the log went through JSON) except the timing
  // columns (seconds, datapoints_per_s)
  auto rows = [&](const std::string& base) {
    std::vector<std::vector<std::string>> out;
    std::stringstream s(slurp(base + "/log_lcm.csv"));
    std::string line;
    std::getline(s, line);
    while (std::getline(s, line)) {
      std::vector<std::string> cols;
      std::stringstream ls(line);
      std::string col;
      while (std::getline(ls, col, ',')) cols.push_back(col);
      if (line.back() == ',') cols.push_back("");
      REQUIRE(cols.size() == 12);
      cols.erase(cols.begin() + 9, cols.begin() + 11);
      out.push_back(cols);
    }
    return out;
  };
  auto full_rows = rows(full + "_c"), part_rows = rows(part);
  REQUIRE(full_rows.size() == 3);
  REQUIRE(part_rows.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < full_rows[i].size(); ++j) {
      INFO("epoch " << i + 1 << " column " << j);
      if (full_rows[i][j].empty()) {
        CHECK(part_rows[i][j].empty());
        continue;
      }
      CHECK(std::stod(part_rows[i][j]) ==
            doctest::Approx(std::stod(full_rows[i][j])).epsilon(1e-9));
    }
}
