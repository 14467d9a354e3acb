// lcm-eval --compare (see compare_reports.hpp).
#include "train/compare_reports.hpp"

#include <glob.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

namespace lcm::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kKeys[7] = {"mape",   "spearman",       "ndcg",          "ndcg_5",
                                  "ndcg_1", "top1_recovered", "top5_recovered"};
constexpr const char* kLabels[9] = {"MAPE",
                                    "Spearman",
                                    "nDCG",
                                    "nDCG@5",
                                    "nDCG@1",
                                    "top-1 speedup recovered",
                                    "top-5 speedup recovered",
                                    "MAPE (datapoint-weighted)",
                                    "MAPE before calibration"};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

/// A number field of `o`, NaN when null; `optional` fields may be absent (NaN).
double number_field(const std::string& path, const rapidjson::Value& o, const char* key,
                    bool optional) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd()) {
    if (optional) return kNaN;
    fail(path, std::string("no field \"") + key + "\"");
  }
  if (it->value.IsNull()) return kNaN;
  if (!it->value.IsNumber()) fail(path, std::string("field \"") + key + "\" is not a number");
  return it->value.GetDouble();
}

/// Decimals per metric row (MAPE in percent, the rest in [0, 1]).
int decimals(size_t metric) {
  return metric == 0 || metric == 7 || metric == 8 ? 2 : 4;  // the MAPEs in %
}

std::string fixed(double v, int d) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", d, v);
  return buf;
}

/// Mean and sample sd of the defined values of xs (NaN when none; sd NaN for one).
std::pair<double, double> mean_sd(const std::vector<double>& xs) {
  double s = 0;
  int n = 0;
  for (double x : xs)
    if (!std::isnan(x)) s += x, ++n;
  if (n == 0) return {kNaN, kNaN};
  const double m = s / n;
  if (n == 1) return {m, kNaN};
  double q = 0;
  for (double x : xs)
    if (!std::isnan(x)) q += (x - m) * (x - m);
  return {m, std::sqrt(q / (n - 1))};
}

/// Each program's value of `metric`, averaged over the group's reports that define it.
std::map<std::string, double> program_means(const ReportGroup& g, size_t metric) {
  std::map<std::string, std::pair<double, int>> acc;
  for (const EvalReport& r : g.reports)
    for (const auto& [name, v] : r.programs)
      if (!std::isnan(v[metric])) {
        auto& a = acc[name];
        a.first += v[metric];
        ++a.second;
      }
  std::map<std::string, double> out;
  for (const auto& [name, a] : acc) out[name] = a.first / a.second;
  return out;
}

std::string pad(std::string s, size_t w) {
  // Width in characters of UTF-8 text (the labels hold "−" and "±").
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  s.append(chars + 2 <= w ? w - chars : 2, ' ');  // at least two spaces between columns
  return s;
}

/// The canonical path of an existing file (so that two spellings of one report compare equal),
/// else the path as given.
std::string canonical_or_self(const std::string& p) {
  std::error_code ec;
  const std::filesystem::path c = std::filesystem::canonical(p, ec);
  return ec ? p : c.string();
}

/// Whether a and b are equal but for rounding (relative 1e-9): a tie, neither better.
bool tied(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace

EvalReport read_eval_report(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a report");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the report");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(text.data(), text.size());  // the written digits
  if (d.HasParseError())
    fail(path, std::string("not JSON (") + rapidjson::GetParseError_En(d.GetParseError()) +
                   " at byte " + std::to_string(d.GetErrorOffset()) + ")");
  if (!d.IsObject()) fail(path, "not an lcm-eval report (the JSON is not an object)");
  auto fmt = d.FindMember("format");
  if (fmt == d.MemberEnd() || !fmt->value.IsString() ||
      std::string(fmt->value.GetString()) != "lcm-eval-report")
    fail(path, "not an lcm-eval report (no \"format\": \"lcm-eval-report\")");
  auto ver = d.FindMember("format_version");
  if (ver == d.MemberEnd() || !ver->value.IsInt() || ver->value.GetInt() < 1 ||
      ver->value.GetInt() > 2)
    fail(path, "unknown format_version (this lcm-eval reads versions 1 and 2)");
  const bool v1 = ver->value.GetInt() == 1;
  EvalReport r;
  r.path = path;
  auto vf = d.FindMember("valid_file");
  if (vf != d.MemberEnd() && vf->value.IsString()) r.valid_file = vf->value.GetString();
  auto mean = d.FindMember("mean");
  if (mean == d.MemberEnd() || !mean->value.IsObject()) fail(path, "no \"mean\" object");
  for (size_t k = 0; k < 7; ++k)
    r.mean[k] = number_field(path, mean->value, kKeys[k], v1 && k >= 5);
  r.mean[7] = number_field(path, d, "weighted_mape", false);
  // the MAPE without the checkpoint's calibration map: the report's MAPE when no map was applied,
  // NaN in reports written before calibration existed
  r.mean[8] = kNaN;
  auto cal = d.FindMember("calibrated");
  if (cal != d.MemberEnd() && cal->value.IsBool()) {
    if (!cal->value.GetBool()) {
      r.mean[8] = r.mean[0];
    } else {
      auto un = d.FindMember("uncalibrated");
      if (un == d.MemberEnd() || !un->value.IsObject())
        fail(path, "\"calibrated\": true without an \"uncalibrated\" object");
      r.mean[8] = number_field(path, un->value, "mape", false);
    }
  }
  auto progs = d.FindMember("programs");
  if (progs == d.MemberEnd() || !progs->value.IsArray()) fail(path, "no \"programs\" array");
  for (const auto& p : progs->value.GetArray()) {
    if (!p.IsObject()) fail(path, "a \"programs\" entry is not an object");
    auto name = p.FindMember("program");
    if (name == p.MemberEnd() || !name->value.IsString())
      fail(path, "a \"programs\" entry has no \"program\" name");
    ReportMetrics v{};
    for (size_t k = 0; k < 7; ++k) v[k] = number_field(path, p, kKeys[k], v1 && k >= 5);
    if (!r.programs.emplace(name->value.GetString(), v).second)
      fail(path, std::string("program ") + name->value.GetString() + " is listed twice");
  }
  return r;
}

ReportGroup load_report_group(const std::string& arg) {
  ReportGroup g;
  std::string files = arg;
  // "LABEL:FILES": a label is text before the first ':' without '/' or a glob character.
  const size_t colon = arg.find(':');
  if (colon != std::string::npos && colon > 0 && arg.find_first_of("/*?[,", 0) > colon) {
    g.label = arg.substr(0, colon);
    files = arg.substr(colon + 1);
  } else {
    g.label = arg;
  }
  std::vector<std::string> paths;
  size_t start = 0;
  while (start <= files.size()) {
    const size_t comma = std::min(files.find(',', start), files.size());
    const std::string item = files.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    if (item.find_first_of("*?[") == std::string::npos) {
      paths.push_back(item);
      continue;
    }
    glob_t gl{};
    const int rc = ::glob(item.c_str(), 0, nullptr, &gl);
    if (rc == GLOB_NOMATCH || (rc == 0 && gl.gl_pathc == 0)) {
      ::globfree(&gl);
      throw std::runtime_error("--compare " + arg + ": no file matches " + item);
    }
    if (rc != 0) {
      ::globfree(&gl);
      throw std::runtime_error("--compare " + arg + ": cannot expand " + item);
    }
    for (size_t i = 0; i < gl.gl_pathc; ++i) paths.push_back(gl.gl_pathv[i]);  // sorted by glob
    ::globfree(&gl);
  }
  if (paths.empty()) throw std::runtime_error("--compare " + arg + ": no report named");
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    const std::string key = canonical_or_self(p);
    if (!seen.insert(key).second)
      throw std::runtime_error("--compare " + arg + ": " + p +
                               " is named twice (each report is one seed of the setting)");
    g.reports.push_back(read_eval_report(p));
  }
  return g;
}

std::string compare_table(const std::vector<ReportGroup>& groups) {
  if (groups.size() < 2)
    throw std::invalid_argument("--compare needs at least two settings (got " +
                                std::to_string(groups.size()) + ")");
  std::set<std::string> labels;
  std::map<std::string, std::string> owner;  // report → setting
  for (const ReportGroup& g : groups) {
    if (!labels.insert(g.label).second)
      throw std::invalid_argument("--compare: two settings are labelled " + g.label);
    for (const EvalReport& r : g.reports) {
      auto [it, fresh] = owner.emplace(canonical_or_self(r.path), g.label);
      if (!fresh)
        throw std::invalid_argument("--compare: " + r.path + " is in settings " + it->second +
                                    " and " + g.label);
    }
  }
  std::string t = "lcm-eval --compare: " + std::to_string(groups.size()) +
                  " settings, differences against " + groups[0].label + "\n";
  std::set<std::string> files;
  for (const ReportGroup& g : groups) {
    std::set<std::string> progs;
    for (const EvalReport& r : g.reports) {
      for (const auto& kv : r.programs) progs.insert(kv.first);
      files.insert(r.valid_file);
    }
    t += "  " + g.label + ": " + std::to_string(g.reports.size()) + " report(s), " +
         std::to_string(progs.size()) + " programs\n";
  }
  if (files.size() > 1) {
    t += "  note: the reports score different files:";
    for (const std::string& f : files) t += " " + (f.empty() ? std::string("(unnamed)") : f);
    t += "\n";
  }
  // Means ± sd over each setting's reports.
  const size_t w0 = 32, w = 22;
  t += "\n" + pad("metric (mean ± sd over reports)", w0 + 2);
  for (const ReportGroup& g : groups) t += pad(g.label, w);
  t += "\n";
  for (size_t k = 0; k < 9; ++k) {
    t += pad(kLabels[k], w0 + 2);
    for (const ReportGroup& g : groups) {
      std::vector<double> xs;
      size_t defined = 0;
      for (const EvalReport& r : g.reports) {
        xs.push_back(r.mean[k]);
        defined += !std::isnan(r.mean[k]);
      }
      const auto [m, sd] = mean_sd(xs);
      std::string cell = fixed(m, decimals(k));
      if (!std::isnan(sd)) cell += " ± " + fixed(sd, decimals(k));
      // a mean over fewer reports than the setting has (the others' value is undefined)
      if (defined > 0 && defined < g.reports.size())
        cell += " (" + std::to_string(defined) + " of " + std::to_string(g.reports.size()) + ")";
      t += pad(cell, w);
    }
    t += "\n";
  }
  // Paired per-program differences against the first setting.
  for (size_t gi = 1; gi < groups.size(); ++gi) {
    t += "\n" +
         pad(groups[gi].label + " − " + groups[0].label + " (paired over programs)", w0 + 2) +
         pad("mean ± 95% CI", w) + "better in\n";
    for (size_t k = 0; k < 7; ++k) {
      const std::map<std::string, double> a = program_means(groups[0], k),
                                          b = program_means(groups[gi], k);
      std::vector<double> d;
      int better = 0, ties = 0;
      for (const auto& [name, bv] : b) {
        auto it = a.find(name);
        if (it == a.end()) continue;
        const double diff = bv - it->second;
        d.push_back(diff);
        if (tied(bv, it->second))
          ++ties;
        else if (k == 0 ? diff < 0 : diff > 0)
          ++better;
      }
      t += pad(kLabels[k], w0 + 2);
      if (d.empty()) {
        t += pad("n/a", w) + "no program where both settings define it\n";
        continue;
      }
      const auto [m, sd] = mean_sd(d);
      std::string cell = (m >= 0 ? "+" : "") + fixed(m, decimals(k));
      if (!std::isnan(sd))
        cell += " ± " + fixed(1.96 * sd / std::sqrt(double(d.size())), decimals(k));
      t += pad(cell, w) + std::to_string(better) + "/" + std::to_string(d.size()) + " programs";
      if (ties > 0) t += " (" + std::to_string(ties) + " tied)";
      t += "\n";
    }
  }
  return t;
}

}  // namespace lcm::train
