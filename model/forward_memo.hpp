// The results of one program's schedule-dependent forward kept across queries (lcm-serve's
// per-program memo, docs/tools.md "lcm-serve", § Memoised sub-results): the candidate schedules
// of one search share most of their loop tree's transformations, so most of their computation
// rows and subtrees have inputs bit-identical to those of an earlier query, and their outputs
// are taken from here instead of being computed again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace lcm::model {

/// One ensemble member's memo for one program (one tree, one set of per-program rows), filled by
/// CostModel::forward_memo. Every entry is keyed by the exact bytes of what determines it, so a
/// hit reuses an output computed from bit-identical inputs:
///  - the tag BiLSTM's output (§5.4 step 2) by the 64 tag values of a computation;
///  - a computation embedding (§5.4 steps 2–4) by (computation index, its 82 schedule columns,
///    its 64 tag values);
///  - a loop node's embedding (steps 5) by (node, its loop vector, the ids of its computations'
///    embeddings, the ids of its children's embeddings) — a hash-consed subtree;
///  - a datapoint's output ŷ by the ids of its root nodes' embeddings.
/// Not thread-safe (the scorer's forward lock guards it). Bounded: once bytes() passes
/// `max_bytes` the memo is emptied before a forward (what that forward computes is kept).
struct ForwardMemo {
  size_t max_bytes = 0;                               // 0: the memo is not used
  std::unordered_map<std::string, int32_t> tag_ids;   // 64 tag values → row of tag_emb
  std::vector<float> tag_emb;                         // [tag ids, 2·lstm_embedding_size]
  std::unordered_map<std::string, int32_t> comp_ids;  // key → row of comp_emb
  std::vector<float> comp_emb;                        // [comp ids, E]
  std::unordered_map<std::string, int32_t> node_ids;  // key → row of node_emb
  std::vector<float> node_emb;                        // [node ids, E]
  std::unordered_map<std::string, float> outputs;     // root ids → ŷ
  size_t key_bytes = 0;                               // Σ key sizes of the four maps
  // counts since the memo was made (not reset by clear): rows / nodes / outputs found or computed
  int64_t comp_hits = 0, comp_misses = 0, node_hits = 0, node_misses = 0, output_hits = 0,
          output_misses = 0, clears = 0;

  /// Estimated bytes held: the embeddings, the keys and the hash maps' nodes (≈ 64 bytes each).
  size_t bytes() const {
    const size_t entries = tag_ids.size() + comp_ids.size() + node_ids.size() + outputs.size();
    return (tag_emb.size() + comp_emb.size() + node_emb.size()) * sizeof(float) + key_bytes +
           entries * 64;
  }
  /// Forgets every entry (the counts stay).
  void clear() {
    tag_ids = {};
    std::vector<float>().swap(tag_emb);
    comp_ids = {};
    std::vector<float>().swap(comp_emb);
    node_ids = {};
    std::vector<float>().swap(node_emb);
    outputs = {};
    key_bytes = 0;
    ++clears;
  }
};

}  // namespace lcm::model
