// JSON writing of the synthetic generator: one generated program as one LOOPerSet JSONL object
// (docs/data-format.md), with the formatting quirks of the real data (numeric strings for some
// bounds and factors, `null` or `[]` for missing times) drawn from their own random stream.
#include <rapidjson/writer.h>

#include <cctype>

#include "data/synth_internal.hpp"

namespace lcm::data::synth_detail {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void write_str(Writer& w, const std::string& s) {
  w.String(s.data(), rapidjson::SizeType(s.size()));
}
void key(Writer& w, const char* k) {
  w.Key(k);
}
/// "k": `s`, or null when `s` is empty.
void write_str_or_null(Writer& w, const char* k, const std::string& s) {
  key(w, k);
  if (s.empty())
    w.Null();
  else
    write_str(w, s);
}
/// "k": [the strings of v].
void write_str_list(Writer& w, const char* k, const std::vector<std::string>& v) {
  key(w, k);
  w.StartArray();
  for (const auto& s : v) write_str(w, s);
  w.EndArray();
}
/// "k": [[v, …], …], integer rows (a matrix, a list of typed transformations).
template <class Row>
void write_int_rows(Writer& w, const char* k, const std::vector<Row>& rows) {
  key(w, k);
  w.StartArray();
  for (const Row& row : rows) {
    w.StartArray();
    for (int64_t v : row) w.Int64(v);
    w.EndArray();
  }
  w.EndArray();
}
/// "k": null when `items` is empty, else [[…], …]: one array per item, its values written by
/// `write_item(item)`.
template <class Items, class F>
void write_rows_or_null(Writer& w, const char* k, const Items& items, F write_item) {
  key(w, k);
  if (items.empty()) {
    w.Null();
    return;
  }
  w.StartArray();
  for (const auto& item : items) {
    w.StartArray();
    write_item(item);
    w.EndArray();
  }
  w.EndArray();
}

/// Writes an integer bound as a JSON number (or, rarely, a numeric string); other bounds as text.
void write_bound(Writer& w, const std::string& text, bool as_string) {
  bool numeric =
      !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
  for (size_t i = 1; numeric && i < text.size(); ++i)
    numeric = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
  if (numeric && !as_string)
    w.Int64(std::stoll(text));
  else
    write_str(w, text);
}

void write_expr(Writer& w, const ExprNode& e) {
  w.StartObject();
  key(w, "expr_type");
  write_str(w, e.type);
  key(w, "children");
  w.StartArray();
  for (const auto& c : e.children) write_expr(w, c);
  w.EndArray();
  w.EndObject();
}

void write_node(Writer& w, const LoopNode& n) {
  w.StartObject();
  key(w, "loop_name");
  write_str(w, n.loop_name);
  write_str_list(w, "computations_list", n.computations);
  key(w, "child_list");
  w.StartArray();
  for (const auto& c : n.children) write_node(w, c);
  w.EndArray();
  w.EndObject();
}

void write_factor(Writer& w, int64_t f, bool as_string) {
  if (as_string)
    write_str(w, std::to_string(f));
  else
    w.Int64(f);
}

}  // namespace

// formatting quirks of the real data (numeric strings) drawn from their own stream
RecordJson::RecordJson(rapidjson::StringBuffer& sb, int64_t index, uint64_t seed)
    : w_(sb), fmt_(mix64(mix64(seed ^ 0x5EEDF00Dull) + uint64_t(index))) {}

void RecordJson::head(const Record& rec) {
  const Program& p = rec.program;
  Writer& w = w_;
  Rng& fmt = fmt_;
  w.StartObject();
  key(w, "program_name");
  write_str(w, p.name);
  key(w, "filename");
  write_str(w, "synthetic");
  key(w, "node_name");
  write_str(w, "lcm-synth");
  key(w, "program_annotation");
  w.StartObject();
  key(w, "memory_size");
  w.Double(round6(rec.memory_mb));
  key(w, "iterators");
  w.StartObject();
  for (const auto& it : p.iterators) {
    key(w, it.name.c_str());
    w.StartObject();
    key(w, "lower_bound");
    write_bound(w, it.lower.text, chance(fmt, 0.05));
    key(w, "upper_bound");
    write_bound(w, it.upper.text, chance(fmt, 0.05));
    write_str_or_null(w, "parent_iterator", it.parent);
    write_str_list(w, "child_iterators", it.children);
    write_str_list(w, "computations_list", it.computations);
    w.EndObject();
  }
  w.EndObject();
  key(w, "computations");
  w.StartObject();
  for (size_t c = 0; c < p.computations.size(); ++c) {
    const Computation& comp = p.computations[c];
    key(w, comp.name.c_str());
    w.StartObject();
    key(w, "absolute_order");
    w.Int(comp.absolute_order);
    write_str_list(w, "iterators", comp.iterators);
    key(w, "comp_is_reduction");
    w.Bool(comp.is_reduction);
    key(w, "write_access_relation");
    write_str(w, comp.write_access_relation);
    key(w, "write_buffer_id");
    w.Int(comp.write_buffer_id);
    key(w, "data_type");
    write_str(w, comp.data_type);
    key(w, "data_type_size");
    w.Int(rec.info[c].type_size);
    key(w, "accesses");
    w.StartArray();
    for (const auto& a : comp.accesses) {
      w.StartObject();
      key(w, "access_is_reduction");
      w.Bool(a.is_reduction);
      key(w, "buffer_id");
      w.Int(a.buffer_id);
      write_int_rows(w, "access_matrix", a.matrix);
      w.EndObject();
    }
    w.EndArray();
    key(w, "expression_representation");
    write_expr(w, comp.expression);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();  // program_annotation
  key(w, "initial_execution_time");
  w.Double(p.initial_execution_time);
  key(w, "schedules_list");
  w.StartArray();
}

void RecordJson::schedule(const Record& rec, const Schedule& s, bool null_times) {
  const Program& p = rec.program;
  Writer& w = w_;
  Rng& fmt = fmt_;
  {
    w.StartObject();
    for (size_t c = 0; c < p.computations.size(); ++c) {
      const CompSchedule& cs = s.comps[c];
      key(w, p.computations[c].name.c_str());
      w.StartObject();
      write_rows_or_null(w, "shiftings", cs.shiftings, [&](const auto& sh) {
        write_str(w, sh.first);
        w.Int64(sh.second);
      });
      key(w, "tiling");
      w.StartObject();
      if (!cs.tiling_dims.empty()) {
        bool as_string = chance(fmt, 0.1);
        key(w, "tiling_depth");
        w.Int(int(cs.tiling_dims.size()));
        write_str_list(w, "tiling_dims", cs.tiling_dims);
        key(w, "tiling_factors");
        w.StartArray();
        for (int64_t f : cs.tiling_factors) write_factor(w, f, as_string);
        w.EndArray();
      }
      w.EndObject();
      key(w, "unrolling_factor");
      if (cs.unrolling_factor > 0)
        write_factor(w, cs.unrolling_factor, chance(fmt, 0.1));
      else
        w.Null();
      write_str_or_null(w, "parallelized_dim", cs.parallelized_dim);
      write_int_rows(w, "transformations_list", cs.transformations);
      w.EndObject();
    }
    write_rows_or_null(w, "fusions", s.fusions, [&](const auto& f) {
      write_str(w, f.comp_a);
      write_str(w, f.comp_b);
      w.Int(f.level);
    });
    key(w, "sched_str");
    write_str(w, s.sched_str);
    key(w, "tree_structure");
    w.StartObject();
    key(w, "roots");
    w.StartArray();
    for (const auto& n : s.tree->roots) write_node(w, n);
    w.EndArray();
    w.EndObject();
    key(w, "legality_check");
    w.Bool(true);
    key(w, "exploration_method");
    w.Int(1);
    key(w, "execution_times");
    if (s.execution_times.empty() && null_times) {
      w.Null();
    } else {
      w.StartArray();
      for (double t : s.execution_times) w.Double(t);
      w.EndArray();
    }
    w.EndObject();
  }
}

void RecordJson::tail() {
  w_.EndArray();
  w_.EndObject();
}

void write_record(const Record& rec, int64_t index, uint64_t seed, rapidjson::StringBuffer& sb) {
  RecordJson j(sb, index, seed);
  j.head(rec);
  for (size_t si = 0; si < rec.program.schedules.size(); ++si)
    j.schedule(rec, rec.program.schedules[si], rec.null_times[si] != 0);
  j.tail();
}

}  // namespace lcm::data::synth_detail
