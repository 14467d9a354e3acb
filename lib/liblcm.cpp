// liblcm: the public C++ and C APIs (include/lcm/lcm.hpp, include/lcm/lcm.h) over serve::Scorer.
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/version.hpp"
#include "data/skips.hpp"
#include "lcm/lcm.h"
#include "lcm/lcm.hpp"
#include "serve/scorer.hpp"
#include "util/log.hpp"

namespace lcm {

Error::Error(std::string reason, const std::string& message)
    : std::runtime_error(message), reason_(std::move(reason)) {}

struct Predictor::Impl {
  Impl(const config::Config& c, const serve::ScorerOptions& o) : scorer(c, o) {}
  serve::Scorer scorer;
};

namespace {

// The host's log callback (set_log_callback / lcm_set_log_callback); none by default.
std::mutex g_log_mu;
std::shared_ptr<const LogCallback> g_log_callback;

/// The sink of this library's copy of the engine's log_line: the host's callback, or nowhere.
void host_log_sink(const char* line, void*) {
  std::shared_ptr<const LogCallback> cb;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    cb = g_log_callback;
  }
  if (!cb || !*cb) return;
  try {
    (*cb)(std::string(line));
  } catch (...) {  // an exception of the host's callback must not unwind through lcm's code
  }
}

// From the library's load on, its warnings and notes go to the host's callback, never to
// stderr (the engine's default sink, which the lcm-* tools keep).
const bool g_log_sink_set = (set_log_sink(host_log_sink, nullptr), true);

config::Config make_config(const PredictorOptions& o) {
  try {
    config::Config c;
    if (!o.config_file.empty()) config::apply_config_file(c, o.config_file);
    // one engine thread unless an override says otherwise (a default, not an override: an
    // override of training.threads is then its first and only one)
    config::set_config_value(c, "training.threads", "1");
    std::vector<std::string> args;
    if (!o.weights_path.empty()) args.push_back("eval.weights_path=" + o.weights_path);
    args.insert(args.end(), o.overrides.begin(), o.overrides.end());
    config::apply_overrides(c, args);
    if (c.eval.weights_path.empty())
      throw config::ConfigError("no checkpoint: set PredictorOptions::weights_path");
    return c;
  } catch (const config::ConfigError& e) {
    throw Error("config", e.what());
  }
}

}  // namespace

Predictor::Predictor(const PredictorOptions& options) {
  const config::Config c = make_config(options);
  try {
    serve::ScorerOptions so;
    so.cache_entries = options.cache_programs == 0 ? 1 : options.cache_programs;
    if (options.max_request_memory_mib < 128 || options.max_request_memory_mib > (size_t(1) << 24))
      throw Error("config", "PredictorOptions::max_request_memory_mib: " +
                                std::to_string(options.max_request_memory_mib) +
                                " MiB is outside [128, 16777216]");
    so.max_request_bytes = options.max_request_memory_mib << 20;
    impl_ = std::make_unique<Impl>(c, so);
  } catch (const Error&) {
    throw;
  } catch (const config::ConfigError& e) {
    throw Error("config", e.what());
  } catch (const std::exception& e) {
    throw Error("load", e.what());
  }
  // what the tools print about the checkpoint (model sizes, input scaling) goes to the host
  for (const std::string& note : impl_->scorer.predictor().notes()) log_line(note);
}

Predictor::Predictor(const std::string& weights_path)
    : Predictor(PredictorOptions{weights_path, "", {}, 64, 1024}) {}
Predictor::~Predictor() = default;
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;

std::vector<Score> Predictor::score(const std::string& program_json,
                                    const std::vector<std::string>& schedule_jsons,
                                    const std::string& untransformed_json) const {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  std::vector<serve::ScheduleScore> s;
  try {
    s = impl_->scorer.score(program_json, untransformed_json, schedule_jsons);
  } catch (const serve::QueryError& e) {
    throw Error(e.reason, e.what());
  } catch (const data::DataError& e) {
    throw Error("data", e.what());
  } catch (const std::exception& e) {
    throw Error("error", e.what());
  }
  std::vector<Score> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = Score{s[i].speedup, s[i].reason, s[i].detail};
  return out;
}

std::vector<double> Predictor::predict(const std::string& program_json,
                                       const std::vector<std::string>& schedule_jsons,
                                       const std::string& untransformed_json) const {
  const std::vector<Score> s = score(program_json, schedule_jsons, untransformed_json);
  std::vector<double> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[i].speedup;
  return out;
}

const char* library_version() {
  return lcm::version_string();
}

void set_log_callback(LogCallback callback) {
  auto cb = callback ? std::make_shared<const LogCallback>(std::move(callback)) : nullptr;
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log_callback = std::move(cb);
}

}  // namespace lcm

struct lcm_predictor {
  lcm::Predictor p;
};

namespace {

void put_error(char* err, size_t size, const std::string& text) {
  if (!err || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

}  // namespace

extern "C" {

lcm_predictor* lcm_predictor_open(const char* weights_path, const char* const* overrides,
                                  size_t n_overrides, char* err, size_t err_size) {
  try {
    if (!weights_path) throw lcm::Error("config", "lcm_predictor_open: weights_path is NULL");
    lcm::PredictorOptions o;
    o.weights_path = weights_path;
    for (size_t i = 0; i < n_overrides; ++i) {
      if (!overrides || !overrides[i])
        throw lcm::Error("config",
                         "lcm_predictor_open: override " + std::to_string(i) + " is NULL");
      o.overrides.emplace_back(overrides[i]);
    }
    return new lcm_predictor{lcm::Predictor(o)};
  } catch (const std::exception& e) {
    put_error(err, err_size, e.what());
  } catch (...) {
    put_error(err, err_size, "lcm_predictor_open: unknown error");
  }
  return nullptr;
}

int lcm_predictor_predict(lcm_predictor* p, const char* program_json,
                          const char* untransformed_json, const char* const* schedule_jsons,
                          size_t n, double* speedups, char* err, size_t err_size) {
  try {
    if (!p || !program_json || (n > 0 && (!schedule_jsons || !speedups)))
      throw lcm::Error("bad_argument", "lcm_predictor_predict: a required pointer is NULL");
    std::vector<std::string> s;
    s.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!schedule_jsons[i])
        throw lcm::Error("bad_argument",
                         "lcm_predictor_predict: schedule " + std::to_string(i) + " is NULL");
      s.emplace_back(schedule_jsons[i]);
    }
    const std::vector<double> v =
        p->p.predict(program_json, s, untransformed_json ? untransformed_json : "");
    std::copy(v.begin(), v.end(), speedups);
    return 0;
  } catch (const std::exception& e) {
    put_error(err, err_size, e.what());
  } catch (...) {
    put_error(err, err_size, "lcm_predictor_predict: unknown error");
  }
  return -1;
}

void lcm_predictor_close(lcm_predictor* p) {
  delete p;
}

double lcm_error_speedup(void) {
  return lcm::Predictor::error_speedup;
}

const char* lcm_version(void) {
  return lcm::library_version();
}

void lcm_set_log_callback(lcm_log_callback callback, void* user) {
  if (!callback) {
    lcm::set_log_callback(nullptr);
    return;
  }
  lcm::set_log_callback(
      [callback, user](const std::string& line) { callback(line.c_str(), user); });
}

}  // extern "C"
