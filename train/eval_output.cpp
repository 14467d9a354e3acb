// Tables, reports and prediction listings of lcm-eval / lcm-predict (see eval_output.hpp).
#include "train/eval_output.hpp"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "engine/atomic_file.hpp"
#include "train/report.hpp"

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

std::string metrics_table(const lcm::model::MetricsSummary& m, bool per_program) {
  std::string t;
  if (per_program) {
    t += format("%-40s %6s %10s %9s %8s %8s %8s %8s %8s\n", "program", "scheds", "MAPE", "Spearman",
                "nDCG", "nDCG@5", "nDCG@1", "top1", "top5");
    for (const auto& p : m.programs)
      t += format("%-40s %6lld %10.3f %9.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", p.program.c_str(),
                  (long long)p.n_schedules, p.mape, p.spearman, p.ndcg, p.ndcg_5, p.ndcg_1,
                  p.top1_recovered, p.top5_recovered);
  }
  t += format("%-28s %10s\n", "metric (mean over programs)", "value");
  t += format("%-28s %10.4f\n", "MAPE", m.mean_mape);
  t += format("%-28s %10.4f  (%lld programs)\n", "Spearman", m.mean_spearman,
              (long long)m.n_spearman);
  t += format("%-28s %10.4f  (%lld programs)\n", "nDCG", m.mean_ndcg, (long long)m.n_ndcg);
  t += format("%-28s %10.4f\n", "nDCG@5", m.mean_ndcg_5);
  t += format("%-28s %10.4f\n", "nDCG@1", m.mean_ndcg_1);
  t += format("%-28s %10.4f\n", "top-1 speedup recovered", m.mean_top1_recovered);
  t += format("%-28s %10.4f\n", "top-5 speedup recovered", m.mean_top5_recovered);
  t += format("%-28s %10.4f\n", "MAPE (datapoint-weighted)", m.weighted_mape);
  return t;
}

void write_eval_report(const RunPaths& paths, const std::string& title,
                       const std::string& weights_path, const std::string& input_file,
                       const lcm::model::MetricsSummary& m, const std::vector<Prediction>& preds) {
  rapidjson::StringBuffer sb;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format");
  w.String("lcm-eval-report");
  w.Key("format_version");
  w.Int(2);  // 2: adds top1_recovered / top5_recovered
  w.Key("weights_path");
  w.String(weights_path.c_str());
  w.Key("valid_file");
  w.String(input_file.c_str());
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
  w.Key("programs");
  w.StartArray();
  std::string csv =
      "program,n_schedules,mape,spearman,ndcg,ndcg_5,ndcg_1,top1_recovered,top5_recovered\n";
  for (const auto& p : m.programs) {
    w.StartObject();
    w.Key("program");
    w.String(p.program.c_str());
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
                             bool jsonl) {
  std::string text =
      jsonl ? "" : "program,schedule_index,sched_str,predicted_speedup,measured_speedup\n";
  for (const auto& p : preds) {
    const auto& prog = ds.programs[size_t(p.program)];
    const int32_t sidx = prog.schedule_index[size_t(p.schedule)];
    const std::string& ss = prog.sched_str[size_t(p.schedule)];
    if (!jsonl) {
      text += csv_field(prog.name) + "," + std::to_string(sidx) + "," + csv_field(ss) + "," +
              format_number(p.predicted) + "," + format_number(p.measured) + "\n";
      continue;
    }
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    w.Key("program");
    w.String(prog.name.c_str());
    w.Key("schedule_index");
    w.Int(sidx);
    w.Key("sched_str");
    w.String(ss.c_str());
    json_number_or_null(w, "predicted_speedup", p.predicted);
    json_number_or_null(w, "measured_speedup", p.measured);
    w.EndObject();
    text += std::string(sb.GetString()) + "\n";
  }
  return text;
}

std::string ranked_predictions(const lcm::data::Dataset& ds, const std::vector<Prediction>& preds) {
  std::string t;
  size_t i = 0;
  while (i < preds.size()) {
    size_t j = i;
    while (j < preds.size() && preds[j].program == preds[i].program) ++j;
    std::vector<Prediction> g(preds.begin() + long(i), preds.begin() + long(j));
    std::stable_sort(g.begin(), g.end(),
                     [](const auto& a, const auto& b) { return a.predicted > b.predicted; });
    const auto& prog = ds.programs[size_t(g[0].program)];
    t += format("%s (%zu schedules)\n%6s %8s %12s %12s  %s\n", prog.name.c_str(), g.size(), "rank",
                "schedule", "predicted", "measured", "sched_str");
    for (size_t r = 0; r < g.size(); ++r) {
      char meas[32] = "-";
      if (!std::isnan(g[r].measured)) std::snprintf(meas, sizeof meas, "%.4f", g[r].measured);
      t += format("%6zu %8d %12.4f %12s  %s\n", r + 1, prog.schedule_index[size_t(g[r].schedule)],
                  g[r].predicted, meas, prog.sched_str[size_t(g[r].schedule)].c_str());
    }
    i = j;
  }
  return t;
}

}  // namespace lcm::train
