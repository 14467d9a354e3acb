// lcm-train's and lcm-pretrain's memory estimate from the configured sizes: the weight count
// equals the built model's for many size combinations, the estimate grows with the sizes and the
// batch, and a size too large for the machine fails at startup with the estimate and the keys to
// change instead of std::bad_alloc after the data was read.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/autoencoder.hpp"
#include "model/cost_model.hpp"
#include "model/training_memory.hpp"
#include "support/test_support.hpp"
#include "train/memory_check.hpp"

using namespace lcm;

TEST_CASE("the weight count from the sizes equals the built model's, sizes of many kinds") {
  const std::vector<std::vector<int>> layers{
      {600, 350, 200, 180}, {64, 32}, {17, 9, 5}, {300, 300, 100, 40, 20}};
  const std::vector<int> lstm{100, 8, 33};
  int checked = 0;
  for (const auto& l : layers)
    for (int h : lstm)
      for (int ex : {100, 8, 21}) {
        model::ModelConfig mc;
        mc.comp_embed_layer_sizes = l;
        mc.drops.assign(std::max<size_t>(l.size(), 2), 0.05);
        mc.lstm_embedding_size = h;
        mc.expr_embed_size = ex;
        const model::CostModel<float> m(mc, 3);
        CHECK_MESSAGE(
            model::cost_model_parameter_count(mc) == m.params().count(),
            "layers " << l.size() << " (first " << l[0] << "), lstm " << h << ", expr " << ex);
        ++checked;
      }
  for (model::EncoderKind k : {model::EncoderKind::CompVector, model::EncoderKind::AccessMatrix}) {
    model::ModelConfig mc;
    mc.encoder.kind = k;
    const model::CostModel<float> m(mc, 3);
    CHECK(model::cost_model_parameter_count(mc) == m.params().count());
    // the autoencoder of lcm-pretrain: encoder and decoder
    model::AutoencoderConfig ac;
    ac.kind = k;
    const model::Autoencoder<float> ae(ac, 5);
    CHECK(model::estimate_pretraining_memory(ac, 1).parameter_count == ae.params().count());
    ++checked;
  }
  CHECK(checked == 38);
}

TEST_CASE(
    "the training estimate: parameters ×4 (value, gradient, Adam's 2 moments), activations "
    "grow with the batch and the widths") {
  model::ModelConfig mc;
  const model::TrainingMemory a = model::estimate_training_memory(mc, 256);
  CHECK(a.parameters == size_t(a.parameter_count) * 4);
  CHECK(a.gradients == a.parameters);
  CHECK(a.optimizer_state == 2 * a.parameters);
  const model::TrainingMemory b = model::estimate_training_memory(mc, 512);
  CHECK(b.activations == 2 * a.activations);
  CHECK(b.parameters == a.parameters);
  mc.comp_embed_layer_sizes[0] = 6000;
  const model::TrainingMemory c = model::estimate_training_memory(mc, 256);
  CHECK(c.parameters > 9 * a.parameters / 2);
  CHECK(c.activations > a.activations);
  CHECK(c.str().find("GiB (parameters ") != std::string::npos);
}

TEST_CASE("a size too large for the machine: lcm-train and lcm-pretrain fail at startup") {
  const std::string dir = test::temp_dir("training_memory");
  const size_t avail = train::available_host_memory();
  REQUIRE(avail > 0);
  // four layers of 16,384 units (the largest model.* allows; the tree LSTMs and concat layers grow
  // with the last): 8.6e9 weights, 128 GiB with gradients and Adam state
  // (that it is more than this machine's memory is checked, so the test means what it says)
  model::ModelConfig mc;
  mc.comp_embed_layer_sizes = {16384, 16384, 16384, 16384};
  const model::TrainingMemory need = model::estimate_training_memory(mc, 2048);
  if (need.total() <= avail) {
    MESSAGE("skipped: this machine has " << avail << " bytes available, more than the estimate");
    return;
  }
  const std::string data = test::committed_data("synth_train.jsonl.gz"),
                    valid = test::committed_data("synth_valid.jsonl.gz");
  const test::RunResult r = test::run_tool(
      dir, "lcm-train",
      "data.train_file=" + data + " data.valid_file=" + valid +
          " model.comp_embed_layer_sizes=16384,16384,16384,16384 data.batch_size=2048 "
          "training.max_epochs=1 experiment.base_path=" +
          dir + "/exp");
  CHECK(r.code != 0);
  CHECK(r.err.find("lcm-train: the model and one batch need about ") != std::string::npos);
  CHECK(r.err.find("of memory is available") != std::string::npos);
  CHECK(r.err.find("lower model.comp_embed_layer_sizes") != std::string::npos);
  CHECK(r.err.find("data.batch_size (2048)") != std::string::npos);
  CHECK(r.err.find("bad_alloc") == std::string::npos);
  // the same model at a size that fits passes the check
  CHECK_NOTHROW(train::require_memory_fits("lcm-train", model::estimate_training_memory({}, 32),
                                           avail, "on the host", "x"));
  // a directly given shortfall names both numbers
  try {
    train::require_memory_fits("lcm-pretrain", need, size_t(1) << 30, "on the host",
                               "pretrain.batch_size (256)");
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string w = e.what();
    CHECK(w.find("only 1.00 GiB of memory is available (on the host): lower "
                 "pretrain.batch_size (256)") != std::string::npos);
  }
  // lcm-pretrain with a batch far too large
  const test::RunResult p = test::run_tool(
      dir, "lcm-pretrain",
      "pretrain.kind=comp_vector pretrain.files=" + data +
          " pretrain.batch_size=2000000000 pretrain.epochs=1 experiment.base_path=" + dir + "/pre");
  CHECK(p.code != 0);
  CHECK(p.err.find("lcm-pretrain: the model and one batch need about ") != std::string::npos);
  CHECK(p.err.find("pretrain.batch_size (2000000000)") != std::string::npos);
}
