// Batch ⇄ safetensors exchange files (see batch_io.hpp): what the PyTorch reference and the
// side-by-side benchmarks read, so that lcm and the reference run on identical inputs.
#include "data/batch_io.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine/safetensors.hpp"

namespace lcm::data {

std::string tree_json(const ProgramTree& t) {
  auto list = [](const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::string s = "{\"roots\":" + list(t.roots) + ",\"nodes\":[";
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const auto& n = t.nodes[i];
    s += (i ? "," : "");
    s += "{\"loop_index\":" + std::to_string(n.loop_index) +
         ",\"comp_indices\":" + list(n.comp_indices) + ",\"children\":" + list(n.children) + "}";
  }
  return s + "]}";
}

void write_batch_file(const std::string& path, const BatchTensors& bt, int64_t n,
                      const ProgramTree& t, const std::string& source, const std::string& footprint,
                      const std::map<std::string, std::string>& extra) {
  if (n < 1 || n > bt.batch)
    throw std::invalid_argument("write_batch_file: n = " + std::to_string(n) + " outside [1, " +
                                std::to_string(bt.batch) + "]");
  if (bt.segment_list().size() != 1)
    throw std::invalid_argument("write_batch_file: the batch holds " +
                                std::to_string(bt.segment_list().size()) +
                                " tree shapes; the file format holds one (per-footprint batches)");
  const int64_t C = bt.n_comps, L = bt.n_loops;
  SafeTensorsFile f;
  f.add("comp", SafeTensor::from_f32({n, C, kCompVectorWidth}, bt.comp.data()));
  f.add("loops", SafeTensor::from_f32({n, L, kLoopVectorWidth}, bt.loops.data()));
  const std::vector<float> expr = bt.expr_per_datapoint();
  f.add("expr", SafeTensor::from_f32({n, C, 66, kExprNodeWidth}, expr.data()));
  f.add("speedup", SafeTensor::from_f32({n}, bt.speedup.data()));
  std::vector<int64_t> program_of(bt.program_of.begin(), bt.program_of.begin() + n);
  f.add("program_of", SafeTensor::from_i64({n}, program_of.data()));
  std::vector<int64_t> loop_index, comp_off{0}, comps, child_off{0}, children, roots;
  for (const auto& node : t.nodes) {
    loop_index.push_back(node.loop_index);
    comps.insert(comps.end(), node.comp_indices.begin(), node.comp_indices.end());
    comp_off.push_back(int64_t(comps.size()));
    children.insert(children.end(), node.children.begin(), node.children.end());
    child_off.push_back(int64_t(children.size()));
  }
  roots.assign(t.roots.begin(), t.roots.end());
  auto i64 = [&](const char* name, const std::vector<int64_t>& v) {
    f.add(name, SafeTensor::from_i64({int64_t(v.size())}, v.data()));
  };
  i64("tree.loop_index", loop_index);
  i64("tree.comp_offsets", comp_off);
  i64("tree.comp_indices", comps);
  i64("tree.child_offsets", child_off);
  i64("tree.children", children);
  i64("tree.roots", roots);
  f.metadata = {{"format", "pt"},
                {"generator", "lcm data/batch_io.cpp"},
                {"source", source},
                {"footprint", footprint},
                {"tree", tree_json(t)},
                {"batch", std::to_string(n)},
                {"n_comps", std::to_string(C)},
                {"n_loops", std::to_string(L)}};
  for (const auto& [k, v] : extra) f.metadata[k] = v;
  write_safetensors(path, f);
}

BatchFile read_batch_file(const std::string& path, bool program_per_datapoint) {
  const SafeTensorsFile f = read_safetensors(path);
  auto fail = [&](const std::string& what) -> void {
    throw std::runtime_error("batch file " + path + ": " + what);
  };
  auto req = [&](const char* name) {
    const SafeTensor* t = f.find(name);
    if (t == nullptr) fail(std::string("missing tensor ") + name);
    return t;
  };
  BatchFile g;
  g.metadata = f.metadata;
  const SafeTensor* comp = req("comp");
  if (comp->shape.size() != 3 || comp->shape[2] != kCompVectorWidth)
    fail("comp must be [B, C, " + std::to_string(kCompVectorWidth) + "]");
  const int64_t B = comp->shape[0], C = comp->shape[1];
  const SafeTensor* loops = req("loops");
  if (loops->shape.size() != 3 || loops->shape[0] != B || loops->shape[2] != kLoopVectorWidth)
    fail("loops must be [B, L, " + std::to_string(kLoopVectorWidth) + "]");
  const int64_t L = loops->shape[1];
  g.bt.batch = B;
  g.bt.n_comps = C;
  g.bt.n_loops = L;
  g.bt.comp = comp->to_float();
  g.bt.loops = loops->to_float();
  g.bt.speedup = req("speedup")->to_float();
  if (int64_t(g.bt.speedup.size()) != B) fail("speedup must be [B]");
  const std::vector<float> expr = req("expr")->to_float();  // [B, C, 66, 11]
  const std::vector<int64_t> program_of = req("program_of")->to_int64();
  if (int64_t(program_of.size()) != B) fail("program_of must be [B]");
  const int64_t per_point = C * 66 * kExprNodeWidth;
  if (int64_t(expr.size()) != B * per_point) fail("expr must be [B, C, 66, 11]");
  std::map<int64_t, int32_t> index;  // file program id → position in bt.programs
  std::map<int64_t, int64_t> first;  // file program id → its first datapoint
  for (int64_t i = 0; i < B; ++i) {
    const int64_t key = program_per_datapoint ? i : program_of[size_t(i)];
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, int32_t(index.size())).first;
      first[key] = i;
      g.bt.programs.push_back(it->second);
      g.bt.expr.insert(g.bt.expr.end(), expr.begin() + i * per_point,
                       expr.begin() + (i + 1) * per_point);
    } else if (!std::equal(expr.begin() + i * per_point, expr.begin() + (i + 1) * per_point,
                           expr.begin() + first[key] * per_point)) {
      // the expression rows are per program: deduplicating them must not lose data
      fail("datapoint " + std::to_string(i) + " has other expression rows than program " +
           std::to_string(key) + "'s first datapoint");
    }
    g.bt.program_of.push_back(it->second);
  }
  const auto li = req("tree.loop_index")->to_int64();
  const auto co = req("tree.comp_offsets")->to_int64();
  const auto ci = req("tree.comp_indices")->to_int64();
  const auto ho = req("tree.child_offsets")->to_int64();
  const auto hc = req("tree.children")->to_int64();
  const int64_t N = int64_t(li.size());
  if (int64_t(co.size()) != N + 1 || int64_t(ho.size()) != N + 1)
    fail("tree offsets must be [N+1]");
  for (int64_t n = 0; n < N; ++n) {
    TreeNode node;
    if (li[size_t(n)] < 0 || li[size_t(n)] >= L) fail("tree.loop_index out of range");
    node.loop_index = int(li[size_t(n)]);
    if (co[size_t(n)] > co[size_t(n) + 1] || co[size_t(n) + 1] > int64_t(ci.size()) ||
        ho[size_t(n)] > ho[size_t(n) + 1] || ho[size_t(n) + 1] > int64_t(hc.size()))
      fail("tree offsets out of range");
    for (int64_t k = co[size_t(n)]; k < co[size_t(n) + 1]; ++k) {
      if (ci[size_t(k)] < 0 || ci[size_t(k)] >= C) fail("tree.comp_indices out of range");
      node.comp_indices.push_back(int(ci[size_t(k)]));
    }
    for (int64_t k = ho[size_t(n)]; k < ho[size_t(n) + 1]; ++k) {
      if (hc[size_t(k)] < 0 || hc[size_t(k)] >= N) fail("tree.children out of range");
      node.children.push_back(int(hc[size_t(k)]));
    }
    g.tree.nodes.push_back(node);
  }
  for (int64_t r : req("tree.roots")->to_int64()) {
    if (r < 0 || r >= N) fail("tree.roots out of range");
    g.tree.roots.push_back(int(r));
  }
  return g;
}

}  // namespace lcm::data
