// The pieces of the program-record reader (internal to data/; the public API is reader.hpp): the
// field problem every converter throws and how its path grows, the converters of JSON values to
// lcm's types with their messages, and the functions each reader file provides to the others —
// program_annotation.cpp (the annotation), schedule_json.cpp (one schedule and its structured
// form), typed_list.cpp (the typed transformations_list) and program_json.cpp (the record).
#pragma once
#include <rapidjson/document.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "data/program.hpp"
#include "data/reader.hpp"
#include "data/schedule_forms.hpp"

namespace lcm::data::json_detail {

using rapidjson::Value;

inline constexpr int kMaxTreeDepth = 64;  // recursion guards for malformed input
inline constexpr int kMaxExprDepth = 256;

// ---------------------------------------------------------------- field problems and paths
/// A field problem: thrown inside the converters, caught at schedule or program level.
struct Problem {
  std::string reason;  // "bad_field", "bad_execution_times", ...
  std::string path;    // field path, grows as it propagates outwards
  std::string what;
};

[[noreturn]] inline void fail(const char* reason, const std::string& path,
                              const std::string& what) {
  throw Problem{reason, path, what};
}

/// "field[i]".
inline std::string indexed(const char* field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

/// `inner` below `outer`: "outer.inner", "outer[3]", or either alone when the other is empty.
inline std::string join_path(const std::string& outer, const std::string& inner) {
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

/// `path` with every run of 3 or more identical consecutive segments written once with a count:
/// "expression_representation.children[0].children[0].children[0]" →
/// "expression_representation.children[0]×3".
std::string abbreviate_path(const std::string& path);

/// A problem as a skip's or a schedule's detail: "<abbreviated path>: <what>", or `what` alone.
inline std::string problem_detail(const Problem& p) {
  return (p.path.empty() ? "" : abbreviate_path(p.path) + ": ") + p.what;
}

// ---------------------------------------------------------------- values in messages
/// "null", "a boolean", "an object", "an array", "a string" or "a number".
const char* type_name(const Value& v);

/// `s` as plain text for messages: printable ASCII as it is, every other byte as \\xNN (so an
/// invalid UTF-8 or NUL byte never reaches a log or output file), at most `max` bytes ("..."
/// after).
std::string escape_text(const char* s, size_t n, size_t max = 80);
inline std::string escape_text(const std::string& s, size_t max = 80) {
  return escape_text(s.data(), s.size(), max);
}

/// A value as a message shows it: a string quoted (bytes escaped, at most 40), a number by its
/// value ("5.5", "1.18059162071741e+21"), anything else by its type ("an object").
std::string show(const Value& v);

/// Checks one node of a recursive structure before it is read: bad_field "<nesting> nested too
/// deeply" past `max_depth`, "expected <object>, got <show(v)>" when `v` is not an object.
inline void expect_node(const Value& v, int depth, int max_depth, const char* nesting,
                        const char* object) {
  if (depth > max_depth) fail("bad_field", "", std::string(nesting) + " nested too deeply");
  if (!v.IsObject()) fail("bad_field", "", std::string("expected ") + object + ", got " + show(v));
}

/// The names of an object's members, comma-separated (for messages).
std::string member_names(const Value& obj);

/// Why `s` cannot be a name written to outputs, or "" when it can: empty, not valid UTF-8 (a
/// bad lead or continuation byte, an overlong form, a surrogate, above U+10FFFF, cut short), or
/// holding a control character U+0000..U+001F. The byte offset and the byte are named, e.g.
/// "invalid UTF-8 byte \xff at byte 0", "control character \x00 at byte 3".
std::string name_problem(const char* s, size_t n);
inline std::string name_problem(const std::string& s) {
  return name_problem(s.data(), s.size());
}

/// The path of the first member (depth first) whose name repeats another member of the same
/// object, e.g. ".schedules_list[3].comp00", or "" when every object's names are distinct. Any
/// nesting is safe (explicit stacks).
std::string first_duplicate_key(const Value& root);

// ---------------------------------------------------------------- members and converters
inline const Value* find(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}
/// The member `key`; bad_field "missing" when there is none.
inline const Value& require(const Value& obj, const char* key) {
  const Value* v = find(obj, key);
  if (!v) fail("bad_field", key, "missing");
  return *v;
}
/// The member `key`, an object / an array; bad_field otherwise.
const Value& require_object(const Value& obj, const char* key);
const Value& require_array(const Value& obj, const char* key);

/// True when the member name `k` equals the literal `lit`.
template <size_t N>
bool key_is(const Value& k, const char (&lit)[N]) {
  return k.GetStringLength() == N - 1 && std::memcmp(k.GetString(), lit, N - 1) == 0;
}

/// A null or empty value (Python falsiness used by the reference for "not applied").
inline bool is_empty_value(const Value& v) {
  return v.IsNull() || (v.IsArray() && v.Empty()) || (v.IsObject() && v.ObjectEmpty()) ||
         (v.IsString() && v.GetStringLength() == 0) || (v.IsBool() && !v.GetBool());
}

/// A trimmed decimal number that is the whole JSON string [s, s + n) ("4", " 30 ", "4.0"); false
/// for a NUL byte inside ("4\u0000x", which strtod would stop at) and C's hexadecimal forms
/// ("0x10", "0x1p-12", which Python's float() refuses).
bool parse_double_text(const char* s, size_t n, double& out);

// Each converter fails bad_field naming `field` and showing the value.
/// An integer, an integral double, or a numeric string ("4", " 30 ").
int64_t as_int(const Value& v, const char* field);
/// as_int within the 32-bit range.
int as_int32(const Value& v, const char* field);
/// true/false, 0/1, or the strings "true", "True", "false", "False".
bool as_bool(const Value& v, const char* field);
std::string as_string(const Value& v, const char* field);
/// null → "", string → itself.
std::string as_name_or_empty(const Value& v, const char* field);
/// A loop bound: integer → decimal text; string → as written (trimmed).
std::string as_bound(const Value& v, const char* field);
/// An array of strings; null → empty.
std::vector<std::string> as_string_list(const Value& v, const char* field);
/// The member `key` as as_string_list; absent → empty.
std::vector<std::string> optional_string_list(const Value& obj, const char* key);

/// The elements of the list `v` (the member `key` of its object; null: none) converted by
/// `parse` and appended to `out`, each within "key[i]"; bad_field when `v` is not an array.
template <class T, class Parse>
void parse_list(const Value& v, const char* key, std::vector<T>& out, Parse&& parse) {
  if (v.IsNull()) return;
  if (!v.IsArray()) fail("bad_field", key, std::string("expected an array, got ") + show(v));
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i)
    within([&] { return indexed(key, i); }, [&] { out.push_back(parse(v[i])); });
}

// ---------------------------------------------------------------- the reader's pieces
/// program_annotation.cpp: the iterators and computations of the record's program_annotation
/// `ann` into `p`, computations sorted by absolute_order. Problems: bad_field, bad_name,
/// unknown_expr_type, missing_absolute_order, duplicate_absolute_order (paths from
/// "program_annotation").
void parse_annotation(const Value& ann, Program& p);

/// schedule_json.cpp: times that may be keyed by machine name ({"a100": [...], "v100": 3.2}): the
/// value of `opt.machine`, or of the only machine when none is chosen, appended to `out`. A
/// number, a numeric string or a list of them; otherwise a `reason` problem naming `field`. A
/// missing chosen machine is a `reason` problem ("no times for machine ..."); several machines
/// and none chosen stop the run (DataError naming them: the label would depend on which machine
/// lcm picked).
void read_times(const Value& t, const std::string& field, const char* reason,
                const ReadOptions& opt, const RawRecord& rec, std::vector<double>& out);

/// What parse_schedule tells parse_program beyond the Schedule.
struct ScheduleNotes {
  int64_t missing = 0;       // computation entries missing (structured source)
  std::string disagreement;  // first difference between forms ("" = none)
};

/// schedule_json.cpp: one schedule. Problems are recorded in parse_problem, never thrown (except
/// the DataError of read_times). The transformations come from the form opt.schedule_source
/// selects (docs/data-format.md "Schedule forms"); the others present are cross-checked against
/// it, the counts in p.form_counts.
Schedule parse_schedule(const Value& v, Program& p, const ReadOptions& opt, const RawRecord& rec,
                        ScheduleNotes& notes);

/// typed_list.cpp: a schedule-level `transformations_list` of typed entries {type, loop_levels,
/// parameters, computations|comps} (docs/data-format.md "Schedule forms") applied to `out`, in
/// list order. Loop levels count from `base` (0 or 1) and name positions in each computation's
/// nest (Computation::iterators). An entry naming no computation applies to every computation
/// that has its loop levels (unrolling: whose innermost loop it is); a fusion naming none needs a
/// program of exactly two computations. Problems: unknown_transformation_type, bad_loop_level,
/// unknown_computation, bad_transformation_entry (shape, arity, factors). Counts the level
/// evidence of data.loop_level_base=auto in `p`.
void parse_typed_list(const Value& tl, Program& p, int base, NormalSchedule& out);

/// Whether `type` is a typed entry's `type` that parse_typed_list reads: a tag-vector kind's name
/// or alias (transformations.hpp) or another type in one of its spellings ("tile", "fuse", ...).
bool is_typed_transformation_type(std::string_view type);

}  // namespace lcm::data::json_detail
