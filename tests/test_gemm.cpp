// Tests of the CPU backend kernels: the deterministic GEMM helpers (engine/ops/gemm.hpp) and
// ops::linear on them (values vs double loops, every transposition, odd/empty shapes, accumulation,
// bit-identical for 1–3 threads), and the vectorisable float expm1 of engine/ops/common.hpp (also
// on NaN, ±inf and out-of-range inputs, through ops::elu and ops::linear_elu).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/gemm.hpp"
#include "engine/parameter.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"

using namespace lcm;
using ops::detail::Operand;

namespace {

std::vector<float> random_vec(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(rng.uniform(-1, 1));
  return v;
}

/// Element (i, j) of an operand in its own orientation.
float at(const Operand<float>& a, int64_t i, int64_t j) {
  return a.trans ? a.p[j * a.ld + i] : a.p[i * a.ld + j];
}

/// Rows of C checked against the double reference: every `row_step(m)`-th one (about 16 rows, and
/// always the last), which keeps the reference cheap for large m.
/// The spacing of floats at |ref| (ref rounded to float): the unit of the expm1 error bounds.
double float_ulp(double ref) {
  const float rf = std::fabs(float(ref));
  return double(std::nextafter(rf, INFINITY) - rf);
}

int64_t row_step(int64_t m) {
  return std::max<int64_t>(1, m / 16);
}
bool checked_row(int64_t i, int64_t m) {
  return i % row_step(m) == 0 || i == m - 1;
}

/// C0 + A·B in double on the checked rows, C [m, n] row-major with leading dimension ldc.
std::vector<double> reference(int64_t m, int64_t n, int64_t k, Operand<float> a, Operand<float> b,
                              const std::vector<float>& c0, int64_t ldc) {
  std::vector<double> c(c0.begin(), c0.end());
  for (int64_t i = 0; i < m; ++i)
    if (checked_row(i, m))
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(at(a, i, p)) * double(at(b, p, j));
        c[size_t(i * ldc + j)] += s;
      }
  return c;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct GemmCase {
  int64_t m, n, k;
};

}  // namespace

TEST_CASE(
    "gemm_tiled matches double loops for every transposition, with and without accumulation") {
  const int saved = num_threads();
  // Shapes below, at and above the tiling thresholds (1, 2 and 4 tiles; row and column splits),
  // and single rows / columns of C (the matrix-vector path: one program's static first-layer row
  // against the whole 600×1146 weight, a 1-wide output layer).
  const std::vector<GemmCase> cases = {
      {1, 1, 1},       {3, 5, 7},         {33, 97, 50},   {32, 600, 300},  {700, 40, 200},
      {200, 1146, 32}, {2100, 300, 1200}, {1, 600, 1146}, {96, 600, 1146}, {1200, 60, 500},
      {1, 37, 5},      {300, 1, 200},     {7, 1, 33},     {2048, 16, 32},  {16, 32, 2048},
      {4096, 32, 16},  {600, 24, 300},    {5000, 16, 8},  {17, 4000, 9},   {64, 16, 64}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const GemmCase& g : cases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (bool acc : {false, true}) {
            CAPTURE(threads);
            CAPTURE(g.m);
            CAPTURE(g.n);
            CAPTURE(g.k);
            CAPTURE(ta);
            CAPTURE(tb);
            CAPTURE(acc);
            const int64_t ldc = g.n + 3;  // a leading dimension wider than the tile
            // operands with leading dimensions 2 wider than their rows (strided rows and columns)
            const int64_t lda = (ta ? g.m : g.k) + 2, ldb = (tb ? g.k : g.n) + 2;
            std::vector<float> A = random_vec((ta ? g.k : g.m) * lda, 1),
                               B = random_vec((tb ? g.n : g.k) * ldb, 2);
            std::vector<float> C = random_vec(g.m * ldc, 3);
            Operand<float> a{A.data(), lda, ta != 0};
            Operand<float> b{B.data(), ldb, tb != 0};
            std::vector<float> c0 = C;
            if (!acc)
              for (int64_t i = 0; i < g.m; ++i)
                for (int64_t j = 0; j < g.n; ++j) c0[size_t(i * ldc + j)] = 0;
            const std::vector<double> want = reference(g.m, g.n, g.k, a, b, c0, ldc);
            ops::detail::gemm_tiled<float>(g.m, g.n, g.k, a, b, C.data(), ldc, acc);
            double worst = 0;
            for (int64_t i = 0; i < g.m; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                if (!checked_row(i, g.m)) continue;
                const size_t e = size_t(i * ldc + j);
                if (j >= g.n) {
                  worst = std::max(worst, C[e] == c0[e] ? 0.0 : 1.0);  // padding untouched
                  continue;
                }
                worst = std::max(worst,
                                 std::fabs(double(C[e]) - want[e]) / (1e-6 * double(g.k) + 1e-5));
              }
            CHECK(worst <= 1.0);
          }
  }
  set_num_threads(saved);
}

TEST_CASE("gemm_tiled: empty shapes are no-ops and k = 0 without accumulation zeroes C") {
  std::vector<float> A = random_vec(12, 1), B = random_vec(12, 2), C = random_vec(12, 3);
  const std::vector<float> before = C;
  ops::detail::gemm_tiled<float>(0, 4, 3, {A.data(), 3, false}, {B.data(), 4, false}, C.data(), 4,
                                 false);
  ops::detail::gemm_tiled<float>(3, 0, 4, {A.data(), 4, false}, {B.data(), 1, false}, C.data(), 4,
                                 false);
  ops::detail::gemm_tiled<float>(3, 4, 0, {A.data(), 1, false}, {B.data(), 4, false}, C.data(), 4,
                                 true);
  CHECK(same_bits(C, before));
  ops::detail::gemm_tiled<float>(3, 4, 0, {A.data(), 1, false}, {B.data(), 4, false}, C.data(), 4,
                                 false);
  for (float v : C) CHECK(v == 0.0f);
}

TEST_CASE("tile_grid: depends on the shape only, splits the larger side, covers C") {
  using ops::detail::tile_grid;
  const auto small = tile_grid(32, 180, 200);  // 2.3 MFLOP: one tile
  CHECK(small.rows == 32);
  CHECK(small.cols == 180);
  const auto alone = tile_grid(32, 600, 1146);  // 44 MFLOP: below kParallelMinFlops, one tile
  CHECK(alone.rows == 32);
  CHECK(alone.cols == 600);
  const auto wide = tile_grid(64, 600, 1146);  // 88 MFLOP, n > m: 2 column tiles, multiple of 16
  CHECK(wide.rows == 64);
  CHECK(wide.cols % 16 == 0);
  CHECK(ops::detail::blocks_of(600, wide.cols) == 2);
  const auto tall = tile_grid(2048, 600, 1146);  // 2.8 GFLOP, m > n: 4 row tiles
  CHECK(tall.cols == 600);
  CHECK(ops::detail::blocks_of(2048, tall.rows) == 4);
}

TEST_CASE("gemm_tiled, column_sums_add and linear are bit-identical for 1, 2 and 3 threads") {
  const int saved = num_threads();
  const int64_t m = 517, n = 613, k = 389;
  std::vector<float> A = random_vec(m * k, 4), B = random_vec(k * n, 5), C0 = random_vec(m * n, 6);
  std::vector<std::vector<float>> results;
  std::vector<std::vector<float>> sums;
  std::vector<std::vector<float>> linear_grads;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> C = C0;
    ops::detail::gemm_tiled<float>(m, n, k, {A.data(), m, true}, {B.data(), n, false}, C.data(), n,
                                   true);
    results.push_back(C);
    std::vector<float> g(size_t(n), 0.5f);
    ops::detail::column_sums_add<float>(m, n, C0.data(), g.data());
    sums.push_back(g);
    // ops::linear forward + backward: y, dX, dW, db.
    ParameterStore<float> store;
    Parameter<float>& px = store.add("x", Shape{m, k});
    Parameter<float>& pw = store.add("w", Shape{n, k});
    Parameter<float>& pb = store.add("b", Shape{n});
    std::copy(A.begin(), A.end(), px.value.begin());
    std::copy(B.begin(), B.end(), pw.value.begin());
    std::copy(C0.begin(), C0.begin() + n, pb.value.begin());
    Tape<float> t;
    const NodeId y = ops::linear(t, t.param(px), t.param(pw), t.param(pb));
    t.backward(ops::sum(t, ops::mul(t, y, y)));
    std::vector<float> all(t.value(y).data, t.value(y).data + m * n);
    for (Parameter<float>* q : {&px, &pw, &pb})
      all.insert(all.end(), q->grad.begin(), q->grad.end());
    linear_grads.push_back(all);
  }
  for (size_t i = 1; i < results.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(results[0], results[i]));
    CHECK(same_bits(sums[0], sums[i]));
    CHECK(same_bits(linear_grads[0], linear_grads[i]));
  }
  // The column sums are the plain row-order sums.
  for (int64_t j = 0; j < n; j += 37) {
    float s = 0.5f;
    for (int64_t r = 0; r < m; ++r) s += C0[size_t(r * n + j)];
    CHECK(sums[0][size_t(j)] == s);
  }
  set_num_threads(saved);
}

TEST_CASE("detail::expm1 (float, vectorisable) is within 2 ulp of expm1 in double") {
  double worst = 0;
  float worst_x = 0;
  int64_t checked = 0, overflow_not_inf = 0;
  // Every 4099th float bit pattern, positive and negative: ~1M values over the whole range.
  for (uint64_t b = 0; b < 0x100000000ull; b += 4099) {
    float x;
    const uint32_t bits = uint32_t(b);
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isfinite(x)) continue;
    const double ref = std::expm1(double(x));
    const float y = ops::detail::expm1(x);
    if (ref > 3.4028234663852886e38) {  // overflows float
      overflow_not_inf += !std::isinf(y);
      continue;
    }
    const double err = std::fabs(double(y) - ref) / float_ulp(ref);
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
    ++checked;
  }
  CAPTURE(worst_x);
  CHECK(checked > 500000);
  CHECK(overflow_not_inf == 0);
  CHECK(worst <= 2.0);
  CHECK(std::isnan(ops::detail::expm1(std::nanf(""))));
  CHECK(ops::detail::expm1(-1000.0f) == -1.0f);
  CHECK(std::isinf(ops::detail::expm1(1000.0f)));
  CHECK(ops::detail::expm1(0.0f) == 0.0f);
  CHECK(std::signbit(ops::detail::expm1(-0.0f)));
  CHECK(ops::detail::expm1(1e-30f) == 1e-30f);
  CHECK(ops::detail::expm1(-1e-30f) == -1e-30f);
  CHECK(ops::detail::expm1(2.5) == std::expm1(2.5));  // the double overload is the library's
}

namespace {

/// Inputs outside expm1's polynomial range, as they reach the ELU at run time (NaN weights, an
/// overflowed activation): NaN of both signs, ±inf, the largest floats, values below the −87
/// clamp and around it, and both zeros. Repeated at shifting offsets, so that each one meets
/// every lane of a vectorised loop and its remainder.
std::vector<float> expm1_edge_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> edge{std::nanf(""), -std::nanf(""), inf,    -inf,    big,    -big,
                                1e30f,         -1e30f,         1000.f, -1000.f, 89.f,   88.7f,
                                -104.f,        -88.f,          -87.5f, -87.f,   -86.9f, -20.f,
                                -1.f,          -1e-30f,        -0.0f,  0.0f,    0.5f};
  std::vector<float> v;
  for (int rep = 0; rep < 5; ++rep) {
    for (int pad = 0; pad < rep; ++pad) v.push_back(-0.25f);
    v.insert(v.end(), edge.begin(), edge.end());
  }
  return v;
}

/// True when y is what the reference value ref (computed in double) rounds to: NaN for NaN, the
/// same infinity (or overflow), else within 2 ulp (the polynomial's bound; the saturated −1 is
/// met exactly). The sign of a zero is not compared: the fused path's GEMM turns x = −0 into +0
/// before the ELU (expm1(−0) = −0 has its own check above).
bool matches_reference(float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y);
  if (std::fabs(ref) > double(std::numeric_limits<float>::max()))
    return std::isinf(y) && std::signbit(y) == std::signbit(ref);
  if (y == float(ref)) return true;
  return std::fabs(double(y) - ref) <= 2 * float_ulp(ref);
}

/// ELU (α = 1, model-spec §5.2) in double: x if x > 0 else expm1(x).
double elu_reference(float x) {
  return x > 0 ? double(x) : std::expm1(double(x));
}

}  // namespace

// Under the sanitizer build (scripts/test_sanitize.sh) this is also the check that NaN reaching
// the float expm1 is well defined: k = round(NaN / ln 2) converted to INT_MIN, and building 2ᵏ
// from it shifted a negative value left.
TEST_CASE("detail::expm1, ops::elu and ops::linear_elu on NaN, ±inf and out-of-range inputs") {
  const std::vector<float> xs = expm1_edge_inputs();
  const int64_t n = int64_t(xs.size());
  // detail::expm1 element by element, on values the compiler cannot fold.
  std::vector<float> direct(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    volatile float vx = xs[i];
    direct[i] = ops::detail::expm1(float(vx));
  }
  // ops::elu (element-wise op) and ops::linear_elu (ELU on each GEMM tile): x as an [n, 1] input
  // times W = ones [8, 1] puts x[r] unchanged in every column of row r.
  Parameter<float> x, w;
  x.name = "x";
  x.shape = Shape{n, 1};
  x.value = xs;
  x.grad.assign(xs.size(), 0.0f);
  w.name = "w";
  w.shape = Shape{8, 1};
  w.value.assign(8, 1.0f);
  w.grad.assign(8, 0.0f);
  Tape<float> t;
  const NodeId e = ops::elu(t, t.param(x));
  const NodeId fused = ops::linear_elu(t, t.param(x), t.param(w));
  int64_t direct_bad = 0, elu_bad = 0, fused_bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float xi = xs[size_t(i)];
    const bool ok = matches_reference(direct[size_t(i)], std::expm1(double(xi)));
    if (!ok) {
      CAPTURE(xi);
      CAPTURE(direct[size_t(i)]);
      CHECK(ok);  // names the first inputs that fail
    }
    direct_bad += !ok;
    elu_bad += !matches_reference(t.value(e)[i], elu_reference(xi));
    for (int64_t j = 0; j < 8; ++j)
      fused_bad += !matches_reference(t.value(fused)[i * 8 + j], elu_reference(xi));
  }
  CHECK(direct_bad == 0);
  CHECK(elu_bad == 0);
  CHECK(fused_bad == 0);
  CHECK(std::isnan(direct[0]));   // NaN stays NaN
  CHECK(std::isnan(direct[1]));   // also with the sign bit set
  CHECK(direct[2] == INFINITY);   // +inf
  CHECK(direct[3] == -1.0f);      // −inf → −1
  CHECK(direct[5] == -1.0f);      // −FLT_MAX → −1
  CHECK(t.value(e)[3] == -1.0f);  // ELU(−inf) = −1
  CHECK(t.value(e)[2] == INFINITY);
  CHECK(std::isnan(t.value(fused)[0]));
}

TEST_CASE("gemm without accumulation writes C without reading it, on every kernel path") {
  // NaN in C before the product: a kernel that scaled C by beta = 0 instead of overwriting it
  // would leave NaN. The shapes take the matrix-vector paths (one row, few rows), the small-product
  // Eigen kernel and (in a build with oneDNN) the library kernel.
  const std::vector<GemmCase> cases = {{1, 300, 40}, {5, 200, 64}, {12, 12, 12}, {96, 180, 200}};
  for (const GemmCase& g : cases) {
    CAPTURE(g.m);
    CAPTURE(g.n);
    CAPTURE(g.k);
    const std::vector<float> A = random_vec(g.m * g.k, 7), B = random_vec(g.k * g.n, 8);
    std::vector<float> C(size_t(g.m * g.n), std::numeric_limits<float>::quiet_NaN());
    const Operand<float> a{A.data(), g.k, false}, b{B.data(), g.n, false};
    ops::detail::gemm<float>(g.m, g.n, g.k, a, b, C.data(), g.n, false);
    const std::vector<double> want =
        reference(g.m, g.n, g.k, a, b, std::vector<float>(C.size(), 0.0f), g.n);
    for (int64_t i = 0; i < g.m; ++i) {
      if (!checked_row(i, g.m)) continue;
      for (int64_t j = 0; j < g.n; ++j) {
        const size_t e = size_t(i * g.n + j);
        REQUIRE(std::isfinite(C[e]));
        CHECK(std::fabs(double(C[e]) - want[e]) <= 1e-6 * double(g.k) + 1e-5);
      }
    }
  }
}

TEST_CASE("gemm outside a parallel region gives the same bits for 1, 2 and 3 threads") {
  // One tile (below kParallelMinFlops): gemm_tiled calls gemm on the calling thread, outside any
  // OpenMP region, where a library kernel would otherwise thread (and split k) by itself.
  const int saved = num_threads();
  const int64_t m = 200, n = 180, k = 300;
  const std::vector<float> A = random_vec(m * k, 9), B = random_vec(k * n, 10);
  std::vector<std::vector<float>> out;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> C(size_t(m * n), 0.0f);
    ops::detail::gemm_tiled<float>(m, n, k, {A.data(), k, false}, {B.data(), k, true}, C.data(), n,
                                   false);
    out.push_back(C);
    CHECK(num_threads() == threads);  // the team size is restored after a library call
  }
  CHECK(same_bits(out[0], out[1]));
  CHECK(same_bits(out[0], out[2]));
  set_num_threads(saved);
}
