// Parsing and resolving training.gpu_memory_budget (see memory_budget.hpp).
#include "config/memory_budget.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/error.hpp"
#include "util/name_table.hpp"

namespace lcm::config {

size_t MemoryBudget::resolve(size_t free_bytes) const {
  if (!is_fraction) return bytes;
  return size_t(std::floor(fraction * double(free_bytes)));
}

std::string MemoryBudget::str() const {
  char buf[64];
  if (is_fraction)
    std::snprintf(buf, sizeof buf, "%g of free memory", fraction);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  return buf;
}

MemoryBudget parse_memory_budget(const std::string& text, const std::string& key) {
  auto fail = [&](const std::string& why = "") -> MemoryBudget {
    throw ConfigError(
        key + ": " + why +
        "expected a fraction in (0, 1] of the device's free memory (e.g. 0.5), 0 (stream every "
        "batch) or bytes with a unit B|KiB|MiB|GiB|TiB|KB|MB|GB|TB (e.g. 512MiB, 8GiB), got '" +
        text + "'");
  };
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  if (*s == '\0' || *s == '-' || *s == '+') return fail();
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || !std::isfinite(v) || v < 0) return fail();
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  while (!unit.empty() && unit.back() == ' ') unit.pop_back();
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  // strtod also reads "inf", "nan" and hex: accept only a decimal number, digits with at most one
  // point, optionally followed by a decimal exponent ("5e-1", "1E9"), as training.lr does
  {
    const char* p = s;
    int digits = 0;
    while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p, ++digits;
    if (p < end && *p == '.') {
      ++p;
      while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p, ++digits;
    }
    if (digits == 0) return fail();
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      int exp_digits = 0;
      while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p, ++exp_digits;
      if (exp_digits == 0) return fail();
    }
    if (p != end) return fail();
  }
  MemoryBudget b;
  b.text = text;
  if (unit.empty()) {
    if (v > 0 && v <= 1) {  // "1" is the whole free memory, not one byte
      b.is_fraction = true;
      b.fraction = v;
      return b;
    }
    if (v == 0) {  // nothing placed: every batch streamed
      b.is_fraction = false;
      b.bytes = 0;
      return b;
    }
    // 1.5 without a unit: neither a fraction nor bytes; beyond 2^60 no hint helps
    if (v != std::floor(v) || v > double(size_t(1) << 60)) return fail();
    // a bare whole number > 1 ("2", "4096", "2.0", "1e9") was read as bytes: a trap when a
    // fraction or GiB was meant; the hint writes it as a whole number ("2.0" -> "2B")
    char number[32];
    std::snprintf(number, sizeof number, "%.0f", v);
    return fail(std::string("a number > 1 needs a unit (") + number + "B for bytes, " + number +
                "GiB, ...); ");
  }
  static constexpr NameRow<double> kUnitScales[] = {{1, "b"},
                                                    {double(size_t(1) << 10), "kib"},
                                                    {double(size_t(1) << 20), "mib"},
                                                    {double(size_t(1) << 30), "gib"},
                                                    {double(size_t(1) << 40), "tib"},
                                                    {1e3, "kb"},
                                                    {1e6, "mb"},
                                                    {1e9, "gb"},
                                                    {1e12, "tb"}};
  double scale = 0;
  if (!value_of(kUnitScales, unit, &scale)) return fail();
  // a count of bytes is whole: "1.5B" is an error, not 1 byte; larger units round down to whole
  // bytes ("0.1GiB" = 107374182 bytes)
  if (unit == "b" && v != std::floor(v))
    return fail("a byte count must be whole (" + std::string(s, static_cast<const char*>(end)) +
                " bytes); ");
  const double bytes = std::floor(v * scale);
  if (bytes > double(size_t(1) << 60)) return fail();
  b.is_fraction = false;
  b.bytes = size_t(bytes);
  return b;
}

}  // namespace lcm::config
