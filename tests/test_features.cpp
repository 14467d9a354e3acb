// Tests of the feature extraction (data/features.hpp, docs/model-spec.md §2–§4, §11, §13): the
// affine bound parser, iteration domains, transformation matrices, access parsing/padding,
// expression rows, tree/footprint, the computation and loop vectors, every drop reason, the §13
// gramschmidt expectations on the committed record, and whole-file properties (the committed
// synth slice, and the real mini sample where ../shared/data has it).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "data/features.hpp"
#include "data/reader.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;

namespace {

// ---------------------------------------------------------------- hand-built programs

Iterator iter(const std::string& name, const std::string& lo, const std::string& hi,
              const std::string& parent, std::vector<std::string> children,
              std::vector<std::string> comps) {
  Iterator it;
  it.name = name;
  it.lower.text = lo;
  it.upper.text = hi;
  it.parent = parent;
  it.children = std::move(children);
  it.computations = std::move(comps);
  return it;
}

ExprNode leaf(const std::string& t) {
  return ExprNode{t, {}};
}
ExprNode node(const std::string& t, std::vector<ExprNode> ch) {
  return ExprNode{t, std::move(ch)};
}

Computation comp(const std::string& name, int order, std::vector<std::string> iters, bool red,
                 const std::string& write, int wbuf, std::vector<Access> acc, ExprNode e) {
  Computation c;
  c.name = name;
  c.absolute_order = order;
  c.iterators = std::move(iters);
  c.is_reduction = red;
  c.write_access_relation = write;
  c.write_buffer_id = wbuf;
  c.data_type = "float64";
  c.accesses = std::move(acc);
  c.expression = std::move(e);
  return c;
}

LoopNode loop(const std::string& name, std::vector<std::string> comps,
              std::vector<LoopNode> children = {}) {
  return LoopNode{name, std::move(comps), std::move(children)};
}

/// The gramschmidt program of model-spec §13 ([TIR] function_gramschmidt_explored_schedules.json),
/// typed by hand from the file's program_annotation.
Program gramschmidt() {
  Program p;
  p.name = "function_gramschmidt";
  p.source_file = "hand-built";
  p.source_line = 7;
  p.iterators = {iter("k", "0", "30", "", {"i", "i_0", "j"}, {"nrm_init", "R_diag"}),
                 iter("i", "0", "20", "k", {}, {"nrm_comp"}),
                 iter("i_0", "0", "20", "k", {}, {"Q_out"}),
                 iter("j", "(k + 1)", "30", "k", {"i_1", "i_2"}, {"R_up_init"}),
                 iter("i_1", "0", "20", "j", {}, {"R_up"}),
                 iter("i_2", "0", "20", "j", {}, {"A_out"})};
  auto acc = [](bool red, int buf, std::vector<std::vector<int>> m) {
    return Access{red, buf, std::move(m)};
  };
  auto add_mul = [](const std::string& top) {
    return node(top, {leaf("access"), node("mul", {leaf("access"), leaf("access")})});
  };
  p.computations = {
      comp("nrm_init", 1, {"k"}, false, "{ nrm_init[k] -> b_nrm[0] }", 3, {}, leaf("value")),
      comp("nrm_comp", 2, {"k", "i"}, true, "{ nrm_comp[k, i] -> b_nrm[0] }", 3,
           {acc(true, 3, {{0, 0, 0}}), acc(false, 0, {{0, 1, 0}, {1, 0, 0}}),
            acc(false, 0, {{0, 1, 0}, {1, 0, 0}})},
           add_mul("add")),
      comp("R_diag", 3, {"k"}, false, "{ R_diag[k] -> b_R[k, k] }", 2, {acc(false, 3, {{0, 0}})},
           node("sqrt", {leaf("access")})),
      comp("Q_out", 4, {"k", "i_0"}, false, "{ Q_out[k, i] -> b_Q[i, k] }", 1,
           {acc(false, 0, {{0, 1, 0}, {1, 0, 0}}), acc(false, 2, {{1, 0, 0}, {1, 0, 0}})},
           node("div", {leaf("access"), leaf("access")})),
      comp("R_up_init", 5, {"k", "j"}, false, "{ R_up_init[k, j] -> b_R[k' = k, j' = j] }", 2, {},
           leaf("value")),
      comp("R_up", 6, {"k", "j", "i_1"}, true, "{ R_up[k, j, i] -> b_R[k, j] }", 2,
           {acc(true, 2, {{1, 0, 0, 0}, {0, 1, 0, 0}}), acc(false, 1, {{0, 0, 1, 0}, {1, 0, 0, 0}}),
            acc(false, 0, {{0, 0, 1, 0}, {0, 1, 0, 0}})},
           add_mul("add")),
      comp("A_out", 7, {"k", "j", "i_2"}, true, "{ A_out[k, j, i] -> b_A[i, j] }", 0,
           {acc(true, 0, {{0, 0, 1, 0}, {0, 1, 0, 0}}), acc(false, 1, {{0, 0, 1, 0}, {1, 0, 0, 0}}),
            acc(false, 2, {{1, 0, 0, 0}, {0, 1, 0, 0}})},
           add_mul("sub")),
  };
  p.initial_execution_time = 0.010381;
  Schedule s0;
  s0.comps.resize(7);
  s0.tree =
      LoopTree{{loop("k", {"nrm_init", "R_diag"},
                     {loop("i", {"nrm_comp"}), loop("i_0", {"Q_out"}),
                      loop("j", {"R_up_init"}, {loop("i_1", {"R_up"}), loop("i_2", {"A_out"})})})}};
  s0.execution_times = {0.015247, 0.010381, 0.011277};
  p.schedules.push_back(s0);
  return p;
}

/// A schedule of gramschmidt derived from schedule 0 with `min` as its best time.
Schedule derived(const Program& p, double min) {
  Schedule s = p.schedules[0];
  s.execution_times = {min * 1.5, min};
  return s;
}

std::array<int64_t, 16> tag(std::initializer_list<int64_t> v) {
  std::array<int64_t, 16> t{};
  size_t k = 0;
  for (auto x : v) t[k++] = x;
  return t;
}

/// Value at column `col` of computation `c` in kept schedule `s`.
float comp_value(const ProgramFeatures& f, int64_t s, int c, int col) {
  std::vector<float> full(size_t(f.n_comps) * kCompVectorWidth);
  f.comp_vectors(s, full.data());
  return full[size_t(c) * kCompVectorWidth + size_t(col)];
}

/// The default feature options with the Q2 loop zeroing off (every loop vector as computed).
FeatureOptions without_loop_zeroing() {
  FeatureOptions opt;
  opt.loop_zeroing = FeatureOptions::LoopZeroing::Off;
  return opt;
}

const float* loop_row(const ProgramFeatures& f, int64_t s, int loop_index) {
  return &f.loops[(size_t(s) * f.n_loops + size_t(loop_index)) * kLoopVectorWidth];
}

/// A minimal valid 2-schedule program: one computation in a 2-deep nest.
Program tiny() {
  Program p;
  p.name = "tiny";
  p.source_file = "tiny.jsonl";
  p.source_line = 3;
  p.iterators = {iter("i0", "0", "64", "", {"i1"}, {}), iter("i1", "0", "32", "i0", {}, {"c0"})};
  p.computations = {comp("c0", 1, {"i0", "i1"}, false, "{ c0[i0, i1] -> buf0[i0, i1] }", 0,
                         {Access{false, 1, {{1, 0, 0}, {0, 1, 0}}}},
                         node("add", {leaf("access"), leaf("value")}))};
  p.initial_execution_time = 10.0;
  Schedule s;
  s.comps.resize(1);
  s.tree = LoopTree{{loop("i0", {}, {loop("i1", {"c0"})})}};
  s.execution_times = {10.0, 11.0};
  p.schedules = {s, s};
  p.schedules[1].execution_times = {5.0};
  return p;
}

}  // namespace

// ====================================================================== affine parser (§3.5, Q5)

TEST_CASE("parse_affine: integers, names, +, -, unary minus, parentheses") {
  AffineExpr e = parse_affine("30");
  CHECK(e.constant == 30);
  CHECK(e.coef.empty());
  CHECK_FALSE(e.used_max);

  e = parse_affine("(k + 1)");
  CHECK(e.constant == 1);
  CHECK(e.coef.size() == 1);
  CHECK(e.coef.at("k") == 1);

  e = parse_affine("i0 - 1");
  CHECK(e.constant == -1);
  CHECK(e.coef.at("i0") == 1);

  e = parse_affine("(i5 - 2)+3 ");  // the data's "(iN - N)+N" form with a trailing space
  CHECK(e.constant == 1);
  CHECK(e.coef.at("i5") == 1);

  e = parse_affine("-(i - (j - 3))");  // nested parentheses and unary minus: -i + j - 3
  CHECK(e.constant == -3);
  CHECK(e.coef.at("i") == -1);
  CHECK(e.coef.at("j") == 1);

  e = parse_affine("- -4");
  CHECK(e.constant == 4);

  e = parse_affine("((( i_1 )))");
  CHECK(e.coef.at("i_1") == 1);

  e = parse_affine("i - i + 7");  // zero coefficients are removed
  CHECK(e.coef.empty());
  CHECK(e.constant == 7);

  e = parse_affine("i + i");  // non-unit coefficients are representable (rejected later)
  CHECK(e.coef.at("i") == 2);
}

TEST_CASE("parse_affine: max keeps its last argument") {
  AffineExpr e = parse_affine("max(0, i1)");
  CHECK(e.used_max);
  CHECK(e.constant == 0);
  CHECK(e.coef.at("i1") == 1);

  e = parse_affine("Max(5, (i0 - 2))");
  CHECK(e.used_max);
  CHECK(e.constant == -2);
  CHECK(e.coef.at("i0") == 1);

  e = parse_affine("max(i, 3, j + 1) + 1");
  CHECK(e.constant == 2);
  CHECK(e.coef.size() == 1);
  CHECK(e.coef.at("j") == 1);
}

TEST_CASE("parse_affine: unsupported forms throw DataError") {
  for (const char* bad : {"min(0, i)", "2*i", "i*2", "i/2", "", "   ", "(i", "i)", "3x", "foo(1)",
                          "i +", "$", "max(1, 2", "max()", "1.5", "i j", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_affine(bad), DataError);
  }
}

// ====================================================================== iteration domain (§3.5)

TEST_CASE("iteration_domain: R_up_init rows of model-spec §3.5/§13") {
  Program p = gramschmidt();
  std::vector<double> A, b;
  iteration_domain(p, p.computations[4], A, b);  // R_up_init (k, j), j from k+1 to 30
  REQUIRE(A.size() == 8);
  REQUIRE(b.size() == 4);
  const std::vector<double> A_exp = {-1, 0, 1, 0, 1, -1, 0, 1};
  const std::vector<double> b_exp = {0, 29, -1, 29};
  CHECK(A == A_exp);
  CHECK(b == b_exp);
}

TEST_CASE("iteration_domain: fixed lower-bound sign rule and negated iterators (Q4)") {
  Program p = gramschmidt();
  // j from (30 - k) to (k + 40): lower row gets −1 for −k, upper row +1... and −1 for +k
  p.iterators[3].lower.text = "(30 - k)";
  p.iterators[3].upper.text = "k + 40";
  std::vector<double> A, b;
  iteration_domain(p, p.computations[4], A, b);
  // row 2 (j ≥ 30 − k): −j − k ≤ −30  → [-1, -1 | -30]
  CHECK(A[4] == -1);
  CHECK(A[5] == -1);
  CHECK(b[2] == -30);
  // row 3 (j < k + 40): j − k ≤ 39 → [-1, 1 | 39]
  CHECK(A[6] == -1);
  CHECK(A[7] == 1);
  CHECK(b[3] == 39);
  // upper bound with a negated iterator: j < 50 − k → j + k ≤ 49
  p.iterators[3].upper.text = "50 - k";
  iteration_domain(p, p.computations[4], A, b);
  CHECK(A[6] == 1);
  CHECK(A[7] == 1);
  CHECK(b[3] == 49);
  // max in a lower bound keeps the last argument
  p.iterators[3].lower.text = "max(0, (k - 2))";
  iteration_domain(p, p.computations[4], A, b);
  CHECK(A[4] == 1);
  CHECK(A[5] == -1);
  CHECK(b[2] == 2);
}

TEST_CASE("iteration_domain: unsupported bounds throw") {
  Program p = gramschmidt();
  std::vector<double> A, b;
  p.iterators[3].lower.text = "k + k";  // coefficient 2
  CHECK_THROWS_AS(iteration_domain(p, p.computations[4], A, b), DataError);
  p.iterators[3].lower.text = "i + 1";  // i is not an iterator of R_up_init
  CHECK_THROWS_AS(iteration_domain(p, p.computations[4], A, b), DataError);
  p.iterators[3].lower.text = "j";  // own iterator
  CHECK_THROWS_AS(iteration_domain(p, p.computations[4], A, b), DataError);
  p.iterators[3].lower.text = "0";
  p.iterators[3].upper.text = "max(30, k)";  // max only allowed in lower bounds
  CHECK_THROWS_AS(iteration_domain(p, p.computations[4], A, b), DataError);
  p.iterators[3].upper.text = "min(30, k)";
  CHECK_THROWS_AS(iteration_domain(p, p.computations[4], A, b), DataError);
}

// ====================================================================== transformations (§3.4)

TEST_CASE("transformation_matrix: interchange, reversal, 2-D and 3-D skewing") {
  // interchange of levels 0 and 2 in a depth-3 nest
  std::vector<double> m = transformation_matrix(tag({1, 0, 2}), 3);
  CHECK(m == std::vector<double>{0, 0, 1, 0, 1, 0, 1, 0, 0});
  // reversal of level 1
  m = transformation_matrix(tag({2, 0, 0, 1}), 2);
  CHECK(m == std::vector<double>{1, 0, 0, -1});
  // 2-D skewing of levels (0, 1) with p1..p4 = 1, 2, 0, 1 → rows [1 2], [0 1]
  m = transformation_matrix(tag({3, 0, 0, 0, 0, 1, 0, 1, 2, 0, 1}), 2);
  CHECK(m == std::vector<double>{1, 2, 0, 1});
  // 2-D skewing on levels (1, 2) of a depth-3 nest leaves level 0 alone
  m = transformation_matrix(tag({3, 0, 0, 0, 1, 2, 0, 2, 1, 1, 1}), 3);
  CHECK(m == std::vector<double>{1, 0, 0, 0, 2, 1, 0, 1, 1});
  // 3-D skewing on levels (0, 1, 2): the 3×3 block row-major from p1..p9
  m = transformation_matrix(tag({3, 0, 0, 0, 0, 1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9}), 3);
  CHECK(m == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  // 3-D skewing on levels (1, 2, 3) of a depth-4 nest
  m = transformation_matrix(tag({3, 0, 0, 0, 1, 2, 3, 1, 1, 0, 0, 1, 1, 0, 0, 1}), 4);
  CHECK(m == std::vector<double>{1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1});
  // type 0 = identity
  m = transformation_matrix(tag({0}), 2);
  CHECK(m == std::vector<double>{1, 0, 0, 1});
  // bad tags
  CHECK_THROWS_AS(transformation_matrix(tag({4}), 2), DataError);
  CHECK_THROWS_AS(transformation_matrix(tag({1, 0, 2}), 2), DataError);
  CHECK_THROWS_AS(transformation_matrix(tag({2, 0, 0, 5}), 3), DataError);
  CHECK_THROWS_AS(transformation_matrix(tag({3, 0, 0, 0, 0, 3, 0, 1, 0, 0, 1}), 3), DataError);
  CHECK_THROWS_AS(transformation_matrix(tag({2, 0, 0, -1}), 3), DataError);
}

TEST_CASE("composed_transformation: later matrices multiply on the left") {
  CompSchedule cs;
  cs.transformations = {tag({1, 0, 1}),
                        tag({2, 0, 0, 0})};  // interchange(0,1), then reverse level 0
  // T = R · I = diag(-1, 1) · [[0,1],[1,0]] = [[0,-1],[1,0]]  (I · R would be [[0,1],[-1,0]])
  CHECK(composed_transformation(cs, 2) == std::vector<double>{0, -1, 1, 0});
  cs.transformations = {tag({2, 0, 0, 0}), tag({1, 0, 1})};
  CHECK(composed_transformation(cs, 2) == std::vector<double>{0, 1, -1, 0});
  cs.transformations.clear();
  CHECK(composed_transformation(cs, 3) == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  // skew then interchange on a depth-3 nest
  cs.transformations = {tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1}), tag({1, 0, 2})};
  // S = [[1,1,0],[0,1,0],[0,0,1]]; P(0,2) · S = rows of S permuted: [0,0,1],[0,1,0],[1,1,0]
  CHECK(composed_transformation(cs, 3) == std::vector<double>{0, 0, 1, 0, 1, 0, 1, 1, 0});
}

TEST_CASE("inverse_matrix: exact integer inverses and singular matrices") {
  CHECK(inverse_matrix({1, 1, 0, 1}, 2) == std::vector<double>{1, -1, 0, 1});
  CHECK(inverse_matrix({0, -1, 1, 0}, 2) == std::vector<double>{0, 1, -1, 0});
  const std::vector<double> m = {2, 1, 0, 1, 1, 0, 0, 3, 1};
  const std::vector<double> inv = inverse_matrix(m, 3);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += m[size_t(r * 3 + k)] * inv[size_t(k * 3 + c)];
      CHECK(acc == doctest::Approx(r == c ? 1.0 : 0.0));
    }
  CHECK_THROWS_AS(inverse_matrix({1, 2, 2, 4}, 2), DataError);
  CHECK_THROWS_AS(inverse_matrix({0, 0, 0, 0}, 2), DataError);
}

// ====================================================================== accesses (§3.6)

TEST_CASE("write_access_matrix: plain, primed, constant and permuted relations") {
  using M = std::vector<std::vector<int>>;
  CHECK(write_access_matrix("{ R_up_init[k, j] -> b_R[k' = k, j' = j] }", {"k", "j"}) ==
        M{{1, 0, 0}, {0, 1, 0}});
  // the domain names of the relation are used, not the computation's iterator names (Q_out: i vs
  // i_0)
  CHECK(write_access_matrix("{ Q_out[k, i] -> b_Q[i, k] }", {"k", "i_0"}) ==
        M{{0, 1, 0}, {1, 0, 0}});
  CHECK(write_access_matrix("{ nrm_init[k] -> b_nrm[0] }", {"k"}) == M{{0, 0}});
  CHECK(write_access_matrix("{ R_diag[k] -> b_R[k, k] }", {"k"}) == M{{1, 0}, {1, 0}});
  CHECK(write_access_matrix("{comp00[i0,i1,i2]->buf00[i2,i0]}", {"a", "b", "c"}) ==
        M{{0, 0, 1, 0}, {1, 0, 0, 0}});
  // offsets are ignored, every iterator token of an entry is marked
  CHECK(write_access_matrix("{ S[i, j] -> b[i + 1, j - i] }", {"i", "j"}) ==
        M{{1, 0, 0}, {1, 1, 0}});
  CHECK(write_access_matrix("[N] -> { S[i] -> b[i] : 0 <= i < N }", {"i"}) == M{{1, 0}});
  CHECK(write_access_matrix("{ S[i0, i1] -> b[i1'=i1, i0' =i0] }", {"x", "y"}) ==
        M{{0, 1, 0}, {1, 0, 0}});
  // errors
  CHECK_THROWS_AS(write_access_matrix("garbage", {"i"}), DataError);
  CHECK_THROWS_AS(write_access_matrix("{ S[i] }", {"i"}), DataError);
  CHECK_THROWS_AS(write_access_matrix("{ S[i -> b[i] }", {"i"}), DataError);
  CHECK_THROWS_AS(write_access_matrix("{ S[i] -> b[i }", {"i"}), DataError);
  CHECK_THROWS_AS(write_access_matrix("{ S[i, j] -> b[i] }", {"i"}),
                  DataError);  // 2 dims for depth 1
}

TEST_CASE("pad_access_matrix: framing into 6x7 (model-spec §3.6 example)") {
  auto p = pad_access_matrix({{0, 1, 0}, {1, 0, 0}}, 2);
  const float exp[42] = {1, 1, 1, 0, 0, 0, 1,  //
                         1, 0, 1, 0, 0, 0, 0,  //
                         1, 1, 0, 0, 0, 0, 0};
  for (int k = 0; k < 42; ++k) CHECK(p[size_t(k)] == exp[k]);
  // constant column goes to column 6; 5 iterators fill columns 0..5
  p = pad_access_matrix({{1, 0, 0, 0, 0, 7}}, 5);
  CHECK(p[0] == 1);
  CHECK(p[5] == 1);
  CHECK(p[6] == 1);
  CHECK(p[7] == 1);
  CHECK(p[8] == 1);
  CHECK(p[13] == 7);
  CHECK_THROWS_AS(pad_access_matrix(std::vector<std::vector<int>>(6, std::vector<int>(3, 0)), 2),
                  DataError);
  CHECK_THROWS_AS(pad_access_matrix({{0, 1}}, 2), DataError);
  CHECK_THROWS_AS(pad_access_matrix({{0, 1, 0, 0, 0, 0, 0}}, 6), DataError);
}

// ====================================================================== expression (§3.7)

TEST_CASE("expression_rows: post-order one-hots with the computation's data type") {
  Program p = gramschmidt();
  auto rows = expression_rows(p.computations[1]);  // nrm_comp: add(access, mul(access, access))
  REQUIRE(rows.size() == 5);
  const int other = 7, mul = 2, add = 0;
  const int ops[5] = {other, other, other, mul, add};
  for (int r = 0; r < 5; ++r) {
    for (int k = 0; k < 8; ++k) CHECK(rows[size_t(r)][size_t(k)] == (k == ops[r] ? 1.0f : 0.0f));
    CHECK(rows[size_t(r)][8] == 0);
    CHECK(rows[size_t(r)][9] == 0);
    CHECK(rows[size_t(r)][10] == 1);  // float64
  }
  Computation c = p.computations[1];
  c.data_type = "int32";
  c.expression =
      node("max", {node("min", {leaf("cast"), node("sqrt", {leaf("value")})}),
                   node("div", {node("sub", {leaf("access"), leaf("minus")}), leaf("value")})});
  rows = expression_rows(c);
  // post-order: cast, value, sqrt, min, access, minus, sub, value, div, max
  const int ops2[10] = {7, 7, 4, 5, 7, 7, 1, 7, 3, 6};
  REQUIRE(rows.size() == 10);
  for (int r = 0; r < 10; ++r) {
    CHECK(rows[size_t(r)][size_t(ops2[r])] == 1);
    CHECK(rows[size_t(r)][8] == 1);
  }
  c.data_type = "uint8";  // other types: no data-type bit
  rows = expression_rows(c);
  CHECK(rows[0][8] + rows[0][9] + rows[0][10] == 0);
  c.data_type = "float32";
  rows = expression_rows(c);
  CHECK(rows[0][9] == 1);
}

// ====================================================================== tree (§2)

TEST_CASE("annotate_tree / footprint / enclosing_iterators on gramschmidt") {
  Program p = gramschmidt();
  ProgramTree t = annotate_tree(p, *p.schedules[0].tree);
  CHECK(footprint(t) ==
        "<R><L0>[C0C2]<L1>[C1]</L1><L2>[C3]</L2><L3>[C4]<L4>[C5]</L4><L5>[C6]</L5></L3></L0></R>");
  REQUIRE(t.roots.size() == 1);
  const TreeNode& root = t.nodes[size_t(t.roots[0])];
  CHECK(root.loop_index == 0);
  CHECK(root.comp_indices == std::vector<int>{0, 2});
  CHECK(root.children.size() == 3);
  CHECK(enclosing_iterators(*p.schedules[0].tree, "A_out") ==
        std::vector<std::string>{"k", "j", "i_2"});
  CHECK(enclosing_iterators(*p.schedules[0].tree, "R_diag") == std::vector<std::string>{"k"});
  CHECK(enclosing_iterators(*p.schedules[0].tree, "nope").empty());
  // the fallback tree from parent/child links gives the same footprint
  CHECK(footprint(annotate_tree(p, tree_from_iterators(p))) == footprint(t));
  // a two-root program: <R>fp1<R>fp2</R>; computations listed in node order
  LoopTree two{{loop("i", {"R_diag", "nrm_init"}), loop("k", {})}};
  CHECK(footprint(annotate_tree(p, two)) == "<R><L1>[C2C0]</L1><R><L0></L0></R>");
  // unknown names
  CHECK_THROWS_AS(annotate_tree(p, LoopTree{{loop("zz", {})}}), DataError);
  CHECK_THROWS_AS(annotate_tree(p, LoopTree{{loop("k", {"ghost"})}}), DataError);
}

// ====================================================================== computation and loop
// vectors

TEST_CASE("schedule_columns: 146 columns 1..96 and 157..206") {
  const auto& cols = schedule_columns();
  REQUIRE(cols.size() == size_t(kScheduleColumns));
  CHECK(cols.front() == 1);
  CHECK(cols[95] == 96);
  CHECK(cols[96] == 157);
  CHECK(cols.back() == 206);
  int n = 0;
  for (int c = 0; c < kCompVectorWidth; ++c) n += is_schedule_column(c);
  CHECK(n == kScheduleColumns);
  CHECK_FALSE(is_schedule_column(0));
  CHECK_FALSE(is_schedule_column(97));
  CHECK_FALSE(is_schedule_column(156));
  CHECK_FALSE(is_schedule_column(207));
}

TEST_CASE("featurize gramschmidt: static columns of model-spec §13") {
  Program p = gramschmidt();
  p.schedules.push_back(derived(p, 0.02));
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  CHECK(log.total("program") == 0);
  CHECK(log.total("schedule") == 0);
  CHECK(f->n_comps == 7);
  CHECK(f->n_loops == 6);
  CHECK(f->n_schedules() == 2);
  CHECK(f->footprint ==
        "<R><L0>[C0C2]<L1>[C1]</L1><L2>[C3]</L2><L3>[C4]<L4>[C5]</L4><L5>[C6]</L5></L3></L0></R>");
  CHECK(f->speedup[0] == doctest::Approx(1.0));  // initial time = min of schedule 0
  CHECK(f->speedup[1] == doctest::Approx(0.010381 / 0.02));
  std::vector<float> v(size_t(7) * kCompVectorWidth);
  f->comp_vectors(0, v.data());
  auto at = [&](int c, int col) { return v[size_t(c) * kCompVectorWidth + size_t(col)]; };
  // R_up_init (computation 4): A rows at 97.. (5 columns each), b at 147..
  const float A[4][2] = {{-1, 0}, {1, 0}, {1, -1}, {0, 1}};
  const float b[4] = {0, 29, -1, 29};
  for (int r = 0; r < 4; ++r) {
    CHECK(at(4, 97 + r * 5) == A[r][0]);
    CHECK(at(4, 97 + r * 5 + 1) == A[r][1]);
    for (int k = 2; k < 5; ++k) CHECK(at(4, 97 + r * 5 + k) == 0);
    CHECK(at(4, 147 + r) == b[r]);
    // untransformed: A·T⁻¹ = A
    CHECK(at(4, 157 + r * 5) == A[r][0]);
    CHECK(at(4, 157 + r * 5 + 1) == A[r][1]);
  }
  for (int r = 4; r < 10; ++r) CHECK(at(4, 147 + r) == 0);
  // write block of R_up_init: id 2 + 1, padded [[1,0,0],[0,1,0]] → rows
  // [1,1,1,0,0,0,1],[1,1,0,..,0],[1,0,1,0,..]
  CHECK(at(4, 207) == 3);
  const float w[21] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0};
  for (int k = 0; k < 21; ++k) CHECK(at(4, 208 + k) == w[k]);
  for (int k = 21; k < 42; ++k) CHECK(at(4, 208 + k) == 0);
  CHECK(at(4, 250) == 0);  // no read accesses
  // nrm_comp (computation 1): second read access [[0,1,0],[1,0,0]] (block 1 at 250 + 44)
  const int blk = 250 + 44;
  CHECK(at(1, blk) == 0);      // not a reduction access
  CHECK(at(1, blk + 1) == 1);  // buffer 0 + 1
  const float pr[21] = {1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  for (int k = 0; k < 21; ++k) CHECK(at(1, blk + 2 + k) == pr[k]);
  for (int k = 21; k < 42; ++k) CHECK(at(1, blk + 2 + k) == 0);
  CHECK(at(1, 250) == 1);           // first access is a reduction
  CHECK(at(1, 0) == 1);             // comp_is_reduction
  CHECK(at(1, 250 + 3 * 44) == 0);  // 4th block absent
  // nrm_comp expression rows: other, other, other, mul, add (+ float64), then 61 zero rows
  const float* ex = &f->expr[size_t(1) * kMaxExprLen * kExprNodeWidth];
  const int ops[5] = {7, 7, 7, 2, 0};
  for (int r = 0; r < 5; ++r) {
    CHECK(ex[r * 11 + ops[r]] == 1);
    CHECK(ex[r * 11 + 10] == 1);
  }
  float rest = 0;
  for (int k = 5 * 11; k < kMaxExprLen * kExprNodeWidth; ++k) rest += std::fabs(ex[k]);
  CHECK(rest == 0);
}

TEST_CASE("featurize gramschmidt: parallel Q_out i_0 and the Q2 zeroing quirk") {
  Program p = gramschmidt();
  Schedule s = derived(p, 0.005);
  s.comps[3].parallelized_dim = "i_0";  // Q_out
  p.schedules.push_back(s);
  SkipLog log(false, 0);
  FeatureOptions opt;  // faithful: loop_zeroing = last_comp
  auto f = featurize(p, opt, log);
  REQUIRE(f);
  REQUIRE(f->n_schedules() == 2);
  // comp vector of Q_out: Parallelized=1 in slot 1 (column 1 + 6·1)
  CHECK(comp_value(*f, 1, 3, 1 + 6) == 1);
  CHECK(comp_value(*f, 1, 3, 1) == 0);
  CHECK(comp_value(*f, 0, 3, 1 + 6) == 0);
  // loop vector: row i_0 (index 2) is zeroed because A_out is enclosed by k, j, i_2 only
  for (int k = 0; k < 8; ++k) CHECK(loop_row(*f, 1, 2)[k] == 0);

  opt.loop_zeroing = FeatureOptions::LoopZeroing::Off;
  auto g = featurize(p, opt, log);
  REQUIRE(g);
  CHECK(loop_row(*g, 1, 2)[0] == 1);  // Parallelized survives without zeroing
  opt.loop_zeroing = FeatureOptions::LoopZeroing::RemovedByFusion;
  auto h = featurize(p, opt, log);
  REQUIRE(h);
  CHECK(loop_row(*h, 1, 2)[0] == 1);  // i_0 encloses Q_out, so it is not "removed by fusion"
  // the zeroing only ever touches loop vectors, never the computation vectors
  CHECK(comp_value(*h, 1, 3, 7) == 1);
  CHECK(comp_value(*g, 1, 3, 7) == 1);
}

TEST_CASE("featurize gramschmidt: reversal tag flips column 1 of A·T^-1") {
  Program p = gramschmidt();
  Schedule s = derived(p, 0.009);
  s.comps[4].transformations = {tag({2, 0, 0, 1})};  // R_up_init, reverse level 1 (j)
  p.schedules.push_back(s);
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  const float A[4][2] = {{-1, 0}, {1, 0}, {1, -1}, {0, 1}};
  for (int r = 0; r < 4; ++r) {
    CHECK(comp_value(*f, 1, 4, 157 + r * 5) == A[r][0]);
    CHECK(comp_value(*f, 1, 4, 157 + r * 5 + 1) == -A[r][1]);
    CHECK(comp_value(*f, 1, 4, 97 + r * 5 + 1) == A[r][1]);  // original A unchanged
  }
  // the raw tag vector is stored at 33..48, zero padding after
  CHECK(comp_value(*f, 1, 4, 33) == 2);
  CHECK(comp_value(*f, 1, 4, 36) == 1);
  CHECK(comp_value(*f, 1, 4, 49) == 0);
  CHECK(comp_value(*f, 0, 4, 33) == 0);
}

TEST_CASE("featurize: tiling, unrolling, shifting slots and loop vector") {
  Program p = gramschmidt();
  Schedule s = derived(p, 0.004);
  CompSchedule& r_up = s.comps[5];  // R_up (k, j, i_1)
  r_up.tiling_dims = {"j", "i_1"};
  r_up.tiling_factors = {32, 64};
  r_up.unrolling_factor = 4;
  r_up.shiftings = {{"i", 3}};      // prefix quirk: matches i_1 in the computation vector
  s.comps[6].unrolling_factor = 8;  // A_out: innermost per tree = i_2
  s.comps[6].shiftings = {{"i_2", 2}};
  p.schedules.push_back(s);
  SkipLog log(false, 0);
  FeatureOptions opt = without_loop_zeroing();
  auto f = featurize(p, opt, log);
  REQUIRE(f);
  REQUIRE(f->n_schedules() == 2);
  // computation vector of R_up: slot 1 (j) tiled 32, slot 2 (i_1) tiled 64 and shifted 3 (prefix)
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 1 + 1) == 1);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 1 + 2) == 32);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 2 + 1) == 1);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 2 + 2) == 64);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 2 + 4) == 1);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 2 + 5) == 3);
  CHECK(comp_value(*f, 1, 5, 1 + 6 * 0 + 4) == 0);  // "k" does not start with "i"
  CHECK(comp_value(*f, 1, 5, 31) == 1);
  CHECK(comp_value(*f, 1, 5, 32) == 4);
  CHECK(comp_value(*f, 1, 6, 32) == 8);
  // loop vector [Par, Tiled, TileF, Fused, Unr, UnrF, Shift, ShiftF]
  CHECK(loop_row(*f, 1, 3)[1] == 1);  // j tiled
  CHECK(loop_row(*f, 1, 3)[2] == 32);
  CHECK(loop_row(*f, 1, 4)[2] == 64);  // i_1
  CHECK(loop_row(*f, 1, 4)[4] == 1);   // i_1 unrolled (innermost of R_up per the tree)
  CHECK(loop_row(*f, 1, 4)[5] == 4);
  CHECK(loop_row(*f, 1, 5)[5] == 8);  // i_2 unrolled by A_out
  CHECK(loop_row(*f, 1, 5)[6] == 1);  // i_2 shifted (exact name)
  CHECK(loop_row(*f, 1, 5)[7] == 2);
  CHECK(loop_row(*f, 1, 1)[6] == 1);  // the loop vector shifts the loop named exactly "i"
  CHECK(loop_row(*f, 1, 1)[7] == 3);

  // Q3 exact: the computation vector no longer matches i_1 with "i"
  opt.shift_match = FeatureOptions::ShiftMatch::Exact;
  auto g = featurize(p, opt, log);
  REQUIRE(g);
  CHECK(comp_value(*g, 1, 5, 1 + 6 * 2 + 4) == 0);
  CHECK(comp_value(*g, 1, 6, 1 + 6 * 2 + 4) == 1);  // A_out's "i_2" is exact
  CHECK(log.total("schedule") == 0);
}

TEST_CASE("featurize: fusion uses fusion[0]'s schedule entry and sets Fused bits") {
  // two nests: i0 > i1 [c0], i2 > i3 [c1]; a schedule fuses c0 and c1 at level 1
  Program p;
  p.name = "fused";
  p.iterators = {iter("i0", "0", "10", "", {"i1"}, {}), iter("i1", "0", "10", "i0", {}, {"c0"}),
                 iter("i2", "0", "10", "", {"i3"}, {}), iter("i3", "0", "10", "i2", {}, {"c1"})};
  p.computations = {
      comp("c0", 1, {"i0", "i1"}, false, "{ c0[i0, i1] -> b0[i0, i1] }", 0, {}, leaf("value")),
      comp("c1", 2, {"i2", "i3"}, false, "{ c1[i2, i3] -> b1[i3] }", 1, {}, leaf("value"))};
  p.initial_execution_time = 1.0;
  Schedule s0;
  s0.comps.resize(2);
  s0.tree = LoopTree{{loop("i0", {}, {loop("i1", {"c0"})}), loop("i2", {}, {loop("i3", {"c1"})})}};
  s0.execution_times = {1.0};
  Schedule s1 = s0;
  s1.fusions = {Fusion{"c0", "c1", 1}};
  s1.tree = LoopTree{{loop("i0", {}, {loop("i1", {"c0", "c1"})})}};
  s1.comps[0].parallelized_dim = "i0";
  s1.comps[1].parallelized_dim = "i3";  // ignored in the loop vector: c1 uses c0's entry
  s1.comps[1].unrolling_factor = 4;     // ignored too (c0's entry has none)
  s1.execution_times = {0.5};
  p.schedules = {s0, s1};
  SkipLog log(false, 0);
  FeatureOptions opt = without_loop_zeroing();
  auto f = featurize(p, opt, log);
  REQUIRE(f);
  REQUIRE(f->n_schedules() == 2);
  CHECK(loop_row(*f, 1, 0)[0] == 1);  // i0 parallel (from c0's entry)
  CHECK(loop_row(*f, 1, 3)[0] == 0);  // c1's own i3 parallel flag not used in the loop vector
  CHECK(loop_row(*f, 1, 1)[4] == 0);  // no unrolling from c1's own entry
  CHECK(loop_row(*f, 1, 1)[3] == 1);  // fused loops: c0.iterators[1] = i1, c1.iterators[1] = i3
  CHECK(loop_row(*f, 1, 3)[3] == 1);
  CHECK(loop_row(*f, 1, 0)[3] == 0);
  // computation vectors use their own entry: c1 slot 1 (i3) parallel, both slot 1 fused
  CHECK(comp_value(*f, 1, 1, 1 + 6 * 1) == 1);
  CHECK(comp_value(*f, 1, 0, 1 + 6 * 1 + 3) == 1);
  CHECK(comp_value(*f, 1, 1, 1 + 6 * 1 + 3) == 1);
  CHECK(comp_value(*f, 1, 1, 1 + 6 * 0 + 3) == 0);
  CHECK(comp_value(*f, 1, 1, 31) == 1);  // c1's own unroll in its computation vector

  // Q2: last_comp = c1 enclosed by i0, i1 in the fused tree → i2, i3 zeroed; removed_by_fusion:
  // same here (i2, i3 enclose nothing after fusion), but schedule 0 keeps everything in
  // removed_by_fusion
  opt.loop_zeroing = FeatureOptions::LoopZeroing::LastComp;
  auto g = featurize(p, opt, log);
  REQUIRE(g);
  CHECK(loop_row(*g, 1, 3)[3] == 0);
  CHECK(loop_row(*g, 1, 1)[3] == 1);
  s0.comps[0].parallelized_dim = "i0";  // schedule 0 parallel i0; last comp c1 is in the other nest
  p.schedules[0] = s0;
  g = featurize(p, opt, log);
  REQUIRE(g);
  CHECK(loop_row(*g, 0, 0)[0] == 0);  // faithful quirk blanks the other nest
  opt.loop_zeroing = FeatureOptions::LoopZeroing::RemovedByFusion;
  auto h = featurize(p, opt, log);
  REQUIRE(h);
  CHECK(loop_row(*h, 0, 0)[0] == 1);  // intended: i0 still encloses c0
  CHECK(loop_row(*h, 1, 3)[3] == 0);  // i3 was removed by the fusion
  CHECK(loop_row(*h, 1, 1)[3] == 1);
  CHECK(log.total("schedule") == 0);
}

TEST_CASE("featurize: skewed and interchanged domains, A·T^-1") {
  Program p = tiny();  // i0 ∈ [0,64), i1 ∈ [0,32)
  p.schedules[1].comps[0].transformations = {tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1}),
                                             tag({1, 0, 1})};
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  REQUIRE(f->n_schedules() == 2);
  // T = P · S = [[0,1],[1,1]]; T⁻¹ = [[-1,1],[1,0]]; A = [[-1,0],[1,0],[0,-1],[0,1]]
  // A·T⁻¹ = [[1,-1],[-1,1],[-1,0],[1,0]]
  const float exp[4][2] = {{1, -1}, {-1, 1}, {-1, 0}, {1, 0}};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) CHECK(comp_value(*f, 1, 0, 157 + r * 5 + c) == exp[r][c]);
  CHECK(comp_value(*f, 1, 0, 147 + 1) == 63);  // b unchanged: 64 − 1 and 32 − 1
  CHECK(comp_value(*f, 1, 0, 147 + 3) == 31);
  CHECK(comp_value(*f, 1, 0, 33 + 16) == 1);  // second tag vector type
}

// ====================================================================== drop reasons (§3.11, Q6)

TEST_CASE("featurize: every program-level drop reason is named and counted") {
  struct Case {
    const char* reason;
    std::function<void(Program&)> edit;
  };
  const std::vector<Case> cases = {
      {"lt_2_schedules", [](Program& p) { p.schedules[1].execution_times = {-1}; }},
      {"no_schedules", [](Program& p) { p.schedules.clear(); }},
      {"no_computations", [](Program& p) { p.computations.clear(); }},
      {"accesses_gt_15",
       [](Program& p) { p.computations[0].accesses.assign(16, p.computations[0].accesses[0]); }},
      {"depth_gt_5",
       [](Program& p) {
         for (int k = 2; k < 6; ++k)
           p.iterators.push_back(iter("x" + std::to_string(k), "0", "4", "", {}, {}));
         p.computations[0].iterators = {"i0", "i1", "x2", "x3", "x4", "x5"};
       }},
      {"fusion_in_schedule0",
       [](Program& p) {
         p.schedules[0].fusions = {Fusion{"c0", "c0", 0}};
       }},
      {"expression_gt_66",
       [](Program& p) {
         ExprNode e = leaf("value");
         for (int k = 0; k < 66; ++k) e = node("add", {e});
         p.computations[0].expression = e;
       }},
      {"bad_expression",  // nested deeper than 10000 levels
       [](Program& p) {
         ExprNode e = leaf("value");
         for (int k = 0; k < 10010; ++k) {
           ExprNode up{"minus", {}};
           up.children.push_back(std::move(e));
           e = std::move(up);
         }
         p.computations[0].expression = std::move(e);
       }},
      {"bad_access_matrix",
       [](Program& p) {
         p.computations[0].accesses[0].matrix = {{1, 0}};
       }},
      {"bad_access_matrix",
       [](Program& p) {
         p.computations[0].accesses[0].matrix.assign(6, std::vector<int>{0, 0, 0});
       }},
      {"bad_access_matrix",
       [](Program& p) {
         p.computations[0].write_access_relation = "{ c0[i0, i1] -> b[i0, i1, i0, i1, i0, i1] }";
       }},
      {"bad_write_access",
       [](Program& p) { p.computations[0].write_access_relation = "c0 writes b"; }},
      {"unsupported_bound", [](Program& p) { p.iterators[1].upper.text = "2*i0"; }},
      {"unsupported_bound", [](Program& p) { p.iterators[1].upper.text = "i0 + i0"; }},
      {"unsupported_bound", [](Program& p) { p.iterators[1].lower.text = "min(0, i0)"; }},
      {"unknown_iterator",
       [](Program& p) {
         p.computations[0].iterators = {"i0", "zz"};
       }},
      {"empty_iteration_domain", [](Program& p) { p.iterators[1].lower.text = "40"; }},  // 40 > 32
      {"empty_iteration_domain",
       [](Program& p) { p.iterators[0].upper.text = "(1 - 1)"; }},  // 0 = 0
      {"empty_iteration_domain",
       [](Program& p) { p.iterators.push_back(iter("x", "-2", "-5", "", {}, {})); }},
      {"bad_tree", [](Program& p) { p.schedules[0].tree->roots[0].loop_name = "nope"; }},
      {"bad_tree",
       [](Program& p) { p.schedules[0].tree->roots[0].children[0].computations = {"ghost"}; }},
      {"bad_initial_time", [](Program& p) { p.initial_execution_time = 0; }},
      {"no_usable_schedules",
       [](Program& p) {
         for (auto& s : p.schedules) s.comps[0].transformations = {tag({2, 0, 0, 7})};
       }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.reason);
    Program p = tiny();
    c.edit(p);
    SkipLog log(false, 0);
    auto f = featurize(p, FeatureOptions{}, log);
    CHECK_FALSE(f.has_value());
    CHECK(log.count("program", c.reason) == 1);
    CHECK(log.total("program") == 1);
    auto ev = log.events();
    REQUIRE(!ev.empty());
    const SkipEvent& e = ev.back();
    CHECK(e.level == "program");
    CHECK(e.file == "tiny.jsonl");
    CHECK(e.line == 3);
    CHECK(e.program == "tiny");
  }
  // the unmodified program passes
  SkipLog log(false, 0);
  CHECK(featurize(tiny(), FeatureOptions{}, log).has_value());
  CHECK(log.counts().empty());
}

TEST_CASE("featurize: every schedule-level drop reason is named and counted") {
  struct Case {
    const char* reason;
    std::function<void(Schedule&)> edit;
  };
  const std::vector<Case> cases = {
      {"bad_execution_times", [](Schedule& s) { s.parse_problem = "bad_execution_times"; }},
      {"no_execution_times", [](Schedule& s) { s.execution_times.clear(); }},
      {"negative_time",
       [](Schedule& s) {
         s.execution_times = {3.0, -1.0};
       }},
      {"zero_time",
       [](Schedule& s) {
         s.execution_times = {0.0, 2.0};
       }},
      {"bad_execution_time", [](Schedule& s) { s.execution_times = {std::nan("")}; }},
      {"speedup_not_finite", [](Schedule& s) { s.execution_times = {1e-300}; }},
      {"transformations_gt_4",
       [](Schedule& s) {
         s.comps[0].transformations.assign(5, tag({2, 0, 0, 0}));
       }},
      {"singular_transformation",
       [](Schedule& s) {
         s.comps[0].transformations = {tag({3, 0, 0, 0, 0, 1, 0, 1, 2, 2, 4})};
       }},
      {"bad_transformation", [](Schedule& s) { s.comps[0].transformations = {tag({9})}; }},
      {"bad_transformation",
       [](Schedule& s) {
         s.comps[0].transformations = {tag({1, 0, 2})};
       }},
      {"bad_tiling",
       [](Schedule& s) {
         s.comps[0].tiling_dims = {"i0", "i1"};
         s.comps[0].tiling_factors = {32};
       }},
      {"unknown_loop_name", [](Schedule& s) { s.comps[0].parallelized_dim = "q"; }},
      {"unknown_loop_name",
       [](Schedule& s) {
         s.comps[0].tiling_dims = {"q"};
         s.comps[0].tiling_factors = {4};
       }},
      {"unknown_loop_name",
       [](Schedule& s) {
         s.comps[0].shiftings = {{"q", 1}};
       }},
      {"bad_fusion",
       [](Schedule& s) {
         s.fusions = {Fusion{"c0", "ghost", 0}};
       }},
      {"bad_fusion",
       [](Schedule& s) {
         s.fusions = {Fusion{"c0", "c0", 2}};
       }},
      {"comp_not_in_tree",
       [](Schedule& s) {
         s.comps[0].unrolling_factor = 4;
         s.tree->roots[0].children[0].computations.clear();
       }},
      {"bad_schedule_comps", [](Schedule& s) { s.comps.clear(); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.reason);
    Program p = tiny();
    p.schedules.push_back(p.schedules[1]);  // 3 schedules: dropping one keeps the program
    p.schedules.push_back(p.schedules[1]);
    c.edit(p.schedules[2]);
    SkipLog log(false, 0);
    auto f = featurize(p, FeatureOptions{}, log);
    REQUIRE(f.has_value());
    CHECK(f->n_schedules() == 3);
    CHECK(f->schedule_index == std::vector<int32_t>{0, 1, 3});
    CHECK(log.count("schedule", c.reason) == 1);
    CHECK(log.total("schedule") == 1);
    auto ev = log.events();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].schedule == 2);
    CHECK(ev[0].program == "tiny");
    CHECK(ev[0].file == "tiny.jsonl");
    CHECK(ev[0].line == 3);
  }
}

TEST_CASE("featurize: tile and unroll factor conflicts drop the schedule") {
  Program p = gramschmidt();
  Schedule s = derived(p, 0.004);
  s.comps[5].tiling_dims = {"j"};
  s.comps[5].tiling_factors = {32};
  s.comps[6].tiling_dims = {"j"};
  s.comps[6].tiling_factors = {64};
  p.schedules.push_back(s);
  Schedule u = derived(p, 0.004);
  u.comps[5].unrolling_factor = 4;
  u.comps[5].shiftings = {};
  u.tree->roots[0].children[2].children[0].computations = {"R_up",
                                                           "A_out"};  // both innermost in i_1
  u.tree->roots[0].children[2].children[1].computations = {};
  u.comps[6].unrolling_factor = 8;
  p.schedules.push_back(u);
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  CHECK(f->n_schedules() == 1);
  CHECK(log.count("schedule", "tile_factor_conflict") == 1);
  CHECK(log.count("schedule", "unroll_factor_conflict") == 1);
}

TEST_CASE("featurize: keep_unlabeled keeps schedules without times with NaN speedup") {
  Program p = tiny();
  p.schedules[1].execution_times.clear();
  p.schedules.push_back(p.schedules[0]);
  p.schedules[2].execution_times = {-1};
  SkipLog log(false, 0);
  CHECK_FALSE(featurize(p, FeatureOptions{}, log).has_value());  // only one labelled schedule
  CHECK(log.count("program", "lt_2_schedules") == 1);
  FeatureOptions opt;
  opt.keep_unlabeled = true;
  SkipLog log2(false, 0);
  auto f = featurize(p, opt, log2);
  REQUIRE(f);
  CHECK(f->n_schedules() == 3);
  CHECK(f->speedup[0] == doctest::Approx(1.0));
  CHECK(std::isnan(f->speedup[1]));
  CHECK(std::isnan(f->speedup[2]));
  CHECK(std::isnan(f->min_time_ms[1]));
  CHECK(log2.counts().empty());
  // a single schedule is enough for prediction
  p.schedules.resize(1);
  CHECK(featurize(p, opt, log2).has_value());
  // a new program without any measurement (initial_execution_time missing → NaN) is predicted,
  // never trained on
  Program q = tiny();
  q.initial_execution_time = std::nan("");
  SkipLog log3(false, 0);
  CHECK(featurize(q, opt, log3).has_value());
  CHECK_FALSE(featurize(q, FeatureOptions{}, log3).has_value());
  CHECK(log3.count("program", "bad_initial_time") == 1);
}

TEST_CASE("speedup_label: ratio with the 0.01 floor") {
  CHECK(speedup_label(10, 5) == doctest::Approx(2.0));
  CHECK(speedup_label(1, 1000) == doctest::Approx(0.01));
  CHECK(speedup_label(1, 50) == doctest::Approx(0.02));
  CHECK(std::isnan(speedup_label(1, 0)));
  CHECK(std::isnan(speedup_label(1, -1)));
  CHECK(std::isnan(speedup_label(std::nan(""), 1)));
}

TEST_CASE("comp_vectors: reassembly equals static + schedule columns") {
  Program p = gramschmidt();
  Schedule s = derived(p, 0.003);
  s.comps[3].parallelized_dim = "i_0";
  s.comps[4].transformations = {tag({1, 0, 1}), tag({2, 0, 0, 0})};
  s.comps[6].unrolling_factor = 4;
  p.schedules.push_back(s);
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  std::vector<float> v(size_t(7) * kCompVectorWidth);
  f->comp_vectors(1, v.data());
  const auto& cols = schedule_columns();
  for (int c = 0; c < 7; ++c) {
    for (int k = 0; k < kCompVectorWidth; ++k)
      if (!is_schedule_column(k))
        CHECK(v[size_t(c) * kCompVectorWidth + size_t(k)] ==
              f->comp_static[size_t(c) * kCompVectorWidth + size_t(k)]);
    for (int k = 0; k < kScheduleColumns; ++k)
      CHECK(v[size_t(c) * kCompVectorWidth + size_t(cols[size_t(k)])] ==
            f->comp_sched[(size_t(1) * 7 + size_t(c)) * kScheduleColumns + size_t(k)]);
  }
  for (size_t k = 0; k < f->comp_static.size(); ++k)
    if (is_schedule_column(int(k % kCompVectorWidth))) CHECK(f->comp_static[k] == 0);
  CHECK_THROWS_AS(f->comp_vectors(2, v.data()), DataError);
}

// ============================================================= data files (§13, whole files)

namespace {
/// The committed copy of the Tiramisu gramschmidt record (under tests/data, MIT licence).
const char* kGramschmidt = "tiramisu/function_gramschmidt_explored_schedules.json";

/// Index of the kept schedule whose file index is `file_index` (-1 if dropped).
int64_t kept(const ProgramFeatures& f, int file_index) {
  for (int64_t s = 0; s < f.n_schedules(); ++s)
    if (f.schedule_index[size_t(s)] == file_index) return s;
  return -1;
}

/// An independent, straightforward build of the full [C, 910] computation tensor of one schedule
/// from the public pieces (model-spec §3.2–§3.6), used to check comp_vectors() reassembly.
std::vector<double> direct_comp_vectors(const Program& p, const Schedule& s,
                                        FeatureOptions::ShiftMatch sm) {
  const size_t C = p.computations.size();
  std::vector<double> out(C * kCompVectorWidth, 0.0);
  for (size_t ci = 0; ci < C; ++ci) {
    const Computation& c = p.computations[ci];
    const CompSchedule& cs = s.comps[ci];
    double* v = &out[ci * kCompVectorWidth];
    const int n = int(c.iterators.size());
    v[0] = c.is_reduction;
    for (int d = 0; d < n; ++d) {
      const std::string& it = c.iterators[size_t(d)];
      double* slot = v + 1 + 6 * d;
      slot[0] = cs.parallelized_dim == it && !it.empty();
      auto pos = std::find(cs.tiling_dims.begin(), cs.tiling_dims.end(), it);
      if (pos != cs.tiling_dims.end()) {
        slot[1] = 1;
        slot[2] = double(cs.tiling_factors[size_t(pos - cs.tiling_dims.begin())]);
      }
      for (const auto& f : s.fusions)
        if ((f.comp_a == c.name || f.comp_b == c.name) && f.level == d) slot[3] = 1;
      for (const auto& sh : cs.shiftings) {
        bool m =
            sm == FeatureOptions::ShiftMatch::Exact ? it == sh.first : it.rfind(sh.first, 0) == 0;
        if (m) {
          slot[4] = 1;
          slot[5] = double(sh.second);
          break;
        }
      }
    }
    v[31] = cs.unrolling_factor != 0;
    v[32] = double(cs.unrolling_factor);
    for (size_t t = 0; t < cs.transformations.size(); ++t)
      for (int k = 0; k < 16; ++k)
        v[33 + t * 16 + size_t(k)] = double(cs.transformations[t][size_t(k)]);
    std::vector<double> A, b;
    iteration_domain(p, c, A, b);
    const std::vector<double> Ti = inverse_matrix(composed_transformation(cs, n), n);
    for (int r = 0; r < 2 * n; ++r) {
      v[147 + r] = b[size_t(r)];
      for (int k = 0; k < n; ++k) {
        v[97 + r * 5 + k] = A[size_t(r * n + k)];
        double acc = 0;
        for (int m = 0; m < n; ++m) acc += A[size_t(r * n + m)] * Ti[size_t(m * n + k)];
        v[157 + r * 5 + k] = acc;
      }
    }
    v[207] = c.write_buffer_id + 1;
    auto w = pad_access_matrix(write_access_matrix(c.write_access_relation, c.iterators), n);
    for (int k = 0; k < 42; ++k) v[208 + k] = w[size_t(k)];
    for (size_t a = 0; a < c.accesses.size(); ++a) {
      double* blk = v + 250 + 44 * a;
      blk[0] = c.accesses[a].is_reduction;
      blk[1] = c.accesses[a].buffer_id + 1;
      auto r = pad_access_matrix(c.accesses[a].matrix, n);
      for (int k = 0; k < 42; ++k) blk[2 + k] = r[size_t(k)];
    }
  }
  return out;
}
}  // namespace

TEST_CASE("gramschmidt file: model-spec §13 expectations") {
  const std::string path = lcm::test::committed_data(kGramschmidt);
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path),
                  path << " is missing (tests/data/README.md)");
  SkipLog rlog(false, 0);
  std::vector<Program> progs = read_all_programs(path, rlog);
  REQUIRE(progs.size() == 1);
  const Program& p = progs[0];
  REQUIRE(p.computations.size() == 7);
  REQUIRE(p.schedules.size() == 25);
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  CHECK(log.total("program") == 0);
  CHECK(log.total("schedule") == 0);
  CHECK(f->n_schedules() == 25);
  CHECK(f->footprint ==
        "<R><L0>[C0C2]<L1>[C1]</L1><L2>[C3]</L2><L3>[C4]<L4>[C5]</L4><L5>[C6]</L5></L3></L0></R>");
  CHECK(f->speedup[0] == doctest::Approx(1.0));
  CHECK(f->speedup[size_t(kept(*f, 4))] == doctest::Approx(0.010381 / 1.02693));
  // R_up_init: A rows and b; write matrix [[1,0,0],[0,1,0]]
  const float A[4][2] = {{-1, 0}, {1, 0}, {1, -1}, {0, 1}};
  const float b[4] = {0, 29, -1, 29};
  for (int r = 0; r < 4; ++r) {
    CHECK(comp_value(*f, 0, 4, 97 + r * 5) == A[r][0]);
    CHECK(comp_value(*f, 0, 4, 97 + r * 5 + 1) == A[r][1]);
    CHECK(comp_value(*f, 0, 4, 147 + r) == b[r]);
  }
  using M = std::vector<std::vector<int>>;
  CHECK(write_access_matrix(p.computations[4].write_access_relation, p.computations[4].iterators) ==
        M{{1, 0, 0}, {0, 1, 0}});
  // nrm_comp read access 1 padded rows
  const float pr[21] = {1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  for (int k = 0; k < 21; ++k) CHECK(comp_value(*f, 0, 1, 250 + 44 + 2 + k) == pr[k]);
  for (int k = 21; k < 42; ++k) CHECK(comp_value(*f, 0, 1, 250 + 44 + 2 + k) == 0);
  // nrm_comp expression rows
  const float* ex = &f->expr[size_t(1) * kMaxExprLen * kExprNodeWidth];
  const int ops[5] = {7, 7, 7, 2, 0};
  for (int r = 0; r < 5; ++r) {
    float sum = 0;
    for (int k = 0; k < 11; ++k) sum += ex[r * 11 + k];
    CHECK(sum == 2);
    CHECK(ex[r * 11 + ops[r]] == 1);
    CHECK(ex[r * 11 + 10] == 1);
  }
  CHECK(ex[5 * 11 + 7] == 0);
  // schedule 4: Q_out parallel i_0 → slot 1 flag; loop row i_0 zeroed (faithful Q2)
  const int64_t s4 = kept(*f, 4);
  REQUIRE(s4 >= 0);
  CHECK(comp_value(*f, s4, 3, 1 + 6) == 1);
  for (int k = 0; k < 8; ++k) CHECK(loop_row(*f, s4, 2)[k] == 0);
  // schedule 1: Q_out reversal of level 1 → A·T⁻¹ flips column 1 of Q_out's A
  const int64_t s1 = kept(*f, 1);
  REQUIRE(s1 >= 0);
  CHECK(comp_value(*f, s1, 3, 33) == 2);
  for (int r = 0; r < 4; ++r) {
    CHECK(comp_value(*f, s1, 3, 157 + r * 5) == comp_value(*f, s1, 3, 97 + r * 5));
    CHECK(comp_value(*f, s1, 3, 157 + r * 5 + 1) == -comp_value(*f, s1, 3, 97 + r * 5 + 1));
  }
  CHECK(comp_value(*f, s1, 3, 97 + 3 * 5 + 1) == 1);  // i_0 ≤ 19 row: the flipped entry is non-zero
  // schedule 23: unroll Q_out and R_up by "4" (string) → innermost loops i_0 and i_1 in the loop
  // vector
  const int64_t s23 = kept(*f, 23);
  FeatureOptions off;
  off.loop_zeroing = FeatureOptions::LoopZeroing::Off;
  auto g = featurize(p, off, log);
  REQUIRE(g);
  for (int k = 0; k < 8; ++k) CHECK(loop_row(*g, s4, 2)[k] == (k == 0 ? 1 : 0));  // not zeroed
  CHECK(loop_row(*g, s23, 2)[4] == 1);
  CHECK(loop_row(*g, s23, 2)[5] == 4);
  CHECK(loop_row(*g, s23, 4)[5] == 4);
  CHECK(loop_row(*f, s23, 2)[5] == 0);  // faithful: i_0 zeroed
  CHECK(loop_row(*f, s23, 4)[5] == 0);  // and i_1 too (A_out is enclosed by k, j, i_2)
  CHECK(comp_value(*f, s23, 3, 32) == 4);

  // the hand-typed program of the unit tests featurizes identically for schedule 0
  Program hand = gramschmidt();
  hand.schedules.push_back(hand.schedules[0]);
  auto h = featurize(hand, FeatureOptions{}, log);
  REQUIRE(h);
  CHECK(h->comp_static == f->comp_static);
  CHECK(h->expr == f->expr);
  CHECK(h->footprint == f->footprint);
}

namespace {
/// Featurizes every program of `progs` with the default options and checks each kept one: tensor
/// sizes, footprint, finite values, speedup = initial / min time (floored at 0.01, model-spec §4),
/// comp_vectors() equal to direct_comp_vectors() and the static columns equal across schedules.
/// Adds the kept programs / schedules to n_prog / n_sched and the schedules checked to `checked`.
void check_whole_file_features(const std::vector<Program>& progs, SkipLog& log, int64_t& n_prog,
                               int64_t& n_sched, int64_t& checked) {
  for (const Program& p : progs) {
    auto f = featurize(p, FeatureOptions{}, log);
    if (!f) continue;
    ++n_prog;
    n_sched += f->n_schedules();
    const int C = f->n_comps;
    CHECK(f->comp_sched.size() == size_t(f->n_schedules()) * C * kScheduleColumns);
    CHECK(f->loops.size() == size_t(f->n_schedules()) * f->n_loops * kLoopVectorWidth);
    CHECK(f->expr.size() == size_t(C) * kMaxExprLen * kExprNodeWidth);
    CHECK(f->footprint == footprint(annotate_tree(p, *p.schedules[0].tree)));
    bool finite = true;
    for (float x : f->comp_static) finite &= std::isfinite(x);
    for (float x : f->comp_sched) finite &= std::isfinite(x);
    for (float x : f->loops) finite &= std::isfinite(x);
    for (float x : f->expr) finite &= std::isfinite(x);
    for (float x : f->speedup) finite &= std::isfinite(x) && x >= 0.01f;
    CHECK(finite);
    std::vector<float> full(size_t(C) * kCompVectorWidth);
    std::vector<double> first_direct;
    bool same = true, static_same = true;
    for (int64_t s = 0; s < f->n_schedules(); ++s) {
      const Schedule& sch = p.schedules[size_t(f->schedule_index[size_t(s)])];
      CHECK(
          f->speedup[size_t(s)] ==
          doctest::Approx(std::max(p.initial_execution_time / sch.min_time(), 0.01)).epsilon(1e-6));
      f->comp_vectors(s, full.data());
      std::vector<double> direct = direct_comp_vectors(p, sch, FeatureOptions::ShiftMatch::Prefix);
      for (size_t k = 0; k < direct.size(); ++k) same &= full[k] == float(direct[k]);
      if (s == 0) first_direct = direct;
      for (size_t k = 0; k < direct.size(); ++k)
        if (!is_schedule_column(int(k % kCompVectorWidth)))
          static_same &= direct[k] == first_direct[k];
      ++checked;
    }
    CHECK_MESSAGE(same, p.name);
    CHECK_MESSAGE(static_same, p.name);
  }
}
}  // namespace

TEST_CASE("mini.jsonl.gz: finite features, reassembly, static columns across schedules") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  SkipLog rlog(false, 0);
  std::vector<Program> progs = read_all_programs(path, rlog);
  REQUIRE(progs.size() == 60);
  SkipLog log(false, 0);
  int64_t n_sched = 0, n_prog = 0, checked = 0;
  check_whole_file_features(progs, log, n_prog, n_sched, checked);
  MESSAGE("mini: " << n_prog << " programs, " << n_sched << " schedules kept; skips:\n"
                   << log.summary());
  CHECK(n_prog > 40);
  CHECK(n_sched > 3000);
  CHECK(checked == n_sched);
}

TEST_CASE("committed synth slice: finite features, reassembly, static columns across schedules") {
  // lcm-synth keeps within every model-spec §3.11 limit and writes times for every schedule
  // (tests/data/README.md), so every program and schedule of both files is kept.
  struct Expected {
    const char* file;
    int64_t programs, schedules;
  };
  for (const Expected& x :
       {Expected{"synth_train.jsonl.gz", 160, 1920}, Expected{"synth_valid.jsonl.gz", 40, 480}}) {
    CAPTURE(x.file);
    const std::string path = lcm::test::committed_data(x.file);
    REQUIRE_MESSAGE(std::filesystem::is_regular_file(path),
                    path << " is missing (tests/data/README.md)");
    SkipLog rlog(false, 0);
    std::vector<Program> progs = read_all_programs(path, rlog);
    REQUIRE(int64_t(progs.size()) == x.programs);
    CHECK(rlog.counts().empty());
    SkipLog log(false, 0);
    int64_t n_sched = 0, n_prog = 0, checked = 0;
    check_whole_file_features(progs, log, n_prog, n_sched, checked);
    INFO(log.summary());
    CHECK(log.counts().empty());  // no drop of any kind
    CHECK(n_prog == x.programs);
    CHECK(n_sched == x.schedules);
    CHECK(checked == n_sched);
  }
}

// ====================================================================== bad input, randomised

TEST_CASE("parse_affine: random strings either parse or throw DataError") {
  const std::string alphabet = "ik_0129 ()+-,*maxMin";
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(state >> 33);
  };
  int parsed = 0, rejected = 0;
  for (int t = 0; t < 5000; ++t) {
    std::string s;
    const int len = int(next() % 14);
    for (int k = 0; k < len; ++k) s += alphabet[next() % alphabet.size()];
    try {
      AffineExpr e = parse_affine(s);
      ++parsed;
      // a parsed form has no '*' and balanced parentheses
      CHECK(s.find('*') == std::string::npos);
      CHECK(std::count(s.begin(), s.end(), '(') == std::count(s.begin(), s.end(), ')'));
      for (const auto& kv : e.coef) CHECK(kv.second != 0);
    } catch (const DataError&) {
      ++rejected;
    }
  }
  CHECK(parsed > 50);
  CHECK(rejected > 50);
}

TEST_CASE("featurize: random transformation tags never crash; drops are named") {
  uint64_t state = 777;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return int64_t(state >> 33);
  };
  const std::set<std::string> allowed = {"bad_transformation", "singular_transformation",
                                         "transformations_gt_4"};
  Program p = gramschmidt();
  for (int k = 0; k < 200; ++k) {
    Schedule s = derived(p, 0.001 * double(k + 1));
    {  // one random computation gets 0..5 random tag vectors
      CompSchedule& cs = s.comps[size_t(next() % 7)];
      const int m = int(next() % 6);
      for (int t = 0; t < m; ++t) {
        std::array<int64_t, 16> tg{};
        tg[0] = next() % 5;
        for (int q = 1; q < 16; ++q) tg[size_t(q)] = next() % 5 - 1;
        cs.transformations.push_back(tg);
      }
    }
    p.schedules.push_back(s);
  }
  SkipLog log(false, 0);
  auto f = featurize(p, FeatureOptions{}, log);
  REQUIRE(f);
  for (const auto& [key, n] : log.counts()) {
    CAPTURE(key);
    CHECK(key.rfind("schedule/", 0) == 0);
    CHECK(allowed.count(key.substr(9)) == 1);
  }
  CHECK(f->n_schedules() + log.total("schedule") == int64_t(p.schedules.size()));
  CHECK(f->n_schedules() > 1);
  CHECK(log.total("schedule") > 10);
  bool finite = true;
  for (float x : f->comp_sched) finite &= std::isfinite(x);
  CHECK(finite);
}

TEST_CASE("featurize: a strict SkipLog turns the first skip into DataError") {
  Program p = tiny();
  p.schedules[1].comps[0].transformations = {tag({9})};
  p.schedules.push_back(p.schedules[0]);
  SkipLog strict(true, 0);
  CHECK_THROWS_AS(featurize(p, FeatureOptions{}, strict), DataError);
  SkipLog lenient(false, 0);
  CHECK(featurize(p, FeatureOptions{}, lenient).has_value());
  CHECK(lenient.count("schedule", "bad_transformation") == 1);
}

TEST_CASE(
    "featurize: empty_iteration_domain names the loop; non-constant or non-empty bounds pass") {
  Program p = tiny();
  p.iterators[1].lower.text = "32";  // lower == upper (exclusive): no iteration
  SkipLog log(false, 0);
  CHECK_FALSE(featurize(p, FeatureOptions{}, log).has_value());
  REQUIRE(log.events().size() == 1);
  CHECK(log.events()[0].detail ==
        "loop i1 has lower bound 32 >= upper bound 32 (exclusive): no iteration");
  // one iteration, a bound that uses an iterator, a max() bound: not judged here, all kept
  for (auto [lo, hi] :
       {std::pair<const char*, const char*>{"31", "32"}, {"i0", "32"}, {"max(40, 0)", "32"}}) {
    CAPTURE(lo);
    Program q = tiny();
    q.iterators[1].lower.text = lo;
    SkipLog l2(false, 0);
    CHECK(featurize(q, FeatureOptions{}, l2).has_value());
    CHECK(l2.count("program", "empty_iteration_domain") == 0);
  }
}
