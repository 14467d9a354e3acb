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
