// The table of transformation kinds and its encode/decode helpers (transformations.hpp).
#include "data/transformations.hpp"

namespace lcm::data {

const TransformKindInfo& kind_info(TransformKind k) {
  return kTransformKinds[size_t(k)];
}

std::optional<TransformKind> kind_of_tag(int64_t tag0) {
  for (const TransformKindInfo& i : kTransformKinds)
    if (i.tag == tag0) return i.kind;
  return std::nullopt;
}

std::optional<TransformKind> kind_of_name(std::string_view name) {
  for (const TransformKindInfo& i : kTransformKinds)
    if (name == i.name || (i.alias_a && name == i.alias_a) || (i.alias_b && name == i.alias_b))
      return i.kind;
  return std::nullopt;
}

std::optional<TransformKind> kind_of_letter(std::string_view letter) {
  for (const TransformKindInfo& i : kTransformKinds)
    if (letter == i.letter) return i.kind;
  return std::nullopt;
}

int param_count(TransformKind k, int n_levels) {
  const TransformKindInfo& i = kind_info(k);
  return i.unimodular_block ? n_levels * n_levels : i.params;
}

TagVector encode(const Transformation& t) {
  const TransformKindInfo& i = kind_info(t.kind);
  TagVector v{};
  v[0] = i.tag;
  for (int l = 0; l < t.n_levels; ++l) v[size_t(i.level_col + l)] = t.levels[size_t(l)];
  for (int q = 0; q < t.n_params; ++q) v[size_t(i.param_col + q)] = t.params[size_t(q)];
  return v;
}

std::optional<Transformation> decode(const TagVector& v) {
  const std::optional<TransformKind> k = kind_of_tag(v[0]);
  if (!k) return std::nullopt;
  const TransformKindInfo& i = kind_info(*k);
  Transformation t;
  t.kind = *k;
  t.n_levels = i.max_levels;
  while (t.n_levels > i.min_levels && v[size_t(i.level_col + t.n_levels - 1)] == 0) --t.n_levels;
  for (int l = 0; l < t.n_levels; ++l) t.levels[size_t(l)] = v[size_t(i.level_col + l)];
  t.n_params = param_count(*k, t.n_levels);
  for (int q = 0; q < t.n_params; ++q) t.params[size_t(q)] = v[size_t(i.param_col + q)];
  const int max_params = param_count(*k, i.max_levels);
  for (int q = t.n_params; q < max_params; ++q)
    if (v[size_t(i.param_col + q)] != 0) t.stray_params = true;
  return t;
}

MatrixEntries matrix_entries(const Transformation& t) {
  MatrixEntries e;
  auto put = [&e](int64_t r, int64_t c, int64_t v) { e.at[size_t(e.size++)] = {r, c, v}; };
  const auto& l = t.levels;
  switch (t.kind) {
    case TransformKind::Interchange:  // rows a and b swapped
      put(l[0], l[0], 0);
      put(l[1], l[1], 0);
      put(l[0], l[1], 1);
      put(l[1], l[0], 1);
      break;
    case TransformKind::Reversal:
      put(l[0], l[0], -1);
      break;
    case TransformKind::Skewing:  // the block on the levels, row-major
      for (int r = 0; r < t.n_levels; ++r)
        for (int c = 0; c < t.n_levels; ++c)
          put(l[size_t(r)], l[size_t(c)], t.params[size_t(r * t.n_levels + c)]);
      break;
    case TransformKind::Count:
      break;
  }
  return e;
}

std::string sched_str_term(const Transformation& t) {
  std::string s = std::string(kind_info(t.kind).letter) + "(";
  for (int l = 0; l < t.n_levels; ++l) s += (l ? ",L" : "L") + std::to_string(t.levels[size_t(l)]);
  for (int q = 0; q < t.n_params; ++q) s += "," + std::to_string(t.params[size_t(q)]);
  return s + ")";
}

std::string tag_short_text(const TagVector& v) {
  if (is_no_transformation(v)) return "none";
  const TransformKindInfo& i = kind_info(kind_of_tag(v[0]).value_or(TransformKind::Skewing));
  std::string s = std::string(i.letter) + "(";
  for (int l = 0; l < i.max_levels; ++l)
    s += (l ? "," : "") + std::to_string(v[size_t(i.level_col + l)]);
  int n_levels = i.max_levels;  // as decode counts them
  while (n_levels > i.min_levels && v[size_t(i.level_col + n_levels - 1)] == 0) --n_levels;
  const int np = i.unimodular_block ? n_levels * n_levels : i.params;
  if (np > 0) s += ";";
  for (int q = 0; q < np; ++q) s += (q ? "," : "") + std::to_string(v[size_t(i.param_col + q)]);
  return s + ")";
}

}  // namespace lcm::data
