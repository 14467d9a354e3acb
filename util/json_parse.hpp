// Parsing the JSON lcm reads back from its own files (safetensors headers and their metadata
// values) without recursion: rapidjson's iterative parser, and a nesting limit checked before
// parsing, so that a hostile "[[[[..." 200,000 deep is one clear error, not a stack overflow in
// the parser or in whatever walks the parsed value (Accept, a writer) afterwards.
#pragma once
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lcm {

/// The deepest nesting of arrays and objects accepted (the top-level value is depth 1). lcm's
/// own metadata nests at most 3 deep; 64 leaves room for anything legitimate.
constexpr int kMaxJsonDepth = 64;

/// The offset of the first '[' or '{' of `text[0, n)` that opens nesting level `max_depth` + 1,
/// or n when the text never nests deeper than `max_depth` (strings and their escapes skipped; a
/// malformed text is left to the parser). O(n), no recursion.
inline size_t json_too_deep_at(const char* text, size_t n, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth) return i;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return n;
}

/// The first key that some object of `v` (at any depth) holds twice, or "" when none does.
/// rapidjson keeps both members and lookups find the first, so a file with a key twice would be
/// read silently one way; lcm refuses it instead. Iterative (an explicit stack), O(m log m) per
/// object of m members.
inline std::string json_duplicate_key(const rapidjson::Value& v) {
  std::vector<const rapidjson::Value*> todo{&v};
  std::vector<std::string_view> names;
  while (!todo.empty()) {
    const rapidjson::Value* x = todo.back();
    todo.pop_back();
    if (x->IsArray()) {
      for (const auto& e : x->GetArray()) todo.push_back(&e);
    } else if (x->IsObject()) {
      names.clear();
      for (auto m = x->MemberBegin(); m != x->MemberEnd(); ++m) {
        names.emplace_back(m->name.GetString(), m->name.GetStringLength());
        todo.push_back(&m->value);
      }
      std::sort(names.begin(), names.end());
      const auto dup = std::adjacent_find(names.begin(), names.end());
      if (dup != names.end()) return std::string(*dup);
    }
  }
  return "";
}

/// Parses `text[0, n)` into `d` with rapidjson's iterative parser (kParseIterativeFlag, plus
/// `Flags`, e.g. kParseFullPrecisionFlag) after refusing nesting deeper than kMaxJsonDepth.
/// Returns "" on success, else the one-line reason, phrased to follow "bad <what> JSON ":
/// "nested deeper than 64 levels (at offset N)", "at offset N: <rapidjson's message>" or
/// "with duplicate key \"K\"" (an object holding key K twice; json_duplicate_key) (then `d`
/// holds no usable value). Never throws (but std::bad_alloc).
template <unsigned Flags = rapidjson::kParseDefaultFlags>
std::string parse_json_bounded(rapidjson::Document& d, const char* text, size_t n) {
  const size_t deep = json_too_deep_at(text, n, kMaxJsonDepth);
  if (deep < n) {
    d.SetNull();
    return "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at offset " +
           std::to_string(deep) + ")";
  }
  d.Parse<Flags | rapidjson::kParseIterativeFlag>(text, n);
  if (d.HasParseError())
    return "at offset " + std::to_string(d.GetErrorOffset()) + ": " +
           rapidjson::GetParseError_En(d.GetParseError());
  const std::string twice = json_duplicate_key(d);
  if (!twice.empty()) {
    d.SetNull();
    return "with duplicate key \"" + twice + "\"";
  }
  return "";
}

/// parse_json_bounded of a whole string.
template <unsigned Flags = rapidjson::kParseDefaultFlags>
std::string parse_json_bounded(rapidjson::Document& d, const std::string& text) {
  return parse_json_bounded<Flags>(d, text.data(), text.size());
}

}  // namespace lcm
