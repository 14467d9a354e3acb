// Evaluation metrics of docs/model-spec.md §7 (see metrics.hpp): rounding, APE, average ranks,
// Spearman, scikit-learn-compatible nDCG with tie averaging, per-program grouping and means.
#include "model/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace lcm::model {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double round6(double x) {
  return std::nearbyint(x * 1e6) / 1e6;
}

double ape(double target, double pred) {
  return 100.0 * std::fabs(target - pred) / target;
}

double loss_ape(double target, double pred) {
  return 100.0 * std::fabs(target - pred) / (target + 1e-5);
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(n);
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j + 1 < n && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = 0.5 * double(i + j) + 1.0;  // positions i..j are ranks i+1..j+1
    for (size_t t = i; t <= j; ++t) r[order[t]] = avg;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("spearman: inputs of different sizes");
  const size_t n = a.size();
  if (n < 2) return kNaN;
  std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += ra[i], mb += rb[i];
  ma /= double(n);
  mb /= double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return kNaN;  // constant input
  double r = sab / std::sqrt(saa * sbb);
  return std::max(-1.0, std::min(1.0, r));
}

double ndcg(const std::vector<double>& truth, const std::vector<double>& score, int k) {
  if (truth.size() != score.size()) throw std::invalid_argument("ndcg: inputs of different sizes");
  const size_t n = truth.size();
  if (n < 2) return kNaN;
  const size_t kk = (k <= 0 || size_t(k) > n) ? n : size_t(k);
  // discount[i] = 1/log2(i+2) for positions i < k, 0 beyond (sklearn _dcg_sample_scores).
  std::vector<double> cum(n);
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i < kk) acc += 1.0 / std::log2(double(i) + 2.0);
    cum[i] = acc;
  }
  // DCG with ties in the score averaged over the group's positions (sklearn _tie_averaged_dcg).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return score[a] > score[b]; });
  double dcg = 0;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j + 1 < n && score[order[j + 1]] == score[order[i]]) ++j;
    double gain = 0;
    for (size_t t = i; t <= j; ++t) gain += truth[order[t]];
    gain /= double(j - i + 1);
    const double disc = cum[j] - (i == 0 ? 0.0 : cum[i - 1]);
    dcg += gain * disc;
    i = j + 1;
  }
  // Ideal DCG: ranked by the truth itself (ties do not change its value).
  std::vector<double> ideal = truth;
  std::sort(ideal.begin(), ideal.end(), std::greater<double>());
  double idcg = 0;
  for (size_t t = 0; t < kk; ++t) idcg += ideal[t] / std::log2(double(t) + 2.0);
  if (idcg == 0) return 0.0;
  return dcg / idcg;
}

double top_k_recovered(const std::vector<double>& truth, const std::vector<double>& score, int k) {
  if (truth.size() != score.size())
    throw std::invalid_argument("top_k_recovered: inputs of different sizes");
  if (k < 1) throw std::invalid_argument("top_k_recovered: k must be >= 1");
  const size_t n = truth.size();
  if (n < 2) return kNaN;
  const double best = *std::max_element(truth.begin(), truth.end());
  if (!(best > 0)) return kNaN;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return score[a] > score[b]; });
  const size_t kk = std::min(n, size_t(k));
  double above = -std::numeric_limits<double>::infinity();  // best truth strictly above the cut
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j + 1 < n && score[order[j + 1]] == score[order[i]]) ++j;
    const size_t g = j - i + 1;
    if (j + 1 <= kk) {  // the whole tied group is inside the top k
      for (size_t t = i; t <= j; ++t) above = std::max(above, truth[order[t]]);
      if (j + 1 == kk) break;
      i = j + 1;
      continue;
    }
    // the group straddles the cut: m of its g schedules enter the top k at random
    const size_t m = kk - i;
    std::vector<double> v;
    for (size_t t = i; t <= j; ++t) v.push_back(truth[order[t]]);
    std::sort(v.begin(), v.end());
    // P(max of a random m-subset = v[r]) = C(r, m−1) / C(g, m), r = 0-based position (r ≥ m−1)
    const double log_total =
        std::lgamma(double(g) + 1) - std::lgamma(double(m) + 1) - std::lgamma(double(g - m) + 1);
    double expected = 0;
    for (size_t r = m - 1; r < g; ++r) {
      const double log_ways = std::lgamma(double(r) + 1) - std::lgamma(double(m - 1) + 1) -
                              std::lgamma(double(r - m + 1) + 1);
      expected += std::exp(log_ways - log_total) * std::max(above, v[r]);
    }
    return expected / best;
  }
  return above / best;
}

double nan_mean(const std::vector<double>& v, int64_t* count) {
  double s = 0;
  int64_t c = 0;
  for (double x : v)
    if (!std::isnan(x)) s += x, ++c;
  if (count) *count = c;
  return c ? s / double(c) : kNaN;
}

ProgramMetrics program_metrics(const std::string& program, std::vector<double> target,
                               std::vector<double> pred, std::vector<double> rank) {
  if (target.size() != pred.size() || (!rank.empty() && rank.size() != pred.size()))
    throw std::invalid_argument("program_metrics: targets and predictions of different sizes");
  if (target.empty()) throw std::invalid_argument("program_metrics: no schedules for " + program);
  for (auto& x : target) x = round6(x);
  for (auto& x : pred) x = round6(x);
  if (rank.empty())
    rank = pred;
  else
    for (auto& x : rank) x = round6(x);
  ProgramMetrics m;
  m.program = program;
  m.n_schedules = int64_t(target.size());
  double s = 0;
  for (size_t i = 0; i < target.size(); ++i) s += ape(target[i], pred[i]);
  m.mape = s / double(target.size());
  m.spearman = spearman(target, rank);
  m.ndcg = ndcg(target, rank, 0);
  m.ndcg_5 = ndcg(target, rank, 5);
  m.ndcg_1 = ndcg(target, rank, 1);
  m.top1_recovered = top_k_recovered(target, rank, 1);
  m.top5_recovered = top_k_recovered(target, rank, 5);
  return m;
}

MetricsSummary compute_metrics(const std::vector<std::string>& program,
                               const std::vector<double>& target, const std::vector<double>& pred,
                               const std::vector<double>* rank) {
  if (program.size() != target.size() || target.size() != pred.size() ||
      (rank && rank->size() != pred.size()))
    throw std::invalid_argument("compute_metrics: inputs of different sizes");
  if (program.empty()) throw std::invalid_argument("compute_metrics: no datapoints");
  std::unordered_map<std::string, size_t> index;
  std::vector<std::string> names;
  std::vector<std::vector<double>> t, p, r;
  MetricsSummary out;
  double ape_sum = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    auto it = index.find(program[i]);
    size_t g;
    if (it == index.end()) {
      g = names.size();
      index.emplace(program[i], g);
      names.push_back(program[i]);
      t.emplace_back();
      p.emplace_back();
      r.emplace_back();
    } else {
      g = it->second;
    }
    t[g].push_back(target[i]);
    p[g].push_back(pred[i]);
    if (rank) r[g].push_back((*rank)[i]);
    ape_sum += ape(round6(target[i]), round6(pred[i]));
  }
  out.n_datapoints = int64_t(program.size());
  out.weighted_mape = ape_sum / double(program.size());
  std::vector<double> mape, sp, nd, nd5, nd1, top1, top5;
  for (size_t g = 0; g < names.size(); ++g) {
    out.programs.push_back(
        program_metrics(names[g], std::move(t[g]), std::move(p[g]), std::move(r[g])));
    const ProgramMetrics& m = out.programs.back();
    mape.push_back(m.mape);
    sp.push_back(m.spearman);
    nd.push_back(m.ndcg);
    nd5.push_back(m.ndcg_5);
    nd1.push_back(m.ndcg_1);
    top1.push_back(m.top1_recovered);
    top5.push_back(m.top5_recovered);
  }
  out.mean_mape = nan_mean(mape);
  out.mean_spearman = nan_mean(sp, &out.n_spearman);
  out.mean_ndcg = nan_mean(nd, &out.n_ndcg);
  out.mean_ndcg_5 = nan_mean(nd5);
  out.mean_ndcg_1 = nan_mean(nd1);
  out.mean_top1_recovered = nan_mean(top1);
  out.mean_top5_recovered = nan_mean(top5);
  // |ln(ŷ / y)| of every datapoint with y > 0 (inf when ŷ rounds to 0 or below)
  std::vector<double> err;
  for (size_t i = 0; i < pred.size(); ++i) {
    const double y = round6(target[i]), yhat = round6(pred[i]);
    if (!(y > 0)) continue;
    err.push_back(yhat > 0 ? std::fabs(std::log(yhat / y))
                           : std::numeric_limits<double>::infinity());
  }
  if (err.empty()) {
    out.median_error_factor = out.within_2x = std::numeric_limits<double>::quiet_NaN();
  } else {
    int64_t near = 0;
    for (double e : err) near += e <= std::log(2.0) + 1e-12;
    out.within_2x = double(near) / double(err.size());
    // the median: the mean of the two middle values for an even count
    const size_t h = err.size() / 2;
    std::nth_element(err.begin(), err.begin() + long(h), err.end());
    double med = err[h];
    if (err.size() % 2 == 0)
      med = 0.5 * (med + *std::max_element(err.begin(), err.begin() + long(h)));
    out.median_error_factor = std::exp(med);
  }
  return out;
}

}  // namespace lcm::model
