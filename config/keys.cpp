// The key table of the lcm configuration: one row per key with its type, documentation, default,
// validation and --resume policy, the enum name tables, and Config's defaults (see config.hpp).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "config/config.hpp"
#include "engine/threads.hpp"

namespace lcm::config {

// ---- enum name tables ----
template <>
const std::vector<std::pair<LrScheduleKind, std::string>>& enum_names<LrScheduleKind>() {
  static const std::vector<std::pair<LrScheduleKind, std::string>> t{
      {LrScheduleKind::Constant, "constant"},
      {LrScheduleKind::OneCyclePerEpoch, "one_cycle_per_epoch"},
      {LrScheduleKind::OneCyclePerBatch, "one_cycle_per_batch"},
      {LrScheduleKind::WarmupCosine, "warmup_cosine"},
      {LrScheduleKind::ReduceOnPlateau, "reduce_on_plateau"}};
  return t;
}
template <>
const std::vector<std::pair<OptimizerKind, std::string>>& enum_names<OptimizerKind>() {
  static const std::vector<std::pair<OptimizerKind, std::string>> t{
      {OptimizerKind::Adam, "adam"}, {OptimizerKind::AdamW, "adamw"}};
  return t;
}
template <>
const std::vector<std::pair<SelectMetric, std::string>>& enum_names<SelectMetric>() {
  static const std::vector<std::pair<SelectMetric, std::string>> t{
      {SelectMetric::Mape, "mape"},
      {SelectMetric::Spearman, "spearman"},
      {SelectMetric::Ndcg, "ndcg"}};
  return t;
}
template <>
const std::vector<std::pair<CalibrationWeighting, std::string>>&
enum_names<CalibrationWeighting>() {
  static const std::vector<std::pair<CalibrationWeighting, std::string>> t{
      {CalibrationWeighting::Program, "program"}, {CalibrationWeighting::Datapoint, "datapoint"}};
  return t;
}
template <>
const std::vector<std::pair<Preset, std::string>>& enum_names<Preset>() {
  static const std::vector<std::pair<Preset, std::string>> t{{Preset::None, "none"},
                                                             {Preset::Reference, "reference"}};
  return t;
}
template <>
const std::vector<std::pair<ScalingMode, std::string>>& enum_names<ScalingMode>() {
  // the model's own list of modes (the names stored in checkpoints), in the enum's order
  static const std::vector<std::pair<ScalingMode, std::string>> t = [] {
    const std::vector<std::string>& names = lcm::model::input_scaling_modes();
    const ScalingMode values[] = {ScalingMode::None, ScalingMode::Log, ScalingMode::Standardize,
                                  ScalingMode::LogStandardize};
    std::vector<std::pair<ScalingMode, std::string>> v;
    for (size_t i = 0; i < names.size() && i < 4; ++i) v.emplace_back(values[i], names[i]);
    return v;
  }();
  return t;
}
template <>
const std::vector<std::pair<lcm::model::EncoderKind, std::string>>&
enum_names<lcm::model::EncoderKind>() {
  using K = lcm::model::EncoderKind;
  static const std::vector<std::pair<K, std::string>> t = [] {
    std::vector<std::pair<K, std::string>> v;
    for (K k : {K::None, K::CompVector, K::AccessMatrix})
      v.emplace_back(k, lcm::model::encoder_kind_name(k));
    return v;
  }();
  return t;
}
template <>
const std::vector<std::pair<lcm::data::FeatureOptions::LoopZeroing, std::string>>&
enum_names<lcm::data::FeatureOptions::LoopZeroing>() {
  using Z = lcm::data::FeatureOptions::LoopZeroing;
  static const std::vector<std::pair<Z, std::string>> t{
      {Z::LastComp, "last_comp"}, {Z::RemovedByFusion, "removed_by_fusion"}, {Z::Off, "off"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::FeatureOptions::ShiftMatch, std::string>>&
enum_names<lcm::data::FeatureOptions::ShiftMatch>() {
  using S = lcm::data::FeatureOptions::ShiftMatch;
  static const std::vector<std::pair<S, std::string>> t{{S::Prefix, "prefix"}, {S::Exact, "exact"}};
  return t;
}

template <>
const std::vector<std::pair<lcm::data::ScheduleSource, std::string>>&
enum_names<lcm::data::ScheduleSource>() {
  using S = lcm::data::ScheduleSource;
  static const std::vector<std::pair<S, std::string>> t{{S::Auto, "auto"},
                                                        {S::Structured, "structured"},
                                                        {S::Typed, "typed"},
                                                        {S::SchedStr, "sched_str"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::BatchingMode, std::string>>&
enum_names<lcm::data::BatchingMode>() {
  using M = lcm::data::BatchingMode;
  static const std::vector<std::pair<M, std::string>> t{{M::Mixed, "mixed"},
                                                        {M::PerFootprint, "per_footprint"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::ScheduleCheck, std::string>>&
enum_names<lcm::data::ScheduleCheck>() {
  using S = lcm::data::ScheduleCheck;
  static const std::vector<std::pair<S, std::string>> t{
      {S::Report, "report"}, {S::Skip, "skip"}, {S::Off, "off"}};
  return t;
}
template <>
const std::vector<std::pair<lcm::data::LoopLevelBase, std::string>>&
enum_names<lcm::data::LoopLevelBase>() {
  using B = lcm::data::LoopLevelBase;
  static const std::vector<std::pair<B, std::string>> t{
      {B::Auto, "auto"}, {B::Zero, "0"}, {B::One, "1"}};
  return t;
}

namespace {

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

[[noreturn]] void bad_value(const std::string& key, const std::string& expected,
                            const std::string& got, const std::string& why = "") {
  throw ConfigError(key + ": expected " + expected + ", got " + quote(got) +
                    (why.empty() ? "" : " (" + why + ")"));
}

/// Why `text`, refused as an integer, is not one when it is another number: "not a whole
/// number" (5.5), "out of range" (1e23, 2^70 written out), "written in floating-point notation;
/// write it as 1000" (1e3); "" when it is no number at all.
std::string why_not_integer(const std::string& text) {
  if (text.find_first_of("xX") != std::string::npos) return "";  // hex: not taken as a number
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(s, &end);
  while (end && *end == ' ') ++end;
  if (end == s || *end != '\0') return "";  // not a number at all
  if (errno == ERANGE && std::isinf(d)) return "out of range";
  if (!std::isfinite(d)) return "";
  if (d != std::floor(d)) return "not a whole number";
  if (std::fabs(d) >= 9.2e18) return "out of range";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", d);
  return std::string("written in floating-point notation; write it as ") + buf;
}

/// The number `text` holds, read by `parse` (strtoll, strtoull or strtod; spaces around it
/// allowed). Throws ConfigError naming `key` and `type` when the text is not exactly one number
/// (or, with `refuse_minus`, starts with '-').
template <class Parse>
auto parse_number(const std::string& key, const std::string& text, const std::string& type,
                  Parse parse, bool refuse_minus = false) {
  errno = 0;
  char* end = nullptr;
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  if (*s == '\0' || (refuse_minus && *s == '-')) bad_value(key, type, text);
  const auto v = parse(s, &end);
  while (end && *end == ' ') ++end;
  if (errno != 0 || end == s || *end != '\0') bad_value(key, type, text);
  return v;
}

int64_t parse_int(const std::string& key, const std::string& text, int64_t lo, int64_t hi,
                  const std::string& type) {
  long long v = 0;
  try {
    v = parse_number(key, text, type,
                     [](const char* s, char** e) { return std::strtoll(s, e, 10); });
  } catch (const ConfigError&) {
    bad_value(key, type, text, why_not_integer(text));  // with the reason when it is a number
  }
  if (v < lo || v > hi)
    bad_value(key, type, text, v > hi ? "the largest accepted is " + std::to_string(hi) : "");
  return v;
}

uint64_t parse_u64(const std::string& key, const std::string& text, const std::string& type) {
  try {
    return parse_number(
        key, text, type, [](const char* s, char** e) { return std::strtoull(s, e, 10); }, true);
  } catch (const ConfigError&) {
    const std::string why = text.find('-') == std::string::npos ? why_not_integer(text) : "";
    bad_value(key, type, text, why);
  }
}

double parse_double(const std::string& key, const std::string& text, double lo, bool lo_open,
                    const std::string& type) {
  const double v =
      parse_number(key, text, type, [](const char* s, char** e) { return std::strtod(s, e); });
  if (!std::isfinite(v) || v < lo || (lo_open && v == lo)) bad_value(key, type, text);
  return v;
}

/// The words a boolean key accepts (any case), true ones first: the one list parse_bool reads
/// and the type text of --help and of messages shows.
constexpr const char* kTrueWords[] = {"true", "yes", "on", "1"};
constexpr const char* kFalseWords[] = {"false", "no", "off", "0"};

/// "a boolean (true|yes|on|1 or false|no|off|0, any case)".
const std::string& bool_type() {
  static const std::string t = [] {
    auto join = [](const auto& words) {
      std::string s;
      for (const char* w : words) s += (s.empty() ? "" : "|") + std::string(w);
      return s;
    };
    return "a boolean (" + join(kTrueWords) + " or " + join(kFalseWords) + ", any case)";
  }();
  return t;
}

bool parse_bool(const std::string& key, const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  for (const char* w : kTrueWords)
    if (t == w) return true;
  for (const char* w : kFalseWords)
    if (t == w) return false;
  bad_value(key, bool_type(), text);
}

std::string format_double(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

/// "a, b" / "[a,b]" / "'a', \"b\"" → {"a", "b"}: items split at commas, surrounding brackets,
/// quotes and spaces stripped; empty items are kept as "" (so that callers can refuse them).
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  auto flush = [&] {
    const size_t a = item.find_first_not_of(" \t'\"[]");
    const size_t e = item.find_last_not_of(" \t'\"[]");
    out.push_back(a == std::string::npos ? "" : item.substr(a, e - a + 1));
    item.clear();
  };
  for (char ch : text) {
    if (ch == ',') {
      flush();
      continue;
    }
    item += ch;
  }
  flush();
  return out;
}

/// A comma-separated list of numbers (model.comp_embed_layer_sizes, model.drops). Throws
/// ConfigError "K: empty list", "K: empty entry in 'T'" or "K: expected a comma-separated list
/// of numbers, got 'T'".
template <class V>
std::vector<V> parse_number_list(const std::string& key, const std::string& text) {
  std::vector<V> out;
  const std::vector<std::string> items = split_list(text);
  if (items.size() == 1 && items[0].empty()) throw ConfigError(key + ": empty list");
  for (const std::string& item : items) {
    if (item.empty()) throw ConfigError(key + ": empty entry in '" + text + "'");
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || !std::isfinite(v))
      throw ConfigError(key + ": expected a comma-separated list of numbers, got '" + text + "'");
    if (std::is_integral_v<V> && (v != std::floor(v) || std::fabs(v) > 1e9))
      throw ConfigError(key + ": expected a comma-separated list of integers, got '" + text + "'");
    out.push_back(V(v));
  }
  return out;
}

template <class V>
std::string join_numbers(const std::vector<V>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") +
         (std::is_integral_v<V> ? std::to_string(int64_t(v[i])) : format_double(double(v[i])));
  return s;
}

template <class E>
std::string choices_of(const std::vector<E>& allowed) {
  std::string joined;
  for (E v : allowed) joined += (joined.empty() ? "" : "|") + name_of(v);
  return joined;
}

template <class E>
std::vector<E> all_values() {
  std::vector<E> v;
  for (const auto& [value, name] : enum_names<E>()) v.push_back(value);
  return v;
}

// Row builders. `F` is a callable Config& → reference to the field (see LCM_FIELD).
#define LCM_FIELD(path)     \
  [](Config & c) -> auto& { \
    return c.path;          \
  }

template <class F>
auto& field_of(const F& field, const Config& c) {
  return field(const_cast<Config&>(c));
}

template <class F>
ConfigKey string_key(std::string key, std::string def, std::string doc, F field) {
  return {key,
          "string",
          std::move(doc),
          std::move(def),
          OnResume::Free,
          [field](Config& c, const std::string& v) { field(c) = v; },
          [field](const Config& c) { return field_of(field, c); }};
}

/// An integer key in [lo, hi]; the type reads "an integer >= lo" when hi is the type's maximum.
template <class F>
ConfigKey int_key(std::string key, std::string def, int64_t lo, int64_t hi, std::string doc,
                  F field) {
  using T = std::decay_t<decltype(field(std::declval<Config&>()))>;
  const bool open = hi == int64_t(std::numeric_limits<T>::max());
  std::string type = open
                         ? "an integer >= " + std::to_string(lo)
                         : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {key,
          type,
          std::move(doc),
          std::move(def),
          OnResume::Free,
          [key, lo, hi, type, field](Config& c, const std::string& v) {
            field(c) = T(parse_int(key, v, lo, hi, type));
          },
          [field](const Config& c) { return std::to_string(field_of(field, c)); }};
}
template <class F>
ConfigKey int_key(std::string key, std::string def, int64_t lo, std::string doc, F field) {
  using T = std::decay_t<decltype(field(std::declval<Config&>()))>;
  return int_key(std::move(key), std::move(def), lo, int64_t(std::numeric_limits<T>::max()),
                 std::move(doc), field);
}

template <class F>
ConfigKey u64_key(std::string key, std::string def, std::string doc, F field) {
  std::string type = "an unsigned integer";
  return {
      key,
      type,
      std::move(doc),
      std::move(def),
      OnResume::Free,
      [key, type, field](Config& c, const std::string& v) { field(c) = parse_u64(key, v, type); },
      [field](const Config& c) { return std::to_string(field_of(field, c)); }};
}

/// A finite number >= lo (> lo when lo_open), and < hi when hi is given.
template <class F>
ConfigKey double_key(std::string key, std::string def, double lo, bool lo_open, std::string doc,
                     F field, double hi = INFINITY) {
  std::string type =
      std::isfinite(hi)
          ? std::string("a finite number in ") + (lo_open ? "(" : "[") + format_double(lo) + ", " +
                format_double(hi) + ")"
          : std::string("a finite number ") + (lo_open ? "> " : ">= ") + format_double(lo);
  return {key,
          type,
          std::move(doc),
          std::move(def),
          OnResume::Free,
          [key, lo, lo_open, hi, type, field](Config& c, const std::string& v) {
            const double x = parse_double(key, v, lo, lo_open, type);
            if (!(x < hi)) bad_value(key, type, v);
            field(c) = x;
          },
          [field](const Config& c) { return format_double(field_of(field, c)); }};
}

template <class F>
ConfigKey bool_key(std::string key, std::string def, std::string doc, F field) {
  return {key,
          bool_type(),
          std::move(doc),
          std::move(def),
          OnResume::Free,
          [key, field](Config& c, const std::string& v) { field(c) = parse_bool(key, v); },
          [field](const Config& c) { return std::string(field_of(field, c) ? "true" : "false"); }};
}

/// An enum key; `allowed` (default: every value of the enum) lists the accepted values.
template <class F, class E = std::decay_t<decltype(std::declval<F>()(std::declval<Config&>()))>>
ConfigKey enum_key(std::string key, std::string def, std::string doc, F field,
                   std::vector<E> allowed = all_values<E>()) {
  std::string type = "one of " + choices_of(allowed);
  return {
      key,
      type,
      std::move(doc),
      std::move(def),
      OnResume::Free,
      [key, allowed, type, field](Config& c, const std::string& v) {
        E e{};
        if (!enum_from_name(v, e) || std::find(allowed.begin(), allowed.end(), e) == allowed.end())
          bad_value(key, type, v);
        field(c) = e;
      },
      [field](const Config& c) { return name_of(field_of(field, c)); }};
}

/// training.loss: an alias or a list of terms (config/loss_terms.hpp parse_objective); a YAML
/// file may give the list as a sequence (`loss: [log_mse:1, listnet:0.2]`).
template <class F>
ConfigKey objective_key(std::string key, std::string def, std::string doc, F field) {
  std::string type = objective_type();
  return {key,
          type,
          std::move(doc),
          std::move(def),
          OnResume::Free,
          [key, type, field](Config& c, const std::string& v) {
            try {
              field(c) = parse_objective(v);
            } catch (const std::invalid_argument& e) {
              bad_value(key, type, v, e.what());
            }
          },
          [field](const Config& c) { return field_of(field, c).text(); },
          true};
}

template <class V, class F>
ConfigKey number_list_key(std::string key, std::string def, std::string doc, F field) {
  return ConfigKey{
      key,
      std::is_integral_v<V> ? "a comma-separated list of integers"
                            : "a comma-separated list of numbers",
      std::move(doc),
      std::move(def),
      OnResume::Free,
      [key, field](Config& c, const std::string& v) { field(c) = parse_number_list<V>(key, v); },
      [field](const Config& c) { return join_numbers(field_of(field, c)); },
      true};
}

ConfigKey with_resume(ConfigKey k, OnResume p) {
  k.on_resume = p;
  return k;
}
ConfigKey refuse(ConfigKey k) {
  return with_resume(std::move(k), OnResume::Refuse);
}
ConfigKey warn(ConfigKey k) {
  return with_resume(std::move(k), OnResume::Warn);
}

bool is_plain_name(const std::string& v) {
  // it becomes part of file names under base_path: no '/', no "..", not empty
  bool ok = !v.empty() && v[0] != '.';
  for (char ch : v)
    ok =
        ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
  return ok;
}

/// The rows of experiment.*: the run name and the output folder.
void add_experiment_keys(std::vector<ConfigKey>& k) {
  {
    const std::string type = "a name of letters, digits, '.', '_', '-' (not starting with '.'; " +
                             std::to_string(kMaxExperimentName) + " characters at most)";
    k.push_back({"experiment.name", type, "name of the run (used in output file names)", "lcm",
                 OnResume::Free,
                 [type](Config& c, const std::string& v) {
                   if (v.size() > kMaxExperimentName)
                     bad_value("experiment.name", type, v.substr(0, 40) + "...",
                               std::to_string(v.size()) + " characters long; the limit is " +
                                   std::to_string(kMaxExperimentName));
                   if (!is_plain_name(v)) bad_value("experiment.name", type, v);
                   c.experiment.name = v;
                 },
                 [](const Config& c) { return c.experiment.name; }});
  }
  k.push_back(string_key("experiment.base_path", "runs",
                         "folder for outputs; the data cache is <base_path>/cache/<split>.lcmb "
                         "(relative = to the current directory)",
                         LCM_FIELD(experiment.base_path)));
  k.push_back(bool_key("experiment.overwrite", "false",
                       "a new lcm-train / lcm-pretrain run over an experiment that already holds "
                       "a run first moves that run's files into <base_path>/previous/<name>-<UTC "
                       "time>/ (false: the new run is refused; --resume continues the old one)",
                       LCM_FIELD(experiment.overwrite)));
}

/// The rows of data.*: input files, feature switches, batching, cache.
void add_data_keys(std::vector<ConfigKey>& k) {
  // the defaults: the committed lcm-synth slice (tests/data/README.md), so a fresh clone trains
  k.push_back(string_key("data.train_file", "tests/data/synth_train.jsonl.gz",
                         "training set (LOOPerSet .jsonl/.jsonl.gz; relative = to the current "
                         "directory; empty = none)",
                         LCM_FIELD(data.train_file)));
  k.push_back(string_key("data.valid_file", "tests/data/synth_valid.jsonl.gz",
                         "validation set (same rules as data.train_file)",
                         LCM_FIELD(data.valid_file)));
  k.push_back(refuse(int_key("data.batch_size", "512", 1,
                             "datapoints per batch (reference 2048; model-spec §6)",
                             LCM_FIELD(data.batch_size))));
  k.push_back(int_key("data.nb_workers", "0", 0, kMaxWorkers,
                      "threads extracting features; 0 = all hardware threads",
                      LCM_FIELD(data.nb_workers)));
  k.push_back({"data.max_bytes_in_flight", "bytes with a unit such as 256MiB or 1GiB, or 0",
               "bytes of the records read and not yet taken in, across the reader and every "
               "feature thread of lcm-prepare, lcm-train and lcm-inspect (a record heavier than "
               "this is read alone); 0 = bounded by the record count only",
               "256MiB", OnResume::Free,
               [](Config& c, const std::string& v) {
                 const MemoryBudget b = parse_memory_budget(v, "data.max_bytes_in_flight");
                 if (b.is_fraction)
                   throw ConfigError(
                       "data.max_bytes_in_flight: expected bytes with a unit "
                       "(e.g. 256MiB) or 0, got '" +
                       v + "'");
                 c.data.max_bytes_in_flight = int64_t(b.bytes);
               },
               [](const Config& c) {
                 // the largest binary unit that divides it: 256MiB reads back as given
                 const int64_t n = c.data.max_bytes_in_flight;
                 const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
                 int u = 0;
                 int64_t v = n;
                 while (v != 0 && u < 4 && v % 1024 == 0) v /= 1024, ++u;
                 return n == 0 ? std::string("0") : std::to_string(v) + units[u];
               }});
  k.push_back(
      refuse(int_key("data.min_functions_per_footprint", "0", 0,
                     "drop footprint groups with fewer programs than this AND fewer than 100x "
                     "this many datapoints (model-spec §3.11; the reference preset: 2); 0 keeps "
                     "all",
                     LCM_FIELD(data.min_functions_per_footprint))));
  k.push_back(refuse(enum_key(
      "data.batching", "mixed",
      "mixed = batches of any mix of footprints, programs in pieces of data.program_piece, every "
      "batch full (docs/model-spec.md §5.5); per_footprint = one footprint per batch (the "
      "reference)",
      LCM_FIELD(data.batching))));
  k.push_back(refuse(int_key(
      "data.program_piece", "32", 0,
      "mixed batches: a program's schedules enter batches in pieces of at most this many, so "
      "that a batch holds many programs (0 = whole programs)",
      LCM_FIELD(data.program_piece))));
  k.push_back(refuse(u64_key("data.seed", "42", "seed of the batch shuffles (model-spec §5.5)",
                             LCM_FIELD(data.seed))));
  k.push_back(bool_key("data.strict", "false",
                       "stop at the first malformed line/program/schedule; policy drops are not "
                       "errors (small footprint groups, notes, schedules with no_execution_times/"
                       "negative_time/zero_time); not part of the cache key (a cache built with "
                       "such skips stops a strict run too)",
                       LCM_FIELD(data.strict)));
  k.push_back(refuse(enum_key("data.loop_zeroing", "last_comp",
                              "loop-vector zeroing rule (model-spec §11 Q2; last_comp = reference)",
                              LCM_FIELD(data.loop_zeroing))));
  k.push_back(
      refuse(enum_key("data.shift_match", "prefix",
                      "shift flag matching in the computation vector (model-spec §11 Q3; prefix = "
                      "reference)",
                      LCM_FIELD(data.shift_match))));
  k.push_back(refuse(enum_key(
      "data.schedule_source", "auto",
      "where schedules are read from (docs/data-format.md \"Schedule forms\"): auto = the "
      "per-computation dicts when present, else the schedule-level typed transformations_list, "
      "else sched_str",
      LCM_FIELD(data.schedule_source))));
  k.push_back(refuse(enum_key("data.schedule_check", "report",
                              "two forms of one schedule that disagree: report (count, name, keep "
                              "the chosen form), skip (schedule/schedule_forms_disagree) or off",
                              LCM_FIELD(data.schedule_check))));
  k.push_back(refuse(enum_key("data.loop_level_base", "auto",
                              "loop levels of typed transformations_list entries: 0- or 1-based; "
                              "auto = detected per file (0-based when the data proves neither)",
                              LCM_FIELD(data.loop_level_base))));
  k.push_back(refuse(string_key(
      "data.machine", "",
      "the machine whose times are read when execution_times are keyed by machine name; \"\" = "
      "the only one (several in a file and none chosen is an error naming them)",
      LCM_FIELD(data.machine))));
  k.push_back(refuse(int_key("data.max_programs", "0", 0,
                             "read only the first N records of each file; 0 = all",
                             LCM_FIELD(data.max_programs))));
  k.push_back(bool_key("data.cache", "true", "read and write the prepared-data cache",
                       LCM_FIELD(data.cache)));
  k.push_back(int_key("data.cache_lock_wait", "3600", 0,
                      "seconds to wait while another run (sharing experiment.base_path) builds "
                      "the same cache file, then read it; 0 = stop at once with an error",
                      LCM_FIELD(data.cache_lock_wait)));
}

/// The rows of training.device, tf32 and the GPU memory budget.
void add_device_keys(std::vector<ConfigKey>& k) {
  {
    const std::string type = "cpu or cuda:N (N >= 0; cuda = cuda:0)";
    k.push_back({"training.device", type, "device for training and evaluation", "cpu",
                 OnResume::Free,
                 [type](Config& c, const std::string& v) {
                   try {
                     c.training.device = lcm::parse_device(v);
                   } catch (const std::invalid_argument&) {
                     bad_value("training.device", type, v);
                   }
                 },
                 [](const Config& c) { return c.training.device.str(); }});
  }
  k.push_back(
      bool_key("training.tf32", "false",
               "CUDA only: allow TF32 tensor cores in the float GEMMs (cuBLAS); false = full FP32",
               LCM_FIELD(training.tf32)));
  k.push_back({"training.gpu_memory_budget",
               "a fraction in (0, 1] of free device memory, 0, or bytes with a unit such as 512MiB "
               "or 8GiB (a bare "
               "number > 1 is an error)",
               "CUDA only: device memory for the cached batches' model inputs (the rest are "
               "streamed); ignored on cpu",
               "0.5", OnResume::Free,
               [](Config& c, const std::string& v) {
                 c.training.gpu_memory_budget = parse_memory_budget(v);
               },
               [](const Config& c) { return c.training.gpu_memory_budget.text; }});
  k.push_back({"training.host_memory_budget",
               "bytes with a unit such as 4GiB or 512MiB, 0, or a fraction in (0, 1] of the "
               "physical memory",
               "host memory for the training data: the compact data of every program, then the "
               "expanded schedule rows of the training then validation programs while they fit; "
               "the others' rows are rebuilt at batch time (same results). The model and one "
               "batch's working memory come on top (about 0.5 GB at the release sizes)",
               "3GiB", OnResume::Free,
               [](Config& c, const std::string& v) {
                 c.training.host_memory_budget =
                     parse_memory_budget(v, "training.host_memory_budget");
               },
               [](const Config& c) { return c.training.host_memory_budget.text; }});
}

/// The rows of training.*: learning rate, epochs, seed, optimizer, threads.
void add_optimisation_keys(std::vector<ConfigKey>& k) {
  k.push_back(warn(double_key("training.lr", "0.001", 0.0, true,
                              "maximum learning rate (model-spec §6)", LCM_FIELD(training.lr))));
  k.push_back(warn(
      int_key("training.max_epochs", "30", 1,
              "number of epochs (with early stopping: docs/accuracy.md; reference release 1000)",
              LCM_FIELD(training.max_epochs))));
  k.push_back(u64_key("training.seed", "42", "seed of parameter initialisation and dropout",
                      LCM_FIELD(training.seed)));
  k.push_back(refuse(enum_key("training.optimizer", "adamw", "optimizer (reference: adamw)",
                              LCM_FIELD(training.optimizer))));
  k.push_back(warn(double_key("training.weight_decay", "0.015", 0.0, false,
                              "decoupled weight decay (AdamW)", LCM_FIELD(training.weight_decay))));
  k.push_back(int_key("training.threads", "0", 0, lcm::kMaxThreads,
                      "CPU threads of the engine; 0 = all hardware threads (more than the "
                      "machine's cores: a warning, and slower)",
                      LCM_FIELD(training.threads)));
}

/// The rows of eval.*: what lcm-eval and lcm-predict load and score.
void add_eval_keys(std::vector<ConfigKey>& k) {
  k.push_back(string_key("eval.weights_path", "",
                         "cost-model checkpoint that lcm-eval / lcm-predict load (\"\" = not set)",
                         LCM_FIELD(eval.weights_path)));
  k.push_back(string_key(
      "eval.input_file", "",
      "programs that lcm-eval / lcm-predict score (LOOPerSet file); \"\" = data.valid_file",
      LCM_FIELD(eval.input_file)));
  k.push_back(bool_key("eval.calibrated", "true",
                       "apply the checkpoint's calibration map (lcm.calibration, fitted by "
                       "lcm-train on its training split) to predicted speedups; false = the "
                       "model's raw outputs",
                       LCM_FIELD(eval.calibrated)));
}

/// The rows of training.lr_schedule, clipping and warm-up.
void add_schedule_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      warn(enum_key("training.lr_schedule", "warmup_cosine",
                    "LR schedule: constant; one_cycle_per_epoch = reference OneCycleLR stepped "
                    "once per epoch (model-spec §6, Q1); one_cycle_per_batch; warmup_cosine; "
                    "reduce_on_plateau = training.lr times training.plateau_factor each time "
                    "training.select_metric has not improved on validation for "
                    "training.plateau_patience epochs",
                    LCM_FIELD(training.lr_schedule))));
  k.push_back(warn(double_key("training.clip_grad_norm", "1", 0.0, false,
                              "clip the gradients' global 2-norm to this value; 0 = off",
                              LCM_FIELD(training.clip_grad_norm))));
  k.push_back(
      warn(double_key("training.warmup_pct", "0.1", 0.0, false,
                      "warmup_cosine: warm-up length as a fraction of all batch steps (< 1)",
                      LCM_FIELD(training.warmup_pct), 1.0)));
  k.push_back(warn(double_key("training.plateau_factor", "0.5", 0.0, true,
                              "reduce_on_plateau: the LR is multiplied by this factor (< 1) on "
                              "each plateau",
                              LCM_FIELD(training.plateau_factor), 1.0)));
  k.push_back(warn(int_key("training.plateau_patience", "2", 1,
                           "reduce_on_plateau: epochs without a better validation "
                           "training.select_metric before the LR is reduced",
                           LCM_FIELD(training.plateau_patience))));
}

/// The rows of model.*: the cost model sizes (docs/model-spec.md §5.1).
void add_model_size_keys(std::vector<ConfigKey>& k) {
  k.push_back(refuse(
      number_list_key<int>("model.comp_embed_layer_sizes", "600,350,200,180",
                           "computation-MLP widths, comma-separated, >= 2 entries; the last is the "
                           "embedding size (model-spec §5.1)",
                           LCM_FIELD(model.comp_embed_layer_sizes))));
  k.push_back(refuse(number_list_key<double>(
      "model.drops", "0.05,0.05,0.05,0.05,0.05",
      "dropout probabilities, comma-separated, one per computation-MLP layer "
      "(and >= 2)",
      LCM_FIELD(model.drops))));
  k.push_back(refuse(int_key("model.lstm_embedding_size", "100", 1,
                             "hidden size per direction of the transformation-tag BiLSTM",
                             LCM_FIELD(model.lstm_embedding_size))));
  k.push_back(
      refuse(int_key("model.expr_embed_size", "100", 1, "hidden size of the expression LSTM",
                     LCM_FIELD(model.expr_embed_size))));
}

/// The rows of the pre-trained encoder (model-spec §8) and pretrain.*.
void add_pretraining_keys(std::vector<ConfigKey>& k) {
  using lcm::model::EncoderKind;
  k.push_back(
      refuse(enum_key("model.encoder", "none",
                      "pre-trained encoder of the computation vectors (model-spec §8): none = the "
                      "§5 model; needs model.encoder_weights",
                      LCM_FIELD(model.encoder))));
  k.push_back(
      string_key("model.encoder_weights", "",
                 "autoencoder checkpoint for model.encoder (lcm-pretrain's best_autoencoder_"
                 "<name>.safetensors or the published access-matrix file)",
                 LCM_FIELD(model.encoder_weights)));
  k.push_back(
      int_key("training.fine_tune_epoch", "120", 0,
              "epoch (0-based) from which the pre-trained encoder is unfrozen and fine-tuned "
              "(model-spec §8; reference 120); >= max_epochs keeps it frozen",
              LCM_FIELD(training.fine_tune_epoch)));
  k.push_back(double_key("training.fine_tune_lr", "0.0002", 0.0, true,
                         "learning rate of the encoder's own optimizer while fine-tuning "
                         "(model-spec §8; reference 2e-4)",
                         LCM_FIELD(training.fine_tune_lr)));
  k.push_back(enum_key(
      "pretrain.kind", "comp_vector", "lcm-pretrain: which autoencoder (model-spec §8.1 / §8.2)",
      LCM_FIELD(pretrain.kind), {EncoderKind::CompVector, EncoderKind::AccessMatrix}));
  k.push_back(
      {"pretrain.files", "a comma-separated list of files (\"[a,b]\" accepted)",
       "lcm-pretrain: LOOPerSet files, comma-separated (\"[a,b]\" accepted); labels are not used",
       "", OnResume::Free,
       [](Config& c, const std::string& v) {
         std::vector<std::string> files;
         for (std::string& f : split_list(v))
           if (!f.empty()) files.push_back(std::move(f));
         c.pretrain.files = std::move(files);
       },
       [](const Config& c) {
         std::string s;
         for (const auto& f : c.pretrain.files) s += (s.empty() ? "" : ",") + f;
         return s;
       },
       true});
  k.push_back(int_key("pretrain.epochs", "50", 1, "lcm-pretrain: epochs (reference 200 / 700)",
                      LCM_FIELD(pretrain.epochs)));
  k.push_back(int_key("pretrain.batch_size", "256", 1,
                      "lcm-pretrain: samples per batch (reference 256)",
                      LCM_FIELD(pretrain.batch_size)));
  k.push_back(double_key("pretrain.lr", "0.0001", 0.0, true,
                         "lcm-pretrain: Adam learning rate (reference 1e-4)",
                         LCM_FIELD(pretrain.lr)));
  k.push_back(double_key("pretrain.valid_fraction", "0.1", 0.0, false,
                         "lcm-pretrain: share of programs held out for validation (< 1)",
                         LCM_FIELD(pretrain.valid_fraction), 1.0));
  k.push_back(
      int_key("pretrain.max_samples", "0", 0,
              "lcm-pretrain: at most this many training samples per epoch (seeded pick); 0 = all",
              LCM_FIELD(pretrain.max_samples)));
}

/// The rows of the ranking objective, input scaling, early stopping (docs/accuracy.md) and the
/// preset.
void add_ranking_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      refuse(objective_key("training.loss", "log_huber+pairwise",
                           "training objective, a sum of terms: mape = reference (model-spec §6, "
                           "output a speedup); the others train the output as ln(speedup): "
                           "log_mse / log_l1 / log_huber on ln speedups (log_huber: delta "
                           "training.huber_delta), ranking losses over the schedules of the same "
                           "program in a batch: pairwise (RankNet logistic), listnet (softmax "
                           "cross-entropy per program), lambdarank (pairwise weighted by |delta "
                           "nDCG|), or a sum 'pointwise+ranking' (ranking term x "
                           "training.rank_weight); or a list 'term:weight,...' of at most one "
                           "pointwise and one ranking term (e.g. log_mse:1,listnet:0.2)",
                           LCM_FIELD(training.loss))));
  k.push_back(
      refuse(double_key("training.rank_weight", "1", 0.0, false,
                        "weight of the ranking term of a 'log_*+<ranking>' training.loss (the "
                        "list form writes its weights out)",
                        LCM_FIELD(training.rank_weight))));
  // bounded: a delta far below float resolution or far above any ln speedup is a typo, and
  // would only fail later, inside the loss, without naming the key
  k.push_back(refuse(double_key("training.huber_delta", "0.5", 1e-6, false,
                                "log_huber: the Huber loss's delta on ln speedups (quadratic "
                                "within +-delta, linear beyond)",
                                LCM_FIELD(training.huber_delta), 1e6)));
  k.push_back(int_key("training.early_stop_patience", "5", 0,
                      "stop when training.select_metric has not improved on validation for this "
                      "many epochs; 0 = off (reference)",
                      LCM_FIELD(training.early_stop_patience)));
  k.push_back(int_key("training.early_stop_from_epoch", "10", 1,
                      "the first epoch (1-based) whose lack of improvement counts towards "
                      "training.early_stop_patience; earlier epochs still choose the best "
                      "checkpoint. Keeps a run from stopping in the slow first phase of training "
                      "(docs/accuracy.md); 1 = count from the start (reference)",
                      LCM_FIELD(training.early_stop_from_epoch)));
  k.push_back(enum_key("training.select_metric", "spearman",
                       "validation metric choosing the best checkpoint and driving early stopping: "
                       "mape = reference (datapoint-weighted MAPE, lower is better); spearman / "
                       "ndcg = per-program mean (model-spec §7, higher is better)",
                       LCM_FIELD(training.select_metric)));
  k.push_back(bool_key("training.log_train_metrics", "false",
                       "also predict the training split in eval mode after each epoch and log its "
                       "per-program Spearman / nDCG (train-vs-validation curves; costs ~1/3 epoch)",
                       LCM_FIELD(training.log_train_metrics)));
  k.push_back(int_key("training.ensemble", "1", 1, 64,
                      "train K models (seeds training.seed .. +K-1, runs <name>_m1.._mK) and "
                      "write their best checkpoints as one ensemble (scores averaged in ln-speedup "
                      "space) to best_model_<name>; 1 = one model",
                      LCM_FIELD(training.ensemble)));
  k.push_back(bool_key("training.calibrate", "true",
                       "at the end of training, fit the monotone calibration map minimising the "
                       "squared ln-speedup error "
                       "(score -> reported speedup; per-program rankings unchanged) of the best "
                       "checkpoint on the training split and store it there (lcm.calibration, "
                       "docs/accuracy.md); false = report the model's raw outputs (reference)",
                       LCM_FIELD(training.calibrate)));
  k.push_back(enum_key("training.calibration_weighting", "program",
                       "how the calibration map's fit weighs datapoints: program = every program "
                       "alike (as the per-program means of model-spec §7.4 that lcm-eval "
                       "reports; each datapoint weighted 1 / its program's datapoints); "
                       "datapoint = every datapoint alike, where programs with many schedules "
                       "dominate",
                       LCM_FIELD(training.calibration_weighting)));
  k.push_back(int_key("training.calibration_folds", "0", 0, 20,
                      "fit the calibration map on out-of-fold predictions of the training split: "
                      "K >= 2 fold models (runs <name>_fold1.._foldK, each trained without one "
                      "fold of the training programs, ~K-1 extra trainings) predict the programs "
                      "they did not see; 0 = fit it on the model's own (in-sample, over-confident) "
                      "predictions of its training split; 1 is refused (docs/accuracy.md)",
                      LCM_FIELD(training.calibration_folds)));
  k.push_back(
      refuse(enum_key("model.input_scaling", "log_standardize",
                      "feature scaling of computation/loop vectors: none = reference; log = "
                      "sign*log10 for |x| >= 10 (model-spec §3.10); standardize = per-column "
                      "(x - mean) / std fitted on the training split; log_standardize = both; "
                      "stored in the checkpoint and reapplied by lcm-eval / lcm-predict",
                      LCM_FIELD(model.input_scaling))));
  k.push_back(refuse(bool_key(
      "model.relative_to_identity", "false",
      "predict ln(speedup) relative to the program's own untransformed schedule: f(schedule) - "
      "f(untransformed), so the untransformed program predicts exactly 1x (needs a loss other "
      "than mape; docs/accuracy.md)",
      LCM_FIELD(model.relative_to_identity))));
  {
    ConfigKey preset = enum_key(
        "model.preset", "none",
        "none: use the keys as given; reference: at this point set the faithful behaviour "
        "(training.loss=mape, lr_schedule=constant, lr=0.001, adamw, weight_decay=0.015, no "
        "clipping, no early stopping, select_metric=mape, calibrate=false, calibration_folds=0, "
        "input_scaling=none, "
        "relative_to_identity=false, drops 0.05, "
        "data.min_functions_per_footprint=2, data.batching=per_footprint); "
        "keys given after it still override",
        LCM_FIELD(model.preset));
    auto set_name = preset.set;
    preset.set = [set_name](Config& c, const std::string& v) {
      set_name(c, v);  // validates
      if (c.model.preset == Preset::Reference) apply_reference_preset(c);
    };
    k.push_back(refuse(std::move(preset)));
  }
}

/// Every row, in display order.
std::vector<ConfigKey> make_keys() {
  std::vector<ConfigKey> k;
  add_experiment_keys(k);
  add_data_keys(k);
  add_device_keys(k);
  add_optimisation_keys(k);
  add_eval_keys(k);
  add_schedule_keys(k);
  add_model_size_keys(k);
  add_pretraining_keys(k);
  add_ranking_keys(k);
  return k;
}

#undef LCM_FIELD

}  // namespace

void apply_reference_preset(Config& c) {
  auto& t = c.training;
  t.loss = parse_objective("mape");
  t.lr_schedule = LrScheduleKind::Constant;
  t.lr = 0.001;
  t.optimizer = OptimizerKind::AdamW;
  t.weight_decay = 0.015;
  t.clip_grad_norm = 0;
  t.warmup_pct = 0.1;
  t.rank_weight = 1.0;
  t.early_stop_patience = 0;
  t.early_stop_from_epoch = 1;
  t.select_metric = SelectMetric::Mape;
  t.calibrate = false;
  t.calibration_folds = 0;
  c.model.input_scaling = ScalingMode::None;
  c.model.relative_to_identity = false;
  c.model.drops = {0.05, 0.05, 0.05, 0.05, 0.05};
  c.data.min_functions_per_footprint = 2;
  c.data.batching = lcm::data::BatchingMode::PerFootprint;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

std::vector<std::string> keys_on_resume(OnResume p) {
  std::vector<std::string> out;
  for (const auto& k : config_keys())
    if (k.on_resume == p) out.push_back(k.key);
  return out;
}

Config::Config() {
  for (const auto& k : config_keys()) k.set(*this, k.default_value);
}

const std::string& Config::eval_input() const {
  return eval.input_file.empty() ? data.valid_file : eval.input_file;
}

const char* Config::eval_input_key() const {
  return eval.input_file.empty() ? "data.valid_file" : "eval.input_file";
}

lcm::data::FeatureOptions feature_options(const DataConfig& d) {
  lcm::data::FeatureOptions o;
  o.loop_zeroing = d.loop_zeroing;
  o.shift_match = d.shift_match;
  return o;
}

}  // namespace lcm::config
