// Tests of the LOOPer cost model (model/cost_model.hpp): parameter names/shapes/count, a
// whole-model gradient check in double, level-batched forward == node-by-node reference on many
// tree footprints and on real batches, determinism, dropout modes, bad input, and a short training
// smoke test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "data/prepare.hpp"
#include "engine/gradcheck.hpp"
#include "engine/optim.hpp"
#include "model/cost_model.hpp"
#include "tests/support/model_support.hpp"
#include "tests/support/numeric_support.hpp"
#include "tests/support/test_support.hpp"

using namespace lcm;
using lcm::model::CostModel;
using lcm::model::ModelConfig;

namespace {

ModelConfig tiny_config(double drop = 0.0) {
  ModelConfig c;
  c.comp_embed_layer_sizes = {8, 6};
  c.drops = {drop, drop, drop, drop, drop};
  c.lstm_embedding_size = 3;
  c.expr_embed_size = 3;
  return c;
}

using lcm::test::node;
using lcm::test::randomize;

/// A hand-built footprint: tree plus C and L.
struct Footprint {
  std::string name;
  data::ProgramTree tree;
  int n_comps = 0, n_loops = 0;
};

std::vector<Footprint> footprints() {
  std::vector<Footprint> f;
  {  // 2 roots; node 1 without computations; leaves 2, 3, 5; node 5 has neither
    Footprint p{"multi_root", {}, 5, 6};
    p.tree.nodes = {node(0, {0}, {1, 2}), node(1, {}, {3}),  node(3, {3}, {}),
                    node(2, {2, 1}, {}),  node(4, {4}, {5}), node(5, {}, {})};
    p.tree.roots = {0, 4};
    f.push_back(p);
  }
  {  // deep chain of 5 loops, computations only at some depths
    Footprint p{"deep_chain", {}, 3, 5};
    p.tree.nodes = {node(0, {}, {1}), node(1, {0}, {2}), node(2, {}, {3}), node(3, {1}, {4}),
                    node(4, {2}, {})};
    p.tree.roots = {0};
    f.push_back(p);
  }
  {  // one loop, one computation
    Footprint p{"single", {}, 1, 1};
    p.tree.nodes = {node(0, {0}, {})};
    p.tree.roots = {0};
    f.push_back(p);
  }
  {  // wide: equal child counts and computation counts on one level (grouped LSTM calls),
     // mixed heights among siblings, 3 roots of different heights
    Footprint p{"wide", {}, 7, 9};
    p.tree.nodes = {node(0, {0}, {1, 2, 3}), node(1, {1, 2}, {}), node(2, {3, 4}, {}),
                    node(3, {}, {4}),        node(4, {5}, {}),    node(5, {6}, {}),
                    node(6, {}, {7}),        node(7, {}, {8}),    node(8, {0, 6}, {})};
    // node 7 uses loop 7 and node 8 loop 8; roots 0, 5, 6
    p.tree.nodes[7].loop_index = 7;
    p.tree.nodes[8].loop_index = 8;
    p.tree.roots = {0, 5, 6};
    f.push_back(p);
  }
  return f;
}

using lcm::test::random_batch;

template <class T>
std::vector<T> values(Tape<T>& t, NodeId id) {
  const auto& v = t.value(id);
  return std::vector<T>(v.data, v.data + v.numel());
}

/// Runs forward (or forward_naive) + backward of a weighted sum; returns predictions and fills
/// grads.
template <class T>
std::vector<T> run(CostModel<T>& m, const data::BatchTrees& tree, const data::BatchTensors& bt,
                   bool naive, std::map<std::string, std::vector<T>>* grads, bool training = true) {
  Tape<T> tape;
  tape.set_training(training);
  Rng rng(5);
  m.params().zero_grad();
  const NodeId y = naive ? m.forward_naive(tape, tree, bt, rng) : m.forward(tape, tree, bt, rng);
  REQUIRE(tape.shape(y) == Shape{bt.batch});
  if (grads) {
    tape.backward(weighted_sum(tape, y, 99));
    for (auto& p : m.params().all()) (*grads)[p.name] = p.grad;
  }
  return values(tape, y);
}

template <class T>
std::vector<T> run(CostModel<T>& m, const data::ProgramTree& tree, const data::BatchTensors& bt,
                   bool naive, std::map<std::string, std::vector<T>>* grads, bool training = true) {
  return run(m, data::BatchTrees{&tree}, bt, naive, grads, training);
}

/// One batch of several segments: parts[i] (a batch of one footprint) become segment i, their
/// programs renumbered after those of the earlier parts (what Dataset::materialize builds for a
/// mixed batch).
data::BatchTensors concat_batches(const std::vector<data::BatchTensors>& parts) {
  data::BatchTensors t;
  for (const auto& q : parts) {
    const int32_t base = int32_t(t.programs.size());
    t.segments.push_back({q.batch, q.n_comps, q.n_loops});
    t.batch += q.batch;
    t.comp.insert(t.comp.end(), q.comp.begin(), q.comp.end());
    t.loops.insert(t.loops.end(), q.loops.begin(), q.loops.end());
    t.speedup.insert(t.speedup.end(), q.speedup.begin(), q.speedup.end());
    t.expr.insert(t.expr.end(), q.expr.begin(), q.expr.end());
    for (int32_t p : q.programs) t.programs.push_back(base + p);
    for (int32_t p : q.program_of) t.program_of.push_back(base + p);
  }
  bool same_c = true, same_l = true;
  for (const auto& g : t.segments) {
    same_c = same_c && g.n_comps == t.segments[0].n_comps;
    same_l = same_l && g.n_loops == t.segments[0].n_loops;
  }
  t.n_comps = same_c ? t.segments[0].n_comps : 0;
  t.n_loops = same_l ? t.segments[0].n_loops : 0;
  return t;
}

/// Every parameter's float gradient in `a` is within 1e-4 of the largest |gradient| of that
/// parameter in `b` (1e-3 at least), the check of float level batching against a reference.
void check_float_grads_close(const std::map<std::string, std::vector<float>>& a,
                             std::map<std::string, std::vector<float>>& b) {
  for (auto& [name, g] : a) {
    CAPTURE(name);
    const std::vector<float>& ref = b[name];
    REQUIRE(ref.size() == g.size());
    float scale = 0, diff = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      diff = std::max(diff, std::abs(g[i] - ref[i]));
    }
    CAPTURE(scale);
    CAPTURE(diff);
    CHECK(diff <= 1e-4f * std::max(scale, 1e-3f));
  }
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b,
                    double floor = 1e-3) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst =
        std::max(worst, std::abs(a[i] - b[i]) / std::max({std::abs(a[i]), std::abs(b[i]), floor}));
  return worst;
}

}  // namespace

TEST_CASE("model: release parameter names, shapes, order and count") {
  CostModel<float> m(ModelConfig{}, 1);
  auto& ps = m.params();
  CHECK(ps.count() == 2109623);
  std::vector<std::pair<std::string, Shape>> expect = {{"no_comps_tensor", {1, 180}},
                                                       {"no_nodes_tensor", {1, 180}}};
  auto lstm = [&](const std::string& pre, int in, int h, bool bi) {
    for (std::string sfx :
         bi ? std::vector<std::string>{"", "_reverse"} : std::vector<std::string>{""}) {
      expect.push_back({pre + ".weight_ih_l0" + sfx, {4 * h, in}});
      expect.push_back({pre + ".weight_hh_l0" + sfx, {4 * h, h}});
      expect.push_back({pre + ".bias_ih_l0" + sfx, {4 * h}});
      expect.push_back({pre + ".bias_hh_l0" + sfx, {4 * h}});
    }
  };
  expect.push_back({"encode_vectors.weight", {16, 16}});
  expect.push_back({"encode_vectors.bias", {16}});
  lstm("transformation_vectors_embed", 16, 100, true);
  lstm("exprs_embed", 11, 100, false);
  const std::vector<int> cw{1146, 600, 350, 200, 180};
  for (int i = 0; i < 4; ++i) {
    expect.push_back(
        {"comp_embedding_layers." + std::to_string(i) + ".weight", {cw[i + 1], cw[i]}});
    expect.push_back({"comp_embedding_layers." + std::to_string(i) + ".bias", {cw[i + 1]}});
  }
  lstm("comps_lstm", 180, 180, false);
  lstm("nodes_lstm", 180, 180, false);
  lstm("roots_lstm", 180, 180, false);
  expect.push_back({"concat_layers.0.weight", {200, 368}});
  expect.push_back({"concat_layers.0.bias", {200}});
  expect.push_back({"concat_layers.1.weight", {180, 200}});
  expect.push_back({"concat_layers.1.bias", {180}});
  expect.push_back({"regression_layers.0.weight", {200, 180}});
  expect.push_back({"regression_layers.0.bias", {200}});
  expect.push_back({"regression_layers.1.weight", {180, 200}});
  expect.push_back({"regression_layers.1.bias", {180}});
  expect.push_back({"predict.weight", {1, 180}});
  expect.push_back({"predict.bias", {1}});
  lcm::test::check_parameter_layout(ps, expect);
  // docs/model-spec.md §5.3 initialisation: concat weights zero, bounds of the xavier / default
  // draws respected
  for (auto& v : ps.at("concat_layers.0.weight").value) REQUIRE(v == 0.f);
  for (auto& v : ps.at("concat_layers.1.weight").value) REQUIRE(v == 0.f);
  auto max_abs = [&](const std::string& n) {
    float a = 0;
    for (float v : ps.at(n).value) a = std::max(a, std::abs(v));
    return a;
  };
  CHECK(max_abs("comp_embedding_layers.0.weight") <= float(std::sqrt(6.0 / (1146 + 600))) + 1e-7f);
  CHECK(max_abs("comp_embedding_layers.0.weight") > 0.9f * float(std::sqrt(6.0 / (1146 + 600))));
  CHECK(max_abs("no_comps_tensor") <= float(std::sqrt(6.0 / 181)) + 1e-7f);
  CHECK(max_abs("comps_lstm.weight_hh_l0") <= float(1 / std::sqrt(180.0)) + 1e-7f);
  CHECK(max_abs("exprs_embed.bias_ih_l0") <= 0.1f + 1e-7f);
  CHECK(max_abs("encode_vectors.weight") <= 0.25f + 1e-7f);
  CHECK(max_abs("concat_layers.0.bias") <= float(1 / std::sqrt(368.0)) + 1e-7f);
}

TEST_CASE("model: bad configs and inconsistent batches are clear errors") {
  ModelConfig c = tiny_config();
  c.input_size = 845;
  CHECK_THROWS_AS(CostModel<double>(c, 1), std::invalid_argument);
  c = tiny_config();
  c.comp_embed_layer_sizes = {6};
  CHECK_THROWS_AS(CostModel<double>(c, 1), std::invalid_argument);
  c = tiny_config();
  c.drops = {0.1};
  CHECK_THROWS_AS(CostModel<double>(c, 1), std::invalid_argument);
  c = tiny_config();
  c.drops[1] = 1.5;
  CHECK_THROWS_AS(CostModel<double>(c, 1), std::invalid_argument);

  CostModel<double> m(tiny_config(), 1);
  const Footprint fp = footprints()[0];
  const data::BatchTensors good = random_batch(3, 2, fp.n_comps, fp.n_loops, 7);
  Rng rng(1);
  {
    Tape<double> t;
    CHECK_NOTHROW(m.forward(t, fp.tree, good, rng));
  }
  auto expect_bad = [&](const data::ProgramTree& tree, const data::BatchTensors& bt) {
    Tape<double> t1, t2;
    CHECK_THROWS_AS(m.forward(t1, tree, bt, rng), std::invalid_argument);
    CHECK_THROWS_AS(m.forward_naive(t2, tree, bt, rng), std::invalid_argument);
  };
  data::ProgramTree tree = fp.tree;
  tree.nodes[2].comp_indices = {5};  // C = 5
  expect_bad(tree, good);
  tree = fp.tree;
  tree.nodes[2].loop_index = 6;  // L = 6
  expect_bad(tree, good);
  tree = fp.tree;
  tree.nodes[3].children = {1};  // cycle 1 → 3 → 1
  expect_bad(tree, good);
  tree = fp.tree;
  tree.roots = {0, 1};  // node 1 reached twice
  expect_bad(tree, good);
  tree = fp.tree;
  tree.roots.clear();
  expect_bad(tree, good);
  data::BatchTensors bt = good;
  bt.comp.pop_back();
  expect_bad(fp.tree, bt);
  bt = good;
  bt.program_of[1] = 2;  // P = 2
  expect_bad(fp.tree, bt);
  bt = good;
  bt.expr.resize(bt.expr.size() / 2);
  expect_bad(fp.tree, bt);
  bt = good;
  bt.loops.push_back(0.f);
  expect_bad(fp.tree, bt);
}

TEST_CASE("model: gradient check of the whole model in double (tiny config, 2 roots, dropout on)") {
  CostModel<double> m(tiny_config(0.1), 3);
  randomize(m, 11);
  const Footprint fp = footprints()[0];
  const data::BatchTensors bt = random_batch(3, 2, fp.n_comps, fp.n_loops, 21);
  std::vector<Parameter<double>*> params;
  for (auto& p : m.params().all()) params.push_back(&p);
  auto build = [&](Tape<double>& t) {
    Rng rng(77);
    t.set_training(true);
    return weighted_sum(t, m.forward(t, fp.tree, bt, rng), 5);
  };
  const GradCheckResult r = grad_check(params, build, 1e-6, 1e-7, 1e-5);
  INFO(r.worst);
  CHECK(r.ok);
  CHECK(r.checked == m.params().count());
  // and the gradient really reaches every parameter (zero-gradient bugs would pass trivially)
  for (auto& p : m.params().all()) {
    double s = 0;
    for (double g : p.grad) s += std::abs(g);
    INFO(p.name);
    CHECK(s > 0);
  }
}

TEST_CASE("model: level-batched forward == node-by-node reference (double values and gradients)") {
  for (const Footprint& fp : footprints()) {
    for (int64_t P : {1, 3}) {
      CAPTURE(fp.name);
      CAPTURE(P);
      CostModel<double> m(tiny_config(0.0), 4);
      randomize(m, 12);
      const data::BatchTensors bt = random_batch(7, P, fp.n_comps, fp.n_loops, 30 + uint64_t(P));
      std::map<std::string, std::vector<double>> ga, gb;
      const auto ya = run(m, fp.tree, bt, false, &ga);
      const auto yb = run(m, fp.tree, bt, true, &gb);
      CHECK(max_rel_diff(ya, yb) < 1e-12);
      for (auto& [name, g] : ga) {
        CAPTURE(name);
        CHECK(max_rel_diff(g, gb[name]) < 1e-10);
      }
    }
  }
}

TEST_CASE("model: mixed-footprint batch: level-batched union walk == per-segment reference") {
  // Segments of every hand-built footprint in one batch: different C, L, heights, child counts
  // and root counts (1, 2 and 3 roots), a footprint twice (as two segments), one program in a
  // segment of its own.
  const std::vector<Footprint> fps = footprints();
  const std::vector<std::pair<size_t, int64_t>> plan = {{0, 2}, {1, 1}, {3, 3}, {2, 2}, {1, 2}};
  std::vector<data::BatchTensors> parts;
  data::BatchTrees trees;
  uint64_t seed = 70;
  for (const auto& [f, P] : plan) {
    parts.push_back(random_batch(P + 2, P, fps[f].n_comps, fps[f].n_loops, seed++));
    trees.push_back(&fps[f].tree);
  }
  const data::BatchTensors bt = concat_batches(parts);
  REQUIRE(bt.n_comps == 0);
  for (bool share : {true, false}) {
    CAPTURE(share);
    ModelConfig cfg = tiny_config(0.0);
    cfg.share_static_columns = share;
    CostModel<double> m(cfg, 4);
    randomize(m, 16);
    std::map<std::string, std::vector<double>> ga, gb;
    const auto ya = run(m, trees, bt, false, &ga);
    const auto yb = run(m, trees, bt, true, &gb);
    REQUIRE(ya.size() == size_t(bt.batch));
    CHECK(max_rel_diff(ya, yb) < 1e-12);
    for (auto& [name, g] : ga) {
      CAPTURE(name);
      CHECK(max_rel_diff(g, gb[name]) < 1e-10);
    }
    // and each segment's predictions are those of the segment alone, in datapoint order
    int64_t at = 0;
    for (size_t s = 0; s < parts.size(); ++s) {
      const auto alone = run<double>(m, *trees[s], parts[s], false, nullptr);
      for (size_t i = 0; i < alone.size(); ++i)
        CHECK(std::abs(alone[i] - ya[size_t(at) + i]) < 1e-12 * std::max(1.0, std::abs(alone[i])));
      at += parts[s].batch;
    }
  }
  // errors: one tree per segment, the trees must fit their segment
  CostModel<double> m(tiny_config(0.0), 4);
  Rng rng(1);
  Tape<double> t;
  data::BatchTrees fewer(trees.begin(), trees.end() - 1);
  CHECK_THROWS_AS(m.forward(t, fewer, bt, rng), std::invalid_argument);
  data::BatchTrees swapped = trees;
  std::swap(swapped[0], swapped[2]);  // the wide tree on the multi_root segment (C = 5 < 7)
  CHECK_THROWS_AS(m.forward(t, swapped, bt, rng), std::invalid_argument);
  data::BatchTensors short_segments = bt;
  short_segments.segments.back().points -= 1;
  CHECK_THROWS_AS(m.forward(t, trees, short_segments, rng), std::invalid_argument);
}

TEST_CASE("model: forward == forward_naive in float, release sizes, several programs per batch") {
  CostModel<float> m(ModelConfig{}, 8);
  randomize(m, 13, 0.08);
  for (const Footprint& fp : footprints()) {
    CAPTURE(fp.name);
    const data::BatchTensors bt = random_batch(6, 2, fp.n_comps, fp.n_loops, 40);
    std::map<std::string, std::vector<float>> ga, gb;
    const auto ya = run(m, fp.tree, bt, false, &ga, false);
    const auto yb = run(m, fp.tree, bt, true, &gb, false);
    for (size_t i = 0; i < ya.size(); ++i)
      CHECK(std::abs(ya[i] - yb[i]) <= 1e-5f * std::max(1.f, std::abs(yb[i])));
    check_float_grads_close(ga, gb);
  }
}

TEST_CASE(
    "model: batch whose static columns differ within a program falls back to the per-datapoint "
    "path") {
  CostModel<double> m(tiny_config(0.0), 4);
  randomize(m, 14);
  const Footprint fp = footprints()[1];
  data::BatchTensors bt = random_batch(5, 2, fp.n_comps, fp.n_loops, 50);
  bt.comp[0] += 0.5f;  // column 0 is static: datapoint 0 now disagrees with its program's others
  const auto ya = run<double>(m, fp.tree, bt, false, nullptr);
  const auto yb = run<double>(m, fp.tree, bt, true, nullptr);
  CHECK(max_rel_diff(ya, yb) < 1e-12);
}

TEST_CASE("model: determinism and dropout modes") {
  const Footprint fp = footprints()[0];
  const data::BatchTensors bt = random_batch(8, 3, fp.n_comps, fp.n_loops, 60);
  ModelConfig cfg = tiny_config(0.3);
  CostModel<float> a(cfg, 42), b(cfg, 42), c(cfg, 43);
  bool same_params = true, diff_params = false;
  for (size_t i = 0; i < a.params().size(); ++i) {
    same_params = same_params && a.params().all()[i].value == b.params().all()[i].value;
    diff_params = diff_params || a.params().all()[i].value != c.params().all()[i].value;
  }
  CHECK(same_params);
  CHECK(diff_params);
  // concat weights start at zero: randomise so that the dropout in the tree matters too
  randomize(a, 3);
  randomize(b, 3);
  const auto ea = run<float>(a, fp.tree, bt, false, nullptr, false);
  const auto ea2 = run<float>(a, fp.tree, bt, false, nullptr, false);
  const auto eb = run<float>(b, fp.tree, bt, false, nullptr, false);
  CHECK(ea == ea2);
  CHECK(ea == eb);
  const auto ta = run<float>(a, fp.tree, bt, false, nullptr, true);
  const auto tb = run<float>(b, fp.tree, bt, false, nullptr, true);
  CHECK(ta == tb);  // same dropout seed → same masks
  CHECK(ta != ea);  // dropout active in training mode
  Tape<float> t;
  t.set_training(true);
  Rng other(6);
  const NodeId y = a.forward(t, fp.tree, bt, other);
  CHECK(values(t, y) != ta);  // another dropout stream, other masks
}

using lcm::test::prepare_mini;

TEST_CASE("model: real batches of mini.jsonl.gz, forward == forward_naive") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 48, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  REQUIRE(ds.batches.size() >= 3);
  CostModel<float> m(ModelConfig{}, 9);
  randomize(m, 15, 0.08);
  // mixed batches (several footprints) first, then batches with several programs (program-level
  // sharing); small C (cheap naive expression LSTM)
  std::vector<size_t> order;
  for (int pass = 0; pass < 3; ++pass)
    for (size_t b = 0; b < ds.batches.size(); ++b) {
      const auto& pts = ds.batches[b].points;
      bool multi = false, small = true;
      for (const auto& p : pts) {
        multi = multi || p.program != pts[0].program;
        small = small && ds.programs[size_t(p.program)].n_comps <= 6;
      }
      const int kind = ds.trees(int64_t(b)).size() > 1 ? 0 : multi ? 1 : 2;
      if (kind == pass && small) order.push_back(b);
    }
  int checked = 0, multi_program = 0, mixed = 0;
  for (size_t b : order) {
    if (checked == 4) break;
    const data::BatchTensors bt = ds.materialize(int64_t(b));
    multi_program += bt.programs.size() > 1;
    mixed += bt.segments.size() > 1;
    const auto ya = run<float>(m, ds.trees(int64_t(b)), bt, false, nullptr, false);
    const auto yb = run<float>(m, ds.trees(int64_t(b)), bt, true, nullptr, false);
    for (size_t i = 0; i < ya.size(); ++i) {
      REQUIRE(std::isfinite(ya[i]));
      CHECK(std::abs(ya[i] - yb[i]) <= 2e-5f * std::max(1.f, std::abs(yb[i])));
    }
    ++checked;
  }
  CHECK(checked >= 3);
  CHECK(multi_program >= 1);
  CHECK(mixed >= 1);
}

TEST_CASE("model: cached program rows and schedule weight give the shared forward's bits") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 48, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  CostModel<float> m(ModelConfig{}, 9);
  randomize(m, 15, 0.08);
  const std::vector<float> sw = m.schedule_weight();
  Tape<float> tape;
  Rng rng(0);
  auto eval = [&](auto&& forward) {
    tape.clear();
    tape.set_training(false);
    tape.set_grad_enabled(false);
    const NodeId y = forward();
    const Tensor<float>& v = tape.value(y);
    return std::vector<float>(v.data, v.data + v.numel());
  };
  int checked = 0;
  for (size_t p = 0; p < ds.programs.size() && checked < 4; ++p) {
    const data::ProgramFeatures& pf = ds.programs[p];
    if (pf.n_comps > 6 || pf.n_schedules() < 3) continue;
    const data::BatchTrees trees{&pf.tree};
    for (int64_t n : {int64_t(1), std::min<int64_t>(pf.n_schedules(), 20)}) {
      const data::BatchTensors bt = data::program_batch(pf, int32_t(p), n);
      const std::vector<float> rows = m.program_rows(tape, trees, data::program_batch(pf, 0, 1));
      REQUIRE(rows.size() == size_t(pf.n_comps) * 600);
      const auto plain = eval([&] { return m.forward(tape, trees, bt, rng); });
      const auto shared = eval(
          [&] { return m.forward(tape, trees, m.prepare_shared_inputs(trees, bt, nullptr), rng); });
      model::ForwardInputs<float> in = m.prepare_shared_inputs(trees, bt, &rows);
      CHECK(!in.has(model::InputLeaf::Expr));
      CHECK(!in.has(model::InputLeaf::Static));
      const auto cached_rows = eval([&] { return m.forward(tape, trees, in, rng); });
      in.sched_weight = sw.data();
      const auto cached = eval([&] { return m.forward(tape, trees, in, rng); });
      REQUIRE(plain.size() == size_t(n));
      for (size_t i = 0; i < plain.size(); ++i) {
        CHECK(cached_rows[i] == shared[i]);  // the same products on the same values
        CHECK(cached[i] == shared[i]);
        CHECK(std::abs(shared[i] - plain[i]) <= 2e-5f * std::max(1.f, std::abs(plain[i])));
      }
    }
    ++checked;
  }
  CHECK(checked >= 2);
  // rows of another size are refused
  const data::ProgramFeatures& pf = ds.programs[0];
  const std::vector<float> wrong(7);
  CHECK(test::error_of<std::invalid_argument>([&] {
          m.prepare_shared_inputs(data::BatchTrees{&pf.tree}, data::program_batch(pf, 0, 1),
                                  &wrong);
        }).find("program-row values") != std::string::npos);
}

TEST_CASE("model: a real mixed batch's float gradient == the sum of its segments' gradients") {
  // The training gradient of one mixed batch (release sizes, float, dropout off) is the
  // datapoint-weighted sum of the gradients of its segments run as batches of their own.
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const data::PreparedSplit ps = prepare_mini(path, 48, data::BatchingMode::Mixed);
  const data::Dataset& ds = ps.dataset;
  int64_t pick = -1;
  for (int64_t b = 0; b < int64_t(ds.batches.size()) && pick < 0; ++b)
    if (ds.trees(b).size() >= 3) pick = b;
  REQUIRE(pick >= 0);
  CostModel<float> m(ModelConfig{}, 9);
  randomize(m, 15, 0.08);
  auto grad_of = [&](const data::Batch& batch, float weight) {
    const data::BatchTensors bt = ds.materialize(batch);
    Tape<float> tape;
    tape.set_training(false);
    Rng rng(3);
    const NodeId y = m.forward(tape, ds.trees(batch), bt, rng);
    std::vector<float> log_y(bt.speedup.size());
    for (size_t i = 0; i < log_y.size(); ++i) log_y[i] = std::log(bt.speedup[i]);
    const NodeId target = tape.constant(log_y.data(), Shape{bt.batch});
    m.params().zero_grad();
    tape.backward(ops::scale(tape, ops::mse(tape, y, target), weight));
    std::map<std::string, std::vector<float>> g;
    for (auto& p : m.params().all()) g[p.name] = p.grad;
    return g;
  };
  const data::Batch& whole = ds.batches[size_t(pick)];
  const auto g_mixed = grad_of(whole, 1.f);
  std::map<std::string, std::vector<float>> g_sum;
  const data::BatchTensors bt = ds.materialize(whole);
  int64_t at = 0;
  for (const data::BatchSegment& s : bt.segments) {
    data::Batch part;
    part.points.assign(whole.points.begin() + at, whole.points.begin() + at + s.points);
    at += s.points;
    for (auto& [name, g] : grad_of(part, float(s.points) / float(whole.size()))) {
      auto& acc = g_sum[name];
      acc.resize(g.size());
      for (size_t i = 0; i < g.size(); ++i) acc[i] += g[i];
    }
  }
  REQUIRE(at == whole.size());
  check_float_grads_close(g_mixed, g_sum);
}

TEST_CASE("model: 30 AdamW steps on one real batch reduce its MAPE") {
  LCM_REQUIRE_SHARED(path, "looperset-sample/mini.jsonl.gz");
  const int batch_size = 32;
  const data::PreparedSplit ps = prepare_mini(path, batch_size);
  const data::Dataset& ds = ps.dataset;
  // a full batch of several programs with few computations (fast) and no tiny labels (a label of
  // 0.01 alone dominates MAPE and needs many steps to fit)
  size_t pick = 0;
  double best = -1;
  for (size_t b = 0; b < ds.batches.size(); ++b) {
    const auto& pts = ds.batches[b].points;
    std::vector<int32_t> progs;
    float lo = 1e30f;
    for (const auto& p : pts) {
      if (std::find(progs.begin(), progs.end(), p.program) == progs.end())
        progs.push_back(p.program);
      lo = std::min(lo, ds.programs[size_t(p.program)].speedup[size_t(p.schedule)]);
    }
    const double score = double(ds.batches[b].size()) * 100 +
                         double(std::min<size_t>(progs.size(), 3)) * 10 + (lo >= 0.2f ? 5 : 0) -
                         ds.programs[size_t(pts[0].program)].n_comps;
    if (score > best) best = score, pick = b;
  }
  const data::BatchTensors bt = ds.materialize(int64_t(pick));
  const data::BatchTrees tree = ds.trees(int64_t(pick));
  ModelConfig cfg;
  CostModel<float> m(cfg, 1);
  AdamOptions ao;
  ao.lr = 1e-3;
  {
    std::vector<float> ys = bt.speedup;
    std::sort(ys.begin(), ys.end());
    MESSAGE("B " << bt.batch << " C " << bt.n_comps << " P " << bt.programs.size()
                 << " speedup min " << ys.front() << " median " << ys[ys.size() / 2] << " max "
                 << ys.back());
  }
  ao.weight_decay = 0.015;
  Adam<float> opt(parameter_pointers(m.params()), ao, true);
  Tape<float> tape;
  Rng rng(2);
  const float weight = float(bt.batch) / float(batch_size);
  auto mape = [&](bool train) {
    tape.clear();
    tape.set_training(train);
    tape.set_grad_enabled(train);
    const NodeId y = m.forward(tape, tree, bt, rng);
    const NodeId target = tape.constant(bt.speedup.data(), Shape{bt.batch});
    const NodeId loss = ops::mape(tape, y, target, weight);
    return std::pair<NodeId, float>(loss, tape.value(loss)[0]);
  };
  const float before = mape(false).second;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    const NodeId loss = mape(true).first;
    tape.backward(loss);
    opt.step();
  }
  const float after = mape(false).second;
  MESSAGE("MAPE before " << before << " after " << after);
  REQUIRE(std::isfinite(after));
  CHECK(after < 0.6f * before);
}

TEST_CASE("ModelConfig::validate bounds the sizes (checkpoint metadata is not trusted blindly)") {
  ModelConfig ok;
  CHECK_NOTHROW(ok.validate());
  auto message = [](const ModelConfig& c) {
    try {
      c.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  ModelConfig huge = ok;
  huge.comp_embed_layer_sizes = {100000000, 180};
  CHECK(message(huge).find("comp_embed_layer_sizes entries must be in [1, 16384], got 100000000") !=
        std::string::npos);
  ModelConfig lstm = ok;
  lstm.lstm_embedding_size = 20000;
  CHECK(message(lstm).find("lstm_embedding_size must be in [1, 16384]") != std::string::npos);
  ModelConfig expr = ok;
  expr.expr_embed_size = 0;
  CHECK(message(expr).find("expr_embed_size must be in [1, 16384]") != std::string::npos);
}
