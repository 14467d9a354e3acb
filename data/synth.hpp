// Synthetic LOOPerSet-like programs (docs/synth.md): random loop nests, schedules using every
// transformation kind, times from a documented analytic model with log-normal noise, written as
// the JSONL.gz layout of docs/data-format.md; deterministic for a seed, millions of schedules a
// minute.
#pragma once
#include <cstdint>
#include <string>

#include "data/program.hpp"
#include "data/synth_options.hpp"

namespace lcm::data {

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
