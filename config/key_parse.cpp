// The value parsers of the key table (config/key_rows.hpp): numbers, booleans and lists, with
// messages that name the key, the expected type and why a value is refused.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <sstream>

#include "config/key_rows.hpp"

namespace lcm::config::key_rows {

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

[[noreturn]] void bad_value(const std::string& key, const std::string& expected,
                            const std::string& got, const std::string& why) {
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
ConfigKey features(ConfigKey k) {
  k.changes_features = true;
  return k;
}

bool is_plain_name(const std::string& v) {
  // it becomes part of file names under base_path: no '/', no "..", not empty
  bool ok = !v.empty() && v[0] != '.';
  for (char ch : v)
    ok =
        ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
  return ok;
}

}  // namespace lcm::config::key_rows
