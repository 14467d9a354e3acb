// Tests of the fused LSTM op (engine/lstm.hpp): forward against a plain per-step reference and a
// hand formula, finite-difference gradients (double) through output, h_n and c_n for uni-, bi- and
// 2-layer bidirectional LSTMs, PyTorch parameter names/shapes, and the errors on bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/eigen.hpp"
#include "engine/gradcheck.hpp"
#include "engine/lstm.hpp"
#include "engine/ops/lstm_math.hpp"
#include "engine/rng.hpp"
#include "engine/threads.hpp"
#include "support/numeric_support.hpp"

using namespace lcm;

namespace {

template <class T>
void fill_uniform(std::vector<T>& v, Rng& rng, double lo, double hi) {
  for (T& x : v) x = T(rng.uniform(lo, hi));
}

/// A store holding the LSTM's parameters (uniform ±0.5) and the input x [B, S, In] (uniform ±1)
/// as a parameter "x" so that its gradient is checked like any weight.
template <class T>
struct LstmFixture {
  LstmSpec spec;
  int64_t B, S;
  ParameterStore<T> store;
  Parameter<T>* x = nullptr;

  LstmFixture(LstmSpec sp, int64_t b, int64_t s, uint64_t seed) : spec(sp), B(b), S(s) {
    add_lstm_parameters(store, "enc", spec);
    Rng rng(seed);
    for (auto& p : store.all()) fill_uniform(p.value, rng, -0.5, 0.5);
    x = &store.add("x", Shape{B, S, spec.input_size});
    fill_uniform(x->value, rng, -1.0, 1.0);
  }
  LstmOutputs run(Tape<T>& t) {
    NodeId xn = t.param(*x);
    return ops::lstm(t, xn, spec, lstm_weight_nodes(t, store, "enc", spec));
  }
  std::vector<Parameter<T>*> params() {
    std::vector<Parameter<T>*> ps;
    for (auto& p : store.all()) ps.push_back(&p);
    return ps;
  }
};

/// Plain per-step reference (torch.nn.LSTM equations written out with loops), in double.
struct Reference {
  std::vector<double> out, h_n, c_n;  // [B, S, D·H], [L·D, B, H], [L·D, B, H]
};

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

template <class T>
Reference reference_lstm(LstmFixture<T>& f) {
  const LstmSpec& sp = f.spec;
  const int64_t B = f.B, S = f.S, H = sp.hidden_size, D = sp.directions(), L = sp.num_layers;
  Reference r;
  r.h_n.assign(size_t(L * D * B * H), 0);
  r.c_n.assign(size_t(L * D * B * H), 0);
  std::vector<double> in(f.x->value.begin(), f.x->value.end());  // [B, S, In_l]
  int64_t in_w = sp.input_size;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> next(size_t(B * S * D * H), 0);
    for (int64_t d = 0; d < D; ++d) {
      auto get = [&](const char* k) {
        return &f.store.at(lstm_parameter_name("enc", k, int(l), int(d))).value;
      };
      const auto& wih = *get("weight_ih");
      const auto& whh = *get("weight_hh");
      const auto& bih = *get("bias_ih");
      const auto& bhh = *get("bias_hh");
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> h(size_t(H), 0), c(size_t(H), 0);
        for (int64_t s = 0; s < S; ++s) {
          const int64_t tt = d == 0 ? s : S - 1 - s;
          std::vector<double> gate(size_t(4 * H));
          for (int64_t r4 = 0; r4 < 4 * H; ++r4) {
            double z = bih[size_t(r4)] + bhh[size_t(r4)];
            for (int64_t k = 0; k < in_w; ++k)
              z += wih[size_t(r4 * in_w + k)] * in[size_t((b * S + tt) * in_w + k)];
            for (int64_t k = 0; k < H; ++k) z += whh[size_t(r4 * H + k)] * h[size_t(k)];
            gate[size_t(r4)] = z;
          }
          for (int64_t j = 0; j < H; ++j) {
            const double ig = sigmoid(gate[size_t(j)]), fg = sigmoid(gate[size_t(H + j)]);
            const double gg = std::tanh(gate[size_t(2 * H + j)]),
                         og = sigmoid(gate[size_t(3 * H + j)]);
            c[size_t(j)] = fg * c[size_t(j)] + ig * gg;
            h[size_t(j)] = og * std::tanh(c[size_t(j)]);
            next[size_t((b * S + tt) * D * H + d * H + j)] = h[size_t(j)];
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          r.h_n[size_t(((l * D + d) * B + b) * H + j)] = h[size_t(j)];
          r.c_n[size_t(((l * D + d) * B + b) * H + j)] = c[size_t(j)];
        }
      }
    }
    in = next;
    in_w = D * H;
  }
  r.out = in;
  return r;
}

template <class T>
double max_diff(const Tensor<T>& a, const std::vector<double>& b) {
  REQUIRE(size_t(a.numel()) == b.size());
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(double(a.data[i]) - b[i]));
  return m;
}

/// Which outputs the scalarised loss reads (bit mask).
constexpr int kOut = 1, kHn = 2, kCn = 4;

void check_gradients(LstmSpec spec, int64_t B, int64_t S, int use, uint64_t seed) {
  LstmFixture<double> f(spec, B, S, seed);
  auto build = [&](Tape<double>& t) {
    LstmOutputs o = f.run(t);
    NodeId loss = -1;
    auto acc = [&](NodeId part) { loss = loss < 0 ? part : ops::add(t, loss, part); };
    if (use & kOut) acc(weighted_sum(t, o.output, seed + 11));
    if (use & kHn) acc(weighted_sum(t, o.h_n, seed + 12));
    if (use & kCn) acc(weighted_sum(t, o.c_n, seed + 13));
    return loss;
  };
  GradCheckResult r = grad_check(f.params(), build, 1e-6, 1e-8, 1e-6);
  INFO("L=" << spec.num_layers << " bidir=" << spec.bidirectional << " use=" << use << " worst "
            << r.worst << " max_abs " << r.max_abs_err << " max_rel " << r.max_rel_err);
  CHECK(r.ok);
  // Every parameter of the LSTM (and x) must have been compared.
  int64_t total = 0;
  for (auto* p : f.params()) total += p->numel();
  CHECK(r.checked == total);
}

}  // namespace

TEST_CASE("lstm forward matches the per-step reference") {
  struct Case {
    LstmSpec spec;
    int64_t B, S;
  };
  for (const Case& c :
       {Case{{3, 4, 1, false}, 2, 5}, Case{{3, 4, 1, true}, 3, 5}, Case{{5, 3, 2, true}, 2, 4},
        Case{{2, 3, 3, false}, 4, 3}, Case{{4, 6, 1, true}, 1, 1}}) {
    LstmFixture<double> f(c.spec, c.B, c.S, 7);
    Tape<double> t;
    LstmOutputs o = f.run(t);
    Reference r = reference_lstm(f);
    const int64_t D = c.spec.directions(), H = c.spec.hidden_size, LD = c.spec.num_layers * D;
    CHECK(t.shape(o.output) == Shape{c.B, c.S, D * H});
    CHECK(t.shape(o.h_n) == Shape{LD, c.B, H});
    CHECK(t.shape(o.c_n) == Shape{LD, c.B, H});
    CHECK(max_diff(t.value(o.output), r.out) < 1e-12);
    CHECK(max_diff(t.value(o.h_n), r.h_n) < 1e-12);
    CHECK(max_diff(t.value(o.c_n), r.c_n) < 1e-12);

    // float agrees with the double reference to float accuracy.
    LstmFixture<float> ff(c.spec, c.B, c.S, 7);
    Tape<float> tf;
    LstmOutputs of = ff.run(tf);
    CHECK(max_diff(tf.value(of.output), r.out) < 2e-5);
    CHECK(max_diff(tf.value(of.h_n), r.h_n) < 2e-5);
    CHECK(max_diff(tf.value(of.c_n), r.c_n) < 2e-5);
  }
}

TEST_CASE(
    "the CPU's gate activations (Eigen logistic, tanh) are within their stated bound of "
    "lstm_math's") {
  // engine/ops/lstm_math.hpp: the CPU cell activates its gates with Eigen's vectorised logistic()
  // and tanh(); the kernels and the emulation with math::sigmoid and the library's tanh. In float
  // they agree to 4e-7 absolute (gates are in [0, 1] / [−1, 1]: about 3 ulp of 1), in double to
  // 1e-15 relative, over [−30, 30] and at the ends of the range.
  const int n = 600001;
  Eigen::ArrayXf x(n);
  for (int i = 0; i < n; ++i) x[i] = -30.0f + 60.0f * float(i) / float(n - 1);
  const Eigen::ArrayXf s = x.logistic(), th = x.tanh();
  double es = 0, et = 0;
  for (int i = 0; i < n; ++i) {
    es = std::max(es, std::fabs(double(s[i]) - double(ops::math::sigmoid(x[i]))));
    et = std::max(et, std::fabs(double(th[i]) - double(ops::math::lib_tanh(x[i]))));
  }
  MESSAGE("float: |Eigen logistic − math::sigmoid| ≤ " << es << ", |Eigen tanh − tanhf| ≤ " << et);
  CHECK(es <= 4e-7);
  CHECK(et <= 4e-7);
  const Eigen::ArrayXd xd = x.cast<double>();
  const Eigen::ArrayXd sd = xd.logistic(), td = xd.tanh();
  double rs = 0, rt = 0;
  for (int i = 0; i < n; ++i) {
    const double ref_s = ops::math::sigmoid(xd[i]), ref_t = ops::math::lib_tanh(xd[i]);
    rs = std::max(rs, std::fabs(sd[i] - ref_s) / ref_s);
    if (ref_t != 0) rt = std::max(rt, std::fabs(td[i] - ref_t) / std::fabs(ref_t));
  }
  CHECK(rs <= 1e-15);
  CHECK(rt <= 1e-15);
  // Saturation: both sides reach 0 / 1 / ±1 the same way.
  Eigen::ArrayXf ends(4);
  ends << -1000.0f, -88.0f, 88.0f, 1000.0f;
  const Eigen::ArrayXf se = ends.logistic(), te = ends.tanh();
  for (int i = 0; i < 4; ++i) {
    CHECK(std::fabs(se[i] - ops::math::sigmoid(ends[i])) <= 4e-7f);
    CHECK(te[i] == ops::math::lib_tanh(ends[i]));
  }
}

TEST_CASE("lstm_math's scalar cell (the kernels' and the emulation's) equals the hand formula") {
  const double zi = 0.3, zf = -0.7, zg = 1.1, zo = -0.2, c_prev = 0.45, dh = 0.8, dc_next = -0.35;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const double i = sig(zi), f = sig(zf), g = std::tanh(zg), o = sig(zo);
  const double c = f * c_prev + i * g, tc = std::tanh(c);
  const auto r = ops::lstm_math::cell_forward(zi, zf, zg, zo, true, c_prev);
  CHECK(r.i == doctest::Approx(i).epsilon(1e-15));
  CHECK(r.c == doctest::Approx(c).epsilon(1e-15));
  CHECK(r.h == doctest::Approx(o * tc).epsilon(1e-15));
  CHECK(ops::lstm_math::cell_forward(zi, zf, zg, zo, false, 123.0).c ==
        doctest::Approx(i * g).epsilon(1e-15));
  const double dc = dc_next + dh * o * (1 - tc * tc);
  const auto b = ops::lstm_math::cell_backward(i, f, g, o, tc, true, c_prev, dh, dc_next);
  CHECK(b.do_ == doctest::Approx(dh * tc * o * (1 - o)).epsilon(1e-15));
  CHECK(b.di == doctest::Approx(dc * g * i * (1 - i)).epsilon(1e-15));
  CHECK(b.df == doctest::Approx(dc * c_prev * f * (1 - f)).epsilon(1e-15));
  CHECK(b.dg == doctest::Approx(dc * i * (1 - g * g)).epsilon(1e-15));
  CHECK(b.dc_prev == doctest::Approx(dc * f).epsilon(1e-15));
  CHECK(ops::lstm_math::cell_backward(i, f, g, o, tc, false, 5.0, dh, dc_next).df == 0.0);
}

TEST_CASE("lstm T=1 equals the hand formula") {
  // H = 1, In = 2, B = 1: every gate is one number.
  LstmFixture<double> f({2, 1, 1, false}, 1, 1, 3);
  auto& wih = f.store.at("enc.weight_ih_l0").value;  // [4, 2]
  auto& bih = f.store.at("enc.bias_ih_l0").value;
  auto& bhh = f.store.at("enc.bias_hh_l0").value;
  const auto& x = f.x->value;
  auto z = [&](int k) {
    return wih[size_t(2 * k)] * x[0] + wih[size_t(2 * k + 1)] * x[1] + bih[size_t(k)] +
           bhh[size_t(k)];
  };
  const double i = 1 / (1 + std::exp(-z(0))), g = std::tanh(z(2)), o = 1 / (1 + std::exp(-z(3)));
  const double c = i * g, h = o * std::tanh(c);  // c_{-1} = 0: the forget gate plays no part
  Tape<double> t;
  LstmOutputs out = f.run(t);
  CHECK(t.value(out.output)[0] == doctest::Approx(h).epsilon(1e-14));
  CHECK(t.value(out.h_n)[0] == doctest::Approx(h).epsilon(1e-14));
  CHECK(t.value(out.c_n)[0] == doctest::Approx(c).epsilon(1e-14));
}

TEST_CASE("lstm h_n is the last forward step and step 0 of the reverse direction") {
  LstmFixture<double> f({3, 4, 2, true}, 3, 5, 21);
  Tape<double> t;
  LstmOutputs o = f.run(t);
  const int64_t B = 3, S = 5, H = 4, DH = 8;
  const Tensor<double>& out = t.value(o.output);
  const Tensor<double>& hn = t.value(o.h_n);  // [4, B, H]: l0, l0_rev, l1, l1_rev
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      CHECK(hn[(2 * B + b) * H + j] ==
            out[(b * S + S - 1) * DH + j]);  // layer 1 forward, last step
      CHECK(hn[(3 * B + b) * H + j] == out[(b * S + 0) * DH + H + j]);  // layer 1 reverse, step 0
    }
}

TEST_CASE("lstm gradients: unidirectional, through output, h_n, c_n and all together") {
  for (int use : {kOut, kHn, kCn, kOut | kHn | kCn})
    check_gradients({3, 4, 1, false}, 3, 5, use, 100 + use);
}

TEST_CASE("lstm gradients: bidirectional") {
  for (int use : {kOut, kHn, kCn, kOut | kHn | kCn})
    check_gradients({3, 4, 1, true}, 2, 5, use, 200 + use);
}

TEST_CASE("lstm gradients: 2-layer bidirectional") {
  for (int use : {kOut, kHn, kCn, kOut | kHn | kCn})
    check_gradients({3, 3, 2, true}, 2, 5, use, 300 + use);
}

TEST_CASE("lstm gradients: one step and a 3-layer unidirectional stack") {
  check_gradients({4, 3, 1, true}, 3, 1, kOut | kHn | kCn, 400);
  check_gradients({2, 3, 3, false}, 2, 3, kOut | kCn, 401);
  check_gradients({2, 3, 3, false}, 2, 3, kHn, 402);  // no output gradient at the top of 3 layers
}

TEST_CASE(
    "lstm gradients: the input is an intermediate value with another consumer (before or after)") {
  // x's gradient is written fresh by the LSTM when its backward runs first, else added to.
  for (int other_after :
       {0, 1}) {  // 0: the other consumer is created first, so the LSTM's backward runs first
    CAPTURE(other_after);
    LstmFixture<double> f({3, 4, 1, true}, 2, 3, 600 + other_after);
    auto build = [&](Tape<double>& t) {
      const NodeId h = ops::scale(t, t.param(*f.x), 0.9);
      NodeId other = -1;
      if (!other_after) other = ops::tanh(t, h);
      LstmOutputs o = ops::lstm(t, h, f.spec, lstm_weight_nodes(t, f.store, "enc", f.spec));
      if (other_after) other = ops::tanh(t, h);
      return ops::add(t, weighted_sum(t, o.h_n, 611), weighted_sum(t, other, 612));
    };
    GradCheckResult r = grad_check(f.params(), build, 1e-6, 1e-8, 1e-6);
    INFO("worst " << r.worst << " max_abs " << r.max_abs_err);
    CHECK(r.checked > 0);
    CHECK(r.ok);
  }
}

TEST_CASE("lstm gradients: batch split over several row blocks (incl. a partial one)") {
  check_gradients({2, 2, 1, true}, 130, 3, kOut | kHn | kCn, 500);  // 128-row blocks: 128 + 2
}

TEST_CASE(
    "lstm with B >= 1024: inputs projected per step and row block, same values and gradients") {
  // From B = 1024 the forward projects each step's rows inside the step (project_per_step).
  LstmFixture<double> f({3, 2, 2, true}, 1030, 3, 19);
  Reference ref = reference_lstm(f);
  Tape<double> t;
  LstmOutputs o = f.run(t);
  CHECK(max_diff(t.value(o.output), ref.out) < 1e-12);
  CHECK(max_diff(t.value(o.h_n), ref.h_n) < 1e-12);
  CHECK(max_diff(t.value(o.c_n), ref.c_n) < 1e-12);
  check_gradients({2, 2, 1, false}, 1030, 3, kOut | kHn, 501);
}

TEST_CASE("lstm results are bit-identical run after run and for any thread count") {
  // B·H·4H is above the threshold where blocks run on several threads; B = 300: S·B = 2400 > 2048
  // splits the weight-gradient reductions into chunks; B = 1100: inputs projected and weight
  // gradients summed per step and row block (a partial last block), x and output in place.
  for (auto [B, S] : {std::pair<int64_t, int64_t>{300, 8}, {1100, 3}}) {
    INFO("B = " << B);
    LstmFixture<double> f(B == 300 ? LstmSpec{5, 32, 2, true} : LstmSpec{8, 64, 2, true}, B, S, 17);
    Reference ref = reference_lstm(f);
    std::vector<std::vector<double>> outs, grads;
    for (int threads : {2, 2, 1}) {
      set_num_threads(threads);
      f.store.zero_grad();
      Tape<double> t;
      LstmOutputs o = f.run(t);
      CHECK(max_diff(t.value(o.output), ref.out) < 1e-12);
      CHECK(max_diff(t.value(o.h_n), ref.h_n) < 1e-12);
      CHECK(max_diff(t.value(o.c_n), ref.c_n) < 1e-12);
      NodeId loss = ops::add(t, weighted_sum(t, o.output, 1),
                             ops::add(t, weighted_sum(t, o.h_n, 2), weighted_sum(t, o.c_n, 3)));
      t.backward(loss);
      const Tensor<double>& v = t.value(o.output);
      outs.emplace_back(v.data, v.data + v.numel());
      std::vector<double> g;
      for (auto& p : f.store.all()) g.insert(g.end(), p.grad.begin(), p.grad.end());
      grads.push_back(g);
    }
    set_num_threads(0);
    CHECK(outs[0] == outs[1]);
    CHECK(outs[0] == outs[2]);
    CHECK(grads[0] == grads[1]);
    CHECK(grads[0] == grads[2]);
  }
}

/// One batch against the same samples run as `parts` sub-batches: the outputs are the sub-batches'
/// outputs side by side, the weight gradients their sum and x's gradient their rows side by side
/// (loss = sum(output) + sum(h_n) + sum(c_n) [+ sum(tanh(x'))] is additive over samples). `other`:
/// 0: the LSTM reads the leaf x; 1 / 2: it reads x' = 0.9·x, which also feeds a tanh created
/// before (so the LSTM's backward writes x'’s gradient first) / after it (so it adds into it).
void check_sub_batches(LstmSpec spec, int64_t B, int64_t S, int64_t parts, int other,
                       uint64_t seed) {
  INFO("B = " << B << ", S = " << S << ", L = " << spec.num_layers << ", other = " << other);
  const int64_t Bp = B / parts, DH = spec.directions() * spec.hidden_size;
  LstmFixture<double> f(spec, B, S, seed);
  std::vector<double> out;  // [B, S, DH]: the full batch's, then the parts' side by side
  auto run = [&](Parameter<double>& x) {
    Tape<double> t;
    NodeId in = t.param(x), tanh_x = -1;
    if (other) in = ops::scale(t, in, 0.9);
    if (other == 1) tanh_x = ops::tanh(t, in);
    LstmOutputs o = ops::lstm(t, in, spec, lstm_weight_nodes(t, f.store, "enc", spec));
    if (other == 2) tanh_x = ops::tanh(t, in);
    NodeId loss =
        ops::add(t, ops::sum(t, o.output), ops::add(t, ops::sum(t, o.h_n), ops::sum(t, o.c_n)));
    if (tanh_x >= 0) loss = ops::add(t, loss, ops::sum(t, tanh_x));
    t.backward(loss);
    const Tensor<double>& v = t.value(o.output);
    out.insert(out.end(), v.data, v.data + v.numel());
  };
  f.store.zero_grad();
  run(*f.x);
  const std::vector<double> full_out = out;
  out.clear();
  std::vector<std::vector<double>> full;
  for (auto& p : f.store.all()) full.push_back(p.grad);
  f.store.zero_grad();
  std::vector<double> x_grad;  // the parts' x gradients side by side
  for (int64_t part = 0; part < parts; ++part) {
    Parameter<double> xp;
    xp.name = "x_part";
    xp.shape = Shape{Bp, S, spec.input_size};
    const int64_t n = Bp * S * spec.input_size;
    xp.value.assign(f.x->value.begin() + part * n, f.x->value.begin() + (part + 1) * n);
    xp.grad.assign(size_t(n), 0.0);
    run(xp);
    x_grad.insert(x_grad.end(), xp.grad.begin(), xp.grad.end());
  }
  REQUIRE(out.size() == size_t(B * S * DH));
  double out_diff = 0;
  for (size_t i = 0; i < out.size(); ++i)
    out_diff = std::max(out_diff, std::abs(out[i] - full_out[i]));
  CHECK(out_diff <= 1e-12);
  size_t k = 0;
  for (auto& p : f.store.all()) {
    const std::vector<double>& want = p.name == "x" ? x_grad : p.grad;
    REQUIRE(want.size() == full[k].size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::abs(full[k][i]));
      diff = std::max(diff, std::abs(full[k][i] - want[i]));
    }
    INFO(p.name << " max diff " << diff << " scale " << scale);
    const bool zero =
        S == 1 && p.name.find("weight_hh") != std::string::npos;  // h_{-1} = 0: no dW_hh
    CHECK((scale > 0) != zero);
    CHECK(diff <= 1e-12 * scale);
    ++k;
  }
}

TEST_CASE("lstm weight gradients over a long batch equal the sum over its sub-batches") {
  // S·B = 3000 > 2048: the full batch splits the dW reductions into chunks, the sub-batches
  // (S·B = 1000) do not.
  check_sub_batches({4, 8, 1, true}, 300, 10, 3, 0, 23);
}

TEST_CASE("lstm with B >= 1024 (per-step products, x and output in place) equals its sub-batches") {
  // B = 2100, 4H·(In + H) = 18432 ≥ 16384 (grads_per_step): inputs projected and dW, dX computed
  // per step and row block, x, the output and their gradients used batch-first where they lie; the
  // 700-sample sub-batches take the stacked, time-major path. Two bidirectional layers: dX also
  // flows into the lower layer's output.
  for (int other : {0, 1, 2}) check_sub_batches({8, 64, 2, true}, 2100, 3, 3, other, 24 + other);
  // A small weight (4H·(In + H) = 160): inputs projected per step, gradients over the stacked
  // steps, x and output copied to and from time-major.
  check_sub_batches({3, 5, 2, true}, 2100, 3, 3, 2, 29);
  check_sub_batches({3, 5, 1, false}, 2048, 1, 2, 0, 30);  // one step: in place for any B
}

TEST_CASE("lstm gradients accumulate across calls and reach only trainable inputs") {
  LstmFixture<double> f({3, 4, 1, true}, 2, 3, 9);
  Parameter<double>& frozen = f.store.at("enc.weight_hh_l0_reverse");
  frozen.requires_grad = false;
  // Two uses of the same weights on one tape: gradients add up (= 2× one use on the same input).
  Tape<double> t1;
  NodeId l1 = weighted_sum(t1, f.run(t1).output, 5);
  t1.backward(l1);
  std::vector<double> once = f.store.at("enc.weight_ih_l0").grad;
  for (double v : frozen.grad) CHECK(v == 0.0);
  f.store.zero_grad();
  Tape<double> t2;
  NodeId a = weighted_sum(t2, f.run(t2).output, 5);
  NodeId b = weighted_sum(t2, f.run(t2).output, 5);
  t2.backward(ops::add(t2, a, b));
  const auto& twice = f.store.at("enc.weight_ih_l0").grad;
  for (size_t i = 0; i < once.size(); ++i)
    CHECK(twice[i] == doctest::Approx(2 * once[i]).epsilon(1e-12));
  for (double v : frozen.grad) CHECK(v == 0.0);
}

TEST_CASE("lstm without gradient recording computes the same values") {
  LstmFixture<double> f({3, 4, 2, true}, 2, 4, 13);
  Tape<double> t;
  LstmOutputs o1 = f.run(t);
  Tape<double> t2;
  t2.set_grad_enabled(false);
  LstmOutputs o2 = f.run(t2);
  CHECK_FALSE(t2.requires_grad(o2.output));
  for (int64_t i = 0; i < t.value(o1.output).numel(); ++i)
    CHECK(t.value(o1.output)[i] == t2.value(o2.output)[i]);
}

TEST_CASE("add_lstm_parameters uses torch.nn.LSTM's state_dict names and shapes") {
  // docs/model-spec.md §8.2 encoder LSTM(44, 20, num_layers=2, bidirectional=True): 20,480 weights.
  ParameterStore<float> store;
  add_lstm_parameters(store, "encoder", LstmSpec{44, 20, 2, true});
  const std::vector<std::pair<std::string, Shape>> want = {
      {"encoder.weight_ih_l0", Shape{80, 44}},
      {"encoder.weight_hh_l0", Shape{80, 20}},
      {"encoder.bias_ih_l0", Shape{80}},
      {"encoder.bias_hh_l0", Shape{80}},
      {"encoder.weight_ih_l0_reverse", Shape{80, 44}},
      {"encoder.weight_hh_l0_reverse", Shape{80, 20}},
      {"encoder.bias_ih_l0_reverse", Shape{80}},
      {"encoder.bias_hh_l0_reverse", Shape{80}},
      {"encoder.weight_ih_l1", Shape{80, 40}},
      {"encoder.weight_hh_l1", Shape{80, 20}},
      {"encoder.bias_ih_l1", Shape{80}},
      {"encoder.bias_hh_l1", Shape{80}},
      {"encoder.weight_ih_l1_reverse", Shape{80, 40}},
      {"encoder.weight_hh_l1_reverse", Shape{80, 20}},
      {"encoder.bias_ih_l1_reverse", Shape{80}},
      {"encoder.bias_hh_l1_reverse", Shape{80}}};
  lcm::test::check_parameter_layout(store, want);
  CHECK(store.count() == 20480);
  // Tags BiLSTM of model-spec §5.2 (16 → 100, bidirectional), empty prefix = bare names.
  ParameterStore<double> tags;
  add_lstm_parameters(tags, "", LstmSpec{16, 100, 1, true});
  CHECK(tags.find("weight_ih_l0_reverse") != nullptr);
  CHECK(tags.count() == 2 * (400 * 16 + 400 * 100 + 800));
}

TEST_CASE("add_lstm_parameters with an Rng draws PyTorch's default uniform ±1/sqrt(H)") {
  ParameterStore<float> store;
  Rng rng(1);
  add_lstm_parameters(store, "comps_lstm", LstmSpec{180, 180}, &rng);
  const double bound = 1 / std::sqrt(180.0);
  double lo = 1, hi = -1;
  for (auto& p : store.all())
    for (float v : p.value) {
      lo = std::min(lo, double(v));
      hi = std::max(hi, double(v));
    }
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(lo < -0.9 * bound);  // really spread over the interval, not left at zero
  CHECK(hi > 0.9 * bound);
  ParameterStore<float> zero;
  add_lstm_parameters(zero, "p", LstmSpec{3, 2});
  for (auto& p : zero.all())
    for (float v : p.value) CHECK(v == 0.0f);
}

TEST_CASE("lstm rejects bad input with clear errors") {
  LstmFixture<double> f({3, 4, 1, true}, 2, 3, 1);
  Tape<double> t;
  auto w = lstm_weight_nodes(t, f.store, "enc", f.spec);
  std::vector<double> xs(2 * 3 * 5, 0.1);
  NodeId bad_in = t.constant(xs.data(), Shape{2, 3, 5});  // In 5 instead of 3
  CHECK_THROWS_WITH_AS(ops::lstm(t, bad_in, f.spec, w), doctest::Contains("[2, 3, 5]"),
                       std::invalid_argument);
  NodeId rank2 = t.constant(xs.data(), Shape{6, 3});
  CHECK_THROWS_AS(ops::lstm(t, rank2, f.spec, w), std::invalid_argument);
  NodeId empty_t = t.constant(xs.data(), Shape{2, 0, 3});
  CHECK_THROWS_AS(ops::lstm(t, empty_t, f.spec, w), std::invalid_argument);
  NodeId x = t.param(*f.x);
  // One direction's weights missing.
  CHECK_THROWS_WITH_AS(ops::lstm(t, x, f.spec, {w[0]}), doctest::Contains("weight sets"),
                       std::invalid_argument);
  // Swapped w_ih / w_hh: shapes are named.
  auto swapped = w;
  std::swap(swapped[1].w_ih, swapped[1].w_hh);
  CHECK_THROWS_WITH_AS(ops::lstm(t, x, f.spec, swapped),
                       doctest::Contains("weight_ih of layer 0 (reverse)"), std::invalid_argument);
  auto dangling = w;
  dangling[0].b_hh = 100000;
  CHECK_THROWS_AS(ops::lstm(t, x, f.spec, dangling), std::invalid_argument);
  CHECK_THROWS_AS(ops::lstm(t, x, LstmSpec{3, 0, 1, false}, w), std::invalid_argument);
  CHECK_THROWS_AS(ops::lstm(t, x, LstmSpec{3, 4, 0, false}, w), std::invalid_argument);
  // Missing / misshapen parameters in the store, duplicate names.
  CHECK_THROWS_WITH_AS(lstm_weight_nodes(t, f.store, "other", f.spec),
                       doctest::Contains("other.weight_ih_l0"), std::out_of_range);
  CHECK_THROWS_WITH_AS(lstm_weight_nodes(t, f.store, "enc", LstmSpec{3, 5, 1, true}),
                       doctest::Contains("enc.weight_ih_l0"), std::invalid_argument);
  CHECK_THROWS_AS(add_lstm_parameters(f.store, "enc", f.spec), std::invalid_argument);
  CHECK_THROWS_AS(add_lstm_parameters(f.store, "new", LstmSpec{0, 4}), std::invalid_argument);
}

TEST_CASE("lstm on a CUDA tensor with a CPU tape is refused (CUDA not built / mixed devices)") {
  LstmFixture<float> f({3, 4, 1, false}, 2, 3, 1);
  Tape<float> t;
  auto w = lstm_weight_nodes(t, f.store, "enc", f.spec);
  NodeId x = t.param(*f.x);
  t.value(x).device = Device::CUDA;  // pretend the input lives on a GPU
#ifdef LCM_WITH_CUDA
  CHECK_THROWS_WITH_AS(ops::lstm(t, x, f.spec, w), doctest::Contains("inputs on different devices"),
                       std::logic_error);
#else
  CHECK_THROWS_WITH_AS(ops::lstm(t, x, f.spec, w), doctest::Contains("CUDA backend not built"),
                       std::logic_error);
#endif
}
