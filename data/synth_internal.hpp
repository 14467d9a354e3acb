// The pieces of the synthetic generator (internal to data/; the public API is synth.hpp): the
// generated record with its time-model facts, the random helpers, and the functions each
// data/synth_*.cpp file provides to the others (docs/synth.md).
#pragma once
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "data/program.hpp"
#include "data/synth_options.hpp"
#include "engine/rng.hpp"

namespace lcm::data::synth_detail {

// ---------------------------------------------------------------- small random helpers
/// An index drawn with probability proportional to the weights `w` (not all zero).
inline int pick_weighted(Rng& r, const std::vector<double>& w) {
  double tot = 0;
  for (double x : w) tot += x;
  double u = r.next_double() * tot;
  for (size_t i = 0; i < w.size(); ++i) {
    if (u < w[i]) return int(i);
    u -= w[i];
  }
  return int(w.size()) - 1;
}
/// A uniform integer in [lo, hi].
inline int between(Rng& r, int lo, int hi) {
  return lo + int(r.below(uint64_t(hi - lo + 1)));
}
/// True with probability p.
inline bool chance(Rng& r, double p) {
  return r.next_double() < p;
}

/// Standard normal by Box–Muller from two counter-based uniforms.
inline double normal(Rng& r) {
  double u1 = 1.0 - r.next_double();  // (0, 1]
  double u2 = r.next_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Rounds to 6 significant digits (times are written like the real data: 0.002161).
inline double round6(double v) {
  if (!(v > 0) || !std::isfinite(v)) return v;
  int e = int(std::floor(std::log10(v)));
  int k = 5 - e;  // decimals to keep
  if (k >= 0 && k <= 22) {
    double s = std::pow(10.0, k);
    return std::round(v * s) / s;
  }
  if (k < 0 && -k <= 22) {
    double s = std::pow(10.0, -k);
    return std::round(v / s) * s;
  }
  return v;
}

// ---------------------------------------------------------------- the generated record
/// One loop of the generated nests (iterator index = position in Record::loops, preorder).
struct Loop {
  int parent = -1;
  int depth = 0;              // 0 = root
  std::vector<int> children;  // loop ids, creation order
  std::vector<int> comps;     // generation-time computation ids placed directly here
  std::string name;
  double lo_mean = 0, hi_mean = 0;  // mean value of the lower / upper bound (for trip counts)
  double trip = 1;                  // mean trip count
  bool constant_bounds = true;
  int64_t lo_const = 0, hi_const = 0;
  std::string lower, upper;  // bound text
};

/// Time-model facts of one computation (absolute order).
struct CompInfo {
  std::vector<int> loops;  // loop ids outer→inner
  double ops = 0;          // weighted op count of the expression
  int type_size = 4;
  int type = 2;                            // 0 int32, 1 float32, 2 float64
  std::vector<std::vector<int>> matrices;  // read accesses then the write access (r × (n+1))
  std::vector<int> buffers;                // buffer id per matrix
  int reduction_level = -1;                // iterator position of the reduction, -1 if none
};

/// One generated program with what the time model and the JSON writer need beyond Program.
struct Record {
  Program program;
  double memory_mb = 0;
  std::vector<Loop> loops;          // index = iterator index (preorder)
  std::vector<CompInfo> info;       // by absolute order
  std::vector<uint8_t> null_times;  // per schedule: 1 = write null instead of [] when no times
};

// ---------------------------------------------------------------- synth_structure.cpp
/// Builds nests, names iterators (preorder) and computations (DFS order = absolute order);
/// comp_loop[c] = the loop computation c is placed in.
void build_structure(Rng& r, Record& rec, std::vector<int>& comp_loop);
/// Chooses extents and bound strings (rectangular, triangular lower/upper, max(0, i)).
void build_bounds(Rng& r, Record& rec);
/// Computations: data types, write and read accesses, expressions, and their CompInfo.
void build_computations(Rng& r, Record& rec, const std::vector<int>& comp_loop);
/// The program's iterators from the loops.
void fill_iterators(Record& rec);
/// The untransformed loop tree.
LoopTree base_tree(const Record& rec);

// ---------------------------------------------------------------- synth_schedules.cpp
/// What the schedules of one program are drawn over.
struct ScheduleSpace {
  std::vector<int> group_of;   // computation → group (computations with one innermost loop)
  std::vector<int> group_rep;  // group → its first computation
  std::vector<std::pair<int, int>> siblings;  // loop pairs fusion may merge
  LoopTree tree0;                             // the untransformed tree
};
ScheduleSpace schedule_space(const Record& rec, const std::vector<int>& comp_loop);
/// A transformed schedule (index ≥ 1, without times) drawn from `r`: up to 8 tries for a
/// sched_str not in `seen` (which it extends); the untransformed schedule is never drawn.
Schedule random_schedule(Rng& r, const Record& rec, const ScheduleSpace& space,
                         std::unordered_set<std::string>& seen);

// ---------------------------------------------------------------- synth_time_model.cpp
/// Mean time (ms) of a schedule under the analytic model of docs/synth.md §3.
double model_time_ms(const Record& rec, const Schedule& s, const SynthTimeModel& tm);
/// The measured times (ms) of one schedule: 30 (or 1–29) noisy, sometimes outlying draws
/// around `mean_ms`, rounded to 6 significant digits.
std::vector<double> measure(Rng& r, double mean_ms, const SynthTimeModel& tm);

// ---------------------------------------------------------------- synth_json.cpp
/// Appends program `index` as one LOOPerSet JSON object (no newline) to `sb`, with the
/// formatting quirks of the real data drawn from (seed, index).
void write_record(const Record& rec, int64_t index, uint64_t seed, rapidjson::StringBuffer& sb);

/// The JSON object of one record written piece by piece, so that a program's schedules can be
/// written as they are drawn (ProgramGenerator) and the text drained from `sb` between them
/// (sb.Clear() between pieces is allowed: the nesting state lives here, not in the buffer). The
/// bytes are those of write_record: head(), then schedule() for schedules 0, 1, … in order,
/// then tail(). `rec` is the same record in every call; its program.schedules is not read.
class RecordJson {
 public:
  RecordJson(rapidjson::StringBuffer& sb, int64_t index, uint64_t seed);
  /// Everything before the first schedule (needs rec.program.initial_execution_time).
  void head(const Record& rec);
  /// One entry of schedules_list; `null_times`: write `null` rather than `[]` when it has no times.
  void schedule(const Record& rec, const Schedule& s, bool null_times);
  /// Closes schedules_list and the record (no newline).
  void tail();

 private:
  rapidjson::Writer<rapidjson::StringBuffer> w_;
  Rng fmt_;  // the formatting quirks of the real data, drawn in writing order
};

// ---------------------------------------------------------------- synth.cpp
/// Throws std::invalid_argument on bad options (synth.hpp).
void check_options(const SynthOptions& opt);

/// Program `index` of the stream defined by opt.seed, its schedules drawn one at a time: the
/// record (without schedules) exists from construction; next() draws schedule 0, 1, … with
/// their times, so a writer holds one schedule at a time (memory: the record, plus the sched_str
/// set of the schedules drawn so far, ~100 bytes each, that keeps them distinct).
/// rec.program.initial_execution_time is set when schedule 0 is drawn.
class ProgramGenerator {
 public:
  ProgramGenerator(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm);
  /// The program's record; program.schedules and null_times stay empty (generate() fills them).
  Record& record() { return rec_; }
  /// Draws the next schedule into `s` and its null-vs-[] choice into `null_times`; false (and
  /// nothing drawn) after opt.schedules_per_program schedules.
  bool next(Schedule& s, bool& null_times);

 private:
  const SynthOptions& opt_;
  const SynthTimeModel& tm_;
  Record rec_;
  Rng r_sched_, r_time_, r_fate_;
  ScheduleSpace space_;
  std::unordered_set<std::string> seen_;
  int next_ = 0;
};

/// Program `index` of the stream defined by opt.seed with all its schedules (synth_program).
Record generate(const SynthOptions& opt, int64_t index, const SynthTimeModel& tm);

}  // namespace lcm::data::synth_detail
