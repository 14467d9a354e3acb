// The program annotation of a record (json_fields.hpp parse_annotation): its iterators, its
// computations with their accesses and expression trees, and the expression types a computation
// may hold (reader.hpp is_known_expr_type).
#include <rapidjson/document.h>

#include <algorithm>
#include <string>

#include "data/json_fields.hpp"
#include "data/reader.hpp"

namespace lcm::data {

namespace {
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

namespace json_detail {
namespace {

ExprNode parse_expr(const Value& v, int depth) {
  expect_node(v, depth, kMaxExprDepth, "expression", "an expression object");
  ExprNode n;
  n.type = as_string(require(v, "expr_type"), "expr_type");
  if (!is_known_expr_type(n.type))
    fail("unknown_expr_type", "expr_type",
         "unknown expression type \"" +
             (n.type.size() > 40 ? n.type.substr(0, 40) + "..." : n.type) +
             "\" (known: " + known_expr_types_text() + ")");
  if (const Value* ch = find(v, "children"))
    parse_list(*ch, "children", n.children,
               [&](const Value& e) { return parse_expr(e, depth + 1); });
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
  parse_list(require(v, "accesses"), "accesses", c.accesses, parse_access);
  within("expression_representation",
         [&] { c.expression = parse_expr(require(v, "expression_representation"), 0); });
  return c;
}

/// The iterators of `ann` into p.iterators, in key order (= loop index).
void parse_iterators(const Value& ann, Program& p) {
  const Value& its = require_object(ann, "iterators");
  p.iterators.reserve(its.MemberCount());
  for (auto m = its.MemberBegin(); m != its.MemberEnd(); ++m) {
    std::string name(m->name.GetString(), m->name.GetStringLength());
    if (std::string why = name_problem(name); !why.empty())
      fail("bad_name", "iterators." + escape_text(name), "iterator name: " + why);
    // (a repeated name is a duplicate_key, found before)
    within([&] { return "iterators." + name; },
           [&] { p.iterators.push_back(parse_iterator(name, m->value)); });
  }
}

/// The computations of `ann` into p.computations, in key order.
void parse_computations(const Value& ann, Program& p) {
  const Value& comps = require_object(ann, "computations");
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
}

}  // namespace

void parse_annotation(const Value& ann, Program& p) {
  within("program_annotation", [&] {
    parse_iterators(ann, p);
    parse_computations(ann, p);
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
}

}  // namespace json_detail
}  // namespace lcm::data
