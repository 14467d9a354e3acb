// Synthetic LOOPerSet-like programs (docs/synth.md): random loop nests, schedules using every
// transformation kind, times from a documented analytic model with log-normal noise, written as
// the JSONL.gz layout of docs/data-format.md; deterministic for a seed, millions of schedules a
// minute.
#pragma once
#include <cstdint>
#include <string>

#include "data/program.hpp"

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

/// Generates program `index` (0-based) of the stream defined by opt.seed: iterators, computations,
/// opt.schedules_per_program schedules (schedule 0 untransformed) with times in ms. Pure function
/// of (opt.seed, index, opt.schedules_per_program, opt.structures, opt.*_fraction, tm); the
/// fractions only replace times. Throws std::invalid_argument when schedules_per_program < 1,
/// structures < 0, or a fraction ∉ [0, 1] (or failed + missing > 1); nothing else.
Program synth_program(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm = {});

/// Appends the JSON object of program `index` (one JSONL line, without the newline) in the
/// LOOPerSet layout of data-format.md: the same program synth_program returns, written with the
/// formatting quirks of the real data (some bounds, tile and unroll factors as numeric strings,
/// `null` or `[]` for missing times) drawn deterministically from (seed, index).
/// Throws std::invalid_argument on bad options.
void synth_program_json(const SynthOptions& opt, int64_t index, std::string& out,
                        const SynthTimeModel& tm = {});

/// What write_synth_file produced.
struct SynthStats {
  int64_t programs = 0;
  int64_t schedules = 0;
  int64_t uncompressed_bytes = 0;
  int64_t compressed_bytes = 0;
};

/// Writes opt.programs programs as gzip-compressed JSONL to `path` atomically (the temp file
/// lcm::temp_path_for(path) in the same directory, then rename; the temp files of `path` that
/// killed processes of this host left are removed first). The file is one standard gzip member;
/// chunks of programs are generated and deflated in parallel, so the bytes do not depend on
/// opt.threads. Throws std::runtime_error "synth: cannot write <path>: <reason>" naming the path
/// (never its temp file) on I/O failure, std::invalid_argument on bad options.
SynthStats write_synth_file(const std::string& path, const SynthOptions& opt,
                            const SynthTimeModel& tm = {});

}  // namespace lcm::data
