// Input scaling of the cost model's features (see input_scaling.hpp): the docs/model-spec.md §3.10
// sign·log10 transform, per-column standardisation fitted on the training split, JSON
// (de)serialisation.
#include "model/input_scaling.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "data/features.hpp"
#include "model/metadata_json.hpp"

namespace lcm::model {

namespace {

constexpr double kMinStd = 1e-6;

/// Mean and std (population) per column of the rows added with add(); std < kMinStd → 1.
struct ColumnStats {
  explicit ColumnStats(int width) : sum(size_t(width), 0.0), sum2(size_t(width), 0.0) {}
  std::vector<double> sum, sum2;
  int64_t rows = 0;
  void add(const float* row, bool log) {
    for (size_t j = 0; j < sum.size(); ++j) {
      const double v = log ? signed_log10(double(row[j])) : double(row[j]);
      sum[j] += v;
      sum2[j] += v * v;
    }
    ++rows;
  }
  void finish(std::vector<double>& mean, std::vector<double>& std_out) const {
    mean.assign(sum.size(), 0.0);
    std_out.assign(sum.size(), 1.0);
    if (rows == 0) return;
    for (size_t j = 0; j < sum.size(); ++j) {
      const double m = sum[j] / double(rows);
      const double var = std::max(0.0, sum2[j] / double(rows) - m * m);
      mean[j] = m;
      const double sd = std::sqrt(var);
      std_out[j] = sd < kMinStd ? 1.0 : sd;
    }
  }
};

std::vector<double> read_array(const rapidjson::Document& d, const char* key, size_t width) {
  std::vector<double> out;
  if (!d.HasMember(key)) return out;
  if (!d[key].IsArray())
    throw std::runtime_error(std::string("lcm.input_scaling.") + key + ": not an array");
  for (auto& v : d[key].GetArray()) {
    if (!v.IsNumber())
      throw std::runtime_error(std::string("lcm.input_scaling.") + key + ": not numbers");
    out.push_back(v.GetDouble());
  }
  if (out.size() != width)
    throw std::runtime_error(std::string("lcm.input_scaling.") + key + ": expected " +
                             std::to_string(width) + " values, got " + std::to_string(out.size()));
  return out;
}

/// Refuses statistics that cannot scale a value: a standard deviation that is 0 (or below
/// kMinStd, which the fit never stores, or negative, or not finite) would divide the values of its
/// column to ±inf or NaN, and every prediction with them. The message describes the input column
/// and the data it was fitted on: a column constant in that data has standard deviation 0, which
/// fit_input_scaling stores as 1 (no scaling).
void require_usable_statistics(const std::vector<double>& mean, const std::vector<double>& sd,
                               const char* prefix, const char* vectors) {
  for (size_t j = 0; j < sd.size(); ++j) {
    const bool bad_sd = !(std::isfinite(sd[j]) && sd[j] >= kMinStd);
    if (!bad_sd && std::isfinite(mean[j])) continue;
    char value[32];
    std::snprintf(value, sizeof value, "%g", bad_sd ? sd[j] : mean[j]);
    const std::string col = std::string(prefix) + "[" + std::to_string(j) + "]";
    if (bad_sd)
      throw std::runtime_error(
          "lcm.input_scaling." + std::string(prefix) + "_std[" + std::to_string(j) + "] is " +
          value + ": input column " + col + " (column " + std::to_string(j) + " of the " + vectors +
          ") has standard deviation " + value +
          " in the training data the scaling was fitted on (a column with the same value in "
          "every training row has standard deviation 0, which lcm-train stores as 1: no "
          "scaling); no value of the column can be standardized with it");
    throw std::runtime_error("lcm.input_scaling." + std::string(prefix) + "_mean[" +
                             std::to_string(j) + "] is " + value + ": the mean of input column " +
                             col + " (column " + std::to_string(j) + " of the " + vectors +
                             ") in the training data is not a finite number");
  }
}

void check_mode(const std::string& mode) {
  const auto& m = input_scaling_modes();
  if (std::find(m.begin(), m.end(), mode) == m.end())
    throw std::invalid_argument("input scaling: unknown mode '" + mode +
                                "' (expected none|log|standardize|log_standardize)");
}

}  // namespace

const std::vector<std::string>& input_scaling_modes() {
  static const std::vector<std::string> m{"none", "log", "standardize", "log_standardize"};
  return m;
}

double signed_log10(double x) {
  const double a = std::fabs(x);
  if (a < 10.0) return x;
  return (x < 0 ? -1.0 : 1.0) * std::log10(a);
}

namespace {
/// One scaled value of column `col`: the §3.10 log when `log`, then (v − mean[col]) / sd[col]
/// when `standardize` (mean and sd are read only then). The one formula of apply, apply_comp and
/// apply_loop.
float scaled(float x, bool log, bool standardize, const std::vector<double>& mean,
             const std::vector<double>& sd, size_t col) {
  double v = log ? signed_log10(double(x)) : double(x);
  if (standardize) v = (v - mean[col]) / sd[col];
  return float(v);
}
}  // namespace

float InputScaling::apply_comp(float x, int col) const {
  if (col >= comp_scaled_columns) return x;  // read raw by a pre-trained encoder
  return scaled(x, uses_log(), standardizes(), comp_mean, comp_std, size_t(col));
}

float InputScaling::apply_loop(float x, int col) const {
  return scaled(x, uses_log(), standardizes(), loop_mean, loop_std, size_t(col));
}

void InputScaling::apply(data::BatchTensors& bt) const {
  if (mode == "none") return;
  check_mode(mode);
  if (standardizes() && (comp_mean.size() != size_t(data::kCompVectorWidth) ||
                         comp_std.size() != size_t(data::kCompVectorWidth) ||
                         loop_mean.size() != size_t(data::kLoopVectorWidth) ||
                         loop_std.size() != size_t(data::kLoopVectorWidth)))
    throw std::invalid_argument("input scaling '" + mode +
                                "' has no fitted statistics (910 + 8 columns)");
  // apply_comp / apply_loop element by element, with the mode tests (string compares) hoisted
  // out of the loops.
  const bool log = uses_log(), standardize = standardizes();
  auto scale = [&](std::vector<float>& x, size_t width, size_t scaled_columns,
                   const std::vector<double>& mean, const std::vector<double>& sd) {
    for (size_t i = 0; i < x.size(); ++i)
      if (i % width < scaled_columns) x[i] = scaled(x[i], log, standardize, mean, sd, i % width);
  };
  scale(bt.comp, size_t(data::kCompVectorWidth), size_t(comp_scaled_columns), comp_mean, comp_std);
  scale(bt.loops, size_t(data::kLoopVectorWidth), size_t(data::kLoopVectorWidth), loop_mean,
        loop_std);
}

std::string InputScaling::to_json() const {
  MetadataWriter m(1);
  auto& w = m.w;
  w.Key("mode");
  w.String(mode.c_str());
  if (standardizes()) {
    write_number_array(w, "comp_mean", comp_mean);
    write_number_array(w, "comp_std", comp_std);
    write_number_array(w, "loop_mean", loop_mean);
    write_number_array(w, "loop_std", loop_std);
  }
  if (comp_scaled_columns != data::kCompVectorWidth) {  // absent: every column
    w.Key("comp_scaled_columns");
    w.Int(comp_scaled_columns);
  }
  return m.text();
}

InputScaling InputScaling::from_json(const std::string& text) {
  rapidjson::Document d;
  parse_metadata_object(d, text, "lcm.input_scaling");
  InputScaling s;
  s.mode = metadata_string(d, "lcm.input_scaling", "mode");
  try {
    check_mode(s.mode);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("lcm.input_scaling: ") + e.what());
  }
  if (d.HasMember("comp_scaled_columns")) {
    if (!d["comp_scaled_columns"].IsInt() || d["comp_scaled_columns"].GetInt() < 0 ||
        d["comp_scaled_columns"].GetInt() > data::kCompVectorWidth)
      throw std::runtime_error("lcm.input_scaling.comp_scaled_columns: not an integer in [0, 910]");
    s.comp_scaled_columns = d["comp_scaled_columns"].GetInt();
  }
  if (s.standardizes()) {
    s.comp_mean = read_array(d, "comp_mean", size_t(data::kCompVectorWidth));
    s.comp_std = read_array(d, "comp_std", size_t(data::kCompVectorWidth));
    s.loop_mean = read_array(d, "loop_mean", size_t(data::kLoopVectorWidth));
    s.loop_std = read_array(d, "loop_std", size_t(data::kLoopVectorWidth));
    if (s.comp_mean.empty() || s.comp_std.empty() || s.loop_mean.empty() || s.loop_std.empty())
      throw std::runtime_error("lcm.input_scaling: mode " + s.mode +
                               " lacks its fitted statistics");
    require_usable_statistics(s.comp_mean, s.comp_std, "comp", "computation vectors");
    require_usable_statistics(s.loop_mean, s.loop_std, "loop", "loop vectors");
  }
  return s;
}

namespace {

/// After a fit: a column whose mean or standard deviation is not finite holds a value that is
/// not (inf, NaN) in the training data; throws std::invalid_argument naming the column and the
/// first program and schedule with such a value (a property of the data, which would otherwise
/// turn every prediction into NaN).
void require_finite_columns(const InputScaling& s, const data::Dataset& train) {
  auto bad_column = [](const std::vector<double>& mean, const std::vector<double>& sd) {
    for (size_t j = 0; j < mean.size(); ++j)
      if (!std::isfinite(mean[j]) || !std::isfinite(sd[j])) return int(j);
    return -1;
  };
  const int comp_col = bad_column(s.comp_mean, s.comp_std);
  const int loop_col = comp_col >= 0 ? -1 : bad_column(s.loop_mean, s.loop_std);
  if (comp_col < 0 && loop_col < 0) return;
  const bool comp = comp_col >= 0;
  const int col = comp ? comp_col : loop_col;
  const size_t width = size_t(comp ? data::kCompVectorWidth : data::kLoopVectorWidth);
  std::string where = "";
  std::vector<float> rows;
  for (const auto& p : train.programs) {
    for (int64_t k = 0; k < p.n_schedules() && where.empty(); ++k) {
      const size_t n = size_t(comp ? p.n_comps : p.n_loops);
      rows.resize(n * width);
      if (comp)
        p.comp_vectors(k, rows.data());
      else
        p.schedule_rows(k, nullptr, rows.data());
      for (size_t r = 0; r < n && where.empty(); ++r)
        if (!std::isfinite(rows[r * width + size_t(col)]))
          where = " (first in program " + p.name + ", schedule " +
                  std::to_string(p.schedule_index[size_t(k)]) + ")";
    }
    if (!where.empty()) break;
  }
  throw std::invalid_argument("input scaling '" + s.mode + "': input column " +
                              (comp ? "comp[" : "loop[") + std::to_string(col) + "] (column " +
                              std::to_string(col) + " of the " + (comp ? "computation" : "loop") +
                              " vectors) of the training data holds a value that is not " +
                              "a finite number" + where +
                              ", so it has no mean or standard deviation to scale with");
}

}  // namespace

InputScaling fit_input_scaling(const std::string& mode, const data::Dataset& train,
                               int comp_scaled_columns) {
  check_mode(mode);
  if (comp_scaled_columns < 0 || comp_scaled_columns > data::kCompVectorWidth)
    throw std::invalid_argument("input scaling: comp_scaled_columns must be in [0, 910], got " +
                                std::to_string(comp_scaled_columns));
  InputScaling s;
  s.mode = mode;
  s.comp_scaled_columns = comp_scaled_columns;
  if (!s.standardizes()) return s;
  ColumnStats comp(data::kCompVectorWidth), loop(data::kLoopVectorWidth);
  std::vector<float> buf, loop_rows;
  const bool log = s.uses_log();
  for (const auto& p : train.programs) {
    buf.resize(size_t(p.n_comps) * size_t(data::kCompVectorWidth));
    loop_rows.resize(size_t(p.n_loops) * size_t(data::kLoopVectorWidth));
    for (int64_t k = 0; k < p.n_schedules(); ++k) {
      p.comp_vectors(k, buf.data());
      for (int c = 0; c < p.n_comps; ++c)
        comp.add(buf.data() + size_t(c) * data::kCompVectorWidth, log);
      p.schedule_rows(k, nullptr, loop_rows.data());
      const float* lp = loop_rows.data();
      for (int l = 0; l < p.n_loops; ++l) loop.add(lp + size_t(l) * data::kLoopVectorWidth, log);
    }
  }
  if (comp.rows == 0)
    throw std::invalid_argument("input scaling '" + mode + "': no training datapoints to fit on");
  comp.finish(s.comp_mean, s.comp_std);
  loop.finish(s.loop_mean, s.loop_std);
  require_finite_columns(s, train);
  for (int j = comp_scaled_columns; j < data::kCompVectorWidth; ++j) {  // left raw
    s.comp_mean[size_t(j)] = 0.0;
    s.comp_std[size_t(j)] = 1.0;
  }
  return s;
}

}  // namespace lcm::model
