// liblcm: the public C++ and C APIs (include/lcm/lcm.hpp, include/lcm/lcm.h) over serve::Scorer.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "config/version.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/schedule_lines.hpp"
#include "data/skips.hpp"
#include "engine/safetensors.hpp"
#include "lcm/lcm.h"
#include "lcm/lcm.hpp"
#include "model/metrics.hpp"
#include "serve/scorer.hpp"
#include "train/eval_output.hpp"
#include "util/log.hpp"

namespace lcm {

Error::Error(std::string reason, const std::string& message)
    : std::runtime_error(message), reason_(std::move(reason)) {}

struct Predictor::Impl {
  Impl(const config::Config& c, const serve::ScorerOptions& o) : scorer(c, o) {}
  serve::Scorer scorer;
  std::string info;  // info_json()
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

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

/// Writes `text` (JSON) as a value, or null when it is empty or not JSON.
void raw_json_or_null(JsonWriter& w, const std::string& text) {
  rapidjson::Document d;
  if (text.empty() || d.Parse(text.c_str(), text.size()).HasParseError()) {
    w.Null();
    return;
  }
  d.Accept(w);
}

/// Predictor::info_json's object (its docstring lists the fields).
std::string make_info(const config::Config& c, const serve::Scorer& scorer) {
  const train::Predictor& p = scorer.predictor();
  std::map<std::string, std::string> meta;
  try {
    meta = read_safetensors(p.weights_path()).metadata;
  } catch (const std::exception&) {  // loaded a moment ago; the info is then without metadata
  }
  auto find = [&](const char* key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("library_version");
  w.String(version_string());
  w.Key("weights_path");
  w.String(p.weights_path().c_str());
  w.Key("device");
  w.String(config::get_config_value(c, "training.device").c_str());
  w.Key("threads");
  w.Int(c.training.threads);
  w.Key("weights");
  w.String(p.bf16_weights() ? "bf16" : "fp32");
  w.Key("ensemble_size");
  w.Int(p.members());
  w.Key("parameters");
  int64_t n = 0;
  for (const auto& t : p.model().params().all()) n += int64_t(t.value.size());
  w.Int64(n);
  w.Key("model");
  raw_json_or_null(w, find("lcm.model_config"));
  w.Key("preset");
  w.String(config::get_config_value(c, "model.preset").c_str());
  w.Key("input_scaling");
  w.String(p.scaling().mode.c_str());
  w.Key("calibration");
  if (p.calibration().active())
    raw_json_or_null(w, p.calibration().to_json());
  else
    w.Null();
  w.Key("training_data");
  w.StartObject();
  for (const char* k : {"train_file", "valid_file", "experiment", "run_id", "epoch", "val_mape",
                        "loss", "select_metric", "selection"}) {
    w.Key(k);
    const std::string v = find((std::string("lcm.") + k).c_str());
    if (v.empty()) {
      w.Null();
    } else if (std::string(k) == "epoch" || std::string(k) == "val_mape") {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end && *end == '\0' && std::isfinite(x))
        w.Double(x);
      else
        w.String(v.c_str());
    } else {
      w.String(v.c_str());
    }
  }
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
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
    if (options.memo_kib > (size_t(1) << 22))
      throw Error("config", "PredictorOptions::memo_kib: " + std::to_string(options.memo_kib) +
                                " KiB is above 4194304");
    so.memo_bytes = options.memo_kib << 10;
    so.bf16_weights = train::parse_weight_format(options.weights, "PredictorOptions::weights");
    try {
      so.learning = serve::parse_learning_spec(options.learning, so.finetune);
    } catch (const std::invalid_argument& e) {
      throw Error("config", std::string("PredictorOptions::learning: ") + e.what());
    }
    impl_ = std::make_unique<Impl>(c, so);
    impl_->info = make_info(c, impl_->scorer);
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
    : Predictor(PredictorOptions{weights_path, "", {}, 64, 1024, "correction"}) {}
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

Observed Predictor::observe(const std::string& program_json, const std::string& schedule_json,
                            const std::vector<double>& execution_times_ms,
                            const std::string& untransformed_json, double untransformed_time_ms) {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  serve::Observed o;
  try {
    o = impl_->scorer.observe(program_json, untransformed_json, schedule_json, execution_times_ms,
                              untransformed_time_ms);
  } catch (const serve::QueryError& e) {
    throw Error(e.reason, e.what());
  } catch (const data::DataError& e) {
    throw Error("data", e.what());
  } catch (const std::exception& e) {
    throw Error("error", e.what());
  }
  return Observed{o.measured_speedup,  o.predicted_speedup, o.corrected_speedup,
                  o.correction.offset, o.correction.scale,  o.correction.observations,
                  o.untransformed};
}

void Predictor::wait_for_learning() {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  impl_->scorer.wait_for_learning();
}

bool Predictor::reset_observations(const std::string& program_json) {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  return impl_->scorer.reset_observations(program_json);
}

void Predictor::reset_observations() {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  impl_->scorer.reset_observations();
}

void Predictor::save_adaptation(const std::string& path) const {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  try {
    impl_->scorer.save_adaptation(path);
  } catch (const std::exception& e) {
    throw Error("io", e.what());
  }
}

void Predictor::load_adaptation(const std::string& path) {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  try {
    impl_->scorer.load_adaptation(path);
  } catch (const serve::QueryError& e) {
    throw Error(e.reason, e.what());
  } catch (const std::exception& e) {
    throw Error("bad_adaptation", e.what());
  }
}

const std::string& Predictor::info_json() const {
  if (!impl_) throw Error("moved_from", "lcm::Predictor: used after being moved from");
  return impl_->info;
}

struct ProgramFile::Impl {
  explicit Impl(const std::string& path) : log(false, 0), source(path, log) {}
  data::SkipLog log;
  data::RecordSource source;
  data::ReadOptions opt;
  std::unordered_map<std::string, int64_t> names;  // program name → line of its first record
};

namespace {

[[noreturn]] void rethrow_data_error() {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("data", e.what());
  }
}

/// The forms Predictor takes of a record that parse_program accepted (`json`, whole-program).
void fill_forms(const std::string& json, const data::Program& prog, ProgramRecord& out) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("program_annotation") ||
      !d.HasMember("schedules_list") || !d["schedules_list"].IsArray())
    throw Error("data", out.file + ":" + std::to_string(out.line) +
                            ": a record the reader accepted has no program_annotation or "
                            "schedules_list");
  rapidjson::Value& ann = d["program_annotation"];
  if (ann.IsObject() && !ann.HasMember("function_name"))
    ann.AddMember("function_name", rapidjson::Value(prog.name.c_str(), d.GetAllocator()),
                  d.GetAllocator());
  auto text = [](const rapidjson::Value& v) {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    v.Accept(w);
    return std::string(sb.GetString(), sb.GetSize());
  };
  out.program_json = text(ann);
  for (auto& s : d["schedules_list"].GetArray()) {
    if (s.IsObject()) s.RemoveMember("execution_times");
    out.schedule_jsons.push_back(text(s));
  }
  out.untransformed_json = out.schedule_jsons.empty() ? "" : out.schedule_jsons[0];
}

}  // namespace

ProgramFile::ProgramFile(const std::string& path) {
  try {
    data::check_input_format(path);
    impl_ = std::make_unique<Impl>(path);
    impl_->opt.loop_level_base =
        data::choose_loop_level_base(path, data::LoopLevelBase::Auto, impl_->opt).base;
  } catch (...) {
    rethrow_data_error();
  }
}
ProgramFile::~ProgramFile() = default;
ProgramFile::ProgramFile(ProgramFile&&) noexcept = default;
ProgramFile& ProgramFile::operator=(ProgramFile&&) noexcept = default;

bool ProgramFile::next(ProgramRecord& out) {
  if (!impl_) throw Error("moved_from", "lcm::ProgramFile: used after being moved from");
  try {
    data::RawRecord rec;
    while (impl_->source.next(rec)) {
      std::optional<data::Program> p = data::parse_program(rec, impl_->log, impl_->opt);
      if (!p) continue;
      auto [it, fresh] = impl_->names.emplace(p->name, p->source_line);
      if (!fresh) {
        data::SkipEvent ev;
        ev.level = "program";
        ev.reason = "duplicate_program";
        ev.file = p->source_file;
        ev.line = p->source_line;
        ev.program = p->name;
        ev.detail = "the name was already read at line " + std::to_string(it->second) +
                    "; this record is skipped";
        impl_->log.add(ev);
        continue;
      }
      out = ProgramRecord{};
      out.name = p->name;
      out.file = p->source_file;
      out.line = p->source_line;
      if (rec.schedule_line) {
        data::SkipLog scratch(false, 0);  // parse_program has logged the group's skips
        data::RawRecord merged;
        if (!data::merge_schedule_lines(rec, scratch, merged)) continue;
        fill_forms(merged.json, *p, out);
      } else {
        fill_forms(rec.json, *p, out);
      }
      if (out.schedule_jsons.size() != p->schedules.size())
        throw Error("data", out.file + ":" + std::to_string(out.line) + ": " +
                                std::to_string(out.schedule_jsons.size()) +
                                " schedules in the record, the reader read " +
                                std::to_string(p->schedules.size()));
      for (const data::Schedule& s : p->schedules) {
        const bool ok = s.parse_problem.empty() && s.has_label();
        out.measured_speedups.push_back(
            ok ? data::speedup_label(p->initial_execution_time, s.min_time())
               : std::numeric_limits<double>::quiet_NaN());
        out.schedule_problems.push_back(s.parse_problem);
      }
      return true;
    }
    return false;
  } catch (...) {
    rethrow_data_error();
  }
}

std::vector<Skip> ProgramFile::skips() const {
  std::vector<Skip> out;
  if (!impl_) return out;
  for (const data::SkipEvent& e : impl_->log.events())
    out.push_back(Skip{e.level, e.reason, e.file, e.line, e.program, e.schedule, e.detail});
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> ProgramFile::skip_counts() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  if (!impl_) return out;
  for (const auto& [k, v] : impl_->log.counts()) out.emplace_back(k, v);
  return out;
}

namespace {

/// `m` as the other of lcm's two metrics types (the public MetricsSummary of lcm.hpp and
/// model::MetricsSummary): the same fields, per program and overall.
template <class To, class From>
To convert_metrics(const From& m) {
  using ToProgram = typename decltype(To::programs)::value_type;
  To r;
  for (const auto& p : m.programs)
    r.programs.push_back(ToProgram{p.program, p.n_schedules, p.mape, p.spearman, p.ndcg, p.ndcg_5,
                                   p.ndcg_1, p.top1_recovered, p.top5_recovered});
  const auto overall = [](auto& s) {
    return std::tie(s.n_datapoints, s.mean_mape, s.mean_spearman, s.mean_ndcg, s.mean_ndcg_5,
                    s.mean_ndcg_1, s.mean_top1_recovered, s.mean_top5_recovered, s.n_spearman,
                    s.n_ndcg, s.weighted_mape, s.median_error_factor, s.within_2x);
  };
  overall(r) = overall(m);
  return r;
}

model::MetricsSummary to_model(const MetricsSummary& m) {
  return convert_metrics<model::MetricsSummary>(m);
}

}  // namespace

MetricsSummary compute_metrics(const std::vector<std::string>& programs,
                               const std::vector<double>& measured,
                               const std::vector<double>& predicted,
                               const std::vector<double>& rank) {
  model::MetricsSummary s;
  try {
    if (!rank.empty() && rank.size() != predicted.size())
      throw std::invalid_argument("compute_metrics: " + std::to_string(rank.size()) +
                                  " ranks for " + std::to_string(predicted.size()) +
                                  " predictions");
    s = model::compute_metrics(programs, measured, predicted, rank.empty() ? nullptr : &rank);
  } catch (const std::invalid_argument& e) {
    throw Error("bad_argument", e.what());
  }
  return convert_metrics<MetricsSummary>(s);
}

std::string metrics_table(const MetricsSummary& m, bool per_program) {
  return train::metrics_table(to_model(m), per_program);
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

/// A C entry point's body: 0 when `f` returns, -1 with the message in `err` when it throws
/// (nothing may unwind into the C caller; `name` names the call for a non-standard exception).
template <class F>
int c_call(const char* name, char* err, size_t err_size, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    put_error(err, err_size, e.what());
  } catch (...) {
    put_error(err, err_size, std::string(name) + ": unknown error");
  }
  return -1;
}

}  // namespace

extern "C" {

lcm_predictor* lcm_predictor_open(const char* weights_path, const char* const* overrides,
                                  size_t n_overrides, char* err, size_t err_size) {
  return lcm_predictor_open_learning(weights_path, overrides, n_overrides, nullptr, err, err_size);
}

lcm_predictor* lcm_predictor_open_learning(const char* weights_path, const char* const* overrides,
                                           size_t n_overrides, const char* learning, char* err,
                                           size_t err_size) {
  try {
    if (!weights_path) throw lcm::Error("config", "lcm_predictor_open: weights_path is NULL");
    lcm::PredictorOptions o;
    if (learning) o.learning = learning;
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
  return c_call("lcm_predictor_predict", err, err_size, [&] {
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
  });
}

int lcm_predictor_observe(lcm_predictor* p, const char* program_json,
                          const char* untransformed_json, const char* schedule_json,
                          const double* execution_times_ms, size_t n_times,
                          double untransformed_time_ms, double* measured_speedup, char* err,
                          size_t err_size) {
  return c_call("lcm_predictor_observe", err, err_size, [&] {
    if (!p || !program_json || !schedule_json || (n_times > 0 && !execution_times_ms))
      throw lcm::Error("bad_argument", "lcm_predictor_observe: a required pointer is NULL");
    const lcm::Observed o =
        p->p.observe(program_json, schedule_json,
                     std::vector<double>(execution_times_ms, execution_times_ms + n_times),
                     untransformed_json ? untransformed_json : "", untransformed_time_ms);
    if (measured_speedup) *measured_speedup = o.measured_speedup;
  });
}

int lcm_predictor_wait_for_learning(lcm_predictor* p, char* err, size_t err_size) {
  return c_call("lcm_predictor_wait_for_learning", err, err_size, [&] {
    if (!p) throw lcm::Error("bad_argument", "lcm_predictor_wait_for_learning: NULL");
    p->p.wait_for_learning();
  });
}

int lcm_predictor_reset_observations(lcm_predictor* p, const char* program_json) {
  if (!p) return -1;
  try {
    if (!program_json) {
      p->p.reset_observations();
      return 1;
    }
    return p->p.reset_observations(program_json) ? 1 : 0;
  } catch (...) {  // nothing may unwind into the C caller (e.g. out of memory for the key)
    return -1;
  }
}

int lcm_predictor_save_adaptation(const lcm_predictor* p, const char* path, char* err,
                                  size_t err_size) {
  return c_call("lcm_predictor_save_adaptation", err, err_size, [&] {
    if (!p || !path) throw lcm::Error("bad_argument", "lcm_predictor_save_adaptation: NULL");
    p->p.save_adaptation(path);
  });
}

int lcm_predictor_load_adaptation(lcm_predictor* p, const char* path, char* err, size_t err_size) {
  return c_call("lcm_predictor_load_adaptation", err, err_size, [&] {
    if (!p || !path) throw lcm::Error("bad_argument", "lcm_predictor_load_adaptation: NULL");
    p->p.load_adaptation(path);
  });
}

const char* lcm_predictor_info(const lcm_predictor* p) {
  return p ? p->p.info_json().c_str() : nullptr;
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
