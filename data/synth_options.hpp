// The options of the synthetic generator (docs/synth.md): its knobs and the parameters of the
// analytic time model, apart from the entry points (synth.hpp) so that the generator's internal
// pieces (synth_internal.hpp) see the options without the functions built on them.
#pragma once
#include <cstdint>

namespace lcm::data {

/// Knobs of the synthetic generator (docs/synth.md lists the distributions they control).
struct SynthOptions {
  int64_t programs = 100;  // number of program records (lines)
  int schedules_per_program =
      32;             // entries of schedules_list, including the untransformed one (≥ 1)
  uint64_t seed = 1;  // everything is a pure function of (seed, program index)
  double failed_fraction = 0.0;   // fraction of schedules ≥ 1 whose times are [-1] (failed run)
  double missing_fraction = 0.0;  // fraction of schedules ≥ 1 with no times (null or [])
  /// Number of distinct loop-tree skeletons (nest shapes, depths, computation placement, hence
  /// footprints, docs/model-spec.md §2.2) programs are drawn from; 0 = every program draws its own.
  /// Bounds, accesses, expressions and schedules are drawn per program either way. A small pool
  /// makes footprint groups (batching) hold several programs, as in real data. The pool does
  /// not depend on the seed, so files written with different seeds share tree shapes, as the
  /// train and validation splits of real data do.
  int structures = 32;
  int threads = 0;            // generator/compressor threads; 0 = hardware concurrency
  int compression_level = 1;  // zlib level 0..9
  /// Programs per independently deflated chunk; 0 = ⌈4096 / schedules_per_program⌉. Changes the
  /// compressed bytes (not the decompressed text); the thread count changes neither.
  int64_t chunk_programs = 0;
};

/// Parameters of the analytic time model (docs/synth.md §3). Defaults are the documented values.
struct SynthTimeModel {
  double ns_per_op_float64 = 1.0;  // ns per weighted expression op per iteration
  double ns_per_op_float32 = 0.8;
  double ns_per_op_int32 = 0.7;
  double ns_per_access = 0.5;     // ns per memory access per iteration (stride-1, in cache)
  double strided_penalty = 3.0;   // extra cost of a strided access relative to stride-1
  double capacity_penalty = 1.5;  // extra memory factor when the inner footprint exceeds the cache
  double cache_bytes = 1 << 20;   // "L2" size, bytes
  int cores = 16;                 // parallel cores
  double parallel_overhead_ns = 2000;  // fork/join cost per execution of the parallel loop
  double noise_sigma = 0.03;           // log-normal noise σ per measurement
  double outlier_probability = 0.05;   // chance that one measurement is multiplied by U(1.2, 3)
};

}  // namespace lcm::data
