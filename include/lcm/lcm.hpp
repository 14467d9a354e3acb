// liblcm: the lcm cost model in-process, for a C++ autoscheduler (docs/tools.md "liblcm").
// Load a checkpoint once, then ask for the predicted speedups of candidate schedules of a
// program, given as the JSON the Tiramisu autoscheduler writes: the program annotation and
// per-computation schedule objects. This header needs only the C++17 standard library; link
// with lcm::lcm (find_package(lcm)). The C API is lcm/lcm.h.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace lcm {

/// Thrown by Predictor: a checkpoint or configuration that cannot be loaded, or a program that
/// cannot be scored (malformed JSON, a program the feature rules reject: depth > 5, > 15 reads,
/// unparseable bounds, ...). `reason` is lcm's short name for it ("malformed_json",
/// "depth_gt_5", "config", "load", ...), what() the message.
class Error : public std::runtime_error {
 public:
  Error(std::string reason, const std::string& message);
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

/// What a Predictor is opened with.
struct PredictorOptions {
  std::string weights_path;  ///< cost-model checkpoint (.safetensors) written by lcm-train
  std::string config_file;   ///< optional YAML config (the tools' --config); "" = built-in defaults
  /// key=value settings applied last, as on the tools' command lines, e.g.
  /// "training.device=cuda:0", "training.threads=1" (the default here: one engine thread per
  /// Predictor).
  std::vector<std::string> overrides;
  std::size_t cache_programs = 64;  ///< programs kept featurized (least recently used dropped)
  /// The Predictor's memory while it scores, in MiB (lcm-serve --max-request-memory): model,
  /// program cache and the calls being scored, each by its estimate before it allocates. A call
  /// with more schedules than one forward fits is scored in several; one whose program (or one
  /// schedule's forward) does not fit throws Error "request_too_large". At least 128.
  std::size_t max_request_memory_mib = 1024;
};

/// One schedule's answer (Predictor::score): its predicted speedup, or `error_speedup` with the
/// reason it could not be scored (e.g. "malformed_json", "transformations_gt_4").
struct Score {
  double speedup = 0;
  std::string reason;  ///< "" when scored
  std::string detail;
  bool ok() const { return reason.empty(); }
};

/// A loaded cost model. Thread-safe: any number of threads may call predict()/score() on one
/// Predictor at once (they share its program cache; forwards run one at a time).
class Predictor {
 public:
  /// The speedup reported for a schedule that cannot be scored: 0, strictly below every real
  /// answer (a scored schedule's speedup is finite and ≥ e^−50 for every kind of model).
  static constexpr double error_speedup = 0.0;

  /// Loads the checkpoint. Throws Error (reason "config" for a bad option or override, "load"
  /// for a missing or incompatible checkpoint).
  explicit Predictor(const PredictorOptions& options);
  /// Predictor({weights_path}).
  explicit Predictor(const std::string& weights_path);
  ~Predictor();
  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  /// Predicted speedups (× over the untransformed program) of `schedule_jsons` (each one schedule
  /// object: comp00: {tiling, unrolling_factor, parallelized_dim, shiftings,
  /// transformations_list}, fusions, tree_structure, ...) of the program `program_json` (its
  /// program annotation). `untransformed_json` is the program's untransformed schedule, whose
  /// tree_structure gives the loop tree ("" = the iterators' parent/child links). All schedules
  /// in one batched forward; the result follows their order. A schedule that cannot be scored
  /// gets error_speedup. Throws Error when the program cannot be scored.
  std::vector<double> predict(const std::string& program_json,
                              const std::vector<std::string>& schedule_jsons,
                              const std::string& untransformed_json = "") const;
  /// predict() with the reason of each schedule that could not be scored.
  std::vector<Score> score(const std::string& program_json,
                           const std::vector<std::string>& schedule_jsons,
                           const std::string& untransformed_json = "") const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The library's version, "MAJOR.MINOR.PATCH".
const char* library_version();

/// Receives one line of liblcm's warnings and notes, without a newline: e.g. "lcm: warning: 64
/// threads requested but this machine has 16 hardware threads; ..." (training.threads above the
/// machine's), "note: model sizes taken from the checkpoint (...), not from model.*" (opening a
/// checkpoint whose sizes differ from the configured model.*).
using LogCallback = std::function<void(const std::string& line)>;

/// Sets where liblcm's warnings and notes go: `callback`, or nowhere when it is empty (the
/// default). liblcm never writes to the host's stderr or stdout; errors are thrown (Error), not
/// logged. Process-wide (the C API's lcm_set_log_callback sets the same callback); thread-safe.
/// The callback runs on the thread that calls into liblcm, possibly on several at once; an
/// exception it throws is dropped.
void set_log_callback(LogCallback callback);

}  // namespace lcm
