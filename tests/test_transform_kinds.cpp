// Every transformation kind of the table (data/transformations.hpp), enumerated up to
// TransformKind::Count so that a new kind cannot go untested: its row, the encode/decode round
// trip, its sched_str term in each dialect that spells it, its typed transformations_list entry,
// the validator (a valid instance accepted, invalid ones refused with the named reason), its
// matrix (float features and exact integer algebra agree, and the matrix decomposes back), and
// lcm-synth producing it.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/schedule_forms.hpp"
#include "data/schedule_validation.hpp"
#include "data/synth.hpp"
#include "data/transformations.hpp"

using namespace lcm::data;

namespace {

constexpr int kDepth = 4;  // the nest of the test program: comp00 in i0 → i1 → i2 → i3

/// A valid instance of kind `k` with `n_levels` loop levels in a depth-kDepth nest: levels in a
/// non-trivial order, parameters a unimodular block (a block kind) or small non-zero factors.
Transformation instance_of(TransformKind k, int n_levels) {
  Transformation t;
  t.kind = k;
  t.n_levels = n_levels;
  const int64_t levels[kMaxTransformLevels] = {2, 0, 3};
  for (int l = 0; l < n_levels; ++l) t.levels[size_t(l)] = levels[l];
  t.n_params = param_count(k, n_levels);
  if (kind_info(k).unimodular_block) {
    // identity plus a 1 above the diagonal in each row: upper triangular, determinant 1
    for (int r = 0; r < n_levels; ++r)
      for (int c = 0; c < n_levels; ++c)
        t.params[size_t(r * n_levels + c)] = r == c ? 1 : (c == r + 1 ? 1 : 0);
  } else {
    for (int q = 0; q < t.n_params; ++q) t.params[size_t(q)] = q + 2;
  }
  return t;
}

/// Every (kind, level count) the table allows, as valid instances.
std::vector<Transformation> all_instances() {
  std::vector<Transformation> out;
  for (int k = 0; k < int(TransformKind::Count); ++k) {
    const TransformKindInfo& i = kind_info(TransformKind(k));
    for (int nl = i.min_levels; nl <= i.max_levels; ++nl)
      out.push_back(instance_of(TransformKind(k), nl));
  }
  return out;
}

std::string describe(const Transformation& t) {
  return std::string(kind_info(t.kind).name) + " of " + std::to_string(t.n_levels) + " levels";
}

bool same(const Transformation& a, const Transformation& b) {
  return a.kind == b.kind && a.n_levels == b.n_levels && a.levels == b.levels &&
         a.n_params == b.n_params && a.params == b.params;
}

/// One computation comp00 in a depth-kDepth nest.
Program make_program() {
  Program p;
  p.name = "kinds";
  Computation c;
  c.name = "comp00";
  c.absolute_order = 1;
  for (int l = 0; l < kDepth; ++l) c.iterators.push_back("i" + std::to_string(l));
  p.computations.push_back(c);
  for (int l = 0; l < kDepth; ++l) {
    Iterator it;
    it.name = "i" + std::to_string(l);
    it.lower.text = "0";
    it.upper.text = "16";
    if (l > 0) it.parent = "i" + std::to_string(l - 1);
    if (l + 1 < kDepth) it.children.push_back("i" + std::to_string(l + 1));
    if (l + 1 == kDepth) it.computations.push_back("comp00");
    p.iterators.push_back(it);
  }
  return p;
}

Schedule with_tag(const TagVector& tag) {
  Schedule s;
  s.comps.resize(1);
  s.comps[0].transformations.push_back(tag);
  return s;
}

}  // namespace

TEST_CASE("the table: one row per kind, distinct codes, names and letters found back") {
  std::set<int64_t> codes;
  std::set<std::string> names, letters;
  for (int k = 0; k < int(TransformKind::Count); ++k) {
    const TransformKindInfo& i = kind_info(TransformKind(k));
    CAPTURE(i.name);
    CHECK(int(i.kind) == k);
    CHECK(i.tag != kNoTransformationTag);
    CHECK(codes.insert(i.tag).second);
    CHECK(names.insert(i.name).second);
    CHECK(letters.insert(i.letter).second);
    CHECK(kind_of_tag(i.tag) == TransformKind(k));
    CHECK(kind_of_name(i.name) == TransformKind(k));
    if (i.alias_a) CHECK(kind_of_name(i.alias_a) == TransformKind(k));
    if (i.alias_b) CHECK(kind_of_name(i.alias_b) == TransformKind(k));
    CHECK(kind_of_letter(i.letter) == TransformKind(k));
  }
  CHECK_FALSE(kind_of_tag(kNoTransformationTag));
  CHECK_FALSE(kind_of_tag(int64_t(TransformKind::Count) + 1));
  CHECK_FALSE(kind_of_name("tiling"));  // not a tag-vector kind
  CHECK_FALSE(decode(TagVector{}));
}

TEST_CASE("every kind: encode and decode round trip, nothing outside the kind's columns") {
  for (const Transformation& t : all_instances()) {
    CAPTURE(describe(t));
    const TagVector v = encode(t);
    CHECK(v[0] == kind_info(t.kind).tag);
    CHECK_FALSE(is_no_transformation(v));
    const std::optional<Transformation> back = decode(v);
    REQUIRE(back);
    CHECK(same(*back, t));
    CHECK_FALSE(back->stray_params);
    // columns the kind does not use stay 0
    const TransformKindInfo& i = kind_info(t.kind);
    for (int c = 1; c < 16; ++c) {
      const bool level = c >= i.level_col && c < i.level_col + t.n_levels;
      const bool param = c >= i.param_col && c < i.param_col + t.n_params;
      if (!level && !param) CHECK(v[size_t(c)] == 0);
    }
  }
}

TEST_CASE("every kind: its sched_str term parses in each dialect that spells it") {
  const Program p = make_program();
  for (const Transformation& t : all_instances()) {
    CAPTURE(describe(t));
    const std::string term = sched_str_term(t);
    const std::string tiralib = term.substr(0, term.size() - 1) + ",comps=['comp00'])";
    for (const std::string& s : {"{comp00}:" + term, tiralib}) {
      CAPTURE(s);
      const NormalSchedule n = parse_sched_str(s, p, nullptr);
      CHECK(n.problem == "");
      REQUIRE(n.comps.size() == 1);
      CHECK(n.comps[0].transformations == std::vector<TagVector>{encode(t)});
    }
    // a level beyond the nest is a bad_sched_str
    Transformation far = t;
    far.levels[0] = kDepth;
    CHECK(parse_sched_str("{comp00}:" + sched_str_term(far), p, nullptr).problem ==
          "bad_sched_str");
  }
}

TEST_CASE("every kind: its typed transformations_list entry reads as its tag vector") {
  Program p = make_program();
  for (const Transformation& t : all_instances()) {
    const TransformKindInfo& i = kind_info(t.kind);
    for (const char* name : {i.name, i.alias_a, i.alias_b}) {
      if (!name) continue;
      CAPTURE(describe(t));
      CAPTURE(name);
      std::string levels, params;
      for (int l = 0; l < t.n_levels; ++l)
        levels += (l ? "," : "") + std::to_string(t.levels[size_t(l)]);
      for (int q = 0; q < t.n_params; ++q)
        params += (q ? "," : "") + std::to_string(t.params[size_t(q)]);
      const std::string entry = std::string(R"({"type":")") + name + R"(","loop_levels":[)" +
                                levels + R"(],"parameters":[)" + params + "]}";
      const Schedule s = parse_schedule_json(
          R"({"transformations_list":[)" + entry + R"(],"execution_times":[1.0]})", p);
      CHECK(s.parse_problem == "");
      REQUIRE(s.comps.size() == 1);
      CHECK(s.comps[0].transformations == std::vector<TagVector>{encode(t)});
      // one parameter too many is a named skip
      const std::string extra = std::string(R"({"type":")") + name + R"(","loop_levels":[)" +
                                levels + R"(],"parameters":[)" + params +
                                (params.empty() ? "" : ",") + "1]}";
      CHECK(parse_schedule_json(
                R"({"transformations_list":[)" + extra + R"(],"execution_times":[1.0]})", p)
                .parse_problem == "bad_transformation_entry");
    }
  }
}

TEST_CASE("every kind: the validator accepts a valid instance and refuses invalid ones") {
  const Program p = make_program();
  for (const Transformation& t : all_instances()) {
    CAPTURE(describe(t));
    CHECK_FALSE(validate_schedule(p, with_tag(encode(t))));
    CHECK(first_transformation(p, with_tag(encode(t))) != "");
    for (int l = 0; l < t.n_levels; ++l) {  // each level outside the nest, both sides
      for (int64_t bad_level : {int64_t(-1), int64_t(kDepth)}) {
        Transformation bad = t;
        bad.levels[size_t(l)] = bad_level;
        const std::optional<ScheduleProblem> why = validate_schedule(p, with_tag(encode(bad)));
        REQUIRE(why);
        CHECK(why->reason == "bad_transformation");
      }
    }
    if (kind_info(t.kind).unimodular_block) {
      Transformation singular = t;  // all ones: determinant 0
      for (int q = 0; q < t.n_params; ++q) singular.params[size_t(q)] = 1;
      auto why = validate_schedule(p, with_tag(encode(singular)));
      REQUIRE(why);
      CHECK(why->reason == "singular_transformation");
      Transformation scaled = t;  // the diagonal doubled: determinant 2^levels
      for (int r = 0; r < t.n_levels; ++r) scaled.params[size_t(r * t.n_levels + r)] = 2;
      why = validate_schedule(p, with_tag(encode(scaled)));
      REQUIRE(why);
      CHECK(why->reason == "non_unimodular_transformation");
      if (t.n_levels >= 2) {
        Transformation repeated = t;
        repeated.levels[1] = repeated.levels[0];
        why = validate_schedule(p, with_tag(encode(repeated)));
        REQUIRE(why);
        CHECK(why->reason == "bad_transformation");
      }
    }
  }
  TagVector unknown{};
  unknown[0] = int64_t(TransformKind::Count) + 1;
  const auto why = validate_schedule(p, with_tag(unknown));
  REQUIRE(why);
  CHECK(why->reason == "bad_transformation");
}

TEST_CASE("every kind: the features' matrix and the exact integer matrix agree") {
  for (const Transformation& t : all_instances()) {
    CAPTURE(describe(t));
    const TagVector v = encode(t);
    const std::vector<double> m = transformation_matrix(v, kDepth);
    std::vector<int64_t> exact;
    REQUIRE(compose_tags({v}, kDepth, exact) == "");
    REQUIRE(m.size() == exact.size());
    bool identity = true;
    for (size_t e = 0; e < m.size(); ++e) {
      CHECK(m[e] == double(exact[e]));
      if (exact[e] != (e % (kDepth + 1) == 0 ? 1 : 0)) identity = false;
    }
    CHECK_FALSE(identity);  // each kind changes the schedule's features (A·T⁻¹, §3.5)
    // the matrix decomposes into tag vectors composing to the same matrix
    std::vector<TagVector> tags;
    REQUIRE(matrix_to_tags(exact, kDepth, tags) == "");
    std::vector<int64_t> again;
    REQUIRE(compose_tags(tags, kDepth, again) == "");
    CHECK(again == exact);
    // a level outside the nest is refused by both
    Transformation far = t;
    far.levels[0] = kDepth;
    CHECK_THROWS_AS(transformation_matrix(encode(far), kDepth), DataError);
    CHECK(compose_tags({encode(far)}, kDepth, exact) != "");
  }
}

TEST_CASE("every kind: lcm-synth writes it, in its sched_str too") {
  SynthOptions opt;
  opt.seed = 7;
  std::set<std::pair<int, int>> seen;  // (kind, level count)
  for (int64_t index = 0; index < 200 && seen.size() < all_instances().size(); ++index) {
    const Program p = synth_program(opt, index);
    for (const Schedule& s : p.schedules) {
      const NormalSchedule n = parse_sched_str(s.sched_str, p, s.tree ? &*s.tree : nullptr);
      REQUIRE(n.problem == "");
      for (size_t c = 0; c < s.comps.size(); ++c) {
        CHECK(n.comps[c].transformations == s.comps[c].transformations);
        for (const TagVector& v : s.comps[c].transformations) {
          const std::optional<Transformation> t = decode(v);
          REQUIRE(t);
          seen.insert({int(t->kind), t->n_levels});
        }
      }
    }
  }
  for (const Transformation& t : all_instances()) {
    CAPTURE(describe(t));
    CHECK(seen.count({int(t.kind), t.n_levels}) == 1);
  }
}
