// The LOOPer cost model (docs/model-spec.md §5): parameter creation/initialisation, the
// level-batched forward pass with program-level sharing, and the node-by-node reference forward
// used by tests. Both forwards are built from engine ops plus one model-local op, gather_rows
// (multi-source row gather).
#include "model/cost_model.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

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

/// y: `out` shape with rows of width `width`; output row r = row rows[r] of sources[src[r]]
/// (each source viewed as [numel / width, width]). Backward scatter-adds each output row's
/// gradient into its source row (sequential, deterministic). A model-local op: it lets a tree
/// level pick its children's embeddings from several earlier level outputs in one copy.
template <class T>
NodeId gather_rows(Tape<T>& t, const std::vector<NodeId>& sources, int64_t width,
                   std::vector<int32_t> src, std::vector<int64_t> rows, Shape out) {
  if (src.size() != rows.size() || out.numel() != int64_t(rows.size()) * width)
    bad("gather_rows: " + std::to_string(rows.size()) + " rows of width " + std::to_string(width) +
        " do not fill " + out.str());
  std::vector<const T*> sp(sources.size());
  std::vector<int64_t> sn(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    const int64_t n = t.value(sources[s]).numel();
    if (n % width != 0)
      bad("gather_rows: source " + t.shape(sources[s]).str() + " not of width " +
          std::to_string(width));
    sp[s] = t.value(sources[s]).data;
    sn[s] = n / width;
  }
  for (size_t r = 0; r < rows.size(); ++r)
    if (src[r] < 0 || size_t(src[r]) >= sources.size() || rows[r] < 0 ||
        rows[r] >= sn[size_t(src[r])])
      bad("gather_rows: row " + std::to_string(r) + " points outside its source");
  if (t.device() != Device::CPU) {
    // CUDA tape: the sources stacked as rows (concat) and one index_select of the wanted rows, both
    // with CUDA kernels and a deterministic backward (engine/ops/cuda_ops.cpp).
    std::vector<NodeId> parts;
    std::vector<int64_t> first(sources.size(), 0), index(rows.size());
    int64_t total = 0;
    for (size_t s = 0; s < sources.size(); ++s) {
      first[s] = total;
      total += sn[s];
      parts.push_back(ops::reshape(t, sources[s], Shape{sn[s], width}));
    }
    for (size_t r = 0; r < rows.size(); ++r) index[r] = first[size_t(src[r])] + rows[r];
    const NodeId all = parts.size() == 1 ? parts[0] : ops::concat(t, parts, 0);
    return ops::reshape(t, ops::index_select(t, all, 0, index), out);
  }
  const NodeId y = t.new_node(out, "gather_rows", sources);
  T* yp = t.value(y).data;
  const int64_t R = int64_t(rows.size());
#pragma omp parallel for schedule(static) if (R * width >= (1 << 16))
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(yp + r * width, sp[size_t(src[size_t(r)])] + rows[size_t(r)] * width,
                size_t(width) * sizeof(T));
  if (t.requires_grad(y)) {
    t.set_backward(y, [sources, width, src = std::move(src), rows = std::move(rows)](Tape<T>& tp,
                                                                                     NodeId self) {
      std::vector<T*> g(sources.size());
      for (size_t s = 0; s < sources.size(); ++s) g[s] = tp.grad_acc(sources[s]);
      const T* gy = tp.grad_acc(self);
      for (size_t r = 0; r < rows.size(); ++r) {
        T* dst = g[size_t(src[r])];
        if (!dst) continue;
        dst += rows[r] * width;
        const T* s = gy + int64_t(r) * width;
        for (int64_t i = 0; i < width; ++i) dst[i] += s[i];
      }
    });
  }
  return y;
}

/// y[r, j] = x[r, cols[j]] for a 2-D x [R, K] (a column subset of a weight matrix); backward
/// dX[r, cols[j]] += dY[r, j]. Model-local: index_select along the last dim copies element by
/// element through memcpy, which is slow for the 600×1146 first-layer weight.
template <class T>
NodeId select_columns(Tape<T>& t, NodeId x, std::vector<int64_t> cols) {
  const Shape xs = t.shape(x);
  if (xs.rank != 2) bad("select_columns: expected a matrix, got " + xs.str());
  const int64_t R = xs[0], K = xs[1], M = int64_t(cols.size());
  for (int64_t c : cols)
    if (c < 0 || c >= K)
      bad("select_columns: column " + std::to_string(c) + " outside " + xs.str());
  if (t.device() != Device::CPU) return ops::index_select(t, x, 1, cols);  // CUDA: gather kernel
  const NodeId y = t.new_node(Shape{R, M}, "select_columns", {x});
  const T* xp = t.value(x).data;
  T* yp = t.value(y).data;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < M; ++j) yp[r * M + j] = xp[r * K + cols[size_t(j)]];
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, R, K, M, cols = std::move(cols)](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T* gy = tp.grad_acc(self);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < M; ++j) gx[r * K + cols[size_t(j)]] += gy[r * M + j];
    });
  }
  return y;
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

}  // namespace

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
  if (encoder.kind != EncoderKind::None) {
    try {
      encoder.comp.validate();
      encoder.access.validate();
    } catch (const std::invalid_argument& e) {
      fail(std::string("encoder: ") + e.what());
    }
  }
}

void check_batch(const data::ProgramTree& tree, const data::BatchTensors& bt) {
  const int64_t B = bt.batch, C = bt.n_comps, L = bt.n_loops;
  if (B < 1 || C < 1 || L < 1)
    bad("batch needs B, C, L >= 1, got B=" + std::to_string(B) + " C=" + std::to_string(C) +
        " L=" + std::to_string(L));
  if (int64_t(bt.comp.size()) != B * C * data::kCompVectorWidth) bad("comp is not [B, C, 910]");
  if (int64_t(bt.loops.size()) != B * L * data::kLoopVectorWidth) bad("loops is not [B, L, 8]");
  if (int64_t(bt.program_of.size()) != B) bad("program_of is not [B]");
  const int64_t P = int64_t(bt.programs.size());
  if (P < 1) bad("no programs in the batch");
  if (int64_t(bt.expr.size()) != P * C * data::kMaxExprLen * data::kExprNodeWidth)
    bad("expr is not [P, C, 66, 11] with P = " + std::to_string(P));
  for (int32_t p : bt.program_of)
    if (p < 0 || p >= P)
      bad("program_of entry " + std::to_string(p) + " outside [0, " + std::to_string(P) + ")");
  if (!bt.speedup.empty() && int64_t(bt.speedup.size()) != B)
    bad("speedup is neither empty nor [B]");
  if (tree.roots.empty()) bad("tree has no roots");
  for (const auto& nd : tree.nodes) {
    if (nd.loop_index < 0 || nd.loop_index >= L)
      bad("loop_index " + std::to_string(nd.loop_index) + " outside [0, " + std::to_string(L) +
          ")");
    for (int c : nd.comp_indices)
      if (c < 0 || c >= C)
        bad("computation index " + std::to_string(c) + " outside [0, " + std::to_string(C) + ")");
  }
  tree_levels(tree);  // throws on a bad shape
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
NodeId CostModel<T>::comp_embeddings(Tape<T>& tape, const data::BatchTensors& bt, Rng& rng,
                                     bool naive) {
  if (cfg_.encoder.kind != EncoderKind::None) {  // model-spec §8: encoder features → the same MLP
    NodeId h = ops::linear_elu(tape, encoder_features(tape, bt, rng),
                               tape.param(store_.at("comp_embedding_layers.0.weight")),
                               tape.param(store_.at("comp_embedding_layers.0.bias")));
    h = ops::dropout(tape, h, cfg_.drops[0], rng);
    for (size_t i = 1; i < cfg_.comp_embed_layer_sizes.size(); ++i)
      h = dense(tape, h, "comp_embedding_layers", int(i), cfg_.drops[i], rng);
    return h;  // [N, E]
  }

  return embed_computations(tape, prepare(bt, naive), rng);
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare(const data::BatchTensors& bt, bool naive) const {
  const int64_t B = bt.batch, C = bt.n_comps, L = bt.n_loops, N = B * C,
                P = int64_t(bt.programs.size());
  const int W = data::kCompVectorWidth;
  const float* comp = bt.comp.data();
  constexpr int kSteps = data::kMaxExprLen, kNode = data::kExprNodeWidth;
  ForwardInputs<T> in;
  in.batch = B, in.n_comps = C, in.n_loops = L, in.n_programs = P, in.naive = naive;
  in.program_of.assign(bt.program_of.begin(), bt.program_of.end());
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
  const int64_t expr_rows = naive ? N : P * C;
  place(InputLeaf::Expr, Shape{expr_rows, kSteps, kNode});

  // Can the first layer's static columns be evaluated once per program?
  std::vector<int64_t> rep(size_t(P), -1);  // first datapoint of each program
  for (int64_t b = 0; b < B; ++b)
    if (rep[size_t(bt.program_of[size_t(b)])] < 0) rep[size_t(bt.program_of[size_t(b)])] = b;
  const ColumnSplit& cs = column_split();
  bool share = !naive && cfg_.share_static_columns && P < B;
  for (int64_t p = 0; share && p < P; ++p) share = rep[size_t(p)] >= 0;
  for (int64_t b = 0; share && b < B; ++b) {
    const float* x = comp + b * C * W;
    const float* r = comp + rep[size_t(bt.program_of[size_t(b)])] * C * W;
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
  if (share) {
    place(InputLeaf::Static, Shape{P * C, Zs});
    place(InputLeaf::Sched, Shape{N, D});
  } else {
    place(InputLeaf::First, Shape{N, kFirstWidth});
    place(InputLeaf::Third, Shape{N, kThirdWidth});
  }
  place(InputLeaf::Loops, Shape{B * L, int64_t(data::kLoopVectorWidth)});

  in.host.assign(size_t(in.total), T(0));
  auto at = [&](InputLeaf l) { return in.host.data() + in.offset(l); };
  {
    T* o = at(InputLeaf::Tags);
    for (int64_t u = 0; u < U; ++u)
      for (int j = 0; j < kTagValues; ++j)
        o[u * kTagValues + j] = T(comp[tag_rows[size_t(u)] * W + kTagsStart + j]);
  }
  {
    T* o = at(InputLeaf::Expr);
    const int64_t per = C * kSteps * kNode;
    if (naive) {
      for (int64_t b = 0; b < B; ++b) {
        const float* src = bt.expr.data() + int64_t(bt.program_of[size_t(b)]) * per;
        for (int64_t i = 0; i < per; ++i) o[b * per + i] = T(src[i]);
      }
    } else {
      for (int64_t i = 0; i < P * per; ++i) o[i] = T(bt.expr[size_t(i)]);
    }
  }
  if (share) {
    T* o = at(InputLeaf::Static);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < C; ++c) {
        const float* x = comp + (rep[size_t(p)] * C + c) * W;
        T* dst = o + (p * C + c) * Zs;  // zero-filled above
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
    for (int64_t i = 0; i < B * L * LW; ++i) o[i] = T(bt.loops[size_t(i)]);
  }
  return in;
}

template <class T>
ForwardInputs<T> CostModel<T>::prepare_inputs(const data::ProgramTree& tree,
                                              const data::BatchTensors& bt) const {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::prepare_inputs: not available for a model with a pre-trained encoder "
        "(model.encoder); use forward(tape, tree, bt, rng)");
  check_batch(tree, bt);  // also the tree's shape (roots, cycles)
  return prepare(bt, false);
}

template <class T>
NodeId CostModel<T>::embed_computations(Tape<T>& tape, const ForwardInputs<T>& in, Rng& rng) {
  const int64_t B = in.batch, C = in.n_comps, N = B * C, P = in.n_programs;
  const int Dt = 2 * cfg_.lstm_embedding_size, Ex = cfg_.expr_embed_size;
  constexpr int kNode = data::kExprNodeWidth;
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

  // 1. expression embedding: per datapoint (naive) or per program
  const LstmSpec expr_spec{kNode, Ex, 1, false};
  const auto expr_w = lstm_weight_nodes(tape, store_, "exprs_embed", expr_spec);
  const int64_t expr_rows = in.shape(InputLeaf::Expr)[0];
  const NodeId expr_in = input_leaf(tape, in, InputLeaf::Expr);
  const NodeId expr_h =
      ops::reshape(tape, ops::lstm(tape, expr_in, expr_spec, expr_w).h_n, Shape{expr_rows, Ex});

  const NodeId w0 = tape.param(store_.at("comp_embedding_layers.0.weight"));
  const NodeId b0 = tape.param(store_.at("comp_embedding_layers.0.bias"));
  const std::vector<int64_t>& prog_index = in.program_of;
  const ColumnSplit& cs = column_split();

  NodeId h;
  const int64_t H0 = cfg_.comp_embed_layer_sizes[0];
  if (in.share_static) {
    // Static part: each program's z0 row with the schedule columns (and tags) left at zero,
    // against the whole first-layer weight. The few P·C rows cost less than gathering the 864
    // static columns of the 600×1146 weight on every call (and scatter-adding their gradient),
    // and one row runs as a matrix-vector product that reads the weight in place.
    std::vector<int64_t> wcols_sched;
    for (int c : cs.sched_cols) wcols_sched.push_back(z0_column(c, Dt));
    for (int j = 0; j < Dt; ++j) wcols_sched.push_back(kFirstWidth + j);
    const NodeId static_in = input_leaf(tape, in, InputLeaf::Static);
    const NodeId sched_in = input_leaf(tape, in, InputLeaf::Sched);
    const NodeId w_sched = select_columns(tape, w0, std::move(wcols_sched));
    NodeId per_prog =
        ops::linear(tape, ops::concat(tape, {static_in, expr_h}, 1), w0);  // [P·C, H0]
    per_prog = ops::reshape(tape, per_prog, Shape{P, C * H0});
    NodeId per_point =
        ops::reshape(tape, ops::index_select(tape, per_prog, 0, prog_index), Shape{N, H0});
    NodeId sched = ops::linear(tape, ops::concat(tape, {sched_in, tags}, 1), w_sched, b0);
    h = ops::add(tape, sched, per_point);
  } else {
    NodeId expr_pt = expr_h;
    if (!naive)
      expr_pt = ops::reshape(
          tape,
          ops::index_select(tape, ops::reshape(tape, expr_h, Shape{P, C * Ex}), 0, prog_index),
          Shape{N, Ex});
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
NodeId CostModel<T>::encoder_features(Tape<T>& tape, const data::BatchTensors& bt, Rng& rng) {
  const int64_t B = bt.batch, C = bt.n_comps, N = B * C;
  const int W = data::kCompVectorWidth, X = data::kMaxExprLen * data::kExprNodeWidth;
  const float* comp = bt.comp.data();
  auto expr_of = [&](int64_t r) {
    return bt.expr.data() + (int64_t(bt.program_of[size_t(r / C)]) * C + r % C) * X;
  };
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
NodeId CostModel<T>::forward(Tape<T>& tape, const data::ProgramTree& tree,
                             const data::BatchTensors& bt, Rng& rng) {
  if (cfg_.encoder.kind == EncoderKind::None)
    return forward(tape, tree, prepare_inputs(tree, bt), rng);
  check_batch(tree, bt);
  const int64_t B = bt.batch, L = bt.n_loops;
  const int LW = cfg_.loops_tensor_size;
  const NodeId X = comp_embeddings(tape, bt, rng, false);  // [B·C, E]
  const NodeId loops = make_input(tape, Shape{B * L, LW}, [&](T* o) {
    for (int64_t i = 0; i < B * L * LW; ++i) o[i] = T(bt.loops[size_t(i)]);
  });
  return walk_tree(tape, tree, X, loops, B, bt.n_comps, rng);
}

template <class T>
NodeId CostModel<T>::forward(Tape<T>& tape, const data::ProgramTree& tree,
                             const ForwardInputs<T>& in, Rng& rng) {
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::forward: prepared inputs are not available with a pre-trained encoder");
  if (in.naive) bad("forward: inputs prepared for the naive forward");
  if (in.batch < 1 || in.n_comps < 1 || in.n_loops < 1 || int64_t(in.program_of.size()) != in.batch)
    bad("forward: prepared inputs with bad sizes");
  if (tree.roots.empty()) bad("tree has no roots");
  for (const auto& nd : tree.nodes) {  // the tree must be the batch's (check_batch's tree part)
    if (nd.loop_index < 0 || nd.loop_index >= in.n_loops)
      bad("loop_index " + std::to_string(nd.loop_index) + " outside [0, " +
          std::to_string(in.n_loops) + ")");
    for (int c : nd.comp_indices)
      if (c < 0 || c >= in.n_comps)
        bad("computation index " + std::to_string(c) + " outside [0, " +
            std::to_string(in.n_comps) + ")");
  }
  const NodeId X = embed_computations(tape, in, rng);  // [B·C, E]
  const NodeId loops = input_leaf(tape, in, InputLeaf::Loops);
  return walk_tree(tape, tree, X, loops, in.batch, in.n_comps, rng);
}

template <class T>
NodeId CostModel<T>::walk_tree(Tape<T>& tape, const data::ProgramTree& tree, NodeId X, NodeId loops,
                               int64_t B, int64_t C, Rng& rng) {
  const TreeLevels tl = tree_levels(tree);
  const int64_t L = tape.shape(loops)[0] / B, E = cfg_.embed_size();
  const int LW = cfg_.loops_tensor_size;
  const LstmSpec tree_spec{int(E), int(E), 1, false};
  const NodeId no_comps = tape.param(store_.at("no_comps_tensor"));
  const NodeId no_nodes = tape.param(store_.at("no_nodes_tensor"));
  const size_t n_nodes = tree.nodes.size();
  struct Loc {
    int32_t src = -1;  // index into the sources vector of the gather that reads it
    int64_t base = 0;  // row of datapoint 0 (datapoint b: base + b)
  };

  // comps_lstm for every loop node with computations, one call per computation count m
  std::vector<NodeId> comp_sources{no_comps};  // source 0: no_comps_tensor (row 0)
  std::vector<Loc> comp_loc(n_nodes, Loc{0, 0});
  {
    std::map<size_t, std::vector<int>> by_m;
    for (size_t v = 0; v < n_nodes; ++v)
      if (tl.height[v] >= 0 && !tree.nodes[v].comp_indices.empty())
        by_m[tree.nodes[v].comp_indices.size()].push_back(int(v));
    if (!by_m.empty()) {
      const auto cw = lstm_weight_nodes(tape, store_, "comps_lstm", tree_spec);
      for (const auto& [m, group] : by_m) {
        const int64_t G = int64_t(group.size());
        std::vector<int32_t> src(size_t(G * B * int64_t(m)), 0);
        std::vector<int64_t> rows(src.size());
        for (int64_t g = 0; g < G; ++g) {
          const auto& ci = tree.nodes[size_t(group[size_t(g)])].comp_indices;
          for (int64_t b = 0; b < B; ++b)
            for (size_t i = 0; i < m; ++i)
              rows[size_t((g * B + b) * int64_t(m) + int64_t(i))] = b * C + ci[i];
        }
        const NodeId seq =
            gather_rows(tape, {X}, E, std::move(src), std::move(rows), Shape{G * B, int64_t(m), E});
        const NodeId hn = ops::lstm(tape, seq, tree_spec, cw).h_n;  // [1, G·B, E]
        comp_sources.push_back(hn);
        for (int64_t g = 0; g < G; ++g)
          comp_loc[size_t(group[size_t(g)])] = Loc{int32_t(comp_sources.size() - 1), g * B};
      }
    }
  }

  // the tree by height, leaves first
  std::vector<NodeId> emb_sources;  // level outputs [n_level·B, E]
  std::vector<Loc> emb_loc(n_nodes);
  std::vector<LstmWeights> nw;
  for (const auto& level : tl.levels) {
    const int64_t n = int64_t(level.size());
    // nodes_lstm, one call per child count k
    std::vector<NodeId> node_sources{no_nodes};
    std::vector<Loc> node_loc(size_t(n), Loc{0, 0});
    std::map<size_t, std::vector<int64_t>> by_k;  // k → positions in level
    for (int64_t j = 0; j < n; ++j) {
      const size_t k = tree.nodes[size_t(level[size_t(j)])].children.size();
      if (k) by_k[k].push_back(j);
    }
    for (const auto& [k, group] : by_k) {
      if (nw.empty()) nw = lstm_weight_nodes(tape, store_, "nodes_lstm", tree_spec);
      const int64_t G = int64_t(group.size());
      std::vector<int32_t> src(size_t(G * B * int64_t(k)));
      std::vector<int64_t> rows(src.size());
      for (int64_t g = 0; g < G; ++g) {
        const auto& ch = tree.nodes[size_t(level[size_t(group[size_t(g)])])].children;
        for (int64_t b = 0; b < B; ++b)
          for (size_t i = 0; i < k; ++i) {
            const Loc& l = emb_loc[size_t(ch[i])];
            const size_t at = size_t((g * B + b) * int64_t(k) + int64_t(i));
            src[at] = l.src;
            rows[at] = l.base + b;
          }
      }
      const NodeId seq = gather_rows(tape, emb_sources, E, std::move(src), std::move(rows),
                                     Shape{G * B, int64_t(k), E});
      node_sources.push_back(ops::lstm(tape, seq, tree_spec, nw).h_n);
      for (int64_t g = 0; g < G; ++g)
        node_loc[size_t(group[size_t(g)])] = Loc{int32_t(node_sources.size() - 1), g * B};
    }
    // [H_nodes | H_comps | loop vector] for every (node, datapoint) of the level: row j·B + b
    std::vector<int32_t> ns(size_t(n * B)), cs_(size_t(n * B)), ls(size_t(n * B), 0);
    std::vector<int64_t> nr(size_t(n * B)), cr(size_t(n * B)), lr(size_t(n * B));
    for (int64_t j = 0; j < n; ++j) {
      const int v = level[size_t(j)];
      const Loc a = node_loc[size_t(j)], c = comp_loc[size_t(v)];
      const int64_t loop = tree.nodes[size_t(v)].loop_index;
      for (int64_t b = 0; b < B; ++b) {
        const size_t at = size_t(j * B + b);
        ns[at] = a.src;
        nr[at] = a.src == 0 ? 0 : a.base + b;
        cs_[at] = c.src;
        cr[at] = c.src == 0 ? 0 : c.base + b;
        lr[at] = b * L + loop;
      }
    }
    const NodeId hn =
        gather_rows(tape, node_sources, E, std::move(ns), std::move(nr), Shape{n * B, E});
    const NodeId hc =
        gather_rows(tape, comp_sources, E, std::move(cs_), std::move(cr), Shape{n * B, E});
    const NodeId lv =
        gather_rows(tape, {loops}, LW, std::move(ls), std::move(lr), Shape{n * B, int64_t(LW)});
    NodeId y = ops::concat(tape, {hn, hc, lv}, 1);
    for (int i = 0; i < 2; ++i) y = dense(tape, y, "concat_layers", i, cfg_.drops[size_t(i)], rng);
    emb_sources.push_back(y);
    for (int64_t j = 0; j < n; ++j)
      emb_loc[size_t(level[size_t(j)])] = Loc{int32_t(emb_sources.size() - 1), j * B};
  }

  // roots → roots_lstm (always) → head
  const int64_t R = int64_t(tree.roots.size());
  std::vector<int32_t> src(size_t(B * R));
  std::vector<int64_t> rows(size_t(B * R));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r) {
      const Loc& l = emb_loc[size_t(tree.roots[size_t(r)])];
      src[size_t(b * R + r)] = l.src;
      rows[size_t(b * R + r)] = l.base + b;
    }
  const NodeId roots =
      gather_rows(tape, emb_sources, E, std::move(src), std::move(rows), Shape{B, R, E});
  const NodeId hr =
      ops::lstm(tape, roots, tree_spec, lstm_weight_nodes(tape, store_, "roots_lstm", tree_spec))
          .h_n;
  return head(tape, ops::reshape(tape, hr, Shape{B, E}), B, rng);
}

template <class T>
NodeId CostModel<T>::forward_naive(Tape<T>& tape, const data::ProgramTree& tree,
                                   const data::BatchTensors& bt, Rng& rng) {
  check_batch(tree, bt);
  const int64_t B = bt.batch, C = bt.n_comps, L = bt.n_loops, E = cfg_.embed_size();
  const int LW = cfg_.loops_tensor_size;
  const NodeId X = ops::reshape(tape, comp_embeddings(tape, bt, rng, true), Shape{B, C, E});
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
