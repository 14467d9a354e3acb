// Tests of the sched_str parser and the schedule cross-check (data/schedule_forms.hpp):
// synthetic strings of every dialect and letter parsed into the expected CompSchedule, each
// malformed term its bad_sched_str with the term in the detail, the integer algebra (skew
// completion, matrix → tags), compare_schedules on each kind of difference, and every sched_str
// of the real data (../shared/data; skipped when absent) compared with the structured fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/reader.hpp"
#include "data/schedule_forms.hpp"
#include "support/test_support.hpp"

using namespace lcm::data;
namespace fs = std::filesystem;
using lcm::test::contains;

namespace {

using Tag = std::array<int64_t, 16>;

/// This process's CPU time (the machine is shared: wall time measures the neighbours too).
std::chrono::nanoseconds cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

/// A program of computations (name, iterators) in absolute order.
Program make_program(const std::vector<std::pair<std::string, std::vector<std::string>>>& comps) {
  Program p;
  p.name = "synthetic";
  int order = 1;
  for (const auto& [name, its] : comps) {
    Computation c;
    c.name = name;
    c.absolute_order = order++;
    c.iterators = its;
    p.computations.push_back(c);
  }
  return p;
}

Tag tag(std::initializer_list<int64_t> v) {
  Tag t{};
  size_t i = 0;
  for (int64_t x : v) t[i++] = x;
  return t;
}

const Program& three_loops() {
  static const Program p = make_program({{"comp00", {"i0", "i1", "i2"}}});
  return p;
}

const Program& two_comps() {
  static const Program p =
      make_program({{"comp00", {"i0", "i1", "i2"}}, {"comp01", {"i0", "i1", "i3"}}});
  return p;
}

/// The problem detail of parsing `s` against `p` (CHECKs that it is a bad_sched_str).
std::string bad(const std::string& s, const Program& p = three_loops()) {
  const NormalSchedule n = parse_sched_str(s, p, nullptr);
  CHECK_MESSAGE(n.problem == "bad_sched_str", s);
  return n.detail;
}

NormalSchedule good(const std::string& s, const Program& p = three_loops(),
                    const LoopTree* tree = nullptr) {
  NormalSchedule n = parse_sched_str(s, p, tree);
  CHECK_MESSAGE(n.problem.empty(), s << ": " << n.detail);
  REQUIRE(n.comps.size() == p.computations.size());
  return n;
}

LoopNode node(const std::string& loop, std::vector<std::string> comps,
              std::vector<LoopNode> children = {}) {
  LoopNode n;
  n.loop_name = loop;
  n.computations = std::move(comps);
  n.children = std::move(children);
  return n;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Per-computation dialect
// ------------------------------------------------------------------------------------------------

TEST_CASE("per_computation: every letter gives the structured fields") {
  const NormalSchedule n = good("{comp00}:S(L0,L1,1,2)I(L0,L1)R(L1)P(L0)T2(L1,L2,32,64)U(L4,4)");
  CHECK(sched_str_dialect("{comp00}:P(L0)") == SchedStrDialect::PerComputation);
  const CompSchedule& c = n.comps[0];
  CHECK(c.parallelized_dim == "i0");
  CHECK(c.tiling_dims == std::vector<std::string>{"i1", "i2"});
  CHECK(c.tiling_factors == std::vector<int64_t>{32, 64});
  CHECK(c.unrolling_factor == 4);
  REQUIRE(c.transformations.size() == 3);
  CHECK(c.transformations[0] == tag({3, 0, 0, 0, 0, 1, 0, 1, 2, 0, 1}));
  CHECK(c.transformations[1] == tag({1, 0, 1}));
  CHECK(c.transformations[2] == tag({2, 0, 0, 1}));
  CHECK(n.has_tag_order);
  CHECK(n.has_fusion_levels);
  CHECK_FALSE(n.has_shiftings);
  CHECK(n.fusions.empty());

  const NormalSchedule t3 = good("{comp00}:T3(L0,L1,L2,32,32,16)U(L5,8)");
  CHECK(t3.comps[0].tiling_dims == std::vector<std::string>{"i0", "i1", "i2"});
  CHECK(t3.comps[0].tiling_factors == std::vector<int64_t>{32, 32, 16});
  CHECK(t3.comps[0].unrolling_factor == 8);
  // Tiling keeps the order written; an empty block and the empty string are no transformation.
  CHECK(good("{comp00}:T2(L1,L0,8,4)").comps[0].tiling_dims ==
        std::vector<std::string>{"i1", "i0"});
  CHECK(good("{comp00}:").comps[0].transformations.empty());
  const NormalSchedule e = good("");
  CHECK(sched_str_dialect("") == SchedStrDialect::Empty);
  CHECK(e.comps[0].parallelized_dim.empty());
}

TEST_CASE(
    "per_computation_fused: levels name the computation's own iterators; the tree gives "
    "the fusion level") {
  // Fused into comp00's nest at level 2, comp01's L2 is still its own i3 (as structured).
  const Program& p = two_comps();
  LoopTree fused;
  fused.roots.push_back(node("i0", {}, {node("i1", {}, {node("i2", {"comp00", "comp01"})})}));
  const NormalSchedule n = good("F(comp00,comp01){comp00}:P(L2){comp01}:P(L2)I(L0,L1)", p, &fused);
  CHECK(n.comps[0].parallelized_dim == "i2");
  CHECK(n.comps[1].parallelized_dim == "i3");
  CHECK(n.comps[1].transformations == std::vector<Tag>{tag({1, 0, 1})});
  REQUIRE(n.fusions.size() == 1);
  CHECK(n.fusions[0].comp_a == "comp00");
  CHECK(n.fusions[0].comp_b == "comp01");
  CHECK(n.fusions[0].level == 2);
  CHECK(n.has_fusion_levels);
  CHECK(sched_str_dialect("F(comp00,comp01){comp00}:") == SchedStrDialect::PerComputationFused);
  // Without a tree: the iterators, and the fusion has no level.
  const NormalSchedule nt = good("F(comp00,comp01){comp00}:{comp01}:P(L2)", p, nullptr);
  CHECK(nt.comps[1].parallelized_dim == "i3");
  REQUIRE(nt.fusions.size() == 1);
  CHECK(nt.fusions[0].level == -1);
  CHECK_FALSE(nt.has_fusion_levels);
  // A tree that shares only the root loop: level 0.
  LoopTree split;
  split.roots.push_back(
      node("i0", {},
           {node("i1", {}, {node("i2", {"comp00"})}), node("i5", {}, {node("i3", {"comp01"})})}));
  const NormalSchedule ns = good("F(comp00,comp01){comp00}:{comp01}:P(L1)", p, &split);
  CHECK(ns.fusions[0].level == 0);
  CHECK(ns.comps[1].parallelized_dim == "i1");
  // Two nests: no shared loop, no level.
  LoopTree apart;
  apart.roots.push_back(node("i0", {"comp00"}));
  apart.roots.push_back(node("i9", {"comp01"}));
  const NormalSchedule na = good("F(comp00,comp01){comp00}:{comp01}:", p, &apart);
  CHECK(na.fusions[0].level == -1);
  CHECK_FALSE(na.has_fusion_levels);
}

TEST_CASE("per_computation: each malformed term is a bad_sched_str naming it") {
  CHECK(contains(bad("{comp00}:X(L0)"), "X(L0)"));
  CHECK(contains(bad("{comp00}:X(L0)"), "unknown letter X"));
  CHECK(contains(bad("{comp00}:P(L0,L1)"), "P takes 1 argument, got 2"));
  CHECK(contains(bad("{comp00}:T2(L0,L1,32)"), "T2 takes 4 arguments, got 3"));
  CHECK(contains(bad("{comp00}:T3(L0,L1,L2,32,32)"), "T3 takes 6 arguments, got 5"));
  CHECK(contains(bad("{comp00}:U(4)"), "U takes 2 arguments, got 1"));
  CHECK(contains(bad("{comp00}:I(L0)"), "I takes 2 arguments"));
  CHECK(contains(bad("{comp00}:R()"), "R takes 1 argument, got 0"));
  CHECK(contains(bad("{comp00}:S(L0,L1,1)"), "S takes 4 arguments"));
  const std::string deep = bad("{comp00}:P(L3)");
  CHECK(contains(deep, "P(L3)"));
  CHECK(contains(deep, "level L3 is beyond the depth 3 of computation comp00"));
  CHECK(contains(bad("{comp00}:I(L0,L7)"), "beyond the depth"));
  CHECK(contains(bad("{comp00}:R(L3)"), "beyond the depth"));
  CHECK(contains(bad("{comp00}:S(L0,L4,1,1)"), "beyond the depth"));
  CHECK(contains(bad("{comp00}:T2(L0,L3,4,4)"), "beyond the depth"));
  // U counts the loops after tiling: L4 is fine with two tiled loops, not without.
  CHECK(contains(bad("{comp00}:U(L4,4)"), "U level L4 of computation comp00 is beyond its 3"));
  CHECK(contains(bad("{comp00}:P(x0)"), "\"x0\" is not a loop level Ln"));
  CHECK(contains(bad("{comp00}:P(L-1)"), "not a loop level"));
  CHECK(contains(bad("{comp00}:T2(L0,L1,3.5,4)"), "\"3.5\" is not an integer"));
  CHECK(contains(bad("{comp00}:U(L2,abc)"), "\"abc\" is not an integer"));
  CHECK(contains(bad("{comp00}:T2(L0,L1,0,4)"), "factor 0 is not > 0"));
  CHECK(contains(bad("{comp00}:U(L2,-4)"), "factor -4 is not > 0"));
  CHECK(contains(bad("{comp00}:T2(L0,L0,4,4)"), "tiled twice"));
  CHECK(contains(bad("{comp00}:I(L1,L1)"), "with itself"));
  CHECK(contains(bad("{comp00}:S(L0,L1,2,4)"), "no unimodular completion"));
  CHECK(contains(bad("{comp00}:P(L0)P(L1)"), "a second P"));
  CHECK(contains(bad("{comp00}:T2(L0,L1,4,4)T2(L0,L1,4,4)"), "a second tiling"));
  CHECK(contains(bad("{comp00}:U(L2,4)U(L2,4)"), "a second U"));
  CHECK(contains(bad("{comp07}:P(L0)"), "unknown computation \"comp07\""));
  CHECK(contains(bad("{comp00}:P(L0){comp00}:"), "two blocks"));
  CHECK(contains(bad("{comp00}:P(L0"), "no closing ')'"));
  CHECK(contains(bad("{comp00}:P(L0)junk"), "expected a term"));
  CHECK(contains(bad("{comp00}P(L0)"), "is not a '{computation}:'"));
  CHECK(contains(bad("{comp00}:P(L0))"), "expected a term"));
  CHECK(contains(bad("{comp00}:P(L(0))"), "'(' inside a term"));
  CHECK(contains(bad("F(comp00){comp00}:", two_comps()), "a fusion needs two computations"));
  CHECK(contains(bad("F(comp00,compXX){comp00}:", two_comps()), "unknown computation"));
  CHECK(contains(bad("F(comp00,comp00){comp00}:", two_comps()), "fused with itself"));
  // Non-printable bytes are escaped in the detail.
  CHECK(contains(bad("{comp00}:Q\x01(L0)"), "\\x01"));
  CHECK(contains(bad("what is this"), "not a known sched_str dialect"));
}

// ------------------------------------------------------------------------------------------------
// LOOPer dialect
// ------------------------------------------------------------------------------------------------

TEST_CASE("looper: F, M, P, U, T2, T3 give the structured fields") {
  const Program p = make_program(
      {{"c0", {"i0", "i1", "i2"}}, {"c1", {"i0", "i1", "i2"}}, {"c2", {"i0", "i1", "j2"}}});
  const NormalSchedule n = good(
      "F({C1,C2},L2)M({C0},1,0,0,0,1,0,0,0,-1)P({C0,C1,C2},L1)U({C2},L1,4)T2({C0},L0,L1,32,16)"
      "T3({C1},L0,L1,L2,8,8,8)",
      p);
  CHECK(sched_str_dialect("M({C0},1)") == SchedStrDialect::Looper);
  CHECK_FALSE(n.has_tag_order);
  CHECK(n.has_fusion_levels);
  REQUIRE(n.fusions.size() == 1);
  CHECK(n.fusions[0].comp_a == "c1");
  CHECK(n.fusions[0].comp_b == "c2");
  CHECK(n.fusions[0].level == 2);
  CHECK(n.comps[0].transformations == std::vector<Tag>{tag({2, 0, 0, 2})});
  for (const CompSchedule& c : n.comps) CHECK(c.parallelized_dim == "i1");
  CHECK(n.comps[2].unrolling_factor == 4);
  CHECK(n.comps[0].tiling_dims == std::vector<std::string>{"i0", "i1"});
  CHECK(n.comps[0].tiling_factors == std::vector<int64_t>{32, 16});
  CHECK(n.comps[1].tiling_dims == std::vector<std::string>{"i0", "i1", "i2"});
  // The identity matrix is no transformation; three computations fused give two pairs.
  const NormalSchedule f3 = good("F({C0,C1,C2},L1)M({C1},1,0,0,0,1,0,0,0,1)", p);
  CHECK(f3.comps[1].transformations.empty());
  CHECK(f3.fusions.size() == 2);
}

TEST_CASE("looper: malformed terms are bad_sched_str") {
  const Program& p = two_comps();
  CHECK(
      contains(bad("M({C2},1,0,0,0,1,0,0,0,1)", p), "unknown computation C2 (the program has 2)"));
  CHECK(contains(bad("M({C0},1,0,0,1)", p),
                 "matrix of 4 entries for computation comp00 of depth 3 (needs 9)"));
  CHECK(contains(bad("M({C0},2,0,0,0,1,0,0,0,1)", p), "not unimodular (determinant 2)"));
  CHECK(contains(bad("M({C0},1,0,0,0,1,0,0,0,1)M({C0},1,0,0,0,1,0,0,0,1)", p), "a second M"));
  CHECK(contains(bad("M({C0},1,0,0,0,1,0,0,0,x)", p), "\"x\" is not an integer"));
  CHECK(contains(bad("P({C0,C0},L0)", p), "listed twice"));
  CHECK(contains(bad("P({X0},L0)", p), "is not a computation Cn"));
  CHECK(contains(bad("P({},L0)", p), "an empty computation list"));
  CHECK(contains(bad("P({C0},L5)", p), "beyond the depth"));
  CHECK(contains(bad("F({C0},L1)", p), "a fusion needs two computations"));
  CHECK(contains(bad("F({C0,C1},L1,L2)", p), "F takes 1 argument"));
  CHECK(contains(bad("I({C0},L0,L1)", p), "unknown letter I in the LOOPer form"));
  // The generator's broken two-digit computation lists: a ')' inside an open '{'.
  const std::string broken = bad("M({C10,1,0,0,0,1,0,0,0,1)M({C11,1,0,0,1)}}", p);
  CHECK(contains(broken, "')' before the '{' is closed"));
  CHECK(contains(broken, "M({C10,1,0,0,0,1"));
  CHECK(contains(bad("U({C0},L9,4)", p), "U level L9"));
}

// ------------------------------------------------------------------------------------------------
// TiraLib dialect
// ------------------------------------------------------------------------------------------------

TEST_CASE("tiralib: every letter gives the structured fields") {
  const Program& p = two_comps();
  const NormalSchedule n = good(
      "S(L0,L1,3,2,comps=['comp00'])|I(L0,L1,comps=['comp00', 'comp01'])|R(L2,comps=['comp01'])|"
      "P(L0,comps=['comp00', 'comp01'])|T2(L1,L2,32,32,comps=['comp00'])|"
      "U(L3,4,comps=['comp00'])|F(L1,comps=['comp00', 'comp01'])|T3(L0,L1,L2,4,4,4,comps=[comp01])",
      p);
  CHECK(sched_str_dialect("P(L0,comps=['c'])") == SchedStrDialect::TiraLib);
  CHECK(n.has_tag_order);
  CHECK(n.comps[0].transformations ==
        std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 0, 3, 2, 1, 1}), tag({1, 0, 1})});
  CHECK(n.comps[1].transformations == std::vector<Tag>{tag({1, 0, 1}), tag({2, 0, 0, 2})});
  CHECK(n.comps[0].parallelized_dim == "i0");
  CHECK(n.comps[1].parallelized_dim == "i0");
  CHECK(n.comps[0].tiling_dims == std::vector<std::string>{"i1", "i2"});
  CHECK(n.comps[0].unrolling_factor == 4);
  CHECK(n.comps[1].tiling_dims == std::vector<std::string>{"i0", "i1", "i3"});
  REQUIRE(n.fusions.size() == 1);
  CHECK(n.fusions[0].level == 1);
  const NormalSchedule tg = good("TG(L0,L1,8,16,comps=[\"comp00\"])", p);
  CHECK(tg.comps[0].tiling_factors == std::vector<int64_t>{8, 16});
  const NormalSchedule m = good("M([0, 1, 0, 1, 0, 0, 0, 0, 1],comps=['comp00'])", p);
  CHECK(m.comps[0].transformations == std::vector<Tag>{tag({1, 0, 1})});
  CHECK_FALSE(m.has_tag_order);
}

TEST_CASE("tiralib: malformed and unmapped terms are bad_sched_str") {
  const Program& p = two_comps();
  const std::string d = bad("P(L0,comps=['comp00'])|D(L0,comps=[comp00],distribution=[['a']])", p);
  CHECK(contains(d, "D (loop distribution) has no counterpart"));
  CHECK(contains(d, "D(L0,comps=[comp00]"));
  CHECK(contains(bad("E(comps=['comp00'])", p), "E (expansion) has no counterpart"));
  CHECK(contains(bad("Z(L0,comps=['comp00'])", p), "unknown letter Z in the TiraLib form"));
  CHECK(contains(bad("P(L0)|R(L0,comps=['comp00'])", p), "no comps=[...]"));
  CHECK(contains(bad("P(L0,comps=['nope'])", p), "unknown computation \"nope\""));
  CHECK(contains(bad("P(L0,comps=[])", p), "an empty comps list"));
  CHECK(contains(bad("P(L0,comps='comp00')", p), "comps= is not a list"));
  CHECK(contains(bad("P(L0,comps=['comp00']) x", p), "text after the term"));
  CHECK(contains(bad("U(L0,0,comps=['comp00'])", p), "factor 0 is not > 0"));
  CHECK(contains(bad("TG(L0,L1,8,comps=['comp00'])", p), "TG takes levels then as many factors"));
  CHECK(contains(bad("F(L1,comps=['comp00'])", p), "a fusion needs two computations"));
  CHECK(contains(bad("M(1,0,0,1,comps=['comp00'])", p), "M takes 1 argument"));
  CHECK(contains(bad("P(L0,comps=['comp00)", p), "a quote that does not close"));
  CHECK(contains(bad("I(L0,L9,comps=['comp00'])", p), "beyond the depth"));
}

// ------------------------------------------------------------------------------------------------
// Integer algebra
// ------------------------------------------------------------------------------------------------

TEST_CASE("skew_completion: the bottom rows LOOPerSet's structured skew tags carry") {
  // (a, b) → (x, y) as measured on ../shared/data's structured tags.
  const std::vector<std::array<int64_t, 4>> cases = {
      {1, 3, 0, 1},   {1, -7, 0, 1}, {2, 1, 1, 1}, {2, 3, 1, 2},   {2, -3, -1, 2},
      {2, -5, -1, 3}, {3, 1, 2, 1},  {3, 2, 1, 1}, {3, -2, -1, 1}, {3, -4, -2, 3},
      {3, -1, 1, 0},  {6, -1, 1, 0}, {8, 1, 7, 1}};
  for (const auto& c : cases) {
    int64_t x = 99, y = 99;
    REQUIRE(skew_completion(c[0], c[1], x, y));
    CHECK_MESSAGE(x == c[2], c[0] << "," << c[1]);
    CHECK_MESSAGE(y == c[3], c[0] << "," << c[1]);
    CHECK(c[0] * y - c[1] * x == 1);
  }
  int64_t x = 0, y = 0;
  CHECK_FALSE(skew_completion(2, 4, x, y));
  CHECK_FALSE(skew_completion(0, 0, x, y));
  // Huge coprime factors: a result that completes, or false, never a hang or an overflow.
  if (skew_completion(INT64_MAX, 2, x, y)) CHECK((__int128)INT64_MAX * y - (__int128)2 * x == 1);
}

TEST_CASE("matrix_to_tags: decompositions compose back to the matrix") {
  std::vector<Tag> tags;
  // Interchange then reversal (the structured order): [[0,-1,0],[1,0,0],[0,0,1]].
  CHECK(matrix_to_tags({0, -1, 0, 1, 0, 0, 0, 0, 1}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({1, 0, 1}), tag({2, 0, 0, 0})});
  // Reversals deepest first.
  CHECK(matrix_to_tags({1, 0, 0, 0, -1, 0, 0, 0, -1}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({2, 0, 0, 2}), tag({2, 0, 0, 1})});
  // A 3-cycle: interchanges (0,1) then (0,2), as the structured tags mostly give it.
  CHECK(matrix_to_tags({0, 0, 1, 1, 0, 0, 0, 1, 0}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({1, 0, 1}), tag({1, 0, 2})});
  // A 2×2 block: one 2-D skew tag; a 3×3 block: one 3-D skew tag.
  CHECK(matrix_to_tags({1, 2, 0, 0, 1, 0, 0, 0, 1}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 0, 1, 2, 0, 1})});
  CHECK(matrix_to_tags({1, 1, 1, 0, 1, 1, 0, 0, 1}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 2, 1, 1, 1, 0, 1, 1, 0, 0, 1})});
  // A skew block and a reversal apart from it: two tags.
  CHECK(matrix_to_tags({1, 1, 0, 0, 1, 0, 0, 0, -1}, 3, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1}), tag({2, 0, 0, 2})});
  // Overlapping skews (a real LOOPerSet matrix, 4 structured tags) are beyond the decomposition.
  CHECK(contains(matrix_to_tags({3, 1, 0, 0, 2, 1, 1, 2, 0, 0, 1, 2, 0, 0, 0, -1}, 4, tags),
                 "by lcm's decomposition"));
  // Independent blocks: a skew on (0,1), reversals of 2 and 3; two skew blocks.
  const std::vector<int64_t> m4 = {1, 1, 0, 0, 0, 1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1};
  CHECK(matrix_to_tags(m4, 4, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1}), tag({2, 0, 0, 2}),
                                 tag({2, 0, 0, 3})});
  std::vector<int64_t> back;
  CHECK(compose_tags(tags, 4, back).empty());
  CHECK(back == m4);
  const std::vector<int64_t> two = {5, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, -1};
  CHECK(matrix_to_tags(two, 4, tags).empty());
  CHECK(tags == std::vector<Tag>{tag({3, 0, 0, 0, 0, 1, 0, 5, 1, -1, 0}),
                                 tag({3, 0, 0, 0, 2, 3, 0, 1, 2, 0, -1})});
  // A 4×4 block that is no signed permutation: a permutation applied first, then a skew block.
  const std::vector<int64_t> mix = {0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0};
  CHECK(matrix_to_tags(mix, 4, tags).empty());
  CHECK(tags.size() <= 4);
  CHECK(compose_tags(tags, 4, back).empty());
  CHECK(back == mix);
  CHECK(matrix_to_tags({1, 0, 0, 1}, 2, tags).empty());
  CHECK(tags.empty());
  CHECK(contains(matrix_to_tags({2, 0, 0, 1}, 2, tags), "not unimodular (determinant 2)"));
  CHECK(contains(matrix_to_tags({1, 1, 1, 1}, 2, tags), "determinant 0"));
  CHECK(contains(matrix_to_tags({1, 0, 0}, 2, tags), "not n×n"));
  // A reversed 5-cycle of depth 5 with every row negated: 4 swaps + 5 reversals.
  CHECK(contains(matrix_to_tags({0,  -1, 0, 0, 0, 0, 0,  -1, 0, 0, 0, 0, 0,
                                 -1, 0,  0, 0, 0, 0, -1, -1, 0, 0, 0, 0},
                                5, tags),
                 "not expressible as ≤ 4 tag vectors"));
  CHECK(
      contains(matrix_to_tags({INT64_MAX, INT64_MAX, INT64_MAX, 3, 1, 2, 5, 7, INT64_MAX}, 3, tags),
               "entries too large"));
}

TEST_CASE("compose_tags: integer composition and bad tags") {
  std::vector<int64_t> m;
  CHECK(compose_tags({tag({1, 0, 1}), tag({2, 0, 0, 0})}, 2, m).empty());
  CHECK(m == std::vector<int64_t>{0, -1, 1, 0});
  CHECK(compose_tags({tag({0}), tag({3, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1})}, 2, m).empty());
  CHECK(m == std::vector<int64_t>{1, 1, 0, 1});
  CHECK(contains(compose_tags({tag({1, 0, 2})}, 2, m), "outside the nest"));
  CHECK(contains(compose_tags({tag({7})}, 2, m), "unknown tag type 7"));
}

// ------------------------------------------------------------------------------------------------
// compare_schedules
// ------------------------------------------------------------------------------------------------

TEST_CASE("compare_schedules: each kind of difference, and facts one side lacks are ignored") {
  const Program& p = two_comps();
  NormalSchedule a;
  a.comps.resize(2);
  NormalSchedule b = a;
  CHECK(compare_schedules(p, a, b).kind.empty());

  b.comps[1].parallelized_dim = "i1";
  ScheduleDifference d = compare_schedules(p, a, b);
  CHECK(d.kind == "parallelization");
  CHECK(contains(d.detail, "comp01"));
  CHECK(contains(d.detail, "\"\" vs \"i1\""));
  b = a;
  b.comps[0].tiling_dims = {"i0"};
  b.comps[0].tiling_factors = {32};
  d = compare_schedules(p, a, b);
  CHECK(d.kind == "tiling");
  CHECK(contains(d.detail, "none vs i0:32"));
  a.comps[0].tiling_dims = {"i0"};
  a.comps[0].tiling_factors = {64};
  d = compare_schedules(p, a, b);
  CHECK(d.kind == "tiling");
  CHECK(contains(d.detail, "i0:64 vs i0:32"));
  a.comps[0] = CompSchedule{};
  b = a;
  b.comps[0].unrolling_factor = 8;
  CHECK(compare_schedules(p, a, b).kind == "unrolling");
  b = a;
  b.comps[0].shiftings = {{"i1", 2}};
  CHECK(compare_schedules(p, a, b).kind == "shifting");
  b.has_shiftings = false;
  CHECK(compare_schedules(p, a, b).kind.empty());
  // Tags compare exactly when both have a tag order, else as composed matrices.
  a.comps[0].transformations = {tag({1, 0, 1}), tag({2, 0, 0, 0})};
  b = a;
  b.comps[0].transformations = {tag({2, 0, 0, 1}), tag({1, 0, 1})};  // the same matrix
  d = compare_schedules(p, a, b);
  CHECK(d.kind == "transformation");
  CHECK(contains(d.detail, "[I(0,1),R(0)] vs [R(1),I(0,1)]"));
  b.has_tag_order = false;
  CHECK(compare_schedules(p, a, b).kind.empty());
  b.comps[0].transformations = {tag({1, 0, 1})};
  d = compare_schedules(p, a, b);
  CHECK(d.kind == "transformation");
  CHECK(contains(d.detail, "[[0,-1,0],[1,0,0],[0,0,1]] vs [[0,1,0],[1,0,0],[0,0,1]]"));
  b.comps[0].transformations = {tag({1, 0, 5})};
  CHECK(contains(compare_schedules(p, a, b).detail, "outside the nest"));
  // Fusions: unordered pairs; levels only when both carry them.
  b = a;
  a.fusions = {Fusion{"comp00", "comp01", 2}};
  b.fusions = {Fusion{"comp01", "comp00", 2}};
  CHECK(compare_schedules(p, a, b).kind.empty());
  b.fusions[0].level = -1;
  d = compare_schedules(p, a, b);
  CHECK(d.kind == "fusion");
  CHECK(contains(d.detail, "[comp00+comp01@2] vs [comp00+comp01@-1]"));
  b.has_fusion_levels = false;
  CHECK(compare_schedules(p, a, b).kind.empty());
  b.fusions.clear();
  CHECK(compare_schedules(p, a, b).kind == "fusion");
  // A side that was not parsed carries no facts.
  b = a;
  b.problem = "bad_sched_str";
  CHECK(compare_schedules(p, a, b).kind == "unparsed");
  b = a;
  b.comps.pop_back();
  CHECK(compare_schedules(p, a, b).kind == "unparsed");
}

TEST_CASE("fuzz: mutated sched_strs give a schedule or one bad_sched_str, never a crash") {
  const Program& p = two_comps();
  const std::vector<std::string> seeds = {
      "{comp00}:S(L0,L1,1,2)I(L0,L1)R(L1)P(L0)T2(L1,L0,32,32)U(L2,4){comp01}:T3(L0,L1,L2,4,4,4)",
      "F(comp00,comp01){comp00}:I(L0,L1){comp01}:I(L0,L1)",
      "F({C0,C1},L2)M({C0},1,0,0,0,1,0,0,0,-1)P({C0,C1},L1)U({C1},L1,4)T2({C0},L0,L1,32,32)",
      "I(L0,L1,comps=['comp00'])|P(L0,comps=['comp00', 'comp01'])|F(L1,comps=['comp00', "
      "'comp01'])|M([1, 1, 0, 0, 1, 0, 0, 0, 1],comps=['comp01'])"};
  const std::string alphabet = "{}()[],:|'\"LCFMPUTIRSDE0123456789-x \x01\xff";
  uint32_t seed = 12345;
  auto rnd = [&seed]() {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  int parsed = 0, refused = 0;
  for (int it = 0; it < 20000; ++it) {
    std::string s = seeds[size_t(it) % seeds.size()];
    const int edits = 1 + int(rnd() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rnd() % s.size();
      const uint32_t op = rnd() % 3;
      if (op == 0)
        s[at] = alphabet[rnd() % alphabet.size()];
      else if (op == 1)
        s.erase(at, 1 + rnd() % 3);
      else
        s.insert(at, 1, alphabet[rnd() % alphabet.size()]);
    }
    const NormalSchedule n = parse_sched_str(s, p, nullptr);
    if (n.problem.empty()) {
      ++parsed;
      CHECK(n.comps.size() == 2);
    } else {
      ++refused;
      CHECK(n.problem == "bad_sched_str");
      CHECK(!n.detail.empty());
    }
  }
  CHECK(parsed > 100);
  CHECK(refused > 100);
}

// ------------------------------------------------------------------------------------------------
// Real data: every sched_str against the structured fields
// ------------------------------------------------------------------------------------------------

namespace {

/// Per dialect: schedules, parsed, agreeing with the structured fields, disagreeing; the
/// disagreements by kind; for the LOOPer form, how many computations' decomposed tags equal the
/// structured tag list exactly.
struct Tally {
  std::map<std::string, std::array<int64_t, 4>> by_dialect;
  std::map<std::string, int64_t> by_kind;   // "dialect/kind"
  std::map<std::string, int64_t> problems;  // first words of bad_sched_str details
  int64_t looper_comps = 0, looper_tags_exact = 0, reader_problems = 0;
};

void tally_program(const Program& p, Tally& t) {
  for (const Schedule& s : p.schedules) {
    if (!s.parse_problem.empty()) {
      ++t.reader_problems;
      continue;
    }
    const SchedStrDialect d = sched_str_dialect(s.sched_str);
    const std::string name = sched_str_dialect_name(d);
    auto& row = t.by_dialect[name];
    ++row[0];
    const NormalSchedule n = parse_sched_str(s.sched_str, p, s.tree ? &*s.tree : nullptr);
    if (!n.problem.empty()) {
      const std::string key = name + ": " + n.detail.substr(n.detail.find("\": ") + 3, 30);
      if (++t.problems[key] <= 2) MESSAGE(p.name << " " << n.detail);
      continue;
    }
    ++row[1];
    const ScheduleDifference diff = compare_schedules(p, n, normal_schedule_of(s));
    if (diff.kind.empty()) {
      ++row[2];
    } else {
      ++row[3];
      ++t.by_kind[name + "/" + diff.kind];
      if (t.by_kind[name + "/" + diff.kind] <= 2)
        MESSAGE(p.name << " " << s.sched_str.substr(0, 120) << ": " << diff.detail);
    }
    if (d == SchedStrDialect::Looper)
      for (size_t c = 0; c < p.computations.size(); ++c) {
        ++t.looper_comps;
        t.looper_tags_exact += n.comps[c].transformations == s.comps[c].transformations;
      }
  }
}

std::vector<std::string> shared_files() {
  std::vector<std::string> files;
  const std::string base = lcm::test::shared_data_dir();
  for (const char* sub : {"looperset-sample", "raw"}) {
    const fs::path dir = fs::path(base) / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string f = e.path().string();
      if (e.is_regular_file() && (contains(f, ".json") || contains(f, ".jsonl")))
        files.push_back(f);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE(
    "committed gramschmidt record: every LOOPer sched_str agrees with the structured fields") {
  SkipLog log(false, 0);
  const std::vector<Program> progs = read_all_programs(
      lcm::test::committed_data("tiramisu/function_gramschmidt_explored_schedules.json"), log);
  REQUIRE(progs.size() == 1);
  Tally t;
  tally_program(progs[0], t);
  CHECK(t.by_dialect["looper"] == std::array<int64_t, 4>{24, 24, 24, 0});
  CHECK(t.by_dialect["empty"] == std::array<int64_t, 4>{1, 1, 1, 0});
}

TEST_CASE("real data: every sched_str parsed and compared with the structured fields") {
  LCM_REQUIRE_SHARED(train, "looperset-sample/train.jsonl.gz");
  Tally t;
  int64_t programs = 0;
  for (const std::string& f : shared_files()) {
    SkipLog log(false, 0);
    ReadOptions unchecked;  // the cross-check is what this test does, by hand
    unchecked.schedule_check = ScheduleCheck::Off;
    const std::vector<Program> progs = read_all_programs(f, log, unchecked);
    programs += int64_t(progs.size());
    for (const Program& p : progs) tally_program(p, t);
  }
  std::string table = "dialect: schedules parsed agree disagree\n";
  for (const auto& [d, r] : t.by_dialect)
    table += d + ": " + std::to_string(r[0]) + " " + std::to_string(r[1]) + " " +
             std::to_string(r[2]) + " " + std::to_string(r[3]) + "\n";
  for (const auto& [k, v] : t.by_kind) table += "  " + k + ": " + std::to_string(v) + "\n";
  for (const auto& [k, v] : t.problems) table += "  problem " + k + ": " + std::to_string(v) + "\n";
  table += "looper computations " + std::to_string(t.looper_comps) + ", tags exact " +
           std::to_string(t.looper_tags_exact) + "; reader problems " +
           std::to_string(t.reader_problems) + "; programs " + std::to_string(programs) + "\n";
  std::printf("%s", table.c_str());
  MESSAGE(table);
  // Measured on ../shared/data (looperset-sample/{mini,train,valid}.jsonl.gz and raw/**, where
  // raw/Jathu03__Halide_New repeats LOOPerSet programs). The 6 LOOPer disagreements are the
  // data's: in 2 fused programs (function1153231, function1163192; each in 3 files) the
  // structured parallelized_dim of the second fused computation names the first one's loop
  // (i3) where every other fused schedule, structured and sched_str, names the computation's
  // own iterator (i4). The 126 refused LOOPer strings are the generator's broken two-digit
  // computation lists ("M({C10,1,0,...)M({C11,...)}}"); the 9 are 3 matrices of overlapping
  // skews (function1132304, 4 structured tags) beyond matrix_to_tags.
  using Row = std::array<int64_t, 4>;
  CHECK(programs == 849);
  CHECK(t.reader_problems == 0);
  CHECK(t.by_dialect.size() == 4);
  CHECK(t.by_dialect["empty"] == Row{295, 295, 295, 0});
  CHECK(t.by_dialect["per_computation"] == Row{64314, 64314, 64314, 0});
  CHECK(t.by_dialect["per_computation_fused"] == Row{2212, 2212, 2212, 0});
  CHECK(t.by_dialect["looper"] == Row{21922, 21787, 21781, 6});
  CHECK(t.by_kind.size() == 1);
  CHECK(t.by_kind["looper/parallelization"] == 6);
  CHECK(t.problems.size() == 2);
  CHECK(t.problems["looper: ')' before the '{' is closed"] == 126);
  CHECK(t.problems["looper: matrix not expressible as ≤ "] == 9);
  // The decomposed LOOPer matrices give exactly the structured tag list for 87% of the
  // computations (the rest: the same matrix written with other tags, e.g. R(1),I(0,1) for
  // I(0,1),R(0), or a skew with a reversal as one block).
  CHECK(t.looper_comps == 114976);
  CHECK(t.looper_tags_exact == 100108);

  // Timing: parsing + comparing every schedule of train.jsonl.gz next to reading it.
  SkipLog log(false, 0);
  const auto t0 = cpu_now();
  const std::vector<Program> progs = read_all_programs(train, log);
  const auto t1 = cpu_now();
  int64_t n = 0, agree = 0;
  std::vector<NormalSchedule> parsed;
  for (const Program& p : progs)
    for (const Schedule& s : p.schedules)
      parsed.push_back(parse_sched_str(s.sched_str, p, s.tree ? &*s.tree : nullptr));
  // The least of 3 further passes (the first pass warms the allocator).
  double parse_ms = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    const auto a = cpu_now();
    size_t k = 0;
    for (const Program& p : progs)
      for (const Schedule& s : p.schedules)
        parsed[k++] = parse_sched_str(s.sched_str, p, s.tree ? &*s.tree : nullptr);
    parse_ms = std::min(parse_ms, std::chrono::duration<double, std::milli>(cpu_now() - a).count());
  }
  const auto t2 = cpu_now();
  for (const Program& p : progs)
    for (const Schedule& s : p.schedules)
      agree += compare_schedules(p, parsed[size_t(n++)], normal_schedule_of(s)).kind.empty();
  const auto t3 = cpu_now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf(
      "train.jsonl.gz: CPU time: read_all_programs %lld schedules %.0f ms; "
      "parse_sched_str %.1f ms, compare_schedules (with normal_schedule_of) %.1f ms\n",
      (long long)n, ms(t0, t1), parse_ms, ms(t2, t3));
  CHECK(agree > 0);
}
