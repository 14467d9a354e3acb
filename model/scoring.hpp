// The one path from a batch's features to the speedups lcm reports: input scaling → forward of
// each ensemble member → relative to the untransformed schedule → ensemble mean → calibration map
// → positive speedup (score_batch). lcm-train's validation, lcm-eval and lcm-predict
// (train::predict_dataset, train::Predictor) and lcm-serve, liblcm and the bindings over them
// (serve::Scorer) all score through it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "data/dataset.hpp"
#include "engine/tape.hpp"
#include "model/calibration.hpp"
#include "model/cost_model.hpp"
#include "model/forward_inputs.hpp"
#include "model/input_scaling.hpp"

namespace lcm::model {

/// The loaded model(s) that score, and what maps their outputs to speedups. Loading them from a
/// checkpoint is train::Predictor's (train/predictor.hpp, train/ensemble.hpp); this holds no file.
struct ScoringModels {
  /// The members, K ≥ 1, of one ModelConfig: a plain checkpoint's model (K = 1) or an ensemble's
  /// K members (docs/accuracy.md). Run in eval mode without gradients; their weights are not
  /// changed (forward() records on a tape, hence not const).
  std::vector<CostModel<float>*> members;
  /// The checkpoint's input scaling (model-spec §3.10); nullptr: the features as they are.
  const InputScaling* scaling = nullptr;
  /// The checkpoint's calibration map (docs/accuracy.md); nullptr or not active(): none.
  const Calibration* calibration = nullptr;
  /// Score relative to the untransformed schedule even when the members were not trained so;
  /// a model with ModelConfig::relative_to_identity always is.
  bool relative_to_identity = false;

  /// members[0]'s configuration. Throws std::invalid_argument when there is no member.
  const ModelConfig& config() const;
  /// Whether step 3 of score_batch runs: relative_to_identity or the members' configuration.
  bool relative() const { return relative_to_identity || config().relative_to_identity; }
};

/// One batch of datapoints (schedules of one or more programs, data::Batch) to score.
struct ScoringBatch {
  /// One tree per segment of the batch (data::Dataset::trees).
  data::BatchTrees trees;
  /// The batch's features as data::Dataset::materialize / data::program_batch give them,
  /// unscaled (comp [B, C, 910], loops [B, L, 8], expr, ...; score_batch scales them in place),
  /// with programs [P] and program_of [B]. With `staged`, only batch, programs and program_of
  /// are read.
  data::BatchTensors features;
  /// Inputs already scaled (scale_features) and prepared for members[0]
  /// (CostModel::prepare_inputs; host or CUDA device memory: train::DeviceBatchStore did step 1
  /// ahead).
  /// K = 1 only. nullptr: the forward reads `features`.
  const ForwardInputs<float>* staged = nullptr;
  /// [K]: each member's rows of the batch's programs that no schedule changes
  /// (CostModel::program_rows, via scored_program_rows), so the forward runs only the
  /// schedule-dependent part (lcm-serve's program cache). nullptr: the whole forward.
  const std::vector<std::vector<float>>* program_rows = nullptr;
  /// [K]: CostModel::schedule_weight() of each member (host), with program_rows; nullptr: none.
  const std::vector<std::vector<float>>* schedule_weight = nullptr;
  /// [K]: each member's memo of the batch's one program (model/forward_memo.hpp). For a batch of
  /// one datapoint with program_rows, one tree, a CPU tape and a program where
  /// CostModel::memo_matches_forward (at most 8 computations and 8 loop nodes per tree level), step
  /// 2 runs CostModel::forward_memo, which computes only the rows, subtrees and output the memo
  /// lacks (forward()'s values, bit for bit, tests/test_serve_memo.cpp). Otherwise (empty, a memo
  /// with max_bytes 0, a larger batch or program): forward(), whose products over more rows may
  /// round differently from those of a few.
  std::vector<ForwardMemo*> memos;

  /// Step 3 only (ScoringModels::relative()): untransformed[i] says datapoint i is its program's
  /// untransformed schedule ([B]; empty: none is), which then scores 0 (1×) exactly rather than
  /// f − f computed in two batches of different composition.
  std::vector<bool> untransformed;
  /// Step 3 only: f(untransformed schedule) of the batch's P programs, in features.programs
  /// order, either already computed ([K][P], untransformed_outputs(): lcm-serve computes it once
  /// per program) or forwarded here from their trees and unscaled features ([P] datapoints,
  /// data::Dataset::materialize of each program's kIdentitySchedule).
  const std::vector<std::vector<float>>* untransformed_output = nullptr;
  data::BatchTrees untransformed_trees;
  data::BatchTensors untransformed_features;

  /// Called once the last member's forward is queued and before its output is read back (a
  /// device store starts copying the next batch then, overlapping the queued work). May be empty.
  std::function<void()> on_queued;
};

/// What score_batch reports for one datapoint.
struct ScoredDatapoint {
  /// The ensemble's mean raw output after step 3 (ln speedup for a log-output model, the speedup
  /// itself for the reference head); NaN or ±inf for broken weights.
  double score = 0;
  /// speedup_from_score(score): the speedup (×) without the calibration map.
  double uncalibrated = 0;
  /// reported_speedup(score, ..., calibration): the speedup (×) lcm reports, finite and > 0 (NaN
  /// for a non-finite score; callers refuse it as broken weights).
  double speedup = 0;
};

/// Step 1, input scaling (model-spec §3.10): `scaling`->apply(bt) (comp and loops in place);
/// nullptr: no-op. Every caller that builds a model input (training steps, the device batch
/// store, scoring) scales through this. Throws as InputScaling::apply.
void scale_features(const InputScaling* scaling, data::BatchTensors& bt);

/// Step 3 on a tape, for training (whose loss needs its gradient): ŷ_i − f0[program_of[i]],
/// `y` [B] the batch's outputs, `f0` [P] the outputs of its programs' untransformed schedules
/// (ModelConfig::relative_to_identity). Throws as the ops (a program_of index outside [0, P)).
NodeId relative_to_untransformed(Tape<float>& tape, NodeId y, NodeId f0,
                                 const std::vector<int32_t>& program_of);

/// Steps 1–2 for the untransformed schedules of P programs: [K][P], each member's eval-mode
/// output for `features` ([P] datapoints, unscaled; scaled in place) over `trees`. `tape` is
/// cleared before and after each member.
std::vector<std::vector<float>> untransformed_outputs(const ScoringModels& m,
                                                      const data::BatchTrees& trees,
                                                      data::BatchTensors features,
                                                      Tape<float>& tape);

/// Steps 1–2 of the schedule-independent part of the forward: [K] CostModel::program_rows of
/// each member for the programs of `features` (unscaled; scaled here), computed `max_rows`
/// computation rows at a time (≤ 0: all at once). Throws as CostModel::program_rows (a model
/// with a pre-trained encoder).
std::vector<std::vector<float>> scored_program_rows(const ScoringModels& m,
                                                    const data::BatchTrees& trees,
                                                    data::BatchTensors features, Tape<float>& tape,
                                                    int64_t max_rows);

/// The speedups (×) lcm reports for the B datapoints of `batch` ([B], in datapoint order):
///  1. input scaling (§3.10) of batch.features (and batch.untransformed_features): scale_features;
///  2. the forward (§5) of each member k in eval mode: y_k = f_k(schedule) [B], in float;
///  3. relative to the untransformed schedule (ScoringModels::relative(), docs/accuracy.md):
///     s_k,i = y_k,i − f_k(untransformed of i's program) (a float subtraction), and exactly 0
///     for an untransformed schedule itself; otherwise s_k,i = y_k,i;
///  4. the ensemble mean in the output space (ln speedup: a geometric mean of speedups):
///     score_i = (Σ_k double(s_k,i)) / K, summed in member order;
///  5.–6. the calibration map when active (Calibration::apply, docs/accuracy.md), else the head's
///     map speedup_from_score (§4): reported_speedup(score_i, log_output, calibration), finite
///     and > 0 for a finite score.
/// `tape` (on the members' device) is cleared before and after each member's forward.
/// Throws std::invalid_argument for no member, `staged` with K > 1, or step 3 without the
/// untransformed schedules' outputs or features, and as CostModel::forward.
std::vector<ScoredDatapoint> score_batch(const ScoringModels& m, ScoringBatch& batch,
                                         Tape<float>& tape);

}  // namespace lcm::model
