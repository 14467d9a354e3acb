// The converters of the program-record reader (json_fields.hpp): JSON values to lcm's types with
// their bad_field messages, values and names as messages show them, and the repeated-key scan.
#include "data/json_fields.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/name_table.hpp"

namespace lcm::data::json_detail {

const char* type_name(const Value& v) {
  static constexpr NameRow<rapidjson::Type> kNames[] = {
      {rapidjson::kNullType, "null"},      {rapidjson::kFalseType, "a boolean"},
      {rapidjson::kTrueType, "a boolean"}, {rapidjson::kObjectType, "an object"},
      {rapidjson::kArrayType, "an array"}, {rapidjson::kStringType, "a string"},
      {rapidjson::kNumberType, "a number"}};
  return name_of(kNames, v.GetType(), "?");
}

/// `s` as plain text for messages: printable ASCII as it is, every other byte as \\xNN (so an
/// invalid UTF-8 or NUL byte never reaches a log or output file), at most `max` bytes ("..."
/// after).
std::string escape_text(const char* s, size_t n, size_t max) {
  std::string out;
  const size_t m = std::min(n, max);
  for (size_t i = 0; i < m; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      out += buf;
    }
  }
  if (n > max) out += "...";
  return out;
}

namespace {

/// True when the member names `a` and `b` are the same bytes.
bool same_name(const Value& a, const Value& b) {
  return a.GetStringLength() == b.GetStringLength() &&
         std::memcmp(a.GetString(), b.GetString(), a.GetStringLength()) == 0;
}

/// The index of a member of `obj` whose name an earlier member already has, or -1. Objects of up
/// to 16 members (nearly all of a record) are scanned pairwise; larger ones are sorted by name.
int64_t duplicate_member(const Value& obj, std::vector<uint32_t>& order) {
  const rapidjson::SizeType n = obj.MemberCount();
  if (n < 2) return -1;
  const auto b = obj.MemberBegin();
  if (n <= 16) {
    for (rapidjson::SizeType i = 1; i < n; ++i)
      for (rapidjson::SizeType j = 0; j < i; ++j)
        if (same_name(b[i].name, b[j].name)) return int64_t(i);
    return -1;
  }
  order.resize(n);
  for (rapidjson::SizeType i = 0; i < n; ++i) order[i] = i;
  auto less = [&](uint32_t x, uint32_t y) {
    const Value& a = b[x].name;
    const Value& c = b[y].name;
    const size_t la = a.GetStringLength(), lc = c.GetStringLength();
    const int r = std::memcmp(a.GetString(), c.GetString(), std::min(la, lc));
    return r != 0 ? r < 0 : la != lc ? la < lc : x < y;
  };
  std::sort(order.begin(), order.end(), less);
  for (size_t i = 1; i < order.size(); ++i)
    if (same_name(b[order[i - 1]].name, b[order[i]].name)) return int64_t(order[i]);
  return -1;
}

/// The path of the first member (depth first) whose name repeats another member of the same
/// object, e.g. ".schedules_list[3].comp00", or "" when every object's names are distinct. An
/// explicit stack: any nesting is safe. Slower than has_duplicate_key (it tracks the path).
std::string duplicate_key_path(const Value& root) {
  struct Frame {
    const Value* v;
    rapidjson::SizeType next;  // the child to visit next
  };
  thread_local std::vector<Frame> stack;
  thread_local std::vector<uint32_t> order;
  stack.clear();
  auto path_to = [&](const Value& obj, int64_t member) {
    std::string path;
    for (const Frame& f : stack) {
      const rapidjson::SizeType i = f.next - 1;
      if (f.v->IsObject()) {
        const Value& k = f.v->MemberBegin()[i].name;
        path += "." + escape_text(k.GetString(), k.GetStringLength(), 60);
      } else {
        path += "[" + std::to_string(i) + "]";
      }
    }
    const Value& k = obj.MemberBegin()[rapidjson::SizeType(member)].name;
    return abbreviate_path(path + "." + escape_text(k.GetString(), k.GetStringLength(), 60));
  };
  if (!root.IsObject() && !root.IsArray()) return "";
  if (root.IsObject())
    if (int64_t d = duplicate_member(root, order); d >= 0) return path_to(root, d);
  stack.push_back({&root, 0});
  while (!stack.empty()) {
    Frame& f = stack.back();
    const bool obj = f.v->IsObject();
    if (f.next >= (obj ? f.v->MemberCount() : f.v->Size())) {
      stack.pop_back();
      continue;
    }
    const Value& child = obj ? f.v->MemberBegin()[f.next].value : (*f.v)[f.next];
    ++f.next;
    if (child.IsObject()) {
      if (int64_t d = duplicate_member(child, order); d >= 0) return path_to(child, d);
      if (!child.ObjectEmpty()) stack.push_back({&child, 0});
    } else if (child.IsArray() && !child.Empty()) {
      stack.push_back({&child, 0});
    }
  }
  return "";
}

/// True when some object anywhere under `root` repeats a member name. An explicit stack of
/// containers (arrays of numbers are scanned in place): any nesting is safe, and it costs a few
/// percent of the parse.
bool has_duplicate_key(const Value& root) {
  thread_local std::vector<const Value*> todo;
  thread_local std::vector<uint32_t> order;
  todo.clear();
  todo.push_back(&root);
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (v->IsObject()) {
      if (duplicate_member(*v, order) >= 0) return true;
      for (auto m = v->MemberBegin(); m != v->MemberEnd(); ++m)
        if (m->value.IsObject() || m->value.IsArray()) todo.push_back(&m->value);
    } else if (v->IsArray()) {
      for (auto e = v->Begin(); e != v->End(); ++e)
        if (e->IsObject() || e->IsArray()) todo.push_back(&*e);
    }
  }
  return false;
}

/// Trimmed decimal numeric-string parsers over the whole JSON string [s, s + n); false when the
/// text is not entirely a decimal number: a NUL byte inside ("4\u0000x", which strtod would stop
/// at) and C's hexadecimal forms ("0x10", "0x1p-12", which Python's float() refuses) are refused.
bool plain_number_text(const char* s, size_t n) {
  if (std::memchr(s, '\0', n)) return false;
  for (size_t i = 0; i < n; ++i)
    if (s[i] == 'x' || s[i] == 'X') return false;
  return true;
}
bool parse_int_text(const char* s, size_t n, int64_t& out) {
  if (!plain_number_text(s, n)) return false;
  while (*s == ' ' || *s == '\t') ++s;
  if (!*s) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s, &end, 10);
  if (errno == 0 && end != s) {
    while (*end == ' ' || *end == '\t') ++end;
    if (!*end) {
      out = x;
      return true;
    }
  }
  char* e2 = nullptr;
  double d = std::strtod(s, &e2);  // "4.0" → 4
  if (e2 == s) return false;
  while (*e2 == ' ' || *e2 == '\t') ++e2;
  if (!*e2 && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
    out = int64_t(d);
    return true;
  }
  return false;
}

}  // namespace

std::string first_duplicate_key(const Value& root) {
  return has_duplicate_key(root) ? duplicate_key_path(root) : std::string();
}

/// A value as a message shows it: a string quoted (bytes escaped, at most 40), a number by its
/// value ("5.5", "1.18059162071741e+21"), anything else by its type ("an object").
std::string show(const Value& v) {
  if (v.IsString()) return "\"" + escape_text(v.GetString(), v.GetStringLength(), 40) + "\"";
  if (v.IsNumber()) {
    char buf[64];
    if (v.IsInt64())
      std::snprintf(buf, sizeof buf, "%lld", (long long)v.GetInt64());
    else if (v.IsUint64())
      std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)v.GetUint64());
    else
      std::snprintf(buf, sizeof buf, "%.15g", v.GetDouble());
    return buf;
  }
  return type_name(v);
}

std::string member_names(const Value& obj) {
  std::string names;
  for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m)
    names += (names.empty() ? "" : ", ") +
             escape_text(m->name.GetString(), m->name.GetStringLength(), 40);
  return names;
}

std::string name_problem(const char* s, size_t n) {
  if (n == 0) return "empty name";
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  auto at = [&](const char* what, size_t i) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s \\x%02x at byte %zu", what, unsigned(u[i]), i);
    return std::string(buf);
  };
  for (size_t i = 0; i < n;) {
    const unsigned c = u[i];
    if (c < 0x20) return at("control character", i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return at("invalid UTF-8 byte", i);
    }
    if (i + len > n) return at("UTF-8 sequence cut short at byte", i);
    for (size_t k = 1; k < len; ++k) {
      const unsigned b = u[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
        return at("invalid UTF-8 byte", i + k);
    }
    i += len;
  }
  return "";
}

std::string abbreviate_path(const std::string& path) {
  std::vector<std::string> seg;  // each with its leading '.', except the first
  for (size_t i = 0; i < path.size();) {
    size_t j = i + 1;
    while (j < path.size() && path[j] != '.' && path[j] != '[') ++j;
    if (j < path.size() && path[j] == '[') {  // keep "name[3]" together
      while (j < path.size() && path[j] != ']') ++j;
      if (j < path.size()) ++j;
    }
    seg.push_back(path.substr(i, j - i));
    i = j;
  }
  std::string out;
  for (size_t i = 0; i < seg.size();) {
    size_t j = i;
    while (j < seg.size() && seg[j] == seg[i]) ++j;
    // ".children[0]" and "children[0]" are the same segment at the start of a run
    out += seg[i];
    if (j - i >= 3)
      out += "\u00d7" + std::to_string(j - i);
    else
      for (size_t k = i + 1; k < j; ++k) out += seg[k];
    i = j;
  }
  return out;
}

bool parse_double_text(const char* s, size_t n, double& out) {
  if (!plain_number_text(s, n)) return false;
  while (*s == ' ' || *s == '\t') ++s;
  if (!*s) return false;
  char* end = nullptr;
  double d = std::strtod(s, &end);
  if (end == s) return false;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end) return false;
  out = d;
  return true;
}

/// An integer, an integral double, or a numeric string ("4", " 30 ").
int64_t as_int(const Value& v, const char* field) {
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsNumber()) {
    double d = v.GetDouble();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return int64_t(d);
  } else if (v.IsString()) {
    int64_t x;
    if (parse_int_text(v.GetString(), v.GetStringLength(), x)) return x;
  }
  fail("bad_field", field, std::string("expected an integer, got ") + show(v));
}
int as_int32(const Value& v, const char* field) {
  int64_t x = as_int(v, field);
  if (x < INT32_MIN || x > INT32_MAX)
    fail("bad_field", field, "integer " + std::to_string(x) + " out of the 32-bit range");
  return int(x);
}
bool as_bool(const Value& v, const char* field) {
  if (v.IsBool()) return v.GetBool();
  if (v.IsInt64() && (v.GetInt64() == 0 || v.GetInt64() == 1)) return v.GetInt64() == 1;
  if (v.IsString()) {  // the whole string: "true\u0000x" is not a boolean
    const std::string t(v.GetString(), v.GetStringLength());
    if (t == "true" || t == "True") return true;
    if (t == "false" || t == "False") return false;
  }
  fail("bad_field", field, std::string("expected a boolean, got ") + show(v));
}
std::string as_string(const Value& v, const char* field) {
  if (!v.IsString()) fail("bad_field", field, std::string("expected a string, got ") + show(v));
  return std::string(v.GetString(), v.GetStringLength());
}
/// null → "", string → itself.
std::string as_name_or_empty(const Value& v, const char* field) {
  if (v.IsNull()) return std::string();
  return as_string(v, field);
}
/// A loop bound: integer → decimal text; string → as written (trimmed).
std::string as_bound(const Value& v, const char* field) {
  if (v.IsString()) {
    std::string s(v.GetString(), v.GetStringLength());
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    if (b == std::string::npos) fail("bad_field", field, "empty bound");
    if (s.find('\0') != std::string::npos)
      fail("bad_field", field, "bound " + show(v) + " holds a NUL byte");
    return s.substr(b, e - b + 1);
  }
  if (v.IsNumber()) return std::to_string(as_int(v, field));
  fail("bad_field", field,
       std::string("expected an integer or an expression string, got ") + show(v));
}
/// An array of strings; null → empty.
std::vector<std::string> as_string_list(const Value& v, const char* field) {
  std::vector<std::string> out;
  if (v.IsNull()) return out;
  if (!v.IsArray())
    fail("bad_field", field, std::string("expected an array of names, got ") + show(v));
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    if (!v[i].IsString())
      fail("bad_field", std::string(field) + "[" + std::to_string(i) + "]",
           std::string("expected a string, got ") + show(v[i]));
    out.emplace_back(v[i].GetString(), v[i].GetStringLength());
  }
  return out;
}
std::vector<std::string> optional_string_list(const Value& obj, const char* key) {
  const Value* v = find(obj, key);
  return v ? as_string_list(*v, key) : std::vector<std::string>();
}
const Value& require_object(const Value& obj, const char* key) {
  const Value& v = require(obj, key);
  if (!v.IsObject()) fail("bad_field", key, std::string("expected an object, got ") + show(v));
  return v;
}
const Value& require_array(const Value& obj, const char* key) {
  const Value& v = require(obj, key);
  if (!v.IsArray()) fail("bad_field", key, std::string("expected an array, got ") + show(v));
  return v;
}

}  // namespace lcm::data::json_detail
