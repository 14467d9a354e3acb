// The LOOPer cost model (docs/model-spec.md §5): its configuration, the batch checks, parameter
// creation/initialisation, the regression head and the two forward entry points. The inputs,
// the computation embeddings and the tree walks are in model/cost_model_{inputs,embed,tree}.cpp.
#include "model/cost_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/init.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "model/cost_model_detail.hpp"

namespace lcm::model {

namespace detail {

void bad(const std::string& what) {
  throw std::invalid_argument("CostModel: " + what);
}

TreeLevels tree_levels(const data::ProgramTree& tree) {
  const int n = int(tree.nodes.size());
  TreeLevels tl;
  tl.height.assign(size_t(n), -1);
  std::vector<int> seen(size_t(n), 0);
  // iterative post-order from the roots (seen: 0 new, 1 on stack, 2 done)
  for (int root : tree.roots) {
    if (root < 0 || root >= n) bad("root index " + std::to_string(root) + " outside the tree");
    if (seen[size_t(root)]) bad("node " + std::to_string(root) + " reached twice");
    std::vector<std::pair<int, size_t>> st{{root, 0}};
    seen[size_t(root)] = 1;
    while (!st.empty()) {
      auto& [v, i] = st.back();
      const auto& ch = tree.nodes[size_t(v)].children;
      if (i < ch.size()) {
        const int c = ch[i++];
        if (c < 0 || c >= n) bad("child index " + std::to_string(c) + " outside the tree");
        if (seen[size_t(c)]) bad("node " + std::to_string(c) + " reached twice (not a tree)");
        seen[size_t(c)] = 1;
        st.push_back({c, 0});
      } else {
        int h = 0;
        for (int c : ch) h = std::max(h, tl.height[size_t(c)] + 1);
        tl.height[size_t(v)] = h;
        seen[size_t(v)] = 2;
        st.pop_back();
      }
    }
  }
  int maxh = -1;
  for (int v = 0; v < n; ++v) maxh = std::max(maxh, tl.height[size_t(v)]);
  tl.levels.assign(size_t(maxh + 1), {});
  for (int v = 0; v < n; ++v)
    if (tl.height[size_t(v)] >= 0) tl.levels[size_t(tl.height[size_t(v)])].push_back(v);
  return tl;
}

const ColumnSplit& column_split() {
  static const ColumnSplit cs = [] {
    ColumnSplit s;
    for (int c = 0; c < data::kCompVectorWidth; ++c) {
      if (c >= kTagsStart && c < kThirdStart) continue;
      (data::is_schedule_column(c) ? s.sched_cols : s.static_cols).push_back(c);
    }
    for (int c : s.static_cols) {
      if (!s.static_runs.empty() && s.static_runs.back().first + s.static_runs.back().second == c)
        ++s.static_runs.back().second;
      else
        s.static_runs.push_back({c, 1});
    }
    return s;
  }();
  return cs;
}

/// Σ points·C over segments: the computation rows of a batch.
int64_t comp_rows(const std::vector<data::BatchSegment>& segs) {
  int64_t n = 0;
  for (const auto& g : segs) n += g.points * g.n_comps;
  return n;
}

std::vector<int64_t> program_rows_of(const data::BatchTensors& bt, const data::BatchLayout& lay) {
  std::vector<int64_t> rows(size_t(lay.comp_rows()));
  for (int64_t b = 0; b < bt.batch; ++b)
    for (int64_t r = lay.comp_row[size_t(b)], e = lay.expr_row[size_t(bt.program_of[size_t(b)])];
         r < lay.comp_row[size_t(b + 1)]; ++r, ++e)
      rows[size_t(r)] = e;
  return rows;
}

void check_trees(const data::BatchTrees& trees, const std::vector<data::BatchSegment>& segs,
                 bool shapes) {
  if (trees.size() != segs.size())
    bad(std::to_string(trees.size()) + " trees for " + std::to_string(segs.size()) + " segments");
  for (size_t s = 0; s < trees.size(); ++s) {
    if (!trees[s]) bad("segment " + std::to_string(s) + " has no tree");
    check_tree(*trees[s], segs[s].n_comps, segs[s].n_loops);
    if (shapes) tree_levels(*trees[s]);  // throws on a bad shape
  }
}

void check_tree(const data::ProgramTree& tree, int64_t C, int64_t L) {
  if (tree.roots.empty()) bad("tree has no roots");
  for (const auto& nd : tree.nodes) {
    if (nd.loop_index < 0 || nd.loop_index >= L)
      bad("loop_index " + std::to_string(nd.loop_index) + " outside [0, " + std::to_string(L) +
          ")");
    for (int c : nd.comp_indices)
      if (c < 0 || c >= C)
        bad("computation index " + std::to_string(c) + " outside [0, " + std::to_string(C) + ")");
  }
}

}  // namespace detail

using namespace detail;  // NOLINT: the column blocks and input helpers of this model

int scaled_comp_columns(const ModelConfig& cfg) {
  switch (cfg.encoder.kind) {
    case EncoderKind::None:
      return data::kCompVectorWidth;
    case EncoderKind::CompVector:
      return 0;
    default:
      return kEncoderRawColumns;
  }
}

void ModelConfig::validate() const {
  auto fail = [](const std::string& w) { throw std::invalid_argument("ModelConfig: " + w); };
  if (input_size != kFirstWidth + kThirdWidth)
    fail("input_size must be 846 (33 + 813 columns of the computation vector), got " +
         std::to_string(input_size));
  if (comp_embed_layer_sizes.size() < 2) fail("comp_embed_layer_sizes needs at least 2 entries");
  // An upper bound too: sizes come from checkpoint metadata, and absurd ones must be a clear
  // error, not a failed multi-gigabyte allocation (the release model's widest layer is 600).
  constexpr int kMaxWidth = 16384;
  for (int s : comp_embed_layer_sizes)
    if (s < 1 || s > kMaxWidth)
      fail("comp_embed_layer_sizes entries must be in [1, 16384], got " + std::to_string(s));
  if (drops.size() < std::max<size_t>(comp_embed_layer_sizes.size(), 2))
    fail("drops needs at least " +
         std::to_string(std::max<size_t>(comp_embed_layer_sizes.size(), 2)) + " entries, got " +
         std::to_string(drops.size()));
  for (double p : drops)
    if (!(p >= 0.0 && p <= 1.0)) fail("drops entries must be in [0, 1]");
  if (lstm_embedding_size < 1 || lstm_embedding_size > kMaxWidth)
    fail("lstm_embedding_size must be in [1, 16384], got " + std::to_string(lstm_embedding_size));
  if (expr_embed_size < 1 || expr_embed_size > kMaxWidth)
    fail("expr_embed_size must be in [1, 16384], got " + std::to_string(expr_embed_size));
  if (loops_tensor_size != data::kLoopVectorWidth) fail("loops_tensor_size must be 8");
  if (relative_to_identity && !log_output)
    fail("relative_to_identity needs a log-speedup output (a training loss other than mape)");
  if (encoder.kind != EncoderKind::None) {
    try {
      encoder.comp.validate();
      encoder.access.validate();
    } catch (const std::invalid_argument& e) {
      fail(std::string("encoder: ") + e.what());
    }
  }
}

data::BatchLayout check_batch(const data::BatchTrees& trees, const data::BatchTensors& bt) {
  if (bt.batch < 1) bad("batch needs B >= 1, got B=" + std::to_string(bt.batch));
  if (bt.programs.empty()) bad("no programs in the batch");
  data::BatchLayout layout;
  try {
    layout = data::batch_layout(bt);
  } catch (const std::invalid_argument& e) {
    bad(e.what());
  }
  check_trees(trees, layout.segments, true);
  return layout;
}

void check_batch(const data::ProgramTree& tree, const data::BatchTensors& bt) {
  check_batch(data::BatchTrees{&tree}, bt);
}

// ---------------------------------------------------------------------------------------------

namespace {

/// Throws std::invalid_argument when prepared inputs cannot be those of `trees` (forward()).
template <class T>
void check_prepared(const data::BatchTrees& trees, const ForwardInputs<T>& in) {
  if (in.naive) bad("forward: inputs prepared for the naive forward");
  if (in.batch < 1 || int64_t(in.program_of.size()) != in.batch || in.segments.empty())
    bad("forward: prepared inputs with bad sizes");
  int64_t points = 0;
  for (const auto& g : in.segments) {
    if (g.points < 1 || g.n_comps < 1 || g.n_loops < 1)
      bad("forward: prepared inputs with bad sizes");
    points += g.points;
  }
  if (points != in.batch) bad("forward: prepared segments do not cover the batch");
  if (in.n_comps == 0 && int64_t(in.shared_row.size()) != comp_rows(in.segments))
    bad("forward: prepared inputs lack the shared-row index");
  check_trees(trees, in.segments, false);  // the trees must be the batch's
}

}  // namespace

template <class T>
CostModel<T>::CostModel(const ModelConfig& cfg, uint64_t seed) : cfg_(cfg) {
  cfg_.validate();
  Rng rng(seed);
  const int E = cfg_.embed_size();
  const auto& sizes = cfg_.comp_embed_layer_sizes;
  const int n = int(sizes.size());
  auto linear = [&](const std::string& name, int in, int out,
                    int kind /*0 default,1 xavier,2 zero*/) {
    Parameter<T>& w = store_.add(name + ".weight", Shape{out, in});
    Parameter<T>& b = store_.add(name + ".bias", Shape{out});
    pytorch_linear_default(w, &b, rng);  // nn.Linear's own init first, as in the reference
    if (kind >= 1) xavier_uniform(w, rng);
    if (kind == 2) zeros(w);
  };
  // state_dict order of bench/reference/looper_model.py (the §5.2 table order): the module's own
  // parameters first, then the sub-modules in the order __init__ assigns them
  xavier_uniform(store_.add("no_comps_tensor", Shape{1, E}), rng);
  xavier_uniform(store_.add("no_nodes_tensor", Shape{1, E}), rng);
  std::vector<int> comp_w{cfg_.input_size + 2 * cfg_.lstm_embedding_size + cfg_.expr_embed_size};
  if (cfg_.encoder.kind == EncoderKind::None) {
    linear("encode_vectors", data::kMaxTags, data::kMaxTags, 0);
    add_lstm_parameters(store_, "transformation_vectors_embed",
                        LstmSpec{data::kMaxTags, cfg_.lstm_embedding_size, 1, true}, &rng);
    add_lstm_parameters(store_, "exprs_embed",
                        LstmSpec{data::kExprNodeWidth, cfg_.expr_embed_size, 1, false}, &rng);
  } else {  // model-spec §8: the encoder replaces the tag / expression paths
    add_encoder_parameters(store_, cfg_.encoder, rng);
    comp_w[0] = cfg_.encoder.kind == EncoderKind::CompVector
                    ? cfg_.encoder.embedding_width()
                    : kEncoderRawColumns + cfg_.encoder.embedding_width() +
                          data::kMaxExprLen * data::kExprNodeWidth;
  }
  comp_w.insert(comp_w.end(), sizes.begin(), sizes.end());
  for (int i = 0; i < n; ++i)
    linear("comp_embedding_layers." + std::to_string(i), comp_w[size_t(i)], comp_w[size_t(i + 1)],
           1);
  const LstmSpec tree_spec{E, E, 1, false};
  add_lstm_parameters(store_, "comps_lstm", tree_spec, &rng);
  add_lstm_parameters(store_, "nodes_lstm", tree_spec, &rng);
  add_lstm_parameters(store_, "roots_lstm", tree_spec, &rng);
  const std::vector<int> cat_w{2 * E + cfg_.loops_tensor_size, sizes[size_t(n - 2)],
                               sizes[size_t(n - 1)]};
  for (int i = 0; i < 2; ++i)
    linear("concat_layers." + std::to_string(i), cat_w[size_t(i)], cat_w[size_t(i + 1)], 2);
  const std::vector<int> reg_w{E, sizes[size_t(n - 2)], sizes[size_t(n - 1)]};
  for (int i = 0; i < 2; ++i)
    linear("regression_layers." + std::to_string(i), reg_w[size_t(i)], reg_w[size_t(i + 1)], 1);
  linear("predict", E, 1, 1);
  memo_sizes_ok_ = memo_sizes_match_forward(cfg_);
}

template <class T>
NodeId CostModel<T>::dense(Tape<T>& tape, NodeId x, const char* prefix, int index, double p,
                           Rng& rng) {
  const std::string base = std::string(prefix) + "." + std::to_string(index);
  // Linear → ELU as one op (bias and ELU applied to each GEMM tile in cache; same values).
  NodeId y = ops::linear_elu(tape, x, tape.param(store_.at(base + ".weight")),
                             tape.param(store_.at(base + ".bias")));
  return ops::dropout(tape, y, p, rng);
}

template <class T>
NodeId CostModel<T>::head(Tape<T>& tape, NodeId h, int64_t batch, Rng& rng) {
  for (int i = 0; i < 2; ++i)
    h = dense(tape, h, "regression_layers", i, cfg_.drops[size_t(i)], rng);
  NodeId y = ops::linear(tape, h, tape.param(store_.at("predict.weight")),
                         tape.param(store_.at("predict.bias")));
  if (!cfg_.log_output) y = ops::leaky_relu(tape, y, T(0.01));  // log_output: raw ln(speedup)
  return ops::reshape(tape, y, Shape{batch});
}

template <class T>
std::vector<Parameter<T>*> CostModel<T>::encoder_parameters() {
  std::vector<Parameter<T>*> out;
  for (auto& p : store_.all())
    if (p.name.rfind("encoder.", 0) == 0) out.push_back(&p);
  return out;
}

template <class T>
std::vector<Parameter<T>*> CostModel<T>::non_encoder_parameters() {
  std::vector<Parameter<T>*> out;
  for (auto& p : store_.all())
    if (p.name.rfind("encoder.", 0) != 0) out.push_back(&p);
  return out;
}

template <class T>
void CostModel<T>::set_encoder_frozen(bool frozen) {
  if (cfg_.encoder.kind == EncoderKind::None) return;
  encoder_frozen_ = frozen;
  for (Parameter<T>* p : encoder_parameters()) p->requires_grad = !frozen;
}

template <class T>
NodeId CostModel<T>::forward(Tape<T>& tape, const data::BatchTrees& trees,
                             const data::BatchTensors& bt, Rng& rng) {
  if (cfg_.encoder.kind == EncoderKind::None)
    return forward(tape, trees, prepare_inputs(trees, bt), rng);
  const data::BatchLayout lay = check_batch(trees, bt);
  const NodeId X = comp_embeddings(tape, bt, lay, rng, false);  // [Σ C_b, E]
  const NodeId loops =
      input_from(tape, Shape{lay.loop_rows(), int64_t(cfg_.loops_tensor_size)}, bt.loops.data());
  return walk_tree(tape, trees, lay.segments, X, loops, rng);
}

template <class T>
NodeId CostModel<T>::forward(Tape<T>& tape, const data::BatchTrees& trees,
                             const ForwardInputs<T>& in, Rng& rng) {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::forward: prepared inputs are not available with a pre-trained encoder");
  check_prepared(trees, in);
  const NodeId X = embed_computations(tape, in, rng);  // [Σ C_b, E]
  const NodeId loops = input_leaf(tape, in, InputLeaf::Loops);
  return walk_tree(tape, trees, in.segments, X, loops, rng);
}

template class CostModel<float>;
template class CostModel<double>;

}  // namespace lcm::model
