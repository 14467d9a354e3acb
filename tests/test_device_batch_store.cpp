// Data placement on a CUDA device: training.gpu_memory_budget parsing, and the
// DeviceBatchStore: a large budget keeps every batch resident, 0 streams every batch, and both give
// the same training losses and weights as the per-step host upload; out of memory while placing is
// one line naming the device and the bytes. Store tests need a CUDA device (the emulated build
// -DLCM_CUDA_EMULATE=ON has one); without it they report skipped, with the reason.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/memory_budget.hpp"
#include "data/prepare.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "model/cost_model.hpp"
#include "support/cuda_support.hpp"
#include "support/model_support.hpp"
#include "support/safetensors_support.hpp"
#include "support/test_support.hpp"
#include "train/device_batch_store.hpp"
#include "train/run_state.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

using namespace lcm;
using lcm::config::MemoryBudget;
using lcm::config::parse_memory_budget;
using lcm::model::CostModel;
using lcm::model::ForwardInputs;
using lcm::model::ModelConfig;
using lcm::train::DeviceBatchStore;

using lcm::test::prepare_mini;

namespace {

/// A small model (fast on the emulated device) with the release structure.
ModelConfig small_model() {
  ModelConfig mc;
  mc.comp_embed_layer_sizes = {64, 32};
  mc.drops = {0.05, 0.05};
  mc.lstm_embedding_size = 8;
  mc.expr_embed_size = 8;
  return mc;
}

/// MAPE losses of `steps` AdamW steps on cuda:0 over batches 0, 1, 2, ... (training mode, dropout
/// from Rng(7)), as lcm-train runs them: with `store`, acquire(b) / step / prefetch(b + 1);
/// without, the per-step host upload (forward(tape, tree, bt, rng)). Then the final weights.
struct Run {
  std::vector<float> losses;
  std::vector<float> weights;
};

Run train_on_device(const data::Dataset& ds, int steps, DeviceBatchStore* store) {
  CostModel<float> m(small_model(), 3);
  parameters_to_device(m.params(), 0);
  AdamOptions ao;
  ao.lr = 3e-3;
  ao.weight_decay = 0.015;
  Adam<float> opt(parameter_pointers(m.params()), ao, true);
  Tape<float> tape;
  tape.set_device(Device::CUDA, 0);
  Rng rng(7);
  Run r;
  const int64_t nb = int64_t(ds.batches.size());
  for (int s = 0; s < steps; ++s) {
    const int64_t b = s % nb;
    tape.clear();
    tape.set_training(true);
    tape.set_grad_enabled(true);
    const train::BatchInput in = train::batch_input(ds, b, store, nullptr);
    const NodeId y = in.forward(m, tape, ds, b, rng);
    const NodeId target = tape.constant(in.labels().speedup.data(), Shape{in.labels().batch});
    const NodeId loss = ops::mape(tape, y, target, 1.0f);
    r.losses.push_back(to_host(tape.value(loss))[0]);
    tape.backward(loss);
    opt.step();
    opt.zero_grad();
    if (store) store->prefetch((b + 1) % nb);
  }
  parameters_to_host(m.params());
  for (const auto& p : m.params().all())
    r.weights.insert(r.weights.end(), p.value.begin(), p.value.end());
  return r;
}

}  // namespace

TEST_CASE("training.gpu_memory_budget: fractions, bytes with units, clear errors") {
  MemoryBudget b = parse_memory_budget("0.5");
  CHECK(b.is_fraction);
  CHECK(b.fraction == 0.5);
  CHECK(b.resolve(1000) == 500);
  b = parse_memory_budget("1");  // the whole free memory, not one byte
  CHECK(b.is_fraction);
  CHECK(b.resolve(12345) == 12345);
  b = parse_memory_budget("0");
  CHECK(!b.is_fraction);
  CHECK(b.bytes == 0);
  CHECK(b.resolve(1000) == 0);
  CHECK(parse_memory_budget("8GiB").bytes == size_t(8) << 30);
  CHECK(!parse_memory_budget("8GiB").is_fraction);
  CHECK(parse_memory_budget("512 mib").bytes == size_t(512) << 20);
  CHECK(parse_memory_budget("1.5GiB").bytes == size_t(3) << 29);
  CHECK(parse_memory_budget("2KB").bytes == 2000);
  CHECK(parse_memory_budget("4096B").bytes == 4096);
  CHECK(parse_memory_budget("100B").bytes == 100);
  // a bare number > 1 is not bytes (a trap: "2" was 2 bytes): an error naming the allowed forms
  for (const char* bare : {"2", "4096", "8"}) {
    CAPTURE(bare);
    const std::string e = test::error_of<config::ConfigError>([&] { parse_memory_budget(bare); });
    CHECK(test::contains(e, "training.gpu_memory_budget: a number > 1 needs a unit (" +
                                std::string(bare) + "B for bytes"));
    CHECK(test::contains(e, "fraction in (0, 1]"));
    CHECK(test::contains(e, "512MiB, 8GiB"));
    CHECK(test::contains(e, "'" + std::string(bare) + "'"));
  }
  CHECK(test::contains(test::error_of<config::ConfigError>([&] {
                         config::Config c;
                         config::set_config_value(c, "training.gpu_memory_budget", "2");
                       }),
                       "needs a unit"));
  // decimal exponents, as training.lr accepts them
  CHECK(parse_memory_budget("5e-1").fraction == 0.5);
  CHECK(parse_memory_budget("1e-1").is_fraction);
  CHECK(parse_memory_budget("1E-1").fraction == 0.1);
  CHECK(parse_memory_budget("1e-300").is_fraction);
  CHECK(parse_memory_budget("1e0").fraction == 1.0);
  CHECK(parse_memory_budget("1e3MiB").bytes == size_t(1000) << 20);
  // a bare number > 1 in any spelling gets the unit hint with a whole number ("2.0" -> "2B")
  for (auto [bare, whole] : {std::pair<const char*, const char*>{"1e9", "1000000000"},
                             {"2.0", "2"},
                             {"1e3", "1000"},
                             {"2.", "2"}}) {
    CAPTURE(bare);
    const std::string e = test::error_of<config::ConfigError>([&] { parse_memory_budget(bare); });
    CHECK(test::contains(e, "a number > 1 needs a unit (" + std::string(whole) + "B for bytes, " +
                                std::string(whole) + "GiB"));
    CHECK(test::contains(e, "'" + std::string(bare) + "'"));
  }
  // a count of bytes is whole: 0.3B / 1.5B are errors, not floored to 0 or 1 byte
  for (const char* frac : {"0.3B", "1.5B", "1.5 b", "5e-1B"}) {
    CAPTURE(frac);
    const std::string e = test::error_of<config::ConfigError>([&] { parse_memory_budget(frac); });
    CHECK(test::contains(e, "a byte count must be whole"));
    CHECK(test::contains(e, "'" + std::string(frac) + "'"));
  }
  CHECK(parse_memory_budget("1e1B").bytes == 10);
  // malformed exponents and non-decimal forms stay errors
  for (const char* bad : {"1e", "e5", "1e+", "1.2.3", ".", "1e-1e1", "0x1p-1"}) {
    CAPTURE(bad);
    CHECK(test::contains(test::error_of<config::ConfigError>([&] { parse_memory_budget(bad); }),
                         "fraction in (0, 1]"));
  }
  for (const char* bad :
       {"", "-1", "-0.5", "1.5", "abc", "8XB", "nan", "inf", "1e3", "0x10", "GiB", "2^70"}) {
    CAPTURE(bad);
    const std::string e = test::error_of<config::ConfigError>([&] { parse_memory_budget(bad); });
    CHECK(test::contains(e, "training.gpu_memory_budget"));
    CHECK(test::contains(e, "fraction in (0, 1]"));
    CHECK(test::contains(e, "'" + std::string(bad) + "'"));
  }
  CHECK(
      test::contains(test::error_of<config::ConfigError>([] { parse_memory_budget("2000000TiB"); }),
                     "2000000TiB"));
  // the config key validates the same way and keeps the text
  config::Config c;
  CHECK(config::get_config_value(c, "training.gpu_memory_budget") == "0.5");
  config::set_config_value(c, "training.gpu_memory_budget", "8GiB");
  CHECK(c.training.gpu_memory_budget.text == "8GiB");
  CHECK(test::contains(test::error_of<config::ConfigError>([&] {
                         config::set_config_value(c, "training.gpu_memory_budget", "1.5");
                       }),
                       "training.gpu_memory_budget: expected"));
  CHECK(c.training.gpu_memory_budget.text == "8GiB");
}

TEST_CASE(
    "prepared inputs: forward over them equals forward over the batch on the CPU (bit for bit)") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 32);
  const data::Dataset& ds = ps.dataset;
  CostModel<float> m(small_model(), 5);
  for (int64_t b : {int64_t(0), int64_t(ds.batches.size() - 1)}) {
    const data::BatchTensors bt = ds.materialize(b);
    Tape<float> tape;
    tape.set_training(false);
    Rng r1(1), r2(1);
    const std::vector<float> a = to_host(tape.value(m.forward(tape, ds.trees(b), bt, r1)));
    const ForwardInputs<float> in = m.prepare_inputs(ds.trees(b), bt);
    CHECK(in.bytes() == size_t(in.total) * sizeof(float));
    CHECK(in.total >= bt.batch * bt.n_loops * 8);
    const std::vector<float> p = to_host(tape.value(m.forward(tape, ds.trees(b), in, r2)));
    REQUIRE(a.size() == p.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == p[i]);
  }
  // inputs prepared for one tree do not silently run on another's
  const data::BatchTensors bt = ds.materialize(0);
  ForwardInputs<float> in = m.prepare_inputs(ds.trees(0), bt);
  in.segments[0].n_loops = 0;
  Tape<float> tape;
  Rng rng(1);
  CHECK(test::contains(
      test::error_of<std::invalid_argument>([&] { m.forward(tape, ds.trees(0), in, rng); }),
      "prepared inputs with bad sizes"));
}

TEST_CASE(
    "DeviceBatchStore: resident and streamed batches give the per-step upload's losses and "
    "weights") {
  if (test::skipped_without_cuda("data placement on CUDA")) return;
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 32);
  const data::Dataset& ds = ps.dataset;
  REQUIRE(ds.batches.size() >= 4);
  const CostModel<float> shape_model(small_model(), 3);  // prepare_inputs reads only the config
  DeviceBatchStore all(shape_model, ds, nullptr, 0, size_t(1) << 40);
  DeviceBatchStore none(shape_model, ds, nullptr, 0, 0);
  CHECK(all.resident_count() == all.size());
  CHECK(all.staging_bytes() == 0);
  CHECK(all.resident_bytes() > 0);
  CHECK(test::contains(all.summary("training"), "placed " + std::to_string(all.size()) + " of " +
                                                    std::to_string(all.size()) +
                                                    " training batches on cuda:0"));
  CHECK(none.resident_count() == 0);
  CHECK(none.resident_bytes() == 0);
  CHECK(none.staging_bytes() > 0);
  CHECK(test::contains(none.summary("training"), "placed 0 of "));
  CHECK(test::contains(none.summary("training"), "streaming the rest"));
  // a budget for about half: first fit, never above the budget
  DeviceBatchStore half(shape_model, ds, nullptr, 0, all.resident_bytes() / 2);
  CHECK(half.resident_count() > 0);
  CHECK(half.resident_count() < half.size());
  CHECK(half.resident_bytes() <= half.budget_bytes());

  // Every batch's device values are exactly the host-prepared ones, whatever the access order
  // (in order with prefetch, a prefetched batch skipped, the same batch twice, backwards).
  const std::vector<int64_t> order{0, 1, 2, 5, 3, 3, 2, 1, 0, int64_t(ds.batches.size() - 1)};
  for (DeviceBatchStore* st : {&all, &none, &half}) {
    for (size_t i = 0; i < order.size(); ++i) {
      const int64_t b = order[i];
      CAPTURE(b);
      const data::BatchTensors bt = ds.materialize(b);
      const ForwardInputs<float> want = shape_model.prepare_inputs(ds.trees(b), bt);
      const train::StagedBatch& got = st->acquire(b);
      if (i % 2 == 0)
        st->prefetch(b + 1);  // sometimes the next batch is prefetched, sometimes another one
      REQUIRE(got.inputs.device != nullptr);
      CHECK(got.inputs.host.empty());
      CHECK(got.labels.comp.empty());
      CHECK(got.labels.speedup == bt.speedup);
      CHECK(got.labels.program_of == bt.program_of);
      REQUIRE(got.inputs.total == want.total);
      std::vector<float> dev(size_t(want.total));
      device_download(dev.data(), got.inputs.device, want.total);
      int64_t differ = 0;
      for (int l = 0; l < model::kNumInputLeaves; ++l) {  // the leaves (not the alignment padding)
        const Shape& s = want.shapes[size_t(l)];
        if (s.rank == 0) continue;
        for (int64_t j = 0; j < s.numel(); ++j)
          differ += dev[size_t(want.offsets[size_t(l)] + j)] !=
                    want.host[size_t(want.offsets[size_t(l)] + j)];
      }
      CHECK(differ == 0);
    }
  }

  // Training: the per-step upload, all resident, all streamed and half/half agree bit for bit.
  const int steps = 6;
  const Run upload = train_on_device(ds, steps, nullptr);
  DeviceBatchStore all2(shape_model, ds, nullptr, 0, size_t(1) << 40),
      none2(shape_model, ds, nullptr, 0, 0),
      half2(shape_model, ds, nullptr, 0, all.resident_bytes() / 2);
  for (DeviceBatchStore* st : {&all2, &none2, &half2}) {
    const Run r = train_on_device(ds, steps, st);
    REQUIRE(r.losses.size() == upload.losses.size());
    for (size_t s = 0; s < r.losses.size(); ++s) {
      INFO("step " << s << ": upload " << upload.losses[s] << " store " << r.losses[s]);
      REQUIRE(std::isfinite(r.losses[s]));
      CHECK(r.losses[s] == upload.losses[s]);
    }
    CHECK(r.weights == upload.weights);
  }
}

TEST_CASE(
    "DeviceBatchStore: out of device memory while placing is one line naming the device and the "
    "bytes") {
#ifndef LCM_CUDA_EMULATED
  MESSAGE(
      "skipped: provoking out-of-memory needs the emulated device (LCM_CUDA_EMULATE_MEMORY); on a "
      "GPU "
      "it would need to fill the real device");
  return;
#else
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 32);
  const data::Dataset& ds = ps.dataset;
  const CostModel<float> m(small_model(), 3);
  ::setenv("LCM_CUDA_EMULATE_MEMORY", "1000000", 1);  // a 1 MB device
  const std::string e = test::error_of<std::runtime_error>(
      [&] { DeviceBatchStore st(m, ds, nullptr, 0, size_t(1) << 30); });
  // a fraction of the free memory fits by construction
  size_t placed = 0;
  {
    DeviceBatchStore st(m, ds, nullptr, 0,
                        train::resolve_gpu_memory_budget(parse_memory_budget("0.5"), 0));
    placed = st.resident_bytes();
  }
  ::unsetenv("LCM_CUDA_EMULATE_MEMORY");
  INFO(e);
  CHECK(test::contains(e, "cuda:0: out of memory allocating "));
  CHECK(test::contains(e, " bytes ("));
  CHECK(test::contains(e, "training.gpu_memory_budget"));
  CHECK(e.find('\n') == std::string::npos);
  CHECK(placed > 0);
  CHECK(placed <= 500000);

  // lcm-train: exit 1, that one line on stderr, no checkpoint or log written
  const std::string dir = test::temp_dir("store_oom");
  const std::string args =
      "model.preset=reference data.train_file=" + path + " data.valid_file=" + path +
      " data.batch_size=32 data.min_functions_per_footprint=0 data.cache=false "
      "training.threads=1 model.comp_embed_layer_sizes=64,32 model.lstm_embedding_size=8 "
      "model.expr_embed_size=8 -q training.max_epochs=1 training.device=cuda:0 "
      "data.schedule_check=off training.gpu_memory_budget=1GiB experiment.base_path=" +
      dir + "/run";
  // a device that holds the model and one batch (lcm-train checks that first) but not the
  // first chunk of placed batches
  ::setenv("LCM_CUDA_EMULATE_MEMORY", "14000000", 1);
  const test::RunResult r = test::run_tool(dir, "lcm-train", args);
  ::unsetenv("LCM_CUDA_EMULATE_MEMORY");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(test::contains(r.err, "lcm-train: error: cuda:0: out of memory allocating "));
  CHECK(test::contains(r.err, "training.gpu_memory_budget"));
  // One error line; the only other lines allowed are the train/valid overlap warning (this test
  // trains and validates on the same file), the two files' skip summaries and the startup line of
  // the host memory outside training.host_memory_budget (stderr).
  const bool overlap_warned =
      test::contains(r.err, "lcm-train: warning: ") && test::contains(r.err, "kept in both");
  const bool summarised = test::contains(r.err, "lcm-train: " + path + ": ") &&
                          test::contains(r.err, " programs read, ");
  const bool host_memory_line =
      test::contains(r.err, "lcm-train: host memory outside training.host_memory_budget");
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') ==
        1 + (overlap_warned ? 1 : 0) + (summarised ? 2 : 0) + (host_memory_line ? 1 : 0));
  std::error_code ec;
  int64_t files = 0;
  if (std::filesystem::exists(dir + "/run", ec))
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir + "/run"))
      files += f.is_regular_file();
  CHECK(files == 0);
#endif
}

TEST_CASE(
    "lcm-train on CUDA: every batch resident or every batch streamed writes the same checkpoint") {
  if (test::skipped_without_cuda("lcm-train data placement on CUDA")) return;
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const std::string dir = test::temp_dir("store_train");
  const std::string args =
      "model.preset=reference data.train_file=" + path + " data.valid_file=" + path +
      " data.batch_size=32 data.min_functions_per_footprint=0 data.cache=false "
      "training.threads=1 model.comp_embed_layer_sizes=64,32 model.lstm_embedding_size=8 "
      "model.expr_embed_size=8 -q training.max_epochs=1 training.device=cuda:0 ";
  const test::RunResult all = test::run_tool(
      dir, "lcm-train", args + "training.gpu_memory_budget=1 experiment.base_path=" + dir + "/all");
  const test::RunResult none =
      test::run_tool(dir, "lcm-train",
                     args + "training.gpu_memory_budget=0 experiment.base_path=" + dir + "/none");
  INFO(all.err << none.err);
  REQUIRE(all.code == 0);
  REQUIRE(none.code == 0);
  CHECK(test::contains(all.out, "training batches on cuda:0"));
  CHECK(test::contains(all.out, "nothing to stream"));
  CHECK(test::contains(none.out, "placed 0 of "));
  CHECK(test::contains(none.out, "streaming the rest"));
  // same weights, same metadata (validation MAPE included) but the id of the run that wrote it
  SafeTensorsFile a = read_safetensors(dir + "/all/weights/last_model_lcm.safetensors");
  SafeTensorsFile n = read_safetensors(dir + "/none/weights/last_model_lcm.safetensors");
  REQUIRE(!a.tensors.empty());
  CHECK(a.metadata.count(train::meta::kRunId) == 1);
  CHECK(a.metadata[train::meta::kRunId] != n.metadata[train::meta::kRunId]);
  a.metadata.erase(train::meta::kRunId);
  n.metadata.erase(train::meta::kRunId);
  CHECK(a.metadata == n.metadata);
  lcm::test::expect_same_tensors(a, n);
}
