// Helpers shared by the cost-model test suites (test_model, test_encoder_model, test_cuda_model,
// test_device_batch_store): hand-built loop tree nodes, random re-initialisation of every
// parameter for gradient checks, random batches, and real batches of the mini sample.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/features.hpp"
#include "data/prepare.hpp"
#include "engine/rng.hpp"
#include "model/cost_model.hpp"

namespace lcm::test {

/// Re-draws every parameter of `m` uniformly in ±a (the reference init zeroes the concat
/// weights, which would hide the gradients of everything below them).
template <class T>
void randomize(model::CostModel<T>& m, uint64_t seed, double a = 0.4) {
  Rng rng(seed);
  for (auto& p : m.params().all())
    for (auto& v : p.value) v = T(rng.uniform(-a, a));
}

/// Random batch: B datapoints of P programs (static computation columns and expressions equal
/// within a program, as data::Dataset::materialize guarantees; schedule columns per datapoint;
/// about half of the (datapoint, computation) tag blocks all zero, no transformation, so that the
/// level-batched forward's distinct-tag-block sharing is exercised). Static values are uniform in
/// ±1, or with `wide_static` in ±30 for about a fifth of them. Deterministic in `seed`.
inline data::BatchTensors random_batch(int64_t B, int64_t P, int64_t C, int64_t L, uint64_t seed,
                                       bool wide_static = false) {
  Rng rng(seed);
  data::BatchTensors bt;
  bt.batch = B;
  bt.n_comps = C;
  bt.n_loops = L;
  const int W = data::kCompVectorWidth;
  std::vector<float> stat(size_t(P * C * W));
  for (auto& v : stat)
    v = wide_static && rng.next_double() < 0.2 ? float(rng.uniform(-30, 30))
                                               : float(rng.uniform(-1, 1));
  bt.expr.resize(size_t(P * C * data::kMaxExprLen * data::kExprNodeWidth));
  for (auto& v : bt.expr) v = rng.next_double() < 0.3 ? 0.f : float(rng.uniform(-1, 1));
  for (int64_t p = 0; p < P; ++p) bt.programs.push_back(int32_t(p));
  for (int64_t b = 0; b < B; ++b)
    bt.program_of.push_back(int32_t(b < P ? b : int64_t(rng.below(uint64_t(P)))));
  bt.comp.resize(size_t(B * C * W));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int j = 0; j < W; ++j)
        bt.comp[size_t((b * C + c) * W + j)] =
            data::is_schedule_column(j) ? float(rng.uniform(-1, 1))
                                        : stat[size_t((bt.program_of[size_t(b)] * C + c) * W + j)];
  for (int64_t r = 0; r < B * C; ++r)
    if (rng.next_double() < 0.5)
      std::fill(bt.comp.begin() + r * W + 33, bt.comp.begin() + r * W + 97, 0.f);
  bt.loops.resize(size_t(B * L * 8));
  for (auto& v : bt.loops) v = float(rng.uniform(-1, 1));
  for (int64_t b = 0; b < B; ++b) bt.speedup.push_back(float(rng.uniform(0.2, 3.0)));
  return bt;
}

/// An autoencoder of kind `k` with computation-vector sizes `comp` and access hidden size 2 (the
/// small fixtures of the autoencoder and encoder-model tests).
inline model::AutoencoderConfig autoencoder_config(model::EncoderKind k,
                                                   const model::CompVectorAeSizes& comp) {
  model::AutoencoderConfig c;
  c.kind = k;
  c.comp = comp;
  c.access.hidden = 2;
  return c;
}

/// A loop-tree node: loop `loop` (program iterator index) holding computations `comps` (absolute
/// order ranks) and child nodes `children` (indices into ProgramTree::nodes).
inline data::TreeNode node(int loop, std::vector<int> comps, std::vector<int> children) {
  data::TreeNode n;
  n.loop_index = loop;
  n.comp_indices = std::move(comps);
  n.children = std::move(children);
  return n;
}

/// The batches of a LOOPerSet file prepared in memory (no cache, 2 workers, no skip printing,
/// every footprint kept: min_functions_per_footprint = 0). Throws what data::prepare_split throws.
inline data::PreparedSplit prepare_mini(
    const std::string& path, int batch_size,
    data::BatchingMode mode = data::BatchingMode::PerFootprint) {
  data::PrepareOptions opt;
  opt.split = "mini";
  opt.source = path;
  opt.cache_dir = "";
  opt.nb_workers = 2;
  opt.print_skips = 0;
  opt.batching.batch_size = batch_size;
  opt.batching.min_functions_per_footprint = 0;
  opt.batching.mode = mode;
  return data::prepare_split(opt);
}

}  // namespace lcm::test
