// Tests of the calibration map (model/calibration, train/calibrate): the weighted isotonic
// least-squares fit of ln speedup against a brute-force optimum, a map that never shrinks
// unbiased predictions, flat tails, too few knots refused, a map that is continuous and strictly
// increasing everywhere, per-program rankings unchanged while the error falls, an exact JSON
// round trip and clear errors (older MAPE maps still load), and the map fitted by lcm-train on
// its training split, stored in the best checkpoint and reapplied by Predictor
// (eval.calibrated=false restores the raw outputs).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engine/rng.hpp"
#include "engine/safetensors.hpp"
#include "model/calibration.hpp"
#include "model/metrics.hpp"
#include "model/speedup.hpp"
#include "support/safetensors_support.hpp"
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/trainer.hpp"

using namespace lcm;

namespace {

/// Σ m_i·(ln f_i − ln y_i)²: the squared ln error of fitted values f, each point weighted by m_i
/// (all 1 when m is empty).
double objective(const std::vector<double>& f, const std::vector<double>& y,
                 const std::vector<double>& m = {}) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = std::log(f[i]) - std::log(y[i]);
    s += (m.empty() ? 1.0 : m[i]) * d * d;
  }
  return s;
}

/// The smallest objective() of any non-decreasing f over points in score order, by trying every
/// cut of the points into runs of consecutive points: the least-squares isotonic fit is the
/// weighted mean of ln y on each run of some cut whose run means do not decrease, and every such
/// cut is a feasible f.
double brute_force_isotonic(const std::vector<double>& y, const std::vector<double>& m = {}) {
  const size_t n = y.size();
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<double> f(n);
    double prev = -std::numeric_limits<double>::infinity();
    bool ok = true;
    for (size_t i = 0; i < n && ok;) {
      size_t j = i + 1;
      while (j < n && !(cuts & (1u << (j - 1)))) ++j;
      double w = 0, l = 0;
      for (size_t k = i; k < j; ++k) {
        const double mk = m.empty() ? 1.0 : m[k];
        w += mk;
        l += mk * std::log(y[k]);
      }
      if (l / w < prev) ok = false;
      prev = l / w;
      for (size_t k = i; k < j; ++k) f[k] = std::exp(l / w);
      i = j;
    }
    if (ok) best = std::min(best, objective(f, y, m));
  }
  return best;
}

/// The median of predicted / measured over the points (a map that shrinks gives ≪ 1).
double median_ratio(const std::vector<double>& predicted, const std::vector<double>& measured) {
  std::vector<double> r;
  for (size_t i = 0; i < predicted.size(); ++i) r.push_back(predicted[i] / measured[i]);
  std::nth_element(r.begin(), r.begin() + long(r.size() / 2), r.end());
  return r[r.size() / 2];
}

}  // namespace

TEST_CASE("isotonic log fit: weighted means of ln speedup over pooled violators, by hand") {
  // scores 1..4, speedups 1, 3, 2, 4: 3 > 2 violates; pooled {3, 2} has the mean ln √6
  const std::vector<double> s{1, 2, 3, 4}, y{1, 3, 2, 4};
  const model::Calibration c = model::fit_isotonic_log(s, y, y);
  CHECK(c.kind == "isotonic_log");
  CHECK(c.fit_steps == 3);
  // a knot at each block's smallest and largest score: the pooled block {2, 3} keeps its value
  // over its scores, tilted by the slope floor 0.02
  REQUIRE(c.x.size() == 4);
  CHECK(c.x == std::vector<double>{1, 2, 3, 4});
  CHECK(c.apply(1) == doctest::Approx(1.0));
  CHECK(c.apply(2) == doctest::Approx(std::sqrt(6.0)));
  CHECK(c.apply(2.5) == doctest::Approx(std::sqrt(6.0) * std::exp(0.01)));
  CHECK(c.apply(3) == doctest::Approx(std::sqrt(6.0) * std::exp(0.02)));
  CHECK(c.apply(4) == doctest::Approx(4.0));
  // log-linear between knots
  CHECK(c.apply(3.5) == doctest::Approx(std::sqrt(std::sqrt(6.0) * std::exp(0.02) * 4.0)));
  // flat tails: the slope floor 0.02 beyond the end knots
  CHECK(c.tail_slope == doctest::Approx(0.02));
  CHECK(c.apply(5) == doctest::Approx(4.0 * std::exp(0.02)));
  CHECK(c.apply(0) == doctest::Approx(std::exp(-0.02)));
  CHECK(c.fit_points == 4);
  CHECK(c.fit_mape_before == doctest::Approx(0.0).epsilon(1e-4));
  CHECK(c.fit_factor_before == doctest::Approx(1.0));
  CHECK(c.fit_within_2x_before == 1.0);
  CHECK(c.fit_log_mse_before == doctest::Approx(0.0));
  // (ln √6 − ln 3)² + (ln √6 + 0.02 − ln 2)², over the 4 points
  const double l6 = 0.5 * std::log(6.0);
  CHECK(c.fit_log_mse_after ==
        doctest::Approx((std::pow(l6 - std::log(3.0), 2) + std::pow(l6 + 0.02 - std::log(2.0), 2)) /
                        4));
}

TEST_CASE("isotonic log fit reaches the brute-force optimum on random data, in both weightings") {
  Rng rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const bool by_program = trial % 2 == 1;
    const int n = 2 + int(rng.uniform(0, 9));
    std::vector<double> s, y, m;
    std::vector<int64_t> program;
    for (int i = 0; i < n; ++i) {
      // distinct, increasing, close enough that the slope floor (0.02) tilts a block by < 3e-6
      s.push_back((double(i) + rng.uniform(0, 0.5)) * 1e-5);
      y.push_back(std::exp(rng.uniform(-2, 2)));
      program.push_back(int64_t(rng.uniform(0, 3)));  // programs of unequal sizes
    }
    if (by_program)
      for (int i = 0; i < n; ++i)
        m.push_back(1.0 / double(std::count(program.begin(), program.end(), program[i])));
    const model::Calibration c = model::fit_isotonic_log(
        s, y, y, 1 << 20, false, by_program ? program : std::vector<int64_t>{});
    CHECK(c.weighting == (by_program ? "program" : "datapoint"));
    const double best = brute_force_isotonic(y, m);
    CHECK(c.fit_steps >= 1);
    // the continuous map keeps every point at its block's value up to the slope floor's tilt
    // (< 3e-6 in ln): its objective is the optimum's, never below it (it is monotone too)
    std::vector<double> mapped;
    for (double x : s) mapped.push_back(c.apply(x));
    const double got = objective(mapped, y, m);
    CHECK(got >= best - 1e-9);
    CHECK(got <= best + 2e-4);
    // fit_log_mse_after is the (weighted mean) objective of the continuous map
    double wsum = 0;
    for (int i = 0; i < n; ++i) wsum += m.empty() ? 1.0 : m[size_t(i)];
    CHECK(c.fit_log_mse_after == doctest::Approx(got / wsum).epsilon(1e-9));
  }
}

TEST_CASE("the fit never shrinks predictions that are unbiased in ln space") {
  // the class of issue 41 item 3: raw scores whose ln error has mean 0 (any noise level, any
  // skew of the speedups). A map fitted on squared ln error keeps the median predicted/measured
  // ratio near 1 and the median error factor no worse; MAPE (at most 100 % below, unbounded
  // above) would pull predictions towards 0 the more the noise
  Rng rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    const double noise = 0.2 + 0.05 * trial;  // ln-space spread 0.2 … 3.15
    const double centre = rng.uniform(-2, 2);
    std::vector<double> s, y, raw;
    std::vector<int64_t> program;
    for (int i = 0; i < 1500; ++i) {
      const double t = centre + rng.uniform(-2, 2);
      s.push_back(t);
      raw.push_back(std::exp(t));
      // symmetric noise in ln space: the raw outputs are median- and mean-unbiased
      y.push_back(std::exp(t + noise * (rng.uniform(-1, 1) + rng.uniform(-1, 1))));
      program.push_back(i % 50);
    }
    INFO("trial " << trial << ", noise " << noise);
    const model::Calibration c = model::fit_isotonic_log(s, y, raw, 256, false, program);
    REQUIRE(c.active());
    std::vector<double> after;
    for (double x : s) after.push_back(c.apply(x));
    const double r = median_ratio(after, y);
    CHECK(r > 0.8);
    CHECK(r < 1.25);
    // no shrink in the map itself: about as many predictions raised as lowered
    int64_t lowered = 0;
    for (size_t i = 0; i < s.size(); ++i) lowered += after[i] < raw[i];
    CHECK(double(lowered) / double(s.size()) > 0.25);
    CHECK(double(lowered) / double(s.size()) < 0.75);
    // the in-sample error factor does not grow by more than the map's step noise
    CHECK(c.fit_factor_after <= c.fit_factor_before * 1.05);
    CHECK(c.fit_log_mse_after <= c.fit_log_mse_before);
  }
}

TEST_CASE("beyond the knots the map is flat (slope 0.02), whatever the scores and knots") {
  // fits on random data of every score spread, crowded scores included (MAPE fits extrapolated
  // the mean slope there, up to 1e3-1e7 per unit score: 9,246x for tiling schedules)
  Rng rng(23);
  for (int trial = 0; trial < 100; ++trial) {
    const double spread = std::pow(10.0, rng.uniform(-7, 2));
    std::vector<double> s, y;
    for (int i = 0; i < 200; ++i) {
      const double t = rng.uniform(0, 1);
      s.push_back(spread * t);
      y.push_back(std::exp(4 * t + rng.uniform(-0.5, 0.5)));
    }
    const model::Calibration c = model::fit_isotonic_log(s, y, y);
    REQUIRE(c.active());
    INFO("trial " << trial << ", spread " << spread << ", knots " << c.x.size());
    CHECK(c.tail_slope == doctest::Approx(0.02));
    const double lo = *std::min_element(y.begin(), y.end());
    const double hi = *std::max_element(y.begin(), y.end());
    for (double d : {1e-3, 1.0, 10.0, 1e3}) {
      // ln value beyond the end knots: the end knot's plus 0.02 per unit score
      CHECK(std::log(c.apply(c.x.back() + d)) ==
            doctest::Approx(c.log_speedup.back() + 0.02 * d).epsilon(1e-9));
      CHECK(std::log(c.apply(c.x.front() - d)) ==
            doctest::Approx(c.log_speedup.front() - 0.02 * d).epsilon(1e-9));
      // never beyond what the fit saw, save the floor's e^(0.02·d)
      CHECK(c.apply(c.x.back() + d) <= hi * std::exp(0.02 * d) * (1 + 1e-9));
      CHECK(c.apply(c.x.front() - d) >= lo * std::exp(-0.02 * d) * (1 - 1e-9));
    }
  }
}

TEST_CASE("a fit with fewer than 3 steps is not kept: fit_calibration reports raw outputs") {
  // scores that order the speedups backwards: pooling merges everything into one block; and two
  // clusters: two blocks. Neither is a map; both are refused with the reason
  for (int blocks : {1, 2}) {
    INFO(blocks << " block(s)");
    std::vector<train::Prediction> p;
    for (int i = 0; i < 200; ++i) {
      train::Prediction x;
      x.program = i % 7;
      x.score = blocks == 1 ? double(i) * 0.01 : (i < 100 ? -1.0 : 1.0);
      x.measured = blocks == 1 ? std::exp(2.0 - double(i) * 0.02) : (i < 100 ? 0.5 : 2.0);
      x.predicted = x.uncalibrated = std::exp(x.score);
      p.push_back(x);
    }
    const model::Calibration fit = model::fit_isotonic_log(
        [&] {
          std::vector<double> v;
          for (auto& x : p) v.push_back(x.score);
          return v;
        }(),
        [&] {
          std::vector<double> v;
          for (auto& x : p) v.push_back(x.measured);
          return v;
        }(),
        [&] {
          std::vector<double> v;
          for (auto& x : p) v.push_back(x.predicted);
          return v;
        }());
    CHECK(fit.fit_steps == blocks);
    const model::Calibration cal = train::fit_calibration(p, false);
    CHECK_FALSE(cal.active());
    CHECK(cal.fit_points == 200);
    CHECK(test::contains(cal.refused, "fewer than the 3 a map needs"));
    CHECK(cal.fit_steps == blocks);
    const std::string summary = train::calibration_summary(cal);
    CHECK_MESSAGE(test::contains(summary, "was not kept"), summary);
    CHECK_MESSAGE(test::contains(summary, std::to_string(blocks) + " step"), summary);
    // stored, it round-trips as "no map", with the reason
    const model::Calibration back = model::Calibration::from_json(cal.to_json());
    CHECK_FALSE(back.active());
    CHECK(back.refused == cal.refused);
  }
}

TEST_CASE("the program weighting counts every program alike; the datapoint one every datapoint") {
  // one program with 300 schedules whose speedups are 1/3 of what the scores say, 24 programs of
  // 6 schedules where they are 3x: over datapoints the big program dominates the fit, over
  // programs the small ones do
  Rng rng(11);
  std::vector<std::string> names;
  std::vector<int64_t> program;
  std::vector<double> score, measured, raw, by_point_w, by_program_w;
  auto add = [&](int p, double factor) {
    const double t = rng.uniform(-1.5, 1.5);
    names.push_back("program" + std::to_string(p));
    program.push_back(p);
    score.push_back(t);
    raw.push_back(std::exp(t));
    measured.push_back(factor * std::exp(t + rng.uniform(-0.2, 0.2)));
  };
  for (int k = 0; k < 300; ++k) add(0, 1.0 / 3.0);
  for (int p = 1; p <= 24; ++p)
    for (int k = 0; k < 6; ++k) add(p, 3.0);
  for (int64_t p : program) {
    by_point_w.push_back(1.0);
    by_program_w.push_back(p == 0 ? 1.0 / 300 : 1.0 / 6);
  }
  const model::Calibration by_point = model::fit_isotonic_log(score, measured, raw);
  const model::Calibration by_program =
      model::fit_isotonic_log(score, measured, raw, 4096, false, program);
  CHECK(by_point.weighting == "datapoint");
  CHECK(by_program.weighting == "program");
  auto mapped = [&](const model::Calibration& c) {
    std::vector<double> cal;
    for (double x : score) cal.push_back(c.apply(x));
    return cal;
  };
  // each fit wins on its own weighting of the squared ln error, by far
  CHECK(objective(mapped(by_program), measured, by_program_w) <
        0.5 * objective(mapped(by_point), measured, by_program_w));
  CHECK(objective(mapped(by_point), measured, by_point_w) <
        0.5 * objective(mapped(by_program), measured, by_point_w));
  // and the per-program mean MAPE lcm-eval reports follows the program weighting
  const model::MetricsSummary mp = model::compute_metrics(names, measured, mapped(by_program));
  CHECK(by_program.fit_mape_after == doctest::Approx(mp.mean_mape).epsilon(1e-4));
  CHECK(by_program.fit_mape_before ==
        doctest::Approx(model::compute_metrics(names, measured, raw).mean_mape).epsilon(1e-4));
  CHECK(
      by_point.fit_factor_after ==
      doctest::Approx(model::compute_metrics(names, measured, mapped(by_point)).median_error_factor)
          .epsilon(1e-4));
  CHECK_THROWS_AS(model::fit_isotonic_log(score, measured, raw, 4096, false, {1, 2}),
                  std::invalid_argument);
}

TEST_CASE("the map is continuous and strictly increasing everywhere, values > 0") {
  Rng rng(9);
  std::vector<double> s, y;
  for (int i = 0; i < 3000; ++i) {
    const double t = rng.uniform(-3, 3);
    s.push_back(double(float(t)));
    y.push_back(std::exp(0.7 * t + rng.uniform(-1.5, 1.5)));
  }
  const model::Calibration c = model::fit_isotonic_log(s, y, y, 256);
  REQUIRE(c.active());
  CHECK(c.x.size() > 2);
  double prev = -1;
  for (double t = -10; t <= 10; t += 1e-3) {
    const double v = c.apply(t);
    CHECK(std::isfinite(v));
    CHECK(v > 0);
    CHECK(v > prev);
    prev = v;
  }
  // continuity at every knot (from both sides)
  for (size_t k = 0; k < c.x.size(); ++k) {
    const double at = c.apply(c.x[k]);
    CHECK(at == doctest::Approx(std::exp(c.log_speedup[k])));
    CHECK(c.apply(std::nextafter(c.x[k], -1e300)) <= at);
    CHECK(c.apply(std::nextafter(c.x[k], 1e300)) >= at);
  }
  // adjacent float scores stay apart
  const float a = 0.37f, b = std::nextafter(a, 1.f);
  CHECK(c.apply(double(b)) > c.apply(double(a)));
  CHECK(c.apply(-std::numeric_limits<double>::infinity()) == 0.0);
  CHECK(std::isnan(c.apply(std::nan(""))));
}

TEST_CASE("per-program ranking metrics are unchanged by the map; its errors fall on the fit data") {
  Rng rng(3);
  std::vector<std::string> names;
  std::vector<double> measured, raw_speedup, score;
  for (int p = 0; p < 12; ++p)
    for (int k = 0; k < 20 + p; ++k) {
      const double t = rng.uniform(-2, 2);
      names.push_back("program" + std::to_string(p));
      measured.push_back(std::exp(t + rng.uniform(-0.8, 0.8)));
      score.push_back(double(float(1.7 * t + 0.9)));  // over-confident and biased raw scores
      raw_speedup.push_back(std::exp(score.back()));
    }
  const model::Calibration c = model::fit_isotonic_log(score, measured, raw_speedup);
  std::vector<double> cal;
  for (double x : score) cal.push_back(c.apply(x));
  const model::MetricsSummary before = model::compute_metrics(names, measured, raw_speedup);
  const model::MetricsSummary after = model::compute_metrics(names, measured, cal);
  REQUIRE(before.programs.size() == after.programs.size());
  for (size_t i = 0; i < before.programs.size(); ++i) {
    INFO(before.programs[i].program);
    CHECK(after.programs[i].spearman == before.programs[i].spearman);
    CHECK(after.programs[i].ndcg == before.programs[i].ndcg);
    CHECK(after.programs[i].ndcg_1 == before.programs[i].ndcg_1);
    CHECK(after.programs[i].ndcg_5 == before.programs[i].ndcg_5);
    CHECK(after.programs[i].top1_recovered == before.programs[i].top1_recovered);
    CHECK(after.programs[i].top5_recovered == before.programs[i].top5_recovered);
  }
  // the biased raw scores over-predict by ~e^0.9: every measure of the error falls
  CHECK(after.mean_mape < 0.5 * before.mean_mape);
  CHECK(after.median_error_factor < before.median_error_factor);
  CHECK(after.within_2x > before.within_2x);
  CHECK(c.fit_mape_after < c.fit_mape_before);
  CHECK(c.fit_log_mse_after < c.fit_log_mse_before);
  CHECK(c.fit_mape_before == doctest::Approx(model::mape_percent(raw_speedup, measured)));
  CHECK(c.fit_mape_after == doctest::Approx(model::mape_percent(cal, measured)));
  CHECK(c.fit_factor_before == doctest::Approx(before.median_error_factor).epsilon(1e-4));
  CHECK(c.fit_factor_after == doctest::Approx(after.median_error_factor).epsilon(1e-4));
  CHECK(c.fit_within_2x_after == doctest::Approx(after.within_2x).epsilon(1e-3));
}

TEST_CASE("calibration JSON round trip is exact; malformed maps are named errors") {
  const std::vector<double> s{0.1, 0.2, 0.35, 0.9}, y{0.5, 1.5, 1.1, 7.0};
  const model::Calibration c = model::fit_isotonic_log(s, y, y);
  const model::Calibration r = model::Calibration::from_json(c.to_json());
  CHECK(r.kind == c.kind);
  CHECK(r.x == c.x);
  CHECK(r.log_speedup == c.log_speedup);
  CHECK(r.tail_slope == c.tail_slope);
  CHECK(r.fit_points == c.fit_points);
  CHECK(r.fit_mape_after == c.fit_mape_after);
  CHECK(r.fit_factor_before == c.fit_factor_before);
  CHECK(r.fit_factor_after == c.fit_factor_after);
  CHECK(r.fit_within_2x_after == c.fit_within_2x_after);
  CHECK(r.fit_log_mse_after == c.fit_log_mse_after);
  CHECK(r.fit_steps == c.fit_steps);
  CHECK(r.weighting == "datapoint");
  // a map fitted on MAPE (older checkpoints) loads and applies as stored, its tail included
  const model::Calibration mape = model::Calibration::from_json(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0,1],"log_speedup":[-1,1],)"
      R"("tail_slope":3,"fit_points":9,"fit_mape_before":80,"fit_mape_after":60})");
  CHECK(mape.active());
  CHECK(mape.kind == "isotonic_mape");
  CHECK(std::isnan(mape.fit_factor_before));
  CHECK(mape.apply(2) == doctest::Approx(std::exp(4.0)));
  CHECK(test::contains(train::calibration_summary(mape), "calibration map (MAPE)"));
  CHECK_FALSE(test::contains(train::calibration_summary(mape), "median error factor"));
  CHECK(test::contains(train::calibration_summary(c), "calibration map (squared ln error)"));
  CHECK(test::contains(train::calibration_summary(c), "median error factor"));
  for (double t : {-1.0, 0.15, 0.5, 2.0}) CHECK(r.apply(t) == c.apply(t));
  const model::Calibration cp = model::fit_isotonic_log(s, y, y, 4096, false, {0, 0, 1, 1});
  CHECK(model::Calibration::from_json(cp.to_json()).weighting == "program");
  CHECK(model::Calibration::from_json(c.to_json()).folds == 0);
  model::Calibration cf = c;
  cf.folds = 3;
  CHECK(model::Calibration::from_json(cf.to_json()).folds == 3);
  // maps written before the weighting existed were fitted over datapoints
  CHECK(
      model::Calibration::from_json(
          R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],"tail_slope":1})")
          .weighting == "datapoint");
  auto throws_with = [](const std::string& text, const std::string& what) {
    try {
      model::Calibration::from_json(text);
      FAIL("accepted: " << text);
    } catch (const std::runtime_error& e) {
      CHECK_MESSAGE(test::contains(e.what(), what), e.what());
    }
  };
  const std::string tail = R"(,"tail_slope":1})";
  throws_with("not json", "bad JSON");
  throws_with(R"({"format_version":2,"kind":"isotonic_mape","x":[0],"log_speedup":[0])" + tail,
              "format_version");
  throws_with(R"({"format_version":1,"kind":"spline","x":[0],"log_speedup":[0])" + tail,
              "unknown 'spline'");
  throws_with(R"({"format_version":1,"kind":"isotonic_mape","x":[0,1],"log_speedup":[0])" + tail,
              "x has 2 knots");
  throws_with(R"({"format_version":1,"kind":"isotonic_mape","x":[0,1],"log_speedup":[1,0])" + tail,
              "not strictly increasing");
  throws_with(R"({"format_version":1,"kind":"isotonic_mape","x":[],"log_speedup":[])" + tail,
              "no knots");
  throws_with(R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],)"
              R"("tail_slope":1,"weighting":"schedule"})",
              "unknown 'schedule'");
  throws_with(R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],)"
              R"("tail_slope":1,"weighting":3})",
              "weighting: not a string");
  for (const char* folds : {"1", "-2", "1001", "2.5", "\"3\""})
    throws_with(std::string(R"({"format_version":1,"kind":"isotonic_mape","x":[0],)") +
                    R"("log_speedup":[0],"tail_slope":1,"folds":)" + folds + "}",
                ".folds");
  throws_with(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],"tail_slope":-1})",
      "tail_slope");
  // values that parse but would overflow, underflow or tie every prediction
  throws_with(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0,1],"log_speedup":[800,801])" + tail,
      "outside [-50, 50]");
  throws_with(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0,1],"log_speedup":[-801,-800])" + tail,
      "outside [-50, 50]");
  for (const char* slope : {"1e-300", "1e308"})
    throws_with(
        std::string(
            R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],"tail_slope":)") +
            slope + "}",
        "tail_slope");
  // steep tails that fits wrote before the 1000 clamp still load
  CHECK_NOTHROW(model::Calibration::from_json(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[0],"tail_slope":1e7})"));
  // a fit on crowded scores keeps a tail the loader accepts
  const model::Calibration steep =
      model::fit_isotonic_log({0.0, 1e-7, 2e-7, 3e-7}, {0.1, 1.0, 5.0, 40.0}, {1, 1, 1, 1});
  CHECK(steep.tail_slope <= 1e3);
  CHECK_NOTHROW(model::Calibration::from_json(steep.to_json()));
  CHECK_THROWS_AS(model::fit_isotonic_log({1.0}, {}, {}), std::invalid_argument);
  CHECK_THROWS_AS(model::fit_isotonic_log({std::nan("")}, {1.0}, {1.0}), std::invalid_argument);
  // the error names the number readably, not with %f's 300 digits
  try {
    model::Calibration::from_json(
        R"({"format_version":1,"kind":"isotonic_mape","x":[0],"log_speedup":[1e300])" + tail);
    FAIL("accepted ln speedup 1e300");
  } catch (const std::runtime_error& e) {
    CHECK_MESSAGE(test::contains(e.what(), "ln speedup 1e+300, outside"), e.what());
    CHECK(std::string(e.what()).size() < 120);
  }
  // "written by a newer lcm?" only for a version above 1
  for (const char* v : {"0", "-1", "\"1\"", "1.5"}) {
    try {
      model::Calibration::from_json(std::string(R"({"format_version":)") + v +
                                    R"(,"kind":"isotonic_mape","x":[0],"log_speedup":[0])" + tail);
      FAIL("accepted format_version " << v);
    } catch (const std::runtime_error& e) {
      CHECK_MESSAGE(test::contains(e.what(), "format_version"), e.what());
      CHECK_MESSAGE(test::contains(e.what(), "newer") == (std::string(v) == "1.5"), e.what());
    }
  }
  // a key given twice is damage, not a choice of the first or the last
  throws_with(
      R"({"format_version":1,"kind":"isotonic_mape","x":[0],"x":[5],"log_speedup":[0])" + tail,
      "duplicate key \"x\"");
}

TEST_CASE("a steep tail stays finite and > 0 far from the knots (held at e^±50)") {
  // the steepest tail a fit writes (1000) and the steepest a loader accepts (1e9)
  for (const char* slope : {"1000", "1e9"}) {
    INFO("tail_slope " << slope);
    const model::Calibration c = model::Calibration::from_json(
        std::string(R"({"format_version":1,"kind":"isotonic_mape","x":[0,0.001],)") +
        R"("log_speedup":[-1,2],"tail_slope":)" + slope + "}");
    double prev = 0;
    for (double t = -50; t <= 50; t += 0.01) {
      const double v = c.apply(t);
      CHECK(std::isfinite(v));
      CHECK(v > 0);
      CHECK(v >= prev);  // non-decreasing; strictly inside e^±50
      if (v > std::exp(-49.9) && v < std::exp(49.9) && prev > std::exp(-49.9)) CHECK(v > prev);
      prev = v;
    }
    CHECK(c.apply(-1e6) == doctest::Approx(std::exp(-50.0)));
    CHECK(c.apply(1e6) == doctest::Approx(std::exp(50.0)));
    CHECK(c.apply(1e300) == doctest::Approx(std::exp(50.0)));
    CHECK(c.apply(0.0005) == doctest::Approx(std::exp(0.5)));  // between knots: unchanged
  }
}

TEST_CASE("lcm-train fits the map on its training split, stores it in best; Predictor applies it") {
  const std::string dir = test::temp_dir("calibration_train");
  config::Config c = test::tiny_run_config(test::write_tiny_splits(dir, 21), dir + "/run");
  train::TrainOptions o;
  o.quiet = true;
  const train::TrainResult r = train::train(c, o);
  REQUIRE(r.exit_code == 0);
  const auto meta = read_safetensors(r.paths.best).metadata;
  REQUIRE(meta.count(train::meta::kCalibration) == 1);
  const model::Calibration cal = train::load_calibration(r.paths.best);
  CHECK(cal.active());
  CHECK(cal.fit_split == "train");
  CHECK(cal.fit_points == 16 * 12);  // every labelled training datapoint
  CHECK(cal.kind == "isotonic_log");
  CHECK(cal.fit_log_mse_after <= cal.fit_log_mse_before);
  CHECK(cal.fit_steps >= model::kMinCalibrationSteps);
  CHECK(cal.weighting == "program");  // the default training.calibration_weighting
  CHECK(read_safetensors(r.paths.last).metadata.count(train::meta::kCalibration) == 0);

  config::Config e = c;
  config::apply_overrides(e, {"eval.weights_path=" + r.paths.best});
  const train::Predictor calibrated(e);
  const data::PreparedSplit valid = train::prepare_eval_input(e, false, false);
  const std::vector<train::Prediction> p = calibrated.predict(valid.dataset);
  config::apply_overrides(e, {"eval.calibrated=false"});
  const train::Predictor raw(e);
  CHECK_FALSE(raw.calibration().active());
  const std::vector<train::Prediction> q = raw.predict(valid.dataset);
  REQUIRE(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK(p[i].score == q[i].score);
    CHECK(p[i].uncalibrated == q[i].predicted);
    CHECK(p[i].predicted == cal.apply(p[i].score));
    CHECK(model::reported_speedup(p[i].score, calibrated.model().config().log_output,
                                  &calibrated.calibration()) == p[i].predicted);
  }
  // the same rankings: every per-program metric but MAPE is equal
  const model::MetricsSummary mp = train::evaluate_predictions(valid.dataset, p);
  const model::MetricsSummary mq = train::evaluate_predictions(valid.dataset, q);
  CHECK(mp.mean_spearman == mq.mean_spearman);
  CHECK(mp.mean_ndcg == mq.mean_ndcg);
  CHECK(mp.mean_top1_recovered == mq.mean_top1_recovered);
  CHECK(mp.mean_top5_recovered == mq.mean_top5_recovered);
  CHECK(mp.mean_mape != mq.mean_mape);

  // --calibrate-only's path refits the last checkpoint in place, tensors unchanged
  const auto before = read_safetensors(r.paths.last);
  const model::Calibration again =
      train::calibrate_checkpoint(c, r.paths.last, test::quiet_training());
  const auto after = read_safetensors(r.paths.last);
  CHECK(again.active());
  CHECK(after.metadata.count(train::meta::kCalibration) == 1);
  test::expect_same_tensors(after, before);

  // training.calibration_weighting=datapoint: the MAPE over the training datapoints
  config::Config d = c;
  config::apply_overrides(d, {"training.calibration_weighting=datapoint"});
  const model::Calibration flat =
      train::calibrate_checkpoint(d, r.paths.last, test::quiet_training());
  CHECK(flat.weighting == "datapoint");
  CHECK(train::load_calibration(r.paths.last).weighting == "datapoint");

  // training.calibrate=false leaves the best checkpoint uncalibrated
  config::apply_overrides(c, {"training.calibrate=false", "experiment.name=raw"});
  const train::TrainResult r2 = train::train(c, o);
  REQUIRE(r2.exit_code == 0);
  CHECK(read_safetensors(r2.paths.best).metadata.count(train::meta::kCalibration) == 0);
}

TEST_CASE("the anchored map (score 0 -> 1x) is the clamp of each side's fit: never worse than 1x") {
  // every score negative (the model says "slower than untransformed") but every schedule is
  // 1.5x faster: the best map under the anchor predicts ~1x on the left, not exp(score); the
  // clamped side keeps the slope floor (0.02 in ln speedup per unit score)
  std::vector<double> s, y, raw;
  for (int i = 0; i < 50; ++i) {
    s.push_back(-1.0 - 0.01 * i);
    y.push_back(1.5);
    raw.push_back(std::exp(s.back()));
  }
  const model::Calibration c = model::fit_isotonic_log(s, y, raw, 4096, true);
  CHECK(c.apply(0.0) == 1.0);
  double ape = 0;
  for (double x : s) {
    CHECK(c.apply(x) == doctest::Approx(std::exp(0.02 * x)).epsilon(1e-9));
    ape += 100.0 * std::fabs(1.5 - c.apply(x)) / (1.5 + 1e-5);
  }
  CHECK(c.fit_mape_after < c.fit_mape_before);
  CHECK(c.fit_mape_after == doctest::Approx(ape / 50).epsilon(1e-9));
  CHECK(c.fit_mape_after < 100.0 / 3.0 + 2.0);  // within 2 points of the flat clamp's 33.3
  // and on the right: scores above 0 with speedups below 1 are clamped to ~1x
  std::vector<double> s2, y2, raw2;
  for (int i = 0; i < 50; ++i) {
    s2.push_back(0.5 + 0.01 * i);
    y2.push_back(0.5);
    raw2.push_back(std::exp(s2.back()));
  }
  const model::Calibration c2 = model::fit_isotonic_log(s2, y2, raw2, 4096, true);
  for (double x : s2) CHECK(c2.apply(x) == doctest::Approx(std::exp(0.02 * x)).epsilon(1e-9));
  CHECK(c2.fit_mape_after < c2.fit_mape_before);
}

TEST_CASE("a clamped (flat) stretch of the map still orders schedules in float32 and printed") {
  // what a search reads: lcm-serve's 9 significant digits, parsed into a float by the
  // autoscheduler; scores 1e-4 apart on the clamped side must stay apart in both
  std::vector<double> s, y, raw;
  for (int i = 0; i < 200; ++i) {
    s.push_back(0.3 + 1e-4 * i);
    y.push_back(0.8);
    raw.push_back(std::exp(s.back()));
  }
  const model::Calibration c = model::fit_isotonic_log(s, y, raw, 4096, true);
  for (size_t i = 1; i < s.size(); ++i) {
    CHECK(float(c.apply(s[i - 1])) < float(c.apply(s[i])));
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%.9g", c.apply(s[i - 1]));
    std::snprintf(b, sizeof b, "%.9g", c.apply(s[i]));
    CHECK(std::strtod(a, nullptr) < std::strtod(b, nullptr));
  }
}

TEST_CASE("a map that would raise the error is not kept: fit_calibration reports raw outputs") {
  // perfect raw predictions (error 0) but scores unrelated to the speedups: any monotone map of
  // the scores is worse, so the result is kind none, with the rejected fit's numbers
  Rng rng(3);
  std::vector<train::Prediction> p;
  for (int i = 0; i < 400; ++i) {
    train::Prediction x;
    x.measured = std::exp(rng.uniform(-1, 1));
    x.score = rng.uniform(-1, 1);
    x.predicted = x.uncalibrated = x.measured;
    p.push_back(x);
  }
  const model::Calibration cal = train::fit_calibration(p, false);
  CHECK_FALSE(cal.active());
  CHECK(cal.fit_points == 400);
  CHECK(cal.fit_mape_before == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(cal.fit_mape_after > 10.0);
  CHECK(cal.fit_log_mse_after > cal.fit_log_mse_before);
  CHECK(test::contains(train::calibration_summary(cal), "was not kept (it "));
  const model::Calibration flat =
      train::fit_calibration(p, false, config::CalibrationWeighting::Datapoint);
  CHECK_FALSE(flat.active());
  CHECK(test::contains(train::calibration_summary(flat), "was not kept (it "));
  // a map fitted on MAPE that was not kept (stored before squared ln error): its MAPE reason
  model::Calibration old;
  old.fit_points = 10;
  old.fit_mape_before = 50;
  old.fit_mape_after = 60;
  old.weighting = "program";
  CHECK(test::contains(train::calibration_summary(old), "would raise their per-program MAPE"));
  // stored, it round-trips as "no map"
  const model::Calibration back = model::Calibration::from_json(cal.to_json());
  CHECK_FALSE(back.active());
  CHECK(back.fit_points == 400);
}
