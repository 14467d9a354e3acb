// The LOOPer cost model (docs/model-spec.md §5): parameter creation/initialisation, the
// level-batched forward pass with program-level sharing, and the node-by-node reference forward
// used by tests. Both forwards are built from engine ops.
#include "model/cost_model.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "engine/device_memory.hpp"
#include "engine/init.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"

namespace lcm::model {

namespace {

constexpr int kFirstWidth = 33;  // columns 0–32 of the computation vector (§3.9)
constexpr int kTagsStart = 33;   // columns 33–96: 4 tag vectors of 16
constexpr int kNumTags = 4;
constexpr int kThirdStart = 97;  // columns 97–909 (813)
constexpr int kThirdWidth = data::kCompVectorWidth - kThirdStart;
constexpr int kEncoderRawColumns = 207;  // §8.2: [first 33 | tags 64 | A, b, A′ 110] kept raw

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("CostModel: " + what);
}

/// A constant leaf of `shape` filled by fill(T* out) (float inputs converted to T).
template <class T, class F>
NodeId make_input(Tape<T>& t, Shape shape, F fill) {
  if (t.device() != Device::CPU) {  // CUDA tape: filled on the host, copied to the device once
    std::vector<T> host(size_t(shape.numel()));
    fill(host.data());
    return t.constant(host.data(), shape);
  }
  const NodeId id = t.new_node(shape, "input");
  fill(t.value(id).data);
  return id;
}

/// The leaf `l` of prepared inputs: a view of in.device on a CUDA tape (no copy; the memory must
/// stay unchanged until the tape is cleared), else a copy of the host values (uploaded on a CUDA
/// tape, as make_input). Throws std::invalid_argument when the leaf is absent or the host values
/// are missing, std::logic_error for device inputs on a CPU tape.
template <class T>
NodeId input_leaf(Tape<T>& t, const ForwardInputs<T>& in, InputLeaf l) {
  if (!in.has(l)) bad("prepared inputs lack leaf " + std::to_string(int(l)));
  const Shape& shape = in.shape(l);
  if (in.offset(l) < 0 || in.offset(l) + shape.numel() > in.total)
    bad("prepared input leaf outside its buffer");
  if (in.device) {
    if (t.device() == Device::CPU)
      throw std::logic_error(
          "CostModel::forward: inputs placed on a CUDA device given to a CPU tape");
    return t.new_view(Tensor<T>{const_cast<T*>(in.device + in.offset(l)), shape, Device::CUDA},
                      "input");
  }
  if (int64_t(in.host.size()) != in.total)
    bad("prepared inputs have neither host nor device values");
  const T* src = in.host.data() + in.offset(l);
  if (t.device() != Device::CPU) return t.constant(src, shape);
  const NodeId id = t.new_node(shape, "input");
  std::copy(src, src + shape.numel(), t.value(id).data);
  return id;
}

/// Per-node facts of a checked tree: height (leaf loops = 0) and nodes of each height.
struct TreeLevels {
  std::vector<int> height;
  std::vector<std::vector<int>> levels;  // levels[h] = nodes of height h, increasing node index
};

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

/// Position of computation column c (c < 33 or c ≥ 97) in z0 = [first 33 | tags Dt | third 813 |
/// expr].
int z0_column(int c, int tags_width) {
  return c < kFirstWidth ? c : kFirstWidth + tags_width + (c - kThirdStart);
}

/// Computation columns outside the tag block split by schedule dependence (§3.2), increasing.
struct ColumnSplit {
  std::vector<int> static_cols;                  // 764
  std::vector<int> sched_cols;                   // 82 (1–32, 157–206)
  std::vector<std::pair<int, int>> static_runs;  // static_cols as maximal [first, count) runs
};
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

/// Segment s of a batch as a batch of its own (its datapoints, their programs renumbered in
/// first-seen order), for the per-segment reference walk.
data::BatchTensors segment_batch(const data::BatchTensors& bt, const data::BatchLayout& lay,
                                 size_t s) {
  const data::BatchSegment& g = lay.segments[s];
  const int64_t b0 = lay.segment_point[s], b1 = lay.segment_point[s + 1];
  constexpr int64_t W = data::kCompVectorWidth, LW = data::kLoopVectorWidth,
                    X = data::kMaxExprLen * data::kExprNodeWidth;
  data::BatchTensors t;
  t.batch = b1 - b0, t.n_comps = g.n_comps, t.n_loops = g.n_loops;
  t.comp.assign(bt.comp.begin() + lay.comp_row[size_t(b0)] * W,
                bt.comp.begin() + lay.comp_row[size_t(b1)] * W);
  t.loops.assign(bt.loops.begin() + lay.loop_row[size_t(b0)] * LW,
                 bt.loops.begin() + lay.loop_row[size_t(b1)] * LW);
  if (!bt.speedup.empty()) t.speedup.assign(bt.speedup.begin() + b0, bt.speedup.begin() + b1);
  std::map<int32_t, int32_t> renumber;
  for (int64_t b = b0; b < b1; ++b) {
    const int32_t p = bt.program_of[size_t(b)];
    auto it = renumber.emplace(p, int32_t(t.programs.size())).first;
    if (it->second == int32_t(t.programs.size())) {
      t.programs.push_back(bt.programs[size_t(p)]);
      t.expr.insert(t.expr.end(), bt.expr.begin() + lay.expr_row[size_t(p)] * X,
                    bt.expr.begin() + lay.expr_row[size_t(p + 1)] * X);
    }
    t.program_of.push_back(it->second);
  }
  return t;
}

}  // namespace

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

namespace {

/// The tree-part of check_batch: indices of `tree` inside a segment of C computations, L loops.
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

}  // namespace

data::BatchLayout check_batch(const data::BatchTrees& trees, const data::BatchTensors& bt) {
  if (bt.batch < 1) bad("batch needs B >= 1, got B=" + std::to_string(bt.batch));
  if (bt.programs.empty()) bad("no programs in the batch");
  data::BatchLayout layout;
  try {
    layout = data::batch_layout(bt);
  } catch (const std::invalid_argument& e) {
    bad(e.what());
  }
  if (trees.size() != layout.segments.size())
    bad(std::to_string(trees.size()) + " trees for " + std::to_string(layout.segments.size()) +
        " segments");
  for (size_t s = 0; s < trees.size(); ++s) {
    if (!trees[s]) bad("segment " + std::to_string(s) + " has no tree");
    check_tree(*trees[s], layout.segments[s].n_comps, layout.segments[s].n_loops);
    tree_levels(*trees[s]);  // throws on a bad shape
  }
  return layout;
}

void check_batch(const data::ProgramTree& tree, const data::BatchTensors& bt) {
  check_batch(data::BatchTrees{&tree}, bt);
}

// ---------------------------------------------------------------------------------------------

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
NodeId CostModel<T>::comp_embeddings(Tape<T>& tape, const data::BatchTensors& bt,
                                     const data::BatchLayout& lay, Rng& rng, bool naive) {
  if (cfg_.encoder.kind != EncoderKind::None) {  // model-spec §8: encoder features → the same MLP
    NodeId h = ops::linear_elu(tape, encoder_features(tape, bt, lay, rng),
                               tape.param(store_.at("comp_embedding_layers.0.weight")),
                               tape.param(store_.at("comp_embedding_layers.0.bias")));
    h = ops::dropout(tape, h, cfg_.drops[0], rng);
    for (size_t i = 1; i < cfg_.comp_embed_layer_sizes.size(); ++i)
      h = dense(tape, h, "comp_embedding_layers", int(i), cfg_.drops[i], rng);
    return h;  // [N, E]
  }

  return embed_computations(tape, prepare(bt, lay, naive), rng);
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare(const data::BatchTensors& bt, const data::BatchLayout& lay,
                                       bool naive, bool force_share,
                                       const std::vector<T>* rows) const {
  const int64_t B = bt.batch, N = lay.comp_rows(), P = int64_t(bt.programs.size());
  const int W = data::kCompVectorWidth;
  const float* comp = bt.comp.data();
  constexpr int kSteps = data::kMaxExprLen, kNode = data::kExprNodeWidth;
  ForwardInputs<T> in;
  in.batch = B, in.n_comps = bt.n_comps, in.n_loops = bt.n_loops, in.n_programs = P,
  in.naive = naive;
  in.segments = lay.segments;
  in.program_of.assign(bt.program_of.begin(), bt.program_of.end());
  if (in.n_comps == 0) {  // C differs between segments: per-program rows broadcast row by row
    in.shared_row.resize(size_t(N));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = lay.comp_row[size_t(b)], e = lay.expr_row[size_t(bt.program_of[size_t(b)])];
           r < lay.comp_row[size_t(b + 1)]; ++r, ++e)
        in.shared_row[size_t(r)] = e;
  }
  // Leaves are laid out one after the other in `in.host`, each at a multiple of 64 values.
  auto place = [&](InputLeaf l, Shape shape) {
    in.shapes[size_t(l)] = shape;
    in.offsets[size_t(l)] = in.total;
    in.total += (shape.numel() + 63) / 64 * 64;
  };

  // 2. tag vectors: the level-batched path keeps the distinct 64-value tag blocks of the batch
  // (many schedules share a computation's transformations, e.g. none at all) and broadcasts the
  // BiLSTM's result back with tag_inverse; the naive path keeps every row.
  constexpr int kTagValues = kNumTags * data::kMaxTags;
  std::vector<int64_t> tag_rows;  // distinct rows (first occurrence), into [0, N)
  if (!naive) {
    std::unordered_map<std::string, int64_t> seen;
    seen.reserve(size_t(N));
    in.tag_inverse.resize(size_t(N));
    for (int64_t r = 0; r < N; ++r) {
      std::string key(reinterpret_cast<const char*>(comp + r * W + kTagsStart),
                      sizeof(float) * kTagValues);
      auto it = seen.emplace(std::move(key), int64_t(tag_rows.size())).first;
      if (it->second == int64_t(tag_rows.size())) tag_rows.push_back(r);
      in.tag_inverse[size_t(r)] = it->second;
    }
  } else {
    for (int64_t r = 0; r < N; ++r) tag_rows.push_back(r);
  }
  const int64_t U = int64_t(tag_rows.size());
  place(InputLeaf::Tags, Shape{U, kNumTags, data::kMaxTags});
  // 1. expression rows (Q8: all 66 steps, no packing): per datapoint (naive) or per program
  const int64_t expr_rows = naive ? N : lay.expr_rows();
  if (!rows) place(InputLeaf::Expr, Shape{expr_rows, kSteps, kNode});

  // Can the first layer's static columns be evaluated once per program?
  std::vector<int64_t> rep(size_t(P), -1);  // first datapoint of each program
  for (int64_t b = 0; b < B; ++b)
    if (rep[size_t(bt.program_of[size_t(b)])] < 0) rep[size_t(bt.program_of[size_t(b)])] = b;
  const ColumnSplit& cs = column_split();
  bool share = !naive && (force_share || (cfg_.share_static_columns && P < B));
  for (int64_t p = 0; share && p < P; ++p) share = rep[size_t(p)] >= 0;
  for (int64_t b = 0; share && b < B; ++b) {
    const float* x = comp + lay.comp_row[size_t(b)] * W;
    const float* r = comp + lay.comp_row[size_t(rep[size_t(bt.program_of[size_t(b)])])] * W;
    const int64_t C = lay.comp_row[size_t(b + 1)] - lay.comp_row[size_t(b)];
    for (int64_t c = 0; share && c < C; ++c)
      for (const auto& [first, count] : cs.static_runs)  // bitwise equality, run by run
        if (std::memcmp(&x[c * W + first], &r[c * W + first], sizeof(float) * size_t(count)) != 0) {
          share = false;
          break;
        }
  }
  in.share_static = share;
  // Static rows are z0 without the expression columns, schedule columns and tags left at zero
  // (embed_computations multiplies them by the whole first-layer weight).
  const int64_t Zs = kFirstWidth + 2 * cfg_.lstm_embedding_size + kThirdWidth,
                D = int64_t(cs.sched_cols.size());
  const int64_t H0 = cfg_.comp_embed_layer_sizes[0];
  if (rows && !share)
    throw std::invalid_argument(
        "CostModel::prepare_shared_inputs: the static columns differ between the datapoints of "
        "a program");
  if (rows && int64_t(rows->size()) != lay.expr_rows() * H0)
    throw std::invalid_argument(
        "CostModel::prepare_shared_inputs: " + std::to_string(rows->size()) +
        " program-row values for " + std::to_string(lay.expr_rows()) + " rows of width " +
        std::to_string(H0));
  if (share) {
    if (rows)
      place(InputLeaf::ProgramRows, Shape{lay.expr_rows(), H0});
    else
      place(InputLeaf::Static, Shape{lay.expr_rows(), Zs});
    place(InputLeaf::Sched, Shape{N, D});
  } else {
    place(InputLeaf::First, Shape{N, kFirstWidth});
    place(InputLeaf::Third, Shape{N, kThirdWidth});
  }
  place(InputLeaf::Loops, Shape{lay.loop_rows(), int64_t(data::kLoopVectorWidth)});

  in.host.assign(size_t(in.total), T(0));
  auto at = [&](InputLeaf l) { return in.host.data() + in.offset(l); };
  {
    T* o = at(InputLeaf::Tags);
    for (int64_t u = 0; u < U; ++u)
      for (int j = 0; j < kTagValues; ++j)
        o[u * kTagValues + j] = T(comp[tag_rows[size_t(u)] * W + kTagsStart + j]);
  }
  if (rows) {
    std::copy(rows->begin(), rows->end(), at(InputLeaf::ProgramRows));
  } else {
    T* o = at(InputLeaf::Expr);
    constexpr int64_t per = kSteps * kNode;  // values per row
    if (naive) {
      for (int64_t b = 0; b < B; ++b) {
        const float* src = bt.expr.data() + lay.expr_row[size_t(bt.program_of[size_t(b)])] * per;
        const int64_t n = (lay.comp_row[size_t(b + 1)] - lay.comp_row[size_t(b)]) * per;
        T* dst = o + lay.comp_row[size_t(b)] * per;
        for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
      }
    } else {
      for (int64_t i = 0; i < lay.expr_rows() * per; ++i) o[i] = T(bt.expr[size_t(i)]);
    }
  }
  if (share) {
    T* o = at(InputLeaf::Static);
    for (int64_t p = 0; p < P && !rows; ++p)
      for (int64_t c = 0; c < lay.expr_row[size_t(p + 1)] - lay.expr_row[size_t(p)]; ++c) {
        const float* x = comp + (lay.comp_row[size_t(rep[size_t(p)])] + c) * W;
        T* dst = o + (lay.expr_row[size_t(p)] + c) * Zs;  // zero-filled above
        for (int col : cs.static_cols)
          dst[z0_column(col, 2 * cfg_.lstm_embedding_size)] = T(x[col]);
      }
    o = at(InputLeaf::Sched);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t j = 0; j < D; ++j) o[r * D + j] = T(comp[r * W + cs.sched_cols[size_t(j)]]);
  } else {
    T* o = at(InputLeaf::First);
    for (int64_t r = 0; r < N; ++r)
      for (int j = 0; j < kFirstWidth; ++j) o[r * kFirstWidth + j] = T(comp[r * W + j]);
    o = at(InputLeaf::Third);
    for (int64_t r = 0; r < N; ++r)
      for (int j = 0; j < kThirdWidth; ++j)
        o[r * kThirdWidth + j] = T(comp[r * W + kThirdStart + j]);
  }
  {
    T* o = at(InputLeaf::Loops);
    const int LW = data::kLoopVectorWidth;
    for (int64_t i = 0; i < lay.loop_rows() * LW; ++i) o[i] = T(bt.loops[size_t(i)]);
  }
  return in;
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare_inputs(const data::BatchTrees& trees,
                                              const data::BatchTensors& bt) const {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::prepare_inputs: not available for a model with a pre-trained encoder "
        "(model.encoder); use forward(tape, trees, bt, rng)");
  const data::BatchLayout lay = check_batch(trees, bt);  // also the trees' shapes (roots, cycles)
  return prepare(bt, lay, false);
}

template <class T>
std::vector<int64_t> CostModel<T>::schedule_weight_columns() const {
  const int Dt = 2 * cfg_.lstm_embedding_size;
  std::vector<int64_t> cols;
  for (int c : column_split().sched_cols) cols.push_back(z0_column(c, Dt));
  for (int j = 0; j < Dt; ++j) cols.push_back(kFirstWidth + j);
  return cols;
}

template <class T>
std::vector<T> CostModel<T>::schedule_weight() const {
  const Parameter<T>& w0 = *store_.find("comp_embedding_layers.0.weight");
  const std::vector<int64_t> cols = schedule_weight_columns();
  const int64_t R = w0.shape[0], K = w0.shape[1], M = int64_t(cols.size());
  std::vector<T> out(size_t(R * M));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < M; ++j)
      out[size_t(r * M + j)] = w0.value[size_t(r * K + cols[size_t(j)])];
  return out;
}

template <class T>
NodeId CostModel<T>::expression_embedding(Tape<T>& tape, const ForwardInputs<T>& in) {
  // 1. expression embedding: per datapoint (naive) or per program, [rows, Ex]
  const LstmSpec expr_spec{data::kExprNodeWidth, cfg_.expr_embed_size, 1, false};
  const auto expr_w = lstm_weight_nodes(tape, store_, "exprs_embed", expr_spec);
  const int64_t expr_rows = in.shape(InputLeaf::Expr)[0];
  const NodeId expr_in = input_leaf(tape, in, InputLeaf::Expr);
  return ops::reshape(tape, ops::lstm(tape, expr_in, expr_spec, expr_w).h_n,
                      Shape{expr_rows, int64_t(cfg_.expr_embed_size)});
}

template <class T>
NodeId CostModel<T>::static_rows(Tape<T>& tape, const ForwardInputs<T>& in) {
  // Each program's z0 rows with the schedule columns (and tags) left at zero, against the whole
  // first-layer weight. The few P·C rows cost less than gathering the 864 static columns of the
  // 600×1146 weight on every call (and scatter-adding their gradient), and one row runs as a
  // matrix-vector product that reads the weight in place.
  const NodeId static_in = input_leaf(tape, in, InputLeaf::Static);
  return ops::linear(tape, ops::concat(tape, {static_in, expression_embedding(tape, in)}, 1),
                     tape.param(store_.at("comp_embedding_layers.0.weight")));
}

template <class T>
std::vector<T> CostModel<T>::program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                                          const data::BatchTensors& bt) {
  const ForwardInputs<T> in = prepare_shared_inputs(trees, bt, nullptr);  // its checks too
  tape.clear();
  tape.set_training(false);
  tape.set_grad_enabled(false);
  return to_host(tape.value(static_rows(tape, in)));
}

template <class T>
std::vector<T> CostModel<T>::program_rows(Tape<T>& tape, const data::BatchTrees& trees,
                                          const data::BatchTensors& bt, int64_t max_rows) {
  const ForwardInputs<T> in = prepare_shared_inputs(trees, bt, nullptr);  // its checks too
  const int64_t R = in.shape(InputLeaf::Static)[0];
  if (max_rows <= 0 || R <= max_rows || in.device) {
    tape.clear();
    tape.set_training(false);
    tape.set_grad_enabled(false);
    return to_host(tape.value(static_rows(tape, in)));
  }
  const Shape es = in.shape(InputLeaf::Expr), ss = in.shape(InputLeaf::Static);
  const int64_t ew = es.numel() / R, sw = ss.numel() / R;  // values per row of each leaf
  std::vector<T> out;
  for (int64_t r0 = 0; r0 < R; r0 += max_rows) {
    const int64_t n = std::min(max_rows, R - r0);
    // the rows [r0, r0 + n) of the Expr and Static leaves as inputs of their own
    ForwardInputs<T> part;
    part.n_programs = 1;
    Shape pe = es, ps = ss;
    pe[0] = n;
    ps[0] = n;
    part.shapes[size_t(InputLeaf::Expr)] = pe;
    part.shapes[size_t(InputLeaf::Static)] = ps;
    const int64_t s_off = (n * ew + 63) / 64 * 64;
    part.offsets[size_t(InputLeaf::Expr)] = 0;
    part.offsets[size_t(InputLeaf::Static)] = s_off;
    part.total = s_off + n * sw;
    part.host.assign(size_t(part.total), T(0));
    const T* e0 = in.host.data() + in.offset(InputLeaf::Expr) + r0 * ew;
    const T* s0 = in.host.data() + in.offset(InputLeaf::Static) + r0 * sw;
    std::copy(e0, e0 + n * ew, part.host.begin());
    std::copy(s0, s0 + n * sw, part.host.begin() + s_off);
    tape.clear();
    tape.set_training(false);
    tape.set_grad_enabled(false);
    const std::vector<T> rows = to_host(tape.value(static_rows(tape, part)));
    out.insert(out.end(), rows.begin(), rows.end());
  }
  tape.clear();
  return out;
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare_shared_inputs(const data::BatchTrees& trees,
                                                     const data::BatchTensors& bt,
                                                     const std::vector<T>* rows) const {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::prepare_shared_inputs: not available for a model with a pre-trained encoder "
        "(model.encoder)");
  const data::BatchLayout lay = check_batch(trees, bt);
  ForwardInputs<T> in = prepare(bt, lay, false, true, rows);
  if (!in.share_static)
    throw std::invalid_argument(
        "CostModel::prepare_shared_inputs: the static columns differ between the datapoints of "
        "a program");
  return in;
}

template <class T>
NodeId CostModel<T>::embed_computations(Tape<T>& tape, const ForwardInputs<T>& in, Rng& rng) {
  // C = 0: the computation count differs between segments (shared rows broadcast via shared_row)
  const int64_t C = in.n_comps, N = comp_rows(in.segments), P = in.n_programs;
  const int Dt = 2 * cfg_.lstm_embedding_size, Ex = cfg_.expr_embed_size;
  const bool naive = in.naive;

  // 2. tag vectors: encode_vectors then the BiLSTM; [forward h_T | backward h after step 0] → [N,
  // Dt].
  const NodeId tags_in = input_leaf(tape, in, InputLeaf::Tags);
  const int64_t U = in.shape(InputLeaf::Tags)[0];
  const NodeId enc = ops::linear(tape, tags_in, tape.param(store_.at("encode_vectors.weight")),
                                 tape.param(store_.at("encode_vectors.bias")));
  const LstmSpec tag_spec{data::kMaxTags, cfg_.lstm_embedding_size, 1, true};
  const LstmOutputs tag_out =
      ops::lstm(tape, enc, tag_spec,
                lstm_weight_nodes(tape, store_, "transformation_vectors_embed", tag_spec));
  const int64_t Ht = cfg_.lstm_embedding_size;
  NodeId tags =
      ops::concat(tape,
                  {ops::reshape(tape, ops::slice(tape, tag_out.h_n, 0, 0, 1), Shape{U, Ht}),
                   ops::reshape(tape, ops::slice(tape, tag_out.h_n, 0, 1, 1), Shape{U, Ht})},
                  1);
  if (U != N) tags = ops::index_select(tape, tags, 0, in.tag_inverse);  // [N, Dt]

  const NodeId w0 = tape.param(store_.at("comp_embedding_layers.0.weight"));
  const NodeId b0 = tape.param(store_.at("comp_embedding_layers.0.bias"));
  const std::vector<int64_t>& prog_index = in.program_of;
  const ColumnSplit& cs = column_split();

  NodeId h;
  const int64_t H0 = cfg_.comp_embed_layer_sizes[0];
  if (in.share_static) {
    // Static part once per program (static_rows, or given: ProgramRows), schedule part per row.
    const NodeId sched_in = input_leaf(tape, in, InputLeaf::Sched);
    const int64_t Ws = int64_t(cs.sched_cols.size()) + Dt;
    const NodeId w_sched =
        in.sched_weight && tape.device() == Device::CPU && !tape.grad_enabled()
            ? tape.new_view(Tensor<T>{const_cast<T*>(in.sched_weight), Shape{H0, Ws}, Device::CPU},
                            "input")
            : ops::select_columns(tape, w0, schedule_weight_columns());
    NodeId per_prog = in.has(InputLeaf::ProgramRows) ? input_leaf(tape, in, InputLeaf::ProgramRows)
                                                     : static_rows(tape, in);  // [P·C, H0]
    NodeId per_point;
    if (C > 0) {
      per_prog = ops::reshape(tape, per_prog, Shape{P, C * H0});
      per_point =
          ops::reshape(tape, ops::index_select(tape, per_prog, 0, prog_index), Shape{N, H0});
    } else {
      per_point = ops::index_select(tape, per_prog, 0, in.shared_row);
    }
    NodeId sched = ops::linear(tape, ops::concat(tape, {sched_in, tags}, 1), w_sched, b0);
    h = ops::add(tape, sched, per_point);
  } else {
    const NodeId expr_h = expression_embedding(tape, in);
    NodeId expr_pt = expr_h;
    if (!naive && C > 0)
      expr_pt = ops::reshape(
          tape,
          ops::index_select(tape, ops::reshape(tape, expr_h, Shape{P, C * Ex}), 0, prog_index),
          Shape{N, Ex});
    else if (!naive)
      expr_pt = ops::index_select(tape, expr_h, 0, in.shared_row);
    const NodeId first = input_leaf(tape, in, InputLeaf::First);
    const NodeId third = input_leaf(tape, in, InputLeaf::Third);
    // 3. z0 = [first 33 | tags Dt | third 813 | expr Ex]
    const NodeId z0 = ops::concat(tape, {first, tags, third, expr_pt}, 1);
    h = ops::linear(tape, z0, w0, b0);
  }
  // 4. computation MLP: (Linear → ELU → Dropout(drops[i])) × n
  h = ops::dropout(tape, ops::elu(tape, h), cfg_.drops[0], rng);
  for (size_t i = 1; i < cfg_.comp_embed_layer_sizes.size(); ++i)
    h = dense(tape, h, "comp_embedding_layers", int(i), cfg_.drops[i], rng);
  return h;  // [N, E], row b·C + c
}

template <class T>
NodeId CostModel<T>::encoder_features(Tape<T>& tape, const data::BatchTensors& bt,
                                      const data::BatchLayout& lay, Rng& rng) {
  const int64_t N = lay.comp_rows();
  const int W = data::kCompVectorWidth, X = data::kMaxExprLen * data::kExprNodeWidth;
  const float* comp = bt.comp.data();
  std::vector<int64_t> expr_row(static_cast<size_t>(N));  // row r's program expression row
  for (int64_t b = 0; b < bt.batch; ++b)
    for (int64_t r = lay.comp_row[size_t(b)], e = lay.expr_row[size_t(bt.program_of[size_t(b)])];
         r < lay.comp_row[size_t(b + 1)]; ++r, ++e)
      expr_row[size_t(r)] = e;
  auto expr_of = [&](int64_t r) { return bt.expr.data() + expr_row[size_t(r)] * X; };
  const bool dropout = !encoder_frozen_;
  if (cfg_.encoder.kind == EncoderKind::CompVector) {
    // §8.1: the thresholded 1636-vector of every computation row through the encoder → [N, 350]
    std::vector<float> rows(size_t(N * kCompAeInputWidth));
    for (int64_t r = 0; r < N; ++r)
      comp_vector_ae_input(comp + r * W, expr_of(r), &rows[size_t(r * kCompAeInputWidth)]);
    return encode(tape, store_, cfg_.encoder, rows.data(), N, dropout, rng);
  }
  // §8.2: [columns 0–206 | encoded access sequence | raw expression] → [N, 1573]; the encoder
  // runs once per distinct access sequence (schedule-independent: once per program computation)
  std::vector<float> rows(size_t(N * kAccessInputWidth));
  for (int64_t r = 0; r < N; ++r)
    access_ae_input(comp + r * W, &rows[size_t(r * kAccessInputWidth)]);
  const NodeId enc = encode(tape, store_, cfg_.encoder, rows.data(), N, dropout, rng);
  const NodeId raw = make_input(tape, Shape{N, kEncoderRawColumns}, [&](T* o) {
    for (int64_t r = 0; r < N; ++r)
      for (int j = 0; j < kEncoderRawColumns; ++j)
        o[r * kEncoderRawColumns + j] = T(comp[r * W + j]);
  });
  const NodeId expr = make_input(tape, Shape{N, X}, [&](T* o) {
    for (int64_t r = 0; r < N; ++r) {
      const float* e = expr_of(r);
      for (int j = 0; j < X; ++j) o[r * X + j] = T(e[j]);
    }
  });
  return ops::concat(tape, {raw, enc, expr}, 1);
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
  const int LW = cfg_.loops_tensor_size;
  const NodeId X = comp_embeddings(tape, bt, lay, rng, false);  // [Σ C_b, E]
  const NodeId loops = make_input(tape, Shape{lay.loop_rows(), LW}, [&](T* o) {
    for (int64_t i = 0; i < lay.loop_rows() * LW; ++i) o[i] = T(bt.loops[size_t(i)]);
  });
  return walk_tree(tape, trees, lay.segments, X, loops, rng);
}

template <class T>
NodeId CostModel<T>::forward(Tape<T>& tape, const data::BatchTrees& trees,
                             const ForwardInputs<T>& in, Rng& rng) {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::forward: prepared inputs are not available with a pre-trained encoder");
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
  if (trees.size() != in.segments.size())
    bad(std::to_string(trees.size()) + " trees for " + std::to_string(in.segments.size()) +
        " segments");
  for (size_t s = 0; s < trees.size(); ++s) {  // the trees must be the batch's
    if (!trees[s]) bad("segment " + std::to_string(s) + " has no tree");
    check_tree(*trees[s], in.segments[s].n_comps, in.segments[s].n_loops);
  }
  const NodeId X = embed_computations(tape, in, rng);  // [Σ C_b, E]
  const NodeId loops = input_leaf(tape, in, InputLeaf::Loops);
  return walk_tree(tape, trees, in.segments, X, loops, rng);
}

template <class T>
NodeId CostModel<T>::walk_tree(Tape<T>& tape, const data::BatchTrees& trees,
                               const std::vector<data::BatchSegment>& segs, NodeId X, NodeId loops,
                               Rng& rng) {
  // The union of the segments' trees, walked as one: a node is (segment s, tree node v) with the
  // segment's B_s datapoints; LSTM calls group nodes by sequence length across segments.
  const size_t S = segs.size();
  const int64_t E = cfg_.embed_size();
  const int LW = cfg_.loops_tensor_size;
  const LstmSpec tree_spec{int(E), int(E), 1, false};
  const NodeId no_comps = tape.param(store_.at("no_comps_tensor"));
  const NodeId no_nodes = tape.param(store_.at("no_nodes_tensor"));
  std::vector<TreeLevels> tl(S);
  std::vector<int64_t> x_base(S), l_base(S), node_base(S + 1, 0);
  size_t max_levels = 0;
  for (size_t s = 0, x = 0, l = 0; s < S; ++s) {
    tl[s] = tree_levels(*trees[s]);
    max_levels = std::max(max_levels, tl[s].levels.size());
    x_base[s] = int64_t(x), l_base[s] = int64_t(l);
    x += size_t(segs[s].points * segs[s].n_comps);
    l += size_t(segs[s].points * segs[s].n_loops);
    node_base[s + 1] = node_base[s] + int64_t(trees[s]->nodes.size());
  }
  if (tape.shape(loops)[0] != (S ? l_base[S - 1] + segs[S - 1].points * segs[S - 1].n_loops : 0))
    bad("walk_tree: loop rows disagree with the segments");
  struct Loc {
    int32_t src = -1;  // index into the sources vector of the gather that reads it
    int64_t base = 0;  // row of datapoint 0 (datapoint b: base + b)
  };
  struct Entry {  // one (segment, tree node)
    size_t s;
    int v;
  };
  auto flat = [&](size_t s, int v) { return size_t(node_base[s] + v); };

  // comps_lstm for every loop node with computations, one call per computation count m
  std::vector<NodeId> comp_sources{no_comps};  // source 0: no_comps_tensor (row 0)
  std::vector<Loc> comp_loc(size_t(node_base[S]), Loc{0, 0});
  {
    std::map<size_t, std::vector<Entry>> by_m;
    for (size_t s = 0; s < S; ++s)
      for (size_t v = 0; v < trees[s]->nodes.size(); ++v)
        if (tl[s].height[v] >= 0 && !trees[s]->nodes[v].comp_indices.empty())
          by_m[trees[s]->nodes[v].comp_indices.size()].push_back({s, int(v)});
    if (!by_m.empty()) {
      const auto cw = lstm_weight_nodes(tape, store_, "comps_lstm", tree_spec);
      for (const auto& [m, group] : by_m) {
        int64_t seqs = 0;
        for (const Entry& e : group) seqs += segs[e.s].points;
        std::vector<int32_t> src(size_t(seqs * int64_t(m)), 0);
        std::vector<int64_t> rows(src.size());
        std::vector<int64_t> first(group.size());
        int64_t at = 0;
        for (size_t g = 0; g < group.size(); ++g) {
          const Entry& e = group[g];
          const auto& ci = trees[e.s]->nodes[size_t(e.v)].comp_indices;
          const int64_t C = segs[e.s].n_comps;
          first[g] = at;
          for (int64_t b = 0; b < segs[e.s].points; ++b, ++at)
            for (size_t i = 0; i < m; ++i)
              rows[size_t(at * int64_t(m) + int64_t(i))] = x_base[e.s] + b * C + ci[i];
        }
        const NodeId seq = ops::gather_rows(tape, {X}, E, src, rows, Shape{seqs, int64_t(m), E});
        const NodeId hn = ops::lstm(tape, seq, tree_spec, cw).h_n;  // [1, seqs, E]
        comp_sources.push_back(hn);
        for (size_t g = 0; g < group.size(); ++g)
          comp_loc[flat(group[g].s, group[g].v)] = Loc{int32_t(comp_sources.size() - 1), first[g]};
      }
    }
  }

  // the trees by height, leaves first (level h holds every segment's nodes of height h)
  std::vector<NodeId> emb_sources;  // level outputs [rows of the level, E]
  std::vector<Loc> emb_loc(size_t(node_base[S]));
  std::vector<LstmWeights> nw;
  for (size_t h = 0; h < max_levels; ++h) {
    std::vector<Entry> level;
    for (size_t s = 0; s < S; ++s)
      if (h < tl[s].levels.size())
        for (int v : tl[s].levels[h]) level.push_back({s, v});
    const size_t n = level.size();
    std::vector<int64_t> first(n + 1, 0);  // first row of each entry in the level's output
    for (size_t j = 0; j < n; ++j) first[j + 1] = first[j] + segs[level[j].s].points;
    const int64_t rows_n = first[n];
    // nodes_lstm, one call per child count k
    std::vector<NodeId> node_sources{no_nodes};
    std::vector<Loc> node_loc(n, Loc{0, 0});
    std::map<size_t, std::vector<size_t>> by_k;  // k → positions in level
    for (size_t j = 0; j < n; ++j) {
      const size_t k = trees[level[j].s]->nodes[size_t(level[j].v)].children.size();
      if (k) by_k[k].push_back(j);
    }
    for (const auto& [k, group] : by_k) {
      if (nw.empty()) nw = lstm_weight_nodes(tape, store_, "nodes_lstm", tree_spec);
      int64_t seqs = 0;
      for (size_t j : group) seqs += segs[level[j].s].points;
      std::vector<int32_t> src(size_t(seqs * int64_t(k)));
      std::vector<int64_t> rows(src.size());
      std::vector<int64_t> seq_first(group.size());
      int64_t at = 0;
      for (size_t g = 0; g < group.size(); ++g) {
        const Entry& e = level[group[g]];
        const auto& ch = trees[e.s]->nodes[size_t(e.v)].children;
        seq_first[g] = at;
        for (int64_t b = 0; b < segs[e.s].points; ++b, ++at)
          for (size_t i = 0; i < k; ++i) {
            const Loc& l = emb_loc[flat(e.s, ch[i])];
            const size_t idx = size_t(at * int64_t(k) + int64_t(i));
            src[idx] = l.src;
            rows[idx] = l.base + b;
          }
      }
      const NodeId seq =
          ops::gather_rows(tape, emb_sources, E, src, rows, Shape{seqs, int64_t(k), E});
      node_sources.push_back(ops::lstm(tape, seq, tree_spec, nw).h_n);
      for (size_t g = 0; g < group.size(); ++g)
        node_loc[group[g]] = Loc{int32_t(node_sources.size() - 1), seq_first[g]};
    }
    // [H_nodes | H_comps | loop vector] for every (node, datapoint) of the level
    const size_t R = static_cast<size_t>(rows_n);
    std::vector<int32_t> ns(R), cs_(R), ls(R, 0);
    std::vector<int64_t> nr(R), cr(R), lr(R);
    for (size_t j = 0; j < n; ++j) {
      const Entry& e = level[j];
      const Loc a = node_loc[j], c = comp_loc[flat(e.s, e.v)];
      const int64_t loop = trees[e.s]->nodes[size_t(e.v)].loop_index, L = segs[e.s].n_loops;
      for (int64_t b = 0; b < segs[e.s].points; ++b) {
        const size_t at = size_t(first[j] + b);
        ns[at] = a.src;
        nr[at] = a.src == 0 ? 0 : a.base + b;
        cs_[at] = c.src;
        cr[at] = c.src == 0 ? 0 : c.base + b;
        lr[at] = l_base[e.s] + b * L + loop;
      }
    }
    const NodeId hn = ops::gather_rows(tape, node_sources, E, ns, nr, Shape{rows_n, E});
    const NodeId hc = ops::gather_rows(tape, comp_sources, E, cs_, cr, Shape{rows_n, E});
    const NodeId lv = ops::gather_rows(tape, {loops}, LW, ls, lr, Shape{rows_n, int64_t(LW)});
    NodeId y = ops::concat(tape, {hn, hc, lv}, 1);
    for (int i = 0; i < 2; ++i) y = dense(tape, y, "concat_layers", i, cfg_.drops[size_t(i)], rng);
    emb_sources.push_back(y);
    for (size_t j = 0; j < n; ++j)
      emb_loc[flat(level[j].s, level[j].v)] = Loc{int32_t(emb_sources.size() - 1), first[j]};
  }

  // roots → roots_lstm (always; one call per root count R) → head
  std::map<size_t, std::vector<size_t>> by_r;  // R → segments
  int64_t B = 0;
  for (size_t s = 0; s < S; ++s) {
    by_r[trees[s]->roots.size()].push_back(s);
    B += segs[s].points;
  }
  const auto rw = lstm_weight_nodes(tape, store_, "roots_lstm", tree_spec);
  std::vector<NodeId> root_sources;
  std::vector<Loc> root_loc(S);  // where segment s's datapoint 0 is in root_sources
  for (const auto& [R, group] : by_r) {
    int64_t seqs = 0;
    for (size_t s : group) seqs += segs[s].points;
    std::vector<int32_t> src(size_t(seqs * int64_t(R)));
    std::vector<int64_t> rows(src.size());
    int64_t at = 0;
    for (size_t s : group) {
      root_loc[s] = Loc{int32_t(root_sources.size()), at};
      const auto& roots = trees[s]->roots;
      for (int64_t b = 0; b < segs[s].points; ++b, ++at)
        for (size_t r = 0; r < R; ++r) {
          const Loc& l = emb_loc[flat(s, roots[r])];
          src[size_t(at * int64_t(R) + int64_t(r))] = l.src;
          rows[size_t(at * int64_t(R) + int64_t(r))] = l.base + b;
        }
    }
    const NodeId seq =
        ops::gather_rows(tape, emb_sources, E, src, rows, Shape{seqs, int64_t(R), E});
    root_sources.push_back(
        ops::reshape(tape, ops::lstm(tape, seq, tree_spec, rw).h_n, Shape{seqs, E}));
  }
  NodeId hr = root_sources[0];
  if (by_r.size() > 1) {  // back to datapoint order
    std::vector<int32_t> src(static_cast<size_t>(B));
    std::vector<int64_t> rows(static_cast<size_t>(B));
    int64_t at = 0;
    for (size_t s = 0; s < S; ++s)
      for (int64_t b = 0; b < segs[s].points; ++b, ++at) {
        src[size_t(at)] = root_loc[s].src;
        rows[size_t(at)] = root_loc[s].base + b;
      }
    hr = ops::gather_rows(tape, root_sources, E, src, rows, Shape{B, E});
  }
  return head(tape, hr, B, rng);
}

template <class T>
NodeId CostModel<T>::forward_naive(Tape<T>& tape, const data::BatchTrees& trees,
                                   const data::BatchTensors& bt, Rng& rng) {
  const data::BatchLayout lay = check_batch(trees, bt);
  if (lay.segments.size() > 1) {  // each segment on its own, predictions in datapoint order
    std::vector<NodeId> parts;
    for (size_t s = 0; s < lay.segments.size(); ++s)
      parts.push_back(forward_naive(tape, {trees[s]}, segment_batch(bt, lay, s), rng));
    return ops::concat(tape, parts, 0);
  }
  const data::ProgramTree& tree = *trees[0];
  const int64_t B = bt.batch, C = lay.segments[0].n_comps, L = lay.segments[0].n_loops,
                E = cfg_.embed_size();
  const int LW = cfg_.loops_tensor_size;
  const NodeId X = ops::reshape(tape, comp_embeddings(tape, bt, lay, rng, true), Shape{B, C, E});
  const LstmSpec spec{int(E), int(E), 1, false};
  const NodeId lp = make_input(tape, Shape{B, L, LW}, [&](T* o) {
    for (int64_t i = 0; i < B * L * LW; ++i) o[i] = T(bt.loops[size_t(i)]);
  });
  // 5. NodeEmb(n), recursively (children first), batch B at every node
  std::function<NodeId(int)> node_emb = [&](int v) -> NodeId {
    const data::TreeNode& nd = tree.nodes[size_t(v)];
    NodeId hn, hc;
    if (!nd.children.empty()) {
      std::vector<NodeId> ch;
      for (int c : nd.children) ch.push_back(node_emb(c));
      const NodeId seq = ops::stack(tape, ch, 1);  // [B, k, E]
      hn = ops::lstm(tape, seq, spec, lstm_weight_nodes(tape, store_, "nodes_lstm", spec)).h_n;
      hn = ops::reshape(tape, hn, Shape{B, E});
    } else {
      hn = ops::broadcast_rows(tape, tape.param(store_.at("no_nodes_tensor")), B);
    }
    if (!nd.comp_indices.empty()) {
      const std::vector<int64_t> idx(nd.comp_indices.begin(), nd.comp_indices.end());
      const NodeId seq = ops::index_select(tape, X, 1, idx);  // [B, m, E]
      hc = ops::lstm(tape, seq, spec, lstm_weight_nodes(tape, store_, "comps_lstm", spec)).h_n;
      hc = ops::reshape(tape, hc, Shape{B, E});
    } else {
      hc = ops::broadcast_rows(tape, tape.param(store_.at("no_comps_tensor")), B);
    }
    const NodeId l =
        ops::reshape(tape, ops::slice(tape, lp, 1, nd.loop_index, 1), Shape{B, int64_t(LW)});
    NodeId y = ops::concat(tape, {hn, hc, l}, 1);
    for (int i = 0; i < 2; ++i) y = dense(tape, y, "concat_layers", i, cfg_.drops[size_t(i)], rng);
    return y;  // [B, E]
  };
  std::vector<NodeId> roots;
  for (int r : tree.roots) roots.push_back(node_emb(r));
  // 6. roots_lstm over the stacked roots (always run)
  const NodeId seq = ops::stack(tape, roots, 1);  // [B, R, E]
  const NodeId hr =
      ops::lstm(tape, seq, spec, lstm_weight_nodes(tape, store_, "roots_lstm", spec)).h_n;
  return head(tape, ops::reshape(tape, hr, Shape{B, E}), B, rng);
}

template class CostModel<float>;
template class CostModel<double>;

}  // namespace lcm::model
