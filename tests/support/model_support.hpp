// Helpers shared by the cost-model test suites (test_model, test_encoder_model): hand-built loop
// tree nodes and random re-initialisation of every parameter for gradient checks.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "data/features.hpp"
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

}  // namespace lcm::test
