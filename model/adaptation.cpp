// Per-program corrections learned during search (see adaptation.hpp).
#include "model/adaptation.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "util/fnv1a.hpp"

namespace lcm::model {

double Correction::apply(double speedup) const {
  if (observations == 0 || !(speedup > 0) || !std::isfinite(speedup)) return speedup;
  const double v = std::exp(offset + scale * std::log(speedup));
  // a positive, finite speedup stays one (model/speedup.hpp: every answer ≥ e^−50)
  return std::clamp(v, std::exp(-50.0), std::numeric_limits<double>::max());
}

Correction fit_correction(const std::vector<Observation>& observations,
                          const CorrectionPrior& prior) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Observation& o : observations) {
    if (!std::isfinite(o.predicted_ln) || !std::isfinite(o.measured_ln)) continue;
    n += 1;
    sx += o.predicted_ln;
    sy += o.measured_ln;
    sxx += o.predicted_ln * o.predicted_ln;
    sxy += o.predicted_ln * o.measured_ln;
  }
  Correction c;
  c.observations = int64_t(n);
  if (n == 0) return c;
  // normal equations [n + wa, sx; sx, sxx + wb] [a; b] = [sy; sxy + wb]
  const double a11 = n + prior.offset_weight, a12 = sx, a22 = sxx + prior.scale_weight;
  const double r1 = sy, r2 = sxy + prior.scale_weight;
  const double det = a11 * a22 - a12 * a12;
  double a = 0, b = 1;
  if (det > 1e-12 * std::max(1.0, a11 * a22)) {
    a = (r1 * a22 - a12 * r2) / det;
    b = (a11 * r2 - a12 * r1) / det;
  }
  if (!(b >= prior.min_scale) || !(b <= prior.max_scale) || !std::isfinite(a)) {
    b = std::isfinite(b) ? std::clamp(b, prior.min_scale, prior.max_scale) : 1.0;
    a = (sy - b * sx) / a11;  // the offset's optimum with b fixed
  }
  c.offset = a;
  c.scale = b;
  return c;
}

std::string program_key(const std::string& program_json) {
  const uint64_t h = fnv1a64(program_json.data(), program_json.size());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ProgramCorrections::Program& ProgramCorrections::touch(const std::string& key,
                                                       const std::string& name) {
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    if (programs_.size() >= kMaxPrograms) {
      auto oldest = std::min_element(programs_.begin(), programs_.end(), [](auto& x, auto& y) {
        return x.second.last_use < y.second.last_use;
      });
      programs_.erase(oldest);
    }
    it = programs_.emplace(key, Program{name, std::numeric_limits<double>::quiet_NaN(), {}, {}, 0})
             .first;
  }
  it->second.last_use = ++clock_;
  if (!name.empty()) it->second.name = name;
  return it->second;
}

Correction ProgramCorrections::observe(const std::string& key, const std::string& name,
                                       double predicted_speedup, double measured_speedup) {
  if (!(predicted_speedup > 0) || !std::isfinite(predicted_speedup) || !(measured_speedup > 0) ||
      !std::isfinite(measured_speedup))
    throw std::invalid_argument("an observation needs positive, finite speedups (predicted " +
                                std::to_string(predicted_speedup) + ", measured " +
                                std::to_string(measured_speedup) + ")");
  std::lock_guard<std::mutex> lock(mu_);
  Program& p = touch(key, name);
  if (p.observations.size() >= kMaxObservations) p.observations.erase(p.observations.begin());
  p.observations.push_back(Observation{std::log(predicted_speedup), std::log(measured_speedup)});
  p.correction = fit_correction(p.observations, prior_);
  return p.correction;
}

Correction ProgramCorrections::correction(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(key);
  return it == programs_.end() ? Correction{} : it->second.correction;
}

void ProgramCorrections::set_untransformed_time(const std::string& key, const std::string& name,
                                                double time_ms) {
  if (!(time_ms > 0) || !std::isfinite(time_ms))
    throw std::invalid_argument("the untransformed time must be positive and finite, not " +
                                std::to_string(time_ms));
  std::lock_guard<std::mutex> lock(mu_);
  touch(key, name).untransformed_time_ms = time_ms;
}

double ProgramCorrections::untransformed_time(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(key);
  return it == programs_.end() ? std::numeric_limits<double>::quiet_NaN()
                               : it->second.untransformed_time_ms;
}

bool ProgramCorrections::reset(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return programs_.erase(key) > 0;
}

void ProgramCorrections::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  programs_.clear();
}

size_t ProgramCorrections::programs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return programs_.size();
}

std::string ProgramCorrections::to_json(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format");
  w.String("lcm-adaptation");
  w.Key("version");
  w.Int(kFormatVersion);
  w.Key("model");
  w.String(model.c_str(), rapidjson::SizeType(model.size()));
  w.Key("prior");
  w.StartObject();
  w.Key("offset_weight");
  w.Double(prior_.offset_weight);
  w.Key("scale_weight");
  w.Double(prior_.scale_weight);
  w.Key("min_scale");
  w.Double(prior_.min_scale);
  w.Key("max_scale");
  w.Double(prior_.max_scale);
  w.EndObject();
  w.Key("programs");
  w.StartArray();
  for (const auto& [key, p] : programs_) {
    w.StartObject();
    w.Key("key");
    w.String(key.c_str(), rapidjson::SizeType(key.size()));
    w.Key("name");
    w.String(p.name.c_str(), rapidjson::SizeType(p.name.size()));
    w.Key("untransformed_time_ms");
    if (std::isfinite(p.untransformed_time_ms))
      w.Double(p.untransformed_time_ms);
    else
      w.Null();
    w.Key("observations");
    w.StartArray();
    for (const Observation& o : p.observations) {
      w.StartArray();
      w.Double(o.predicted_ln);
      w.Double(o.measured_ln);
      w.EndArray();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

void ProgramCorrections::from_json(const std::string& text, const std::string& model) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag>(text.data(),
                                                                               text.size());
  auto bad = [](const std::string& what) {
    throw std::invalid_argument("not an lcm adaptation state: " + what);
  };
  if (d.HasParseError() || !d.IsObject()) bad("not a JSON object");
  const auto f = d.FindMember("format");
  if (f == d.MemberEnd() || !f->value.IsString() ||
      std::string(f->value.GetString()) != "lcm-adaptation")
    bad("\"format\" is not \"lcm-adaptation\"");
  const auto v = d.FindMember("version");
  if (v == d.MemberEnd() || !v->value.IsInt() || v->value.GetInt() < 1 ||
      v->value.GetInt() > kFormatVersion)
    bad("\"version\" is not 1 to " + std::to_string(kFormatVersion));
  const auto m = d.FindMember("model");
  const std::string saved =
      m != d.MemberEnd() && m->value.IsString() ? std::string(m->value.GetString()) : "";
  if (!model.empty() && !saved.empty() && model != saved)
    throw std::invalid_argument("the adaptation state was learned with model " + saved +
                                ", this predictor's model is " + model);
  const auto ps = d.FindMember("programs");
  if (ps == d.MemberEnd() || !ps->value.IsArray()) bad("no \"programs\" array");
  std::map<std::string, Program> loaded;
  uint64_t clock = 0;
  for (const auto& p : ps->value.GetArray()) {
    if (!p.IsObject() || !p.HasMember("key") || !p["key"].IsString() ||
        !p.HasMember("observations") || !p["observations"].IsArray())
      bad("a program without \"key\" or \"observations\"");
    Program q{p.HasMember("name") && p["name"].IsString() ? p["name"].GetString() : "",
              std::numeric_limits<double>::quiet_NaN(),
              {},
              {},
              ++clock};
    if (p.HasMember("untransformed_time_ms") && p["untransformed_time_ms"].IsNumber()) {
      q.untransformed_time_ms = p["untransformed_time_ms"].GetDouble();
      if (!(q.untransformed_time_ms > 0) || !std::isfinite(q.untransformed_time_ms))
        bad("a non-positive untransformed_time_ms");
    }
    for (const auto& o : p["observations"].GetArray()) {
      if (!o.IsArray() || o.Size() != 2 || !o[0].IsNumber() || !o[1].IsNumber())
        bad("an observation that is not [predicted_ln, measured_ln]");
      const Observation ob{o[0].GetDouble(), o[1].GetDouble()};
      if (!std::isfinite(ob.predicted_ln) || !std::isfinite(ob.measured_ln))
        bad("a non-finite observation");
      q.observations.push_back(ob);
    }
    if (q.observations.size() > kMaxObservations)
      q.observations.erase(q.observations.begin(), q.observations.end() - long(kMaxObservations));
    q.correction = fit_correction(q.observations, prior_);
    loaded[p["key"].GetString()] = std::move(q);
    if (loaded.size() > kMaxPrograms)
      bad("more than " + std::to_string(kMaxPrograms) + " programs");
  }
  std::lock_guard<std::mutex> lock(mu_);
  programs_ = std::move(loaded);
  clock_ = clock;
}

}  // namespace lcm::model
