// Tables, reports and prediction listings of lcm-eval / lcm-predict (see eval_output.hpp).
#include "train/eval_output.hpp"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "train/report.hpp"
#include "util/atomic_file.hpp"

namespace lcm::train {
namespace {

/// The seven metrics of a program or of the means, in report order (model-spec §7).
using MetricValues = std::array<double, 7>;
constexpr const char* kMetricKeys[7] = {"mape",   "spearman",       "ndcg",          "ndcg_5",
                                        "ndcg_1", "top1_recovered", "top5_recovered"};

template <class W>
void write_metric_fields(W& w, const MetricValues& v) {
  for (size_t i = 0; i < v.size(); ++i) json_number_or_null(w, kMetricKeys[i], v[i]);
}

/// printf into a std::string.
template <class... A>
std::string format(const char* fmt, A... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(size_t(std::max(0, n)), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

}  // namespace

std::vector<RankedPrediction> rank_predictions(const std::vector<Prediction>& preds) {
  std::vector<RankedPrediction> out;
  out.reserve(preds.size());
  size_t i = 0;
  while (i < preds.size()) {
    size_t j = i;
    while (j < preds.size() && preds[j].program == preds[i].program) ++j;
    std::vector<size_t> g;
    for (size_t k = i; k < j; ++k) g.push_back(k);
    std::stable_sort(g.begin(), g.end(),
                     [&](size_t a, size_t b) { return preds[a].predicted > preds[b].predicted; });
    for (size_t r = 0; r < g.size(); ++r) out.push_back({preds[g[r]], int64_t(r + 1)});
    i = j;
  }
  return out;
}

std::string metrics_table(const lcm::model::MetricsSummary& m, bool per_program) {
  std::string t;
  if (per_program) {
    t += format("%-40s %6s %10s %9s %8s %8s %8s %8s %8s\n", "program", "scheds", "MAPE", "Spearman",
                "nDCG", "nDCG@5", "nDCG@1", "top1", "top5");
    for (const auto& p : m.programs)
      t += format("%-40s %6lld %s %s %s %s %s %s %s\n", p.program.c_str(), (long long)p.n_schedules,
                  fixed_or_na(10, 3, p.mape).c_str(), fixed_or_na(9, 4, p.spearman).c_str(),
                  fixed_or_na(8, 4, p.ndcg).c_str(), fixed_or_na(8, 4, p.ndcg_5).c_str(),
                  fixed_or_na(8, 4, p.ndcg_1).c_str(), fixed_or_na(8, 4, p.top1_recovered).c_str(),
                  fixed_or_na(8, 4, p.top5_recovered).c_str());
  }
  auto row = [&](const char* label, double v, const std::string& tail = "") {
    t += format("%-28s %s%s\n", label, fixed_or_na(10, 4, v).c_str(), tail.c_str());
  };
  t += format("%-28s %10s\n", "metric (mean over programs)", "value");
  row("MAPE", m.mean_mape);
  row("Spearman", m.mean_spearman, format("  (%lld programs)", (long long)m.n_spearman));
  row("nDCG", m.mean_ndcg, format("  (%lld programs)", (long long)m.n_ndcg));
  row("nDCG@5", m.mean_ndcg_5);
  row("nDCG@1", m.mean_ndcg_1);
  row("top-1 speedup recovered", m.mean_top1_recovered);
  row("top-5 speedup recovered", m.mean_top5_recovered);
  row("MAPE (datapoint-weighted)", m.weighted_mape);
  row("median error factor", m.median_error_factor,
      "  (median of max(predicted/measured, measured/predicted) over datapoints)");
  row("within 2x of measured", m.within_2x, "  (share of datapoints)");
  return t;
}

std::vector<std::string> undefined_metric_notes(const lcm::model::MetricsSummary& m) {
  static const std::pair<const char*, const char*> kMeans[] = {
      {"mape", "MAPE"},
      {"spearman", "Spearman"},
      {"ndcg", "nDCG"},
      {"ndcg_5", "nDCG@5"},
      {"ndcg_1", "nDCG@1"},
      {"top1_recovered", "top-1 speedup recovered"},
      {"top5_recovered", "top-5 speedup recovered"},
      {"weighted_mape", "MAPE (datapoint-weighted)"}};
  std::vector<std::string> notes;
  for (const auto& [key, label] : kMeans) {
    const std::string why = undefined_metric_reason(m, key);
    if (!why.empty())
      notes.push_back(std::string("mean ") + label + " is undefined (n/a in the table, null in " +
                      "the report): " + why);
  }
  return notes;
}

CalibrationEffect calibration_effect(const lcm::data::Dataset& ds,
                                     const std::vector<Prediction>& p) {
  CalibrationEffect e;
  std::vector<Prediction> raw = p;
  for (Prediction& x : raw) {
    if (x.predicted != x.raw_speedup()) e.applied = true;
    x.predicted = x.raw_speedup();
  }
  if (!e.applied) return e;
  const lcm::model::MetricsSummary m = evaluate_predictions(ds, raw);
  e.mean_mape = m.mean_mape;
  e.weighted_mape = m.weighted_mape;
  e.median_error_factor = m.median_error_factor;
  e.within_2x = m.within_2x;
  return e;
}

void write_eval_report(const RunPaths& paths, const std::string& title,
                       const std::string& weights_path, const std::string& input_file,
                       const lcm::model::MetricsSummary& m, const std::vector<Prediction>& preds,
                       const CalibrationEffect& calibration) {
  rapidjson::StringBuffer sb;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format");
  w.String("lcm-eval-report");
  w.Key("format_version");
  w.Int(2);  // 2: adds top1_recovered / top5_recovered
  w.Key("weights_path");
  w.String(weights_path.data(), rapidjson::SizeType(weights_path.size()));
  w.Key("valid_file");
  w.String(input_file.data(), rapidjson::SizeType(input_file.size()));
  w.Key("n_programs");
  w.Int64(int64_t(m.programs.size()));
  w.Key("n_datapoints");
  w.Int64(m.n_datapoints);
  w.Key("mean");
  w.StartObject();
  write_metric_fields(w, {m.mean_mape, m.mean_spearman, m.mean_ndcg, m.mean_ndcg_5, m.mean_ndcg_1,
                          m.mean_top1_recovered, m.mean_top5_recovered});
  w.EndObject();
  json_number_or_null(w, "weighted_mape", m.weighted_mape);
  json_number_or_null(w, "median_error_factor", m.median_error_factor);
  json_number_or_null(w, "within_2x", m.within_2x);
  w.Key("calibrated");
  w.Bool(calibration.applied);
  if (calibration.applied) {
    w.Key("uncalibrated");
    w.StartObject();
    json_number_or_null(w, "mape", calibration.mean_mape);
    json_number_or_null(w, "weighted_mape", calibration.weighted_mape);
    json_number_or_null(w, "median_error_factor", calibration.median_error_factor);
    json_number_or_null(w, "within_2x", calibration.within_2x);
    w.EndObject();
    w.Key("calibration");
    w.StartObject();
    w.Key("folds");
    w.Int(calibration.folds);
    w.Key("weighting");
    w.String(calibration.weighting.c_str());
    w.Key("objective");
    w.String(calibration.objective == "isotonic_mape" ? "mape" : "squared_log_error");
    w.EndObject();
  }
  w.Key("programs");
  w.StartArray();
  std::string csv =
      "program,n_schedules,mape,spearman,ndcg,ndcg_5,ndcg_1,top1_recovered,top5_recovered\n";
  for (const auto& p : m.programs) {
    w.StartObject();
    w.Key("program");
    w.String(p.program.data(), rapidjson::SizeType(p.program.size()));
    w.Key("n_schedules");
    w.Int64(p.n_schedules);
    const MetricValues v{p.mape,   p.spearman,       p.ndcg,          p.ndcg_5,
                         p.ndcg_1, p.top1_recovered, p.top5_recovered};
    write_metric_fields(w, v);
    w.EndObject();
    csv += csv_field(p.program) + "," + std::to_string(p.n_schedules);
    for (double x : v) csv += "," + format_number(x);
    csv += "\n";
  }
  w.EndArray();
  w.EndObject();
  std::vector<double> xs, ys;
  for (const auto& p : preds)
    if (!std::isnan(p.measured)) xs.push_back(p.measured), ys.push_back(p.predicted);
  lcm::atomic_write_file(paths.eval_json, std::string(sb.GetString()) + "\n");
  lcm::atomic_write_file(paths.eval_csv, csv);
  lcm::atomic_write_file(paths.eval_svg, svg_scatter_loglog(title, "measured speedup (x)",
                                                            "predicted speedup (x)", xs, ys));
}

std::string predictions_text(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds,
                             bool jsonl, bool ranked) {
  std::vector<RankedPrediction> rows;
  if (ranked) {
    rows = rank_predictions(preds);
  } else {
    for (const auto& p : preds) rows.push_back({p, 0});
  }
  std::string text;
  if (!jsonl)
    text = ranked ? "program,rank,schedule_index,sched_str,predicted_speedup,measured_speedup\n"
                  : "program,schedule_index,sched_str,predicted_speedup,measured_speedup\n";
  for (const auto& [p, rank] : rows) {
    const auto& prog = ds.programs[size_t(p.program)];
    const int32_t sidx = prog.schedule_index[size_t(p.schedule)];
    const std::string& ss = prog.sched_str[size_t(p.schedule)];
    if (!jsonl) {
      text += csv_field(prog.name) + "," + (ranked ? std::to_string(rank) + "," : "") +
              std::to_string(sidx) + "," + csv_field(ss) + "," + format_number(p.predicted) + "," +
              format_number(p.measured) + "\n";
      continue;
    }
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    w.Key("program");
    w.String(prog.name.data(), rapidjson::SizeType(prog.name.size()));
    if (ranked) {
      w.Key("rank");
      w.Int64(rank);
    }
    w.Key("schedule_index");
    w.Int(sidx);
    w.Key("sched_str");
    w.String(ss.data(), rapidjson::SizeType(ss.size()));
    json_number_or_null(w, "predicted_speedup", p.predicted);
    json_number_or_null(w, "measured_speedup", p.measured);
    w.EndObject();
    text += std::string(sb.GetString()) + "\n";
  }
  return text;
}

std::string ranked_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds) {
  const std::vector<RankedPrediction> rows = rank_predictions(preds);
  std::string t;
  size_t i = 0;
  while (i < rows.size()) {
    size_t j = i;
    while (j < rows.size() && rows[j].p.program == rows[i].p.program) ++j;
    std::vector<double> predicted, measured;
    for (size_t k = i; k < j; ++k) {
      predicted.push_back(rows[k].p.predicted);
      if (!std::isnan(rows[k].p.measured)) measured.push_back(rows[k].p.measured);
    }
    // as many significant digits as tell this program's distinct predictions apart
    const int pd = distinguishing_digits(predicted), md = distinguishing_digits(measured);
    const int pw = std::max(12, pd + 7), mw = std::max(12, md + 7);
    const auto& prog = ds.programs[size_t(rows[i].p.program)];
    t += format("%s (%zu schedules)\n%6s %8s %*s %*s  %s\n", prog.name.c_str(), j - i, "rank",
                "schedule", pw, "predicted", mw, "measured", "sched_str");
    for (size_t k = i; k < j; ++k) {
      const Prediction& p = rows[k].p;
      const std::string meas =
          std::isnan(p.measured) ? std::string("-") : format("%.*g", md, p.measured);
      t += format("%6lld %8d %*.*g %*s  %s\n", (long long)rows[k].rank,
                  prog.schedule_index[size_t(p.schedule)], pw, pd, p.predicted, mw, meas.c_str(),
                  prog.sched_str[size_t(p.schedule)].c_str());
    }
    i = j;
  }
  return t;
}

}  // namespace lcm::train
