// Learning during search, per program (docs/tools.md "Learning during search"): the measured
// speedups a search observes for schedules of one program fit a correction of that program's
// predicted ln speedup, ln s' = a + b·ln s, which every later prediction of that program takes.
// The state (observations per program, the untransformed schedule's time) is text in and out:
// the callers (serve::Scorer, liblcm) write and read its file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace lcm::model {

/// The prior of the per-program correction ln s' = a + b·ln s: a and b minimise
///   Σ_i (m_i − a − b·p_i)² + offset_weight·a² + scale_weight·(b − 1)²
/// over the program's observations (p_i: the model's ln speedup, m_i: the measured one), i.e.
/// least squares shrunk toward the identity (a = 0, b = 1) as a Gaussian prior with precision
/// offset_weight on a and scale_weight on b−1 (unit noise variance of ln speedup). With one
/// observation at p = 0 the offset moves 1/(1 + offset_weight) of the way to the measurement;
/// the slope moves only with many observations spread in p. b is kept in [min_scale,
/// max_scale] (> 0: the map stays increasing); at a bound b is fixed and a refitted. The
/// weights were chosen by the MAPE of the unmeasured schedules in bench/simulate_search.py's
/// search on the valid split (docs/accuracy.md "Learning during search"): a freer slope
/// (scale_weight 2) extrapolated from the top-ranked schedules to the rest and raised it.
struct CorrectionPrior {
  double offset_weight = 2.0;
  double scale_weight = 100.0;
  double min_scale = 0.05;
  double max_scale = 20.0;
};

/// One program's correction: corrected ln speedup = offset + scale·(model's ln speedup), fitted to
/// `observations` observations (0: the identity, which leaves predictions untouched).
struct Correction {
  double offset = 0;
  double scale = 1;
  int64_t observations = 0;
  /// The corrected speedup (×) of the model's `speedup` (> 0); 0 (an unscored schedule) and
  /// non-finite values are returned as they are; with 0 observations `speedup` itself (bitwise).
  double apply(double speedup) const;
};

/// One observed schedule: the model's (uncorrected) ln speedup and the measured ln speedup.
struct Observation {
  double predicted_ln = 0;
  double measured_ln = 0;
};

/// The least-squares fit of the docstring of CorrectionPrior (closed form: the 2×2 normal
/// equations). Observations with a non-finite value are not counted.
Correction fit_correction(const std::vector<Observation>& observations,
                          const CorrectionPrior& prior = {});

/// The observations of every program a search has measured, and their corrections. Bounded:
/// the last kMaxObservations observations per program (older ones dropped) and kMaxPrograms
/// programs (the least recently observed dropped first): at most about 10 MiB. Thread-safe.
class ProgramCorrections {
 public:
  static constexpr size_t kMaxObservations = 256;
  static constexpr size_t kMaxPrograms = 4096;
  /// The version of to_json's format: 2 (serve::Scorer adds the fine-tuned weights); from_json
  /// reads 1 and 2.
  static constexpr int kFormatVersion = 2;

  explicit ProgramCorrections(CorrectionPrior prior = {}) : prior_(prior) {}

  /// Adds an observation of program `key` (named `name` for messages and the file):
  /// `predicted_speedup` the model's uncorrected answer, `measured_speedup` the measured one
  /// (both > 0 and finite: std::invalid_argument otherwise). Returns the refitted correction.
  Correction observe(const std::string& key, const std::string& name, double predicted_speedup,
                     double measured_speedup);
  /// The correction of program `key` (the identity with 0 observations when it has none).
  Correction correction(const std::string& key) const;
  /// Records the measured time (ms, > 0) of program `key`'s untransformed schedule.
  void set_untransformed_time(const std::string& key, const std::string& name, double time_ms);
  /// The recorded untransformed time of `key` (ms), NaN when none.
  double untransformed_time(const std::string& key) const;
  /// Forgets program `key`; false when it had nothing.
  bool reset(const std::string& key);
  /// Forgets every program.
  void reset();
  /// Programs with state.
  size_t programs() const;

  /// The state as one JSON object: {"format": "lcm-adaptation", "version": 2, "model": <model>,
  /// "prior": {...}, "programs": [{"key", "name", "untransformed_time_ms" (null when none),
  /// "observations": [[predicted_ln, measured_ln], ...]}]} (programs in key order).
  std::string to_json(const std::string& model) const;
  /// Replaces the state by to_json's `text`. Throws std::invalid_argument naming what is wrong
  /// (not JSON, another format or a version other than 1 or 2, a model other than `model` when
  /// both are non-empty,
  /// a non-finite value); the state is unchanged then.
  void from_json(const std::string& text, const std::string& model);

 private:
  struct Program {
    std::string name;
    double untransformed_time_ms;
    std::vector<Observation> observations;  // oldest first
    Correction correction;
    uint64_t last_use = 0;
  };
  Program& touch(const std::string& key, const std::string& name);
  CorrectionPrior prior_;
  mutable std::mutex mu_;
  std::map<std::string, Program> programs_;
  uint64_t clock_ = 0;
};

/// The key of a program for ProgramCorrections: FNV-1a 64 of its annotation's JSON text as 16
/// hex digits (the same text gives the same key in every process and build).
std::string program_key(const std::string& program_json);

}  // namespace lcm::model
