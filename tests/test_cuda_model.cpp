// End to end on a GPU: AdamW training steps of the cost model on real batches of
// mini.jsonl.gz (MAPE; the default log_huber+pairwise and log_mse+pairwise with clipping; with an
// encoder) and lcm-train /
// lcm-pretrain runs give the same losses on the CPU and cuda:0. Without a CUDA device: skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "data/prepare.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "model/cost_model.hpp"
#include "support/cuda_support.hpp"
#include "support/model_support.hpp"
#include "support/test_support.hpp"
#include "train/losses.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

using namespace lcm;
using lcm::model::CostModel;
using lcm::model::ModelConfig;

using lcm::test::prepare_mini;

namespace {

/// What a run of train_steps does besides the AdamW steps of the MAPE loss.
struct StepOptions {
  std::string loss = "mape";  // a training.loss of lcm::train::training_loss (batch weight 1)
  double clip = 0;       // clip_grad_norm max norm over the main optimizer's parameters; 0 = off
  int frozen_steps = 0;  // with an encoder: steps before it is fine-tuned (own Adam, lr 5e-4)
};

/// Losses of `steps` AdamW steps (training mode, dropout from Rng(7)) over the given batches, on
/// the CPU or cuda:0, the gradient norms before clipping, then the eval-mode predictions of the
/// first batch. With an encoder: its values (host) after the frozen steps.
struct TrainRun {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<float> predictions;
  std::vector<std::vector<float>> encoder_after_frozen;
};

std::vector<std::vector<float>> encoder_values(CostModel<float>& m, bool cuda) {
  if (cuda) parameters_to_host(m.params());
  std::vector<std::vector<float>> v;
  for (Parameter<float>* p : m.encoder_parameters()) v.push_back(p->value);
  return v;
}

TrainRun train_steps(CostModel<float>& m, const data::Dataset& ds,
                     const std::vector<int64_t>& batches, int steps, bool cuda,
                     const StepOptions& o = {}) {
  if (cuda) parameters_to_device(m.params(), 0);
  const bool has_encoder = m.config().encoder.kind != model::EncoderKind::None;
  AdamOptions ao;
  ao.lr = 1e-3;
  ao.weight_decay = 0.015;
  const std::vector<Parameter<float>*> params =
      has_encoder ? m.non_encoder_parameters() : parameter_pointers(m.params());
  Adam<float> opt(params, ao, true);
  std::unique_ptr<Adam<float>> enc_opt;
  if (has_encoder) {
    AdamOptions eo = ao;
    eo.lr = 5e-4;
    enc_opt = std::make_unique<Adam<float>>(m.encoder_parameters(), eo, true);
  }
  Tape<float> tape;
  if (cuda) tape.set_device(Device::CUDA, 0);
  Rng rng(7);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    const bool fine_tuning = has_encoder && s >= o.frozen_steps;
    m.set_encoder_frozen(!fine_tuning);
    const int64_t b = batches[size_t(s) % batches.size()];
    const data::BatchTensors bt = ds.materialize(b);
    tape.clear();
    tape.set_training(true);
    tape.set_grad_enabled(true);
    const NodeId y = m.forward(tape, ds.trees(b), bt, rng);
    const config::Objective kind = config::parse_objective(o.loss);
    const NodeId loss = train::training_loss(tape, kind, y, bt, 1.0f, 1.0f);
    r.losses.push_back(to_host(tape.value(loss))[0]);
    tape.backward(loss);
    if (o.clip > 0) r.norms.push_back(clip_grad_norm(params, o.clip));
    opt.step();
    opt.zero_grad();
    if (fine_tuning) {
      enc_opt->step();
      enc_opt->zero_grad();
    }
    if (has_encoder && s + 1 == o.frozen_steps) r.encoder_after_frozen = encoder_values(m, cuda);
  }
  const data::BatchTensors bt = ds.materialize(batches[0]);
  tape.clear();
  tape.set_training(false);
  tape.set_grad_enabled(false);
  r.predictions = to_host(tape.value(m.forward(tape, ds.trees(batches[0]), bt, rng)));
  if (cuda) parameters_to_host(m.params());
  return r;
}

/// Every value of a and b within rel·max(1, |a|) (the CPU and CUDA sum in different orders).
void expect_all_close(const std::vector<float>& a, const std::vector<float>& b, float rel,
                      const char* what) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: cpu " << a[i] << " cuda " << b[i]);
    REQUIRE(std::isfinite(b[i]));
    CHECK(std::abs(a[i] - b[i]) <= rel * std::max(1.0f, std::abs(a[i])));
  }
}

/// A cost model small enough for quick runs (the emulated device included).
ModelConfig small_config(bool log_output) {
  ModelConfig c;
  c.comp_embed_layer_sizes = {48, 24};
  c.drops = {0.05, 0.05};
  c.lstm_embedding_size = 12;
  c.expr_embed_size = 10;
  c.log_output = log_output;
  return c;
}

/// Column `col` (0-based) of every data row of a CSV log.
std::vector<double> csv_column(const std::string& path, size_t col) {
  std::stringstream s(test::slurp(path));
  std::string line;
  std::vector<double> out;
  std::getline(s, line);  // header
  while (std::getline(s, line)) {
    std::stringstream ls(line);
    std::string cell;
    for (size_t k = 0; std::getline(ls, cell, ','); ++k)
      if (k == col) out.push_back(cell.empty() ? NAN : std::stod(cell));
  }
  return out;
}

/// mini.jsonl.gz prepared in batches of 32 (at least two) and the two batches the end-to-end
/// tests step over: the first and the middle one.
struct MiniSteps {
  explicit MiniSteps(const std::string& path) : ps(prepare_mini(path, 32)) {
    REQUIRE(ds.batches.size() >= 2);
  }
  const data::PreparedSplit ps;
  const data::Dataset& ds = ps.dataset;
  const std::vector<int64_t> batches{0, int64_t(ds.batches.size() / 2)};
};

/// The MiniSteps of the end-to-end tests, or null (the test then returns) after reporting the skip
/// when no CUDA device is usable (`what`: what the test runs on CUDA) or mini.jsonl.gz is absent.
std::unique_ptr<const MiniSteps> cuda_mini_steps(const std::string& what) {
  if (test::skipped_without_cuda(what)) return nullptr;
  const std::string rel = "looperset-sample/mini.jsonl.gz", path = test::shared_data(rel);
  if (path.empty()) {
    test::report_skip(test::shared_data_dir() + "/" + rel + " is absent");
    return nullptr;
  }
  return std::make_unique<const MiniSteps>(path);
}

}  // namespace

TEST_CASE(
    "cuda end to end: training losses equal the CPU's; GPU-trained weights predict the same on the "
    "CPU") {
  const auto m = cuda_mini_steps("cost-model training on CUDA");
  if (!m) return;
  CostModel<float> cpu(ModelConfig{}, 3), gpu(ModelConfig{}, 3);
  const TrainRun a = train_steps(cpu, m->ds, m->batches, 4, false);
  const TrainRun b = train_steps(gpu, m->ds, m->batches, 4, true);
  for (size_t s = 0; s < a.losses.size(); ++s) {
    INFO("step " << s << ": cpu " << a.losses[s] << " cuda " << b.losses[s]);
    REQUIRE(std::isfinite(b.losses[s]));
    CHECK(std::abs(a.losses[s] - b.losses[s]) <= 1e-3f * std::abs(a.losses[s]));
  }
  // The GPU-trained weights, saved and loaded on the CPU, predict what the GPU predicted.
  const std::string file = test::temp_dir("cuda_model") + "/gpu.safetensors";
  save_parameters(file, gpu.params());
  CostModel<float> loaded(ModelConfig{}, 99);
  load_parameters(file, loaded.params(), true);
  Tape<float> tape;
  tape.set_training(false);
  tape.set_grad_enabled(false);
  Rng rng(0);
  const data::BatchTensors bt = m->ds.materialize(m->batches[0]);
  const std::vector<float> p =
      to_host(tape.value(loaded.forward(tape, m->ds.trees(m->batches[0]), bt, rng)));
  REQUIRE(p.size() == b.predictions.size());
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(std::abs(p[i] - b.predictions[i]) <= 1e-4f * std::max(1.0f, std::abs(p[i])));
}

TEST_CASE(
    "cuda end to end: the default log_huber+pairwise, log_mse+pairwise and log_l1+pairwise losses "
    "with clipping equal the CPU's") {
  const auto m = cuda_mini_steps("ranking losses and clipping on CUDA");
  if (!m) return;
  for (const char* loss : {"log_huber+pairwise", "log_mse+pairwise", "log_l1+pairwise"}) {
    INFO(loss);
    StepOptions o;
    o.loss = loss;
    o.clip = 1.0;
    CostModel<float> cpu(small_config(true), 5), gpu(small_config(true), 5);
    const TrainRun a = train_steps(cpu, m->ds, m->batches, 4, false, o);
    const TrainRun b = train_steps(gpu, m->ds, m->batches, 4, true, o);
    expect_all_close(a.losses, b.losses, 1e-3f, "loss");
    REQUIRE(a.norms.size() == b.norms.size());
    bool clipped = false;
    for (size_t s = 0; s < a.norms.size(); ++s) {
      INFO("step " << s << ": norm cpu " << a.norms[s] << " cuda " << b.norms[s]);
      CHECK(std::abs(a.norms[s] - b.norms[s]) <= 1e-3 * a.norms[s]);
      clipped = clipped || a.norms[s] > o.clip;
    }
    CHECK(clipped);  // the clip did act (else this compares unclipped steps only)
    expect_all_close(a.predictions, b.predictions, 1e-3f, "eval prediction (ln speedup)");
  }
}

TEST_CASE("cuda end to end: a cost model with an encoder, frozen then fine-tuned, equals the CPU") {
  const auto m = cuda_mini_steps("cost model with an encoder on CUDA");
  if (!m) return;
  for (auto kind : {model::EncoderKind::CompVector, model::EncoderKind::AccessMatrix}) {
    INFO(model::encoder_kind_name(kind));
    ModelConfig mc = small_config(true);
    mc.encoder.kind = kind;
    mc.encoder.comp = {6, 6,  6,  6, 4, 8,
                       6, 16, 12, 3, 2};  // small §8.1 sizes (the decoder is unused)
    mc.encoder.access.hidden = 4;
    StepOptions o;
    o.loss = "log_mse+pairwise";
    o.clip = 1.0;
    o.frozen_steps = 2;
    CostModel<float> cpu(mc, 9), gpu(mc, 9);
    const auto initial = encoder_values(gpu, false);
    REQUIRE(!initial.empty());
    const TrainRun a = train_steps(cpu, m->ds, m->batches, 4, false, o);
    const TrainRun b = train_steps(gpu, m->ds, m->batches, 4, true, o);
    expect_all_close(a.losses, b.losses, 1e-3f, "loss");
    CHECK(b.encoder_after_frozen == initial);  // frozen on the device: not one bit changed
    const auto tuned = encoder_values(gpu, false);
    size_t changed = 0;
    for (size_t k = 0; k < tuned.size(); ++k) changed += tuned[k] != initial[k];
    CHECK(changed == tuned.size());  // fine-tuned on the device: every encoder tensor moved
    expect_all_close(a.predictions, b.predictions, 1e-3f, "eval prediction (ln speedup)");
  }
}

TEST_CASE(
    "cuda end to end: lcm-pretrain and lcm-train (defaults, with the pre-trained encoder) on "
    "cuda:0 equal cpu") {
  if (test::skipped_without_cuda("lcm-pretrain / lcm-train on training.device=cuda:0")) return;
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  const std::string dir = test::temp_dir("cuda_tools");
  // lcm-pretrain: two epochs of each autoencoder on both devices; the logged MSEs agree (the
  // comp_vector run without validation: its 1636-wide layers are slow on the emulated device)
  for (const char* kind : {"access_matrix", "comp_vector"}) {
    INFO(kind);
    const bool comp = std::string(kind) == "comp_vector";
    std::vector<std::vector<double>> mse;
    for (const char* device : {"cpu", "cuda:0"}) {
      const std::string base =
          dir + "/pre_" + kind + "_" + (std::string(device) == "cpu" ? "cpu" : "cuda");
      const test::RunResult r = test::run_tool(
          dir, "lcm-pretrain",
          std::string("pretrain.kind=") + kind + " pretrain.files=[" + mini +
              "] pretrain.epochs=2 pretrain.lr=0.001 " +
              (comp ? "pretrain.max_samples=64 pretrain.batch_size=32 pretrain.valid_fraction=0 "
                    : "pretrain.max_samples=192 pretrain.batch_size=64 "
                      "pretrain.valid_fraction=0.1 ") +
              "training.threads=1 training.device=" + device +
              " experiment.name=ae experiment.base_path=" + base + " -q");
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      CHECK(test::contains(r.out,
                           std::string(" autoencoder on ") + device + ","));  // ran where asked
      mse.push_back(csv_column(base + "/log_pretrain_ae.csv", 1));            // train_mse
      if (!comp) {
        const auto val = csv_column(base + "/log_pretrain_ae.csv", 2);  // val_mse
        mse.back().insert(mse.back().end(), val.begin(), val.end());
      }
    }
    REQUIRE(mse[0].size() == (comp ? 2u : 4u));
    REQUIRE(mse[1].size() == mse[0].size());
    for (size_t k = 0; k < mse[0].size(); ++k) {
      INFO("column value " << k << ": cpu " << mse[0][k] << " cuda " << mse[1][k]);
      CHECK(std::abs(mse[0][k] - mse[1][k]) <= 1e-3 * std::abs(mse[0][k]));
    }
  }
  // lcm-train with the defaults (log_huber+pairwise, clip_grad_norm 1) and the GPU-pre-trained
  // access-matrix encoder, fine-tuned from the second epoch: the logged losses agree
  const std::string ae = dir + "/pre_access_matrix_cuda/weights/best_autoencoder_ae.safetensors";
  const std::string common =
      "data.train_file=" + mini + " data.valid_file=" + mini +
      " data.max_programs=10 data.batch_size=32 data.min_functions_per_footprint=0 "
      "training.threads=1 training.max_epochs=2 model.comp_embed_layer_sizes=32,16 "
      "model.drops=0.05,0.05 model.lstm_embedding_size=8 model.expr_embed_size=8 "
      "training.calibration_folds=0 -q";
  for (const std::string& extra : {std::string(""),
                                   " model.input_scaling=none model.encoder=access_matrix "
                                   "training.fine_tune_epoch=1 model.encoder_weights=" +
                                       ae}) {
    INFO("lcm-train" << extra);
    std::vector<std::vector<double>> loss;
    for (const char* device : {"cpu", "cuda:0"}) {
      const std::string base = dir + "/train" + std::to_string(extra.size()) + "_" +
                               (std::string(device) == "cpu" ? "cpu" : "cuda");
      const test::RunResult r = test::run_tool(
          dir, "lcm-train",
          common + extra + " training.device=" + device + " experiment.base_path=" + base);
      INFO(r.out << r.err);
      REQUIRE(r.code == 0);
      loss.push_back(csv_column(base + "/log_lcm.csv", 3));   // train_loss
      const auto val = csv_column(base + "/log_lcm.csv", 2);  // val_mape
      loss.back().insert(loss.back().end(), val.begin(), val.end());
    }
    REQUIRE(loss[0].size() == 4);
    REQUIRE(loss[1].size() == loss[0].size());
    for (size_t k = 0; k < loss[0].size(); ++k) {
      INFO("value " << k << ": cpu " << loss[0][k] << " cuda " << loss[1][k]);
      CHECK(std::abs(loss[0][k] - loss[1][k]) <= 2e-3 * std::abs(loss[0][k]));
    }
  }
}
