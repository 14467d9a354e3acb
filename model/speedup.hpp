// The one map from a cost model's raw output (its score) to the speedup lcm reports. Every tool
// that reports a speedup (lcm-train's validation, lcm-eval, lcm-predict, lcm-serve, liblcm) goes
// through reported_speedup() as the last step of model::score_batch (model/scoring.hpp), so a
// reported speedup is always finite and > 0, above the error value 0 that lcm-serve and liblcm
// answer for a query they cannot score (docs/model-spec.md §4).
#pragma once

#include "model/calibration.hpp"
#include "model/speedup_bounds.hpp"

namespace lcm::model {

/// The direct-speedup head's knee (×): scores at or above it are reported as they are, scores
/// below it (the reference head's LeakyReLU answers small negative values) are mapped into
/// (0, knee) by a strictly increasing curve (speedup_from_score). 1e-3 is below the 0.01× floor
/// of the measured speedups (model-spec §4), so no real speedup is reported differently.
constexpr double kDirectSpeedupKnee = 1e-3;

/// The speedup (×) of raw model output `score` without a calibration map (model-spec §4):
///  - log-output head (ModelConfig::log_output, the default): exp(score), with score held in
///    [−50, 50];
///  - direct-speedup head (model.preset=reference: a LeakyReLU output that is the speedup
///    itself): score for score ≥ k = kDirectSpeedupKnee; below, k² / (2k − score), which is
///    continuous with slope 1 at k, strictly increasing, > 0 for every finite score, and tends
///    to 0 only as score → −∞ (score 0 → k/2, −1 → ~1e−6); held in [e^−50, e^50].
/// So the reported speedup is finite, > 0, and non-decreasing in the score (strictly increasing
/// inside [e^−50, e^50]): the ranking of schedules by score is kept. A NaN or ±inf score (broken
/// weights or an overflow) gives NaN, which every caller refuses as broken weights.
double speedup_from_score(double score, bool log_output);

/// The speedup (×) lcm reports for raw score `score`: the calibration map's value
/// (Calibration::apply, also in [e^−50, e^50]) when `cal` is given and active(), else
/// speedup_from_score(score, log_output). NaN for a NaN or ±inf score.
double reported_speedup(double score, bool log_output, const Calibration* cal = nullptr);

}  // namespace lcm::model
