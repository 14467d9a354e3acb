// Exports real prepared batches (model-spec §5.4 inputs) as safetensors, for the PyTorch reference
// of the cost model (bench/reference/looper_model.py, make_model_fixture.py, bench_reference.py)
// and the golden model test (tests/test_model_golden.cpp). Not a timing benchmark.
//
// Usage:
//   bench_export_batch [--data FILE] [--out FILE] [--max-points N]
//       writes ONE batch: the one with the richest tree (several roots, loop nodes without
//       computations, nodes with several computations / children), cut to N datapoints
//       (default: data/looperset-sample/mini.jsonl.gz → tests/fixtures/model_batch_input.safetensors)
//   bench_export_batch --dump N --dump-dir DIR [--data FILE] [--batch-size S]
//       writes the first N batches of the split's seeded, shuffled batch order (batch_size S) as
//       DIR/batch_<i>.safetensors (a representative sample; inputs for bench_reference.py).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "engine/safetensors.hpp"

namespace {

using lcm::SafeTensor;
using lcm::SafeTensorsFile;
using lcm::data::BatchTensors;
using lcm::data::ProgramTree;

/// How interesting a tree is for a golden test: every model branch of model-spec §5.4 exercised
/// (several roots, a node without computations → no_comps_tensor, a node with ≥ 2 computations /
/// ≥ 2 child loops → LSTMs over sequences longer than 1, nesting depth ≥ 2).
int tree_score(const ProgramTree& t) {
  int score = 0;
  bool no_comps = false, multi_comps = false, multi_children = false, nested = false;
  for (const auto& n : t.nodes) {
    no_comps |= n.comp_indices.empty();
    multi_comps |= n.comp_indices.size() >= 2;
    multi_children |= n.children.size() >= 2;
    nested |= !n.children.empty();
  }
  score += t.roots.size() >= 2 ? 8 : 0;
  score += no_comps ? 4 : 0;
  score += multi_comps ? 2 : 0;
  score += multi_children ? 2 : 0;
  score += nested ? 1 : 0;
  return score;
}

/// The tree as a JSON string (for humans reading the fixture's metadata).
std::string tree_json(const ProgramTree& t) {
  std::string s = "{\"roots\":[";
  for (size_t i = 0; i < t.roots.size(); ++i) s += (i ? "," : "") + std::to_string(t.roots[i]);
  s += "],\"nodes\":[";
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const auto& n = t.nodes[i];
    s += (i ? "," : "");
    s += "{\"loop_index\":" + std::to_string(n.loop_index) + ",\"comp_indices\":[";
    for (size_t j = 0; j < n.comp_indices.size(); ++j)
      s += (j ? "," : "") + std::to_string(n.comp_indices[j]);
    s += "],\"children\":[";
    for (size_t j = 0; j < n.children.size(); ++j)
      s += (j ? "," : "") + std::to_string(n.children[j]);
    s += "]}";
  }
  return s + "]}";
}

/// Writes batch tensors `bt` (first `n` datapoints) and tree `t` as a safetensors file:
///   comp [n, C, 910] F32, loops [n, L, 8] F32, expr [n, C, 66, 11] F32 (per datapoint),
///   speedup [n] F32, program_of [n] I64 (index into the batch's distinct programs),
///   tree.loop_index [N] I64, tree.comp_offsets [N+1] I64 + tree.comp_indices [Σ] I64 (CSR),
///   tree.child_offsets [N+1] I64 + tree.children [Σ] I64 (CSR), tree.roots [R] I64;
///   metadata: tree (JSON), n_comps, n_loops, batch, footprint, source. Atomic write.
void write_batch(const std::string& path, const BatchTensors& bt, int64_t n, const ProgramTree& t,
                 const std::string& source, const std::string& footprint) {
  const int64_t C = bt.n_comps, L = bt.n_loops;
  SafeTensorsFile f;
  f.add("comp", SafeTensor::from_f32({n, C, 910}, bt.comp.data()));
  f.add("loops", SafeTensor::from_f32({n, L, 8}, bt.loops.data()));
  const std::vector<float> expr = bt.expr_per_datapoint();
  f.add("expr", SafeTensor::from_f32({n, C, 66, 11}, expr.data()));
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
                {"generator", "bench/bench_export_batch.cpp"},
                {"source", source},
                {"footprint", footprint},
                {"tree", tree_json(t)},
                {"batch", std::to_string(n)},
                {"n_comps", std::to_string(C)},
                {"n_loops", std::to_string(L)}};
  lcm::write_safetensors(path, f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Export prepared LOOPerSet batches as safetensors for the PyTorch reference"};
  std::string data = "/work/shared/data/looperset-sample/mini.jsonl.gz";
  std::string out = "tests/fixtures/model_batch_input.safetensors";
  std::string cache_dir = "/tmp/lcm-export-batch-cache";
  std::string dump_dir;
  int64_t max_points = 32;
  int dump = 0;
  int batch_size = 32;
  int min_functions = 0;
  app.add_option("--data", data, "LOOPerSet file (.jsonl.gz)");
  app.add_option("--out", out, "output file (single-batch mode)");
  app.add_option("--cache-dir", cache_dir, "prepare cache folder");
  app.add_option("--max-points", max_points, "datapoints kept of the chosen batch (single mode)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size, "datapoints per batch when preparing")
      ->check(CLI::PositiveNumber);
  app.add_option("--dump", dump, "write the first N batches (shuffled order) instead of one fixture");
  app.add_option("--dump-dir", dump_dir, "folder of --dump");
  app.add_option("--min-functions-per-footprint", min_functions,
                 "small-footprint rule of model-spec §3.11 (lcm-train uses 2 for the training "
                 "split, 0 for validation; default 0 keeps every group)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    lcm::data::PrepareOptions opt;
    opt.split = "export_bs" + std::to_string(batch_size) + "_mf" + std::to_string(min_functions) + "_" +
                std::filesystem::path(data).stem().stem().string();
    opt.source = data;
    opt.cache_dir = cache_dir;
    opt.batching.batch_size = batch_size;
    opt.batching.min_functions_per_footprint = min_functions;  // 0: any tree may be chosen
    opt.nb_workers = 2;
    opt.print_skips = 0;
    std::filesystem::create_directories(cache_dir);
    const auto split = lcm::data::prepare_split(opt);
    const auto& ds = split.dataset;
    std::printf("%s: %zu programs, %zu batches\n", data.c_str(), ds.programs.size(),
                ds.batches.size());
    if (ds.batches.empty()) {
      std::fprintf(stderr, "bench_export_batch: no batches in %s\n", data.c_str());
      return 1;
    }
    if (dump > 0) {
      if (dump_dir.empty()) {
        std::fprintf(stderr, "bench_export_batch: --dump needs --dump-dir\n");
        return 1;
      }
      std::filesystem::create_directories(dump_dir);
      // the first N batches of the (seeded, shuffled) training order: a representative sample
      for (int i = 0; i < dump && i < int(ds.batches.size()); ++i) {
        const int64_t b = i;
        const BatchTensors bt = ds.materialize(b);
        const std::string path = dump_dir + "/batch_" + std::to_string(i) + ".safetensors";
        write_batch(path, bt, bt.batch, ds.tree(b), data, ds.groups[ds.batches[b].group].footprint);
        std::printf("%s: B=%lld C=%lld L=%lld nodes=%zu roots=%zu\n", path.c_str(),
                    (long long)bt.batch, (long long)bt.n_comps, (long long)bt.n_loops,
                    ds.tree(b).nodes.size(), ds.tree(b).roots.size());
      }
      return 0;
    }
    // single batch: best tree score, then loop vectors that are not all zero and differ between
    // datapoints (so the loop-vector path of §5.4 step 5c carries signal), then several distinct
    // programs (program-level sharing is exercised), then the fullest batch, then the fewest
    // computations
    int64_t best = 0;
    auto key = [&](int64_t b) {
      const auto& g = ds.groups[ds.batches[b].group];
      const BatchTensors bt = ds.materialize(b);
      const int64_t n = std::min<int64_t>(bt.batch, max_points);
      const int64_t row = bt.n_loops * 8;
      bool loops_vary = false;
      for (int64_t i = 1; i < n && !loops_vary; ++i)
        for (int64_t k = 0; k < row; ++k) loops_vary |= bt.loops[i * row + k] != bt.loops[k];
      std::vector<int32_t> progs(bt.program_of.begin(), bt.program_of.begin() + n);
      std::sort(progs.begin(), progs.end());
      const bool several = std::unique(progs.begin(), progs.end()) - progs.begin() >= 2;
      return std::make_tuple(tree_score(ds.tree(b)), int(loops_vary && several), int(loops_vary),
                             int(several), n,
                             -g.n_comps, -b);
    };
    for (int64_t b = 1; b < int64_t(ds.batches.size()); ++b)
      if (key(b) > key(best)) best = b;
    const BatchTensors bt = ds.materialize(best);
    const int64_t n = std::min<int64_t>(bt.batch, max_points);
    const auto& tree = ds.tree(best);
    const std::string fp = ds.groups[ds.batches[best].group].footprint;
    write_batch(out, bt, n, tree, data, fp);
    std::printf("wrote %s: batch %lld, B=%lld C=%lld L=%lld, tree score %d, footprint %s\n",
                out.c_str(), (long long)best, (long long)n, (long long)bt.n_comps,
                (long long)bt.n_loops, tree_score(tree), fp.c_str());
    std::printf("tree %s\n", tree_json(tree).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_export_batch: %s\n", e.what());
    return 1;
  }
  return 0;
}
