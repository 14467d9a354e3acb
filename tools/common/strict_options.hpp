// CLI11 checks of the numeric options of the tools that parse their own command line
// (lcm-inspect, lcm-synth): a value out of range is a usage error naming the range, never
// clamped or wrapped. CLI11 itself reads integers with strtoull/strtoll in base 0, so "-1" given
// to an unsigned option wraps to 2^64-1, "1e30" or 2^64 clamps, and "010" is octal 8; and
// CLI::Range lets NaN through.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

namespace lcm::tools {

/// Parses `text` as a decimal integer in [lo, hi]: optional '-', then digits only (no '+', no
/// base prefix, no exponent, no spaces). Returns "" and sets `value` when it is one, else the
/// reason ("expected an integer in [0, 1024], got '-1'"). Exact for every int64/uint64 bound.
template <typename T>
std::string parse_decimal_integer(const std::string& text, T lo, T hi, T& value) {
  static_assert(std::is_integral<T>::value, "an integer type");
  const std::string expected = "expected an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], got '" + text + "'";
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  if (i == text.size()) return expected;
  // the magnitude, refused past 2^64 - 1 before it can wrap
  uint64_t magnitude = 0;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch < '0' || ch > '9') return expected;
    const uint64_t d = uint64_t(ch - '0');
    if (magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return expected + " (out of range)";
    magnitude = magnitude * 10 + d;
  }
  if (negative && magnitude != 0) {
    if constexpr (std::is_signed<T>::value) {
      // -magnitude >= lo, counted in magnitudes (|INT64_MIN| does not fit an int64_t)
      const uint64_t lo_magnitude = lo < 0 ? uint64_t(-(int64_t(lo) + 1)) + 1 : 0;
      if (magnitude > lo_magnitude) return expected + " (out of range)";
      value = magnitude == lo_magnitude ? lo : T(-int64_t(magnitude));
      return value > hi ? expected + " (out of range)" : "";
    } else {
      return expected + " (out of range)";
    }
  }
  if constexpr (std::is_signed<T>::value) {
    if (hi < 0 || magnitude > uint64_t(hi) || (lo > 0 && magnitude < uint64_t(lo)))
      return expected + " (out of range)";
  } else {
    if (magnitude > uint64_t(hi) || magnitude < uint64_t(lo)) return expected + " (out of range)";
  }
  value = T(magnitude);
  return "";
}

/// A CLI11 transform that accepts a decimal integer in [lo, hi] (parse_decimal_integer) and
/// hands CLI11 its canonical decimal text ("007" → "7", which CLI11 would read as octal).
template <typename T>
CLI::Validator integer_in(T lo, T hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        T v{};
        const std::string why = parse_decimal_integer(text, lo, hi, v);
        if (why.empty()) text = std::to_string(v);
        return why;
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// `v` as "%g" prints it.
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// A CLI11 check that a number is finite and within [lo, hi] (CLI::Range lets NaN through).
inline CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(v) || v < lo || v > hi)
          return "expected a number in [" + number_text(lo) + ", " + number_text(hi) + "], got '" +
                 text + "'";
        return "";
      },
      "NUMBER in [" + number_text(lo) + ", " + number_text(hi) + "]");
}

}  // namespace lcm::tools
