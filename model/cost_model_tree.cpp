// The cost model's tree part (docs/model-spec.md §5.4 steps 5–7): the level-batched walk over the
// union of a batch's trees, and the node-by-node reference recursion of forward_naive.
#include <functional>
#include <map>

#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "model/cost_model.hpp"
#include "model/cost_model_detail.hpp"

namespace lcm::model {

using detail::bad;
using detail::TreeLevels;

namespace {

/// Where a row lives among the sources of a gather.
struct Loc {
  int32_t src = -1;  // index into the sources vector of the gather that reads it
  int64_t base = 0;  // row of datapoint 0 (datapoint b: base + b)
};

/// One (segment, tree node).
struct Entry {
  size_t s;
  int v;
};

/// The (source, row) pairs of one gather: sequences of k items, entry e's points(e) datapoints in
/// order; item i of entry e's datapoint b is item(e, b, i) (a Loc holding the row itself).
struct SeqGather {
  int64_t seqs = 0;
  std::vector<int32_t> src;
  std::vector<int64_t> rows;
  std::vector<int64_t> first;  // each entry's first sequence
};

template <class Points, class Item>
SeqGather seq_gather(size_t entries, size_t k, Points points, Item item) {
  SeqGather g;
  for (size_t e = 0; e < entries; ++e) g.seqs += points(e);
  g.src.assign(size_t(g.seqs * int64_t(k)), 0);
  g.rows.resize(g.src.size());
  g.first.resize(entries);
  int64_t at = 0;
  for (size_t e = 0; e < entries; ++e) {
    g.first[e] = at;
    for (int64_t b = 0; b < points(e); ++b, ++at)
      for (size_t i = 0; i < k; ++i) {
        const Loc l = item(e, b, i);
        g.src[size_t(at * int64_t(k) + int64_t(i))] = l.src;
        g.rows[size_t(at * int64_t(k) + int64_t(i))] = l.base;
      }
  }
  return g;
}

/// Loc `l` of datapoint b (row 0 of source 0, the no_nodes/no_comps row, for every datapoint).
Loc of_point(const Loc& l, int64_t b) {
  return Loc{l.src, l.src == 0 ? 0 : l.base + b};
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

/// The level-batched walk's index of the union of the segments' trees (a node is (segment s,
/// tree node v) with the segment's B_s datapoints) and the LSTM outputs made so far.
template <class T>
struct CostModel<T>::TreeWalk {
  TreeWalk(const data::BatchTrees& t, const std::vector<data::BatchSegment>& sg, int64_t e)
      : trees(t), segs(sg), E(e), spec{int(e), int(e), 1, false} {
    const size_t S = segs.size();
    tl.resize(S);
    x_base.resize(S), l_base.resize(S), node_base.assign(S + 1, 0);
    for (size_t s = 0, x = 0, l = 0; s < S; ++s) {
      tl[s] = detail::tree_levels(*trees[s]);
      max_levels = std::max(max_levels, tl[s].levels.size());
      x_base[s] = int64_t(x), l_base[s] = int64_t(l);
      x += size_t(segs[s].points * segs[s].n_comps);
      l += size_t(segs[s].points * segs[s].n_loops);
      node_base[s + 1] = node_base[s] + int64_t(trees[s]->nodes.size());
      loop_rows = int64_t(l);
    }
  }
  size_t flat(size_t s, int v) const { return size_t(node_base[s] + v); }
  const data::TreeNode& node(size_t s, int v) const { return trees[s]->nodes[size_t(v)]; }
  int64_t points(size_t s) const { return segs[s].points; }
  /// h_n [1, g.seqs, E] of the tree LSTM `w` over the sequences gathered by `g` from `sources`.
  NodeId lstm(Tape<T>& tape, const std::vector<NodeId>& sources, const SeqGather& g, size_t k,
              const std::vector<LstmWeights>& w) const {
    const NodeId seq =
        ops::gather_rows(tape, sources, E, g.src, g.rows, Shape{g.seqs, int64_t(k), E});
    return ops::lstm(tape, seq, spec, w).h_n;
  }

  const data::BatchTrees& trees;
  const std::vector<data::BatchSegment>& segs;
  const int64_t E;
  const LstmSpec spec;
  std::vector<TreeLevels> tl;
  std::vector<int64_t> x_base, l_base, node_base;  // first computation/loop row, first node
  size_t max_levels = 0;
  int64_t loop_rows = 0;
  NodeId no_nodes = -1;
  std::vector<NodeId> comp_sources;  // source 0: no_comps_tensor (row 0), then comps_lstm calls
  std::vector<Loc> comp_loc;         // per node
  std::vector<NodeId> emb_sources;   // level outputs [rows of the level, E]
  std::vector<Loc> emb_loc;          // per node
  std::vector<LstmWeights> nw;       // nodes_lstm, made at the first node with children
};

template <class T>
NodeId CostModel<T>::walk_tree(Tape<T>& tape, const data::BatchTrees& trees,
                               const std::vector<data::BatchSegment>& segs, NodeId X, NodeId loops,
                               Rng& rng) {
  // The union of the segments' trees, walked as one; LSTM calls group nodes by sequence length
  // across segments.
  const NodeId no_comps = tape.param(store_.at("no_comps_tensor"));
  const NodeId no_nodes = tape.param(store_.at("no_nodes_tensor"));
  TreeWalk w(trees, segs, cfg_.embed_size());
  if (tape.shape(loops)[0] != w.loop_rows) bad("walk_tree: loop rows disagree with the segments");
  w.no_nodes = no_nodes;
  w.comp_sources = {no_comps};
  walk_computations(tape, w, X);
  // the trees by height, leaves first (level h holds every segment's nodes of height h)
  w.emb_loc.resize(size_t(w.node_base.back()));
  for (size_t h = 0; h < w.max_levels; ++h) walk_level(tape, w, h, loops, rng);
  int64_t B = 0;
  for (const auto& g : segs) B += g.points;
  return head(tape, walk_roots(tape, w), B, rng);
}

template <class T>
void CostModel<T>::walk_computations(Tape<T>& tape, TreeWalk& w, NodeId X) {
  w.comp_loc.assign(size_t(w.node_base.back()), Loc{0, 0});
  std::map<size_t, std::vector<Entry>> by_m;  // computation count m → nodes
  for (size_t s = 0; s < w.segs.size(); ++s)
    for (size_t v = 0; v < w.trees[s]->nodes.size(); ++v)
      if (w.tl[s].height[v] >= 0 && !w.node(s, int(v)).comp_indices.empty())
        by_m[w.node(s, int(v)).comp_indices.size()].push_back({s, int(v)});
  if (by_m.empty()) return;
  const auto cw = lstm_weight_nodes(tape, store_, "comps_lstm", w.spec);
  for (const auto& [m, group] : by_m) {
    const SeqGather g = seq_gather(
        group.size(), m, [&](size_t i) { return w.points(group[i].s); },
        [&](size_t i, int64_t b, size_t c) {
          const Entry& e = group[i];
          return Loc{0, w.x_base[e.s] + b * w.segs[e.s].n_comps + w.node(e.s, e.v).comp_indices[c]};
        });
    w.comp_sources.push_back(w.lstm(tape, {X}, g, m, cw));  // [1, seqs, E]
    for (size_t i = 0; i < group.size(); ++i)
      w.comp_loc[w.flat(group[i].s, group[i].v)] =
          Loc{int32_t(w.comp_sources.size() - 1), g.first[i]};
  }
}

template <class T>
void CostModel<T>::walk_level(Tape<T>& tape, TreeWalk& w, size_t h, NodeId loops, Rng& rng) {
  std::vector<Entry> level;
  for (size_t s = 0; s < w.segs.size(); ++s)
    if (h < w.tl[s].levels.size())
      for (int v : w.tl[s].levels[h]) level.push_back({s, v});
  const size_t n = level.size();
  auto points = [&](size_t j) { return w.points(level[j].s); };
  // nodes_lstm, one call per child count k
  std::vector<NodeId> node_sources{w.no_nodes};
  std::vector<Loc> node_loc(n, Loc{0, 0});
  std::map<size_t, std::vector<size_t>> by_k;  // k → positions in level
  for (size_t j = 0; j < n; ++j)
    if (const size_t k = w.node(level[j].s, level[j].v).children.size()) by_k[k].push_back(j);
  for (const auto& [k, group] : by_k) {
    if (w.nw.empty()) w.nw = lstm_weight_nodes(tape, store_, "nodes_lstm", w.spec);
    const SeqGather g = seq_gather(
        group.size(), k, [&](size_t i) { return points(group[i]); },
        [&](size_t i, int64_t b, size_t c) {
          const Entry& e = level[group[i]];
          const Loc& l = w.emb_loc[w.flat(e.s, w.node(e.s, e.v).children[c])];
          return Loc{l.src, l.base + b};
        });
    node_sources.push_back(w.lstm(tape, w.emb_sources, g, k, w.nw));
    for (size_t i = 0; i < group.size(); ++i)
      node_loc[group[i]] = Loc{int32_t(node_sources.size() - 1), g.first[i]};
  }
  // [H_nodes | H_comps | loop vector] for every (node, datapoint) of the level
  const SeqGather gn = seq_gather(
      n, 1, points, [&](size_t j, int64_t b, size_t) { return of_point(node_loc[j], b); });
  const SeqGather gc = seq_gather(n, 1, points, [&](size_t j, int64_t b, size_t) {
    return of_point(w.comp_loc[w.flat(level[j].s, level[j].v)], b);
  });
  const SeqGather gl = seq_gather(n, 1, points, [&](size_t j, int64_t b, size_t) {
    const Entry& e = level[j];
    return Loc{0, w.l_base[e.s] + b * w.segs[e.s].n_loops + w.node(e.s, e.v).loop_index};
  });
  const int64_t rows_n = gn.seqs, E = w.E, LW = cfg_.loops_tensor_size;
  const NodeId hn = ops::gather_rows(tape, node_sources, E, gn.src, gn.rows, Shape{rows_n, E});
  const NodeId hc = ops::gather_rows(tape, w.comp_sources, E, gc.src, gc.rows, Shape{rows_n, E});
  const NodeId lv = ops::gather_rows(tape, {loops}, LW, gl.src, gl.rows, Shape{rows_n, LW});
  NodeId y = ops::concat(tape, {hn, hc, lv}, 1);
  for (int i = 0; i < 2; ++i) y = dense(tape, y, "concat_layers", i, cfg_.drops[size_t(i)], rng);
  w.emb_sources.push_back(y);
  for (size_t j = 0; j < n; ++j)
    w.emb_loc[w.flat(level[j].s, level[j].v)] = Loc{int32_t(w.emb_sources.size() - 1), gn.first[j]};
}

template <class T>
NodeId CostModel<T>::walk_roots(Tape<T>& tape, TreeWalk& w) {
  // roots → roots_lstm (always; one call per root count R)
  const size_t S = w.segs.size();
  std::map<size_t, std::vector<size_t>> by_r;  // R → segments
  for (size_t s = 0; s < S; ++s) by_r[w.trees[s]->roots.size()].push_back(s);
  const auto rw = lstm_weight_nodes(tape, store_, "roots_lstm", w.spec);
  std::vector<NodeId> root_sources;
  std::vector<Loc> root_loc(S);  // where segment s's datapoint 0 is in root_sources
  for (const auto& [R, group] : by_r) {
    const SeqGather g = seq_gather(
        group.size(), R, [&](size_t i) { return w.points(group[i]); },
        [&](size_t i, int64_t b, size_t r) {
          const Loc& l = w.emb_loc[w.flat(group[i], w.trees[group[i]]->roots[r])];
          return Loc{l.src, l.base + b};
        });
    for (size_t i = 0; i < group.size(); ++i)
      root_loc[group[i]] = Loc{int32_t(root_sources.size()), g.first[i]};
    root_sources.push_back(
        ops::reshape(tape, w.lstm(tape, w.emb_sources, g, R, rw), Shape{g.seqs, w.E}));
  }
  if (by_r.size() == 1) return root_sources[0];
  // back to datapoint order
  const SeqGather g = seq_gather(
      S, 1, [&](size_t s) { return w.points(s); },
      [&](size_t s, int64_t b, size_t) {
        return Loc{root_loc[s].src, root_loc[s].base + b};
      });
  return ops::gather_rows(tape, root_sources, w.E, g.src, g.rows, Shape{g.seqs, w.E});
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
  const NodeId lp = detail::input_from(tape, Shape{B, L, LW}, bt.loops.data());
  std::vector<NodeId> roots;
  for (int r : tree.roots) roots.push_back(naive_node(tape, tree, r, X, lp, rng));
  // 6. roots_lstm over the stacked roots (always run)
  const NodeId seq = ops::stack(tape, roots, 1);  // [B, R, E]
  const NodeId hr =
      ops::lstm(tape, seq, spec, lstm_weight_nodes(tape, store_, "roots_lstm", spec)).h_n;
  return head(tape, ops::reshape(tape, hr, Shape{B, E}), B, rng);
}

template <class T>
NodeId CostModel<T>::naive_node(Tape<T>& tape, const data::ProgramTree& tree, int v, NodeId X,
                                NodeId lp, Rng& rng) {
  // 5. NodeEmb(n), recursively (children first), batch B at every node
  const int64_t B = tape.shape(X)[0], E = cfg_.embed_size();
  const int LW = cfg_.loops_tensor_size;
  const LstmSpec spec{int(E), int(E), 1, false};
  const data::TreeNode& nd = tree.nodes[size_t(v)];
  NodeId hn, hc;
  if (!nd.children.empty()) {
    std::vector<NodeId> ch;
    for (int c : nd.children) ch.push_back(naive_node(tape, tree, c, X, lp, rng));
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
}

#define LCM_COST_MODEL_TREE(T)                                                                    \
  template NodeId CostModel<T>::walk_tree(Tape<T>&, const data::BatchTrees&,                      \
                                          const std::vector<data::BatchSegment>&, NodeId, NodeId, \
                                          Rng&);                                                  \
  template NodeId CostModel<T>::forward_naive(Tape<T>&, const data::BatchTrees&,                  \
                                              const data::BatchTensors&, Rng&);                   \
  template void CostModel<T>::walk_computations(Tape<T>&, TreeWalk&, NodeId);                     \
  template void CostModel<T>::walk_level(Tape<T>&, TreeWalk&, size_t, NodeId, Rng&);              \
  template NodeId CostModel<T>::walk_roots(Tape<T>&, TreeWalk&);                                  \
  template NodeId CostModel<T>::naive_node(Tape<T>&, const data::ProgramTree&, int, NodeId,       \
                                           NodeId, Rng&);
LCM_COST_MODEL_TREE(float)
LCM_COST_MODEL_TREE(double)

}  // namespace lcm::model
