// parse_program (reader.hpp): one raw record's JSON text → data::Program through RapidJSON's
// DOM, every malformed field a counted, named skip or a Schedule::parse_problem; the expression
// types a computation may hold; read_all_programs (RecordSource + parse_program).
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "data/reader.hpp"
#include "data/record_fields.hpp"
#include "data/schedule_lines.hpp"
#include "data/transformations.hpp"

namespace lcm::data {

namespace {
constexpr int kMaxTreeDepth = 64;  // recursion guards for malformed input
constexpr int kMaxExprDepth = 256;

// The expr_type values Tiramisu's generators write (docs/data-format.md, verified on the sample and
// the raw files; "cast" per data-format.md). Anything else is garbage or a format this reader does
// not know: the program is skipped (program/unknown_expr_type) instead of encoded as "other".
constexpr const char* kKnownExprTypes[] = {"access", "value", "add", "sub",   "mul", "div",
                                           "sqrt",   "max",   "min", "minus", "cast"};
}  // namespace

bool is_known_expr_type(const std::string& type) {
  for (const char* t : kKnownExprTypes)
    if (type == t) return true;
  return false;
}

std::string known_expr_types_text() {
  std::string s;
  for (const char* t : kKnownExprTypes) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

// ---------------------------------------------------------------------------------------------
// parse_program: DOM → Program
// ---------------------------------------------------------------------------------------------
namespace {

using rapidjson::Value;

/// A field problem: thrown inside the converters, caught at schedule or program level.
struct Problem {
  std::string reason;  // "bad_field", "bad_execution_times", ...
  std::string path;    // field path, grows as it propagates outwards
  std::string what;
};

[[noreturn]] void fail(const char* reason, const std::string& path, const std::string& what) {
  throw Problem{reason, path, what};
}

std::string indexed(const char* field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

std::string join_path(const std::string& outer, const std::string& inner) {
  if (inner.empty()) return outer;
  if (outer.empty()) return inner;
  if (inner[0] == '[') return outer + inner;
  return outer + "." + inner;
}

/// Runs f(); on a Problem prepends `prefix` (a string, or a callable returning one, evaluated only
/// on error) to its path and rethrows.
template <class P, class F>
void within(const P& prefix, F&& f) {
  try {
    f();
  } catch (Problem& p) {
    if constexpr (std::is_invocable_v<const P&>)
      p.path = join_path(prefix(), p.path);
    else
      p.path = join_path(std::string(prefix), p.path);
    throw;
  }
}

const char* type_name(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "?";
}

/// `s` as plain text for messages: printable ASCII as it is, every other byte as \\xNN (so an
/// invalid UTF-8 or NUL byte never reaches a log or output file), at most `max` bytes ("..."
/// after).
std::string escape_text(const char* s, size_t n, size_t max = 80) {
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
std::string escape_text(const std::string& s, size_t max = 80) {
  return escape_text(s.data(), s.size(), max);
}

/// True when the member names `a` and `b` are the same bytes.
bool same_name(const Value& a, const Value& b) {
  return a.GetStringLength() == b.GetStringLength() &&
         std::memcmp(a.GetString(), b.GetString(), a.GetStringLength()) == 0;
}

std::string abbreviate_path(const std::string& path);

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

/// The path of a repeated key (duplicate_key_path), or "" when there is none.
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

/// Why `s` cannot be a name written to outputs, or "" when it can: empty, not valid UTF-8 (a
/// bad lead or continuation byte, an overlong form, a surrogate, above U+10FFFF, cut short), or
/// holding a control character U+0000..U+001F. The byte offset and the byte are named, e.g.
/// "invalid UTF-8 byte \xff at byte 0", "control character \x00 at byte 3".
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
std::string name_problem(const std::string& s) {
  return name_problem(s.data(), s.size());
}

/// `path` with every run of 3 or more identical consecutive segments written once with a count:
/// "expression_representation.children[0].children[0].children[0]" →
/// "expression_representation.children[0]×3".
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

const Value* find(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}
const Value& require(const Value& obj, const char* key) {
  const Value* v = find(obj, key);
  if (!v) fail("bad_field", key, "missing");
  return *v;
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

ExprNode parse_expr(const Value& v, int depth) {
  if (depth > kMaxExprDepth) fail("bad_field", "", "expression nested too deeply");
  if (!v.IsObject())
    fail("bad_field", "", std::string("expected an expression object, got ") + show(v));
  ExprNode n;
  n.type = as_string(require(v, "expr_type"), "expr_type");
  if (!is_known_expr_type(n.type))
    fail("unknown_expr_type", "expr_type",
         "unknown expression type \"" +
             (n.type.size() > 40 ? n.type.substr(0, 40) + "..." : n.type) +
             "\" (known: " + known_expr_types_text() + ")");
  if (const Value* ch = find(v, "children")) {
    if (!ch->IsNull()) {
      if (!ch->IsArray())
        fail("bad_field", "children", std::string("expected an array, got ") + show(*ch));
      n.children.reserve(ch->Size());
      for (rapidjson::SizeType i = 0; i < ch->Size(); ++i)
        within([&] { return indexed("children", i); },
               [&] { n.children.push_back(parse_expr((*ch)[i], depth + 1)); });
    }
  }
  return n;
}

Iterator parse_iterator(const std::string& name, const Value& v) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Iterator it;
  it.name = name;
  it.lower.text = as_bound(require(v, "lower_bound"), "lower_bound");
  it.upper.text = as_bound(require(v, "upper_bound"), "upper_bound");
  if (const Value* p = find(v, "parent_iterator"))
    it.parent = as_name_or_empty(*p, "parent_iterator");
  it.children = optional_string_list(v, "child_iterators");
  it.computations = optional_string_list(v, "computations_list");
  return it;
}

Access parse_access(const Value& v) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Access a;
  if (const Value* r = find(v, "access_is_reduction"))
    a.is_reduction = as_bool(*r, "access_is_reduction");
  a.buffer_id = as_int32(require(v, "buffer_id"), "buffer_id");
  const Value& m = require_array(v, "access_matrix");
  a.matrix.resize(m.Size());
  for (rapidjson::SizeType r = 0; r < m.Size(); ++r) {
    std::string rp = "access_matrix[" + std::to_string(r) + "]";
    if (!m[r].IsArray()) fail("bad_field", rp, std::string("expected an array, got ") + show(m[r]));
    a.matrix[r].reserve(m[r].Size());
    for (rapidjson::SizeType c = 0; c < m[r].Size(); ++c)
      a.matrix[r].push_back(as_int32(m[r][c], rp.c_str()));
  }
  return a;
}

/// One computation; sets has_order=false when absolute_order is absent.
Computation parse_computation(const std::string& name, const Value& v, bool& has_order) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Computation c;
  c.name = name;
  const Value* ao = find(v, "absolute_order");
  has_order = ao && !ao->IsNull();
  if (has_order) c.absolute_order = as_int32(*ao, "absolute_order");
  c.iterators = as_string_list(require(v, "iterators"), "iterators");
  c.is_reduction = as_bool(require(v, "comp_is_reduction"), "comp_is_reduction");
  c.write_access_relation = as_string(require(v, "write_access_relation"), "write_access_relation");
  c.write_buffer_id = as_int32(require(v, "write_buffer_id"), "write_buffer_id");
  c.data_type = as_string(require(v, "data_type"), "data_type");
  const Value& acc = require(v, "accesses");
  if (!acc.IsNull()) {
    if (!acc.IsArray())
      fail("bad_field", "accesses", std::string("expected an array, got ") + show(acc));
    c.accesses.reserve(acc.Size());
    for (rapidjson::SizeType i = 0; i < acc.Size(); ++i)
      within([&] { return indexed("accesses", i); },
             [&] { c.accesses.push_back(parse_access(acc[i])); });
  }
  within("expression_representation",
         [&] { c.expression = parse_expr(require(v, "expression_representation"), 0); });
  return c;
}

LoopNode parse_loop_node(const Value& v, int depth) {
  if (depth > kMaxTreeDepth) fail("bad_field", "", "loop tree nested too deeply");
  if (!v.IsObject())
    fail("bad_field", "", std::string("expected a loop node object, got ") + show(v));
  LoopNode n;
  n.loop_name = as_string(require(v, "loop_name"), "loop_name");
  n.computations = optional_string_list(v, "computations_list");
  if (const Value* ch = find(v, "child_list")) {
    if (!ch->IsNull()) {
      if (!ch->IsArray())
        fail("bad_field", "child_list", std::string("expected an array, got ") + show(*ch));
      n.children.reserve(ch->Size());
      for (rapidjson::SizeType i = 0; i < ch->Size(); ++i)
        within([&] { return indexed("child_list", i); },
               [&] { n.children.push_back(parse_loop_node((*ch)[i], depth + 1)); });
    }
  }
  return n;
}

/// A null or empty value (Python falsiness used by the reference for "not applied").
bool is_empty_value(const Value& v) {
  return v.IsNull() || (v.IsArray() && v.Empty()) || (v.IsObject() && v.ObjectEmpty()) ||
         (v.IsString() && v.GetStringLength() == 0) || (v.IsBool() && !v.GetBool());
}

/// True when the member name `k` equals the literal `lit`.
template <size_t N>
bool key_is(const Value& k, const char (&lit)[N]) {
  return k.GetStringLength() == N - 1 && std::memcmp(k.GetString(), lit, N - 1) == 0;
}

void parse_tiling(const Value& t, CompSchedule& cs) {
  if (is_empty_value(t)) return;
  if (!t.IsObject())
    fail("bad_tiling", "tiling", std::string("expected an object, got ") + show(t));
  const Value* dims = find(t, "tiling_dims");
  const Value* facs = find(t, "tiling_factors");
  if (!dims || !facs || !dims->IsArray() || !facs->IsArray())
    fail("bad_tiling", "tiling", "needs the arrays tiling_dims and tiling_factors");
  within("tiling", [&] {
    cs.tiling_dims = as_string_list(*dims, "tiling_dims");
    cs.tiling_factors.reserve(facs->Size());
    for (rapidjson::SizeType i = 0; i < facs->Size(); ++i)
      cs.tiling_factors.push_back(as_int((*facs)[i], "tiling_factors"));
  });
  for (size_t i = 0; i < cs.tiling_factors.size(); ++i)
    if (cs.tiling_factors[i] <= 0)
      fail("bad_tile_factor", indexed("tiling.tiling_factors", i),
           "tiling factor " + std::to_string(cs.tiling_factors[i]) + " is not positive");
  if (cs.tiling_dims.size() != cs.tiling_factors.size())
    fail("bad_tiling", "tiling",
         std::to_string(cs.tiling_dims.size()) + " tiling_dims but " +
             std::to_string(cs.tiling_factors.size()) + " tiling_factors");
  if (const Value* d = find(t, "tiling_depth"); d && !d->IsNull()) {
    int64_t depth = as_int(*d, "tiling.tiling_depth");
    if (depth != int64_t(cs.tiling_dims.size()))
      fail("bad_tiling", "tiling",
           "tiling_depth " + std::to_string(depth) + " but " +
               std::to_string(cs.tiling_dims.size()) + " tiling_dims");
  }
}

void parse_shiftings(const Value& s, CompSchedule& cs) {
  if (s.IsNull()) return;
  if (!s.IsArray())
    fail("bad_field", "shiftings", std::string("expected an array, got ") + show(s));
  for (rapidjson::SizeType i = 0; i < s.Size(); ++i) {
    const Value& e = s[i];
    if (!e.IsArray() || e.Size() != 2 || !e[0].IsString())
      fail("bad_field", indexed("shiftings", i), "expected [iterator name, shift factor]");
    within([&] { return indexed("shiftings", i); },
           [&] { cs.shiftings.emplace_back(e[0].GetString(), as_int(e[1], "")); });
  }
}

void parse_transformations(const Value& tl, CompSchedule& cs) {
  if (tl.IsNull()) return;
  if (!tl.IsArray())
    fail("bad_transformation", "transformations_list",
         std::string("expected an array, got ") + show(tl));
  cs.transformations.resize(tl.Size());
  for (rapidjson::SizeType i = 0; i < tl.Size(); ++i) {
    const Value& t = tl[i];
    if (!t.IsArray() || t.Size() != 16)
      fail("bad_transformation", indexed("transformations_list", i),
           t.IsArray() ? "expected 16 integers, got " + std::to_string(t.Size())
                       : std::string("expected an array of 16 integers, got ") + show(t));
    for (rapidjson::SizeType k = 0; k < 16; ++k) {
      if (t[k].IsInt64()) {
        cs.transformations[i][k] = t[k].GetInt64();
        continue;
      }
      try {
        cs.transformations[i][k] = as_int(t[k], "");
      } catch (Problem&) {
        fail("bad_transformation", indexed("transformations_list", i),
             std::string("expected an integer, got ") + show(t[k]));
      }
    }
  }
}

/// One computation's entry of a structured schedule; returns how many of its keys lcm knows
/// (the caller refuses a non-empty entry of unknown keys only).
int parse_comp_schedule(const Value& v, CompSchedule& cs) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  int known = 0;
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    ++known;
    const Value& k = m->name;
    const Value& x = m->value;
    if (key_is(k, "parallelized_dim")) {
      cs.parallelized_dim = as_name_or_empty(x, "parallelized_dim");
    } else if (key_is(k, "tiling")) {
      parse_tiling(x, cs);
    } else if (key_is(k, "unrolling_factor")) {
      if (!x.IsNull() && !(x.IsString() && x.GetStringLength() == 0))
        cs.unrolling_factor = as_int(x, "unrolling_factor");
      // 0 means "not unrolled" (the reference tests the factor's truthiness); below 0 is nonsense.
      if (cs.unrolling_factor < 0)
        fail("bad_unroll_factor", "unrolling_factor",
             "unrolling factor " + std::to_string(cs.unrolling_factor) + " is negative");
    } else if (key_is(k, "shiftings")) {
      parse_shiftings(x, cs);
    } else if (key_is(k, "transformations_list")) {
      parse_transformations(x, cs);
    } else {
      --known;  // unknown fields are ignored (when the entry has known ones)
    }
  }
  return known;
}

void parse_fusions(const Value& f, std::vector<Fusion>& fusions) {
  if (f.IsNull()) return;
  if (!f.IsArray()) fail("bad_field", "fusions", std::string("expected an array, got ") + show(f));
  for (rapidjson::SizeType i = 0; i < f.Size(); ++i) {
    const Value& e = f[i];
    if (!e.IsArray() || e.Size() < 3 || !e[0].IsString() || !e[1].IsString())
      fail("bad_field", indexed("fusions", i), "expected [computation, computation, level]");
    Fusion fu;
    fu.comp_a = e[0].GetString();
    fu.comp_b = e[1].GetString();
    within([&] { return indexed("fusions", i); }, [&] { fu.level = as_int32(e[2], ""); });
    fusions.push_back(std::move(fu));
  }
}

void parse_tree(const Value& t, Schedule& s) {
  if (t.IsNull()) return;
  within("tree_structure", [&] {
    if (!t.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(t));
    const Value& roots = require_array(t, "roots");
    LoopTree tree;
    tree.roots.reserve(roots.Size());
    for (rapidjson::SizeType i = 0; i < roots.Size(); ++i)
      within([&] { return indexed("roots", i); },
             [&] { tree.roots.push_back(parse_loop_node(roots[i], 0)); });
    s.tree = std::move(tree);
  });
}

/// A time value in any shape the generations write: a number, a numeric string, or a list of
/// them. Appends to `out`; `field` names it in errors ("bad_execution_times").
void append_times(const Value& t, const std::string& field, const char* reason,
                  std::vector<double>& out) {
  if (t.IsNull()) return;
  if (t.IsArray()) {
    out.reserve(out.size() + t.Size());
    for (rapidjson::SizeType i = 0; i < t.Size(); ++i) {
      const Value& x = t[i];
      if (x.IsNumber()) {
        out.push_back(x.GetDouble());
        continue;
      }
      double d;
      if (x.IsString() && parse_double_text(x.GetString(), x.GetStringLength(), d)) {
        out.push_back(d);
        continue;
      }
      fail(reason, indexed(field.c_str(), i), std::string("expected a number, got ") + show(x));
    }
    return;
  }
  if (t.IsNumber()) {
    out.push_back(t.GetDouble());
    return;
  }
  double d;
  if (t.IsString() && parse_double_text(t.GetString(), t.GetStringLength(), d)) {
    out.push_back(d);
    return;
  }
  fail(reason, field,
       std::string("expected a number, a numeric string or a list of them, got ") + show(t));
}

/// The names of an object's members, comma-separated (for messages).
std::string member_names(const Value& obj) {
  std::string names;
  for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m)
    names += (names.empty() ? "" : ", ") +
             escape_text(m->name.GetString(), m->name.GetStringLength(), 40);
  return names;
}

/// Times that may be keyed by machine name ({"a100": [...], "v100": 3.2}): the value of
/// `opt.machine`, or of the only machine when none is chosen. A missing chosen machine is a
/// `reason` problem ("no times for machine ..."); several machines and none chosen stop the run
/// (DataError naming them: the label would depend on which machine lcm picked).
void read_times(const Value& t, const std::string& field, const char* reason,
                const ReadOptions& opt, const RawRecord& rec, std::vector<double>& out) {
  if (!t.IsObject()) {
    append_times(t, field, reason, out);
    return;
  }
  if (t.ObjectEmpty()) return;
  if (!opt.machine.empty()) {
    for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m)
      if (m->name.GetStringLength() == opt.machine.size() &&
          std::memcmp(m->name.GetString(), opt.machine.data(), opt.machine.size()) == 0) {
        append_times(m->value, field + "." + opt.machine, reason, out);
        return;
      }
    fail(reason, field,
         "no times for machine \"" + escape_text(opt.machine, 40) +
             "\" (data.machine); this record has " + member_names(t));
  }
  if (t.MemberCount() > 1)
    throw DataError(rec.file + ":" + std::to_string(rec.line) + ": " + field +
                    " holds times of several machines (" + member_names(t) +
                    "); choose one with data.machine=NAME");
  append_times(t.MemberBegin()->value, field, reason, out);
}

/// The typed transformation types: a tag-vector kind (transformations.hpp, its name and aliases
/// there) or one of the others, with the spellings accepted for each.
enum class TypedKind { Tag, Parallelization, Tiling, Unrolling, Shifting, Fusion };
bool typed_kind_of(const Value& t, TypedKind& out, TransformKind& tag_kind) {
  static const std::pair<const char*, TypedKind> kNames[] = {
      {"parallelization", TypedKind::Parallelization},
      {"parallelisation", TypedKind::Parallelization},
      {"parallel", TypedKind::Parallelization},
      {"tiling", TypedKind::Tiling},
      {"tile", TypedKind::Tiling},
      {"unrolling", TypedKind::Unrolling},
      {"unroll", TypedKind::Unrolling},
      {"shifting", TypedKind::Shifting},
      {"shift", TypedKind::Shifting},
      {"fusion", TypedKind::Fusion},
      {"fuse", TypedKind::Fusion}};
  if (!t.IsString()) return false;
  const std::string_view v(t.GetString(), t.GetStringLength());
  if (const std::optional<TransformKind> k = kind_of_name(v)) {
    out = TypedKind::Tag;
    tag_kind = *k;
    return true;
  }
  for (const auto& [name, kind] : kNames)
    if (v == name) {
      out = kind;
      return true;
    }
  return false;
}

/// The integers of a typed entry's `loop_levels` or `parameters`: an array, a single integer, or
/// null/absent (none).
std::vector<int64_t> typed_ints(const Value* v, const char* field) {
  std::vector<int64_t> out;
  if (!v || v->IsNull()) return out;
  if (!v->IsArray()) {
    out.push_back(as_int(*v, field));
    return out;
  }
  out.reserve(v->Size());
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) out.push_back(as_int((*v)[i], field));
  return out;
}

/// The tag vector of a typed entry of tag kind `k` with 0-based levels `lv` and `params`;
/// `want(n, name)` fails unless there are n levels. Fails bad_transformation_entry on a count
/// the kind does not take.
template <class Want>
TagVector typed_tag(TransformKind k, const std::vector<int64_t>& lv,
                    const std::vector<int64_t>& params, const Want& want, const char* kind_name) {
  const TransformKindInfo& info = kind_info(k);
  Transformation t;
  t.kind = k;
  for (int nl = info.min_levels; nl <= info.max_levels; ++nl)
    if (lv.size() == size_t(nl) && params.size() == size_t(param_count(k, nl))) t.n_levels = nl;
  if (t.n_levels == 0) {
    if (info.typed_usage)
      fail("bad_transformation_entry", "parameters",
           std::string(info.name) + " " + info.typed_usage + ", got " + std::to_string(lv.size()) +
               " and " + std::to_string(params.size()));
    want(size_t(info.min_levels), kind_name);
    const int np = param_count(k, info.min_levels);
    fail("bad_transformation_entry", "parameters",
         np == 0 ? std::string(info.name) + " takes no parameters"
                 : std::string(info.name) + " needs " + std::to_string(np) + " parameter(s), got " +
                       std::to_string(params.size()));
  }
  for (int l = 0; l < t.n_levels; ++l) t.levels[size_t(l)] = lv[size_t(l)];
  t.n_params = int(params.size());
  for (int q = 0; q < t.n_params; ++q) t.params[size_t(q)] = params[size_t(q)];
  return encode(t);
}

/// A schedule-level `transformations_list` of typed entries {type, loop_levels, parameters,
/// computations|comps} (docs/data-format.md "Schedule forms") applied to `out`, in list order.
/// Loop levels count from `base` (0 or 1) and name positions in each computation's nest
/// (Computation::iterators). An entry naming no computation applies to every computation that
/// has its loop levels (unrolling: whose innermost loop it is); a fusion naming none needs a
/// program of exactly two computations. Problems: unknown_transformation_type, bad_loop_level,
/// unknown_computation, bad_transformation_entry (shape, arity, factors). Counts the level
/// evidence of data.loop_level_base=auto in `p`.
void parse_typed_list(const Value& tl, Program& p, int base, NormalSchedule& out) {
  const size_t n_comps = p.computations.size();
  out.comps.assign(n_comps, CompSchedule());
  out.fusions.clear();
  if (tl.IsNull()) return;
  if (!tl.IsArray())
    fail("bad_transformation_entry", "transformations_list",
         std::string("expected an array of transformation objects, got ") + show(tl));
  std::vector<int> targets;
  for (rapidjson::SizeType e = 0; e < tl.Size(); ++e) {
    within(
        [&] { return indexed("transformations_list", e); },
        [&] {
          const Value& t = tl[e];
          if (!t.IsObject())
            fail("bad_transformation_entry", "",
                 std::string("expected a {type, loop_levels, parameters} object, got ") + show(t));
          const Value* type = nullptr;
          const Value* levels_v = nullptr;
          const Value* params_v = nullptr;
          const Value* comps_v = nullptr;
          for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m) {
            const Value& k = m->name;
            if (key_is(k, "type"))
              type = &m->value;
            else if (key_is(k, "loop_levels"))
              levels_v = &m->value;
            else if (key_is(k, "parameters"))
              params_v = &m->value;
            else if (key_is(k, "computations") || key_is(k, "comps"))
              comps_v = &m->value;
            else
              fail("bad_transformation_entry", "",
                   "unknown key \"" + escape_text(k.GetString(), k.GetStringLength(), 40) +
                       "\" (lcm reads type, loop_levels, parameters, computations or comps)");
          }
          if (!type) fail("bad_transformation_entry", "", "no type");
          TypedKind kind;
          TransformKind tag_kind = TransformKind::Count;
          if (!typed_kind_of(*type, kind, tag_kind)) {
            std::string names;
            for (const TransformKindInfo& i : kTransformKinds) names += std::string(i.name) + ", ";
            fail("unknown_transformation_type", "type",
                 "unknown transformation type " + show(*type) + " (lcm reads " + names +
                     "parallelization, tiling, unrolling, shifting, fusion)");
          }
          ++p.typed_entries;
          const std::vector<int64_t> raw = typed_ints(levels_v, "loop_levels");
          const std::vector<int64_t> params = typed_ints(params_v, "parameters");
          // The computations it applies to.
          targets.clear();
          if (comps_v && !comps_v->IsNull()) {
            // an empty list names no computation: it is not "every computation"
            if (comps_v->IsArray() && comps_v->Empty())
              fail("bad_transformation_entry", "computations",
                   "an empty computation list (leave the key out to apply the entry to every "
                   "computation with these loop levels)");
            for (const std::string& name : as_string_list(*comps_v, "computations")) {
              const int c = p.computation_index(name);
              if (c < 0)
                fail("unknown_computation", "computations",
                     "no computation \"" + escape_text(name, 40) + "\" in the program");
              targets.push_back(c);
            }
          }
          const bool named = !targets.empty();
          // Level evidence for data.loop_level_base=auto, before any level is refused.
          int max_depth = 0;
          for (const Computation& c : p.computations)
            max_depth = std::max(max_depth, int(c.iterators.size()));
          for (int64_t l : raw) {
            if (l == 0) ++p.typed_levels_zero;
            bool at_depth = false;
            if (named) {
              for (int c : targets) at_depth |= l == int64_t(p.computations[c].iterators.size());
            } else {
              at_depth = l == max_depth;
            }
            if (at_depth) ++p.typed_levels_at_depth;
          }
          std::vector<int64_t> lv(raw.size());
          for (size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] < base)
              fail("bad_loop_level", "loop_levels",
                   "loop level " + std::to_string(raw[i]) + " below " + std::to_string(base) +
                       " (levels are " + std::to_string(base) + "-based, data.loop_level_base)");
            lv[i] = raw[i] - base;
          }
          auto want = [&](size_t n_levels, const char* what) {
            if (lv.size() != n_levels)
              fail("bad_transformation_entry", "loop_levels",
                   std::string(what) + " needs " + std::to_string(n_levels) +
                       " loop level(s), got " + std::to_string(lv.size()));
          };
          const char* kind_name = type->GetString();
          int64_t max_level = -1;
          for (int64_t l : lv) max_level = std::max(max_level, l);
          if (!named) {
            for (size_t c = 0; c < n_comps; ++c)
              if (int64_t(p.computations[c].iterators.size()) > max_level)
                targets.push_back(int(c));
            if (targets.empty())
              fail("bad_loop_level", "loop_levels",
                   "loop level " + std::to_string(max_level + base) +
                       " is beyond the depth of every computation");
          }
          for (int c : targets)
            if (max_level >= int64_t(p.computations[size_t(c)].iterators.size()))
              fail("bad_loop_level", "loop_levels",
                   "loop level " + std::to_string(max_level + base) + " is beyond the depth " +
                       std::to_string(p.computations[size_t(c)].iterators.size()) + " of " +
                       p.computations[size_t(c)].name);
          auto iter = [&](int c, int64_t level) -> const std::string& {
            return p.computations[size_t(c)].iterators[size_t(level)];
          };
          TagVector tag{};
          switch (kind) {
            case TypedKind::Tag:
              tag = typed_tag(tag_kind, lv, params, want, kind_name);
              break;
            case TypedKind::Parallelization:
            case TypedKind::Shifting:
              want(1, kind_name);
              break;
            case TypedKind::Tiling:
              if (lv.empty() || lv.size() > 3 || params.size() != lv.size())
                fail("bad_transformation_entry", "parameters",
                     "tiling needs 1 to 3 loop levels and one factor per level, got " +
                         std::to_string(lv.size()) + " and " + std::to_string(params.size()));
              for (int64_t f : params)
                if (f <= 0)
                  fail("bad_tile_factor", "parameters",
                       "tiling factor " + std::to_string(f) + " is not positive");
              break;
            case TypedKind::Unrolling:
              want(1, kind_name);
              break;
            case TypedKind::Fusion:
              want(1, kind_name);
              break;
          }
          if ((kind == TypedKind::Unrolling || kind == TypedKind::Shifting) && params.size() != 1)
            fail("bad_transformation_entry", "parameters",
                 std::string(kind_name) + " needs one parameter, got " +
                     std::to_string(params.size()));
          if (kind == TypedKind::Parallelization && !params.empty())
            fail("bad_transformation_entry", "parameters", "parallelization takes no parameters");
          if (kind == TypedKind::Unrolling && params[0] <= 0)
            fail("bad_unroll_factor", "parameters",
                 "unrolling factor " + std::to_string(params[0]) + " is not positive");
          if (kind == TypedKind::Fusion) {
            if (!params.empty())
              fail("bad_transformation_entry", "parameters", "fusion takes no parameters");
            if (!named && n_comps != 2)
              fail("bad_transformation_entry", "",
                   "a fusion that names no computations is ambiguous in a program of " +
                       std::to_string(n_comps) + " computations");
            std::vector<int> fused = named ? targets : std::vector<int>{0, 1};
            if (fused.size() < 2)
              fail("bad_transformation_entry", "computations", "a fusion needs two computations");
            for (size_t i = 0; i + 1 < fused.size(); ++i)
              out.fusions.push_back({p.computations[size_t(fused[i])].name,
                                     p.computations[size_t(fused[i + 1])].name, int(lv[0])});
            return;
          }
          bool applied = false;
          for (int c : targets) {
            CompSchedule& cs = out.comps[size_t(c)];
            switch (kind) {
              case TypedKind::Tag:
                cs.transformations.push_back(tag);
                break;
              case TypedKind::Parallelization:
                if (!cs.parallelized_dim.empty() && cs.parallelized_dim != iter(c, lv[0]))
                  fail("bad_transformation_entry", "",
                       p.computations[size_t(c)].name + " is parallelized twice");
                cs.parallelized_dim = iter(c, lv[0]);
                break;
              case TypedKind::Tiling:
                if (!cs.tiling_dims.empty())
                  fail("bad_transformation_entry", "",
                       p.computations[size_t(c)].name + " is tiled twice");
                for (size_t i = 0; i < lv.size(); ++i) {
                  cs.tiling_dims.push_back(iter(c, lv[i]));
                  cs.tiling_factors.push_back(params[i]);
                }
                break;
              case TypedKind::Unrolling: {
                // lcm's features unroll a computation's innermost loop (model-spec §3.3): the level
                // must be that loop, in the nest as written or after its tiling.
                const int64_t depth = int64_t(p.computations[size_t(c)].iterators.size());
                const int64_t tiled = int64_t(cs.tiling_dims.size());
                const bool innermost =
                    lv[0] == depth - 1 || (tiled > 0 && lv[0] == depth - 1 + tiled);
                if (!innermost) {
                  if (named)
                    fail("bad_loop_level", "loop_levels",
                         "unrolling of loop level " + std::to_string(lv[0] + base) + ", not the " +
                             "innermost loop of " + p.computations[size_t(c)].name +
                             " (lcm's features unroll the innermost loop)");
                  continue;
                }
                if (cs.unrolling_factor != 0 && cs.unrolling_factor != params[0])
                  fail("bad_transformation_entry", "",
                       p.computations[size_t(c)].name + " is unrolled twice");
                cs.unrolling_factor = params[0];
                break;
              }
              case TypedKind::Shifting:
                cs.shiftings.emplace_back(iter(c, lv[0]), params[0]);
                break;
              case TypedKind::Fusion:
                break;
            }
            applied = true;
          }
          if (!applied)
            fail("bad_loop_level", "loop_levels",
                 "unrolling of loop level " + std::to_string(lv[0] + base) +
                     ", the innermost loop of no computation (lcm's features unroll the innermost "
                     "loop)");
        });
  }
}

/// The name a schedule form is counted under: "structured", "typed", "sched_str:<dialect>".
std::string form_name(ScheduleSource src, const std::string& sched_str) {
  switch (src) {
    case ScheduleSource::Structured:
      return "structured";
    case ScheduleSource::Typed:
      return "typed";
    case ScheduleSource::SchedStr:
      return std::string("sched_str:") + sched_str_dialect_name(sched_str_dialect(sched_str));
    case ScheduleSource::Auto:
      break;
  }
  return "none";
}

/// What parse_schedule tells parse_program beyond the Schedule.
struct ScheduleNotes {
  int64_t missing = 0;       // computation entries missing (structured source)
  std::string disagreement;  // first difference between forms ("" = none)
};

/// One schedule. Problems are recorded in parse_problem, never thrown (except the DataError of
/// read_times). The transformations come from the form opt.schedule_source selects
/// (docs/data-format.md "Schedule forms"); the others present are cross-checked against it.
Schedule parse_schedule(const Value& v, Program& p, const ReadOptions& opt, const RawRecord& rec,
                        ScheduleNotes& notes) {
  Schedule s;
  try {
    if (!v.IsObject())
      fail("bad_field", "", std::string("expected a schedule object, got ") + show(v));
    const size_t n_comps = p.computations.size();
    NormalSchedule structured;
    structured.comps.resize(n_comps);
    size_t seen = 0;           // computation entries with fields lcm reads
    std::string unknown_only;  // the first entry of unknown fields only, with its keys
    const Value* typed = nullptr;
    bool has_sched_str = false;
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
      const Value& k = m->name;
      const Value& x = m->value;
      if (key_is(k, "execution_times")) {
        read_times(x, "execution_times", "bad_execution_times", opt, rec, s.execution_times);
      } else if (key_is(k, "fusions")) {
        parse_fusions(x, structured.fusions);
      } else if (key_is(k, "tree_structure")) {
        parse_tree(x, s);
      } else if (key_is(k, "transformations_list")) {
        typed = &x;
      } else if (key_is(k, "sched_str")) {
        if (x.IsString()) {
          // written to lcm-predict's and lcm-eval's outputs: no invalid UTF-8, no control bytes
          std::string why = x.GetStringLength() ? name_problem(x.GetString(), x.GetStringLength())
                                                : std::string();
          if (!why.empty()) fail("bad_sched_str", "sched_str", why);
          s.sched_str.assign(x.GetString(), x.GetStringLength());
          // An empty sched_str carries no facts (hand-written and legacy records leave it blank
          // beside transformed dicts): it is not a form to read or cross-check.
          has_sched_str = x.GetStringLength() > 0;
        } else if (!x.IsNull()) {
          fail("bad_sched_str", "sched_str", std::string("expected a string, got ") + show(x));
        }
      } else {
        // A computation's entry (other schedule-level keys are ignored).
        bool is_comp = false;
        for (size_t c = 0; c < n_comps && !is_comp; ++c) {
          const std::string& name = p.computations[c].name;
          is_comp = name.size() == k.GetStringLength() &&
                    std::memcmp(name.data(), k.GetString(), name.size()) == 0;
        }
        // An entry shaped like a computation's (an object with a per-computation field) for a
        // computation the program lacks is a schedule of another program, never ignored.
        if (!is_comp && x.IsObject())
          for (auto f = x.MemberBegin(); f != x.MemberEnd(); ++f)
            if (key_is(f->name, "parallelized_dim") || key_is(f->name, "tiling") ||
                key_is(f->name, "unrolling_factor") || key_is(f->name, "shiftings") ||
                key_is(f->name, "transformations_list"))
              fail("unknown_computation", "",
                   "an entry for computation \"" +
                       escape_text(k.GetString(), k.GetStringLength(), 40) +
                       "\", which the program does not have");
        for (size_t c = 0; c < n_comps; ++c) {
          const std::string& name = p.computations[c].name;
          if (name.size() == k.GetStringLength() &&
              std::memcmp(name.data(), k.GetString(), name.size()) == 0) {
            if (!x.IsNull()) {
              int known = 0;
              within(name, [&] { known = parse_comp_schedule(x, structured.comps[c]); });
              if (known > 0 || x.ObjectEmpty())
                ++seen;
              else if (unknown_only.empty())
                unknown_only =
                    name + " holds only fields lcm does not read (" + member_names(x) + ")";
            }
            break;
          }
        }
      }
    }
    // An entry of unknown fields only is transformation information lcm cannot read: it is
    // never taken as "untransformed".
    const bool has_structured = seen > 0 || !structured.fusions.empty();
    const bool has_typed = typed != nullptr;
    ScheduleSource src = opt.schedule_source;
    if (src == ScheduleSource::Auto) {
      src = has_structured  ? ScheduleSource::Structured
            : has_typed     ? ScheduleSource::Typed
            : has_sched_str ? ScheduleSource::SchedStr
                            : ScheduleSource::Auto;  // no transformation information
    } else {
      const bool present = src == ScheduleSource::Structured
                               ? has_structured || !unknown_only.empty()
                           : src == ScheduleSource::Typed ? has_typed
                                                          : has_sched_str;
      if (!present)
        fail("missing_schedule_form", "",
             std::string("data.schedule_source=") +
                 (src == ScheduleSource::Structured ? "structured"
                  : src == ScheduleSource::Typed    ? "typed"
                                                    : "sched_str") +
                 " but this schedule has no such form");
    }
    if (!unknown_only.empty() && (src == ScheduleSource::Structured || src == ScheduleSource::Auto))
      fail("unknown_schedule_fields", "", unknown_only);
    const LoopTree* tree = s.tree ? &*s.tree : nullptr;
    NormalSchedule typed_form, str_form;
    bool typed_done = false, str_done = false;  // each form is parsed at most once
    auto get_typed = [&]() -> NormalSchedule& {
      if (!typed_done) {
        typed_done = true;
        try {
          parse_typed_list(*typed, p, opt.loop_level_base, typed_form);
        } catch (Problem& pr) {
          typed_form.problem = pr.reason;
          typed_form.detail = (pr.path.empty() ? "" : abbreviate_path(pr.path) + ": ") + pr.what;
        }
      }
      return typed_form;
    };
    auto get_str = [&]() -> NormalSchedule& {
      if (!str_done) {
        str_done = true;
        str_form = parse_sched_str(s.sched_str, p, tree);
      }
      return str_form;
    };
    NormalSchedule* chosen = nullptr;
    NormalSchedule identity;
    identity.comps.resize(n_comps);
    switch (src) {
      case ScheduleSource::Structured:
        chosen = &structured;
        notes.missing += int64_t(n_comps - std::min(seen, n_comps));
        break;
      case ScheduleSource::Typed:
        chosen = &get_typed();
        break;
      case ScheduleSource::SchedStr:
        chosen = &get_str();
        break;
      case ScheduleSource::Auto:
        chosen = &identity;
        break;
    }
    if (!chosen->problem.empty()) {
      if (src == ScheduleSource::Typed) throw Problem{chosen->problem, "", chosen->detail};
      fail(chosen->problem.c_str(), "sched_str", chosen->detail);
    }
    if (!chosen->has_fusion_levels)
      for (const Fusion& f : chosen->fusions)
        if (f.level < 0)
          fail("fusion_level_unknown", "sched_str",
               "the fusion of " + f.comp_a + " and " + f.comp_b +
                   " has no loop level and the schedule's tree_structure does not give one");
    const std::string chosen_name = form_name(src, s.sched_str);
    p.form_counts["read/" + chosen_name] += 1;
    // Cross-check against the other forms present.
    if (opt.schedule_check != ScheduleCheck::Off) {
      auto check = [&](NormalSchedule& other, const std::string& other_name) {
        std::string kind, detail;
        if (!other.problem.empty()) {
          kind = "unreadable";
          detail = other_name + " cannot be read: " + other.detail;
        } else {
          ScheduleDifference d = compare_schedules(p, *chosen, other);
          kind = d.kind;
          detail = d.detail;
        }
        const std::string key = "check/" + other_name.substr(0, other_name.find(':'));
        if (kind.empty()) {
          p.form_counts[key + "/agree"] += 1;
          return;
        }
        p.form_counts[key + "/disagree"] += 1;
        p.form_counts["disagree/" + kind] += 1;
        const std::string text = kind + ": " + chosen_name + " vs " + other_name + ": " + detail;
        if (opt.schedule_check == ScheduleCheck::Skip) fail("schedule_forms_disagree", "", text);
        if (notes.disagreement.empty()) notes.disagreement = text;
      };
      if (src != ScheduleSource::Structured && has_structured) check(structured, "structured");
      if (src != ScheduleSource::Typed && has_typed) check(get_typed(), "typed");
      if (src != ScheduleSource::SchedStr && has_sched_str)
        check(get_str(), form_name(ScheduleSource::SchedStr, s.sched_str));
    }
    s.comps = std::move(chosen->comps);
    s.fusions = std::move(chosen->fusions);
  } catch (Problem& pr) {
    s.parse_problem = pr.reason;
    s.parse_detail = (pr.path.empty() ? "" : abbreviate_path(pr.path) + ": ") + pr.what;
  }
  return s;
}

/// Per-thread parse state reused across records: the mutable NUL-terminated copy needed by insitu
/// parsing and the DOM's memory (a pool whose first block grows to the largest record seen).
InsituBuffers& scratch() {
  thread_local InsituBuffers s;
  return s;
}

}  // namespace

std::optional<Program> parse_program(const RawRecord& rec, SkipLog& log, const ReadOptions& opt) {
  if (rec.schedule_line) {  // one schedule per line: the group becomes one ordinary record
    RawRecord merged;
    if (!merge_schedule_lines(rec, log, merged)) return std::nullopt;
    std::optional<Program> p = parse_program(merged, log, opt);
    if (p) p->from_schedule_lines = true;
    return p;
  }
  auto skip = [&](const char* level, const std::string& reason, const std::string& program,
                  const std::string& detail) {
    SkipEvent e;
    e.level = level;
    e.reason = reason;
    e.file = rec.file;
    e.line = rec.line;
    e.program = program;
    e.detail = detail;
    log.add(e);
  };

  InsituDocument parsed(scratch(), rec.json);
  rapidjson::Document& doc = parsed.doc;
  if (doc.HasParseError()) {
    std::string name = rec.name_hint.empty() ? sniff_program_name(rec.json) : rec.name_hint;
    skip("line", "malformed_json", name,
         std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at byte " +
             std::to_string(doc.GetErrorOffset()) + " of the record");
    return std::nullopt;
  }
  if (!doc.IsObject()) {
    skip("line", "not_an_object", rec.name_hint, std::string("the record is ") + type_name(doc));
    return std::nullopt;
  }
  {
    // An object with no record field at all (e.g. a `{"note": ...}` header line of a JSONL file)
    // is not a program: one line skip, instead of a note plus missing_program_annotation.
    if (!has_record_key(doc)) {
      std::string first = doc.MemberCount() == 0
                              ? std::string("it is empty")
                              : "its first key is \"" +
                                    std::string(doc.MemberBegin()->name.GetString(),
                                                doc.MemberBegin()->name.GetStringLength()) +
                                    "\"";
      skip("line", "not_a_program_record", rec.name_hint,
           "an object without any program record field (program_annotation, schedules_list, "
           "program_name, ...); " +
               first);
      return std::nullopt;
    }
  }

  Program p;
  p.source_file = rec.file;
  p.source_line = rec.line;
  bool name_from_record = true;  // false: named after the file and line
  if (const Value* n = find(doc, "program_name"); n && n->IsString() && n->GetStringLength() > 0)
    p.name.assign(n->GetString(), n->GetStringLength());
  else if (!rec.name_hint.empty())
    p.name = rec.name_hint;
  else {
    name_from_record = false;
    p.name = rec.file + ":" + std::to_string(rec.line);
    skip("note", "missing_program_name", p.name,
         "no program_name field; named after its file and line");
  }

  // A name that is not valid UTF-8 or holds a control character would corrupt every output that
  // names the program (JSON, JSONL, CSV): the program is skipped, its name shown escaped.
  if (std::string why = name_from_record ? name_problem(p.name) : std::string(); !why.empty()) {
    skip("program", "bad_name", escape_text(p.name), "program name: " + why);
    return std::nullopt;
  }
  // Readers disagree on a repeated key (RapidJSON finds the first, Python's json keeps the last):
  // such a record means two different programs, so it is skipped whole.
  if (std::string dup = first_duplicate_key(doc); !dup.empty()) {
    skip("program", "duplicate_key", p.name,
         "key " + dup + " appears twice in one object (JSON readers disagree on which one counts)");
    return std::nullopt;
  }

  const Value* ann = find(doc, "program_annotation");
  if (!ann || ann->IsNull()) {
    skip("program", "missing_program_annotation", p.name, "");
    return std::nullopt;
  }
  const Value* sl = find(doc, "schedules_list");
  if (!sl || sl->IsNull() || (sl->IsArray() && sl->Empty())) {
    skip("program", "empty_schedules_list", p.name,
         sl ? "schedules_list is empty" : "no schedules_list");
    return std::nullopt;
  }

  try {
    if (!ann->IsObject())
      fail("bad_field", "program_annotation", std::string("expected an object, got ") + show(*ann));
    if (!sl->IsArray())
      fail("bad_field", "schedules_list", std::string("expected an array, got ") + show(*sl));
    within("program_annotation", [&] {
      const Value& its = require_object(*ann, "iterators");
      p.iterators.reserve(its.MemberCount());
      for (auto m = its.MemberBegin(); m != its.MemberEnd(); ++m) {  // key order = loop index
        std::string name(m->name.GetString(), m->name.GetStringLength());
        if (std::string why = name_problem(name); !why.empty())
          fail("bad_name", "iterators." + escape_text(name), "iterator name: " + why);
        // (a repeated name is a duplicate_key, found before)
        within([&] { return "iterators." + name; },
               [&] { p.iterators.push_back(parse_iterator(name, m->value)); });
      }
      const Value& comps = require_object(*ann, "computations");
      p.computations.reserve(comps.MemberCount());
      for (auto m = comps.MemberBegin(); m != comps.MemberEnd(); ++m) {
        std::string name(m->name.GetString(), m->name.GetStringLength());
        bool has_order = true;
        if (std::string why = name_problem(name); !why.empty())
          fail("bad_name", "computations." + escape_text(name), "computation name: " + why);
        within([&] { return "computations." + name; },
               [&] { p.computations.push_back(parse_computation(name, m->value, has_order)); });
        if (!has_order) fail("missing_absolute_order", "computations." + name, "no absolute_order");
      }
    });
    std::stable_sort(p.computations.begin(), p.computations.end(),
                     [](const Computation& a, const Computation& b) {
                       return a.absolute_order < b.absolute_order;
                     });
    for (size_t i = 1; i < p.computations.size(); ++i)
      if (p.computations[i].absolute_order == p.computations[i - 1].absolute_order)
        fail("duplicate_absolute_order", "program_annotation.computations",
             p.computations[i - 1].name + " and " + p.computations[i].name +
                 " both have absolute_order " + std::to_string(p.computations[i].absolute_order));
    // Missing, null or empty: NaN. featurize drops such a program ("bad_initial_time") unless it
    // only predicts (keep_unlabeled): a new program an autoscheduler asks about has no
    // measurements. A list of measurements gives its least value, as execution_times do.
    {
      const auto it = doc.FindMember("initial_execution_time");
      std::vector<double> t;
      if (it != doc.MemberEnd())
        read_times(it->value, "initial_execution_time", "bad_field", opt, rec, t);
      p.initial_execution_time = t.empty() ? std::numeric_limits<double>::quiet_NaN()
                                           : *std::min_element(t.begin(), t.end());
    }
  } catch (Problem& pr) {
    skip("program", pr.reason, p.name,
         (pr.path.empty() ? "" : abbreviate_path(pr.path) + ": ") + pr.what);
    return std::nullopt;
  }

  int64_t missing = 0, first_missing = -1;
  int64_t first_disagreement = -1, disagreements = 0;
  std::string disagreement;
  p.schedules.reserve(sl->Size());
  for (rapidjson::SizeType i = 0; i < sl->Size(); ++i) {
    ScheduleNotes notes;
    p.schedules.push_back(parse_schedule((*sl)[i], p, opt, rec, notes));
    if (notes.missing > 0 && first_missing < 0) first_missing = i;
    missing += notes.missing;
    if (!notes.disagreement.empty()) {
      if (first_disagreement < 0) {
        first_disagreement = i;
        disagreement = std::move(notes.disagreement);
      }
      ++disagreements;
    }
  }
  // The loop tree every schedule falls back on (schedule 0's tree_structure, else the iterators'
  // parent/child links) must be a loop forest; a later schedule's own bad tree drops only it.
  {
    const Schedule& s0 = p.schedules[0];
    const std::string why = s0.tree ? loop_tree_problem(*s0.tree) : iterator_tree_problem(p);
    if (!why.empty()) {
      skip("program", "bad_tree", p.name,
           (s0.tree ? "schedules_list[0].tree_structure: " : "program_annotation.iterators: ") +
               why);
      return std::nullopt;
    }
    for (size_t i = 1; i < p.schedules.size(); ++i) {
      Schedule& s = p.schedules[i];
      if (!s.tree || !s.parse_problem.empty()) continue;
      if (std::string w = loop_tree_problem(*s.tree); !w.empty()) {
        s.parse_problem = "bad_tree";
        s.parse_detail = "tree_structure: " + w;
      }
    }
  }
  if (disagreements > 0) {
    SkipEvent e;
    e.level = "note";
    e.reason = "schedule_forms_disagree";
    e.file = rec.file;
    e.line = rec.line;
    e.program = p.name;
    e.schedule = first_disagreement;
    e.detail = std::to_string(disagreements) + " schedule(s) whose forms disagree, kept from the " +
               "chosen form (data.schedule_check=report); first: " + disagreement;
    log.add(e);
  }
  if (missing > 0)
    skip("note", "missing_comp_schedule", p.name,
         std::to_string(missing) + " computation entries missing (first in schedule " +
             std::to_string(first_missing) + "); default (untransformed) schedule used");
  return p;
}

Schedule parse_schedule_json(const std::string& json, Program& p, const ReadOptions& opt) {
  auto problem = [](const char* reason, std::string detail) {
    Schedule s;
    s.parse_problem = reason;
    s.parse_detail = std::move(detail);
    return s;
  };
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError())
    return problem("malformed_json", std::string(rapidjson::GetParseError_En(doc.GetParseError())) +
                                         " at byte " + std::to_string(doc.GetErrorOffset()) +
                                         " of the schedule");
  if (!doc.IsObject())
    return problem("bad_field", std::string("expected a schedule object, got ") + show(doc));
  if (std::string dup = first_duplicate_key(doc); !dup.empty())
    return problem("duplicate_key", "key " + dup + " appears twice in one object");
  // a program annotation where a schedule belongs (a caller's lines out of step) would read as
  // the untransformed schedule: its iterators and computations are no schedule keys
  if (doc.HasMember("iterators") && doc.HasMember("computations"))
    return problem("not_a_schedule",
                   "the schedule has the program annotation's iterators and computations (are "
                   "the query's lines out of step?)");
  RawRecord rec;
  rec.file = p.source_file;
  rec.line = p.source_line;
  ScheduleNotes notes;
  Schedule s = parse_schedule(doc, p, opt, rec, notes);
  if (s.tree && s.parse_problem.empty())
    if (std::string w = loop_tree_problem(*s.tree); !w.empty()) {
      s.parse_problem = "bad_tree";
      s.parse_detail = "tree_structure: " + w;
    }
  return s;
}

LoopLevelBaseChoice choose_loop_level_base(const std::string& path, LoopLevelBase setting,
                                           const ReadOptions& opt) {
  LoopLevelBaseChoice c;
  if (setting != LoopLevelBase::Auto) {
    c.base = setting == LoopLevelBase::One ? 1 : 0;
    c.text =
        std::to_string(c.base) + "-based (data.loop_level_base=" + std::to_string(c.base) + ")";
    return c;
  }
  SkipLog quiet(false, 0);
  RecordSource src(path, quiet);
  ReadOptions scan = opt;
  scan.loop_level_base = 0;
  scan.schedule_check = ScheduleCheck::Off;
  scan.schedule_source = ScheduleSource::Typed;  // parse every typed list met
  RawRecord rec;
  int64_t records = 0, last_typed = -1;
  bool any_typed = false;
  while (records < 2000 && records - last_typed <= 20 && src.next(rec)) {
    ++records;
    // A cheap test first: most files have no typed list at all.
    if (rec.json.find("\"loop_levels\"") == std::string::npos) continue;
    const std::optional<Program> p = parse_program(rec, quiet, scan);
    if (!p) continue;
    if (p->typed_entries > 0) {
      any_typed = true;
      last_typed = records;
    }
    c.zero += p->typed_levels_zero;
    c.at_depth += p->typed_levels_at_depth;
  }
  if (c.zero > 0 && c.at_depth > 0)
    throw DataError(path + ": the loop levels of typed transformations_list entries are both 0 (" +
                    std::to_string(c.zero) + " times) and equal to a computation's depth (" +
                    std::to_string(c.at_depth) +
                    " times) in the first records: set data.loop_level_base=0 or 1");
  if (c.at_depth > 0) {
    c.base = 1;
    c.text = "1-based (detected: " + std::to_string(c.at_depth) +
             " level(s) equal a computation's depth)";
  } else if (c.zero > 0) {
    c.text = "0-based (detected: " + std::to_string(c.zero) + " level(s) are 0)";
  } else if (any_typed) {
    c.text = "0-based (assumed: the first records prove neither 0- nor 1-based)";
  }
  return c;
}

std::vector<Program> read_all_programs(const std::string& path, SkipLog& log,
                                       const ReadOptions& opt) {
  RecordSource src(path, log);
  std::vector<Program> out;
  RawRecord rec;
  while (src.next(rec))
    if (auto p = parse_program(rec, log, opt)) out.push_back(std::move(*p));
  return out;
}

}  // namespace lcm::data
