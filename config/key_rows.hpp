// Internal to the key table's files (config/keys*.cpp, config/key_parse.cpp): the value parsers
// and the row builders that every key row of config_keys() is made with, and the functions that
// add each section's rows. Not part of the public API.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "config/config.hpp"

namespace lcm::config::key_rows {

/// 'text' (for messages).
std::string quote(const std::string& s);

/// Throws ConfigError "key: expected <expected>, got '<got>'" with " (why)" when why is given.
[[noreturn]] void bad_value(const std::string& key, const std::string& expected,
                            const std::string& got, const std::string& why = "");

/// Why `text`, refused as an integer, is not one when it is another number: "not a whole
/// number" (5.5), "out of range" (1e23, 2^70 written out), "written in floating-point notation;
/// write it as 1000" (1e3); "" when it is no number at all.
std::string why_not_integer(const std::string& text);

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

/// An integer in [lo, hi]; throws ConfigError naming `key` and `type` (and why_not_integer).
int64_t parse_int(const std::string& key, const std::string& text, int64_t lo, int64_t hi,
                  const std::string& type);
/// An unsigned 64-bit integer (no '-'); throws ConfigError naming `key` and `type`.
uint64_t parse_u64(const std::string& key, const std::string& text, const std::string& type);
/// A finite number >= lo (> lo when lo_open); throws ConfigError naming `key` and `type`.
double parse_double(const std::string& key, const std::string& text, double lo, bool lo_open,
                    const std::string& type);

/// "a boolean (true|yes|on|1 or false|no|off|0, any case)".
const std::string& bool_type();
/// One of bool_type()'s words, any case; throws ConfigError naming `key` otherwise.
bool parse_bool(const std::string& key, const std::string& text);

/// `v` with 10 significant digits (the text form of number keys).
std::string format_double(double v);

/// "a, b" / "[a,b]" / "'a', \"b\"" → {"a", "b"}: items split at commas, surrounding brackets,
/// quotes and spaces stripped; empty items are kept as "" (so that callers can refuse them).
std::vector<std::string> split_list(const std::string& text);

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

// Row builders: (key, field, default, ...). `F` is a callable Config& → reference to the field
// (see LCM_FIELD); LCM_KEY(path) gives both the key and the field.
#define LCM_FIELD(path)     \
  [](Config & c) -> auto& { \
    return c.path;          \
  }

// The first two arguments of a row builder: the key's name and its field, from one path (the
// key experiment.base_path is the field Config::experiment.base_path).
#define LCM_KEY(path) #path, LCM_FIELD(path)

template <class F>
auto& field_of(const F& field, const Config& c) {
  return field(const_cast<Config&>(c));
}

template <class F>
ConfigKey string_key(std::string key, F field, std::string def, std::string doc) {
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
ConfigKey int_key(std::string key, F field, std::string def, int64_t lo, int64_t hi,
                  std::string doc) {
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
ConfigKey int_key(std::string key, F field, std::string def, int64_t lo, std::string doc) {
  using T = std::decay_t<decltype(field(std::declval<Config&>()))>;
  return int_key(std::move(key), field, std::move(def), lo, int64_t(std::numeric_limits<T>::max()),
                 std::move(doc));
}

template <class F>
ConfigKey u64_key(std::string key, F field, std::string def, std::string doc) {
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
ConfigKey double_key(std::string key, F field, std::string def, double lo, bool lo_open,
                     std::string doc, double hi = INFINITY) {
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
ConfigKey bool_key(std::string key, F field, std::string def, std::string doc) {
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
ConfigKey enum_key(std::string key, F field, std::string def, std::string doc,
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
ConfigKey objective_key(std::string key, F field, std::string def, std::string doc) {
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
ConfigKey number_list_key(std::string key, F field, std::string def, std::string doc) {
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

/// `k` with its --resume policy set to `p` (refuse: OnResume::Refuse, warn: OnResume::Warn).
ConfigKey with_resume(ConfigKey k, OnResume p);
ConfigKey refuse(ConfigKey k);
ConfigKey warn(ConfigKey k);
/// `k` marked as changing features (ConfigKey::changes_features).
ConfigKey features(ConfigKey k);

/// Whether `v` can be part of a file name under base_path: letters, digits, '.', '_', '-', not
/// empty, not starting with '.'.
bool is_plain_name(const std::string& v);

/// Each section's rows, appended to `k` in display order (config/keys_data.cpp,
/// config/keys_training.cpp, config/keys_model.cpp).
void add_experiment_keys(std::vector<ConfigKey>& k);
void add_data_keys(std::vector<ConfigKey>& k);
void add_data_feature_keys(std::vector<ConfigKey>& k);
void add_device_keys(std::vector<ConfigKey>& k);
void add_optimisation_keys(std::vector<ConfigKey>& k);
void add_eval_keys(std::vector<ConfigKey>& k);
void add_schedule_keys(std::vector<ConfigKey>& k);
void add_model_size_keys(std::vector<ConfigKey>& k);
void add_pretraining_keys(std::vector<ConfigKey>& k);
void add_objective_keys(std::vector<ConfigKey>& k);
void add_selection_keys(std::vector<ConfigKey>& k);
void add_calibration_keys(std::vector<ConfigKey>& k);
void add_output_keys(std::vector<ConfigKey>& k);

}  // namespace lcm::config::key_rows
