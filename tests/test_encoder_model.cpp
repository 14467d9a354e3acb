// Tests of the cost model with a pre-trained encoder (docs/model-spec.md §8; model.encoder): shapes
// and names, gradient checks in double for both encoder kinds, level-batched == node-by-node, the
// frozen state (no gradient, eval-mode dropout) and the model-config round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "data/dataset.hpp"
#include "data/features.hpp"
#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "model/autoencoder.hpp"
#include "model/cost_model.hpp"
#include "support/model_support.hpp"
#include "support/numeric_support.hpp"
#include "support/test_support.hpp"
#include "train/checkpoint.hpp"

namespace {

using namespace lcm;
using model::AutoencoderConfig;
using model::CostModel;
using model::EncoderKind;
using model::ModelConfig;

AutoencoderConfig tiny_encoder(EncoderKind k) {
  return lcm::test::autoencoder_config(k, {2, 2, 2, 2, 2, 2, 2, 4, 3, 3, 2});
}

ModelConfig tiny_config(EncoderKind k, double drop = 0.0) {
  ModelConfig c;
  c.comp_embed_layer_sizes = {8, 6};
  c.drops = {drop, drop, drop, drop, drop};
  c.lstm_embedding_size = 3;
  c.expr_embed_size = 3;
  c.encoder = tiny_encoder(k);
  return c;
}

using lcm::test::node;
using lcm::test::randomize;

/// Two roots, a loop without computations, a loop with two: C = 3, L = 3.
data::ProgramTree small_tree() {
  data::ProgramTree t;
  t.nodes = {node(0, {0}, {1}), node(1, {2, 1}, {}), node(2, {}, {})};
  t.roots = {0, 2};
  return t;
}

/// B datapoints of P programs; static columns (about a fifth of them in ±30: access columns of
/// some computations shared between programs) and expressions equal within a program.
data::BatchTensors random_batch(int64_t B, int64_t P, int64_t C, int64_t L, uint64_t seed) {
  return lcm::test::random_batch(B, P, C, L, seed, /*wide_static=*/true);
}

template <class T>
std::vector<double> values(Tape<T>& t, NodeId id) {
  const auto& v = t.value(id);
  return std::vector<double>(v.data, v.data + v.numel());
}

using lcm::test::normwise;

/// The exported real batch (tests/fixtures/model_batch_input.safetensors) as tree + tensors, the
/// expression rows stored once per program (fixture program_of).
std::pair<data::ProgramTree, data::BatchTensors> golden_batch() {
  const SafeTensorsFile f =
      read_safetensors(test::source_path("tests/fixtures/model_batch_input.safetensors"));
  data::BatchTensors bt;
  const auto* comp = f.find("comp");
  bt.batch = comp->shape[0];
  bt.n_comps = comp->shape[1];
  bt.n_loops = f.find("loops")->shape[1];
  bt.comp = comp->to_float();
  bt.loops = f.find("loops")->to_float();
  bt.speedup = f.find("speedup")->to_float();
  const std::vector<float> expr = f.find("expr")->to_float();
  const std::vector<int64_t> program_of = f.find("program_of")->to_int64();
  const int64_t per = bt.n_comps * data::kMaxExprLen * data::kExprNodeWidth;
  std::map<int64_t, int32_t> index;
  for (int64_t i = 0; i < bt.batch; ++i) {
    auto it = index.find(program_of[size_t(i)]);
    if (it == index.end()) {
      it = index.emplace(program_of[size_t(i)], int32_t(index.size())).first;
      bt.programs.push_back(it->second);
      bt.expr.insert(bt.expr.end(), expr.begin() + i * per, expr.begin() + (i + 1) * per);
    }
    bt.program_of.push_back(it->second);
  }
  data::ProgramTree tree;
  const auto li = f.find("tree.loop_index")->to_int64();
  const auto co = f.find("tree.comp_offsets")->to_int64();
  const auto ci = f.find("tree.comp_indices")->to_int64();
  const auto ho = f.find("tree.child_offsets")->to_int64();
  const auto hc = f.find("tree.children")->to_int64();
  for (size_t n = 0; n < li.size(); ++n) {
    data::TreeNode nd;
    nd.loop_index = int(li[n]);
    for (int64_t k = co[n]; k < co[n + 1]; ++k) nd.comp_indices.push_back(int(ci[size_t(k)]));
    for (int64_t k = ho[n]; k < ho[n + 1]; ++k) nd.children.push_back(int(hc[size_t(k)]));
    tree.nodes.push_back(nd);
  }
  for (int64_t r : f.find("tree.roots")->to_int64()) tree.roots.push_back(int(r));
  return {tree, bt};
}

/// Predictions, MAPE and every gradient of CostModel<T> with encoder `k` vs PyTorch
/// (bench/reference/make_encoder_model_fixture.py, reduced sizes, dropout off).
template <class T>
void check_encoder_golden(EncoderKind k) {
  const std::string kind = model::encoder_kind_name(k);
  const SafeTensorsFile g =
      read_safetensors(test::source_path("tests/fixtures/encoder_model_golden.safetensors"));
  ModelConfig c;
  c.comp_embed_layer_sizes = {16, 12, 10, 8};
  c.drops = {0, 0, 0, 0, 0};
  c.lstm_embedding_size = 4;
  c.expr_embed_size = 4;
  c.encoder = tiny_encoder(k);
  c.encoder.comp = {5, 6, 7, 4, 3, 8, 6, 20, 12, 16, 8};
  CostModel<T> m(c, 1);
  CHECK(std::to_string(m.params().count()) == g.metadata.at(kind + ".n_parameters"));
  for (auto& p : m.params().all()) {
    const SafeTensor* t = g.find(kind + "." + p.name);
    REQUIRE_MESSAGE(t != nullptr, "fixture lacks " << p.name);
    REQUIRE(t->shape == shape_vector(p.shape));
    const std::vector<double> v = t->to_double();
    std::copy(v.begin(), v.end(), p.value.begin());
  }
  auto [tree, bt] = golden_batch();
  Tape<T> t;
  t.set_training(false);
  Rng rng(1);
  m.params().zero_grad();
  const NodeId pred = m.forward(t, tree, bt, rng);
  std::vector<T> y(bt.speedup.begin(), bt.speedup.end());
  const NodeId loss = ops::mape(t, pred, t.constant(y.data(), Shape{bt.batch}), T(1));
  t.backward(loss);
  // measured: double 1e-16 (pred, loss), 9e-15 (gradients); float 4e-8 / 1.1e-5 (the 66-step
  // expression LSTM's and the 16-step BiLSTM's backward in float32, as in test_model_golden)
  const bool dbl = std::is_same_v<T, double>;
  const double e_pred = normwise(values(t, pred), g.find(kind + ".pred")->to_double());
  const double ref = g.find(kind + ".loss")->to_double()[0];
  const double e_loss = std::abs(double(t.value(loss).data[0]) - ref) / ref;
  MESSAGE(kind << std::string(dbl ? " double" : " float") << ": pred err " << e_pred
               << ", loss err " << e_loss);
  CHECK(e_pred <= (dbl ? 1e-10 : 1e-5));
  CHECK(e_loss <= (dbl ? 1e-10 : 1e-5));
  double worst = 0;
  for (auto& p : m.params().all()) {
    const double e = normwise(std::vector<double>(p.grad.begin(), p.grad.end()),
                              g.find(kind + ".grad." + p.name)->to_double());
    CHECK_MESSAGE(e <= (dbl ? 1e-9 : 2e-4), "gradient of " << p.name << ": " << e);
    worst = std::max(worst, e);
  }
  MESSAGE("  worst gradient err " << worst);
}

}  // namespace

TEST_CASE(
    "encoder model: matches the PyTorch reference on a real batch (both kinds, double and float)") {
  for (EncoderKind k : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    check_encoder_golden<double>(k);
    check_encoder_golden<float>(k);
  }
}

TEST_CASE("encoder model: parameters and first-layer widths of model-spec §8") {
  ModelConfig c;  // release sizes
  c.encoder.kind = EncoderKind::CompVector;
  CostModel<float> comp(c, 1);
  CHECK(comp.params().find("encode_vectors.weight") == nullptr);  // replaced by the encoder
  CHECK(comp.params().find("exprs_embed.weight_ih_l0") == nullptr);
  CHECK(lcm::shape_vector(comp.params().at("comp_embedding_layers.0.weight").shape) ==
        std::vector<int64_t>{600, 350});
  int64_t enc = 0;
  for (auto* p : comp.encoder_parameters()) enc += p->numel();
  CHECK(enc == 591912);  // §8.1 encoder
  CHECK(comp.encoder_parameters().size() + comp.non_encoder_parameters().size() ==
        comp.params().size());
  c.encoder.kind = EncoderKind::AccessMatrix;
  CostModel<float> acc(c, 1);
  CHECK(lcm::shape_vector(acc.params().at("comp_embedding_layers.0.weight").shape) ==
        std::vector<int64_t>{600, 1573});
  CHECK(acc.params().find("encoder.weight_ih_l1_reverse") != nullptr);
  // no encoder: the §5 model, unchanged
  CostModel<float> none(ModelConfig{}, 1);
  CHECK(none.params().count() == 2109623);
  CHECK(none.encoder_parameters().empty());
}

TEST_CASE("encoder model: gradient check in double, both kinds (unfrozen, dropout on)") {
  for (EncoderKind k : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    CAPTURE(model::encoder_kind_name(k));
    CostModel<double> m(tiny_config(k, 0.1), 3);
    randomize(m, 11);
    const data::ProgramTree tree = small_tree();
    const data::BatchTensors bt = random_batch(3, 2, 3, 3, 21);
    std::vector<Parameter<double>*> params;
    for (auto& p : m.params().all()) params.push_back(&p);
    auto build = [&](Tape<double>& t) {
      Rng rng(77);
      t.set_training(true);
      return weighted_sum(t, m.forward(t, tree, bt, rng), 5);
    };
    const GradCheckResult r = grad_check(params, build, 1e-6, 1e-7, 1e-5);
    INFO(r.worst);
    CHECK(r.ok);
    for (auto* p : m.encoder_parameters()) {  // the gradient reaches the encoder
      double s = 0;
      for (double g : p->grad) s += std::abs(g);
      INFO(p->name);
      CHECK(s > 0);
    }
  }
}

TEST_CASE("encoder model: level-batched forward == node-by-node reference") {
  for (EncoderKind k : {EncoderKind::CompVector, EncoderKind::AccessMatrix}) {
    CostModel<double> m(tiny_config(k), 3);
    randomize(m, 5);
    const data::BatchTensors bt = random_batch(5, 2, 3, 3, 9);
    Tape<double> a, b;
    a.set_training(false);
    b.set_training(false);
    Rng r1(1), r2(1);
    const auto ya = values(a, m.forward(a, small_tree(), bt, r1));
    const auto yb = values(b, m.forward_naive(b, small_tree(), bt, r2));
    REQUIRE(ya.size() == yb.size());
    for (size_t i = 0; i < ya.size(); ++i) CHECK(ya[i] == doctest::Approx(yb[i]).epsilon(1e-12));
  }
}

TEST_CASE("encoder model: a frozen encoder gets no gradient and runs without dropout") {
  CostModel<double> m(tiny_config(EncoderKind::CompVector, 0.0), 3);  // the model's own drops 0
  randomize(m, 13);
  const data::BatchTensors bt = random_batch(4, 2, 3, 3, 17);
  auto run = [&](bool training, std::vector<double>* out) {
    Tape<double> t;
    t.set_training(training);
    Rng rng(5);
    m.params().zero_grad();
    const NodeId y = m.forward(t, small_tree(), bt, rng);
    if (out) *out = values(t, y);
    t.backward(weighted_sum(t, y, 3));
  };
  std::vector<double> eval, frozen, unfrozen;
  run(false, &eval);
  m.set_encoder_frozen(true);
  CHECK(m.encoder_frozen());
  run(true, &frozen);
  for (size_t i = 0; i < eval.size(); ++i) CHECK(frozen[i] == eval[i]);  // encoder dropout off
  for (auto* p : m.encoder_parameters()) {
    CHECK_FALSE(p->requires_grad);
    double s = 0;
    for (double g : p->grad) s += std::abs(g);
    CHECK(s == 0);
  }
  double rest = 0;
  for (auto* p : m.non_encoder_parameters())
    for (double g : p->grad) rest += std::abs(g);
  CHECK(rest > 0);
  m.set_encoder_frozen(false);
  run(true, &unfrozen);  // the §8.1 bottleneck dropout (0.1, 0.05) is active again
  bool differs = false;
  for (size_t i = 0; i < eval.size(); ++i) differs |= unfrozen[i] != eval[i];
  CHECK(differs);
}

TEST_CASE("encoder model: the model config with an encoder round-trips through checkpoint JSON") {
  ModelConfig c = tiny_config(EncoderKind::AccessMatrix);
  const std::string j = train::model_config_json(c);
  CHECK(lcm::test::contains(j, "\"encoder\":{\"kind\":\"access_matrix\""));
  const ModelConfig back = train::model_config_from_json(j);
  CHECK(back.encoder.kind == EncoderKind::AccessMatrix);
  CHECK(back.encoder.access.hidden == 2);
  CHECK(train::model_config_json(back) == j);
  CHECK(train::model_config_from_json(train::model_config_json(ModelConfig{})).encoder.kind ==
        EncoderKind::None);
}
