// Golden tests: lcm's ops, fused LSTM and AdamW (float32 and float64) against PyTorch values
// committed in tests/fixtures/golden_*.safetensors (written by bench/reference/make_fixtures.py
// with Debian's python3-torch; inputs stored as float32, references computed by PyTorch in
// float64).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/parameter.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "support/test_support.hpp"
#include "util/atomic_file.hpp"

namespace {

using lcm::NodeId;
using lcm::Parameter;
using lcm::ParameterStore;
using lcm::Shape;
using lcm::Tape;

// ---- tolerances -------------------------------------------------------------------------------
// Criterion (every comparison): equal shapes and the normwise relative error
//     err = max_i |a_i − b_i| / max(max_i |b_i|, 1e-30)  ≤  tol,
// a = lcm's result, b = PyTorch's float64 reference computed from the same (float32-exact) inputs.
// Why normwise: rounding errors scale with the magnitude of the operands, not of each result
// (e.g. tanh'(x) = 1 − tanh² cancels: absolute error ≈ u even where the value is 1e-3), so an
// element-wise relative test would flag correct code; the tensor's largest magnitude is the
// natural scale. Formula bugs (wrong slope, missing bias, transposed weight, swapped gate) move
// results by ≥ 1e-2 of that scale, 3 orders above every float32 tolerance; the float64 runs
// (tolerance 1e-10) also catch small formula deviations that float32 noise would hide. Measured
// in PyTorch on these fixtures: MAPE without its +1e-5 moves the loss by 7.8e-6 (passes the
// float32 test, fails the float64 one); Adam's ε added before dividing by √(1−β2^t) moves the
// weights by 7.5e-8 (float64 only); L2-coupled decay (Adam instead of AdamW) by 8.2e-4 (both);
// an LSTM without b_hh or with gates i/f swapped by ≈ 0.6 (both).
template <class T>
struct Tolerances;

template <>
struct Tolerances<float> {
  // Single ops and LSTM forward: 1e-5 ≈ 170 u (u = 2^-24 ≈ 6e-8). A dot product of length n ≤ 10
  // errs by ≤ n·u·Σ|a_i b_i| ≈ 6e-7 of the scale, libm float32 exp/tanh by a few ulp; PyTorch's
  // own float32 run of these fixtures deviates from its float64 run by ≤ 1.7e-7.
  static constexpr double op = 1e-5;
  // LSTM gradients (T = 4): backprop through time accumulates the rounding of 4 steps × up to
  // 2 layers × 2 directions of dot products of length ≤ 4H + In = 30 (each ≤ 30 u): a bound of
  // ~16·30·u ≈ 3e-5 if every error aligned. PyTorch's float32 run deviates by ≤ 2.9e-7
  // (fixture metadata "torch_f32_vs_f64_grad_normwise").
  static constexpr double lstm_grad = 5e-5;
  // The 66-step LSTM (forward and gradients): the recurrence contracts (|f| < 1, |tanh'| ≤ 1),
  // so a step's rounding is carried but not amplified and the error grows at most linearly in T:
  // 66/4 × the 4-step bound ≈ 5e-4 if every rounding aligned, ~√16 × 3e-5 ≈ 1.2e-4 for
  // independent ones. PyTorch's float32 run deviates by ≤ 2.9e-7 on this fixture.
  static constexpr double lstm_long = 2e-4;
  // 5 AdamW steps, lr 1e-2 (weights after each step, per-step losses): each step moves a weight
  // by lr·m̂/(√v̂+ε), |·| ≲ 1, whose float32 error (≈ 10 u relative plus the gradient's own error
  // passed through the normalisation) is ≲ 1e-7 absolute; 5 steps plus the rounding of w (u·|w|)
  // stay ≲ 1e-6 of max|w| ≈ 0.5–1. PyTorch's float32 run deviates by ≤ 1.7e-7 absolute in the
  // weights and 1.2e-7 relative in the losses (fixture metadata).
  static constexpr double adamw = 5e-5;
};

template <>
struct Tolerances<double> {
  // Same inputs, both sides in float64 (u = 1.1e-16): only summation order and libm differ, so
  // errors are ~1e-15 (×66 steps for the long LSTM); 1e-10 leaves 5 orders of margin.
  static constexpr double op = 1e-10;
  static constexpr double lstm_grad = 1e-10;
  static constexpr double lstm_long = 1e-10;
  static constexpr double adamw = 1e-10;
};

template <class T>
const char* type_name() {
  return sizeof(T) == 4 ? "f32" : "f64";
}

/// Path of a committed fixture.
std::string fixture(const std::string& name) {
  return lcm::test::source_path("tests/fixtures/" + name + ".safetensors");
}

/// One fixture file read with lcm's safetensors reader. `get<T>(name)` returns a tensor's values
/// as T (F32 inputs widen exactly to double; F64 references are used as double). Throws
/// std::out_of_range naming a missing tensor.
struct Fixture {
  lcm::SafeTensorsFile file;
  explicit Fixture(const std::string& path) : file(lcm::read_safetensors(path)) {}
  const lcm::SafeTensor& at(const std::string& name) const {
    const lcm::SafeTensor* t = file.find(name);
    if (!t) throw std::out_of_range("fixture has no tensor " + name);
    return *t;
  }
  Shape shape(const std::string& name) const { return lcm::to_shape(at(name).shape, name); }
  std::vector<double> d(const std::string& name) const { return at(name).to_double(); }
  template <class T>
  std::vector<T> get(const std::string& name) const {
    if constexpr (sizeof(T) == 4)
      return at(name).to_float();
    else
      return at(name).to_double();
  }
};

/// Result of comparing lcm's values with a reference (see the criterion above).
struct Comparison {
  bool ok = false;
  double err = 0;  ///< normwise relative error (inf on a shape mismatch or a non-finite value)
  std::string what;
};

/// Normwise comparison of `actual` (lcm, float or double) against `expected` (float64 reference):
/// ok iff shapes are equal, every actual value is finite and max|a−b| / max(max|b|, 1e-30) ≤ tol.
template <class T>
Comparison compare(const std::string& what, const T* actual, const Shape& actual_shape,
                   const std::vector<double>& expected, const Shape& expected_shape, double tol) {
  Comparison c;
  c.what = what;
  if (actual_shape != expected_shape || int64_t(expected.size()) != expected_shape.numel()) {
    c.err = INFINITY;
    c.what += " shape " + actual_shape.str() + " vs reference " + expected_shape.str();
    return c;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = double(actual[i]);
    if (!std::isfinite(a)) num = INFINITY;
    num = std::max(num, std::abs(a - expected[i]));
    den = std::max(den, std::abs(expected[i]));
  }
  c.err = num / std::max(den, 1e-30);
  c.ok = c.err <= tol;
  return c;
}

/// Reports the measured error (visible with -s) and CHECKs it.
void check(const Comparison& c, double tol) {
  MESSAGE(c.what << ": normwise rel err " << c.err << " (tol " << tol << ")");
  CHECK_MESSAGE(c.ok, c.what << ": normwise rel err " << c.err << " > tol " << tol);
}

/// Adds a parameter called `name` holding the fixture tensor `fixture_name`.
template <class T>
Parameter<T>& add_from(ParameterStore<T>& store, const Fixture& fx, const std::string& name,
                       const std::string& fixture_name) {
  Parameter<T>& p = store.add(name, fx.shape(fixture_name));
  std::vector<T> v = fx.get<T>(fixture_name);
  REQUIRE(int64_t(v.size()) == p.numel());
  std::copy(v.begin(), v.end(), p.value.begin());
  return p;
}

/// A constant node holding the fixture tensor `name`.
template <class T>
NodeId constant_from(Tape<T>& t, const Fixture& fx, const std::string& name) {
  std::vector<T> v = fx.get<T>(name);
  return t.constant(v.data(), fx.shape(name));
}

/// Σ(r ⊙ y): the asymmetric scalarisation whose gradients the fixtures hold.
template <class T>
NodeId weighted_sum(Tape<T>& t, NodeId y, NodeId r) {
  return lcm::ops::sum(t, lcm::ops::mul(t, y, r));
}

/// Runs linear on the fixture's W, b and the input `pre`x ("" → x [5,7], "batched." → x [2,3,7])
/// and compares the output and all three gradients (tolerance Tolerances<T>::op).
template <class T>
std::vector<Comparison> run_linear(const Fixture& fx, const std::string& pre = "") {
  const double tol = Tolerances<T>::op;
  ParameterStore<T> store;
  auto& x = add_from(store, fx, "x", pre + "x");
  auto& w = add_from(store, fx, "weight", "weight");
  auto& b = add_from(store, fx, "bias", "bias");
  Tape<T> t;
  NodeId y = lcm::ops::linear(t, t.param(x), t.param(w), t.param(b));
  t.backward(weighted_sum(t, y, constant_from(t, fx, pre + "r.y")));
  const std::string tag = std::string("linear ") + type_name<T>() + " " + pre;
  return {
      compare(tag + "y", t.value(y).data, t.shape(y), fx.d(pre + "y"), fx.shape(pre + "y"), tol),
      compare(tag + "grad x", x.grad.data(), x.shape, fx.d(pre + "grad.x"),
              fx.shape(pre + "grad.x"), tol),
      compare(tag + "grad W", w.grad.data(), w.shape, fx.d(pre + "grad.weight"),
              fx.shape(pre + "grad.weight"), tol),
      compare(tag + "grad b", b.grad.data(), b.shape, fx.d(pre + "grad.bias"),
              fx.shape(pre + "grad.bias"), tol)};
}

}  // namespace

TEST_CASE_TEMPLATE("golden: linear (x [5,7], W [4,7], b [4]) matches PyTorch", T, float, double) {
  Fixture fx(fixture("golden_linear"));
  for (const Comparison& c : run_linear<T>(fx)) check(c, Tolerances<T>::op);
}

TEST_CASE_TEMPLATE("golden: linear on a rank-3 input (x [2,3,7]) matches PyTorch", T, float,
                   double) {
  Fixture fx(fixture("golden_linear"));
  for (const Comparison& c : run_linear<T>(fx, "batched.")) check(c, Tolerances<T>::op);
}

TEST_CASE("golden: the comparison detects a tampered fixture") {
  // (1) A reference perturbed by 1e-4 of its scale in one element must fail the float32 tolerance.
  Fixture fx(fixture("golden_linear"));
  const double tol = Tolerances<float>::op;
  std::vector<double> y = fx.d("y");
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  std::vector<float> y32(y.begin(), y.end());
  CHECK(compare("untouched", y32.data(), fx.shape("y"), y, fx.shape("y"), tol).ok);
  std::vector<double> bad = y;
  bad[7] += 1e-4 * scale;
  CHECK_FALSE(compare("tampered", y32.data(), fx.shape("y"), bad, fx.shape("y"), tol).ok);
  // ... and a perturbation of 1e-8 must fail the float64 tolerance.
  std::vector<double> bad64 = y;
  bad64[7] += 1e-8 * scale;
  CHECK(compare("untouched f64", y.data(), fx.shape("y"), y, fx.shape("y"), Tolerances<double>::op)
            .ok);
  CHECK_FALSE(
      compare("tampered f64", y.data(), fx.shape("y"), bad64, fx.shape("y"), Tolerances<double>::op)
          .ok);
  // (2) A shape mismatch with the same element count fails.
  CHECK_FALSE(compare("reshaped", y32.data(), Shape{4, 5}, y, fx.shape("y"), tol).ok);
  // (3) A non-finite result fails.
  y32[3] = NAN;
  CHECK_FALSE(compare("nan", y32.data(), fx.shape("y"), y, fx.shape("y"), tol).ok);

  // (4) End to end: a copy of the fixture file with one value of the input x changed on disk
  // makes the linear golden test fail. x's bytes are found by searching the file for the
  // (unique) 140 data bytes the reader returns for it; the last float of them is rewritten.
  std::string dir = lcm::test::temp_dir("golden");
  std::string copy = dir + "/tampered_linear.safetensors";
  std::string bytes = lcm::read_file(fixture("golden_linear"));
  const std::string& x_bytes = fx.at("x").bytes;
  REQUIRE(x_bytes.size() == 5 * 7 * 4);
  const size_t pos = bytes.find(x_bytes);
  REQUIRE(pos != std::string::npos);
  REQUIRE(bytes.find(x_bytes, pos + 1) == std::string::npos);
  float v = 0;
  std::memcpy(&v, bytes.data() + pos + x_bytes.size() - 4, 4);
  v = v * 1.5f + 0.25f;
  std::memcpy(&bytes[pos + x_bytes.size() - 4], &v, 4);
  lcm::atomic_write_file(copy, bytes);
  Fixture tampered(copy);
  // The untampered file passes every comparison; the tampered one fails at least one.
  bool all_ok = true;
  for (const Comparison& c : run_linear<float>(fx)) all_ok = all_ok && c.ok;
  CHECK(all_ok);
  bool tampered_ok = true;
  for (const Comparison& c : run_linear<float>(tampered)) tampered_ok = tampered_ok && c.ok;
  CHECK_FALSE(tampered_ok);
  std::filesystem::remove_all(dir);
}

TEST_CASE("golden: a missing fixture tensor is a clear error, not a crash") {
  Fixture fx(fixture("golden_linear"));
  CHECK_THROWS_WITH_AS(fx.at("no_such_tensor"), "fixture has no tensor no_such_tensor",
                       std::out_of_range);
  CHECK_THROWS_AS(Fixture(fixture("no_such_fixture")), std::runtime_error);
}

TEST_CASE_TEMPLATE(
    "golden: ELU, LeakyReLU(0.01), sigmoid, tanh match PyTorch (values and gradients)", T, float,
    double) {
  const double tol = Tolerances<T>::op;
  Fixture fx(fixture("golden_activations"));
  for (const std::string op : {"elu", "leaky_relu", "sigmoid", "tanh"}) {
    CAPTURE(op);
    ParameterStore<T> store;
    auto& x = add_from(store, fx, "x", "x");
    Tape<T> t;
    NodeId xn = t.param(x);
    NodeId y = op == "elu"          ? lcm::ops::elu(t, xn)
               : op == "leaky_relu" ? lcm::ops::leaky_relu(t, xn, T(0.01))
               : op == "sigmoid"    ? lcm::ops::sigmoid(t, xn)
                                    : lcm::ops::tanh(t, xn);
    t.backward(weighted_sum(t, y, constant_from(t, fx, op + ".r")));
    const std::string tag = op + " " + type_name<T>();
    check(
        compare(tag + " y", t.value(y).data, t.shape(y), fx.d(op + ".y"), fx.shape(op + ".y"), tol),
        tol);
    check(compare(tag + " grad x", x.grad.data(), x.shape, fx.d(op + ".grad.x"),
                  fx.shape(op + ".grad.x"), tol),
          tol);
  }
}

TEST_CASE_TEMPLATE("golden: MAPE (model-spec §6), plain and batch-weighted, matches PyTorch", T,
                   float, double) {
  const double tol = Tolerances<T>::op;
  Fixture fx(fixture("golden_mape"));
  const double batch_weight = fx.d("weight").at(0);  // batch_len / batch_size = 6 / 8
  CHECK(batch_weight == doctest::Approx(0.75));
  for (const std::string tag : {"plain", "weighted"}) {
    CAPTURE(tag);
    ParameterStore<T> store;
    auto& pred = add_from(store, fx, "pred", "pred");
    Tape<T> t;
    NodeId target = constant_from(t, fx, "target");
    NodeId loss = lcm::ops::mape(t, t.param(pred), target, tag == "plain" ? T(1) : T(batch_weight));
    t.backward(loss);
    REQUIRE(t.value(loss).numel() == 1);
    const std::string name = tag + " " + type_name<T>();
    // The loss is a scalar: compared as one element (rank 0 in the fixture).
    check(compare(name + " loss", t.value(loss).data, Shape{}, fx.d(tag + ".loss"),
                  fx.shape(tag + ".loss"), tol),
          tol);
    check(compare(name + " grad pred", pred.grad.data(), pred.shape, fx.d(tag + ".grad.pred"),
                  fx.shape(tag + ".grad.pred"), tol),
          tol);
  }
}

namespace {

/// Runs ops::lstm on the fixture (weights "lstm.<state_dict name>", loaded through
/// add_lstm_parameters / lstm_weight_nodes) and compares output, h_n, c_n and the gradients of
/// Σ r.output⊙output + Σ r.h_n⊙h_n + Σ r.c_n⊙c_n w.r.t. x and every weight.
template <class T>
void check_lstm(const std::string& name, const lcm::LstmSpec& spec, double tol_forward,
                double tol_grad) {
  Fixture fx(fixture(name));
  ParameterStore<T> store;
  auto& x = add_from(store, fx, "x", "x");
  lcm::add_lstm_parameters(store, "lstm", spec);
  int n_weights = 0;
  for (auto& p : store.all()) {
    if (p.name == "x") continue;
    REQUIRE_MESSAGE(fx.shape(p.name) == p.shape, p.name);
    std::vector<T> v = fx.get<T>(p.name);
    std::copy(v.begin(), v.end(), p.value.begin());
    ++n_weights;
  }
  CHECK(n_weights == 4 * spec.num_layers * spec.directions());
  Tape<T> t;
  std::vector<lcm::LstmWeights> w = lcm::lstm_weight_nodes(t, store, "lstm", spec);
  lcm::LstmOutputs out = lcm::ops::lstm(t, t.param(x), spec, w);
  NodeId loss =
      lcm::ops::add(t, weighted_sum(t, out.output, constant_from(t, fx, "r.output")),
                    lcm::ops::add(t, weighted_sum(t, out.h_n, constant_from(t, fx, "r.h_n")),
                                  weighted_sum(t, out.c_n, constant_from(t, fx, "r.c_n"))));
  t.backward(loss);
  const std::string tag = name + " " + type_name<T>() + " ";
  const std::vector<std::pair<NodeId, std::string>> results = {
      {out.output, "output"}, {out.h_n, "h_n"}, {out.c_n, "c_n"}};
  for (const auto& [id, key] : results)
    check(compare(tag + key, t.value(id).data, t.shape(id), fx.d(key), fx.shape(key), tol_forward),
          tol_forward);
  for (auto& p : store.all()) {
    std::string ref = p.name == "x" ? "grad.x" : "grad." + p.name;
    check(compare(tag + ref, p.grad.data(), p.shape, fx.d(ref), fx.shape(ref), tol_grad), tol_grad);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("golden: LSTM (input 6, hidden 5, batch 3, T 4) matches torch.nn.LSTM", T, float,
                   double) {
  check_lstm<T>("golden_lstm", lcm::LstmSpec{6, 5, 1, false}, Tolerances<T>::op,
                Tolerances<T>::lstm_grad);
}

TEST_CASE_TEMPLATE("golden: BiLSTM (input 6, hidden 5, batch 3, T 4) matches torch.nn.LSTM", T,
                   float, double) {
  check_lstm<T>("golden_bilstm", lcm::LstmSpec{6, 5, 1, true}, Tolerances<T>::op,
                Tolerances<T>::lstm_grad);
}

TEST_CASE_TEMPLATE("golden: 2-layer BiLSTM (input 6, hidden 5, batch 3, T 4) matches torch.nn.LSTM",
                   T, float, double) {
  check_lstm<T>("golden_bilstm2", lcm::LstmSpec{6, 5, 2, true}, Tolerances<T>::op,
                Tolerances<T>::lstm_grad);
}

TEST_CASE_TEMPLATE(
    "golden: LSTM over 66 steps (input 11, hidden 4, batch 2; the exprs_embed pattern)", T, float,
    double) {
  check_lstm<T>("golden_lstm_long", lcm::LstmSpec{11, 4, 1, false}, Tolerances<T>::lstm_long,
                Tolerances<T>::lstm_long);
}

TEST_CASE_TEMPLATE(
    "golden: 5 AdamW steps (lr 1e-2, wd 0.015) on a tiny MLP with MAPE match torch.optim.AdamW", T,
    float, double) {
  // Model (make_fixtures.py TinyMlp): pred = fc2(ELU(fc1(x)))[:, 0], fc1 Linear 4→8, fc2 Linear
  // 8→1; loss = MAPE (docs/model-spec.md §6, weight 1) of pred vs y on x [16, 4], y [16], full
  // batch. Reference: PyTorch's float64 run from the same float32 initial weights.
  const double tol = Tolerances<T>::adamw;
  Fixture fx(fixture("golden_adamw"));
  CHECK(fx.file.metadata.at("lr") == "0.01");
  CHECK(fx.file.metadata.at("weight_decay") == "0.015");
  const std::vector<std::string> names = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  ParameterStore<T> store;
  for (const auto& n : names) add_from(store, fx, n, "init." + n);
  lcm::AdamOptions o;  // betas (0.9, 0.999), eps 1e-8: PyTorch's defaults
  o.lr = 1e-2;
  o.weight_decay = 0.015;
  lcm::AdamW<T> opt(lcm::parameter_pointers(store), o);
  const int steps = 5;
  std::vector<T> losses;
  for (int s = 1; s <= steps; ++s) {
    CAPTURE(s);
    Tape<T> t;
    opt.zero_grad();
    NodeId x = constant_from(t, fx, "x");
    NodeId h = lcm::ops::elu(
        t, lcm::ops::linear(t, x, t.param(store.at("fc1.weight")), t.param(store.at("fc1.bias"))));
    NodeId pred =
        lcm::ops::linear(t, h, t.param(store.at("fc2.weight")), t.param(store.at("fc2.bias")));
    pred = lcm::ops::reshape(t, pred, Shape{t.shape(pred)[0]});
    NodeId loss = lcm::ops::mape(t, pred, constant_from(t, fx, "y"));
    t.backward(loss);
    losses.push_back(t.value(loss)[0]);
    opt.step();
    for (const auto& n : names) {
      const std::string ref = "step" + std::to_string(s) + "." + n;
      Parameter<T>& p = store.at(n);
      check(compare(std::string("AdamW ") + type_name<T>() + " " + ref, p.value.data(), p.shape,
                    fx.d(ref), fx.shape(ref), tol),
            tol);
    }
  }
  check(compare(std::string("AdamW ") + type_name<T>() + " per-step losses", losses.data(),
                Shape{steps}, fx.d("losses"), fx.shape("losses"), tol),
        tol);
  // The weights really moved (the test would be vacuous if the optimizer did nothing).
  CHECK_FALSE(compare("AdamW moved", store.at("fc1.weight").value.data(),
                      store.at("fc1.weight").shape, fx.d("init.fc1.weight"),
                      fx.shape("init.fc1.weight"), tol)
                  .ok);
}

TEST_CASE(
    "golden: safetensors file in the reference layout (written by make_fixtures.py) reads back") {
  // tests/fixtures/safetensors_layout.safetensors holds hand-picked constants (the same literals
  // as bench/reference/make_fixtures.py fixture_layout), laid out like safetensors.torch.save_file:
  // header padded with spaces to 8 bytes, data sorted by the reference crate's dtype order
  // (I64, F64, F32) then name, a rank-0 tensor, an empty [0, 3] tensor, string metadata.
  lcm::SafeTensorsFile f = lcm::read_safetensors(fixture("safetensors_layout"));
  CHECK(f.metadata.at("format") == "pt");
  CHECK(f.metadata.at("lcm_note") == "reader layout fixture");
  CHECK(f.tensors.size() == 5);
  const lcm::SafeTensor* a = f.find("a_f32");
  REQUIRE(a);
  CHECK(a->dtype == "F32");
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->to_float() == std::vector<float>{0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 7.0f});
  CHECK(std::signbit(a->to_float()[4]));
  const lcm::SafeTensor* b = f.find("b_f64");
  REQUIRE(b);
  CHECK(b->dtype == "F64");
  CHECK(b->to_double() == std::vector<double>{M_PI, -M_E, 1e300});
  const lcm::SafeTensor* c = f.find("c_i64");
  REQUIRE(c);
  CHECK(c->dtype == "I64");
  CHECK(c->to_int64() == std::vector<int64_t>{-3, int64_t(1) << 40});
  const lcm::SafeTensor* d = f.find("d_scalar");
  REQUIRE(d);
  CHECK(d->shape.empty());
  CHECK(d->to_float() == std::vector<float>{42.0f});
  const lcm::SafeTensor* e = f.find("e_empty");
  REQUIRE(e);
  CHECK(e->shape == std::vector<int64_t>{0, 3});
  CHECK(e->to_float().empty());
  CHECK(f.find("absent") == nullptr);
}

TEST_CASE("golden: lcm's safetensors writer reproduces the reference layout byte for byte") {
  // Every fixture was written in the layout of the reference implementation (make_fixtures.py
  // write_safetensors: compact JSON, "__metadata__" first, data in header order, header padded
  // with spaces to 8 bytes). Read back and re-serialised by lcm (tensors kept in file order), the
  // bytes must be identical: the reader keeps every field and the writer emits the same layout.
  for (const char* name :
       {"safetensors_layout", "golden_linear", "golden_activations", "golden_mape", "golden_lstm",
        "golden_bilstm", "golden_bilstm2", "golden_lstm_long", "golden_adamw"}) {
    CAPTURE(name);
    const std::string original = lcm::read_file(fixture(name));
    const std::string again = lcm::serialize_safetensors(lcm::parse_safetensors(original, name));
    CHECK(again.size() == original.size());
    CHECK(again == original);
  }
}
