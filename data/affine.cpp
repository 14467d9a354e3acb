// Affine pieces of the feature extraction (docs/model-spec.md §3.4–§3.5, Q4/Q5): the loop-bound
// parser, the iteration-domain matrices A·x ≤ b, the transformation tag → matrix conversion, the
// composition T = M_m⋯M_1 and its float64 inverse.
#include <cctype>
#include <cmath>
#include <string>

#include "data/features.hpp"
#include "data/transformations.hpp"

namespace lcm::data {

namespace {

/// Recursive-descent parser over one bound string. Grammar (whitespace ignored):
///   expr    := unary (('+' | '-') unary)*
///   unary   := ('-' | '+') unary | primary
///   primary := INT | IDENT | '(' expr ')' | ('max' | 'Max') '(' expr (',' expr)* ')'
class AffineParser {
 public:
  explicit AffineParser(const std::string& t) : t_(t) {}

  AffineExpr parse() {
    skip_ws();
    if (pos_ >= t_.size()) fail("empty bound");
    AffineExpr e = expr();
    skip_ws();
    if (pos_ != t_.size()) fail(std::string("unexpected '") + t_[pos_] + "'");
    e.used_max = used_max_;
    // drop zero coefficients (e.g. "i - i + 3")
    for (auto it = e.coef.begin(); it != e.coef.end();)
      it = it->second == 0 ? e.coef.erase(it) : std::next(it);
    return e;
  }

 private:
  const std::string& t_;
  size_t pos_ = 0;
  bool used_max_ = false;
  int depth_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw DataError("affine bound \"" + t_ + "\": " + why + " at offset " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  static int64_t checked_add(int64_t a, int64_t b, const AffineParser& p) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) p.fail("integer overflow");
    return r;
  }
  static void add_into(AffineExpr& dst, const AffineExpr& src, int sign, const AffineParser& p) {
    dst.constant = checked_add(dst.constant, sign * src.constant, p);
    for (const auto& [k, v] : src.coef) dst.coef[k] = checked_add(dst.coef[k], sign * v, p);
  }
  static AffineExpr negate(AffineExpr e) {
    e.constant = -e.constant;
    for (auto& kv : e.coef) kv.second = -kv.second;
    return e;
  }

  AffineExpr expr() {
    if (++depth_ > 200) fail("nesting too deep");
    AffineExpr acc = unary();
    for (;;) {
      skip_ws();
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) {
        int sign = t_[pos_] == '+' ? 1 : -1;
        ++pos_;
        AffineExpr rhs = unary();
        add_into(acc, rhs, sign, *this);
      } else {
        break;
      }
    }
    --depth_;
    return acc;
  }

  AffineExpr unary() {
    skip_ws();
    if (pos_ < t_.size() && (t_[pos_] == '-' || t_[pos_] == '+')) {
      bool neg = t_[pos_] == '-';
      ++pos_;
      if (++depth_ > 200) fail("nesting too deep");
      AffineExpr e = unary();
      --depth_;
      return neg ? negate(e) : e;
    }
    return primary();
  }

  AffineExpr primary() {
    skip_ws();
    if (pos_ >= t_.size()) fail("unexpected end");
    char ch = t_[pos_];
    AffineExpr e;
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      int64_t v = 0;
      while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) {
        if (__builtin_mul_overflow(v, int64_t(10), &v) ||
            __builtin_add_overflow(v, int64_t(t_[pos_] - '0'), &v))
          fail("integer overflow");
        ++pos_;
      }
      if (pos_ < t_.size() && (std::isalpha(static_cast<unsigned char>(t_[pos_])) ||
                               t_[pos_] == '_' || t_[pos_] == '.'))
        fail("malformed number");
      e.constant = v;
      return e;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t start = pos_;
      while (pos_ < t_.size() &&
             (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_'))
        ++pos_;
      std::string name = t_.substr(start, pos_ - start);
      skip_ws();
      if (pos_ < t_.size() && t_[pos_] == '(') {
        if (name != "max" && name != "Max") fail("unsupported function '" + name + "'");
        ++pos_;
        used_max_ = true;
        AffineExpr last = expr();
        skip_ws();
        while (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          last = expr();  // max(a, b, ..) keeps its last argument (model-spec §3.5 step 2)
          skip_ws();
        }
        if (pos_ >= t_.size() || t_[pos_] != ')') fail("expected ')' after max arguments");
        ++pos_;
        return last;
      }
      e.coef[name] = 1;
      return e;
    }
    if (ch == '(') {
      ++pos_;
      e = expr();
      skip_ws();
      if (pos_ >= t_.size() || t_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return e;
    }
    fail(std::string("unexpected '") + ch + "'");
  }
};

}  // namespace

AffineExpr parse_affine(const std::string& text) {
  return AffineParser(text).parse();
}

void iteration_domain(const Program& p, const Computation& c, std::vector<double>& A,
                      std::vector<double>& b) {
  const int n = int(c.iterators.size());
  A.assign(size_t(2 * n) * n, 0.0);
  b.assign(size_t(2 * n), 0.0);
  auto column_of = [&](const std::string& name) {
    for (int j = 0; j < n; ++j)
      if (c.iterators[j] == name) return j;
    return -1;
  };
  for (int i = 0; i < n; ++i) {
    const int it = p.iterator_index(c.iterators[i]);
    if (it < 0)
      throw DataError("computation " + c.name + ": iterator " + c.iterators[i] +
                      " is not a program iterator");
    const Iterator& iter = p.iterators[it];
    for (int side = 0; side < 2; ++side) {  // 0 = lower bound (row 2i), 1 = upper bound (row 2i+1)
      const std::string& text = side == 0 ? iter.lower.text : iter.upper.text;
      const std::string what =
          std::string(side == 0 ? "lower" : "upper") + " bound \"" + text + "\" of " + iter.name;
      AffineExpr e;
      try {
        e = parse_affine(text);
      } catch (const DataError& err) {
        throw DataError("computation " + c.name + ": " + what + ": " + err.what());
      }
      if (side == 1 && e.used_max) throw DataError("computation " + c.name + ": max() in " + what);
      const int row = 2 * i + side;
      A[size_t(row) * n + i] = side == 0 ? -1.0 : 1.0;  // step 1
      for (const auto& [name, coef] : e.coef) {
        const int j = column_of(name);
        if (j < 0)
          throw DataError("computation " + c.name + ": " + what + " uses " + name +
                          ", not one of its iterators");
        if (j == i)
          throw DataError("computation " + c.name + ": " + what + " refers to its own iterator");
        if (coef != 1 && coef != -1)
          throw DataError("computation " + c.name + ": non-unit coefficient in " + what);
        // Q4 fixed rule: lower row gets +1 for +x_j, −1 for −x_j; upper row the opposite.
        A[size_t(row) * n + j] = side == 0 ? double(coef) : double(-coef);
      }
      b[size_t(row)] = side == 0 ? -double(e.constant) : double(e.constant) - 1.0;
    }
  }
}

std::vector<double> transformation_matrix(const std::array<int64_t, 16>& tag, int n) {
  std::vector<double> m(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) m[size_t(i) * n + i] = 1.0;
  if (is_no_transformation(tag)) return m;
  const std::optional<Transformation> t = decode(tag);
  if (!t) throw DataError("unknown transformation type " + std::to_string(tag[0]));
  for (int l = 0; l < t->n_levels; ++l) {
    const int64_t level = t->levels[size_t(l)];
    if (level < 0 || level >= n)
      throw DataError("transformation tag type " + std::to_string(tag[0]) + ": loop level " +
                      std::to_string(level) + " outside a depth-" + std::to_string(n) + " nest");
  }
  const MatrixEntries e = matrix_entries(*t);
  for (int k = 0; k < e.size; ++k) {
    const MatrixEntry& x = e.at[size_t(k)];
    m[size_t(x.row) * n + size_t(x.col)] = double(x.value);
  }
  return m;
}

std::vector<double> composed_transformation(const CompSchedule& s, int n) {
  std::vector<double> t(size_t(n) * n, 0.0), tmp(size_t(n) * n);
  for (int i = 0; i < n; ++i) t[size_t(i) * n + i] = 1.0;
  for (const auto& tag : s.transformations) {
    if (is_no_transformation(tag)) continue;
    const std::vector<double> m = transformation_matrix(tag, n);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) {
        double acc = 0;
        for (int k = 0; k < n; ++k) acc += m[size_t(r) * n + k] * t[size_t(k) * n + c];
        tmp[size_t(r) * n + c] = acc;  // T ← M · T (each new matrix on the left, §3.4)
      }
    t.swap(tmp);
  }
  return t;
}

std::vector<double> inverse_matrix(const std::vector<double>& m, int n) {
  if (m.size() != size_t(n) * n) throw DataError("inverse_matrix: size mismatch");
  const int w = 2 * n;
  std::vector<double> a(size_t(n) * w, 0.0);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) a[size_t(r) * w + c] = m[size_t(r) * n + c];
    a[size_t(r) * w + n + r] = 1.0;
  }
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(a[size_t(r) * w + col]) > std::fabs(a[size_t(piv) * w + col])) piv = r;
    if (std::fabs(a[size_t(piv) * w + col]) < 1e-9)
      throw DataError("singular transformation matrix");
    if (piv != col)
      for (int c = 0; c < w; ++c) std::swap(a[size_t(piv) * w + c], a[size_t(col) * w + c]);
    const double inv_p = 1.0 / a[size_t(col) * w + col];
    for (int c = 0; c < w; ++c) a[size_t(col) * w + c] *= inv_p;
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[size_t(r) * w + col];
      if (f == 0.0) continue;
      for (int c = 0; c < w; ++c) a[size_t(r) * w + c] -= f * a[size_t(col) * w + c];
    }
  }
  std::vector<double> inv(size_t(n) * n);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      double v = a[size_t(r) * w + n + c];
      const double rv = std::round(v);
      if (std::fabs(v - rv) < 1e-9) v = rv + 0.0;  // + 0.0 turns −0 into +0
      inv[size_t(r) * n + c] = v;
    }
  return inv;
}

}  // namespace lcm::data
