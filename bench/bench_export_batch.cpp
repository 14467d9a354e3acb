// Exports real prepared batches (docs/model-spec.md §5.4 inputs) as safetensors, for the PyTorch
// reference of the cost model (bench/reference/looper_model.py, make_model_fixture.py,
// bench_reference.py) and the golden model test (tests/test_model_golden.cpp). Not a timing
// benchmark.
//
// Usage:
//   bench_export_batch [--data FILE] [--out FILE] [--max-points N]
//       writes ONE batch: the one with the richest tree (several roots, loop nodes without
//       computations, nodes with several computations / children), cut to N datapoints
//       (default: data/looperset-sample/mini.jsonl.gz →
//       tests/fixtures/model_batch_input.safetensors)
//   bench_export_batch --dump N --dump-dir DIR [--data FILE] [--batch-size S]
//       writes the first N batches of the split's seeded, shuffled batch order (batch_size S) as
//       DIR/batch_<i>.safetensors (a representative sample; inputs for bench_reference.py).
//   bench_export_batch --programs-dir DIR [--program-schedules K] [--data FILE]
//       writes one-program batches (the first K kept schedules of one program, as an autoscheduler
//       asks for them) as DIR/program_largest.safetensors (most computations among programs with
//       >= K kept schedules) and DIR/program_median.safetensors (median computation count); the
//       metadata names the program and raw_schedules (schedules_list entries covering the K),
//       so bench_model can also time the features from the raw record.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/batch_io.hpp"
#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "engine/safetensors.hpp"

namespace {

using lcm::SafeTensor;
using lcm::SafeTensorsFile;
using lcm::data::BatchTensors;
using lcm::data::ProgramTree;
using lcm::data::tree_json;

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
  std::string programs_dir;
  int64_t program_schedules = 100;
  app.add_option("--data", data, "LOOPerSet file (.jsonl.gz)");
  app.add_option("--out", out, "output file (single-batch mode)");
  app.add_option("--cache-dir", cache_dir, "prepare cache folder");
  app.add_option("--max-points", max_points, "datapoints kept of the chosen batch (single mode)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size, "datapoints per batch when preparing")
      ->check(CLI::PositiveNumber);
  app.add_option("--dump", dump,
                 "write the first N batches (shuffled order) instead of one fixture");
  app.add_option("--dump-dir", dump_dir, "folder of --dump");
  app.add_option("--min-functions-per-footprint", min_functions,
                 "small-footprint rule of model-spec §3.11 (lcm-train uses 2 for the training "
                 "split, 0 for validation; default 0 keeps every group)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--programs-dir", programs_dir, "write one-program inference batches here");
  app.add_option("--program-schedules", program_schedules, "schedules per one-program batch")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    lcm::data::PrepareOptions opt;
    opt.split = "export_bs" + std::to_string(batch_size) + "_mf" + std::to_string(min_functions) +
                "_" + std::filesystem::path(data).stem().stem().string();
    opt.source = data;
    opt.cache_dir = cache_dir;
    opt.batching.batch_size = batch_size;
    opt.batching.min_functions_per_footprint = min_functions;  // 0: any tree may be chosen
    // one tree per batch: the PyTorch reference (bench/reference) walks a single footprint
    opt.batching.mode = lcm::data::BatchingMode::PerFootprint;
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
    if (!programs_dir.empty()) {
      std::vector<size_t> fit;  // programs with >= K kept schedules, by computation count
      for (size_t p = 0; p < ds.programs.size(); ++p)
        if (ds.programs[p].n_schedules() >= program_schedules) fit.push_back(p);
      if (fit.empty()) {
        std::fprintf(stderr, "bench_export_batch: no program with >= %lld schedules in %s\n",
                     (long long)program_schedules, data.c_str());
        return 1;
      }
      std::stable_sort(fit.begin(), fit.end(), [&](size_t a, size_t b) {
        const auto &pa = ds.programs[a], &pb = ds.programs[b];
        return std::make_pair(pa.n_comps, pa.tree.nodes.size()) <
               std::make_pair(pb.n_comps, pb.tree.nodes.size());
      });
      std::filesystem::create_directories(programs_dir);
      const std::pair<const char*, size_t> picks[] = {{"largest", fit.back()},
                                                      {"median", fit[fit.size() / 2]}};
      for (const auto& [tag, p] : picks) {
        const auto& pf = ds.programs[p];
        const int64_t K = program_schedules, C = pf.n_comps, L = pf.n_loops;
        const BatchTensors bt = lcm::data::program_batch(pf, int32_t(p), K);
        const std::string path = programs_dir + "/program_" + tag + ".safetensors";
        lcm::data::write_batch_file(
            path, bt, K, pf.tree, data, pf.footprint,
            {{"program", pf.name},
             {"raw_schedules", std::to_string(pf.schedule_index[size_t(K - 1)] + 1)}});
        std::printf("%s: program %s, %lld schedules, C=%lld L=%lld nodes=%zu roots=%zu\n",
                    path.c_str(), pf.name.c_str(), (long long)K, (long long)C, (long long)L,
                    pf.tree.nodes.size(), pf.tree.roots.size());
      }
      return 0;
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
        lcm::data::write_batch_file(path, bt, bt.batch, ds.tree(b), data,
                                    ds.groups[ds.batches[b].group].footprint);
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
                             int(several), n, -g.n_comps, -b);
    };
    for (int64_t b = 1; b < int64_t(ds.batches.size()); ++b)
      if (key(b) > key(best)) best = b;
    const BatchTensors bt = ds.materialize(best);
    const int64_t n = std::min<int64_t>(bt.batch, max_points);
    const auto& tree = ds.tree(best);
    const std::string fp = ds.groups[ds.batches[best].group].footprint;
    lcm::data::write_batch_file(out, bt, n, tree, data, fp);
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
