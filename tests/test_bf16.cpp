// BF16 weight copies (engine/bf16.hpp, lcm-serve --weights bf16): the rounding, the one-row
// kernel against a double reference, gemm()'s one-row products reading the copy, a scorer with
// BF16 weights against one with FP32 weights over real programs (the valid sample, else the
// committed synthetic programs), the memo still giving the whole forward's bits, and the option
// through liblcm.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/bf16.hpp"
#include "engine/ops/gemm.hpp"
#include "engine/rng.hpp"
#include "lcm/lcm.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "serve/scorer.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"
#include "train/checkpoint.hpp"

using namespace lcm;

namespace {

struct Fixture {
  std::string dir, ckpt;
  std::vector<test::QueryProgram> programs;
};

/// The model's own initialisation with its zero concat layers drawn from U(±0.1) (every part of
/// the tree walk reaches the output), relative to the untransformed schedule: outputs spread far
/// apart, as in tests/test_serve_memo.cpp.
const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = test::temp_dir("bf16");
    x.ckpt = x.dir + "/init_relative.safetensors";
    model::ModelConfig mc;
    mc.log_output = true;
    mc.relative_to_identity = true;
    model::CostModel<float> m(mc, 5);
    Rng rng(3);
    for (auto& p : m.params().all())
      if (p.name.rfind("concat_layers.", 0) == 0)
        for (auto& v : p.value) v = float(rng.uniform(-0.1, 0.1));
    model::InputScaling sc;
    sc.mode = "log";
    train::save_checkpoint(x.ckpt, m, {{"lcm.input_scaling", sc.to_json()}});
    std::string src = test::shared_data("looperset-sample/valid.jsonl.gz");
    if (src.empty()) src = test::committed_data("synth_valid.jsonl.gz");
    for (const std::string& l : test::gz_lines(src)) {
      try {
        x.programs.push_back(test::query_program(l));
      } catch (const std::exception&) {
      }
      if (x.programs.size() == 40) break;
    }
    REQUIRE(!x.programs.empty());
    return x;
  }();
  return f;
}

std::unique_ptr<serve::Scorer> make_scorer(bool bf16, size_t memo_bytes) {
  config::Config c;
  config::apply_overrides(c, {"eval.weights_path=" + fixture().ckpt, "training.threads=1"});
  serve::ScorerOptions o;
  o.memo_bytes = memo_bytes;
  o.bf16_weights = bf16;
  return std::make_unique<serve::Scorer>(c, o);
}

}  // namespace

TEST_CASE("to_bf16 rounds to nearest even and keeps infinities and NaN") {
  CHECK(from_bf16(to_bf16(1.0f)) == 1.0f);
  CHECK(from_bf16(to_bf16(-2.5f)) == -2.5f);
  // 1 + 2^-8 is half-way between 1 and 1 + 2^-7: ties to the even mantissa (1)
  CHECK(from_bf16(to_bf16(1.0f + 0x1p-8f)) == 1.0f);
  // 1 + 3·2^-8 is half-way between 1 + 2^-7 and 1 + 2^-6: ties to 1 + 2^-6
  CHECK(from_bf16(to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(from_bf16(to_bf16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);
  CHECK(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // every value within half a BF16 unit (8 significant bits): relative error ≤ 2^-8
  Rng rng(1);
  for (int i = 0; i < 1000; ++i) {
    const float x = float(rng.uniform(-3.0, 3.0));
    CHECK(std::fabs(from_bf16(to_bf16(x)) - x) <= std::fabs(x) * 0x1p-8f);
  }
  std::vector<float> v{0.1f, -0.3f, 7.0f};
  const std::vector<uint16_t> bits = round_to_bf16(v.data(), int64_t(v.size()));
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == from_bf16(bits[i]));
}

TEST_CASE("bf16_dot_rows sums exact products in FP32 within the summation bound") {
  std::printf("bf16 kernel: %s\n", bf16_kernel());
  Rng rng(2);
  for (int64_t k : {1, 7, 15, 16, 17, 31, 32, 33, 64, 114, 180, 904}) {
    for (int64_t rows : {1, 3, 4, 5, 9}) {
      const int64_t ldw = k + 3, ystride = 2;
      std::vector<float> x(static_cast<size_t>(k)), wf(static_cast<size_t>(rows * ldw));
      for (auto& v : x) v = float(rng.uniform(-1.0, 1.0));
      for (auto& v : wf) v = float(rng.uniform(-1.0, 1.0));
      const std::vector<uint16_t> w = round_to_bf16(wf.data(), int64_t(wf.size()));
      std::vector<float> y(size_t(rows * ystride), 0.5f);
      bf16_dot_rows(rows, k, x.data(), w.data(), ldw, y.data(), ystride);
      for (int64_t j = 0; j < rows; ++j) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          ref += double(x[size_t(i)]) * double(from_bf16(w[size_t(j * ldw + i)]));
          mag += std::fabs(double(x[size_t(i)]) * double(wf[size_t(j * ldw + i)]));
        }
        // each product is exact in FP32 (8 + 24 significant bits fit in 2·24); k + 1 FP32
        // additions (the row's sum and the add into y) err at most (k + 1)·2^-24 of Σ|terms|
        const double bound = double(k + 2) * 0x1p-24 * (mag + 0.5);
        CHECK(std::fabs(double(y[size_t(j * ystride)]) - (0.5 + ref)) <= bound);
        CHECK(y[size_t(j * ystride + 1)] == 0.5f);  // the stride's gaps are not written
      }
    }
  }
}

TEST_CASE("gemm's one-row products read an operand's BF16 copy") {
  // a linear layer's shape: x [m, k] · Wᵀ with W [n, k] row-major (Operand trans = true)
  const int64_t n = 96, k = 114;
  Rng rng(4);
  std::vector<float> w(size_t(n * k)), x(size_t(8 * k));
  for (auto& v : w) v = float(rng.uniform(-1.0, 1.0));
  for (auto& v : x) v = float(rng.uniform(-1.0, 1.0));
  const std::vector<uint16_t> wb = round_to_bf16(w.data(), int64_t(w.size()));
  for (int64_t m : {1, 2, 8}) {
    std::vector<float> got(size_t(m * n)), want(size_t(m * n), 0.0f);
    ops::detail::gemm<float>(m, n, k, {x.data(), k, false}, {w.data(), k, true, wb.data()},
                             got.data(), n, false);
    for (int64_t r = 0; r < m; ++r)
      bf16_dot_rows(n, k, x.data() + r * k, wb.data(), k, want.data() + r * n, 1);
    CHECK(got == want);  // the BF16 kernel's own bits, row by row
  }
}

TEST_CASE("bf16_dot_rows_multi gives each row the one-row kernel's bits") {
  Rng rng(5);
  for (int64_t k : {1, 8, 15, 16, 17, 33, 114, 360}) {
    const int64_t rows = 37, ldw = k + 1, ldx = k + 2;
    std::vector<float> wf(static_cast<size_t>(rows * ldw)), x(static_cast<size_t>(11 * ldx));
    for (auto& v : wf) v = float(rng.uniform(-1.0, 1.0));
    for (auto& v : x) v = float(rng.uniform(-1.0, 1.0));
    const std::vector<uint16_t> w = round_to_bf16(wf.data(), int64_t(wf.size()));
    for (int64_t m : {1, 2, 7, 8, 11}) {
      std::vector<float> got(static_cast<size_t>(m * rows), 0.25f), want = got;
      bf16_dot_rows_multi(m, rows, k, x.data(), ldx, w.data(), ldw, got.data(), rows);
      for (int64_t r = 0; r < m; ++r)
        bf16_dot_rows(rows, k, x.data() + r * ldx, w.data(), ldw, want.data() + r * rows, 1);
      CHECK(got == want);
    }
  }
}

TEST_CASE("use_bf16_weights rounds the weight matrices only, also of an encoder model") {
  model::ModelConfig mc;
  mc.comp_embed_layer_sizes = {32, 16};
  mc.drops = {0.05, 0.05};
  mc.lstm_embedding_size = 8;
  mc.expr_embed_size = 8;
  for (bool encoder : {false, true}) {
    model::ModelConfig c = mc;
    if (encoder) {
      c.encoder.kind = model::EncoderKind::AccessMatrix;
      c.encoder.access.hidden = 2;
    }
    model::CostModel<float> m(c, 3);
    CHECK_FALSE(m.bf16_weights());
    m.use_bf16_weights();
    CHECK(m.bf16_weights());
    int matrices = 0;
    for (const auto& p : m.params().all()) {
      const bool bits = !p.bf16.bits.empty();
      matrices += bits ? 1 : 0;
      if (p.name.find("bias") != std::string::npos) CHECK_FALSE(bits);
      if (bits)
        for (size_t i = 0; i < p.value.size(); ++i) CHECK(p.value[i] == from_bf16(p.bf16.bits[i]));
    }
    CHECK(matrices > 10);
    const model::CostModel<float> copy = m;  // a copy keeps the values, not the copies
    CHECK_FALSE(copy.bf16_weights());
  }
}

TEST_CASE("a scorer with BF16 weights answers within the rounding of the FP32 weights") {
  const Fixture& f = fixture();
  auto fp32 = make_scorer(false, 0);
  auto bf16 = make_scorer(true, 0);
  CHECK(bf16->predictor().bf16_weights());
  CHECK_FALSE(fp32->predictor().bf16_weights());
  double max_diff = 0, sum_diff = 0, spread = 0;
  int n = 0, differ = 0;
  for (const test::QueryProgram& q : f.programs)
    for (size_t i = 0; i < q.schedules.size() && i < 30; ++i) {
      const auto a = fp32->score(q.program, q.untransformed, {q.schedules[i]})[0];
      const auto b = bf16->score(q.program, q.untransformed, {q.schedules[i]})[0];
      REQUIRE(a.reason == b.reason);
      if (!a.ok()) continue;
      const double d = std::fabs(std::log(a.speedup) - std::log(b.speedup));
      max_diff = std::max(max_diff, d);
      sum_diff += d;
      spread = std::max(spread, std::fabs(std::log(a.speedup)));
      differ += a.speedup != b.speedup ? 1 : 0;
      ++n;
    }
  REQUIRE(n > 0);
  std::printf(
      "bf16 vs fp32 over %d schedules: |d ln speedup| mean %.3g, max %.3g (|ln speedup| "
      "up to %.3g)\n",
      n, sum_diff / n, max_diff, spread);
  CHECK(differ > 0);  // the weights were rounded
  // Each weight moves by at most 2^-8 of itself (to_bf16); with independent signs a dot product
  // moves by about 2^-8/√K of the sum of its terms' magnitudes, at most 2^-8 of it, and the
  // model's eight or so layers in series add up to at most ~8·2^-8 ≈ 0.03 of the activations'
  // scale, typically far less. Bounds of 0.02 of the answers' spread (largest |ln speedup|) on
  // every answer, and 0.002 on the mean, hold with a margin (measured: about 0.0015 and 0.0001)
  // and fail for a wrong kernel (a mis-read weight moves answers by their whole scale).
  CHECK(max_diff <= 0.02 * spread);
  CHECK(sum_diff / n <= 0.002 * spread);
}

TEST_CASE("with BF16 weights the memo still gives the whole forward's answers bit for bit") {
  const Fixture& f = fixture();
  auto memo = make_scorer(true, serve::kDefaultMemoBytes);
  auto whole = make_scorer(true, 0);
  int diff = 0, n = 0;
  for (const test::QueryProgram& q : f.programs)
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < q.schedules.size() && i < 20; ++i) {
        const auto a = memo->score(q.program, q.untransformed, {q.schedules[i]})[0];
        const auto b = whole->score(q.program, q.untransformed, {q.schedules[i]})[0];
        diff += a.speedup != b.speedup || a.reason != b.reason ? 1 : 0;
        ++n;
      }
  CHECK(n > 0);
  CHECK(diff == 0);
  CHECK(memo->cache_stats().memo_output_hits > 0);
}

TEST_CASE("PredictorOptions::weights round-trips through liblcm") {
  const Fixture& f = fixture();
  const test::QueryProgram& q = f.programs[0];
  lcm::PredictorOptions o;
  o.weights_path = f.ckpt;
  o.overrides = {"training.threads=1"};
  lcm::Predictor plain(o);
  o.weights = "bf16";
  lcm::Predictor half(o);
  CHECK(plain.info_json().find("\"weights\":\"fp32\"") != std::string::npos);
  CHECK(half.info_json().find("\"weights\":\"bf16\"") != std::string::npos);
  const std::vector<double> a = plain.predict(q.program, q.schedules, q.untransformed);
  const std::vector<double> b = half.predict(q.program, q.schedules, q.untransformed);
  REQUIRE(a.size() == b.size());
  double spread = 0;  // as in the scorer's case above: 0.02 of the largest |ln speedup|
  for (double v : a) spread = std::max(spread, std::fabs(std::log(v)));
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(std::fabs(std::log(a[i]) - std::log(b[i])) <= 0.02 * spread);
  o.weights = "fp16";
  try {
    lcm::Predictor bad(o);
    FAIL("weights=fp16 was accepted");
  } catch (const lcm::Error& e) {
    CHECK(std::string(e.reason()) == "config");
    CHECK(std::string(e.what()).find("fp16") != std::string::npos);
  }
}
