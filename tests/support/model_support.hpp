// Helpers shared by the cost-model test suites (test_model, test_encoder_model, test_cuda_model,
// test_device_batch_store): hand-built loop tree nodes, random re-initialisation of every
// parameter for gradient checks, and real batches of the mini sample.
#pragma once
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
