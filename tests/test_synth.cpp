// Tests of the synthetic program generator (data/synth.hpp, docs/synth.md): determinism, the
// structural invariants of programs and schedules, coverage of every transformation kind, and
// that the output reads back through the reader and featurizes with zero skips.
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/synth.hpp"
#include "data/transformations.hpp"
#include "support/gz_support.hpp"
#include "support/test_support.hpp"
#include "util/atomic_file.hpp"

using namespace lcm::data;

namespace {

/// Inflates `gz` as ONE gzip member; returns the text, and sets `rest` to the bytes left after
/// the member's end (0 for a single-member file).
std::string inflate_one_member(const std::string& gz, size_t& rest) {
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 31) == Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = uInt(gz.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  CHECK(rc == Z_STREAM_END);
  rest = zs.avail_in;
  inflateEnd(&zs);
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

int count_nodes(const ExprNode& e) {
  int n = 1;
  for (const auto& c : e.children) n += count_nodes(c);
  return n;
}
int count_type(const ExprNode& e, const std::string& t) {
  int n = e.type == t ? 1 : 0;
  for (const auto& c : e.children) n += count_type(c, t);
  return n;
}
void collect_types(const ExprNode& e, std::set<std::string>& out) {
  out.insert(e.type);
  for (const auto& c : e.children) collect_types(c, out);
}
void collect_tree(const LoopNode& n, std::vector<std::string>& loops,
                  std::vector<std::string>& comps) {
  loops.push_back(n.loop_name);
  for (const auto& c : n.computations) comps.push_back(c);
  for (const auto& ch : n.children) collect_tree(ch, loops, comps);
}

/// Determinant of the k×k parameter block of a skewing tag (docs/model-spec.md §3.4 layout).
/// The determinant of a skewing's 2×2 or 3×3 block.
int64_t skew_det(const Transformation& t) {
  const auto& m = t.params;
  if (t.n_levels == 2) return m[0] * m[3] - m[1] * m[2];
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

SynthOptions small_options(int64_t programs, int schedules, uint64_t seed) {
  SynthOptions o;
  o.programs = programs;
  o.schedules_per_program = schedules;
  o.seed = seed;
  o.threads = 2;
  return o;
}

/// The programs of the lcm-synth file that `o` writes into folder `dir`, read back through the
/// reader with `log`; REQUIREs all o.programs of them.
std::vector<Program> write_and_read_back(const std::string& dir, const SynthOptions& o,
                                         SkipLog& log) {
  write_synth_file(dir + "/s.jsonl.gz", o);
  std::vector<Program> progs = read_all_programs(dir + "/s.jsonl.gz", log);
  REQUIRE(int64_t(progs.size()) == o.programs);
  return progs;
}

}  // namespace

TEST_CASE("synth: same seed gives the same bytes whatever the thread count; another seed differs") {
  const std::string dir = lcm::test::temp_dir("synth_det");
  SynthOptions o = small_options(37, 12, 7);
  o.chunk_programs = 3;  // 13 chunks, deflated by different threads
  o.threads = 1;
  SynthStats a = write_synth_file(dir + "/a.jsonl.gz", o);
  o.threads = 3;
  SynthStats b = write_synth_file(dir + "/b.jsonl.gz", o);
  o.chunk_programs = 0;  // one chunk: other compressed bytes, same text
  write_synth_file(dir + "/d.jsonl.gz", o);
  o.chunk_programs = 3;
  o.seed = 8;
  write_synth_file(dir + "/c.jsonl.gz", o);
  const std::string fa = lcm::read_file(dir + "/a.jsonl.gz"),
                    fb = lcm::read_file(dir + "/b.jsonl.gz"),
                    fc = lcm::read_file(dir + "/c.jsonl.gz");
  CHECK(fa == fb);
  CHECK(fa != fc);
  CHECK(a.programs == 37);
  CHECK(a.schedules == 37 * 12);
  CHECK(b.compressed_bytes == int64_t(fb.size()));
  // no temporary file is left behind
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files += e.is_regular_file() ? 1 : 0;
  CHECK(files == 4);
  // the file is one gzip stream of JSONL whose lines equal synth_program_json
  const std::string text = lcm::test::gunzip_file(dir + "/a.jsonl.gz");
  CHECK(text == lcm::test::gunzip_file(dir + "/d.jsonl.gz"));
  size_t rest = 1;
  CHECK(inflate_one_member(fa, rest) == text);  // one gzip member, CRC and length verified by zlib
  CHECK(rest == 0);
  CHECK(fa != lcm::read_file(dir + "/d.jsonl.gz"));
  CHECK(int64_t(text.size()) == a.uncompressed_bytes);
  auto lines = split_lines(text);
  REQUIRE(lines.size() == 37);
  o.seed = 7;
  for (int64_t i : {int64_t(0), int64_t(17), int64_t(36)}) {
    std::string one;
    synth_program_json(o, i, one);
    CHECK(lines[size_t(i)] == one);
  }
  // program i does not depend on how many programs are written
  std::string first;
  synth_program_json(small_options(1000, 12, 7), 0, first);
  CHECK(first == lines[0]);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "synth: a program longer than the writer's 1 MiB text buffer is streamed: same text, same "
    "bytes as one deflate call") {
  const std::string dir = lcm::test::temp_dir("synth_stream");
  SynthOptions o = small_options(1, 1500, 5);  // one program, ~1.8 MB of JSON: one chunk
  std::string one;
  synth_program_json(o, 0, one);
  one.push_back('\n');
  REQUIRE(one.size() > (size_t(1) << 20));
  for (int level : {0, 1, 6}) {
    CAPTURE(level);
    o.compression_level = level;
    const std::string path = dir + "/s" + std::to_string(level) + ".jsonl.gz";
    SynthStats st = write_synth_file(path, o);
    CHECK(st.schedules == 1500);
    CHECK(lcm::test::gunzip_file(path) == one);
    // what one deflate call over the whole text gives, behind the writer's header and trailer
    z_stream zs{};
    REQUIRE(deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string body(deflateBound(&zs, uLong(one.size())) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(one.data());
    zs.avail_in = uInt(one.size());
    zs.next_out = reinterpret_cast<Bytef*>(body.data());
    zs.avail_out = uInt(body.size());
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    body.resize(body.size() - zs.avail_out);
    deflateEnd(&zs);
    const std::string file = lcm::read_file(path);
    REQUIRE(file.size() == 10 + body.size() + 8);
    CHECK(file.substr(10, body.size()) == body);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("synth: structural invariants of programs and schedules") {
  const SynthOptions o = small_options(200, 16, 11);
  for (int64_t i = 0; i < o.programs; ++i) {
    const Program p = synth_program(o, i);
    CAPTURE(p.name);
    REQUIRE(p.schedules.size() == 16);
    REQUIRE(!p.computations.empty());
    CHECK(p.computations.size() <= 6);
    // iterators: parents come first; bounds reference only enclosing iterators
    std::map<std::string, int> pos;
    for (size_t k = 0; k < p.iterators.size(); ++k) pos[p.iterators[k].name] = int(k);
    for (size_t k = 0; k < p.iterators.size(); ++k)
      if (!p.iterators[k].parent.empty()) CHECK(pos.at(p.iterators[k].parent) < int(k));
    for (size_t c = 0; c < p.computations.size(); ++c) {
      const Computation& comp = p.computations[c];
      const int n = int(comp.iterators.size());
      CHECK(comp.absolute_order == int(c) + 1);
      CHECK(n >= 1);
      CHECK(n <= 5);
      CHECK(comp.accesses.size() <= 15);
      CHECK(count_nodes(comp.expression) <= 66);
      CHECK(count_type(comp.expression, "access") == int(comp.accesses.size()));
      for (const auto& a : comp.accesses) {
        CHECK(a.matrix.size() >= 1);
        CHECK(a.matrix.size() <= 5);
        for (const auto& row : a.matrix) CHECK(row.size() == size_t(n + 1));
      }
      // the chain of parents of the innermost iterator is exactly the computation's iterators
      std::vector<std::string> chain;
      for (std::string it = comp.iterators.back(); !it.empty();
           it = p.iterators[size_t(pos.at(it))].parent)
        chain.insert(chain.begin(), it);
      CHECK(chain == comp.iterators);
      // every iterator named in a bound encloses the loop
      for (const auto& it : comp.iterators) {
        const Iterator& iter = p.iterators[size_t(pos.at(it))];
        for (const std::string* b : {&iter.lower.text, &iter.upper.text})
          for (const auto& other : p.iterators)
            if (b->find(other.name + " ") != std::string::npos || *b == other.name ||
                b->find(other.name + ")") != std::string::npos)
              CHECK(std::find(comp.iterators.begin(), comp.iterators.end(), other.name) !=
                    comp.iterators.end());
      }
    }
    // schedule 0 is untransformed
    const Schedule& s0 = p.schedules[0];
    CHECK(s0.fusions.empty());
    CHECK(s0.sched_str.empty());
    for (const auto& cs : s0.comps) {
      CHECK(cs.transformations.empty());
      CHECK(cs.tiling_dims.empty());
      CHECK(cs.unrolling_factor == 0);
      CHECK(cs.parallelized_dim.empty());
      CHECK(cs.shiftings.empty());
    }
    CHECK(p.initial_execution_time == s0.min_time());
    std::vector<std::string> base_loops, base_comps;
    for (const auto& r : s0.tree->roots) collect_tree(r, base_loops, base_comps);
    CHECK(base_loops.size() == p.iterators.size());
    CHECK(base_comps.size() == p.computations.size());
    for (size_t si = 0; si < p.schedules.size(); ++si) {
      const Schedule& s = p.schedules[si];
      CAPTURE(si);
      REQUIRE(s.comps.size() == p.computations.size());
      CHECK(s.execution_times.size() >= 1);
      CHECK(s.execution_times.size() <= 30);
      CHECK(s.has_label());
      if (si > 0) {
        bool any = !s.fusions.empty();
        for (const auto& cs : s.comps)
          any = any || !cs.transformations.empty() || !cs.tiling_dims.empty() ||
                cs.unrolling_factor || !cs.parallelized_dim.empty() || !cs.shiftings.empty();
        CHECK(any);
      }
      for (size_t c = 0; c < s.comps.size(); ++c) {
        const CompSchedule& cs = s.comps[c];
        const auto& its = p.computations[c].iterators;
        const int n = int(its.size());
        CHECK(cs.transformations.size() <= 4);
        for (const auto& tag : cs.transformations) {
          const std::optional<Transformation> t = decode(tag);
          REQUIRE(t);
          CHECK(encode(*t) == tag);  // no stray value
          const auto& l = t->levels;
          for (int k = 0; k < t->n_levels; ++k) CHECK(l[size_t(k)] < n);
          if (t->kind == TransformKind::Interchange) CHECK(l[0] < l[1]);
          if (kind_info(t->kind).unimodular_block) {  // consecutive loops (model-spec §3.4)
            for (int k = 1; k < t->n_levels; ++k) CHECK(l[size_t(k)] == l[size_t(k - 1)] + 1);
            CHECK(skew_det(*t) == 1);
          }
        }
        if (!cs.tiling_dims.empty()) {
          CHECK(cs.tiling_dims.size() >= 2);
          CHECK(cs.tiling_dims.size() <= 3);
          REQUIRE(cs.tiling_factors.size() == cs.tiling_dims.size());
          auto start = std::find(its.begin(), its.end(), cs.tiling_dims[0]) - its.begin();
          for (size_t d = 0; d < cs.tiling_dims.size(); ++d) {
            REQUIRE(start + long(d) < long(its.size()));
            CHECK(its[size_t(start) + d] == cs.tiling_dims[d]);  // consecutive loops
            CHECK(cs.tiling_factors[d] >= 8);
            CHECK(cs.tiling_factors[d] <= 128);
          }
        }
        if (cs.unrolling_factor) CHECK((cs.unrolling_factor >= 2 && cs.unrolling_factor <= 16));
        if (!cs.parallelized_dim.empty())
          CHECK(std::find(its.begin(), its.end(), cs.parallelized_dim) != its.end());
        for (const auto& sh : cs.shiftings)
          CHECK(std::find(its.begin(), its.end(), sh.first) != its.end());
      }
      // the tree holds every computation once; a fusion removes exactly one loop
      std::vector<std::string> loops, comps;
      for (const auto& r : s.tree->roots) collect_tree(r, loops, comps);
      CHECK(comps.size() == p.computations.size());
      CHECK(std::set<std::string>(comps.begin(), comps.end()).size() == comps.size());
      CHECK(loops.size() + s.fusions.size() == base_loops.size());
      for (const auto& f : s.fusions) {
        const auto& ia = p.computations[size_t(p.computation_index(f.comp_a))].iterators;
        const auto& ib = p.computations[size_t(p.computation_index(f.comp_b))].iterators;
        REQUIRE(f.level < int(ia.size()));
        REQUIRE(f.level < int(ib.size()));
        CHECK(ia[size_t(f.level)] != ib[size_t(f.level)]);  // distinct sibling loops
        for (int l = 0; l < f.level; ++l) CHECK(ia[size_t(l)] == ib[size_t(l)]);
      }
    }
  }
}

TEST_CASE("synth: every transformation kind, depth 1-5, 1-6 computations and bound shape appear") {
  SynthOptions o = small_options(200, 24, 3);
  o.structures = 0;  // every program draws its own loop tree
  std::set<std::string> seen;
  std::set<size_t> depths, comp_counts, root_counts;
  std::set<std::string> expr_types, dtypes;
  for (int64_t i = 0; i < o.programs; ++i) {
    const Program p = synth_program(o, i);
    comp_counts.insert(p.computations.size());
    root_counts.insert(p.schedules[0].tree->roots.size());
    for (const auto& c : p.computations) {
      depths.insert(c.iterators.size());
      collect_types(c.expression, expr_types);
      dtypes.insert(c.data_type);
      if (c.is_reduction) seen.insert("reduction");
      if (c.write_access_relation.find("' = ") != std::string::npos) seen.insert("primed_write");
      if (c.accesses.size() >= 10) seen.insert("many_accesses");
    }
    for (const auto& it : p.iterators) {
      if (it.lower.text.find("max(") != std::string::npos)
        seen.insert("lower_max");
      else if (it.lower.text.find('i') != std::string::npos)
        seen.insert("lower_iterator");
      if (it.upper.text.find('i') != std::string::npos) seen.insert("upper_iterator");
    }
    for (const auto& s : p.schedules) {
      if (!s.fusions.empty()) seen.insert("fusion");
      for (const auto& cs : s.comps) {
        for (const auto& tag : cs.transformations)
          if (const std::optional<Transformation> t = decode(tag))
            seen.insert(kind_info(t->kind).name + std::to_string(t->n_levels));
        if (cs.tiling_dims.size() == 2) seen.insert("tile2");
        if (cs.tiling_dims.size() == 3) seen.insert("tile3");
        if (cs.unrolling_factor) seen.insert("unroll");
        if (!cs.parallelized_dim.empty()) seen.insert("parallel");
        if (!cs.shiftings.empty()) seen.insert("shift");
      }
    }
  }
  for (int k = 0; k < int(TransformKind::Count); ++k) {  // every kind, every level count
    const TransformKindInfo& i = kind_info(TransformKind(k));
    for (int nl = i.min_levels; nl <= i.max_levels; ++nl) {
      CAPTURE(i.name);
      CAPTURE(nl);
      CHECK(seen.count(i.name + std::to_string(nl)) == 1);
    }
  }
  for (const char* k :
       {"tile2", "tile3", "unroll", "parallel", "shift", "fusion", "reduction", "primed_write",
        "many_accesses", "lower_max", "lower_iterator", "upper_iterator"}) {
    CAPTURE(k);
    CHECK(seen.count(k) == 1);
  }
  CHECK(depths == std::set<size_t>{1, 2, 3, 4, 5});
  CHECK(comp_counts == std::set<size_t>{1, 2, 3, 4, 5, 6});
  CHECK(root_counts.size() >= 3);
  CHECK(dtypes == std::set<std::string>{"int32", "float32", "float64"});
  CHECK(expr_types == std::set<std::string>{"add", "sub", "mul", "div", "sqrt", "min", "max",
                                            "minus", "cast", "access", "value"});
}

TEST_CASE("synth: the JSON carries the real data's quirks (numeric strings, null and [] times)") {
  SynthOptions o = small_options(300, 20, 5);
  o.missing_fraction = 0.2;
  std::string all;
  for (int64_t i = 0; i < o.programs; ++i) synth_program_json(o, i, all);
  CHECK(all.find("\"tiling_factors\":[\"") != std::string::npos);
  CHECK(all.find("\"unrolling_factor\":\"") != std::string::npos);
  bool numeric_string_bound = false;  // e.g. "upper_bound":"366"
  for (size_t at = all.find("_bound\":\""); at != std::string::npos;
       at = all.find("_bound\":\"", at + 1))
    numeric_string_bound =
        numeric_string_bound || std::isdigit(static_cast<unsigned char>(all[at + 9])) != 0;
  CHECK(numeric_string_bound);
  CHECK(all.find("\"execution_times\":null") != std::string::npos);
  CHECK(all.find("\"execution_times\":[]") != std::string::npos);
  CHECK(all.find("\"fusions\":[[") != std::string::npos);
}

TEST_CASE(
    "synth: output reads back through the reader with zero skips and equals the generated "
    "programs") {
  const std::string dir = lcm::test::temp_dir("synth_read");
  const SynthOptions o = small_options(60, 20, 21);
  SkipLog log(false, 5);
  const std::vector<Program> got = write_and_read_back(dir, o, log);
  CHECK(log.counts().empty());
  for (int64_t i = 0; i < o.programs; ++i) {
    const Program want = synth_program(o, i);
    const Program& p = got[size_t(i)];
    CAPTURE(want.name);
    CHECK(p.name == want.name);
    REQUIRE(p.iterators.size() == want.iterators.size());
    for (size_t k = 0; k < p.iterators.size(); ++k) {
      CHECK(p.iterators[k].name == want.iterators[k].name);
      CHECK(p.iterators[k].lower.text == want.iterators[k].lower.text);
      CHECK(p.iterators[k].upper.text == want.iterators[k].upper.text);
      CHECK(p.iterators[k].parent == want.iterators[k].parent);
    }
    REQUIRE(p.computations.size() == want.computations.size());
    for (size_t c = 0; c < p.computations.size(); ++c) {
      const auto &a = p.computations[c], &b = want.computations[c];
      CHECK(a.name == b.name);
      CHECK(a.iterators == b.iterators);
      CHECK(a.write_access_relation == b.write_access_relation);
      CHECK(a.data_type == b.data_type);
      CHECK(a.is_reduction == b.is_reduction);
      REQUIRE(a.accesses.size() == b.accesses.size());
      for (size_t k = 0; k < a.accesses.size(); ++k)
        CHECK(a.accesses[k].matrix == b.accesses[k].matrix);
      CHECK(count_nodes(a.expression) == count_nodes(b.expression));
    }
    CHECK(p.initial_execution_time == doctest::Approx(want.initial_execution_time).epsilon(1e-12));
    REQUIRE(p.schedules.size() == 20);
    for (size_t si = 0; si < p.schedules.size(); ++si) {
      const auto &a = p.schedules[si], &b = want.schedules[si];
      CHECK(a.parse_problem.empty());
      CHECK(a.sched_str == b.sched_str);
      CHECK(a.fusions.size() == b.fusions.size());
      REQUIRE(a.execution_times.size() == b.execution_times.size());
      for (size_t k = 0; k < a.execution_times.size(); ++k)
        CHECK(a.execution_times[k] == doctest::Approx(b.execution_times[k]).epsilon(1e-12));
      REQUIRE(a.comps.size() == b.comps.size());
      for (size_t c = 0; c < a.comps.size(); ++c) {
        CHECK(a.comps[c].tiling_factors == b.comps[c].tiling_factors);  // also when written as "32"
        CHECK(a.comps[c].unrolling_factor == b.comps[c].unrolling_factor);
        CHECK(a.comps[c].transformations == b.comps[c].transformations);
        CHECK(a.comps[c].parallelized_dim == b.comps[c].parallelized_dim);
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "synth: every program featurizes, all features finite and within their documented ranges") {
  const std::string dir = lcm::test::temp_dir("synth_feat");
  const SynthOptions o = small_options(200, 12, 33);
  SkipLog log(false, 5);
  const std::vector<Program> progs = write_and_read_back(dir, o, log);
  const std::vector<int>& cols = schedule_columns();
  REQUIRE(int(cols.size()) == kScheduleColumns);
  int64_t kept = 0;
  for (const Program& p : progs) {
    CAPTURE(p.name);
    auto pf = featurize(p, FeatureOptions{}, log);
    REQUIRE(pf.has_value());
    CHECK(pf->n_schedules() == 12);
    kept += pf->n_schedules();
    for (float v : pf->comp_static) REQUIRE(std::isfinite(v));
    for (float v : pf->comp_sched) REQUIRE(std::isfinite(v));
    for (float v : pf->loops) REQUIRE(std::isfinite(v));
    for (float v : pf->speedup) CHECK(v >= 0.01f);
    // static part: reduction flag and access-block flags in {0, 1}
    for (int c = 0; c < pf->n_comps; ++c) {
      const float* v = &pf->comp_static[size_t(c) * kCompVectorWidth];
      CHECK((v[0] == 0.f || v[0] == 1.f));
      for (int a = 0; a < kMaxAccesses; ++a)
        CHECK((v[250 + a * 44] == 0.f || v[250 + a * 44] == 1.f));
      // expression rows: one-hot operator and one-hot data type, zero padding after the last node
      const float* ex = &pf->expr[size_t(c) * kMaxExprLen * kExprNodeWidth];
      bool padding = false;
      for (int r = 0; r < kMaxExprLen; ++r) {
        float op = 0, ty = 0;
        for (int k = 0; k < 8; ++k) op += ex[r * kExprNodeWidth + k];
        for (int k = 8; k < 11; ++k) ty += ex[r * kExprNodeWidth + k];
        if (op == 0 && ty == 0)
          padding = true;
        else {
          CHECK(!padding);
          CHECK(op == 1.f);
          CHECK(ty == 1.f);
        }
      }
    }
    // schedule part: loop slots [Parallelized, Tiled, TileFactor, Fused, Shifted, ShiftFactor] × 5
    for (int64_t s = 0; s < pf->n_schedules(); ++s)
      for (int c = 0; c < pf->n_comps; ++c) {
        const float* v =
            &pf->comp_sched[(size_t(s) * size_t(pf->n_comps) + size_t(c)) * kScheduleColumns];
        for (int j = 0; j < kScheduleColumns; ++j) {
          const int col = cols[size_t(j)];
          const float x = v[j];
          if (col >= 1 && col <= 30) {
            const int field = (col - 1) % 6;
            if (field == 0 || field == 1 || field == 3 || field == 4) CHECK((x == 0.f || x == 1.f));
            if (field == 2) CHECK((x == 0.f || (x >= 8.f && x <= 128.f)));
            if (field == 5) CHECK((x >= 0.f && x <= 3.f));
          } else if (col == 31) {
            CHECK((x == 0.f || x == 1.f));
          } else if (col == 32) {
            CHECK((x == 0.f || x == 2.f || x == 4.f || x == 8.f || x == 16.f));
          } else if (col >= 33 && col <= 96) {
            if ((col - 33) % 16 == 0)  // tag type: none, or a kind's code 1..Count
              CHECK((x >= 0.f && x <= float(kTransformKindCount)));
          }
        }
      }
    for (int64_t s = 0; s < pf->n_schedules(); ++s)
      for (int l = 0; l < pf->n_loops; ++l) {
        const float* v =
            &pf->loops[(size_t(s) * size_t(pf->n_loops) + size_t(l)) * kLoopVectorWidth];
        for (int k : {0, 1, 3, 4, 6}) CHECK((v[k] == 0.f || v[k] == 1.f));
        CHECK((v[2] == 0.f || (v[2] >= 8.f && v[2] <= 128.f)));
        CHECK((v[5] == 0.f || v[5] == 2.f || v[5] == 4.f || v[5] == 8.f || v[5] == 16.f));
      }
  }
  CHECK(kept == 200 * 12);
  CHECK(log.counts().empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "synth: failed and missing fractions mark only times and are dropped with named reasons") {
  SynthOptions clean = small_options(80, 20, 9);
  SynthOptions dirty = clean;
  dirty.failed_fraction = 0.2;
  dirty.missing_fraction = 0.1;
  int64_t failed = 0, missing = 0, total = 0;
  for (int64_t i = 0; i < clean.programs; ++i) {
    const Program a = synth_program(clean, i), b = synth_program(dirty, i);
    CHECK(b.schedules[0].has_label());
    CHECK(a.initial_execution_time == b.initial_execution_time);
    for (size_t si = 1; si < a.schedules.size(); ++si) {
      ++total;
      CHECK(a.schedules[si].sched_str == b.schedules[si].sched_str);
      const auto& t = b.schedules[si].execution_times;
      if (t.empty())
        ++missing;
      else if (t.size() == 1 && t[0] == -1.0)
        ++failed;
      else
        CHECK(t == a.schedules[si].execution_times);
    }
  }
  REQUIRE(total == 80 * 19);
  CHECK(double(failed) / double(total) > 0.15);  // expected 0.2, binomial sd ≈ 0.01
  CHECK(double(failed) / double(total) < 0.25);
  CHECK(double(missing) / double(total) > 0.06);  // expected 0.1
  CHECK(double(missing) / double(total) < 0.14);
  // through the reader and featurize: the unlabeled schedules are dropped by name, none silently
  const std::string dir = lcm::test::temp_dir("synth_dirty");
  write_synth_file(dir + "/d.jsonl.gz", dirty);
  SkipLog log(false, 0);
  const std::vector<Program> progs = read_all_programs(dir + "/d.jsonl.gz", log);
  REQUIRE(progs.size() == 80);
  int64_t kept = 0;
  for (const Program& p : progs) {
    auto pf = featurize(p, FeatureOptions{}, log);
    if (pf) kept += pf->n_schedules();
  }
  CHECK(log.total("schedule") == failed + missing);
  CHECK(kept == 80 * 20 - failed - missing);
  std::filesystem::remove_all(dir);
}

TEST_CASE("synth: bad options and unwritable paths give clear errors and leave no file") {
  SynthOptions o = small_options(3, 4, 1);
  SynthOptions bad = o;
  bad.schedules_per_program = 0;
  CHECK_THROWS_AS(synth_program(bad, 0), std::invalid_argument);
  bad = o;
  bad.failed_fraction = 1.5;
  CHECK_THROWS_AS(write_synth_file("/tmp/never.jsonl.gz", bad), std::invalid_argument);
  bad = o;
  bad.failed_fraction = 0.7;
  bad.missing_fraction = 0.7;
  CHECK_THROWS_AS(synth_program(bad, 0), std::invalid_argument);
  CHECK(!std::filesystem::exists("/tmp/never.jsonl.gz"));
  CHECK_THROWS_AS(write_synth_file("/proc/lcm_no_such_dir/x.jsonl.gz", o), std::runtime_error);
  // zero programs is a valid, empty gzip file
  const std::string dir = lcm::test::temp_dir("synth_empty");
  o.programs = 0;
  SynthStats st = write_synth_file(dir + "/e.jsonl.gz", o);
  CHECK(st.schedules == 0);
  CHECK(lcm::test::gunzip_file(dir + "/e.jsonl.gz").empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "synth: the time model rewards parallelizing a large outer loop and penalizes a tiny one") {
  // Property over many programs (docs/synth.md §3): among schedules whose only change is
  // parallelizing loop 0 of every computation, the median speedup exceeds 1 when all outermost
  // loops have ≥ 64 iterations.
  const SynthOptions o = small_options(400, 40, 77);
  std::vector<double> speedups;
  for (int64_t i = 0; i < o.programs; ++i) {
    const Program p = synth_program(o, i);
    bool big = true;
    for (const auto& it : p.iterators)
      if (it.parent.empty()) big = big && it.lower.text == "0" && std::stoll(it.upper.text) >= 64;
    if (!big) continue;
    for (size_t si = 1; si < p.schedules.size(); ++si) {
      const Schedule& s = p.schedules[si];
      bool only_outer_parallel = s.fusions.empty();
      for (size_t c = 0; c < s.comps.size(); ++c) {
        const CompSchedule& cs = s.comps[c];
        only_outer_parallel = only_outer_parallel && cs.transformations.empty() &&
                              cs.tiling_dims.empty() && cs.unrolling_factor == 0 &&
                              cs.shiftings.empty() &&
                              cs.parallelized_dim == p.computations[c].iterators[0];
      }
      if (only_outer_parallel) speedups.push_back(p.initial_execution_time / s.min_time());
    }
  }
  REQUIRE(speedups.size() >= 5);
  std::sort(speedups.begin(), speedups.end());
  CHECK(speedups[speedups.size() / 2] > 1.5);
}

TEST_CASE("synth: --structures bounds the number of distinct footprints; 0 gives many") {
  auto footprints = [](const SynthOptions& o) {
    std::set<std::string> fps;
    for (int64_t i = 0; i < o.programs; ++i) {
      const Program p = synth_program(o, i);
      fps.insert(footprint(annotate_tree(p, *p.schedules[0].tree)));
    }
    return fps;
  };
  SynthOptions o = small_options(300, 2, 4);
  o.structures = 8;
  const auto few = footprints(o);
  CHECK(few.size() <= 8);
  CHECK(few.size() >= 5);
  o.seed = 5;  // the skeleton pool does not depend on the seed
  const auto few_other_seed = footprints(o);
  for (const auto& fp : few_other_seed) CHECK(few.count(fp) == 1);
  o.structures = 0;
  CHECK(footprints(o).size() > 60);
}
