// Tests of the docs/model-spec.md §8 autoencoders (model/autoencoder.hpp): input assembly and the
// §3.10 thresholding, finite-difference gradient checks in double, golden values from the PyTorch
// reference (bench/reference/make_autoencoder_fixture.py) and the published [PAM] weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "model/autoencoder.hpp"
#include "support/model_support.hpp"
#include "support/numeric_support.hpp"
#include "support/test_support.hpp"

namespace {

using lcm::GradCheckResult;
using lcm::NodeId;
using lcm::Parameter;
using lcm::Rng;
using lcm::SafeTensorsFile;
using lcm::Tape;
using lcm::model::Autoencoder;
using lcm::model::AutoencoderConfig;
using lcm::model::EncoderKind;

using lcm::test::normwise;

template <class T>
std::vector<double> values(const lcm::Tensor<T>& t) {
  return std::vector<double>(t.data, t.data + t.shape.numel());
}

/// The sizes the fixture writer used (COMP_SIZES / ACCESS_SIZES of make_autoencoder_fixture.py).
AutoencoderConfig fixture_config(EncoderKind k) {
  return lcm::test::autoencoder_config(k, {5, 6, 7, 4, 3, 8, 6, 20, 12, 16, 8});
}

/// Rows [n, 1636] / [n, 704] of real computations (the exported batch), built by lcm's own
/// input assembly.
std::vector<float> real_rows(EncoderKind k, int64_t n) {
  const SafeTensorsFile b =
      lcm::read_safetensors(lcm::test::source_path("tests/fixtures/model_batch_input.safetensors"));
  const std::vector<float> comp = b.find("comp")->to_float();
  const std::vector<float> expr = b.find("expr")->to_float();
  REQUIRE(int64_t(comp.size()) >= n * 910);
  const int64_t W =
      k == EncoderKind::CompVector ? lcm::model::kCompAeInputWidth : lcm::model::kAccessInputWidth;
  std::vector<float> rows(size_t(n * W));
  for (int64_t r = 0; r < n; ++r) {
    if (k == EncoderKind::CompVector)
      lcm::model::comp_vector_ae_input(&comp[size_t(r * 910)], &expr[size_t(r * 726)],
                                       &rows[size_t(r * W)]);
    else
      lcm::model::access_ae_input(&comp[size_t(r * 910)], &rows[size_t(r * W)]);
  }
  return rows;
}

template <class T>
void check_golden(EncoderKind kind) {
  const std::string prefix = kind == EncoderKind::CompVector ? "comp." : "access.";
  const SafeTensorsFile g = lcm::read_safetensors(
      lcm::test::source_path("tests/fixtures/autoencoder_golden.safetensors"));
  Autoencoder<T> ae(fixture_config(kind), 99);
  for (auto& p : ae.params().all()) {
    const lcm::SafeTensor* t = g.find(prefix + p.name);
    REQUIRE_MESSAGE(t != nullptr, "fixture lacks " << prefix + p.name);
    REQUIRE_MESSAGE(t->shape == lcm::shape_vector(p.shape), "shape of " << p.name);
    const std::vector<double> v = t->to_double();
    std::copy(v.begin(), v.end(), p.value.begin());
  }
  // lcm's input assembly equals PyTorch's (thresholding in float32: allow 1 ulp-ish)
  const std::vector<float> input = g.find(prefix + "input")->to_float();
  const int64_t W = ae.config().input_width();
  const int64_t n = int64_t(input.size()) / W;
  const std::vector<float> mine = real_rows(kind, n);
  double worst = 0;
  for (size_t i = 0; i < input.size(); ++i)
    worst = std::max(worst, double(std::abs(mine[i] - input[i])));
  CHECK(worst <= 1e-6);

  const double tol = std::is_same_v<T, double> ? 1e-10 : 2e-5;
  const double gtol = std::is_same_v<T, double> ? 1e-9 : 1e-4;
  Tape<T> tape;
  tape.set_training(false);
  Rng rng(1);
  ae.params().zero_grad();
  const NodeId rec = ae.reconstruct(tape, input.data(), n, rng);
  const std::vector<float> target(input.begin(), input.end());
  const NodeId tgt = tape.new_node(lcm::Shape{n, W}, "target");
  std::copy(target.begin(), target.end(), tape.value(tgt).data);
  const NodeId loss = lcm::ops::mse(tape, rec, tgt);
  tape.backward(loss);
  const double e_rec = normwise(values(tape.value(rec)), g.find(prefix + "recon")->to_double());
  const double ref_loss = g.find(prefix + "loss")->to_double()[0];
  const double e_loss = std::abs(double(tape.value(loss).data[0]) - ref_loss) / ref_loss;
  MESSAGE(prefix << " T=" << std::string(sizeof(T) == 4 ? "float" : "double") << ": recon err "
                 << e_rec << ", loss err " << e_loss);
  CHECK(e_rec <= tol);
  CHECK(e_loss <= tol);
  for (auto& p : ae.params().all()) {
    const double e = normwise(std::vector<double>(p.grad.begin(), p.grad.end()),
                              g.find(prefix + "grad." + p.name)->to_double());
    CHECK_MESSAGE(e <= gtol, "gradient of " << p.name << ": " << e);
  }
  // Autoencoder::loss is the same MSE
  Tape<T> t2;
  t2.set_training(false);
  const double l2 = double(t2.value(ae.loss(t2, input.data(), n, rng)).data[0]);
  CHECK(std::abs(l2 - ref_loss) / ref_loss <= tol);
  // the encoder alone (eval: dropout off)
  Tape<T> t3;
  t3.set_training(false);
  const NodeId emb = lcm::model::encode(t3, ae.params(), ae.config(), input.data(), n, false, rng);
  CHECK(normwise(values(t3.value(emb)), g.find(prefix + "embedding")->to_double()) <= tol);
}

/// grad_check over every parameter with at most `max_numel` elements (the big decoder output
/// weight is a plain linear layer, covered by the golden test and the engine's op checks).
void check_gradients(const AutoencoderConfig& cfg, int64_t rows, int64_t max_numel) {
  Autoencoder<double> ae(cfg, 5);
  const std::vector<float> x = real_rows(cfg.kind, rows);
  std::vector<Parameter<double>*> params;
  for (auto& p : ae.params().all())
    if (p.numel() <= max_numel) params.push_back(&p);
  REQUIRE(params.size() + 1 >= ae.params().size());  // at most the big output weight is left out
  auto build = [&](Tape<double>& t) {
    Rng rng(77);
    t.set_training(true);  // dropout on, same mask every rebuild
    return lcm::weighted_sum(t, ae.reconstruct(t, x.data(), rows, rng), 3);
  };
  // eps 1e-5: the scalarised reconstruction is a sum over n·1636 outputs (|L| ~ 1e3), so the
  // central difference's rounding noise is ~ 1e-16·|L|/eps; rtol 1e-4 still catches any real
  // backward bug (those are O(1) relative)
  const GradCheckResult r = lcm::grad_check(params, build, 1e-5, 1e-7, 1e-4);
  INFO(r.worst);
  CHECK(r.ok);
  for (auto* p : params) {
    double s = 0;
    for (double v : p->grad) s += std::abs(v);
    INFO(p->name);
    CHECK(s > 0);
  }
}

}  // namespace

TEST_CASE("autoencoder: log10 thresholding of model-spec §3.10") {
  using lcm::model::log10_threshold;
  CHECK(log10_threshold(0.f) == 0.f);
  CHECK(log10_threshold(9.f) == 9.f);
  CHECK(log10_threshold(-9.5f) == -9.5f);
  CHECK(log10_threshold(10.f) == doctest::Approx(1.0));
  CHECK(log10_threshold(-100.f) == doctest::Approx(-2.0));
  CHECK(log10_threshold(1e8f) == doctest::Approx(8.0));
  CHECK(std::isnan(log10_threshold(NAN)));
}

TEST_CASE("autoencoder: access sequence layout (model-spec §8.2)") {
  std::vector<float> comp(910);
  for (int i = 0; i < 910; ++i) comp[size_t(i)] = float(i);
  std::vector<float> seq(704);
  lcm::model::access_ae_input(comp.data(), seq.data());
  CHECK(seq[0] == -1.f);
  CHECK(seq[1] == 207.f);   // write_buffer_id + 1
  CHECK(seq[43] == 249.f);  // last write-matrix value
  CHECK(seq[44] == 250.f);  // read 1: is_reduction
  CHECK(seq[703] == 909.f);
}

TEST_CASE("autoencoder: parameter counts of the release sizes (model-spec §8.1, §8.2)") {
  AutoencoderConfig c;
  c.kind = EncoderKind::CompVector;
  Autoencoder<float> comp(c, 1);
  int64_t enc = 0, dec = 0;
  for (auto& p : comp.params().all()) (p.name.rfind("encoder.", 0) == 0 ? enc : dec) += p.numel();
  CHECK(enc == 591912);
  CHECK(dec == 2896636);
  c.kind = EncoderKind::AccessMatrix;
  Autoencoder<float> acc(c, 1);
  enc = dec = 0;
  for (auto& p : acc.params().all()) (p.name.rfind("encoder.", 0) == 0 ? enc : dec) += p.numel();
  CHECK(enc == 20480);
  CHECK(dec == 451264);
  CHECK(lcm::test::error_of<std::invalid_argument>([] {
          lcm::model::parse_encoder_kind("comp");
        }).find("expected none|comp_vector|access_matrix") != std::string::npos);
  CHECK(AutoencoderConfig::from_json(c.to_json()).to_json() == c.to_json());
}

TEST_CASE("autoencoder: gradient check, computation-vector AE (double, dropout on)") {
  AutoencoderConfig c;
  c.kind = EncoderKind::CompVector;
  c.comp = {2, 2, 2, 2, 2, 2, 2, 4, 3, 3, 2};
  check_gradients(c, 8, 2000);
}

TEST_CASE("autoencoder: gradient check, access-matrix LSTM AE (double, dropout on)") {
  AutoencoderConfig c;
  c.kind = EncoderKind::AccessMatrix;
  c.access.hidden = 2;
  check_gradients(c, 6, 2000);
}

TEST_CASE("autoencoder: computation-vector AE matches PyTorch (double and float)") {
  check_golden<double>(EncoderKind::CompVector);
  check_golden<float>(EncoderKind::CompVector);
}

TEST_CASE("autoencoder: access-matrix AE matches PyTorch (double and float)") {
  check_golden<double>(EncoderKind::AccessMatrix);
  check_golden<float>(EncoderKind::AccessMatrix);
}

TEST_CASE("autoencoder: the published access-matrix weights load and reproduce PyTorch") {
  LCM_REQUIRE_SHARED(path, "pretrained/access_matrix_autoencoder_published.safetensors");
  AutoencoderConfig c;
  c.kind = EncoderKind::AccessMatrix;  // release sizes: hidden 20
  Autoencoder<float> ae(c, 1);
  lcm::load_parameters(path, ae.params(), /*strict=*/true);  // every name and shape matches
  const SafeTensorsFile g = lcm::read_safetensors(
      lcm::test::source_path("tests/fixtures/autoencoder_golden.safetensors"));
  const int64_t n = std::stoll(g.metadata.at("published_rows"));
  const std::vector<float> x = real_rows(EncoderKind::AccessMatrix, n);
  Tape<float> t;
  t.set_training(false);
  Rng rng(1);
  const NodeId rec = ae.reconstruct(t, x.data(), n, rng);
  const double e = normwise(values(t.value(rec)), g.find("published.recon")->to_double());
  MESSAGE("published AE: reconstruction err vs PyTorch " << e);
  CHECK(e <= 1e-5);
  const NodeId l = ae.loss(t, x.data(), n, rng);
  const double mse = double(t.value(l).data[0]);
  MESSAGE("published AE: MSE on " << n << " real computations " << mse);
  CHECK(std::abs(mse - g.find("published.loss")->to_double()[0]) <= 1e-6);
  CHECK(mse < 0.01);  // it really reconstructs (the inputs' mean square is ~0.29)
}

TEST_CASE("autoencoder: draw_mask masks the asked share, at least one entry a row") {
  Rng rng(3);
  const int64_t W = 100, n = 400;
  const std::vector<uint8_t> m = lcm::model::draw_mask(n * W, W, 0.15, rng);
  REQUIRE(int64_t(m.size()) == n * W);
  int64_t on = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t row = 0;
    for (int64_t k = 0; k < W; ++k) row += m[size_t(r * W + k)];
    CHECK(row >= 1);
    on += row;
  }
  CHECK(double(on) / double(n * W) == doctest::Approx(0.15).epsilon(0.07));
  // a tiny rate still masks one entry of every row
  Rng rng2(4);
  const std::vector<uint8_t> few = lcm::model::draw_mask(3 * 5, 5, 1e-9, rng2);
  for (int r = 0; r < 3; ++r) CHECK(few[size_t(r * 5)] == 1);
  Rng rng3(5);
  CHECK_THROWS_AS(lcm::model::draw_mask(10, 5, 0.0, rng3), std::invalid_argument);
  CHECK_THROWS_AS(lcm::model::draw_mask(10, 5, 1.0, rng3), std::invalid_argument);
  CHECK_THROWS_AS(lcm::model::draw_mask(11, 5, 0.5, rng3), std::invalid_argument);
}

TEST_CASE("autoencoder: masked_loss is the MSE of the masked entries of the masked view") {
  for (EncoderKind kind : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    Autoencoder<double> ae(fixture_config(kind), 11);
    const int64_t n = 5, W = ae.config().input_width();
    const std::vector<float> x = real_rows(kind, n);
    Rng mrng(9);
    const std::vector<uint8_t> mask = lcm::model::draw_mask(n * W, W, 0.3, mrng);
    // by hand: reconstruct the view with the masked entries zeroed (eval: dropout off)
    std::vector<float> view = x;
    int64_t count = 0;
    for (int64_t i = 0; i < n * W; ++i)
      if (mask[size_t(i)]) view[size_t(i)] = 0.f, ++count;
    Tape<double> t1;
    t1.set_training(false);
    Rng r1(1);
    const std::vector<double> rec = values(t1.value(ae.reconstruct(t1, view.data(), n, r1)));
    double want = 0, all = 0;
    for (int64_t i = 0; i < n * W; ++i) {
      const double d = rec[size_t(i)] - double(x[size_t(i)]);
      if (mask[size_t(i)]) want += d * d;
      all += d * d;
    }
    want /= double(count);
    Tape<double> t2;
    t2.set_training(false);
    Rng r2(1);
    const double got = t2.value(ae.masked_loss(t2, x.data(), n, mask, r2)).data[0];
    CHECK(got == doctest::Approx(want).epsilon(1e-12));
    CHECK(std::abs(got - all / double(n * W)) > 1e-9 * std::abs(got));  // not the plain MSE
    // a mask of the wrong size, or one that masks nothing, is refused
    Tape<double> t3;
    Rng r3(1);
    CHECK_THROWS_AS(ae.masked_loss(t3, x.data(), n, std::vector<uint8_t>(size_t(n * W - 1), 1), r3),
                    std::invalid_argument);
    CHECK_THROWS_AS(ae.masked_loss(t3, x.data(), n, std::vector<uint8_t>(size_t(n * W), 0), r3),
                    std::invalid_argument);
  }
}

TEST_CASE("autoencoder: contrastive_loss is InfoNCE over tanh embeddings, duplicates positive") {
  for (EncoderKind kind : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    Autoencoder<double> ae(fixture_config(kind), 12);
    const int64_t W = ae.config().input_width(), E = ae.config().embedding_width();
    std::vector<float> x = real_rows(kind, 4);
    // rows 4 and 5 repeat rows 0 and 2: they are positives of each other, not negatives
    x.insert(x.end(), x.begin(), x.begin() + W);
    x.insert(x.end(), x.begin() + 2 * W, x.begin() + 3 * W);
    const int64_t n = 6;
    Rng mrng(10);
    const std::vector<uint8_t> ma = lcm::model::draw_mask(n * W, W, 0.2, mrng);
    const std::vector<uint8_t> mb = lcm::model::draw_mask(n * W, W, 0.2, mrng);
    const double tau = 0.5;
    auto embed = [&](const std::vector<uint8_t>& m) {
      std::vector<float> v = x;
      for (int64_t i = 0; i < n * W; ++i)
        if (m[size_t(i)]) v[size_t(i)] = 0.f;
      Tape<double> t;
      t.set_training(false);
      Rng r(1);
      std::vector<double> z =
          values(t.value(lcm::model::encode(t, ae.params(), ae.config(), v.data(), n, false, r)));
      for (double& e : z) e = std::tanh(e);
      return z;
    };
    const std::vector<double> za = embed(ma), zb = embed(mb);
    int rep[6] = {0, 1, 2, 3, 0, 2};
    // one direction: rows of p against columns of q; softmax(30·[positive]) as the target
    auto direction = [&](const std::vector<double>& p, const std::vector<double>& q) {
      double loss = 0;
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> s(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        double smax = -1e300, wsum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t k = 0; k < E; ++k) d += p[size_t(i * E + k)] * q[size_t(j * E + k)];
          s[size_t(j)] = d / (double(E) * tau);
          smax = std::max(smax, s[size_t(j)]);
          w[size_t(j)] = std::exp(rep[i] == rep[j] ? 30.0 : 0.0);
          wsum += w[size_t(j)];
        }
        double lse = 0;
        for (double v : s) lse += std::exp(v - smax);
        lse = smax + std::log(lse);
        for (int64_t j = 0; j < n; ++j) loss -= w[size_t(j)] / wsum * (s[size_t(j)] - lse);
      }
      return loss / double(n);
    };
    const double want = 0.5 * (direction(za, zb) + direction(zb, za));
    Tape<double> t;
    t.set_training(false);
    Rng r(1);
    const double got = t.value(ae.contrastive_loss(t, x.data(), n, ma, mb, tau, r)).data[0];
    CHECK(got == doctest::Approx(want).epsilon(1e-10));
    CHECK(got > 0);
    // the duplicates count as positives: the loss that treats them as negatives differs
    const int distinct[6] = {0, 1, 2, 3, 4, 5};
    std::copy(distinct, distinct + 6, rep);
    const double negatives = 0.5 * (direction(za, zb) + direction(zb, za));
    CHECK(std::abs(negatives - got) > 1e-6);
    Tape<double> tb;
    Rng rb(1);
    CHECK_THROWS_AS(ae.contrastive_loss(tb, x.data(), n, ma, mb, 0.0, rb), std::invalid_argument);
    CHECK_THROWS_AS(ae.contrastive_loss(tb, x.data(), n, ma, std::vector<uint8_t>(3, 1), tau, rb),
                    std::invalid_argument);
  }
}

TEST_CASE("autoencoder: gradient check of the masked and contrastive losses (double)") {
  for (EncoderKind kind : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    Autoencoder<double> ae(fixture_config(kind), 13);
    const int64_t n = 4, W = ae.config().input_width();
    std::vector<float> x = real_rows(kind, n - 1);
    x.insert(x.end(), x.begin(), x.begin() + W);  // a duplicate row: a second positive
    Rng mrng(14);
    const std::vector<uint8_t> ma = lcm::model::draw_mask(n * W, W, 0.25, mrng);
    const std::vector<uint8_t> mb = lcm::model::draw_mask(n * W, W, 0.25, mrng);
    std::vector<Parameter<double>*> params;
    for (auto& p : ae.params().all())
      if (p.numel() <= 2000) params.push_back(&p);
    for (int which = 0; which < 2; ++which) {
      auto build = [&](Tape<double>& t) {
        Rng rng(77);
        t.set_training(true);  // dropout on, same mask every rebuild
        return which == 0 ? ae.masked_loss(t, x.data(), n, ma, rng)
                          : ae.contrastive_loss(t, x.data(), n, ma, mb, 0.2, rng);
      };
      const GradCheckResult r = lcm::grad_check(params, build, 1e-6, 1e-8, 1e-4);
      INFO((which == 0 ? "masked " : "contrastive ") << r.worst);
      CHECK(r.ok);
      // the encoder's parameters get a gradient from both losses
      double enc = 0;
      for (auto* p : params)
        if (p->name.rfind("encoder.", 0) == 0)
          for (double v : p->grad) enc += std::abs(v);
      CHECK(enc > 0);
    }
  }
}
