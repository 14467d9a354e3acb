// The monotone calibration map fitted on squared ln error (see calibration.hpp).
#include "model/calibration.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "model/metadata_json.hpp"
#include "model/metrics.hpp"
#include "model/speedup_bounds.hpp"

namespace lcm::model {

namespace {

/// The smallest slope of a segment of the map in (score, ln speedup). It keeps the map strictly
/// increasing whatever the medians, and visibly so: where the fit is flat (a model relative to
/// the untransformed schedule whose positive scores are clamped at 1×, say) two schedules whose
/// scores differ by 1e-4 still differ by 2e-6 relative in the reported speedup, above float32
/// resolution and the 9 significant digits lcm-serve answers with, so a search that reads the
/// calibrated values ranks them as the raw scores do. (1e-6 here tied ~40% of such pairs.)
constexpr double kMinSlope = 0.02;

/// The steepest tail (d ln speedup / d score) from_json accepts. fit_isotonic_log writes flat
/// tails (kMinSlope); maps fitted on MAPE (isotonic_mape) carry their mean slope, up to ~1e7
/// where training scores crowded together, and must load; 1e308 and the like are damage.
constexpr double kMaxLoadedTailSlope = 1e9;

/// A run of consecutive scores on which the step function is constant: its weighted mean of
/// ln y is the block's value.
struct Block {
  double weight = 0;      // Σ w
  double log_sum = 0;     // Σ w · ln y
  double lo = 0, hi = 0;  // its smallest and largest score
  int64_t n = 0;          // datapoints
  double value() const { return log_sum / weight; }
  void merge(const Block& o) {
    weight += o.weight;
    log_sum += o.log_sum;
    hi = o.hi;
    n += o.n;
  }
};

/// `v` with %g's 6 significant digits (an error message's number; never 300 digits).
std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[noreturn]] void bad(const std::string& what) {
  throw std::runtime_error("lcm.calibration" + what);
}

double number(const rapidjson::Document& d, const char* key) {
  if (!d.HasMember(key) || !d[key].IsNumber())
    bad(std::string(".") + key + ": missing or not a number");
  return d[key].GetDouble();
}

std::vector<double> numbers(const rapidjson::Document& d, const char* key) {
  if (!d.HasMember(key) || !d[key].IsArray())
    bad(std::string(".") + key + ": missing or not an array");
  std::vector<double> out;
  for (auto& v : d[key].GetArray()) {
    if (!v.IsNumber()) bad(std::string(".") + key + ": not numbers");
    out.push_back(v.GetDouble());
  }
  return out;
}

}  // namespace

double Calibration::apply(double score) const {
  if (std::isnan(score)) return score;
  if (std::isinf(score)) return score > 0 ? score : 0.0;
  double ln;
  if (score <= x.front()) {
    ln = log_speedup.front() + tail_slope * (score - x.front());
  } else if (score >= x.back()) {
    ln = log_speedup.back() + tail_slope * (score - x.back());
  } else {
    const size_t j = size_t(std::upper_bound(x.begin(), x.end(), score) - x.begin());  // 1..k-1
    const double t = (score - x[j - 1]) / (x[j] - x[j - 1]);
    ln = log_speedup[j - 1] + t * (log_speedup[j] - log_speedup[j - 1]);
  }
  // A steep tail far from the knots would reach exp() overflow (inf) or underflow (0), which a
  // caller reads as an error answer; the knots' own bound holds the tails too.
  return std::exp(std::clamp(ln, -kMaxAbsLogSpeedup, kMaxAbsLogSpeedup));
}

std::string Calibration::to_json() const {
  MetadataWriter m(1);
  auto& w = m.w;
  w.Key("kind");
  w.String(kind.c_str());
  write_number_array(w, "x", x);
  write_number_array(w, "log_speedup", log_speedup);
  w.Key("tail_slope");
  w.Double(tail_slope);
  w.Key("fit_points");
  w.Int64(fit_points);
  w.Key("fit_mape_before");
  w.Double(fit_mape_before);
  w.Key("fit_mape_after");
  w.Double(fit_mape_after);
  w.Key("fit_split");
  w.String(fit_split.c_str());
  w.Key("weighting");
  w.String(weighting.c_str());
  w.Key("folds");
  w.Int(folds);
  const std::pair<const char*, double> recorded[] = {
      {"fit_factor_before", fit_factor_before},       {"fit_factor_after", fit_factor_after},
      {"fit_within_2x_before", fit_within_2x_before}, {"fit_within_2x_after", fit_within_2x_after},
      {"fit_log_mse_before", fit_log_mse_before},     {"fit_log_mse_after", fit_log_mse_after}};
  for (const auto& [key, v] : recorded)
    if (std::isfinite(v)) {
      w.Key(key);
      w.Double(v);
    }
  if (fit_steps > 0) {
    w.Key("fit_steps");
    w.Int64(fit_steps);
  }
  if (!refused.empty()) {
    w.Key("refused");
    w.String(refused.c_str());
  }
  return m.text();
}

Calibration Calibration::from_json(const std::string& text) {
  rapidjson::Document d;
  parse_metadata_object(d, text, "lcm.calibration");
  if (!d.HasMember("format_version") || !d["format_version"].IsInt() ||
      d["format_version"].GetInt() != 1)
    bad(".format_version: missing or not 1" +
        std::string(d.HasMember("format_version") && d["format_version"].IsNumber() &&
                            d["format_version"].GetDouble() > 1
                        ? " (written by a newer lcm?)"
                        : ""));
  Calibration c;
  c.kind = metadata_string(d, "lcm.calibration", "kind");
  if (c.kind != "none" && c.kind != "isotonic_log" && c.kind != "isotonic_mape")
    bad(".kind: unknown '" + c.kind + "' (expected none|isotonic_log|isotonic_mape)");
  c.x = numbers(d, "x");
  c.log_speedup = numbers(d, "log_speedup");
  if (c.x.size() != c.log_speedup.size())
    bad(": x has " + std::to_string(c.x.size()) + " knots, log_speedup " +
        std::to_string(c.log_speedup.size()));
  if (c.kind != "none" && c.x.empty()) bad(": no knots");
  for (size_t i = 0; i < c.x.size(); ++i) {
    if (!std::isfinite(c.x[i]) || !std::isfinite(c.log_speedup[i])) bad(": a knot is not finite");
    // |ln speedup| ≤ 50 (speedups e^±50): beyond, exp() of the map heads for 0 or inf, which a
    // caller would read as an error answer or an overflow, not as a prediction
    if (std::fabs(c.log_speedup[i]) > kMaxAbsLogSpeedup)
      bad(": knot " + std::to_string(i) + " has ln speedup " + shortest(c.log_speedup[i]) +
          ", outside [-50, 50]");
    if (i > 0 && !(c.x[i] > c.x[i - 1] && c.log_speedup[i] > c.log_speedup[i - 1]))
      bad(": knots are not strictly increasing at knot " + std::to_string(i));
  }
  c.tail_slope = number(d, "tail_slope");
  if (!std::isfinite(c.tail_slope) ||
      !(c.tail_slope >= 1e-9 && c.tail_slope <= kMaxLoadedTailSlope))
    bad(".tail_slope: not a finite number in [1e-9, 1e9]");
  if (d.HasMember("fit_points") && d["fit_points"].IsInt64())
    c.fit_points = d["fit_points"].GetInt64();
  if (d.HasMember("fit_mape_before") && d["fit_mape_before"].IsNumber())
    c.fit_mape_before = d["fit_mape_before"].GetDouble();
  if (d.HasMember("fit_mape_after") && d["fit_mape_after"].IsNumber())
    c.fit_mape_after = d["fit_mape_after"].GetDouble();
  if (d.HasMember("fit_split") && d["fit_split"].IsString())
    c.fit_split = d["fit_split"].GetString();
  // maps written before the program weighting have no "weighting": they were datapoint fits
  if (d.HasMember("weighting")) {
    if (!d["weighting"].IsString()) bad(".weighting: not a string");
    c.weighting = d["weighting"].GetString();
    if (c.weighting != "datapoint" && c.weighting != "program")
      bad(".weighting: unknown '" + c.weighting + "' (expected datapoint|program)");
  }
  if (d.HasMember("folds")) {
    if (!d["folds"].IsInt() || d["folds"].GetInt() < 0 || d["folds"].GetInt() == 1 ||
        d["folds"].GetInt() > 1000)
      bad(".folds: not 0 (in-sample) or a number of folds in [2, 1000]");
    c.folds = d["folds"].GetInt();
  }
  for (auto [key, field] : {std::pair{"fit_factor_before", &c.fit_factor_before},
                            std::pair{"fit_factor_after", &c.fit_factor_after},
                            std::pair{"fit_within_2x_before", &c.fit_within_2x_before},
                            std::pair{"fit_within_2x_after", &c.fit_within_2x_after},
                            std::pair{"fit_log_mse_before", &c.fit_log_mse_before},
                            std::pair{"fit_log_mse_after", &c.fit_log_mse_after}})
    if (d.HasMember(key) && d[key].IsNumber()) *field = d[key].GetDouble();
  if (d.HasMember("fit_steps") && d["fit_steps"].IsInt64()) c.fit_steps = d["fit_steps"].GetInt64();
  if (d.HasMember("refused") && d["refused"].IsString()) c.refused = d["refused"].GetString();
  return c;
}

namespace {

/// Pool adjacent violators over the points idx[from, to) (sorted by score) in bins of ≥ per_bin
/// consecutive scores (equal scores together): the blocks of the least-squares non-decreasing
/// step function of ln y, values strictly increasing. `mult[i]` is point i's weight.
std::vector<Block> pava(const std::vector<double>& score, const std::vector<double>& log_y,
                        const std::vector<double>& mult, const std::vector<size_t>& idx,
                        size_t from, size_t to, size_t per_bin) {
  std::vector<Block> stack;
  for (size_t i = from; i < to;) {
    Block b;
    b.lo = score[idx[i]];
    size_t j = i;
    while (j < to && (j - i < per_bin || score[idx[j]] == score[idx[j - 1]])) {
      const size_t p = idx[j];
      b.weight += mult[p];
      b.log_sum += mult[p] * log_y[p];
      b.hi = score[p];
      ++b.n;
      ++j;
    }
    i = j;
    stack.push_back(b);
    while (stack.size() >= 2 && stack[stack.size() - 2].value() >= stack.back().value()) {
      const Block top = stack.back();
      stack.pop_back();
      stack.back().merge(top);
    }
  }
  return stack;
}

/// Appends the knot (x, l) to c, raising l so that the new segment has slope ≥ kMinSlope; a knot
/// not to the right of the last one (rounding of block means), or one that the slope floor took
/// outside ln speedup ±50 (the bound from_json checks; only across scores ~2500 apart), is left
/// out.
void push_knot(Calibration& c, double x, double l) {
  if (!c.x.empty()) {
    if (!(x > c.x.back())) return;
    l = std::max(l, c.log_speedup.back() + kMinSlope * (x - c.x.back()));
  }
  if (!(std::fabs(l) <= kMaxAbsLogSpeedup)) return;
  c.x.push_back(x);
  c.log_speedup.push_back(l);
}

/// Median of |ln(ŷ/y)| as a factor, and the share ≤ ln 2, over the points idx (every y > 0; a
/// ŷ that is not > 0 is infinitely far). As MetricsSummary::median_error_factor, unrounded.
std::pair<double, double> error_factor(const std::vector<double>& predicted,
                                       const std::vector<double>& measured,
                                       const std::vector<size_t>& idx) {
  std::vector<double> err;
  err.reserve(idx.size());
  int64_t near = 0;
  for (size_t i : idx) {
    const double e = predicted[i] > 0 ? std::fabs(std::log(predicted[i] / measured[i]))
                                      : std::numeric_limits<double>::infinity();
    near += e <= std::log(2.0) + 1e-12;
    err.push_back(e);
  }
  const size_t h = err.size() / 2;
  std::nth_element(err.begin(), err.begin() + long(h), err.end());
  double med = err[h];
  if (err.size() % 2 == 0)
    med = 0.5 * (med + *std::max_element(err.begin(), err.begin() + long(h)));
  return {std::exp(med), double(near) / double(err.size())};
}

}  // namespace

Calibration fit_isotonic_log(const std::vector<double>& score, const std::vector<double>& speedup,
                             const std::vector<double>& before, int max_bins, bool anchor_at_zero,
                             const std::vector<int64_t>& program) {
  if (score.size() != speedup.size() || before.size() != speedup.size())
    throw std::invalid_argument("fit_isotonic_log: " + std::to_string(score.size()) + " scores, " +
                                std::to_string(speedup.size()) + " speedups, " +
                                std::to_string(before.size()) + " predictions");
  if (!program.empty() && program.size() != score.size())
    throw std::invalid_argument("fit_isotonic_log: " + std::to_string(score.size()) + " scores, " +
                                std::to_string(program.size()) + " program ids");
  if (max_bins < 1) throw std::invalid_argument("fit_isotonic_log: max_bins must be >= 1");
  std::vector<size_t> idx;
  std::vector<double> log_y(score.size(), 0.0);
  for (size_t i = 0; i < score.size(); ++i)
    if (std::isfinite(score[i]) && std::isfinite(speedup[i]) && speedup[i] > 0 &&
        std::fabs(std::log(speedup[i])) <= kMaxAbsLogSpeedup) {
      idx.push_back(i);
      log_y[i] = std::log(speedup[i]);
    }
  if (idx.empty()) throw std::invalid_argument("fit_isotonic_log: no datapoint to fit on");
  // each point's weight: 1, or 1 / (its program's fitted points)
  std::vector<double> mult(score.size(), 1.0);
  if (!program.empty()) {
    std::map<int64_t, int64_t> count;
    for (size_t i : idx) ++count[program[i]];
    for (size_t i : idx) mult[i] = 1.0 / double(count[program[i]]);
  }
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return score[a] != score[b] ? score[a] < score[b] : a < b; });
  const size_t n = idx.size();
  const size_t per_bin = (n + size_t(max_bins) - 1) / size_t(max_bins);

  Calibration c;
  c.kind = "isotonic_log";
  c.weighting = program.empty() ? "datapoint" : "program";
  if (!anchor_at_zero) {
    for (const Block& b : pava(score, log_y, mult, idx, 0, n, per_bin)) {
      push_knot(c, b.lo, b.value());
      push_knot(c, b.hi, b.value());  // left out when hi = lo
      ++c.fit_steps;
    }
  } else {
    // g(0) = 0 fixed: the problem splits at score 0 into a fit ≤ 0 on the negative scores and
    // one ≥ 0 on the positive ones, each the clamp of its unconstrained fit (isotonic regression
    // under bounds, any separable convex loss), with the knot (0, 0) between them.
    const size_t neg = size_t(std::lower_bound(idx.begin(), idx.end(), 0.0,
                                               [&](size_t i, double v) { return score[i] < v; }) -
                              idx.begin());
    const size_t pos = size_t(std::upper_bound(idx.begin(), idx.end(), 0.0,
                                               [&](double v, size_t i) { return v < score[i]; }) -
                              idx.begin());
    std::vector<std::pair<double, double>> left;  // clamped to ln ≤ 0
    for (const Block& b : pava(score, log_y, mult, idx, 0, neg, per_bin)) {
      left.push_back({b.lo, std::min(0.0, b.value())});
      if (b.hi > b.lo) left.push_back({b.hi, std::min(0.0, b.value())});
      ++c.fit_steps;
    }
    // strictly increasing into the anchor: lower each left knot as needed, right to left
    double next_x = 0, next_l = 0;
    for (size_t k = left.size(); k-- > 0;) {
      left[k].second = std::min(left[k].second, next_l - kMinSlope * (next_x - left[k].first));
      next_x = left[k].first;
      next_l = left[k].second;
    }
    for (const auto& [x, l] : left) push_knot(c, x, l);
    push_knot(c, 0.0, 0.0);
    ++c.fit_steps;
    for (const Block& b : pava(score, log_y, mult, idx, pos, n, per_bin)) {  // clamped to ln ≥ 0
      push_knot(c, b.lo, std::max(0.0, b.value()));
      push_knot(c, b.hi, std::max(0.0, b.value()));
      ++c.fit_steps;
    }
  }
  c.tail_slope = kMinSlope;  // flat beyond the end knots (see fit_isotonic_log)
  c.fit_points = int64_t(n);
  // what the fit changed, before and after: the weighted MAPE (Σ mult·APE / Σ mult: the
  // per-program mean of model-spec §7.4 under the program weighting), the weighted mean squared
  // ln error it minimised, and the median error factor and within-2× share over datapoints
  std::vector<double> after(score.size(), 0.0);
  for (size_t i : idx) after[i] = c.apply(score[i]);
  double w = 0, mape_b = 0, mape_a = 0, mse_b = 0, mse_a = 0;
  for (size_t i : idx) {
    const double y = speedup[i];
    w += mult[i];
    mape_b += mult[i] * loss_ape(y, before[i]);
    mape_a += mult[i] * loss_ape(y, after[i]);
    const double lb =
        before[i] > 0 ? std::log(before[i]) - log_y[i] : std::numeric_limits<double>::infinity();
    mse_b += mult[i] * lb * lb;
    const double la = std::log(after[i]) - log_y[i];
    mse_a += mult[i] * la * la;
  }
  c.fit_mape_before = mape_b / w;
  c.fit_mape_after = mape_a / w;
  c.fit_log_mse_before = mse_b / w;
  c.fit_log_mse_after = mse_a / w;
  std::tie(c.fit_factor_before, c.fit_within_2x_before) = error_factor(before, speedup, idx);
  std::tie(c.fit_factor_after, c.fit_within_2x_after) = error_factor(after, speedup, idx);
  return c;
}

double mape_percent(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double s = 0;
  int64_t n = 0;
  for (size_t i = 0; i < predicted.size() && i < measured.size(); ++i) {
    if (std::isnan(measured[i])) continue;
    s += loss_ape(measured[i], predicted[i]);
    ++n;
  }
  return n ? s / double(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace lcm::model
