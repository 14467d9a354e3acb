// training.host_memory_budget: which programs keep their expanded schedule rows ([S,C,146] and
// [S,L,8] float32) in host memory and which stay compact, their rows rebuilt from the schedule
// descriptors (features.hpp schedule_rows) whenever a batch needs them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace lcm::data {

/// What place_rows() kept in memory and left compact.
struct RowPlacement {
  int64_t programs_held = 0, programs_compact = 0;
  int64_t schedules_held = 0, schedules_compact = 0;
  int64_t bytes_held = 0;      // expanded rows held, bytes
  int64_t bytes_compact = 0;   // what the compact programs' rows would take expanded, bytes
  int64_t bytes_resident = 0;  // compact program data every program keeps (resident_bytes), bytes
  int64_t budget = 0;          // the budget it placed within, bytes
};

/// Bytes of one program's expanded schedule rows: S · (C · 146 + L · 8) · 4.
int64_t expanded_row_bytes(const ProgramFeatures& p);

/// Bytes one program keeps in memory whether its rows are expanded or not: its static columns
/// and expressions, labels, times, schedule indices, sched_str, descriptors, tree and the
/// batches' references to its schedules (an estimate of the heap it holds, from the vectors'
/// sizes; std::string and allocator overheads counted at their usual 64-bit sizes).
int64_t resident_bytes(const ProgramFeatures& p);

/// Walks the programs of `sets` in order (training first) and keeps each one's rows in memory
/// while the compact data of every program (resident_bytes) plus the rows held so far fit
/// `budget` bytes (first fit: a program that does not fit is left compact and the walk goes on),
/// expanding compact programs that fit (load from the descriptors) and dropping the rows of
/// those that do not. A program without descriptors keeps its rows whatever the budget (counted
/// as held). Results do not change: both forms give the same bits (schedule_rows).
RowPlacement place_rows(const std::vector<Dataset*>& sets, int64_t budget);

/// One line: "host memory: C MiB of compact program data and schedule rows of P of Q programs
/// (S of T schedules, X MiB) held within training.host_memory_budget (B MiB); the other rows
/// (Y MiB expanded) are rebuilt from their descriptors at batch time" (with a note when the
/// compact data alone exceeds the budget: every program stays compact).
std::string row_placement_summary(const RowPlacement& r);

/// What lcm-train holds in host memory outside the data that training.host_memory_budget
/// places, in bytes.
struct HostMemoryOutside {
  int64_t process = 0;      // resident before the data was read: executable, libraries, threads
  int64_t model_state = 0;  // the model's weights and gradients and the optimizer's two moments
  int64_t batches = 0;      // the batch tensors in use at once (the largest batch, twice)
};

/// Bytes of the dense float32 tensors of batch `b` of `ds` (BatchTensors: [Σ C, 910] comp,
/// [Σ L, 8] loops, [B] speedup, [Σ_p C_p, 66, 11] expr of its distinct programs). Throws
/// std::out_of_range for a bad b.
int64_t batch_tensor_bytes(const Dataset& ds, int64_t b);

/// One line: "host memory outside training.host_memory_budget (B MiB), which holds the training
/// and validation data (C MiB compact, X MiB of expanded rows): the process before the data P MiB,
/// the model's weights, gradients and optimizer moments M MiB, the batch tensors T MiB (the
/// largest batch twice: the one trained and the one built beside it) and the tape's activations
/// (measured after the first step)", and, when the compact data alone exceeds the budget, "; the
/// compact data exceeds the budget by D MiB (it is held whole: the budget cannot shrink it)".
std::string host_memory_outside_summary(const RowPlacement& r, const HostMemoryOutside& o);

/// This process's resident set now (VmRSS) and its peak so far (VmHWM), in bytes, from
/// /proc/self/status; 0 when it cannot be read.
int64_t process_resident_bytes();
int64_t process_peak_resident_bytes();

}  // namespace lcm::data
