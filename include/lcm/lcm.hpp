// liblcm: the lcm cost model in-process, for a C++ autoscheduler (docs/tools.md "liblcm").
// Load a checkpoint once, then ask for the predicted speedups of candidate schedules of a
// program, given as the JSON the Tiramisu autoscheduler writes: the program annotation and
// per-computation schedule objects. This header needs only the C++17 standard library; link
// with lcm::lcm (find_package(lcm)). The C API is lcm/lcm.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
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
  /// What observe() learns (docs/tools.md "Learning during search"): "VARIANT[,key=value...]",
  /// VARIANT "none", "correction" (a per-program correction of ln speedup), "finetune" (a few
  /// AdamW steps on the program's observed schedules, per-program weights) or "both"; keys of
  /// the fine-tuning: steps, lr, anchor, head_only (0|1), buffer, programs, synchronous (0|1).
  /// A bad one throws Error "config".
  std::string learning = "correction";
  /// Each cached program's memo of the rows, loop-tree nodes and outputs its calls computed, in
  /// KiB per ensemble member (lcm-serve --memo-kib), counted in the program cache's memory: a call
  /// reuses what earlier calls computed from the same inputs, with the same answers. 0: none.
  std::size_t memo_kib = 2048;
  /// The weights' format (lcm-serve --weights): "fp32" (the checkpoint's values) or "bf16" (the
  /// weight matrices rounded to BF16 and read as 2-byte copies by the one-schedule products,
  /// sums in FP32: faster calls, answers within BF16 rounding of FP32's; CPU only). Another
  /// value throws Error "config".
  std::string weights = "fp32";
};

/// One schedule's answer (Predictor::score): its predicted speedup, or `error_speedup` with the
/// reason it could not be scored (e.g. "malformed_json", "transformations_gt_4").
struct Score {
  double speedup = 0;
  std::string reason;  ///< "" when scored
  std::string detail;
  bool ok() const { return reason.empty(); }
};

/// What Predictor::observe learned from one measured schedule (docs/tools.md "Learning during
/// search").
struct Observed {
  double measured_speedup = 0;   ///< untransformed time / min(execution_times), floored at 0.01
  double predicted_speedup = 0;  ///< the model's own answer for the schedule (no correction)
  double corrected_speedup = 0;  ///< the answer for it after this observation
  double offset = 0;             ///< the program's correction: ln s' = offset + scale · ln s
  double scale = 1;
  std::int64_t observations = 0;  ///< observations of the program the correction is fitted to
  bool untransformed = false;     ///< the schedule was the untransformed one (its time is kept)
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

  /// Learning during search: tells the Predictor that schedule `schedule_json` of the program
  /// `program_json` ran in `execution_times_ms` (ms, each > 0 and finite; their minimum counts).
  /// Its measured speedup is untransformed time / min(times) (floored at 0.01, as lcm-train's
  /// labels, model-spec §4); the untransformed time is `untransformed_time_ms` when given (not
  /// NaN), else that of an earlier observation of the program's untransformed schedule
  /// (observing it records its time). The program's correction ln s' = a + b·ln s is refitted
  /// to all its observations (least squares shrunk toward a = 0, b = 1; b > 0) and applied to
  /// every later predict()/score() of that program (the same `program_json` text), and of no
  /// other. A monotone map: it corrects the absolute speedups, never the order of one program's
  /// schedules. Bounded time (one schedule's forward and a closed-form fit). Throws Error:
  /// "bad_execution_times", "bad_untransformed_time", "no_untransformed_time", the schedule's
  /// reason when it cannot be applied to the program, and predict()'s errors for the program.
  Observed observe(const std::string& program_json, const std::string& schedule_json,
                   const std::vector<double>& execution_times_ms,
                   const std::string& untransformed_json = "",
                   double untransformed_time_ms = std::numeric_limits<double>::quiet_NaN());
  /// Forgets the observations of `program_json` (false: it had none); its predictions are the
  /// model's own again, bit for bit.
  bool reset_observations(const std::string& program_json);
  /// Forgets every observation.
  void reset_observations();
  /// Blocks until the fine-tuning steps of every observation made so far have run (learning
  /// "finetune" or "both" without synchronous=1; otherwise returns at once): afterwards the
  /// answers are those of a synchronous Predictor.
  void wait_for_learning();
  /// Writes the adapted state (every program's observations) to `path` atomically (temp +
  /// rename), as a versioned JSON file (docs/tools.md "Learning during search"). Throws Error
  /// "io" when it cannot be written.
  void save_adaptation(const std::string& path) const;
  /// Replaces the adapted state with the file `path` (save_adaptation's). Throws Error
  /// "bad_adaptation" (state unchanged) when it cannot be read, is not one, or was learned with
  /// another checkpoint.
  void load_adaptation(const std::string& path);

  /// What this Predictor scores with, as one JSON object (text): "library_version",
  /// "weights_path", "device", "threads", "ensemble_size" (1, or K members averaged),
  /// "parameters" (weights of one member), "model" (the checkpoint's lcm.model_config: sizes,
  /// output, encoder; null when absent), "preset" (model.preset of the configuration the
  /// Predictor was opened with: checkpoints do not record the training preset), "input_scaling"
  /// (its mode), "calibration" (the applied map's lcm.calibration object; null when none is
  /// applied), "training_data" (the checkpoint's run metadata: train_file, valid_file,
  /// experiment, run_id, epoch, val_mape, loss, select_metric, selection; each null when the
  /// checkpoint lacks it; docs/run-state.md). Computed once when the Predictor is opened.
  const std::string& info_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One skipped record, program or schedule of a program file (docs/data-format.md § Skips):
/// the reader's named reason, where, and a detail for the human.
struct Skip {
  std::string level;   ///< "line", "program", "schedule" or "note" (kept, but odd)
  std::string reason;  ///< e.g. "malformed_json", "empty_schedules_list", "duplicate_program"
  std::string file;
  std::int64_t line = 0;  ///< 1-based line of the record (0: unknown)
  std::string program;    ///< "" when the name could not be read
  std::int64_t schedule = -1;
  std::string detail;
};

/// One program of a data file in the forms Predictor takes (those lcm-serve's jsonl protocol
/// takes): the program annotation with its function_name, the untransformed schedule
/// (schedules_list[0]) and every schedule of the record, each without execution_times.
struct ProgramRecord {
  std::string name;
  std::string file;
  std::int64_t line = 0;                    ///< 1-based line of the record in `file` (0: unknown)
  std::string program_json;                 ///< program_annotation (+ function_name)
  std::string untransformed_json;           ///< schedules_list[0] without execution_times
  std::vector<std::string> schedule_jsons;  ///< every schedule, in file order
  /// Measured speedup (×) of each schedule: initial_execution_time / min(execution_times),
  /// floored at 0.01 as lcm-train's labels (model-spec §4); NaN when the schedule has no usable
  /// times or the reader marked it malformed (its reason is in schedule_problems).
  std::vector<double> measured_speedups;
  /// Per schedule: the reader's reason why it is malformed ("" when it is not), e.g.
  /// "bad_tiling"; Predictor answers such a schedule with an error.
  std::vector<std::string> schedule_problems;
};

/// Reads the programs of a LOOPerSet (JSON Lines) or legacy Tiramisu file, plain or gzip, with
/// lcm's own reader (the one lcm-prepare and lcm-predict use: data/reader.hpp, the loop-level
/// base detected per file as lcm-prepare does): a record the reader rejects is skipped and
/// named (skips()), as is a second record of the same program name ("program/duplicate_program").
/// Memory: one record at a time. Not thread-safe (one reader per thread).
class ProgramFile {
 public:
  /// Opens `path`. Throws Error with reason "data" when the file cannot be opened or read, is not
  /// gzip or plain text, or holds times of several machines (its message names the file).
  explicit ProgramFile(const std::string& path);
  ~ProgramFile();
  ProgramFile(ProgramFile&&) noexcept;
  ProgramFile& operator=(ProgramFile&&) noexcept;
  ProgramFile(const ProgramFile&) = delete;
  ProgramFile& operator=(const ProgramFile&) = delete;
  /// Fills `out` with the next program; false at the end of the file. Throws Error "data" as
  /// the constructor.
  bool next(ProgramRecord& out);
  /// The skips so far (the first 1000 events; notes included).
  std::vector<Skip> skips() const;
  /// The number of skips so far by "level/reason" (every event, as lcm-prepare's summary).
  std::vector<std::pair<std::string, std::int64_t>> skip_counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// lcm-eval's metrics of one program (docs/model-spec.md §7, model/metrics.hpp): values are
/// rounded to 6 decimals first, as lcm-eval does. NaN where undefined (fewer than 2 schedules,
/// constant input).
struct ProgramMetrics {
  std::string program;
  std::int64_t n_schedules = 0;
  double mape = 0;  ///< mean absolute percentage error (%)
  double spearman = 0, ndcg = 0, ndcg_5 = 0, ndcg_1 = 0;
  double top1_recovered = 0, top5_recovered = 0;  ///< best true speedup among the first k / best
};

/// lcm-eval's metrics of a set of datapoints: per program, their unweighted means over programs
/// (NaN skipped; NaN when all are NaN) and the datapoint-weighted ones.
struct MetricsSummary {
  std::vector<ProgramMetrics> programs;  ///< in order of first appearance
  std::int64_t n_datapoints = 0;
  double mean_mape = 0, mean_spearman = 0, mean_ndcg = 0, mean_ndcg_5 = 0, mean_ndcg_1 = 0;
  double mean_top1_recovered = 0, mean_top5_recovered = 0;
  std::int64_t n_spearman = 0, n_ndcg = 0;  ///< programs that gave a non-NaN value
  double weighted_mape = 0;                 ///< mean APE over datapoints (%)
  double median_error_factor = 0;           ///< median of max(pred/measured, measured/pred)
  double within_2x = 0;                     ///< share of datapoints predicted within a factor 2
};

/// lcm-eval's metrics (the same code): datapoints i = 0..N-1 of program `programs[i]`, measured
/// speedup `measured[i]`, predicted `predicted[i]` (×); `rank` (empty: `predicted`) orders the
/// schedules for Spearman, nDCG and top-k (lcm-eval ranks by the uncalibrated predictions when a
/// calibration map is applied). Throws Error "bad_argument" when the sizes differ or N = 0.
MetricsSummary compute_metrics(const std::vector<std::string>& programs,
                               const std::vector<double>& measured,
                               const std::vector<double>& predicted,
                               const std::vector<double>& rank = {});

/// lcm-eval's table of `m` as it prints it (with the per-program rows of --per-program when
/// `per_program`).
std::string metrics_table(const MetricsSummary& m, bool per_program = false);

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
