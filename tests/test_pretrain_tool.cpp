// End-to-end tests of lcm-pretrain and of lcm-train with a pre-trained encoder
// (docs/model-spec.md §8) on the mini sample, run as subprocesses: the reconstruction loss falls,
// outputs and metadata, the frozen → fine-tuned encoder, checkpoints that carry it (lcm-eval needs
// no flag), clear errors; lcm-train started from a cost-model checkpoint (training.init_weights).
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/safetensors.hpp"
#include "model/input_scaling.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;

namespace {

using lcm::test::bin_dir;
using lcm::test::run_tool;
using lcm::test::RunResult;
using lcm::test::slurp;

/// (epoch, train, val) rows of a log CSV.
std::vector<std::vector<double>> read_csv(const std::string& path) {
  std::vector<std::vector<double>> rows;
  std::stringstream s(slurp(path));
  std::string line;
  std::getline(s, line);
  while (std::getline(s, line)) {
    std::vector<double> r;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) r.push_back(cell.empty() ? NAN : std::stod(cell));
    rows.push_back(r);
  }
  return rows;
}

/// Every "encoder.*" tensor of a safetensors file as floats.
std::map<std::string, std::vector<float>> encoder_tensors(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : lcm::read_safetensors(path).tensors)
    if (name.rfind("encoder.", 0) == 0) out[name] = t.to_float();
  return out;
}

/// Temp folder with train/valid splits of mini (48 / 12 programs) and one access-matrix
/// pre-training run on all of mini; `lines` are mini's 60 lines (one record each).
struct Fixture {
  std::string dir, mini, train_args;
  std::vector<std::string> lines;
  RunResult pretrain;

  /// The pre-trained access-matrix encoder's checkpoint; the pre-training must have succeeded.
  std::string encoder() const {
    REQUIRE(pretrain.code == 0);
    return dir + "/am/weights/best_autoencoder_am.safetensors";
  }
};

const Fixture& fixture(const std::string& mini) {
  static Fixture f = [&] {
    Fixture x;
    x.mini = mini;
    x.dir = lcm::test::temp_dir("pretrain");
    x.lines = lcm::test::gz_lines(mini);
    REQUIRE(x.lines.size() == 60);
    std::ofstream tr(x.dir + "/train.jsonl"), va(x.dir + "/valid.jsonl");
    for (size_t i = 0; i < x.lines.size(); ++i) (i < 48 ? tr : va) << x.lines[i] << "\n";
    tr.close();
    va.close();
    x.pretrain = run_tool(
        x.dir, "lcm-pretrain",
        "pretrain.kind=access_matrix pretrain.files=[" + mini +
            "] pretrain.epochs=6 pretrain.lr=0.003 pretrain.batch_size=32 training.threads=1 "
            "experiment.name=am experiment.base_path=" +
            x.dir + "/am -q");
    x.train_args =
        "data.train_file=" + x.dir + "/train.jsonl data.valid_file=" + x.dir +
        "/valid.jsonl data.batch_size=32 data.min_functions_per_footprint=0 training.threads=1 "
        "training.lr=0.003 training.optimizer=adam training.weight_decay=0 "
        "model.comp_embed_layer_sizes=32,16 model.lstm_embedding_size=8 model.expr_embed_size=8 "
        "model.input_scaling=none training.calibration_folds=0 -q";
    return x;
  }();
  return f;
}

}  // namespace

TEST_CASE(
    "lcm-pretrain access_matrix: the reconstruction loss falls; checkpoint with kind metadata") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  INFO(f.pretrain.out << f.pretrain.err);
  REQUIRE(f.pretrain.code == 0);
  const std::string b = f.dir + "/am";
  for (const char* p :
       {"/weights/best_autoencoder_am.safetensors", "/weights/last_autoencoder_am.safetensors",
        "/log_pretrain_am.jsonl", "/log_pretrain_am.csv", "/loss_pretrain_am.svg"})
    CHECK(fs::is_regular_file(b + p));
  const auto rows = read_csv(b + "/log_pretrain_am.csv");
  REQUIRE(rows.size() == 6);
  CHECK(rows.back()[1] < 0.5 * rows.front()[1]);  // training MSE
  CHECK(rows.back()[2] < rows.front()[2]);        // validation MSE (held-out programs)
  const auto meta = lcm::read_safetensors(b + "/weights/best_autoencoder_am.safetensors").metadata;
  CHECK(meta.at("lcm.autoencoder_kind") == "access_matrix");
  CHECK(lcm::test::contains(meta.at("lcm.autoencoder"), "\"hidden\":20"));
  CHECK(lcm::test::contains(slurp(b + "/loss_pretrain_am.svg"), "validation MSE"));
  // the cache is reused on a second run
  const RunResult again = run_tool(
      f.dir, "lcm-pretrain",
      "pretrain.kind=access_matrix pretrain.files=" + mini +
          " pretrain.epochs=1 training.threads=1 experiment.name=am2 experiment.base_path=" + b);
  CHECK(again.code == 0);
  CHECK(lcm::test::contains(again.err, "(from cache)"));
}

TEST_CASE("lcm-pretrain comp_vector: the reconstruction loss falls on mini") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  const RunResult r =
      run_tool(f.dir, "lcm-pretrain",
               "pretrain.kind=comp_vector pretrain.files=[" + mini +
                   "] pretrain.epochs=3 pretrain.max_samples=256 pretrain.lr=0.001 "
                   "pretrain.batch_size=64 pretrain.valid_fraction=0.05 training.threads=1 "
                   "experiment.name=cv experiment.base_path=" +
                   f.dir + "/cv -q");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto rows = read_csv(f.dir + "/cv/log_pretrain_cv.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows.back()[2] < rows.front()[2]);  // validation MSE falls
  CHECK(rows.back()[1] < rows.front()[1]);
  CHECK(lcm::read_safetensors(f.dir + "/cv/weights/best_autoencoder_cv.safetensors")
            .metadata.at("lcm.autoencoder_kind") == "comp_vector");
}

TEST_CASE("lcm-pretrain objectives masked and contrastive: losses fall, named in logs and files") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  for (const std::string obj : {"masked", "contrastive"}) {
    const RunResult r = run_tool(
        f.dir, "lcm-pretrain",
        "pretrain.kind=comp_vector pretrain.objective=" + obj + " pretrain.files=[" + mini +
            "] pretrain.epochs=3 pretrain.max_samples=256 pretrain.lr=0.001 "
            "pretrain.batch_size=64 pretrain.valid_fraction=0.05 training.threads=1 "
            "experiment.name=" +
            obj + " experiment.base_path=" + f.dir + "/" + obj);
    INFO(obj << "\n" << r.out << r.err);
    REQUIRE(r.code == 0);
    const std::string b = f.dir + "/" + obj;
    const std::string label = obj == "masked" ? "masked_MSE" : "InfoNCE";
    CHECK(lcm::test::contains(r.out, "train_" + label));
    CHECK(lcm::test::contains(r.out, "best validation " + label));
    const auto rows = read_csv(b + "/log_pretrain_" + obj + ".csv");
    REQUIRE(rows.size() == 3);
    CHECK(rows.back()[1] < rows.front()[1]);  // training loss falls
    CHECK(rows.back()[2] < rows.front()[2]);  // validation loss (same masks every epoch) falls
    CHECK(slurp(b + "/log_pretrain_" + obj + ".csv").rfind("epoch,train_loss,val_loss,", 0) == 0);
    CHECK(lcm::test::contains(slurp(b + "/log_pretrain_" + obj + ".jsonl"),
                              "\"objective\":\"" + obj + "\""));
    const auto meta =
        lcm::read_safetensors(b + "/weights/best_autoencoder_" + obj + ".safetensors").metadata;
    CHECK(meta.at("lcm.pretrain_objective") == obj);
    CHECK(meta.count("lcm.val_loss") == 1);
    CHECK(meta.count("lcm.val_mse") == 0);  // not a reconstruction MSE
    // the encoder it wrote serves lcm-train as model.encoder
    const RunResult t =
        run_tool(f.dir, "lcm-train",
                 f.train_args + " model.encoder=comp_vector model.encoder_weights=" + b +
                     "/weights/best_autoencoder_" + obj + ".safetensors training.max_epochs=1 " +
                     "experiment.name=ft_" + obj + " experiment.base_path=" + b);
    INFO(t.out << t.err);
    CHECK(t.code == 0);
  }
  // the reconstruction objective keeps its MSE names
  CHECK(slurp(f.dir + "/am/log_pretrain_am.csv").rfind("epoch,train_mse,val_mse,", 0) == 0);
  // out-of-range settings are clear errors before any data is read
  for (const std::string bad : {"pretrain.mask_rate=1", "pretrain.mask_rate=0",
                                "pretrain.temperature=0", "pretrain.objective=denoise"}) {
    const RunResult e = run_tool(
        f.dir, "lcm-pretrain",
        "pretrain.files=[" + mini + "] " + bad + " experiment.base_path=" + f.dir + "/bad -q");
    INFO(bad << ": " << e.err);
    CHECK(e.code != 0);
    CHECK(lcm::test::contains(e.err, bad.substr(0, bad.find('='))));
  }
}

TEST_CASE("lcm-train with a pre-trained encoder: frozen, then fine-tuned; checkpoints carry it") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  const std::string ae = f.encoder();
  const std::string run = f.dir + "/ft";
  const std::string args =
      f.train_args + " model.encoder=access_matrix model.encoder_weights=" + ae +
      " training.fine_tune_epoch=1 training.fine_tune_lr=0.001 experiment.base_path=" + run;
  RunResult r = run_tool(f.dir, "lcm-train", args + " training.max_epochs=1");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto pre = encoder_tensors(ae);
  REQUIRE(pre.size() == 16);  // 2 layers × 2 directions × 4 tensors
  const std::string last = run + "/weights/last_model_lcm.safetensors";
  CHECK(encoder_tensors(last) == pre);  // epoch 1 < fine_tune_epoch: frozen, unchanged
  r = run_tool(f.dir, "lcm-train", args + " training.max_epochs=3 --resume");
  REQUIRE(r.code == 0);
  const auto tuned = encoder_tensors(last);
  REQUIRE(tuned.size() == pre.size());
  for (const auto& [name, v] : pre) {
    INFO(name);
    CHECK(tuned.at(name) != v);  // fine-tuned from epoch index 1
  }
  // lcm-eval and lcm-predict load the encoder from the checkpoint alone (no model.encoder flag)
  const RunResult ev = run_tool(
      f.dir, "lcm-eval",
      "data.valid_file=" + f.dir + "/valid.jsonl training.threads=1 experiment.base_path=" + run +
          " eval.weights_path=" + run + "/weights/best_model_lcm.safetensors");
  INFO(ev.out << ev.err);
  CHECK(ev.code == 0);
  const RunResult pr = run_tool(f.dir, "lcm-predict",
                                "data.valid_file=" + f.dir +
                                    "/valid.jsonl training.threads=1 eval.weights_path=" + last +
                                    " --out " + f.dir + "/pred.csv");
  CHECK(pr.code == 0);
  CHECK(fs::is_regular_file(f.dir + "/pred.csv"));
}

TEST_CASE("lcm-train with an encoder does not stop early before fine-tuning") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  const std::string ae = f.encoder();
  const std::string run = f.dir + "/patience";
  // patience 1 would stop a plain run at its first epoch without improvement; the frozen epochs
  // 1-4 must not count, so the run reaches fine-tuning (epoch index 4) whatever the scores do
  const std::string args = f.train_args +
                           " model.encoder=access_matrix model.encoder_weights=" + ae +
                           " training.fine_tune_epoch=4 training.early_stop_patience=1 "
                           "training.select_metric=spearman experiment.base_path=" +
                           run;
  RunResult r = run_tool(f.dir, "lcm-train", args + " training.max_epochs=7");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto rows = read_csv(run + "/log_lcm.csv");
  CHECK(rows.size() >= 5);  // at least one fine-tuning epoch ran
  CHECK(rows.size() <= 7);
  CHECK((rows.size() == 7 || lcm::test::contains(r.out + r.err, "early stop after epoch")));
  // --resume replays the history with the same rule: a run stopped early stays stopped, one
  // that was not goes on
  r = run_tool(f.dir, "lcm-train", args + " training.max_epochs=8 --resume");  // a key once
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(read_csv(run + "/log_lcm.csv").size() == (rows.size() == 7 ? 8u : rows.size()));
}

TEST_CASE("lcm-train / lcm-pretrain: wrong encoder weights and bad options are clear errors") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  const std::string ae = f.encoder();
  const std::string base =
      f.train_args +
      " training.max_epochs=1 data.schedule_check=off experiment.base_path=" + f.dir + "/bad";
  // kind mismatch
  RunResult r =
      run_tool(f.dir, "lcm-train", base + " model.encoder=comp_vector model.encoder_weights=" + ae);
  CHECK(r.code == 1);
  CHECK(lcm::test::contains(
      r.err, "holds an autoencoder of kind access_matrix, but model.encoder=comp_vector"));
  // missing weights
  // input scaling with an encoder: the encoder's columns stay raw (it reads them untransformed),
  // the first 207 columns and the loop vectors are scaled
  std::string scaled_base = base;  // each key once: the fixture's model.input_scaling=none out
  scaled_base.replace(scaled_base.find("model.input_scaling=none"),
                      std::string("model.input_scaling=none").size(),
                      "model.input_scaling=log_standardize");
  r = run_tool(f.dir, "lcm-train",
               scaled_base + " model.encoder=access_matrix model.encoder_weights=" + ae +
                   " experiment.name=scaled_encoder");
  CHECK_MESSAGE(r.code == 0, r.err);
  {
    const auto m =
        lcm::read_safetensors(f.dir + "/bad/weights/best_model_scaled_encoder.safetensors")
            .metadata;
    const lcm::model::InputScaling sc =
        lcm::model::InputScaling::from_json(m.at("lcm.input_scaling"));
    CHECK(sc.mode == "log_standardize");
    CHECK(sc.comp_scaled_columns == 207);
    CHECK(sc.comp_mean[300] == 0.0);
    CHECK(sc.comp_std[300] == 1.0);
    CHECK(sc.apply_comp(12345.0f, 300) == 12345.0f);  // an access-matrix column: raw
    CHECK(sc.apply_comp(12345.0f, 0) != 12345.0f);
  }
  r = run_tool(f.dir, "lcm-train", base + " model.encoder=access_matrix");
  CHECK(r.code == 2);
  CHECK(lcm::test::contains(r.err, "model.encoder=access_matrix needs model.encoder_weights="));
  // wrong shape: one tensor of another width
  lcm::SafeTensorsFile sf = lcm::read_safetensors(ae);
  for (auto& [name, t] : sf.tensors)
    if (name == "encoder.weight_ih_l0") {
      std::vector<float> v(80 * 40, 0.f);
      t = lcm::SafeTensor::from_f32({80, 40}, v.data());
    }
  lcm::write_safetensors(f.dir + "/bad_shape.safetensors", sf);
  r = run_tool(f.dir, "lcm-train",
               base + " model.encoder=access_matrix model.encoder_weights=" + f.dir +
                   "/bad_shape.safetensors");
  CHECK(r.code == 1);
  CHECK(lcm::test::contains(r.err,
                            "encoder.weight_ih_l0: shape [80, 40] in file, [80, 44] expected"));
  // one error line besides the two files' skip summaries (stderr, printed after preparing them)
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 3);
  CHECK(lcm::test::contains(r.err, "lcm-train: " + f.dir + "/valid.jsonl: "));
  // not an autoencoder at all
  r = run_tool(f.dir, "lcm-train",
               base + " model.encoder=access_matrix model.encoder_weights=" + f.dir +
                   "/am/weights/../log_pretrain_am.csv");
  CHECK(r.code == 1);
  // lcm-pretrain: no files, unknown kind, missing file
  r = run_tool(f.dir, "lcm-pretrain", "experiment.base_path=" + f.dir + "/bad");
  CHECK(r.code == 2);
  CHECK(lcm::test::contains(r.err, "pretrain.files is empty"));
  r = run_tool(f.dir, "lcm-pretrain", "pretrain.kind=tags pretrain.files=" + f.mini);
  CHECK(r.code == 2);
  CHECK(lcm::test::contains(r.err, "comp_vector"));
  r = run_tool(f.dir, "lcm-pretrain",
               "pretrain.files=[" + f.dir + "/nope.jsonl] experiment.base_path=" + f.dir + "/bad");
  CHECK(r.code == 1);
  CHECK(lcm::test::contains(r.err, "file not found"));
}

TEST_CASE("lcm-train accepts the published access-matrix autoencoder as encoder") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  LCM_REQUIRE_SHARED(pub, "pretrained/access_matrix_autoencoder_published.safetensors");
  const Fixture& f = fixture(mini);
  const RunResult r = run_tool(
      f.dir, "lcm-train",
      f.train_args + " training.max_epochs=1 model.encoder=access_matrix model.encoder_weights=" +
          pub + " experiment.base_path=" + f.dir + "/pub");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(encoder_tensors(f.dir + "/pub/weights/last_model_lcm.safetensors") == encoder_tensors(pub));
}

TEST_CASE(
    "lcm-pretrain: a program repeated in a later file of pretrain.files is a counted, named "
    "duplicate_program skip") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  // valid.jsonl (12 programs) plus the first 3 programs of train.jsonl (48): 3 repeats across files
  {
    std::ofstream o(f.dir + "/valid_plus3.jsonl");
    for (size_t i = 48; i < 60; ++i) o << f.lines[i] << "\n";
    for (size_t i = 0; i < 3; ++i) o << f.lines[i] << "\n";
  }
  const RunResult r =
      run_tool(f.dir, "lcm-pretrain",
               "pretrain.kind=access_matrix pretrain.files=[" + f.dir + "/train.jsonl," + f.dir +
                   "/valid_plus3.jsonl] pretrain.epochs=1 training.threads=1 experiment.name=rep "
                   "experiment.base_path=" +
                   f.dir + "/rep -q");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(lcm::test::contains(r.err, "program/duplicate_program 3"));
  CHECK(lcm::test::contains(
      r.err, "skip program (duplicate_program): " + f.dir + "/valid_plus3.jsonl program "));
  CHECK(lcm::test::contains(r.err, "already read in " + f.dir + "/train.jsonl"));
  CHECK(lcm::test::contains(r.out, " 60 programs ("));  // 48 + 15 - 3: each program once
}

TEST_CASE(
    "lcm-pretrain: each file's line counts the programs kept, with its skips by reason (also from "
    "the cache)") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const Fixture& f = fixture(mini);
  // a: programs 0..19, then 0..14 again (15 repeats in the file); b: programs 10..39 (10 already in
  // a)
  const std::string a = f.dir + "/rep_a.jsonl", b = f.dir + "/rep_b.jsonl";
  {
    std::ofstream oa(a), ob(b);
    for (size_t i = 0; i < 20; ++i) oa << f.lines[i] << "\n";
    for (size_t i = 0; i < 15; ++i) oa << f.lines[i] << "\n";
    for (size_t i = 10; i < 40; ++i) ob << f.lines[i] << "\n";
  }
  const std::string args =
      "pretrain.kind=access_matrix pretrain.files=[" + a + "," + b +
      "] pretrain.epochs=1 training.threads=1 data.schedule_check=off experiment.name=rep2 "
      "experiment.base_path=" +
      f.dir + "/rep2 -q";
  for (const char* pass : {"prepared", "from the cache"}) {
    CAPTURE(pass);
    // the second run replaces the first (the run rule, docs/run-state.md); the cache stays
    const RunResult r =
        run_tool(f.dir, "lcm-pretrain",
                 args + (std::string(pass) == "prepared" ? "" : " experiment.overwrite=true"));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(lcm::test::contains(r.err, "lcm-pretrain: " + a + ": 20 programs, "));
    CHECK(lcm::test::contains(
        r.err, "lcm-pretrain: " + a +
                   ": 35 programs read, 20 kept; skipped: program/duplicate_program 15\n"));
    CHECK(lcm::test::contains(
        r.err, "lcm-pretrain: " + b + ": 20 programs, "));  // not 30: 10 are repeats of a
    CHECK(lcm::test::contains(
        r.err, "lcm-pretrain: " + b +
                   ": 30 programs read, 20 kept; skipped: program/duplicate_program 10\n"));
    CHECK(lcm::test::contains(r.out, " 40 programs ("));
  }
  // From the cache only the 10 repeats across files are printed: all of them, and no "further
  // skips" line since none is left unprinted.
  const RunResult again = run_tool(f.dir, "lcm-pretrain", args + " experiment.overwrite=true");
  INFO(again.err);
  CHECK(std::count(again.err.begin(), again.err.end(), '\n') ==
        10 + 1 + 4 + 2);  // 10 skips, across-files line, 2 x 2 file lines, memory, data ready
  CHECK(lcm::test::contains(again.out + again.err, "/rep2/previous/"));  // the replaced run
  CHECK_FALSE(lcm::test::contains(again.err, "further skips"));
}

namespace {

/// Every tensor of a safetensors file as floats.
std::map<std::string, std::vector<float>> all_tensors(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : lcm::read_safetensors(path).tensors) out[name] = t.to_float();
  return out;
}

/// The largest |a - b| over the tensors of two checkpoints of one model (REQUIREs equal names and
/// sizes).
double max_abs_difference(const std::string& a, const std::string& b) {
  const auto ta = all_tensors(a), tb = all_tensors(b);
  REQUIRE(ta.size() == tb.size());
  double m = 0;
  for (const auto& [name, v] : ta) {
    INFO(name);
    REQUIRE(tb.count(name) == 1);
    const auto& w = tb.at(name);
    REQUIRE(w.size() == v.size());
    for (size_t i = 0; i < v.size(); ++i) m = std::max(m, std::fabs(double(v[i]) - double(w[i])));
  }
  return m;
}

std::string metadata_of(const std::string& path, const std::string& key) {
  const auto meta = lcm::read_safetensors(path).metadata;
  const auto it = meta.find(key);
  return it == meta.end() ? "" : it->second;
}

}  // namespace

TEST_CASE("lcm-train training.init_weights: the run starts from a checkpoint's weights") {
  using lcm::test::committed_data;
  using lcm::test::contains;
  using lcm::test::layered::run_tool;
  const std::string dir = lcm::test::temp_dir("init_weights");
  const std::string train = committed_data("synth_train.jsonl.gz");
  const std::string valid = committed_data("synth_valid.jsonl.gz");
  const std::string common = "data.train_file=" + train + " data.valid_file=" + valid +
                             " data.max_programs=48 training.threads=1 data.nb_workers=1 "
                             "training.calibrate=false training.max_epochs=1 data.batch_size=32 "
                             "model.comp_embed_layer_sizes=32,16 model.drops=0.05,0.05 "
                             "model.lstm_embedding_size=8 model.expr_embed_size=8 -q";
  // A: random initialisation, with a feature setting other than the default
  RunResult r = run_tool(
      dir, "lcm-train",
      common + " training.seed=1 data.shift_match=exact experiment.base_path=" + dir + "/a");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string a = dir + "/a/weights/best_model_lcm.safetensors";
  // B starts from A and trains on other programs (A's validation file) with a learning rate that
  // moves no weight of A's magnitude: its checkpoint holds A's weights. C is B without
  // init_weights (its own random initialisation, seed 2).
  const std::string b_args = common + " data.train_file=" + valid +
                             " training.seed=2 training.lr=1e-30 training.weight_decay=0";
  r = run_tool(dir, "lcm-train",
               b_args + " training.init_weights=" + a + " experiment.base_path=" + dir + "/b");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "note: data.shift_match=exact as " + a + " was trained with"));
  const std::string b = dir + "/b/weights/best_model_lcm.safetensors";
  CHECK(max_abs_difference(a, b) <= 1e-20);
  CHECK(contains(metadata_of(b, "lcm.feature_config"), "\"data.shift_match\":\"exact\""));
  // training.init_scaling=checkpoint (the default): A's statistics, not a fit on B's programs
  const std::string scaling_a = metadata_of(a, "lcm.input_scaling");
  REQUIRE(!scaling_a.empty());
  CHECK(metadata_of(b, "lcm.input_scaling") == scaling_a);
  r = run_tool(dir, "lcm-train", b_args + " experiment.base_path=" + dir + "/c");
  REQUIRE(r.code == 0);
  const std::string c = dir + "/c/weights/best_model_lcm.safetensors";
  CHECK(max_abs_difference(a, c) > 1e-3);  // the comparison can fail: C is not A
  r = run_tool(dir, "lcm-train",
               b_args + " training.init_weights=" + a +
                   " training.init_scaling=refit experiment.base_path=" + dir + "/d");
  REQUIRE(r.code == 0);
  const std::string d = dir + "/d/weights/best_model_lcm.safetensors";
  CHECK(max_abs_difference(a, d) <= 1e-20);
  CHECK(metadata_of(d, "lcm.input_scaling") != scaling_a);  // refitted on B's programs
  CHECK(metadata_of(d, "lcm.input_scaling") == metadata_of(c, "lcm.input_scaling"));

  {  // refused with one line each: a conflicting feature setting, other sizes, other files
    const std::string base = " experiment.base_path=" + dir + "/e";
    r = run_tool(dir, "lcm-train",
                 b_args + " data.shift_match=prefix training.init_weights=" + a + base);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "training.init_weights: data.shift_match=prefix"));
    r = run_tool(dir, "lcm-train",
                 b_args + " model.lstm_embedding_size=50 training.init_weights=" + a + base);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "training.init_weights: " + a + " holds the model"));
    CHECK(contains(r.err, "\"lstm_embedding_size\":50"));
    r = run_tool(dir, "lcm-train", b_args + " training.init_weights=" + dir + "/none" + base);
    CHECK(r.code != 0);
    CHECK(contains(r.err, "training.init_weights=" + dir + "/none: not a file"));
    std::ofstream(dir + "/garbage.safetensors") << "not a safetensors file";
    r = run_tool(dir, "lcm-train",
                 b_args + " training.init_weights=" + dir + "/garbage.safetensors" + base);
    CHECK(r.code == 1);
    CHECK(contains(r.err, "training.init_weights=" + dir + "/garbage.safetensors: safetensors"));
    r = run_tool(dir, "lcm-train",
                 b_args + " training.init_weights=" + dir +
                     "/a/weights/last_optimizer_lcm.safetensors" + base);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "training.init_weights: "));
    CHECK(contains(r.err, "optimizer-state"));
    CHECK(!fs::exists(dir + "/e/weights"));  // refused before training
  }
}

TEST_CASE("configs/pretrain.yaml then configs/finetune.yaml: the recipe chains end to end") {
  using lcm::test::contains;
  using lcm::test::source_path;
  const std::string dir = lcm::test::temp_dir("recipe_configs");
  for (const auto& [name, seed] : {std::pair<std::string, int>{"train", 101}, {"valid", 102}}) {
    const RunResult s =
        run_tool(dir, "lcm-synth",
                 "--programs 24 --schedules-per-program 8 --structures 0 --seed " +
                     std::to_string(seed) + " --threads 1 --out " + dir + "/" + name + ".jsonl.gz");
    REQUIRE(s.code == 0);
  }
  // the recipe's files with a small model and one epoch; every other key as the configs say
  const std::string small =
      " training.threads=1 data.nb_workers=1 training.max_epochs=1 data.batch_size=32 "
      "model.comp_embed_layer_sizes=32,16 model.drops=0.05,0.05 model.lstm_embedding_size=8 "
      "model.expr_embed_size=8 -q";
  RunResult r = run_tool(dir, "lcm-train",
                         "--config " + source_path("configs/pretrain.yaml") +
                             " experiment.base_path=" + dir + "/synth data.train_file=" + dir +
                             "/train.jsonl.gz data.valid_file=" + dir + "/valid.jsonl.gz" + small);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string pre = dir + "/synth/weights/best_model_synth_pretrain.safetensors";
  REQUIRE(fs::is_regular_file(pre));
  CHECK(metadata_of(pre, "lcm.calibration").empty());  // calibrate: false
  r = run_tool(dir, "lcm-train",
               "--config " + source_path("configs/finetune.yaml") + " training.init_weights=" +
                   pre + " experiment.base_path=" + dir + "/real data.train_file=" + dir +
                   "/valid.jsonl.gz data.valid_file=" + dir + "/train.jsonl.gz" + small);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string ft = dir + "/real/weights/best_model_finetune.safetensors";
  REQUIRE(fs::is_regular_file(ft));
  // started from the pre-trained model: its input scaling, not one fitted on the new programs
  CHECK(metadata_of(ft, "lcm.input_scaling") == metadata_of(pre, "lcm.input_scaling"));
  // the configs name the recipe's default paths, which a fresh checkout does not hold
  r = run_tool(dir, "lcm-train",
               "--config " + source_path("configs/finetune.yaml") + " experiment.base_path=" + dir +
                   "/none" + small);
  CHECK(r.code != 0);
  CHECK(contains(r.err,
                 "training.init_weights=runs/synth/weights/"
                 "best_model_synth_pretrain.safetensors: not a file"));
}

namespace {

/// A safetensors file without the metadata that names the run (lcm.run_id, a fresh id every
/// run, and lcm.experiment): two checkpoints of the same training compare equal when their
/// tensors' bytes and every other metadata value are equal.
lcm::SafeTensorsFile without_run_id(const std::string& path) {
  lcm::SafeTensorsFile f = lcm::read_safetensors(path);
  f.metadata.erase("lcm.run_id");
  f.metadata.erase("lcm.experiment");
  return f;
}

/// Asserts that two checkpoints hold the same tensors, bit for bit, and the same metadata
/// (lcm.run_id and lcm.experiment aside).
void check_same_checkpoint(const std::string& a, const std::string& b) {
  INFO(a << " vs " << b);
  const lcm::SafeTensorsFile x = without_run_id(a), y = without_run_id(b);
  CHECK(x.metadata == y.metadata);
  REQUIRE(x.tensors.size() == y.tensors.size());
  REQUIRE(!x.tensors.empty());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    CHECK(x.tensors[i].first == y.tensors[i].first);
    CHECK(x.tensors[i].second.shape == y.tensors[i].second.shape);
    CHECK(x.tensors[i].second.bytes == y.tensors[i].second.bytes);
  }
}

/// The numbers of lcm-pretrain's "host memory:" line on stderr: compact MiB, sample-table MiB,
/// programs whose rows are held and all programs (comp_vector only; -1 when absent).
struct MemoryLine {
  double compact_mib = -1, tables_mib = -1, held_mib = -1;
  long long held = -1, programs = -1;
  bool over_budget = false;
};
MemoryLine memory_line(const std::string& err) {
  MemoryLine m;
  const size_t at = err.find("lcm-pretrain: host memory: ");
  if (at == std::string::npos) return m;
  const std::string line = err.substr(at, err.find('\n', at) - at);
  std::sscanf(line.c_str(), "lcm-pretrain: host memory: %lf MiB of compact program data",
              &m.compact_mib);
  const size_t tables = line.find(" MiB of sample tables");
  if (tables != std::string::npos)
    m.tables_mib = std::atof(line.c_str() + line.rfind(' ', tables - 1) + 1);
  const size_t rows = line.find("the schedule rows of ");
  if (rows != std::string::npos) {
    std::sscanf(line.c_str() + rows, "the schedule rows of %lld of %lld programs", &m.held,
                &m.programs);
    const size_t mib = line.find("schedules, ", rows);
    if (mib != std::string::npos)
      std::sscanf(line.c_str() + mib, "schedules, %lf MiB", &m.held_mib);
  }
  m.over_budget = line.find("exceed the budget") != std::string::npos;
  return m;
}

}  // namespace

TEST_CASE(
    "lcm-pretrain: training.host_memory_budget decides which rows are held, never the results "
    "(the same checkpoints and losses with every row held, none, or some)") {
  const std::string dir = lcm::test::temp_dir("pretrain_budget");
  // b repeats a's 24 programs (same seed) and adds 8: the repeats are skipped and freed
  for (const auto& [name, n] : {std::pair<std::string, int>{"a", 24}, {"b", 32}}) {
    const RunResult s = run_tool(dir, "lcm-synth",
                                 "--programs " + std::to_string(n) +
                                     " --schedules-per-program 32 --structures 0 --seed 7 "
                                     "--threads 1 --out " +
                                     dir + "/" + name + ".jsonl.gz");
    REQUIRE(s.code == 0);
  }
  for (const std::string kind : {"comp_vector", "access_matrix"}) {
    INFO(kind);
    const std::string args = "pretrain.kind=" + kind + " pretrain.files=[" + dir + "/a.jsonl.gz," +
                             dir +
                             "/b.jsonl.gz] pretrain.epochs=2 pretrain.batch_size=16 "
                             "pretrain.max_samples=160 pretrain.lr=0.001 training.threads=1 "
                             "data.nb_workers=1 -q";
    const auto run = [&](const std::string& tag, const std::string& budget) {
      const RunResult r =
          run_tool(dir, "lcm-pretrain",
                   args + " experiment.name=ae training.host_memory_budget=" + budget +
                       " experiment.base_path=" + dir + "/" + kind + "_" + tag);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      CHECK(lcm::test::contains(r.out, " 32 programs ("));  // 24 + 32 - 24 repeats
      return r;
    };
    const RunResult all = run("all", "1GiB");
    const MemoryLine m_all = memory_line(all.err);
    CHECK(m_all.compact_mib > 0);
    CHECK(m_all.tables_mib >= 0);
    CHECK_FALSE(m_all.over_budget);
    CHECK(lcm::test::contains(all.err, "lcm-pretrain: data ready in "));
    CHECK_FALSE(lcm::test::contains(all.err, "held deflated"));
    // a budget of 0: every program's static columns deflated, every row rebuilt at batch time;
    // what is left is held whole anyway
    const RunResult none = run("none", "0");
    const MemoryLine m_none = memory_line(none.err);
    CHECK(m_none.over_budget);
    CHECK(m_none.compact_mib < m_all.compact_mib / 2);
    CHECK(lcm::test::contains(none.err,
                              "the static columns and expressions of 32 programs are "
                              "held deflated"));
    // half the compact data: some programs' static columns deflated, and then it fits
    const RunResult half =
        run("half", std::to_string(int64_t(m_all.compact_mib / 2 * 1048576)) + "B");
    const MemoryLine m_half = memory_line(half.err);
    CHECK_FALSE(m_half.over_budget);
    CHECK(m_half.compact_mib <= m_all.compact_mib / 2 + 0.1);
    CHECK(lcm::test::contains(half.err, "held deflated"));
    CHECK_FALSE(lcm::test::contains(half.err, "of 32 programs are held deflated"));
    std::vector<std::string> runs = {"all", "none", "half"};
    if (kind == "comp_vector") {
      CHECK(m_all.held == 32);
      CHECK(m_all.programs == 32);
      CHECK(m_none.held == 0);
      CHECK(m_none.programs == 32);
      CHECK(m_half.held < 32);
      // the compact data, the tables and half of the rows: some programs held, some not
      REQUIRE(m_all.held_mib > 0.5);
      const double mid_mib = m_all.compact_mib + m_all.tables_mib + 0.1 + m_all.held_mib / 2;
      const RunResult some = run("some", std::to_string(int64_t(mid_mib * 1048576)) + "B");
      const MemoryLine m_some = memory_line(some.err);
      CHECK_FALSE(m_some.over_budget);
      CHECK(m_some.held > 0);
      CHECK(m_some.held < 32);
      CHECK(m_some.held_mib <= m_all.held_mib / 2 + 0.2);
      runs.push_back("some");
    } else {
      CHECK(lcm::test::contains(all.err, "access_matrix samples read no schedule rows"));
    }
    // the same run again reads the cache written by the first, program by program
    const RunResult again = run_tool(dir, "lcm-pretrain",
                                     args +
                                         " training.host_memory_budget=0 experiment.name=again "
                                         "experiment.base_path=" +
                                         dir + "/" + kind + "_none");
    INFO(again.out << again.err);
    REQUIRE(again.code == 0);
    CHECK(lcm::test::contains(again.err, "(from cache)"));
    CHECK(memory_line(again.err).compact_mib == m_none.compact_mib);
    check_same_checkpoint(dir + "/" + kind + "_all/weights/last_autoencoder_ae.safetensors",
                          dir + "/" + kind + "_none/weights/last_autoencoder_again.safetensors");
    // without a cache the programs are read in memory and deflated afterwards: the same results
    const RunResult nocache =
        run_tool(dir, "lcm-pretrain",
                 args +
                     " data.cache=false training.host_memory_budget=0 experiment.name=ae "
                     "experiment.base_path=" +
                     dir + "/" + kind + "_nocache");
    INFO(nocache.out << nocache.err);
    REQUIRE(nocache.code == 0);
    CHECK(memory_line(nocache.err).compact_mib < m_all.compact_mib / 2);  // all deflated
    CHECK(lcm::test::contains(nocache.err, "of 32 programs are held deflated"));
    runs.push_back("nocache");
    const auto log_all = read_csv(dir + "/" + kind + "_all/log_pretrain_ae.csv");
    REQUIRE(log_all.size() == 2);
    for (const std::string& tag : runs) {
      const std::string w = dir + "/" + kind + "_" + tag + "/weights/";
      for (const char* f : {"best_autoencoder_ae.safetensors", "last_autoencoder_ae.safetensors"})
        check_same_checkpoint(dir + "/" + kind + "_all/weights/" + f, w + f);
      const auto log = read_csv(dir + "/" + kind + "_" + tag + "/log_pretrain_ae.csv");
      REQUIRE(log.size() == log_all.size());
      for (size_t e = 0; e < log.size(); ++e) {
        CHECK(log[e][1] == log_all[e][1]);  // training MSE
        CHECK(log[e][2] == log_all[e][2]);  // validation MSE
      }
    }
  }
}
