// Tests of the calibration map (model/calibration, train/calibrate): the weighted isotonic L1 fit
// against a brute-force optimum, a map that is continuous and strictly increasing everywhere,
// per-program rankings unchanged while MAPE falls, an exact JSON round trip and clear errors,
// and the map fitted by lcm-train on its training split, stored in the best checkpoint and
// reapplied by Predictor (eval.calibrated=false restores the raw outputs).
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
#include "support/test_support.hpp"
#include "support/tiny_run.hpp"
#include "train/calibrate.hpp"
#include "train/predictor.hpp"
#include "train/run_state.hpp"
#include "train/trainer.hpp"

using namespace lcm;

namespace {

/// Σ m_i·|f_i − y_i| / (y_i + 1e-5): the MAPE objective (×n/100) of fitted values f, each point
/// weighted by m_i (all 1 when m is empty).
double objective(const std::vector<double>& f, const std::vector<double>& y,
                 const std::vector<double>& m = {}) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += (m.empty() ? 1.0 : m[i]) * std::fabs(f[i] - y[i]) / (y[i] + 1e-5);
  return s;
}

/// The smallest objective() of any non-decreasing f over points in score order, by dynamic
/// programming over candidate values (an L1 optimum takes its values among the y's).
double brute_force_isotonic(const std::vector<double>& y, const std::vector<double>& m = {}) {
  std::vector<double> v = y;
  std::sort(v.begin(), v.end());
  const size_t n = y.size(), k = v.size();
  std::vector<double> best(k, 0.0);  // best[j]: min cost of the prefix with last value v[j]
  for (size_t i = 0; i < n; ++i) {
    double run = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < k; ++j) {
      run = std::min(run, best[j]);  // min over values ≤ v[j]
      best[j] = run + (m.empty() ? 1.0 : m[i]) * std::fabs(v[j] - y[i]) / (y[i] + 1e-5);
    }
  }
  return *std::min_element(best.begin(), best.end());
}

}  // namespace

TEST_CASE("isotonic MAPE fit: weighted lower medians of pooled violators, by hand") {
  // scores 1..4, speedups 1, 3, 2, 4: 3 > 2 violates; pooled {3 (w 1/3), 2 (w 1/2)} has the
  // weighted lower median 2 (weight 1/2 of 5/6 reaches half first)
  const std::vector<double> s{1, 2, 3, 4}, y{1, 3, 2, 4};
  const model::Calibration c = model::fit_isotonic_mape(s, y, y);
  REQUIRE(c.x.size() == 3);
  CHECK(c.x[0] == 1.0);
  CHECK(c.x[1] == 2.5);
  CHECK(c.x[2] == 4.0);
  CHECK(c.apply(1) == doctest::Approx(1.0));
  CHECK(c.apply(2.5) == doctest::Approx(2.0));
  CHECK(c.apply(4) == doctest::Approx(4.0));
  CHECK(c.apply(3.25) == doctest::Approx(std::sqrt(8.0)));  // log-linear between knots
  CHECK(c.tail_slope == doctest::Approx(std::log(4.0) / 3.0));
  CHECK(c.apply(5) == doctest::Approx(4.0 * std::exp(std::log(4.0) / 3.0)));
  CHECK(c.fit_points == 4);
  CHECK(c.fit_mape_before == doctest::Approx(0.0).epsilon(1e-4));
}

TEST_CASE("isotonic MAPE fit reaches the brute-force optimum on random data, in both weightings") {
  Rng rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const bool by_program = trial % 2 == 1;
    const int n = 2 + int(rng.uniform(0, 9));
    std::vector<double> s, y, m;
    std::vector<int64_t> program;
    for (int i = 0; i < n; ++i) {
      // distinct, increasing, close enough that the slope floor (0.02) moves a knot by < 1e-5
      s.push_back((double(i) + rng.uniform(0, 0.5)) * 1e-3);
      y.push_back(std::exp(rng.uniform(-2, 2)));
      program.push_back(int64_t(rng.uniform(0, 3)));  // programs of unequal sizes
    }
    if (by_program)
      for (int i = 0; i < n; ++i)
        m.push_back(1.0 / double(std::count(program.begin(), program.end(), program[i])));
    const model::Calibration c = model::fit_isotonic_mape(
        s, y, y, 1 << 20, false, by_program ? program : std::vector<int64_t>{});
    CHECK(c.weighting == (by_program ? "program" : "datapoint"));
    // the step values at each point are the map at its block's knot; read them through
    // fit_mape_after's definition: recompute the optimum's objective from the blocks
    const double best = brute_force_isotonic(y, m);
    // every knot value is one of the data values (a weighted median), up to the slope floor
    for (double l : c.log_speedup) {
      double nearest = 1e300;
      for (double v : y) nearest = std::min(nearest, std::fabs(std::log(v) - l));
      CHECK(nearest < 1e-4);
    }
    // with one point per block the step function is the map at the knots; blocks of several
    // points: the knot value applies to the whole block. Recover block membership from the
    // knots: consecutive points belong to the knot whose value they take in the optimum, so
    // compare objectives: the PAVA objective must equal the brute-force optimum.
    std::vector<double> f(y.size());
    size_t k = 0;
    double sum = 0;
    size_t start = 0, count = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      sum += s[i];
      ++count;
      if (k < c.x.size() && std::fabs(sum / double(count) - c.x[k]) < 1e-12) {
        for (size_t j = start; j <= i; ++j) f[j] = std::exp(c.log_speedup[k]);
        ++k;
        start = i + 1;
        sum = 0;
        count = 0;
      }
    }
    REQUIRE(k == c.x.size());  // every point was assigned to a block
    CHECK(objective(f, y, m) == doctest::Approx(best).epsilon(1e-4));
  }
}

TEST_CASE("the program weighting minimises the per-program mean MAPE that lcm-eval reports") {
  // one program with 300 schedules whose speedups are 1/3 of what the scores say, 24 programs of
  // 6 schedules where they are 3x: over datapoints the big program dominates the fit (MAPE
  // weights 1/y favour its small speedups too), over programs the small ones do
  Rng rng(11);
  std::vector<std::string> names;
  std::vector<int64_t> program;
  std::vector<double> score, measured, raw;
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
  const model::Calibration by_point = model::fit_isotonic_mape(score, measured, raw);
  const model::Calibration by_program =
      model::fit_isotonic_mape(score, measured, raw, 4096, false, program);
  CHECK(by_point.weighting == "datapoint");
  CHECK(by_program.weighting == "program");
  auto metrics = [&](const model::Calibration& c) {
    std::vector<double> cal;
    for (double x : score) cal.push_back(c.apply(x));
    return model::compute_metrics(names, measured, cal);
  };
  const model::MetricsSummary mp = metrics(by_program), md = metrics(by_point);
  // each fit wins on its own objective, by far
  CHECK(mp.mean_mape < 0.5 * md.mean_mape);
  CHECK(md.weighted_mape < 0.5 * mp.weighted_mape);
  // fit_mape_* measure the objective the fit minimised (§7's 6-decimal rounding aside)
  CHECK(by_program.fit_mape_after == doctest::Approx(mp.mean_mape).epsilon(1e-4));
  CHECK(by_point.fit_mape_after == doctest::Approx(md.weighted_mape).epsilon(1e-4));
  CHECK(by_program.fit_mape_before ==
        doctest::Approx(model::compute_metrics(names, measured, raw).mean_mape).epsilon(1e-4));
  CHECK_THROWS_AS(model::fit_isotonic_mape(score, measured, raw, 4096, false, {1, 2}),
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
  const model::Calibration c = model::fit_isotonic_mape(s, y, y, 256);
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

TEST_CASE("per-program ranking metrics are unchanged by the map and MAPE falls on the fit data") {
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
  const model::Calibration c = model::fit_isotonic_mape(score, measured, raw_speedup);
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
  CHECK(after.mean_mape < 0.5 * before.mean_mape);
  CHECK(c.fit_mape_after < c.fit_mape_before);
  CHECK(c.fit_mape_before == doctest::Approx(model::mape_percent(raw_speedup, measured)));
  CHECK(c.fit_mape_after == doctest::Approx(model::mape_percent(cal, measured)));
}

TEST_CASE("calibration JSON round trip is exact; malformed maps are named errors") {
  const std::vector<double> s{0.1, 0.2, 0.35, 0.9}, y{0.5, 1.5, 1.1, 7.0};
  const model::Calibration c = model::fit_isotonic_mape(s, y, y);
  const model::Calibration r = model::Calibration::from_json(c.to_json());
  CHECK(r.kind == c.kind);
  CHECK(r.x == c.x);
  CHECK(r.log_speedup == c.log_speedup);
  CHECK(r.tail_slope == c.tail_slope);
  CHECK(r.fit_points == c.fit_points);
  CHECK(r.fit_mape_after == c.fit_mape_after);
  CHECK(r.weighting == "datapoint");
  for (double t : {-1.0, 0.15, 0.5, 2.0}) CHECK(r.apply(t) == c.apply(t));
  const model::Calibration cp = model::fit_isotonic_mape(s, y, y, 4096, false, {0, 0, 1, 1});
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
      model::fit_isotonic_mape({0.0, 1e-7, 2e-7, 3e-7}, {0.1, 1.0, 5.0, 40.0}, {1, 1, 1, 1});
  CHECK(steep.tail_slope <= 1e3);
  CHECK_NOTHROW(model::Calibration::from_json(steep.to_json()));
  CHECK_THROWS_AS(model::fit_isotonic_mape({1.0}, {}, {}), std::invalid_argument);
  CHECK_THROWS_AS(model::fit_isotonic_mape({std::nan("")}, {1.0}, {1.0}), std::invalid_argument);
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
  CHECK(cal.fit_mape_after <= cal.fit_mape_before);
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
    CHECK(calibrated.speedup_of(p[i].score) == p[i].predicted);
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
  REQUIRE(after.tensors.size() == before.tensors.size());
  for (size_t i = 0; i < after.tensors.size(); ++i)
    CHECK(after.tensors[i].second.bytes == before.tensors[i].second.bytes);

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
  const model::Calibration c = model::fit_isotonic_mape(s, y, raw, 4096, true);
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
  const model::Calibration c2 = model::fit_isotonic_mape(s2, y2, raw2, 4096, true);
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
  const model::Calibration c = model::fit_isotonic_mape(s, y, raw, 4096, true);
  for (size_t i = 1; i < s.size(); ++i) {
    CHECK(float(c.apply(s[i - 1])) < float(c.apply(s[i])));
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%.9g", c.apply(s[i - 1]));
    std::snprintf(b, sizeof b, "%.9g", c.apply(s[i]));
    CHECK(std::strtod(a, nullptr) < std::strtod(b, nullptr));
  }
}

TEST_CASE("a map that would raise the MAPE is not kept: fit_calibration reports raw outputs") {
  // perfect raw predictions (MAPE 0) but scores unrelated to the speedups: any monotone map of
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
  CHECK(test::contains(train::calibration_summary(cal), "would raise their per-program MAPE"));
  const model::Calibration flat =
      train::fit_calibration(p, false, config::CalibrationWeighting::Datapoint);
  CHECK_FALSE(flat.active());
  CHECK(test::contains(train::calibration_summary(flat), "would raise their MAPE"));
  // stored, it round-trips as "no map"
  const model::Calibration back = model::Calibration::from_json(cal.to_json());
  CHECK_FALSE(back.active());
  CHECK(back.fit_points == 400);
}
