// Evaluation metrics of the cost model, with the exact semantics of docs/model-spec.md §7 ([CM]
// evaluate_model.py / data_utils get_scores): per-program MAPE, Spearman, nDCG (all, @5, @1,
// scikit-learn ndcg_score), their unweighted means over programs, and the datapoint-weighted MAPE.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lcm::model {

/// Rounds to 6 decimals as numpy.round(x, 6) does (rint(x·1e6)/1e6, half to even), model-spec §7.1.
double round6(double x);

/// Absolute percentage error 100·|target − pred| / target (no epsilon; model-spec §7.2).
/// target 0 gives ±inf/NaN as in the reference.
double ape(double target, double pred);

/// Absolute percentage error of the MAPE loss (model-spec §6): 100·|target − pred| /
/// (target + 1e-5), the 1e-5 keeping a target 0 finite. Used by every MAPE lcm-train reports
/// (train_MAPE, val_MAPE) and by the calibration map's fit summary.
double loss_ape(double target, double pred);

/// Ranks 1..n of `x` with ties given the average of the positions they span (scipy rankdata
/// "average"). NaN values are ranked like any value (callers should not pass them).
std::vector<double> average_ranks(const std::vector<double>& x);

/// Spearman rank correlation of a and b (Pearson correlation of their average ranks, as
/// scipy.stats.spearmanr). NaN when n < 2 or either input is constant. Throws
/// std::invalid_argument when the sizes differ.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// scikit-learn ndcg_score(y_true=[truth], y_score=[score], k) for one query (model-spec §7.3):
/// items ranked by score descending, gain = truth (linear), discount 1/log2(rank+1) for ranks
/// 1..k (0 beyond), ties in `score` averaged over the tied group's positions, divided by the
/// ideal DCG (items ranked by truth; 0 when the ideal DCG is 0). k ≤ 0 means all items.
/// NaN when n < 2 (sklearn refuses a single document). Throws std::invalid_argument when the
/// sizes differ.
double ndcg(const std::vector<double>& truth, const std::vector<double>& score, int k = 0);

/// Top-k speedup recovered for one program (not in the reference, model-spec §7.4 says so):
/// the best true speedup among the k schedules the model ranks first (by `score`, descending)
/// divided by the best true speedup of all schedules, in (0, 1] for positive speedups. Tie rule:
/// schedules with equal scores are taken in a uniformly random order and the EXPECTED value is
/// returned (as nDCG averages tied gains): when m of the g schedules tied at the cut enter the
/// top k, the value is Σ_i P(the best of the m drawn is the i-th smallest of the group) ·
/// max(best above the cut, v_i), with P = C(i−1, m−1) / C(g, m). So for k = 1 a tie of all
/// schedules gives mean/best. NaN when n < 2 (nothing to rank, like nDCG) or the best true
/// speedup is ≤ 0. Throws std::invalid_argument when the sizes differ or k < 1.
/// Note: with §7's linear gains and tie averaging, k = 1 equals ndcg(truth, score, 1) exactly
/// (tested as a cross-check); k = 5 is new information (nDCG@5 discounts, this does not).
double top_k_recovered(const std::vector<double>& truth, const std::vector<double>& score, int k);

/// Metrics of one program (all its schedules), on values already rounded by the caller.
struct ProgramMetrics {
  std::string program;
  int64_t n_schedules = 0;
  double mape = 0;      // mean APE over the program's schedules (%)
  double spearman = 0;  // NaN for < 2 schedules or constant input
  double ndcg = 0;      // k = all; NaN for < 2 schedules
  double ndcg_5 = 0;
  double ndcg_1 = 0;
  double top1_recovered = 0;  // top_k_recovered(k = 1); NaN for < 2 schedules
  double top5_recovered = 0;  // top_k_recovered(k = 5)
};

/// Metrics of a whole split.
struct MetricsSummary {
  std::vector<ProgramMetrics> programs;  // in order of first appearance
  int64_t n_datapoints = 0;
  // Unweighted means over programs, NaN skipped (NaN when every value is NaN), model-spec §7.4.
  double mean_mape = 0, mean_spearman = 0, mean_ndcg = 0, mean_ndcg_5 = 0, mean_ndcg_1 = 0;
  double mean_top1_recovered = 0, mean_top5_recovered = 0;
  int64_t n_spearman = 0, n_ndcg = 0;  // programs that contributed a non-NaN value
  double weighted_mape = 0;            // mean APE over all datapoints (%)
  // How far a reported speedup is from the measured one, over datapoints (lcm's addition, not
  // §7; symmetric, unlike MAPE, which caps an under-prediction at 100 % and not an
  // over-prediction): the median of max(ŷ/y, y/ŷ), and the share of datapoints with ŷ within a
  // factor 2 of y. Values rounded as for MAPE; a prediction that rounds to 0 is infinitely far.
  // NaN when no datapoint has y > 0.
  double median_error_factor = 0;
  double within_2x = 0;
};

/// Metrics of one program from its targets and predictions (speedup ×), rounded to 6 decimals
/// here. `rank` (empty: `pred`) is what orders the schedules for the ranking metrics (Spearman,
/// nDCG, top-k), also rounded: the uncalibrated predictions when `pred` went through a
/// calibration map, so that a map, strictly increasing, cannot change them through the 6-decimal
/// rounding (which would merge or split ties). Throws std::invalid_argument for different sizes
/// or no schedules.
ProgramMetrics program_metrics(const std::string& program, std::vector<double> target,
                               std::vector<double> pred, std::vector<double> rank = {});

/// Groups datapoints by program name (model-spec §7.3) and computes every metric. Inputs: [N]
/// each (program name, measured speedup, predicted speedup; `rank` as in program_metrics, null:
/// `pred`). Throws std::invalid_argument for different sizes or N = 0.
MetricsSummary compute_metrics(const std::vector<std::string>& program,
                               const std::vector<double>& target, const std::vector<double>& pred,
                               const std::vector<double>* rank = nullptr);

/// Mean of the non-NaN values (NaN when there are none); `count` receives how many were used.
double nan_mean(const std::vector<double>& v, int64_t* count = nullptr);

}  // namespace lcm::model
