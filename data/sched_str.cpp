// sched_str dialects (schedule_forms.hpp): recognising a dialect from its first characters, and
// parsing each into the normalised schedule (parse_sched_str).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>

#include "data/json_fields.hpp"
#include "data/schedule_forms.hpp"
#include "data/transformations.hpp"
#include "util/name_table.hpp"

namespace lcm::data {

const char* sched_str_dialect_name(SchedStrDialect d) {
  using D = SchedStrDialect;
  static constexpr NameRow<D> kNames[] = {{D::Empty, "empty"},
                                          {D::PerComputation, "per_computation"},
                                          {D::PerComputationFused, "per_computation_fused"},
                                          {D::Looper, "looper"},
                                          {D::TiraLib, "tiralib"},
                                          {D::Unknown, "unknown"}};
  return name_of(kNames, d, "unknown");
}

SchedStrDialect sched_str_dialect(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  s.remove_prefix(b);
  if (s.empty()) return SchedStrDialect::Empty;
  // TiraLib names the computations of every term with comps=[...] and separates terms by '|'.
  if (s.find("comps=") != std::string_view::npos || s.find('|') != std::string_view::npos)
    return SchedStrDialect::TiraLib;
  if (s[0] == '{') return SchedStrDialect::PerComputation;
  // A term: capital letters and digits, then '(' ("F(", "T2(", "M(").
  size_t i = 0;
  while (i < s.size() && (std::isupper(static_cast<unsigned char>(s[i])) ||
                          std::isdigit(static_cast<unsigned char>(s[i]))))
    ++i;
  if (i == 0 || i + 1 >= s.size() || s[i] != '(') return SchedStrDialect::Unknown;
  // A run of fusion terms followed by a `{name}:` block is the per-computation form's fusion
  // prefix, whether it names computations plainly (F(comp00,comp01), the Tiramisu generators) or
  // LOOPer-style with a level (F({C0,C4},L1), lcm-synth).
  if (s.substr(0, 2) == "F(") {
    size_t k = 0;
    while (k + 1 < s.size() && s[k] == 'F' && s[k + 1] == '(') {
      const size_t close = s.find(')', k);
      if (close == std::string_view::npos) break;
      k = close + 1;
      while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) ++k;
    }
    if (k < s.size() && s[k] == '{') return SchedStrDialect::PerComputationFused;
  }
  // Looper names computations {Cn}; the per-computation form's fusion prefix names them plainly.
  if (s[i + 1] == '{') return SchedStrDialect::Looper;
  if (s.substr(0, 2) == "F(") return SchedStrDialect::PerComputationFused;
  return SchedStrDialect::Unknown;
}

}  // namespace lcm::data

// ---------------------------------------------------------------- parsing (parse_sched_str)

namespace lcm::data {
namespace {

using Tag = std::array<int64_t, 16>;

/// `s` for messages (json_detail::escape_text): printable ASCII kept, other bytes as \xNN, at
/// most `max` bytes ("..." after).
std::string escaped(std::string_view s, size_t max = 60) {
  return json_detail::escape_text(s.data(), s.size(), max);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// One term NAME(args): `text` the whole term as written, `args` split at the top-level commas.
struct Term {
  std::string_view name, text;
  std::vector<std::string_view> args;
};

/// Reads the term starting at s[pos] (after blanks): a capital letter, then capitals, digits or
/// an 'h' (lcm-synth's shift "Sh"), then '(' ... ')' where the closing ')' is the first one outside
/// quotes, [...] and {...}. Advances `pos` past it. Returns "" or why it is not a term.
std::string scan_term(std::string_view s, size_t& pos, Term& t) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
  const size_t b = pos;
  size_t i = pos;
  if (i >= s.size() || !std::isupper(static_cast<unsigned char>(s[i])))
    return "expected a term (a capital letter and '(')";
  while (i < s.size() && (std::isupper(static_cast<unsigned char>(s[i])) ||
                          std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == 'h'))
    ++i;
  t.name = s.substr(b, i - b);
  if (i >= s.size() || s[i] != '(') return "expected '(' after the letter";
  ++i;
  t.args.clear();
  size_t arg_start = i;
  std::vector<char> open;  // the brackets open at this point, innermost last
  char quote = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (open.size() >= 8) return "brackets nested deeper than 8";
      open.push_back(c);
    } else if (c == ']' || c == '}') {
      if (open.empty() || open.back() != (c == ']' ? '[' : '{'))
        return std::string("'") + c + "' closes nothing";
      open.pop_back();
    } else if (c == '(') {
      return "'(' inside a term";
    } else if (c == ')') {
      if (!open.empty()) return std::string("')' before the '") + open.back() + "' is closed";
      t.args.push_back(trim(s.substr(arg_start, i - arg_start)));
      if (t.args.size() == 1 && t.args[0].empty()) t.args.clear();
      pos = i + 1;
      t.text = s.substr(b, pos - b);
      return "";
    } else if (c == ',' && open.empty()) {
      t.args.push_back(trim(s.substr(arg_start, i - arg_start)));
      arg_start = i + 1;
    }
  }
  return quote != 0 ? "a quote that does not close" : "no closing ')'";
}

/// Splits the inside of a [...] or {...} list at its top-level commas (items trimmed).
std::vector<std::string_view> split_list(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  out.push_back(trim(s.substr(start)));
  if (out.size() == 1 && out[0].empty()) out.clear();
  return out;
}

bool parse_int(std::string_view s, int64_t& v) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') return false;
  auto r = std::from_chars(b, e, v);
  return r.ec == std::errc() && r.ptr == e;
}

/// A loop level "L<n>" (n at most 1e6).
bool parse_level(std::string_view s, int& level) {
  int64_t v = 0;
  if (s.size() < 2 || s[0] != 'L' || s[1] == '-' || !parse_int(s.substr(1), v) || v > 1000000)
    return false;
  level = int(v);
  return true;
}

/// The state of one parse: the program, the result, and which single-valued facts each
/// computation already has.
struct Parser {
  const Program& p;
  NormalSchedule& out;
  std::vector<int> unroll_level;  // -1 = no U term
  std::vector<char> has_p, has_t, has_m;
  std::string_view term;  // the term being applied (a view into the sched_str), for messages

  Parser(const Program& prog, NormalSchedule& o, const LoopTree* tree) : p(prog), out(o) {
    const size_t n = p.computations.size();
    out.comps.assign(n, CompSchedule{});
    unroll_level.assign(n, -1);
    has_p.assign(n, 0);
    has_t.assign(n, 0);
    has_m.assign(n, 0);
    (void)tree;
  }

  /// The loops from a root down to the loop listing `comp` in its computations (iterative).
  static std::vector<std::string> tree_path(const LoopTree& t, const std::string& comp) {
    struct Item {
      const LoopNode* node;
      int parent;
    };
    std::vector<Item> items;
    for (const LoopNode& r : t.roots) items.push_back({&r, -1});
    for (size_t k = 0; k < items.size(); ++k) {
      const LoopNode* n = items[k].node;
      for (const std::string& c : n->computations) {
        if (c != comp) continue;
        std::vector<std::string> path;
        for (int j = int(k); j >= 0 && path.size() <= size_t(kMaxLoopTreeDepth);
             j = items[size_t(j)].parent)
          path.push_back(items[size_t(j)].node->loop_name);
        std::reverse(path.begin(), path.end());
        return path;
      }
      for (const LoopNode& ch : n->children) items.push_back({&ch, int(k)});
    }
    return {};
  }

  /// Records the first problem (later ones are not reached: the parse stops); returns false.
  bool fail(const std::string& why) {
    if (out.problem.empty()) {
      out.problem = "bad_sched_str";
      out.detail = (term.empty() ? std::string() : "term \"" + escaped(term) + "\": ") + why;
    }
    return false;
  }

  int depth(int c) const { return int(p.computations[size_t(c)].iterators.size()); }
  const std::string& cname(int c) const { return p.computations[size_t(c)].name; }

  bool level_arg(int c, std::string_view a, int limit, int& level) {
    if (!parse_level(a, level)) return fail("\"" + escaped(a, 20) + "\" is not a loop level Ln");
    if (level >= limit)
      return fail("level L" + std::to_string(level) + " is beyond the depth " +
                  std::to_string(depth(c)) + " of computation " + escaped(cname(c), 40));
    return true;
  }
  bool int_arg(std::string_view a, int64_t& v) {
    if (!parse_int(a, v)) return fail("\"" + escaped(a, 20) + "\" is not an integer");
    return true;
  }
  bool factor_arg(std::string_view a, int64_t& v) {
    if (!int_arg(a, v)) return false;
    if (v <= 0) return fail("factor " + std::to_string(v) + " is not > 0");
    return true;
  }
  bool arity(const std::vector<std::string_view>& a, size_t n, const char* what) {
    if (a.size() == n) return true;
    return fail(std::string(what) + " takes " + std::to_string(n) + " argument" +
                (n == 1 ? "" : "s") + ", got " + std::to_string(a.size()));
  }

  // ---- the terms, applied to computation c with the arguments after its computation list

  bool apply_p(int c, const std::vector<std::string_view>& a) {
    int l = 0;
    if (!arity(a, 1, "P") || !level_arg(c, a[0], depth(c), l)) return false;
    if (has_p[size_t(c)]) return fail("a second P for computation " + escaped(cname(c), 40));
    has_p[size_t(c)] = 1;
    out.comps[size_t(c)].parallelized_dim = p.computations[size_t(c)].iterators[size_t(l)];
    return true;
  }
  /// T2 / T3 / TG: k levels then k factors.
  bool apply_t(int c, const std::vector<std::string_view>& a, size_t k, const char* what) {
    if (k == 0) {  // TG: any even count
      if (a.empty() || a.size() % 2 != 0)
        return fail(std::string(what) + " takes levels then as many factors, got " +
                    std::to_string(a.size()) + " arguments");
      k = a.size() / 2;
    } else if (!arity(a, 2 * k, what)) {
      return false;
    }
    CompSchedule& cs = out.comps[size_t(c)];
    std::vector<std::string> dims;
    std::vector<int64_t> factors;
    std::vector<int> seen;
    for (size_t i = 0; i < k; ++i) {
      int l = 0;
      int64_t f = 0;
      if (!level_arg(c, a[i], depth(c), l) || !factor_arg(a[k + i], f)) return false;
      if (std::find(seen.begin(), seen.end(), l) != seen.end())
        return fail("level L" + std::to_string(l) + " tiled twice");
      seen.push_back(l);
      dims.push_back(p.computations[size_t(c)].iterators[size_t(l)]);
      factors.push_back(f);
    }
    if (has_t[size_t(c)]) return fail("a second tiling for computation " + escaped(cname(c), 40));
    has_t[size_t(c)] = 1;
    cs.tiling_dims = std::move(dims);
    cs.tiling_factors = std::move(factors);
    return true;
  }
  bool apply_u(int c, const std::vector<std::string_view>& a) {
    int l = 0;
    int64_t f = 0;
    // The level counts the loops after tiling; checked against them once every term is read.
    if (!arity(a, 2, "U") || !level_arg(c, a[0], 1 << 20, l) || !factor_arg(a[1], f)) return false;
    if (unroll_level[size_t(c)] >= 0)
      return fail("a second U for computation " + escaped(cname(c), 40));
    unroll_level[size_t(c)] = l;
    out.comps[size_t(c)].unrolling_factor = f;
    return true;
  }
  /// Sh(Ln,f): a shift of level n by f (lcm-synth writes it; the Tiramisu generators write no
  /// shift term).
  bool apply_sh(int c, const std::vector<std::string_view>& a) {
    int l = 0;
    int64_t f = 0;
    if (!arity(a, 2, "Sh") || !level_arg(c, a[0], depth(c), l) || !int_arg(a[1], f)) return false;
    out.comps[size_t(c)].shiftings.emplace_back(p.computations[size_t(c)].iterators[size_t(l)], f);
    return true;
  }
  /// A tag-vector term (transformations.hpp): its letter, its levels Ln, then its parameters;
  /// I(La,Lb), R(La), S(La,Lb,p1..p4) and S(La,Lb,Lc,p1..p9) (the whole 2×2 / 3×3 block of the
  /// tag vector, model-spec §3.4, as lcm-synth writes it). Skewing also takes S(La,Lb,a,b): the
  /// real data's 2-D skew by factors a, b (apply_skew_factors).
  bool apply_tag(int c, TransformKind k, const std::vector<std::string_view>& a) {
    if (k == TransformKind::Skewing && a.size() == 4) return apply_skew_factors(c, a);
    const TransformKindInfo& info = kind_info(k);
    Transformation t;
    t.kind = k;
    for (int nl = info.min_levels; nl <= info.max_levels; ++nl)
      if (a.size() == size_t(nl + param_count(k, nl))) t.n_levels = nl;
    if (t.n_levels == 0) {
      if (info.sched_str_usage)
        return fail(std::string(info.letter) + " takes " + info.sched_str_usage + ", got " +
                    std::to_string(a.size()));
      return arity(a, size_t(info.min_levels + param_count(k, info.min_levels)), info.letter);
    }
    for (int i = 0; i < t.n_levels; ++i) {
      int l = 0;
      if (!level_arg(c, a[size_t(i)], depth(c), l)) return false;
      t.levels[size_t(i)] = l;
      for (int j = 0; j < i; ++j)
        if (t.levels[size_t(j)] == l)
          return fail(std::string(info.noun) + " of a level with itself");
    }
    t.n_params = param_count(k, t.n_levels);
    for (int q = 0; q < t.n_params; ++q)
      if (!int_arg(a[size_t(t.n_levels + q)], t.params[size_t(q)])) return false;
    out.comps[size_t(c)].transformations.push_back(encode(t));
    return true;
  }
  /// S(La,Lb,a,b): the real data's 2-D skew by factors a, b, completed to a unimodular 2×2 block
  /// (skew_completion).
  bool apply_skew_factors(int c, const std::vector<std::string_view>& a) {
    int l0 = 0, l1 = 0;
    int64_t fa = 0, fb = 0, x = 0, y = 0;
    if (!level_arg(c, a[0], depth(c), l0) || !level_arg(c, a[1], depth(c), l1) ||
        !int_arg(a[2], fa) || !int_arg(a[3], fb))
      return false;
    if (l0 == l1) return fail("skew of a level with itself");
    if (!skew_completion(fa, fb, x, y))
      return fail("skew factors " + std::to_string(fa) + ", " + std::to_string(fb) +
                  " have no unimodular completion (gcd ≠ 1)");
    Transformation t;
    t.kind = TransformKind::Skewing;
    t.n_levels = 2;
    t.levels = {l0, l1, 0};
    t.n_params = 4;
    t.params = {fa, fb, x, y};
    out.comps[size_t(c)].transformations.push_back(encode(t));
    return true;
  }
  /// A whole matrix: depth² integers.
  bool apply_m(int c, const std::vector<std::string_view>& a) {
    const int n = depth(c);
    if (a.size() != size_t(n) * size_t(n))
      return fail("matrix of " + std::to_string(a.size()) + " entries for computation " +
                  escaped(cname(c), 40) + " of depth " + std::to_string(n) + " (needs " +
                  std::to_string(n * n) + ")");
    if (has_m[size_t(c)]) return fail("a second M for computation " + escaped(cname(c), 40));
    has_m[size_t(c)] = 1;
    out.has_tag_order = false;
    // The identity (most LOOPer matrices) without building anything.
    bool identity = true;
    for (size_t i = 0; i < a.size() && identity; ++i)
      identity = a[i] == (i % (size_t(n) + 1) == 0 ? "1" : "0");
    if (identity) return true;
    std::vector<int64_t> m(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      if (!int_arg(a[i], m[i])) return false;
    std::vector<Tag> tags;
    const std::string why = matrix_to_tags(m, n, tags);
    if (!why.empty()) return fail("matrix " + why);
    auto& tr = out.comps[size_t(c)].transformations;
    tr.insert(tr.end(), tags.begin(), tags.end());
    return true;
  }

  /// The terms a dialect accepts after its computation list (F is read by each dialect).
  struct TermSet {
    bool tags, shift, general_tiling, matrix;  // I/R/S (the tag kinds), Sh, TG, M
    const char* where;                         // for "unknown letter X in <where>"
  };
  static constexpr TermSet kPerComputationTerms{true, true, false, false, "a computation block"};
  static constexpr TermSet kLooperTerms{false, false, false, true, "the LOOPer form"};
  static constexpr TermSet kTiraLibTerms{true, false, true, true, "the TiraLib form"};

  /// Applies term `name` with arguments `a` to computation c (P, U, T2 and T3 in every dialect).
  bool apply_term(int c, std::string_view name, const std::vector<std::string_view>& a,
                  const TermSet& d) {
    if (name == "P") return apply_p(c, a);
    if (name == "U") return apply_u(c, a);
    if (name == "T2") return apply_t(c, a, 2, "T2");
    if (name == "T3") return apply_t(c, a, 3, "T3");
    if (d.general_tiling && name == "TG") return apply_t(c, a, 0, "TG");
    if (d.matrix && name == "M") return apply_m(c, a);
    if (d.shift && name == "Sh") return apply_sh(c, a);
    if (d.tags)
      if (const std::optional<TransformKind> k = kind_of_letter(name)) return apply_tag(c, *k, a);
    return fail("unknown letter " + escaped(name, 10) + " in " + d.where);
  }

  /// Reads the term at s[pos] into `t` and makes it the term of messages; false (failed) when
  /// it is no term.
  bool next_term(std::string_view s, size_t& pos, Term& t) {
    const size_t b = pos;
    const std::string why = scan_term(s, pos, t);
    if (!why.empty()) {
      term = s.substr(b, 40);
      return fail(why);
    }
    term = t.text;
    return true;
  }

  /// F with one level argument (`rest`) fusing the computations `cs` at that level.
  bool leveled_fusion(const std::vector<int>& cs, const std::vector<std::string_view>& rest) {
    int level = 0;
    if (!arity(rest, 1, "F")) return false;
    for (int c : cs)
      if (!level_arg(c, rest[0], depth(c), level)) return false;
    return add_fusions(cs, level);
  }

  /// One Fusion per consecutive pair of `cs` at `level`.
  bool add_fusions(const std::vector<int>& cs, int level) {
    if (cs.size() < 2) return fail("a fusion needs two computations");
    for (size_t i = 0; i + 1 < cs.size(); ++i) {
      if (cs[i] == cs[i + 1]) return fail("a computation fused with itself");
      out.fusions.push_back(Fusion{cname(cs[i]), cname(cs[i + 1]), level});
    }
    return true;
  }

  /// The checks that need every term: an unrolled level within the nest after tiling.
  bool finish() {
    for (size_t c = 0; c < out.comps.size(); ++c) {
      const int l = unroll_level[c];
      const int limit = depth(int(c)) + int(out.comps[c].tiling_dims.size());
      if (l >= limit) {
        term = {};
        return fail("U level L" + std::to_string(l) + " of computation " +
                    escaped(cname(int(c)), 40) + " is beyond its " + std::to_string(limit) +
                    " loops after tiling");
      }
    }
    return true;
  }

  int comp_by_name(std::string_view name) const {
    for (size_t c = 0; c < p.computations.size(); ++c)
      if (p.computations[c].name == name) return int(c);
    return -1;
  }

  // ---- dialects

  /// `{name}:terms{name}:terms...` from s[pos]; the fusion prefix has been read.
  bool per_computation(std::string_view s, size_t pos) {
    std::vector<char> seen(p.computations.size(), 0);
    Term t;  // reused: its argument list keeps its capacity
    while (pos < s.size()) {
      term = {};
      if (s[pos] == ' ' || s[pos] == '\t') {
        ++pos;
        continue;
      }
      if (s[pos] != '{')
        return fail("expected '{computation}:' at \"" + escaped(s.substr(pos), 30) + "\"");
      const size_t close = s.find('}', pos);
      if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
        return fail("'{' at \"" + escaped(s.substr(pos), 30) + "\" is not a '{computation}:'");
      const std::string_view name = s.substr(pos + 1, close - pos - 1);
      const int c = comp_by_name(name);
      if (c < 0) return fail("unknown computation \"" + escaped(name, 40) + "\"");
      if (seen[size_t(c)]) return fail("two blocks for computation " + escaped(name, 40));
      seen[size_t(c)] = 1;
      pos = close + 2;
      while (pos < s.size() && s[pos] != '{') {
        if (s[pos] == ' ' || s[pos] == '\t') {
          ++pos;
          continue;
        }
        if (!next_term(s, pos, t)) return false;
        if (!apply_term(c, t.name, t.args, kPerComputationTerms)) return false;
      }
    }
    term = {};
    return true;
  }

  /// The fusion prefix F(a,b,..)F(..) of PerComputationFused, fusion levels from `tree`; or
  /// F({Ca,Cb},Ln) with its level.
  bool fused_prefix(std::string_view s, size_t& pos, const LoopTree* tree) {
    Term t;
    while (true) {
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
      if (pos >= s.size() || s[pos] != 'F') return true;
      if (!next_term(s, pos, t)) return false;
      if (t.name != "F") return fail("unknown letter " + escaped(t.name, 10) + " before a block");
      std::vector<int> cs;
      if (!t.args.empty() && !t.args[0].empty() && t.args[0][0] == '{') {  // F({C0,C4},L1)
        if (!looper_comps(t.args[0], cs)) return false;
        const std::vector<std::string_view> rest(t.args.begin() + 1, t.args.end());
        if (!leveled_fusion(cs, rest)) return false;
        continue;
      }
      for (std::string_view a : t.args) {
        const int c = comp_by_name(a);
        if (c < 0) return fail("unknown computation \"" + escaped(a, 40) + "\"");
        cs.push_back(c);
      }
      const size_t first = out.fusions.size();
      if (!add_fusions(cs, -1)) return false;
      for (size_t i = first; i < out.fusions.size(); ++i) {
        Fusion& f = out.fusions[i];
        f.level = tree ? shared_depth(*tree, f.comp_a, f.comp_b) : -1;
        if (f.level < 0) out.has_fusion_levels = false;
      }
    }
  }

  /// Depth (0-based) of the deepest loop enclosing both computations in `t`, or -1.
  static int shared_depth(const LoopTree& t, const std::string& a, const std::string& b) {
    const std::vector<std::string> pa = tree_path(t, a), pb = tree_path(t, b);
    size_t k = 0;
    while (k < pa.size() && k < pb.size() && pa[k] == pb[k]) ++k;
    return int(k) - 1;
  }

  /// "{C1,C2}" → computation indices.
  bool looper_comps(std::string_view a, std::vector<int>& cs) {
    if (a.size() < 2 || a.front() != '{' || a.back() != '}')
      return fail("\"" + escaped(a, 20) + "\" is not a computation list {Cn,...}");
    cs.clear();
    for (std::string_view item : split_list(a.substr(1, a.size() - 2))) {
      int64_t v = 0;
      if (item.size() < 2 || item[0] != 'C' || item[1] == '-' || !parse_int(item.substr(1), v))
        return fail("\"" + escaped(item, 20) + "\" is not a computation Cn");
      if (v >= int64_t(p.computations.size()))
        return fail("unknown computation C" + std::to_string(v) + " (the program has " +
                    std::to_string(p.computations.size()) + ")");
      if (std::find(cs.begin(), cs.end(), int(v)) != cs.end())
        return fail("computation C" + std::to_string(v) + " listed twice");
      cs.push_back(int(v));
    }
    if (cs.empty()) return fail("an empty computation list");
    return true;
  }

  bool looper(std::string_view s) {
    size_t pos = 0;
    std::vector<int> cs;
    std::vector<std::string_view> rest;
    Term t;
    while (true) {
      term = {};
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
      if (pos >= s.size()) return true;
      if (!next_term(s, pos, t)) return false;
      if (t.args.empty()) return fail("no computation list");
      if (!looper_comps(t.args[0], cs)) return false;
      rest.assign(t.args.begin() + 1, t.args.end());
      if (t.name == "F") {
        if (!leveled_fusion(cs, rest)) return false;
        continue;
      }
      for (int c : cs)
        if (!apply_term(c, t.name, rest, kLooperTerms)) return false;
    }
  }

  /// comps=['a', "b", c] → indices.
  bool tiralib_comps(std::string_view a, std::vector<int>& cs) {
    a = trim(a.substr(6));
    if (a.size() < 2 || a.front() != '[' || a.back() != ']')
      return fail("comps= is not a list [...]");
    cs.clear();
    for (std::string_view item : split_list(a.substr(1, a.size() - 2))) {
      if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
          item.back() == item.front())
        item = item.substr(1, item.size() - 2);
      const int c = comp_by_name(item);
      if (c < 0) return fail("unknown computation \"" + escaped(item, 40) + "\"");
      if (std::find(cs.begin(), cs.end(), c) != cs.end())
        return fail("computation " + escaped(item, 40) + " listed twice");
      cs.push_back(c);
    }
    if (cs.empty()) return fail("an empty comps list");
    return true;
  }

  bool tiralib(std::string_view s) {
    size_t start = 0;
    std::vector<int> cs;
    int terms = 0;
    while (start <= s.size()) {
      // The next '|' outside quotes and brackets ends this term.
      size_t end = start;
      int depth_b = 0;
      char quote = 0;
      for (; end < s.size(); ++end) {
        const char ch = s[end];
        if (quote != 0) {
          if (ch == quote) quote = 0;
        } else if (ch == '\'' || ch == '"') {
          quote = ch;
        } else if (ch == '[' || ch == '{' || ch == '(') {
          ++depth_b;
        } else if (ch == ']' || ch == '}' || ch == ')') {
          --depth_b;
        } else if (ch == '|' && depth_b == 0) {
          break;
        }
      }
      const std::string_view piece = trim(s.substr(start, end - start));
      start = end + 1;
      term = piece;
      if (piece.empty()) {
        // a string of separators only ("|||") is no schedule, never the identity
        if (end >= s.size()) return terms > 0 || fail("no term, only '|' separators");
        continue;  // "a||b" or a trailing '|', as TiraLib skips empty pieces
      }
      ++terms;
      if (piece.substr(0, 2) == "D(")
        return fail("D (loop distribution) has no counterpart in lcm's schedule");
      if (piece.substr(0, 2) == "E(")
        return fail("E (expansion) has no counterpart in lcm's schedule");
      Term t;
      size_t pos = 0;
      const std::string why = scan_term(piece, pos, t);
      if (!why.empty()) return fail(why);
      if (!trim(piece.substr(pos)).empty())
        return fail("text after the term: \"" + escaped(piece.substr(pos), 20) + "\"");
      // Positional arguments, then comps=[...] last.
      if (t.args.empty() || t.args.back().substr(0, 6) != "comps=") return fail("no comps=[...]");
      if (!tiralib_comps(t.args.back(), cs)) return false;
      std::vector<std::string_view> rest(t.args.begin(), t.args.end() - 1);
      if (t.name == "F") {
        if (!leveled_fusion(cs, rest)) return false;
        if (end >= s.size()) return true;
        continue;
      }
      if (t.name == "M") {  // M([m00, m01, ...],comps=['c'])
        if (!arity(rest, 1, "M")) return false;
        const std::string_view l = rest[0];
        if (l.size() < 2 || l.front() != '[' || l.back() != ']')
          return fail("the matrix is not a list [...]");
        rest = split_list(l.substr(1, l.size() - 2));
      }
      for (int c : cs)
        if (!apply_term(c, t.name, rest, kTiraLibTerms)) return false;
      if (end >= s.size()) return true;
    }
    return true;
  }
};

}  // namespace

NormalSchedule parse_sched_str(std::string_view s, const Program& p, const LoopTree* tree) {
  NormalSchedule out;
  out.has_shiftings = false;  // no dialect has a shift term
  Parser ps(p, out, tree);
  const SchedStrDialect d = sched_str_dialect(s);
  bool ok = true;
  switch (d) {
    case SchedStrDialect::Empty:
      break;
    case SchedStrDialect::PerComputation:
      ok = ps.per_computation(s, 0);
      break;
    case SchedStrDialect::PerComputationFused: {
      size_t pos = 0;
      ok = ps.fused_prefix(s, pos, tree) && ps.per_computation(s, pos);
      break;
    }
    case SchedStrDialect::Looper:
      ok = ps.looper(s);
      break;
    case SchedStrDialect::TiraLib:
      ok = ps.tiralib(s);
      break;
    case SchedStrDialect::Unknown:
      ps.term = {};
      ok = ps.fail("not a known sched_str dialect: \"" + escaped(s, 40) + "\"");
      break;
  }
  if (ok) ps.finish();
  return out;
}

NormalSchedule normal_schedule_of(const Schedule& s) {
  NormalSchedule n;
  n.comps = s.comps;
  n.fusions = s.fusions;
  return n;
}

}  // namespace lcm::data
