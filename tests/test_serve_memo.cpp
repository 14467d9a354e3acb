// The per-program memo of lcm-serve and liblcm (ScorerOptions::memo_bytes, model/forward_memo.hpp)
// against the whole schedule-dependent forward: every schedule of real programs (the valid
// sample, else the committed synthetic programs) asked one at a time as a search asks, then
// again, then all at once, answers bit for bit those of a scorer without a memo; a memo past its
// bytes is emptied with the same answers; the cache counts the memo's bytes.
#include <doctest/doctest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/rng.hpp"
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
  std::string ckpt_relative;  // the model's own initialisation, relative to the untransformed
  std::vector<test::QueryProgram> programs;
};

/// A checkpoint of the model's own initialisation (model-spec §5.3) with its zero concat layers
/// drawn from U(±0.1), so that every part of the tree walk reaches the output, scoring relative
/// to the untransformed schedule: outputs far apart, unlike write_random_checkpoint's small
/// weights, so a rounding difference anywhere would show.
void write_init_checkpoint(const std::string& path) {
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
  train::save_checkpoint(path, m, {{"lcm.input_scaling", sc.to_json()}});
}

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = test::temp_dir("serve_memo");
    x.ckpt = x.dir + "/model.safetensors";
    test::write_random_checkpoint(x.ckpt);
    x.ckpt_relative = x.dir + "/init_relative.safetensors";
    write_init_checkpoint(x.ckpt_relative);
    std::string src = test::shared_data("looperset-sample/valid.jsonl.gz");
    if (src.empty()) src = test::committed_data("synth_valid.jsonl.gz");
    for (const std::string& l : test::gz_lines(src)) {
      try {
        x.programs.push_back(test::query_program(l));
      } catch (const std::exception&) {
      }
    }
    REQUIRE(!x.programs.empty());
    return x;
  }();
  return f;
}

std::unique_ptr<serve::Scorer> make_scorer(size_t memo_bytes, const std::string& ckpt = "") {
  config::Config c;
  config::apply_overrides(
      c, {"eval.weights_path=" + (ckpt.empty() ? fixture().ckpt : ckpt), "training.threads=1"});
  serve::ScorerOptions o;
  o.memo_bytes = memo_bytes;
  return std::make_unique<serve::Scorer>(c, o);
}

/// Counts the answers of `got` that differ from `want` (bits of the double, or the reason),
/// printing the first few.
int differences(const std::string& what, const std::string& program,
                const std::vector<serve::ScheduleScore>& got,
                const std::vector<serve::ScheduleScore>& want, size_t first_index = 0) {
  REQUIRE(got.size() == want.size());
  int n = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].speedup != want[i].speedup || got[i].reason != want[i].reason) {
      if (n++ < 3)
        std::printf("%s: %s schedule %zu: memo %.17g (%s), whole forward %.17g (%s)\n",
                    what.c_str(), program.c_str(), first_index + i, got[i].speedup,
                    got[i].reason.c_str(), want[i].speedup, want[i].reason.c_str());
    }
  return n;
}

}  // namespace

/// Every schedule of every program asked of a scorer with the default memo and one without
/// (`ckpt`): one at a time, again, and all in one request.
void check_memo_answers(const std::string& ckpt) {
  const Fixture& f = fixture();
  auto memo = make_scorer(serve::kDefaultMemoBytes, ckpt);
  auto whole = make_scorer(0, ckpt);
  int diff = 0, scored = 0;
  std::vector<double> distinct;
  for (const test::QueryProgram& q : f.programs) {
    // one at a time, as a search asks; then the same schedules again (the memo's outputs)
    std::vector<serve::ScheduleScore> want;
    for (const std::string& s : q.schedules) {
      want.push_back(whole->score(q.program, q.untransformed, {s})[0]);
      scored += want.back().ok() ? 1 : 0;
      if (distinct.size() < 2 && want.back().ok() &&
          (distinct.empty() || distinct[0] != want.back().speedup))
        distinct.push_back(want.back().speedup);
    }
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<serve::ScheduleScore> got;
      for (const std::string& s : q.schedules)
        got.push_back(memo->score(q.program, q.untransformed, {s})[0]);
      diff += differences(pass ? "repeated" : "single", q.name, got, want);
    }
    // every schedule in one request (B > 1: the whole forward; a request may repeat one)
    std::vector<std::string> all = q.schedules;
    all.push_back(q.schedules[0]);
    diff += differences("batch", q.name, memo->score(q.program, q.untransformed, all),
                        whole->score(q.program, q.untransformed, all));
  }
  CHECK(scored > 0);
  CHECK(distinct.size() == 2);  // the answers depend on the schedule
  CHECK(diff == 0);
  const serve::CacheStats s = memo->cache_stats();
  CHECK(s.memo_node_hits > 0);
  CHECK(s.memo_node_misses > 0);
  CHECK(s.memo_output_hits > 0);
  const serve::CacheStats w = whole->cache_stats();
  CHECK(w.memo_node_hits + w.memo_node_misses + w.memo_output_hits + w.memo_output_misses == 0);
}

TEST_CASE("memoised answers are the whole forward's, bit for bit, for every schedule") {
  SUBCASE("small random weights") {
    check_memo_answers(fixture().ckpt);
  }
  SUBCASE("the model's initialisation, relative to the untransformed schedule") {
    check_memo_answers(fixture().ckpt_relative);
  }
}

TEST_CASE("a memo past its bytes is emptied with the same answers, and the cache counts it") {
  const Fixture& f = fixture();
  // the program with the most schedules
  const test::QueryProgram* q = &f.programs[0];
  for (const auto& p : f.programs)
    if (p.schedules.size() > q->schedules.size()) q = &p;
  const size_t small = size_t(16) << 10;
  auto memo = make_scorer(small);
  auto whole = make_scorer(0);
  int diff = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < q->schedules.size(); ++i)
      diff += differences("small memo", q->name,
                          memo->score(q->program, q->untransformed, {q->schedules[i]}),
                          whole->score(q->program, q->untransformed, {q->schedules[i]}), i);
  CHECK(diff == 0);
  const serve::CacheStats s = memo->cache_stats(), w = whole->cache_stats();
  CHECK(s.memo_clears > 0);
  // one program cached by each: the memo's bytes are in the program's
  REQUIRE(s.entries == 1);
  REQUIRE(w.entries == 1);
  CHECK(s.bytes == w.bytes + small * size_t(memo->predictor().members()));
}

TEST_CASE("memo_bytes 0 keeps no memo; the default is on") {
  CHECK(serve::ScorerOptions{}.memo_bytes == serve::kDefaultMemoBytes);
  CHECK(serve::kDefaultMemoBytes > 0);
  const test::QueryProgram& q = fixture().programs[0];
  auto whole = make_scorer(0);
  whole->score(q.program, q.untransformed, q.schedules);
  whole->score(q.program, q.untransformed, q.schedules);
  const serve::CacheStats s = whole->cache_stats();
  CHECK(s.memo_output_hits == 0);
  CHECK(s.memo_output_misses == 0);
}

TEST_CASE("the memo is used where every product of the forward runs the one-row kernel") {
  // a chain of `depth` loops with `comps` computations on the innermost, and `roots` roots
  auto tree = [](int depth, int comps, int roots) {
    data::ProgramTree t;
    for (int r = 0; r < roots; ++r) {
      const int first = int(t.nodes.size());
      t.roots.push_back(first);
      for (int d = 0; d < depth; ++d) {
        data::TreeNode n;
        n.loop_index = first + d;
        if (d + 1 < depth) n.children.push_back(first + d + 1);
        t.nodes.push_back(n);
      }
      for (int c = 0; c < comps; ++c) t.nodes.back().comp_indices.push_back(r * comps + c);
    }
    return t;
  };
  const model::ModelConfig release;
  const model::CostModel<float> big(release, 1);
  CHECK(big.memo_matches_forward(tree(3, 1, 1), 1));
  CHECK(big.memo_matches_forward(tree(5, 2, 4), 8));
  CHECK_FALSE(big.memo_matches_forward(tree(2, 3, 3), 9));  // 9 computation rows
  CHECK_FALSE(big.memo_matches_forward(tree(2, 1, 9), 9));  // 9 nodes on a level
  CHECK_FALSE(big.memo_matches_forward(tree(1, 0, 9), 0));  // 9 roots, no computation
  // The sizes: the release model's products of 2-8 rows run row by row; the tests' small models
  // (tests/python: comp layers 32,16, embeddings 8) run the packed GEMM there, so no memo.
  CHECK(model::memo_sizes_match_forward(release));
  model::ModelConfig small = release;
  small.comp_embed_layer_sizes = {32, 16};
  small.drops = {0.05, 0.05};
  small.lstm_embedding_size = 8;
  small.expr_embed_size = 8;
  CHECK_FALSE(model::memo_sizes_match_forward(small));
  CHECK_FALSE(model::CostModel<float>(small, 1).memo_matches_forward(tree(3, 1, 1), 1));
  model::ModelConfig narrow_tags = release;
  narrow_tags.lstm_embedding_size = 8;  // the tag BiLSTM's 32 x 16 input weight
  CHECK_FALSE(model::memo_sizes_match_forward(narrow_tags));
  CHECK_FALSE(model::CostModel<float>(narrow_tags, 1).memo_matches_forward(tree(3, 1, 1), 1));
}
