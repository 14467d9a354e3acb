// The cost model's memoised inference forward (CostModel::forward_memo, model/forward_memo.hpp):
// the schedule-dependent forward of one program's datapoints, computing only the computation
// rows, loop-tree nodes and outputs whose exact inputs the program's memo has not seen. Each part
// runs the ops of forward() in the same order (tag BiLSTM, first layer over the cached program
// rows, computation MLP; comps_lstm per computation count, nodes_lstm per child count and the
// concat MLP per tree level; roots_lstm and the head), on fewer rows.
#include <cstring>
#include <map>

#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "engine/ops/gemm.hpp"
#include "model/cost_model.hpp"
#include "model/cost_model_detail.hpp"

namespace lcm::model {

using namespace detail;  // NOLINT: the column blocks and input helpers of this model

namespace {

/// Appends the bytes of `n` values at `p` to `key`.
template <class V>
void append(std::string& key, const V* p, size_t n) {
  key.append(reinterpret_cast<const char*>(p), n * sizeof(V));
}

/// The id of `key` in `ids`, or a new id (next) inserted for it; `fresh` says which.
int32_t intern(std::unordered_map<std::string, int32_t>& ids, std::string&& key, size_t& key_bytes,
               bool& fresh) {
  const int32_t next = int32_t(ids.size());
  auto [it, inserted] = ids.emplace(std::move(key), next);
  fresh = inserted;
  if (inserted) key_bytes += it->first.size();
  return it->second;
}

/// A host leaf of prepared inputs: `shape` at the end of `in`'s buffer (64-value aligned).
template <class T>
T* place_leaf(ForwardInputs<T>& in, InputLeaf l, Shape shape) {
  const int64_t at = (in.total + 63) / 64 * 64;
  in.offsets[size_t(l)] = at;
  in.shapes[size_t(l)] = shape;
  in.total = at + shape.numel();
  in.host.resize(size_t(in.total));
  return in.host.data() + at;
}

}  // namespace

bool memo_sizes_match_forward(const ModelConfig& cfg) {
  const std::vector<int>& h = cfg.comp_embed_layer_sizes;
  if (h.size() < 2) return false;
  const int64_t E = cfg.embed_size(), tag = cfg.lstm_embedding_size;
  const int64_t mid = h[h.size() - 2];  // the concat and regression MLPs' hidden width
  const int64_t sched_cols = int64_t(column_split().sched_cols.size());
  std::vector<int64_t> weights = {sched_cols * h[0],
                                  4 * E * E,  // comps, nodes and roots LSTMs: W_ih and W_hh
                                  (2 * E + cfg.loops_tensor_size) * mid,
                                  mid * E,
                                  E * mid,
                                  4 * tag * 16,
                                  4 * tag * tag};
  for (size_t i = 0; i + 1 < h.size(); ++i) weights.push_back(int64_t(h[i]) * h[i + 1]);
  for (int64_t w : weights)
    if (w < ops::detail::kGemvMinOperand) return false;
  return true;
}

template <class T>
bool CostModel<T>::memo_matches_forward(const data::ProgramTree& tree, int64_t n_comps,
                                        int64_t points) const {
  constexpr int64_t kRows = ops::detail::kGemvRows;
  if (!memo_sizes_ok_ || points < 1 || n_comps * points > kRows) return false;
  for (const auto& level : tree_levels(tree).levels)
    if (int64_t(level.size()) * points > kRows) return false;
  return true;
}

template <class T>
std::vector<T> CostModel<T>::forward_memo(Tape<T>& tape, const data::ProgramTree& tree,
                                          const ForwardInputs<T>& in, ForwardMemo& memo) {
  if (cfg_.encoder.kind != EncoderKind::None || tape.device() != Device::CPU ||
      tape.grad_enabled() || tape.training())
    throw std::logic_error(
        "CostModel::forward_memo: an eval-mode CPU forward of a model without an encoder only");
  if (in.segments.size() != 1 || !in.share_static || !in.has(InputLeaf::ProgramRows) || in.device ||
      int64_t(in.host.size()) != in.total)
    bad("forward_memo: inputs of one segment with program rows on the host needed");
  check_tree(tree, in.segments[0].n_comps, in.segments[0].n_loops);
  const TreeLevels tl = tree_levels(tree);
  const int64_t B = in.batch, C = in.segments[0].n_comps, L = in.segments[0].n_loops;
  const int64_t E = cfg_.embed_size(), H0 = cfg_.comp_embed_layer_sizes[0];
  const int64_t LW = cfg_.loops_tensor_size, N = B * C;
  const int64_t Ws = in.shape(InputLeaf::Sched)[1];
  constexpr int64_t kTag = int64_t(kNumTags) * data::kMaxTags;  // 64 values per tag block
  const T* sched = in.host.data() + in.offset(InputLeaf::Sched);
  const T* tags = in.host.data() + in.offset(InputLeaf::Tags);
  const T* prog_rows = in.host.data() + in.offset(InputLeaf::ProgramRows);
  const T* loops = in.host.data() + in.offset(InputLeaf::Loops);
  if (in.shape(InputLeaf::ProgramRows)[0] != C || int64_t(in.tag_inverse.size()) != N)
    bad("forward_memo: prepared inputs of another shape");
  if (memo.bytes() > memo.max_bytes) memo.clear();
  Rng rng(0);  // eval mode: no dropout draws
  try {
    // 1. Computation embeddings (steps 2–4) of the rows not seen before, as forward() computes
    //    them (embed_computations over the cached program rows), each distinct row once.
    std::vector<int32_t> comp_id(static_cast<size_t>(N));
    std::vector<int64_t> todo;  // first row of each new id, in id order
    for (int64_t r = 0; r < N; ++r) {
      std::string key;
      key.reserve(sizeof(int32_t) + size_t(Ws + kTag) * sizeof(T));
      const int32_t c = int32_t(r % C);
      append(key, &c, 1);
      append(key, sched + r * Ws, size_t(Ws));
      append(key, tags + in.tag_inverse[size_t(r)] * kTag, size_t(kTag));
      bool fresh = false;
      comp_id[size_t(r)] = intern(memo.comp_ids, std::move(key), memo.key_bytes, fresh);
      if (fresh) todo.push_back(r);
      (fresh ? memo.comp_misses : memo.comp_hits) += 1;
    }
    if (!todo.empty()) {
      const int64_t n = int64_t(todo.size());
      ForwardInputs<T> sub;  // each new row as a program of one computation
      sub.batch = n, sub.n_comps = 1, sub.n_loops = 1, sub.n_programs = n;
      sub.segments = {data::BatchSegment{n, 1, 1}};
      sub.share_static = true;
      sub.sched_weight = in.sched_weight;
      for (int64_t i = 0; i < n; ++i) sub.program_of.push_back(i);
      // The tag BiLSTM's output per distinct tag block (step 2), from the memo or computed for
      // the blocks it lacks (as tag_embeddings computes them: a block's row does not depend on
      // the others), then each new row's [n, 2·Ht].
      const int64_t Dt = 2 * int64_t(cfg_.lstm_embedding_size);
      std::vector<int32_t> tag_id(static_cast<size_t>(n));
      {
        ForwardInputs<T> tin;  // the blocks the memo lacks, as rows of their own
        std::vector<int64_t> missing;
        const int32_t first_tag = int32_t(memo.tag_ids.size());
        for (int64_t i = 0; i < n; ++i) {
          const T* block = tags + in.tag_inverse[size_t(todo[size_t(i)])] * kTag;
          std::string key;
          append(key, block, size_t(kTag));
          bool fresh = false;
          tag_id[size_t(i)] = intern(memo.tag_ids, std::move(key), memo.key_bytes, fresh);
          if (fresh) missing.push_back(in.tag_inverse[size_t(todo[size_t(i)])]);
        }
        if (!missing.empty()) {
          const int64_t u = int64_t(missing.size());
          tin.batch = u, tin.n_comps = 1, tin.n_loops = 1, tin.n_programs = u;
          tin.segments = {data::BatchSegment{u, 1, 1}};
          for (int64_t i = 0; i < u; ++i) tin.tag_inverse.push_back(i);
          T* t = place_leaf(tin, InputLeaf::Tags, Shape{u, kNumTags, int64_t(data::kMaxTags)});
          for (int64_t i = 0; i < u; ++i)
            std::memcpy(t + i * kTag, tags + missing[size_t(i)] * kTag, size_t(kTag) * sizeof(T));
          const T* te = tape.value(tag_embeddings(tape, tin)).data;  // [u, Dt]
          memo.tag_emb.resize(size_t(int64_t(first_tag) + u) * size_t(Dt));
          for (int64_t i = 0; i < u * Dt; ++i)
            memo.tag_emb[size_t(int64_t(first_tag) * Dt + i)] = float(te[i]);
        }
      }
      const NodeId tag_rows = make_input(tape, Shape{n, Dt}, [&](T* o) {
        for (int64_t i = 0; i < n; ++i)
          for (int64_t q = 0; q < Dt; ++q)
            o[i * Dt + q] = T(memo.tag_emb[size_t(int64_t(tag_id[size_t(i)]) * Dt + q)]);
      });
      T* s = place_leaf(sub, InputLeaf::Sched, Shape{n, Ws});
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(s + i * Ws, sched + todo[size_t(i)] * Ws, size_t(Ws) * sizeof(T));
      T* p = place_leaf(sub, InputLeaf::ProgramRows, Shape{n, H0});
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(p + i * H0, prog_rows + (todo[size_t(i)] % C) * H0, size_t(H0) * sizeof(T));
      // steps 3–4 as embed_computations, over the rows' tag embeddings
      const NodeId w0 = tape.param(store_.at("comp_embedding_layers.0.weight"));
      const NodeId b0 = tape.param(store_.at("comp_embedding_layers.0.bias"));
      const NodeId h = shared_first_layer(tape, sub, tag_rows, w0, b0);
      const NodeId X =
          comp_mlp(tape, ops::dropout(tape, ops::elu(tape, h), cfg_.drops[0], rng), rng);  // [n, E]
      const T* x = tape.value(X).data;
      for (int64_t i = 0; i < n * E; ++i) memo.comp_emb.push_back(float(x[i]));
    }

    // 2. Loop-node embeddings (step 5), hash-consed: a node's key is its loop vector and the ids
    //    of its computations' and children's embeddings, so equal subtrees share one id.
    std::vector<std::vector<int32_t>> node_id(size_t(B),
                                              std::vector<int32_t>(tree.nodes.size(), -1));
    std::vector<std::vector<int32_t>> todo_nodes(tl.levels.size());  // new ids per height
    std::vector<int32_t> todo_v, todo_b;                             // each new id's node, point
    const int32_t first_new = int32_t(memo.node_ids.size());
    for (size_t h = 0; h < tl.levels.size(); ++h)
      for (int v : tl.levels[h])
        for (int64_t b = 0; b < B; ++b) {
          const data::TreeNode& nd = tree.nodes[size_t(v)];
          std::string key;
          key.reserve(sizeof(int32_t) * (1 + nd.comp_indices.size() + nd.children.size()) +
                      size_t(LW) * sizeof(T));
          const int32_t vv = v;
          append(key, &vv, 1);
          append(key, loops + (b * L + nd.loop_index) * LW, size_t(LW));
          for (int c : nd.comp_indices) append(key, &comp_id[size_t(b * C + c)], 1);
          for (int c : nd.children) append(key, &node_id[size_t(b)][size_t(c)], 1);
          bool fresh = false;
          const int32_t id = intern(memo.node_ids, std::move(key), memo.key_bytes, fresh);
          node_id[size_t(b)][size_t(v)] = id;
          (fresh ? memo.node_misses : memo.node_hits) += 1;
          if (fresh) {
            todo_nodes[h].push_back(id);
            todo_v.push_back(v);
            todo_b.push_back(int32_t(b));
          }
        }
    const size_t new_nodes = todo_v.size();
    if (new_nodes) {
      memo.node_emb.resize(memo.node_emb.size() + new_nodes * size_t(E));
      const LstmSpec spec{int(E), int(E), 1, false};
      auto nd_of = [&](int32_t id) -> const data::TreeNode& {
        return tree.nodes[size_t(todo_v[size_t(id - first_new)])];
      };
      // comps_lstm over the new nodes with computations, one call per computation count
      std::vector<int64_t> hc_row(new_nodes, -1);  // row in hc_all of each new node
      std::vector<T> hc_all;
      {
        std::map<size_t, std::vector<int32_t>> by_m;
        for (size_t i = 0; i < new_nodes; ++i)
          if (const size_t m = tree.nodes[size_t(todo_v[i])].comp_indices.size())
            by_m[m].push_back(first_new + int32_t(i));
        if (!by_m.empty()) {
          const auto cw = lstm_weight_nodes(tape, store_, "comps_lstm", spec);
          for (const auto& [m, group] : by_m) {
            const int64_t g = int64_t(group.size());
            const NodeId seq = make_input(tape, Shape{g, int64_t(m), E}, [&](T* o) {
              for (int64_t i = 0; i < g; ++i) {
                const int32_t id = group[size_t(i)];
                const data::TreeNode& nd = nd_of(id);
                const int64_t b = todo_b[size_t(id - first_new)];
                for (size_t j = 0; j < m; ++j) {
                  const float* e = memo.comp_emb.data() +
                                   int64_t(comp_id[size_t(b * C + nd.comp_indices[j])]) * E;
                  for (int64_t q = 0; q < E; ++q)
                    o[(i * int64_t(m) + int64_t(j)) * E + q] = T(e[q]);
                }
              }
            });
            const T* hn = tape.value(ops::lstm(tape, seq, spec, cw).h_n).data;  // [1, g, E]
            for (int64_t i = 0; i < g; ++i) {
              hc_row[size_t(group[size_t(i)] - first_new)] = int64_t(hc_all.size()) / E;
              hc_all.insert(hc_all.end(), hn + i * E, hn + (i + 1) * E);
            }
          }
        }
      }
      const T* no_comps = tape.value(tape.param(store_.at("no_comps_tensor"))).data;
      const T* no_nodes = tape.value(tape.param(store_.at("no_nodes_tensor"))).data;
      std::vector<LstmWeights> nw;
      for (size_t h = 0; h < todo_nodes.size(); ++h) {
        const std::vector<int32_t>& level = todo_nodes[h];
        if (level.empty()) continue;
        const int64_t n = int64_t(level.size());
        // nodes_lstm over the children's embeddings (in the memo: lower levels), per child count
        std::vector<const T*> hn_of(size_t(n), no_nodes);
        std::vector<NodeId> keep;
        std::map<size_t, std::vector<int64_t>> by_k;  // k → positions in level
        for (int64_t j = 0; j < n; ++j)
          if (const size_t k = nd_of(level[size_t(j)]).children.size()) by_k[k].push_back(j);
        for (const auto& [k, group] : by_k) {
          if (nw.empty()) nw = lstm_weight_nodes(tape, store_, "nodes_lstm", spec);
          const int64_t g = int64_t(group.size());
          const NodeId seq = make_input(tape, Shape{g, int64_t(k), E}, [&](T* o) {
            for (int64_t i = 0; i < g; ++i) {
              const int32_t id = level[size_t(group[size_t(i)])];
              const int64_t b = todo_b[size_t(id - first_new)];
              const data::TreeNode& nd = nd_of(id);
              for (size_t j = 0; j < k; ++j) {
                const float* e =
                    memo.node_emb.data() + int64_t(node_id[size_t(b)][size_t(nd.children[j])]) * E;
                for (int64_t q = 0; q < E; ++q) o[(i * int64_t(k) + int64_t(j)) * E + q] = T(e[q]);
              }
            }
          });
          const NodeId hn = ops::lstm(tape, seq, spec, nw).h_n;  // [1, g, E]
          const T* hv = tape.value(hn).data;
          for (int64_t i = 0; i < g; ++i) hn_of[size_t(group[size_t(i)])] = hv + i * E;
        }
        // [H_nodes | H_comps | loop vector] → the concat MLP
        const NodeId z = make_input(tape, Shape{n, 2 * E + LW}, [&](T* o) {
          for (int64_t j = 0; j < n; ++j) {
            const int32_t id = level[size_t(j)];
            const int64_t i = id - first_new, b = todo_b[size_t(i)];
            const data::TreeNode& nd = nd_of(id);
            T* row = o + j * (2 * E + LW);
            std::copy(hn_of[size_t(j)], hn_of[size_t(j)] + E, row);
            const T* hc = hc_row[size_t(i)] >= 0 ? hc_all.data() + hc_row[size_t(i)] * E : no_comps;
            std::copy(hc, hc + E, row + E);
            std::copy(loops + (b * L + nd.loop_index) * LW,
                      loops + (b * L + nd.loop_index + 1) * LW, row + 2 * E);
          }
        });
        NodeId y = z;
        for (int i = 0; i < 2; ++i)
          y = dense(tape, y, "concat_layers", i, cfg_.drops[size_t(i)], rng);
        const T* yv = tape.value(y).data;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t q = 0; q < E; ++q)
            memo.node_emb[size_t(int64_t(level[size_t(j)]) * E + q)] = float(yv[j * E + q]);
      }
    }

    // 3. Outputs (steps 6–7): roots_lstm over each datapoint's roots and the head, once per
    //    distinct tuple of root embeddings.
    std::vector<T> out(static_cast<size_t>(B));
    std::vector<int64_t> todo_out;  // datapoints whose output is computed here
    std::vector<std::string> out_key(static_cast<size_t>(B));
    std::unordered_map<std::string, int64_t> pending;  // key → position in todo_out
    std::vector<int64_t> from(static_cast<size_t>(B), -1);
    for (int64_t b = 0; b < B; ++b) {
      std::string& key = out_key[size_t(b)];
      for (int r : tree.roots) append(key, &node_id[size_t(b)][size_t(r)], 1);
      if (auto it = memo.outputs.find(key); it != memo.outputs.end()) {
        out[size_t(b)] = T(it->second);
        ++memo.output_hits;
        continue;
      }
      auto [it, inserted] = pending.emplace(key, int64_t(todo_out.size()));
      if (inserted) todo_out.push_back(b);
      from[size_t(b)] = it->second;
      ++memo.output_misses;
    }
    if (!todo_out.empty()) {
      const int64_t g = int64_t(todo_out.size()), R = int64_t(tree.roots.size());
      const LstmSpec spec{int(E), int(E), 1, false};
      const NodeId seq = make_input(tape, Shape{g, R, E}, [&](T* o) {
        for (int64_t i = 0; i < g; ++i)
          for (int64_t r = 0; r < R; ++r) {
            const float* e =
                memo.node_emb.data() +
                int64_t(node_id[size_t(todo_out[size_t(i)])][size_t(tree.roots[size_t(r)])]) * E;
            for (int64_t q = 0; q < E; ++q) o[(i * R + r) * E + q] = T(e[q]);
          }
      });
      const auto rw = lstm_weight_nodes(tape, store_, "roots_lstm", spec);
      const NodeId hr = ops::reshape(tape, ops::lstm(tape, seq, spec, rw).h_n, Shape{g, E});
      const T* y = tape.value(head(tape, hr, g, rng)).data;
      for (int64_t i = 0; i < g; ++i) {
        const std::string& key = out_key[size_t(todo_out[size_t(i)])];
        memo.key_bytes += key.size();
        memo.outputs.emplace(key, float(y[i]));
      }
      for (int64_t b = 0; b < B; ++b)
        if (from[size_t(b)] >= 0) out[size_t(b)] = y[from[size_t(b)]];
    }
    return out;
  } catch (...) {
    memo.clear();  // ids may have been given to rows or nodes whose embeddings were not stored
    throw;
  }
}

template bool CostModel<float>::memo_matches_forward(const data::ProgramTree&, int64_t,
                                                     int64_t) const;
template bool CostModel<double>::memo_matches_forward(const data::ProgramTree&, int64_t,
                                                      int64_t) const;
template std::vector<float> CostModel<float>::forward_memo(Tape<float>&, const data::ProgramTree&,
                                                           const ForwardInputs<float>&,
                                                           ForwardMemo&);

}  // namespace lcm::model
