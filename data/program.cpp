// Small helpers of the typed program model (labels, name lookups, tree fallback).
#include "data/program.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace lcm::data {

bool Schedule::has_label() const {
  if (execution_times.empty()) return false;
  for (double t : execution_times)
    if (!(t >= 0) || !std::isfinite(t)) return false;
  return min_time() > 0;
}

double Schedule::min_time() const {
  if (execution_times.empty()) return std::numeric_limits<double>::quiet_NaN();
  return *std::min_element(execution_times.begin(), execution_times.end());
}

int Program::iterator_index(const std::string& n) const {
  for (size_t i = 0; i < iterators.size(); ++i)
    if (iterators[i].name == n) return int(i);
  return -1;
}

int Program::computation_index(const std::string& n) const {
  for (size_t i = 0; i < computations.size(); ++i)
    if (computations[i].name == n) return int(i);
  return -1;
}

static LoopNode build_node(const Program& p, const Iterator& it,
                           std::unordered_set<std::string>& seen) {
  LoopNode n;
  n.loop_name = it.name;
  n.computations = it.computations;
  seen.insert(it.name);
  for (const auto& ch : it.children) {
    int k = p.iterator_index(ch);
    if (k >= 0 && !seen.count(ch)) n.children.push_back(build_node(p, p.iterators[k], seen));
  }
  return n;
}

LoopTree tree_from_iterators(const Program& p) {
  LoopTree t;
  std::unordered_set<std::string> seen;  // guards against cycles in malformed parent/child links
  for (const auto& it : p.iterators)
    if (it.parent.empty() && !seen.count(it.name)) t.roots.push_back(build_node(p, it, seen));
  return t;
}

}  // namespace lcm::data
