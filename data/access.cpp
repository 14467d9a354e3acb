// Access and expression pieces of the feature extraction (docs/model-spec.md §3.6–§3.7): the
// write-access ISL relation parser, the 6×7 framing/padding of access matrices, and the post-order
// 11-wide expression rows.
#include <cctype>
#include <string>

#include "data/features.hpp"
#include "util/name_table.hpp"

namespace lcm::data {

namespace {

bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// Word tokens (\w+) of `s`, in order.
std::vector<std::string> word_tokens(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    if (is_word(s[i])) {
      size_t j = i;
      while (j < s.size() && is_word(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

/// Splits the text between a '[' at `open` and its matching ']' at top-level commas.
/// Returns the entries and sets `close` to the position of the matching ']'.
std::vector<std::string> bracket_entries(const std::string& s, size_t open, size_t& close,
                                         const std::string& isl) {
  std::vector<std::string> entries;
  int depth = 0;
  std::string cur;
  for (size_t i = open + 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') {
      if (depth == 0) {
        if (c != ']') break;
        close = i;
        if (!(entries.empty() && cur.find_first_not_of(" \t\r\n") == std::string::npos))
          entries.push_back(cur);
        return entries;
      }
      --depth;
    }
    if (c == ',' && depth == 0) {
      entries.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  throw DataError("write access relation \"" + isl + "\": unbalanced brackets");
}

/// Removes every "name' =" prefix (primed output names, e.g. "k' = k" → " k").
std::string strip_primes(const std::string& e) {
  std::string out;
  size_t i = 0;
  while (i < e.size()) {
    if (is_word(e[i])) {
      size_t j = i;
      while (j < e.size() && is_word(e[j])) ++j;
      size_t k = j;
      if (k < e.size() && e[k] == '\'') {
        ++k;
        while (k < e.size() && std::isspace(static_cast<unsigned char>(e[k]))) ++k;
        if (k < e.size() && e[k] == '=') {
          i = k + 1;
          continue;
        }
      }
      out.append(e, i, j - i);
      i = j;
    } else {
      out += e[i];
      ++i;
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> write_access_matrix(const std::string& isl,
                                                  const std::vector<std::string>& iters) {
  // Work inside the braces when present ("[N] -> { S[i] -> b[i] }" carries parameters before).
  std::string body = isl;
  const size_t lb = isl.find('{');
  if (lb != std::string::npos) {
    const size_t rb = isl.rfind('}');
    if (rb == std::string::npos || rb < lb)
      throw DataError("write access relation \"" + isl + "\": unbalanced braces");
    body = isl.substr(lb + 1, rb - lb - 1);
  }
  const size_t arrow = body.find("->");
  if (arrow == std::string::npos) throw DataError("write access relation \"" + isl + "\": no '->'");
  // computation side: the first [...] before "->"
  const size_t dopen = body.find('[');
  if (dopen == std::string::npos || dopen > arrow)
    throw DataError("write access relation \"" + isl + "\": no '[...]' before '->'");
  size_t dclose = 0;
  std::vector<std::string> dom = bracket_entries(body, dopen, dclose, isl);
  if (dclose > arrow) throw DataError("write access relation \"" + isl + "\": malformed domain");
  std::vector<std::string> comp_names;
  for (const auto& e : dom) {
    auto tok = word_tokens(e);
    if (tok.size() != 1)
      throw DataError("write access relation \"" + isl + "\": domain entry \"" + e +
                      "\" is not a name");
    comp_names.push_back(tok[0]);
  }
  if (comp_names.size() != iters.size())
    throw DataError("write access relation \"" + isl + "\": " + std::to_string(comp_names.size()) +
                    " domain dimensions for a computation with " + std::to_string(iters.size()) +
                    " iterators");
  // buffer side: optional name, then [...]
  size_t p = arrow + 2;
  while (p < body.size() && std::isspace(static_cast<unsigned char>(body[p]))) ++p;
  while (p < body.size() && is_word(body[p])) ++p;
  while (p < body.size() && std::isspace(static_cast<unsigned char>(body[p]))) ++p;
  if (p >= body.size() || body[p] != '[')
    throw DataError("write access relation \"" + isl + "\": no buffer '[...]'");
  size_t bclose = 0;
  std::vector<std::string> buf = bracket_entries(body, p, bclose, isl);
  const size_t n = comp_names.size();
  std::vector<std::vector<int>> m(buf.size(), std::vector<int>(n + 1, 0));
  for (size_t r = 0; r < buf.size(); ++r) {
    for (const auto& tok : word_tokens(strip_primes(buf[r]))) {
      for (size_t j = 0; j < n; ++j)
        if (tok == comp_names[j]) {  // first match; constants/offsets are ignored (§3.6)
          m[r][j] = 1;
          break;
        }
    }
  }
  return m;
}

std::array<float, kAccessBlockWidth> pad_access_matrix(const std::vector<std::vector<int>>& m,
                                                       int n) {
  if (n < 0 || n > kMaxDepth)
    throw DataError("access matrix for a depth-" + std::to_string(n) + " computation");
  if (m.size() > size_t(kMaxDepth))
    throw DataError("access matrix has " + std::to_string(m.size()) + " buffer dimensions (max 5)");
  for (const auto& row : m)
    if (row.size() != size_t(n + 1))
      throw DataError("access matrix row has " + std::to_string(row.size()) +
                      " columns, expected " + std::to_string(n + 1));
  std::array<float, kAccessBlockWidth> out{};
  constexpr int W = kMaxDepth + 2;  // 7 columns
  // row 0 = the prepended ones row: columns 0..n and the constant column 6
  for (int c = 0; c <= n; ++c) out[c] = 1.0f;
  out[W - 1] = 1.0f;
  for (size_t r = 0; r < m.size(); ++r) {
    float* row = &out[(r + 1) * W];
    row[0] = 1.0f;  // prepended ones column
    for (int c = 0; c < n; ++c) row[c + 1] = float(m[r][c]);
    row[W - 1] = float(m[r][n]);  // constant column → last column
  }
  return out;
}

namespace {
void post_order(const ExprNode& e, int dtype, std::vector<std::array<float, kExprNodeWidth>>& out,
                int depth) {
  if (depth > 10000) throw DataError("expression nested too deeply");
  for (const auto& ch : e.children) post_order(ch, dtype, out, depth + 1);
  std::array<float, kExprNodeWidth> row{};
  static constexpr NameRow<int> kOps[] = {{0, "add"},  {1, "sub"}, {2, "mul"}, {3, "div"},
                                          {4, "sqrt"}, {5, "min"}, {6, "max"}};
  int op = 7;  // "other": access, value, cast, minus, ...
  value_of(kOps, e.type, &op);
  row[op] = 1.0f;
  if (dtype >= 0) row[8 + dtype] = 1.0f;
  out.push_back(row);
}
}  // namespace

std::vector<std::array<float, kExprNodeWidth>> expression_rows(const Computation& c) {
  int dtype = -1;
  if (c.data_type == "int32")
    dtype = 0;
  else if (c.data_type == "float32")
    dtype = 1;
  else if (c.data_type == "float64")
    dtype = 2;
  std::vector<std::array<float, kExprNodeWidth>> out;
  post_order(c.expression, dtype, out, 0);
  return out;
}

}  // namespace lcm::data
