// Tests of model/metrics (docs/model-spec.md §7): expectations are computed by hand in the comments
// (scikit-learn is not installed here), following scipy.stats.spearmanr and sklearn ndcg_score.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "model/metrics.hpp"

using namespace lcm::model;

TEST_CASE("round6 and APE") {
  CHECK(round6(1.0000004) == 1.0);
  CHECK(round6(2.0000006) == doctest::Approx(2.000001).epsilon(1e-15));
  CHECK(round6(0.0000005) == 0.0);  // numpy rounds half to even: 0.5e-6 → 0
  CHECK(ape(2.0, 1.0) == doctest::Approx(50.0));
  CHECK(ape(1.0, 3.0) == doctest::Approx(200.0));
}

TEST_CASE("average ranks with ties") {
  auto r = average_ranks({10, 20, 20, 5, 20});
  // sorted: 5 (rank 1), 10 (rank 2), three 20s at positions 3..5 → 4 each
  CHECK(r[0] == 2.0);
  CHECK(r[1] == 4.0);
  CHECK(r[2] == 4.0);
  CHECK(r[3] == 1.0);
  CHECK(r[4] == 4.0);
}

TEST_CASE("Spearman with ties") {
  // a = [1,2,2,3] → ranks [1,2.5,2.5,4]; b = [1,3,2,4] → ranks [1,3,2,4]; both means 2.5.
  // centred: [-1.5,0,0,1.5] and [-1.5,.5,-.5,1.5]; Σab = 4.5, Σa² = 4.5, Σb² = 5
  // r = 4.5 / sqrt(4.5·5) = sqrt(0.9) = 0.9486832980505138
  CHECK(spearman({1, 2, 2, 3}, {1, 3, 2, 4}) == doctest::Approx(0.9486832980505138));
  CHECK(spearman({1, 2, 3}, {30, 20, 10}) == doctest::Approx(-1.0));
  CHECK(std::isnan(spearman({1}, {2})));              // < 2 schedules
  CHECK(std::isnan(spearman({1, 2, 4}, {2, 2, 2})));  // constant predictions
  CHECK(std::isnan(spearman({3, 3}, {1, 2})));        // constant targets
  CHECK_THROWS_AS(spearman({1, 2}, {1}), std::invalid_argument);
}

TEST_CASE("nDCG with ties in the predictions") {
  // truth [3,1,2], score [.5,.5,.1]: items 0,1 tie at positions 1-2 → mean gain 2 times
  // (1/log2 2 + 1/log2 3) = 2·1.6309297536 = 3.2618595; item 2 at position 3: 2·(1/log2 4) = 1.
  // DCG = 4.2618595071; ideal [3,2,1]: 3 + 2/log2 3 + 1/2 = 4.7618595071 → 0.894999002123018
  CHECK(ndcg({3, 1, 2}, {0.5, 0.5, 0.1}) == doctest::Approx(0.894999002123018));
  // @1: the tied group straddles the cut: mean gain 2 × (discount 1 at pos 1 + 0 at pos 2) = 2;
  // ideal@1 = 3 → 2/3
  CHECK(ndcg({3, 1, 2}, {0.5, 0.5, 0.1}, 1) == doctest::Approx(2.0 / 3.0));
  // @5 with 3 items = all items
  CHECK(ndcg({3, 1, 2}, {0.5, 0.5, 0.1}, 5) == doctest::Approx(0.894999002123018));
  // reversed order, k = 2: DCG = 1 + 2/log2 3, ideal = 4 + 3/log2 3
  CHECK(ndcg({1, 2, 3, 4}, {4, 3, 2, 1}, 2) ==
        doctest::Approx((1 + 2 / std::log2(3.0)) / (4 + 3 / std::log2(3.0))));
  // perfect ranking
  CHECK(ndcg({1, 2, 3, 4}, {0.1, 0.2, 0.3, 0.4}) == doctest::Approx(1.0));
  // constant predictions: mean gain 7/3 over all 3 positions: 7/3·(1 + 1/log2 3 + 1/2) /
  // (4 + 2/log2 3 + 1/2) = 0.8629452729342191
  CHECK(ndcg({1, 2, 4}, {2, 2, 2}) == doctest::Approx(0.8629452729342191));
  CHECK(std::isnan(ndcg({1}, {1})));   // < 2 schedules
  CHECK(ndcg({0, 0}, {1, 2}) == 0.0);  // ideal DCG 0 → 0 (sklearn)
}

TEST_CASE("compute_metrics: grouping, NaN skipping, weighted MAPE") {
  // A: truth [3,1,2], pred [.5,.5,.1]: APE 83.33, 50, 95 → 76.111; Spearman: ranks [3,1,2] vs
  //    [2.5,2.5,1] centred [1,-1,0]·[.5,.5,-1] = 0 → 0; nDCG 0.894999002123018
  // B: one schedule truth 2, pred 1: APE 50; Spearman / nDCG NaN
  // C: truth [1,2,4], pred [2,2,2] (constant): APE 100, 0, 50 → 50; Spearman NaN; nDCG 0.86294527
  std::vector<std::string> prog = {"A", "C", "B", "A", "C", "A", "C"};
  std::vector<double> t = {3, 1, 2, 1, 2, 2, 4};
  std::vector<double> p = {0.5, 2, 1, 0.5, 2, 0.1, 2};
  MetricsSummary s = compute_metrics(prog, t, p);
  REQUIRE(s.programs.size() == 3);
  CHECK(s.programs[0].program == "A");
  CHECK(s.programs[0].n_schedules == 3);
  CHECK(s.programs[0].mape == doctest::Approx(76.1111111111111));
  CHECK(s.programs[0].spearman == doctest::Approx(0.0));
  CHECK(s.programs[2].program == "B");
  CHECK(std::isnan(s.programs[2].spearman));
  CHECK(std::isnan(s.programs[2].ndcg));
  CHECK(std::isnan(s.programs[1].spearman));
  CHECK(s.n_datapoints == 7);
  CHECK(s.mean_mape == doctest::Approx(58.703703703703695));     // (76.111 + 50 + 50) / 3
  CHECK(s.weighted_mape == doctest::Approx(61.19047619047619));  // 428.333 / 7
  CHECK(s.n_spearman == 1);
  CHECK(s.mean_spearman == doctest::Approx(0.0));
  CHECK(s.n_ndcg == 2);
  CHECK(s.mean_ndcg == doctest::Approx((0.894999002123018 + 0.8629452729342191) / 2));
  CHECK(s.mean_ndcg_1 == doctest::Approx((2.0 / 3.0 + 7.0 / 12.0) / 2));  // C@1: (7/3)/4
  CHECK_THROWS_AS(compute_metrics({"A"}, {1, 2}, {1}), std::invalid_argument);
  CHECK_THROWS_AS(compute_metrics({}, {}, {}), std::invalid_argument);
}

TEST_CASE("compute_metrics rounds to 6 decimals before comparing") {
  // predictions differing only in the 7th decimal tie after rounding → constant → Spearman NaN
  MetricsSummary s = compute_metrics({"P", "P"}, {1.0, 2.0}, {1.0000001, 1.0000002});
  CHECK(std::isnan(s.programs[0].spearman));
  CHECK(std::isnan(s.mean_spearman));
  // APE on rounded values: |1 - 1| = 0 and |2 - 1|/2 = 50 → 25
  CHECK(s.weighted_mape == doctest::Approx(25.0));
}

namespace {

/// Independent definition of the tie-averaged DCG (sklearn docs: "averaging over all possible
/// permutations of tied items"): enumerate every ordering consistent with the score order
/// (descending; ties permuted freely) and average the plain DCG@k of those orderings.
double brute_force_ndcg(const std::vector<double>& truth, const std::vector<double>& score, int k) {
  const size_t n = truth.size();
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end());
  auto dcg_of = [&](const std::vector<size_t>& order) {
    double d = 0;
    for (size_t r = 0; r < n && r < size_t(k); ++r) d += truth[order[r]] / std::log2(double(r) + 2);
    return d;
  };
  double sum = 0;
  int count = 0;
  do {
    bool consistent = true;
    for (size_t r = 0; r + 1 < n; ++r)
      consistent = consistent && score[idx[r]] >= score[idx[r + 1]];
    if (!consistent) continue;
    sum += dcg_of(idx);
    ++count;
  } while (std::next_permutation(idx.begin(), idx.end()));
  std::vector<size_t> ideal(n);
  for (size_t i = 0; i < n; ++i) ideal[i] = i;
  std::sort(ideal.begin(), ideal.end(), [&](size_t a, size_t b) { return truth[a] > truth[b]; });
  return (sum / count) / dcg_of(ideal);
}

}  // namespace

TEST_CASE("nDCG equals the average over tie permutations; Spearman equals 1 - 6Σd²/(n(n²-1))") {
  uint64_t state = 12345;
  auto next = [&](int mod) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int((state >> 33) % uint64_t(mod));
  };
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 2 + size_t(next(5));  // 2..6 items
    std::vector<double> truth(n), score(n);
    for (size_t i = 0; i < n; ++i) {
      truth[i] = 0.5 + next(4);        // ties in the truth too
      score[i] = double(next(3)) / 2;  // many ties in the predictions
    }
    for (int k : {1, 2, 5, 0}) {
      const int kk = k == 0 ? int(n) : k;
      INFO("trial " << trial << " k " << k);
      CHECK(ndcg(truth, score, k) == doctest::Approx(brute_force_ndcg(truth, score, kk)));
    }
    // Spearman without ties: classic formula
    std::vector<double> a(n), b(n);
    for (size_t i = 0; i < n; ++i)
      a[i] = double(i), b[i] = double(next(1000)) + 1e-3 * double(i);  // no ties
    std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
    double d2 = 0;
    for (size_t i = 0; i < n; ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
    const double nn = double(n);
    CHECK(spearman(a, b) == doctest::Approx(1 - 6 * d2 / (nn * (nn * nn - 1))));
  }
}

// Top-k speedup recovered (model-spec §7.4): hand-computed cases, ties by the expected-value rule.
TEST_CASE("top-k recovered: distinct scores") {
  // ranked by score: s0 (truth 1), s2 (2), s3 (8), s1 (4); best truth = 8
  const std::vector<double> truth{1, 4, 2, 8}, score{0.9, 0.1, 0.5, 0.2};
  CHECK(top_k_recovered(truth, score, 1) == doctest::Approx(1.0 / 8.0));
  CHECK(top_k_recovered(truth, score, 2) == doctest::Approx(2.0 / 8.0));   // max(1, 2) / 8
  CHECK(top_k_recovered(truth, score, 3) == doctest::Approx(1.0));         // s3 is 3rd
  CHECK(top_k_recovered(truth, score, 5) == doctest::Approx(1.0));         // k > n: all schedules
  const std::vector<double> score2{0.9, 0.1, 0.5, 0.0};                    // s3 now ranked last
  CHECK(top_k_recovered(truth, score2, 3) == doctest::Approx(4.0 / 8.0));  // max(1, 2, 4) / 8
  CHECK(top_k_recovered(truth, score2, 4) == doctest::Approx(1.0));
  CHECK(top_k_recovered({1, 2, 3}, {1, 2, 3}, 1) == doctest::Approx(1.0));  // perfect ranking
}

TEST_CASE("top-k recovered: ties are averaged over random tie orders") {
  // all scores tied: top-1 = mean truth / best = 5 / 8
  CHECK(top_k_recovered({2, 4, 6, 8}, {1, 1, 1, 1}, 1) == doctest::Approx(5.0 / 8.0));
  // top-2 of 4 tied: the 6 equally likely pairs have maxima 4,6,8,6,8,8 → 40/6, / 8
  CHECK(top_k_recovered({2, 4, 6, 8}, {1, 1, 1, 1}, 2) == doctest::Approx(40.0 / 6.0 / 8.0));
  // s0 (truth 3) first, then s1 (1) and s2 (10) tied, then s3 (5); best = 10
  const std::vector<double> truth{3, 1, 10, 5}, score{0.9, 0.5, 0.5, 0.1};
  CHECK(top_k_recovered(truth, score, 1) == doctest::Approx(0.3));
  // k = 2: one of {1, 10} joins s0: (max(3,1) + max(3,10)) / 2 = 6.5
  CHECK(top_k_recovered(truth, score, 2) == doctest::Approx(0.65));
  CHECK(top_k_recovered(truth, score, 3) == doctest::Approx(1.0));  // whole tie inside
}

TEST_CASE("top-k recovered: undefined and bad input") {
  CHECK(std::isnan(top_k_recovered({3}, {1}, 1)));        // one schedule: nothing to rank
  CHECK(std::isnan(top_k_recovered({0, 0}, {1, 2}, 1)));  // best true speedup 0
  CHECK_THROWS_AS(top_k_recovered({1, 2}, {1}, 1), std::invalid_argument);
  CHECK_THROWS_AS(top_k_recovered({1, 2}, {1, 2}, 0), std::invalid_argument);
}

TEST_CASE("compute_metrics: top-1 / top-5 recovered per program and their mean") {
  // A: truth [1,4,2,8], pred ranks s0 first → top1 1/8, top5 (all 4) 1
  // B: truth [2,3], pred ranks s1 (3) first → top1 1, top5 1; C: one schedule → NaN, skipped
  MetricsSummary s = compute_metrics({"A", "A", "A", "A", "B", "B", "C"}, {1, 4, 2, 8, 2, 3, 5},
                                     {0.9, 0.1, 0.5, 0.2, 1, 2, 1});
  REQUIRE(s.programs.size() == 3);
  CHECK(s.programs[0].top1_recovered == doctest::Approx(0.125));
  CHECK(s.programs[0].top5_recovered == doctest::Approx(1.0));
  CHECK(s.programs[1].top1_recovered == doctest::Approx(1.0));
  CHECK(std::isnan(s.programs[2].top1_recovered));
  CHECK(s.mean_top1_recovered == doctest::Approx((0.125 + 1.0) / 2));
  CHECK(s.mean_top5_recovered == doctest::Approx(1.0));
}

TEST_CASE("top-1 recovered equals nDCG@1 (linear gains, ties averaged): a cross-check") {
  // sklearn's nDCG@1 with gain = true speedup is truth[first] / max truth, tie groups averaged:
  // the same quantity and tie rule as top_k_recovered(k = 1), computed by different code.
  CHECK(top_k_recovered({3, 1, 2}, {0.5, 0.5, 0.1}, 1) ==
        doctest::Approx(ndcg({3, 1, 2}, {0.5, 0.5, 0.1}, 1)));
  CHECK(top_k_recovered({1, 4, 2, 8}, {0.9, 0.1, 0.5, 0.2}, 1) ==
        doctest::Approx(ndcg({1, 4, 2, 8}, {0.9, 0.1, 0.5, 0.2}, 1)));
  CHECK(top_k_recovered({2, 4, 6, 8}, {1, 1, 1, 1}, 1) ==
        doctest::Approx(ndcg({2, 4, 6, 8}, {1, 1, 1, 1}, 1)));
}

TEST_CASE("median error factor and within 2x: symmetric in over- and under-prediction") {
  // factors 2 (over), 2 (under), 1.5, 4 (under), infinite (predicted 0): sorted 1.5 2 2 4 inf,
  // median 2; within 2x: 1.5 and both 2s
  const std::vector<std::string> names{"a", "a", "b", "b", "b"};
  const std::vector<double> y{1.0, 3.0, 2.0, 8.0, 0.5};
  const std::vector<double> yhat{2.0, 1.5, 3.0, 2.0, 0.0};
  const lcm::model::MetricsSummary m = lcm::model::compute_metrics(names, y, yhat);
  CHECK(m.median_error_factor == doctest::Approx(2.0));
  CHECK(m.within_2x == doctest::Approx(3.0 / 5.0));
  // an even count takes the mean of the two middle |ln| errors: factors 1 and 4 give 2
  const lcm::model::MetricsSummary e =
      lcm::model::compute_metrics({"p", "p"}, {1.0, 1.0}, {1.0, 4.0});
  CHECK(e.median_error_factor == doctest::Approx(2.0));
  CHECK(e.within_2x == doctest::Approx(0.5));
  // MAPE is not symmetric: the same factor 2 costs 100 % over and 50 % under
  const lcm::model::MetricsSummary o = lcm::model::compute_metrics({"p"}, {1.0}, {2.0});
  const lcm::model::MetricsSummary u = lcm::model::compute_metrics({"p"}, {1.0}, {0.5});
  CHECK(o.median_error_factor == doctest::Approx(u.median_error_factor));
  CHECK(o.mean_mape == doctest::Approx(100.0).epsilon(1e-4));
  CHECK(u.mean_mape == doctest::Approx(50.0).epsilon(1e-4));
}
