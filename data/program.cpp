// Small helpers of the typed program model (labels, name lookups, tree fallback).
#include "data/program.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "data/skips.hpp"

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

std::string iterator_tree_problem(const Program& p) {
  const size_t L = p.iterators.size();
  if (L == 0) return "the program has no loops (program_annotation.iterators is empty)";
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < L; ++i) index.emplace(p.iterators[i].name, i);
  std::unordered_set<std::string> comps;
  for (const auto& c : p.computations) comps.insert(c.name);
  std::vector<int> listed(L, 0);  // how many child_iterators entries name each iterator
  for (size_t i = 0; i < L; ++i) {
    const Iterator& it = p.iterators[i];
    if (!it.parent.empty()) {
      if (it.parent == it.name) return "iterator " + it.name + " is its own parent_iterator";
      if (!index.count(it.parent))
        return "iterator " + it.name + "'s parent_iterator " + it.parent + " is not an iterator";
    }
    for (const auto& ch : it.children) {
      if (ch == it.name) return "iterator " + it.name + " lists itself in child_iterators";
      auto ci = index.find(ch);
      if (ci == index.end())
        return "iterator " + it.name + " lists child " + ch + ", which is not an iterator";
      const std::string& back = p.iterators[ci->second].parent;
      if (back != it.name)
        return "iterator " + it.name + " lists child " + ch + " whose parent_iterator is " +
               (back.empty() ? std::string("null") : back);
      if (++listed[ci->second] > 1) return "iterator " + it.name + " lists child " + ch + " twice";
    }
    for (const auto& c : it.computations)
      if (!comps.count(c))
        return "iterator " + it.name + " lists computation " + c + ", which is not a computation";
  }
  for (size_t i = 0; i < L; ++i)
    if (!p.iterators[i].parent.empty() && listed[i] == 0)
      return "iterator " + p.iterators[i].name + " names " + p.iterators[i].parent +
             " as parent_iterator but the child_iterators of " + p.iterators[i].parent +
             " do not list it";
  // The links agree, so every iterator has at most one parent: a walk from the roots reaches each
  // at most once, and the ones it does not reach are on a parent cycle.
  std::vector<int> depth(L, -1);
  std::vector<size_t> todo;
  for (size_t i = 0; i < L; ++i)
    if (p.iterators[i].parent.empty()) {
      depth[i] = 1;
      todo.push_back(i);
    }
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    if (depth[i] > kMaxLoopTreeDepth)
      return "loops nested deeper than " + std::to_string(kMaxLoopTreeDepth) +
             " levels (parent_iterator chain through " + p.iterators[i].name + ")";
    for (const auto& ch : p.iterators[i].children) {
      const size_t c = index.at(ch);
      depth[c] = depth[i] + 1;
      todo.push_back(c);
    }
  }
  std::string lost;
  int n_lost = 0;
  for (size_t i = 0; i < L; ++i)
    if (depth[i] < 0 && ++n_lost <= 3) lost += (lost.empty() ? "" : ", ") + p.iterators[i].name;
  if (n_lost > 0)
    return (n_lost == 1 ? "iterator " + lost + " is"
                        : "iterators " + lost + (n_lost > 3 ? ", ..." : "") + " are") +
           " not under any root loop (their parent_iterator links form a cycle)";
  return "";
}

namespace {
/// The index of an entry of `names` equal to an earlier one, or -1: pairwise for a few names (a
/// tree has a handful of loops), sorted for many.
int64_t repeated_name(const std::vector<const std::string*>& names) {
  const size_t n = names.size();
  if (n <= 32) {
    for (size_t i = 1; i < n; ++i)
      for (size_t j = 0; j < i; ++j)
        if (*names[i] == *names[j]) return int64_t(i);
    return -1;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int c = names[x]->compare(*names[y]);
    return c != 0 ? c < 0 : x < y;
  });
  for (size_t i = 1; i < n; ++i)
    if (*names[order[i]] == *names[order[i - 1]]) return int64_t(order[i]);
  return -1;
}
}  // namespace

std::string loop_tree_problem(const LoopTree& t) {
  if (t.roots.empty()) return "tree_structure has no roots";
  // Depth first, in stored order: each loop with its enclosing loop (nullptr for a root), each
  // computation with its loop.
  // Per-thread scratch: this runs for every schedule, and allocating each time cost 4% of a read.
  thread_local std::vector<const std::string*> loops, loop_parent, comps, comp_loop;
  thread_local std::vector<std::pair<const LoopNode*, const LoopNode*>> todo;  // (node, parent)
  loops.clear(), loop_parent.clear(), comps.clear(), comp_loop.clear(), todo.clear();
  for (auto r = t.roots.rbegin(); r != t.roots.rend(); ++r) todo.emplace_back(&*r, nullptr);
  while (!todo.empty()) {
    auto [n, parent] = todo.back();
    todo.pop_back();
    loops.push_back(&n->loop_name);
    loop_parent.push_back(parent ? &parent->loop_name : nullptr);
    for (const auto& c : n->computations) {
      comps.push_back(&c);
      comp_loop.push_back(&n->loop_name);
    }
    for (auto ch = n->children.rbegin(); ch != n->children.rend(); ++ch) todo.emplace_back(&*ch, n);
  }
  if (const int64_t i = repeated_name(loops); i >= 0) {
    size_t first = 0;
    while (*loops[first] != *loops[size_t(i)]) ++first;
    auto where = [&](size_t k) {
      return loop_parent[k] ? "nested under " + *loop_parent[k] : std::string("as a root");
    };
    return "loop " + *loops[size_t(i)] + " appears twice (" + where(first) + ", and " +
           where(size_t(i)) + ")";
  }
  if (const int64_t i = repeated_name(comps); i >= 0) {
    size_t first = 0;
    while (*comps[first] != *comps[size_t(i)]) ++first;
    return "computation " + *comps[size_t(i)] + " is listed twice (in loop " + *comp_loop[first] +
           " and in loop " + *comp_loop[size_t(i)] + ")";
  }
  return "";
}

namespace {
LoopNode build_node(const Program& p, const Iterator& it,
                    const std::unordered_map<std::string, size_t>& index) {
  LoopNode n;
  n.loop_name = it.name;
  n.computations = it.computations;
  n.children.reserve(it.children.size());
  // Depth ≤ kMaxLoopTreeDepth and no cycles: iterator_tree_problem() passed.
  for (const auto& ch : it.children)
    n.children.push_back(build_node(p, p.iterators[index.at(ch)], index));
  return n;
}
}  // namespace

LoopTree tree_from_iterators(const Program& p) {
  const std::string why = iterator_tree_problem(p);
  if (!why.empty()) throw DataError(why);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < p.iterators.size(); ++i) index.emplace(p.iterators[i].name, i);
  LoopTree t;
  for (const auto& it : p.iterators)
    if (it.parent.empty()) t.roots.push_back(build_node(p, it, index));
  return t;
}

}  // namespace lcm::data
