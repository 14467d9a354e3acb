// Data-parallel training (train/distributed.hpp): the split of a batch into whole programs per
// rank, the ranking-pair count, the loss weights whose sum over ranks is the one-process loss,
// and, where Open MPI's mpirun is installed, lcm-train under `mpirun -np 2` against one process
// (losses and final weights, on the committed synthetic slice, on training.device=cuda where a
// device or the emulated build is there, and on the mini sample), --resume under MPI, and a
// failing or killed rank stopping every rank. The mpirun cases skip themselves, saying why,
// without mpirun or in a build without MPI, and under the sanitizer.
// Test hook: LCM_TEST_FAIL_RANK=R:N makes rank R of lcm-train throw after its N-th step
// (tools/lcm-train.cpp); only this suite sets it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif
#include "engine/ops.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "model/calibration.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "train/calibrate.hpp"
#include "train/distributed.hpp"
#include "train/losses.hpp"

namespace fs = std::filesystem;
using lcm::data::Batch;
using lcm::data::DatapointRef;

namespace {

/// A batch of `counts[p]` datapoints of program p, interleaved (as a shuffle leaves them).
Batch batch_of(const std::vector<int>& counts) {
  Batch b;
  for (int k = 0, left = 1; left;) {
    left = 0;
    for (size_t p = 0; p < counts.size(); ++p)
      if (k < counts[p]) b.points.push_back({int32_t(p), int32_t(k)}), left = 1;
    ++k;
  }
  return b;
}

}  // namespace

TEST_CASE("split_batch_by_program: whole programs per rank, balanced, deterministic") {
  const Batch b = batch_of({40, 7, 30, 12, 12, 5, 1});
  for (int ranks : {1, 2, 3, 4, 9}) {
    const auto share = lcm::train::split_batch_by_program(b, ranks);
    REQUIRE(int(share.size()) == ranks);
    std::map<int32_t, int> owner;
    std::vector<int> all;
    std::vector<int64_t> load(size_t(ranks), 0);
    for (int r = 0; r < ranks; ++r) {
      CHECK(std::is_sorted(share[size_t(r)].begin(), share[size_t(r)].end()));  // batch order
      for (int32_t i : share[size_t(r)]) {
        all.push_back(i);
        const int32_t p = b.points[size_t(i)].program;
        CHECK((owner.count(p) == 0 || owner[p] == r));  // a program never straddles ranks
        owner[p] = r;
        ++load[size_t(r)];
      }
    }
    std::sort(all.begin(), all.end());
    CHECK(int(all.size()) == int(b.points.size()));  // every point exactly once
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
    CHECK(share == lcm::train::split_batch_by_program(b, ranks));  // deterministic
    if (ranks == 2) {
      // B 107, cap 54 + 3: p0 40 → 0 (home), p2 30 → 1 (home 0 full), p3 12 → 1, p4 12 → 0,
      // p1 7 → 1, p5 5 → 1, p6 1 → 0
      CHECK(load[0] == 53);
      CHECK(load[1] == 54);
    }
    if (ranks == 9) {  // 7 programs for 9 ranks: two ranks idle
      CHECK(std::count_if(share.begin(), share.end(), [](const auto& s) { return s.empty(); }) ==
            2);
    }
  }
  CHECK_THROWS_AS(lcm::train::split_batch_by_program(b, 0), std::invalid_argument);
  // A program goes to its home rank (index mod ranks) in every batch while it has room there.
  const Batch c = batch_of({3, 3, 3, 3, 3, 3, 3, 3});
  const auto home = lcm::train::split_batch_by_program(c, 4);
  for (int r = 0; r < 4; ++r)
    for (int32_t i : home[size_t(r)]) CHECK(c.points[size_t(i)].program % 4 == r);
}

TEST_CASE("ranking_pair_count equals the pairs pairwise_logistic averages over") {
  const std::vector<float> y = {1.0f, 2.0f, 2.0f, 0.5f, 3.0f, 1.5f, NAN, 1.5f, 0.25f};
  const std::vector<int32_t> g = {0, 0, 0, 1, 1, 0, 1, 1, 2};
  int64_t brute = 0;
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j)
      if (g[i] == g[j] && double(std::log(y[i])) - double(std::log(y[j])) > 0) ++brute;
  CHECK(lcm::train::ranking_pair_count(y, g) == brute);
  CHECK(lcm::train::ranking_group_count(g) == 2);  // program 2 has one datapoint
  CHECK(lcm::train::ranking_unit_count(lcm::config::parse_objective("listnet"), y, g) == 2);
  CHECK(lcm::train::ranking_unit_count(lcm::config::parse_objective("lambdarank"), y, g) == brute);
  CHECK(brute == 8);  // program 0: 1<2,1<2,1<1.5,1.5<2,1.5<2; program 1: 0.5<3,0.5<1.5,1.5<3
}

TEST_CASE("rank losses with LossWeights add up to the one-process loss of the batch") {
  // 3 programs, 10 datapoints; ranks {p0, p2} and {p1}: the loss sum and the gradient sum match
  lcm::data::BatchTensors all;
  all.batch = 10;
  all.speedup = {1.2f, 0.8f, 3.0f, 2.0f, 0.5f, 1.1f, 4.0f, 0.9f, 1.7f, 2.5f};
  all.program_of = {0, 1, 0, 2, 1, 0, 2, 1, 0, 2};
  const std::vector<float> out = {0.1f, -0.2f, 0.9f, 0.4f, -0.5f, 0.2f, 1.1f, 0.0f, 0.3f, 0.6f};
  const float batch_size = 16;
  for (const lcm::config::LossAlias& alias : lcm::config::kLossAliases) {
    const lcm::config::Objective loss = lcm::config::objective_of(alias);
    CAPTURE(loss.text());
    // the ranking term's units over the whole batch: pairs, or programs for ListNet
    const int64_t pairs_g = lcm::train::ranking_unit_count(loss, all.speedup, all.program_of);
    auto run = [&](const std::vector<int>& idx, lcm::train::LossWeights w, std::vector<float>& g) {
      lcm::data::BatchTensors bt;
      bt.batch = int64_t(idx.size());
      std::vector<float> o;
      for (int i : idx) {
        bt.speedup.push_back(all.speedup[size_t(i)]);
        bt.program_of.push_back(all.program_of[size_t(i)]);
        o.push_back(!loss.log_output() ? std::exp(out[size_t(i)]) : out[size_t(i)]);
      }
      lcm::Parameter<float> p;
      p.name = "out";
      p.shape = lcm::Shape{bt.batch};
      p.value = o;
      p.grad.assign(o.size(), 0.0f);
      lcm::Tape<float> t;
      t.set_grad_enabled(true);
      lcm::NodeId x = t.param(p);
      lcm::NodeId l = lcm::train::training_loss(t, loss, x, bt, w, 0.5f);
      const double v = double(t.value(l).data[0]);
      t.backward(l);
      g.assign(size_t(all.batch), 0.0f);
      for (size_t k = 0; k < idx.size(); ++k) g[size_t(idx[k])] = p.grad[k];
      return v;
    };
    std::vector<int> every(10);
    for (int i = 0; i < 10; ++i) every[size_t(i)] = i;
    std::vector<float> g_all, g0, g1;
    const double one = run(every, {10 / batch_size, 10 / batch_size}, g_all);
    std::vector<int> r0, r1;
    for (int i = 0; i < 10; ++i) (all.program_of[size_t(i)] == 1 ? r1 : r0).push_back(i);
    auto weights = [&](const std::vector<int>& idx) {
      std::vector<float> y;
      std::vector<int32_t> p;
      for (int i : idx) y.push_back(all.speedup[size_t(i)]), p.push_back(all.program_of[size_t(i)]);
      const double bw = 10 / double(batch_size);
      return lcm::train::LossWeights{
          float(bw * double(idx.size()) / 10.0),
          float(bw * double(lcm::train::ranking_unit_count(loss, y, p)) / double(pairs_g))};
    };
    const double two = run(r0, weights(r0), g0) + run(r1, weights(r1), g1);
    CHECK(two == doctest::Approx(one).epsilon(1e-6));
    for (size_t i = 0; i < g_all.size(); ++i)
      CHECK(double(g0[i] + g1[i]) == doctest::Approx(double(g_all[i])).epsilon(1e-5));
  }
}

TEST_CASE("take_rank_share: one rank keeps the batches; two ranks partition them") {
  lcm::data::Dataset ds;
  for (int p = 0; p < 4; ++p) {
    lcm::data::ProgramFeatures f;
    f.name = "p" + std::to_string(p);
    f.speedup.assign(6, 1.0f + float(p));
    f.schedule_index.assign(6, 0);
    f.comp_sched.assign(600, 0.5f);
    ds.programs.push_back(f);
  }
  ds.batches.push_back(Batch{0, {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {1, 2}}});
  ds.batches.push_back(Batch{0, {{2, 0}, {2, 1}}});
  ds.batches.push_back(Batch{0, {{0, 2}, {2, 2}}});
  lcm::data::Dataset one = ds;
  const lcm::train::RankShare s1 = lcm::train::take_rank_share(one, 1, 0, true);
  CHECK(one.batches.size() == 3);
  CHECK(s1.local_batch == std::vector<int64_t>{0, 1, 2});
  CHECK(s1.programs_freed == 0);
  CHECK(s1.global_points == std::vector<int64_t>{5, 2, 2});
  std::vector<std::vector<DatapointRef>> joined(3);
  int64_t freed = 0;
  for (int r = 0; r < 2; ++r) {
    lcm::data::Dataset d = ds;
    const lcm::train::RankShare s = lcm::train::take_rank_share(d, 2, r, true);
    CHECK(s.global_points == std::vector<int64_t>{5, 2, 2});
    CHECK(s.batches_with_idle_ranks == 1);  // batch 1 has one program
    for (size_t b = 0; b < 3; ++b)
      if (s.local_batch[b] >= 0)
        for (const DatapointRef& p : d.batches[size_t(s.local_batch[b])].points)
          joined[b].push_back(p);
    freed += s.programs_freed;
    CHECK(d.programs[3].comp_sched.empty());  // in no batch: freed on every rank
    CHECK(d.programs[3].name == "p3");
  }
  // programs go home (index mod 2) while there is room: rank 0 trains 0 and 2 (frees 1 and 3),
  // rank 1 trains 1 (frees 0, 2 and 3)
  CHECK(freed == 5);
  for (size_t b = 0; b < 3; ++b) {
    std::vector<DatapointRef> want = ds.batches[b].points;
    auto less = [](const DatapointRef& a, const DatapointRef& c) {
      return a.program != c.program ? a.program < c.program : a.schedule < c.schedule;
    };
    std::sort(want.begin(), want.end(), less);
    std::sort(joined[b].begin(), joined[b].end(), less);
    CHECK(joined[b] == want);
  }
}

// ---- lcm-train under mpirun ----
namespace {

/// "mpirun" when Open MPI's launcher is on PATH and lcm-train was built with MPI, else "" with
/// `why` set.
std::string mpirun_or_why(std::string& why) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    why = "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)";
    return "";
  }
#ifndef LCM_HAVE_MPI
  why = "this build has no MPI (LCM_MPI=OFF or MPI not found at configure time)";
  return "";
#else
  return "mpirun -np 2 --oversubscribe --allow-run-as-root";
#endif
}

#define LCM_REQUIRE_MPIRUN(var)                                                                 \
  std::string var##_why;                                                                        \
  const std::string var = mpirun_or_why(var##_why);                                             \
  if (var.empty()) {                                                                            \
    std::printf("SKIPPED %s: %s\n", lcm::test::current_test_name().c_str(), var##_why.c_str()); \
    MESSAGE("skipped: " << var##_why);                                                          \
    return;                                                                                     \
  }

/// The numbers of one column of a JSONL training log ("\"train_loss\":" values in order).
std::vector<double> log_column(const std::string& jsonl, const std::string& key) {
  std::vector<double> v;
  const std::string k = "\"" + key + "\":";
  for (size_t at = jsonl.find(k); at != std::string::npos; at = jsonl.find(k, at + 1))
    v.push_back(std::strtod(jsonl.c_str() + at + k.size(), nullptr));
  return v;
}

/// The model and training settings of every run here. Dropout is off (model.drops=0): a
/// multi-rank run draws its masks per rank and step, so with dropout its masks, and so its
/// weights, differ from the one-process run's. The calibration map is fitted on the training
/// split (no fold runs) but in the case that tests the fold runs under MPI.
const char* kSettings =
    " data.batch_size=256 training.threads=1 training.loss=log_mse+pairwise "
    "model.drops=0,0,0,0,0 model.comp_embed_layer_sizes=64,32 model.lstm_embedding_size=8 "
    "model.expr_embed_size=8 training.calibration_folds=0 -q";

/// kSettings with `overrides` ("key=value ..."): the keys they give replace kSettings' own (a
/// key given twice on a command line is an error).
std::string settings_with(const std::string& overrides) {
  std::istringstream given(overrides), base(kSettings);
  std::vector<std::string> keys;
  for (std::string t; given >> t;) keys.push_back(t.substr(0, t.find('=')));
  std::string out;
  for (std::string t; base >> t;)
    if (std::find(keys.begin(), keys.end(), t.substr(0, t.find('='))) == keys.end()) out += " " + t;
  return out + " " + overrides;
}

/// The committed synthetic slice (158 programs kept, 24 batches of 2 to 25 programs each: every
/// batch is split between the ranks).
std::string synth_data() {
  return "data.train_file=" + lcm::test::source_path("tests/data/synth_train.jsonl.gz") +
         " data.valid_file=" + lcm::test::source_path("tests/data/synth_valid.jsonl.gz");
}

/// Runs `cmd` in `dir` (stdout, stderr to <dir>/<tag>.out/.err); its exit status and output.
lcm::test::RunResult run_in(const std::string& dir, const std::string& tag,
                            const std::string& cmd) {
  const int st =
      std::system(("cd " + dir + " && " + cmd + " > " + tag + ".out 2> " + tag + ".err").c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, lcm::test::slurp(dir + "/" + tag + ".out"),
          lcm::test::slurp(dir + "/" + tag + ".err")};
}

/// The largest |difference| between the tensors of two safetensors files of the same model.
double largest_weight_difference(const std::string& a_path, const std::string& b_path) {
  const auto a = lcm::read_safetensors(a_path), b = lcm::read_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double worst = 0;
  for (const auto& [name, t] : a.tensors) {
    const lcm::SafeTensor* u = b.find(name);
    REQUIRE(u);
    const std::vector<float> x = t.to_float(), y = u->to_float();
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::fabs(double(x[i]) - double(y[i])));
  }
  return worst;
}

/// One process and `mpirun -np 2` with `args` under `dir`/one and `dir`/two: the logged losses
/// and MAPEs agree to 1e-4 (relative) and the final weights to 1e-4 (absolute).
/// Tolerances: the ranks' forward passes see part of the batch, so the gradient is summed in a
/// different order (two partial sums, then rank 0 + rank 1) than in the one process's single
/// backward pass, and each loss term is a mean over the share times its fraction: float rounding
/// differs in the last bits, and Adam's steps carry it on (measured: weights within 1e-7).
/// Validation Spearman is not compared: a barely trained model predicts near-ties whose order a
/// 1e-7 change flips (0.1526 vs 0.1512 measured on the mini sample).
void check_same_training(const std::string& mpirun, const std::string& dir, const std::string& args,
                         int epochs) {
  const std::string train = lcm::test::bin_dir() + "/lcm-train " + args;
  const auto one = run_in(dir, "one", train + " experiment.base_path=" + dir + "/one");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  const auto two =
      run_in(dir, "two", mpirun + " " + train + " experiment.base_path=" + dir + "/two");
  REQUIRE_MESSAGE(two.code == 0, two.out << two.err);
  CHECK(lcm::test::contains(two.out, "MPI: 2 ranks x 1 threads"));
  CHECK(lcm::test::contains(two.out, "trained on 2 MPI ranks"));
  size_t headers = 0;  // rank 0 alone prints: one table header
  for (size_t at = two.out.find("val_MAPE"); at != std::string::npos;
       at = two.out.find("val_MAPE", at + 1))
    ++headers;
  CHECK(headers == 1);
  const std::string log1 = lcm::test::slurp(dir + "/one/log_lcm.jsonl");
  const std::string log2 = lcm::test::slurp(dir + "/two/log_lcm.jsonl");
  for (const char* key : {"train_loss", "train_mape", "val_mape"}) {
    CAPTURE(key);
    const std::vector<double> a = log_column(log1, key), b = log_column(log2, key);
    REQUIRE(int(a.size()) == epochs);
    REQUIRE(b.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-4));
  }
  const double worst = largest_weight_difference(dir + "/one/weights/last_model_lcm.safetensors",
                                                 dir + "/two/weights/last_model_lcm.safetensors");
  MESSAGE("largest |weight difference| one process vs 2 ranks: " << worst);
  CHECK(worst < 1e-4);
}

}  // namespace

TEST_CASE("mpirun -np 2 on the synthetic slice: one process's losses and weights; --resume") {
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  const std::string dir = lcm::test::temp_dir("mpi_synth");
  const std::string args = synth_data() + kSettings + " training.max_epochs=2";
  check_same_training(mpirun, dir, args, 2);
  // Interrupted after step 5 (in epoch 1 of 8 mixed batches) on both ranks, then --resume: the same
  // bits as the uninterrupted 2-rank run (rank 0 saved `last`; every rank reads it back).
  const std::string cut = mpirun + " " + lcm::test::bin_dir() + "/lcm-train " + args +
                          " experiment.base_path=" + dir + "/cut";
  const auto a = run_in(dir, "cut", "LCM_INTERRUPT_AFTER_STEPS=5 " + cut);
  CHECK_MESSAGE(a.code == 130, a.err);
  const auto b = run_in(dir, "resume", cut + " --resume");
  REQUIRE_MESSAGE(b.code == 0, b.err);
  CHECK(lcm::test::contains(b.err, "in epoch 1 at batch 6/8"));
  CHECK(largest_weight_difference(dir + "/two/weights/last_model_lcm.safetensors",
                                  dir + "/cut/weights/last_model_lcm.safetensors") == 0);
}

TEST_CASE("mpirun -np 2 with training.calibration_folds: the ranks train the fold runs together") {
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  const std::string dir = lcm::test::temp_dir("mpi_folds");
  const std::string args = synth_data() +
                           settings_with("training.max_epochs=1 training.calibration_folds=2") +
                           " experiment.base_path=" + dir + "/run";
  const auto r = run_in(dir, "folds", mpirun + " " + lcm::test::bin_dir() + "/lcm-train " + args);
  REQUIRE_MESSAGE(r.code == 0, r.out << r.err);
  // rank 0 alone speaks: one line per fold run, one map
  size_t folds = 0;
  for (size_t at = r.out.find("calibration fold 2 of 2: experiment"); at != std::string::npos;
       at = r.out.find("calibration fold 2 of 2: experiment", at + 1))
    ++folds;
  CHECK(folds == 1);
  CHECK(lcm::test::contains(r.out, "fitted on out-of-fold predictions (2 fold models)"));
  const lcm::model::Calibration cal =
      lcm::train::load_calibration(dir + "/run/weights/best_model_lcm.safetensors");
  CHECK(cal.folds == 2);
  CHECK(cal.fit_points > 0);
  for (const char* fold : {"lcm_fold1of2", "lcm_fold2of2"})
    CHECK(std::filesystem::exists(dir + "/run/weights/best_model_" + fold + ".safetensors"));
}

TEST_CASE("mpirun -np 2 with the listwise losses and reduce_on_plateau: one process's losses") {
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  // ListNet's rank weight is the share of programs, LambdaRank's the share of pairs with the
  // |ΔnDCG| of the rank's own programs; the plateau decision comes from the broadcast validation
  // MAPE (patience 1: epoch 2's MAPE is worse than epoch 1's at lr 3e-3, so epoch 3 runs at half)
  const std::string plateau =
      " training.lr_schedule=reduce_on_plateau training.plateau_patience=1 "
      "training.select_metric=mape training.lr=0.003";
  const std::string dir = lcm::test::temp_dir("mpi_listnet");
  check_same_training(
      mpirun, dir,
      synth_data() + settings_with("training.max_epochs=3 training.loss=log_mse+listnet" + plateau),
      3);
  const std::vector<double> lr1 = log_column(lcm::test::slurp(dir + "/one/log_lcm.jsonl"), "lr"),
                            lr2 = log_column(lcm::test::slurp(dir + "/two/log_lcm.jsonl"), "lr");
  MESSAGE("learning rates per epoch: " << lr1[0] << " " << lr1[1] << " " << lr1[2]);
  CHECK(lr1 == lr2);  // the same decisions on every rank as in the one process
  CHECK(lr1.back() < lr1.front());
  check_same_training(
      mpirun, lcm::test::temp_dir("mpi_lambdarank"),
      synth_data() + settings_with("training.max_epochs=2 training.loss=log_mse+lambdarank"), 2);
}

TEST_CASE("mpirun -np 2 with training.device=cuda: one process's losses and weights") {
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  std::string why = "this build has no CUDA kernels (nvcc not found or -DLCM_CUDA=OFF)";
#ifdef LCM_WITH_CUDA
  if (lcm::cuda::device_count(&why) > 0) why.clear();
#endif
  if (!why.empty()) {
    std::printf("SKIPPED %s: %s\n", lcm::test::current_test_name().c_str(), why.c_str());
    MESSAGE("skipped: " << why);
    return;
  }
  // both ranks on the host's GPU(s) (local rank mod visible GPUs); gradients through pinned
  // host buffers. In the emulated build (LCM_CUDA_EMULATE) the device is the host emulation.
  check_same_training(mpirun, lcm::test::temp_dir("mpi_cuda"),
                      synth_data() + kSettings + " training.max_epochs=2 training.device=cuda", 2);
}

TEST_CASE("mpirun -np 2 on the mini sample: one process's losses and weights") {
  LCM_REQUIRE_SHARED(mini, "looperset-sample/mini.jsonl.gz");
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  const std::string dir = lcm::test::temp_dir("mpi_mini");
  const auto lines = lcm::test::gz_lines(mini);
  REQUIRE(lines.size() == 60);
  std::ofstream t(dir + "/train.jsonl"), v(dir + "/valid.jsonl");
  for (size_t i = 0; i < 60; ++i) (i < 48 ? t : v) << lines[i] << "\n";
  t.close();
  v.close();
  // mini's footprint groups hold one or two programs: 2 of its 49 batches are split
  check_same_training(mpirun, dir,
                      "data.train_file=" + dir + "/train.jsonl data.valid_file=" + dir +
                          "/valid.jsonl data.min_functions_per_footprint=0 training.max_epochs=1" +
                          kSettings,
                      1);
}

TEST_CASE("mpirun -np 2: a failing rank or a killed rank stops every rank with its error") {
  LCM_REQUIRE_MPIRUN(mpirun);
  LCM_SKIP_UNDER_SANITIZER("mpirun training runs");
  const std::string dir = lcm::test::temp_dir("mpi_fail");
  const std::string train = lcm::test::bin_dir() + "/lcm-train " + synth_data() + kSettings;
  {  // an exception on rank 1 after its first step
    const auto r = run_in(dir, "fail",
                          "LCM_TEST_FAIL_RANK=1:1 timeout 120 " + mpirun + " " + train +
                              " training.max_epochs=2 experiment.base_path=" + dir + "/fail");
    CHECK(r.code != 0);
    CHECK(r.code != 124);  // not the timeout: the job ended itself
    CHECK_MESSAGE(lcm::test::contains(r.err,
                                      "lcm-train (rank 1 of 2): error: injected fault on "
                                      "rank 1 after step 1 (LCM_TEST_FAIL_RANK)"),
                  r.err);
  }
  {  // rank 1 killed (SIGKILL) while training: mpirun ends the job non-zero
    const auto r = run_in(
        dir, "kill",
        "timeout 120 " + mpirun +
            " sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 2; kill -9 $$) & fi; exec " +
            train + " training.max_epochs=100000 training.early_stop_patience=0 " +
            "experiment.base_path=" + dir + "/kill'");
    CHECK_MESSAGE(r.code != 0, r.err);
    CHECK_MESSAGE(r.code != 124, r.err);
    CHECK_MESSAGE(lcm::test::contains(r.err, "signal 9"), r.err);
  }
}
