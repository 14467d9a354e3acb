// One batch of model inputs (tree + BatchTensors) as a safetensors file: the exchange format that
// bench_export_batch writes, and that the PyTorch reference (bench/reference/looper_model.py),
// the golden model test and the side-by-side benchmarks read, so both sides run identical inputs.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "data/dataset.hpp"

namespace lcm::data {

/// A batch read back from a file: its loop tree, its tensors and the file's metadata.
struct BatchFile {
  ProgramTree tree;
  BatchTensors bt;
  std::map<std::string, std::string> metadata;
};

/// Writes the first `n` datapoints of `bt` (1 ≤ n ≤ bt.batch) and tree `t` at `path` (atomic):
///   comp [n, C, 910] F32, loops [n, L, 8] F32, expr [n, C, 66, 11] F32 (per datapoint),
///   speedup [n] F32, program_of [n] I64 (index into the batch's distinct programs),
///   tree.loop_index [N] I64, tree.comp_offsets [N+1] + tree.comp_indices I64 (CSR),
///   tree.child_offsets [N+1] + tree.children I64 (CSR), tree.roots [R] I64;
///   metadata: generator, source, footprint, tree (JSON), batch, n_comps, n_loops, plus `extra`.
/// Throws std::invalid_argument for a bad n or a batch of several segments (mixed footprints),
/// std::runtime_error naming the path on I/O failure.
void write_batch_file(const std::string& path, const BatchTensors& bt, int64_t n,
                      const ProgramTree& t, const std::string& source, const std::string& footprint,
                      const std::map<std::string, std::string>& extra = {});

/// Reads a file of write_batch_file. Distinct programs follow program_of (the expression rows of
/// a program are taken from its first datapoint); with `program_per_datapoint` every datapoint is
/// its own program (P = B, also a valid layout). Throws std::runtime_error naming the path and
/// the problem: a missing tensor, a wrong shape, an expression row that differs between
/// datapoints of one program, a tree index out of range.
BatchFile read_batch_file(const std::string& path, bool program_per_datapoint = false);

/// The tree as JSON text {"roots": [...], "nodes": [{"loop_index", "comp_indices", "children"}]}.
std::string tree_json(const ProgramTree& t);

}  // namespace lcm::data
