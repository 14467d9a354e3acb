// The normalised schedule's integer algebra (skew completion, matrix ↔ tag vectors, model-spec
// §3.4) and the cross-check of two forms of one schedule (schedule_forms.hpp).
#include <algorithm>
#include <climits>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "data/schedule_forms.hpp"
#include "data/transformations.hpp"

namespace lcm::data {
namespace {

using Tag = std::array<int64_t, 16>;
using i128 = __int128;

const char* const kNotDecomposed =
    "not expressible as ≤ 4 tag vectors by lcm's decomposition (a signed permutation, "
    "independent 2×2 / 3×3 blocks, or one block before or after a signed permutation)";

bool fits64(i128 v) {
  return v >= i128(INT64_MIN) && v <= i128(INT64_MAX);
}

/// x with a·x ≡ 1 (mod m), 0 ≤ x < m, for m ≥ 1 and gcd(a, m) = 1 (iterative extended Euclid).
i128 mod_inverse(i128 a, i128 m) {
  i128 r0 = ((a % m) + m) % m, r1 = m, s0 = 1, s1 = 0;
  while (r1 != 0) {
    const i128 q = r0 / r1;
    std::swap(r0, r1);
    r1 -= q * r0;
    std::swap(s0, s1);
    s1 -= q * s0;
  }
  return ((s0 % m) + m) % m;
}

/// Determinant of an n×n integer matrix (Bareiss, exact); false on 128-bit overflow.
bool determinant(const std::vector<int64_t>& m, int n, i128& det) {
  std::vector<i128> a(m.begin(), m.end());
  i128 prev = 1;
  int sign = 1;
  for (int k = 0; k < n - 1; ++k) {
    if (a[size_t(k * n + k)] == 0) {
      int r = k + 1;
      while (r < n && a[size_t(r * n + k)] == 0) ++r;
      if (r == n) {
        det = 0;
        return true;
      }
      for (int j = 0; j < n; ++j) std::swap(a[size_t(k * n + j)], a[size_t(r * n + j)]);
      sign = -sign;
    }
    for (int i = k + 1; i < n; ++i)
      for (int j = k + 1; j < n; ++j) {
        i128 x = 0, y = 0, d = 0;
        if (__builtin_mul_overflow(a[size_t(i * n + j)], a[size_t(k * n + k)], &x) ||
            __builtin_mul_overflow(a[size_t(i * n + k)], a[size_t(k * n + j)], &y) ||
            __builtin_sub_overflow(x, y, &d))
          return false;
        a[size_t(i * n + j)] = d / prev;
      }
    prev = a[size_t(k * n + k)];
  }
  det = n == 0 ? 1 : sign * a[size_t((n - 1) * n + n - 1)];
  return true;
}

bool is_identity(const std::vector<int64_t>& m, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (m[size_t(i * n + j)] != (i == j ? 1 : 0)) return false;
  return true;
}

/// Row i of `m` is sign[i]·e_{perm[i]} for every i.
bool signed_permutation(const std::vector<int64_t>& m, int n, std::vector<int>& perm,
                        std::vector<int>& sign) {
  perm.assign(size_t(n), -1);
  sign.assign(size_t(n), 1);
  std::vector<char> used(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const int64_t v = m[size_t(i * n + j)];
      if (v == 0) continue;
      if ((v != 1 && v != -1) || perm[size_t(i)] >= 0 || used[size_t(j)]) return false;
      perm[size_t(i)] = j;
      sign[size_t(i)] = int(v);
      used[size_t(j)] = 1;
    }
    if (perm[size_t(i)] < 0) return false;
  }
  return true;
}

/// Interchanges then reversals composing to the signed permutation (perm, sign): the swaps
/// peel the last-applied interchange first, fixing the deepest misplaced row, then the
/// reversals multiply the rows of sign −1 (deepest first).
std::vector<Tag> signed_permutation_tags(std::vector<int> perm, const std::vector<int>& sign) {
  const int n = int(perm.size());
  std::vector<Tag> swaps;
  for (int i = n - 1; i >= 0; --i) {
    if (perm[size_t(i)] == i) continue;
    int j = 0;
    while (perm[size_t(j)] != i) ++j;
    std::swap(perm[size_t(i)], perm[size_t(j)]);
    Transformation t;
    t.kind = TransformKind::Interchange;
    t.n_levels = 2;
    t.levels = {std::min(i, j), std::max(i, j)};
    swaps.push_back(encode(t));
  }
  std::vector<Tag> tags(swaps.rbegin(), swaps.rend());
  for (int i = n - 1; i >= 0; --i)
    if (sign[size_t(i)] < 0) {
      Transformation t;
      t.kind = TransformKind::Reversal;
      t.n_levels = 1;
      t.levels[0] = i;
      tags.push_back(encode(t));
    }
  return tags;
}

/// The rows/columns where `m` differs from the identity, ascending.
std::vector<int> changed_indices(const std::vector<int64_t>& m, int n) {
  std::vector<char> k(size_t(n), 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (m[size_t(i * n + j)] != (i == j ? 1 : 0)) k[size_t(i)] = k[size_t(j)] = 1;
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    if (k[size_t(i)]) out.push_back(i);
  return out;
}

/// The skew tag holding the block of `m` on the indices `k` (2 or 3, ascending).
bool block_tag(const std::vector<int64_t>& m, int n, Tag& t, const std::vector<int>& k) {
  if (k.size() != 2 && k.size() != 3) return false;
  Transformation s;
  s.kind = TransformKind::Skewing;
  s.n_levels = int(k.size());
  for (size_t r = 0; r < k.size(); ++r) s.levels[r] = k[r];
  s.n_params = param_count(s.kind, s.n_levels);
  size_t p = 0;
  for (int r : k)
    for (int c : k) s.params[p++] = m[size_t(r * n + c)];
  t = encode(s);
  return true;
}

/// The skew tag of `m` when it differs from the identity on 2 or 3 indices only.
bool block_tag(const std::vector<int64_t>& m, int n, Tag& t) {
  return block_tag(m, n, t, changed_indices(m, n));
}

/// Tags for `m` built block by block (see matrix_to_tags); false when a block is larger than 3
/// and not a signed permutation.
bool diagonal_block_tags(const std::vector<int64_t>& m, int n, std::vector<Tag>& tags) {
  std::vector<int> group(static_cast<size_t>(n));
  std::iota(group.begin(), group.end(), 0);
  auto find = [&group](int i) {
    while (group[size_t(i)] != i) i = group[size_t(i)] = group[size_t(group[size_t(i)])];
    return i;
  };
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j && m[size_t(i * n + j)] != 0) group[size_t(find(i))] = find(j);
  std::vector<char> done(size_t(n), 0);
  tags.clear();
  for (int i = 0; i < n; ++i) {
    if (done[size_t(i)]) continue;
    std::vector<int> k;  // this block's indices, ascending
    for (int j = i; j < n; ++j)
      if (find(j) == find(i)) k.push_back(j);
    for (int j : k) done[size_t(j)] = 1;
    const int kn = int(k.size());
    std::vector<int64_t> sub(size_t(kn * kn));
    for (int r = 0; r < kn; ++r)
      for (int c = 0; c < kn; ++c)
        sub[size_t(r * kn + c)] = m[size_t(k[size_t(r)] * n + k[size_t(c)])];
    if (is_identity(sub, kn)) continue;
    std::vector<int> perm, sign;
    if (signed_permutation(sub, kn, perm, sign)) {
      for (const Tag& sub_tag : signed_permutation_tags(perm, sign)) {
        Transformation t = *decode(sub_tag);  // levels back to the whole nest
        for (int l = 0; l < t.n_levels; ++l) t.levels[size_t(l)] = k[size_t(t.levels[size_t(l)])];
        tags.push_back(encode(t));
      }
      continue;
    }
    Tag t{};
    if (kn > 3 || !block_tag(m, n, t, k)) return false;
    tags.push_back(t);
  }
  return true;
}

std::string join_ints(const std::vector<int64_t>& v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    s += i ? ",[" : "[";
    for (int j = 0; j < n; ++j) s += (j ? "," : "") + std::to_string(v[size_t(i * n + j)]);
    s += "]";
  }
  return s + "]";
}

std::string tags_text(const std::vector<Tag>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + tag_short_text(v[i]);
  return s + "]";
}

std::string short_text(std::string s) {
  if (s.size() > 90) s = s.substr(0, 87) + "...";
  return s;
}

std::string tiling_text(const CompSchedule& c) {
  if (c.tiling_dims.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < c.tiling_dims.size(); ++i)
    s += (i ? "," : "") + c.tiling_dims[i] + ":" +
         (i < c.tiling_factors.size() ? std::to_string(c.tiling_factors[i]) : "?");
  return s;
}

std::string shift_text(const CompSchedule& c) {
  std::string s = "[";
  for (size_t i = 0; i < c.shiftings.size(); ++i)
    s += (i ? "," : "") + c.shiftings[i].first + ":" + std::to_string(c.shiftings[i].second);
  return s + "]";
}

}  // namespace

bool skew_completion(int64_t a, int64_t b, int64_t& x, int64_t& y) {
  if (a == 1) {
    x = 0;
    y = 1;
    return true;
  }
  if (b == -1) {
    x = 1;
    y = 0;
    return true;
  }
  if (b == 0) {
    if (a != -1) return false;
    x = 0;
    y = -1;
    return true;
  }
  const i128 mb = i128(b) < 0 ? -i128(b) : i128(b);
  i128 g0 = i128(a) < 0 ? -i128(a) : i128(a), g1 = mb;  // gcd(|a|, |b|)
  while (g1 != 0) {
    const i128 r = g0 % g1;
    g0 = g1;
    g1 = r;
  }
  if (g0 != 1) return false;
  i128 yy = mb == 1 ? 1 : mod_inverse(a, mb);  // least y ≥ 1 with a·y ≡ 1 (mod |b|)
  if (yy == 0) yy = mb;
  const i128 num = i128(a) * yy - 1;
  const i128 xx = num / i128(b);
  if (!fits64(xx) || !fits64(yy)) return false;
  x = int64_t(xx);
  y = int64_t(yy);
  return true;
}

std::string matrix_to_tags(const std::vector<int64_t>& m, int n, std::vector<Tag>& tags) {
  tags.clear();
  if (n < 0 || m.size() != size_t(n) * size_t(n)) return "not n×n";
  i128 det = 0;
  if (!determinant(m, n, det)) return "entries too large";
  if (det != 1 && det != -1) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "not unimodular (determinant %lld%s)",
                  fits64(det) ? (long long)det : 0LL, fits64(det) ? "" : ", out of range");
    return buf;
  }
  if (is_identity(m, n)) return "";
  std::vector<int> perm, sign;
  if (signed_permutation(m, n, perm, sign)) {
    tags = signed_permutation_tags(perm, sign);
    if (tags.size() > 4) {
      tags.clear();
      return "not expressible as ≤ 4 tag vectors";
    }
    return "";
  }
  // Independent diagonal blocks (the connected groups of rows/columns linked by off-diagonal
  // entries): each an identity, a signed permutation, or one 2-D / 3-D skew block.
  if (diagonal_block_tags(m, n, tags)) {
    if (tags.size() <= 4) return "";
    tags.clear();
  }
  // A signed permutation L (≤ 3 tags) with the rest one skew block B: M = B·L (L applied
  // first, tried first) or M = L·B. Depth ≤ 5 only (at most 5!·2⁵ candidates).
  // (An entry INT64_MIN cannot be negated by a reversal.)
  if (n > 5 || std::find(m.begin(), m.end(), INT64_MIN) != m.end()) return kNotDecomposed;
  std::vector<int> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::vector<Tag> best;
  std::vector<int64_t> b(m.size());
  do {
    for (int mask = 0; mask < (1 << n); ++mask) {
      std::vector<int> s(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) s[size_t(i)] = (mask >> i) & 1 ? -1 : 1;
      const std::vector<Tag> lt = signed_permutation_tags(p, s);
      if (lt.empty() || lt.size() > 3 || (!best.empty() && lt.size() + 1 >= best.size())) continue;
      // L: row i = s_i·e_{p_i}; L⁻¹ = Lᵀ.
      for (int order = 0; order < 2; ++order) {
        // order 0: B = M·Lᵀ (column j of B = s_k·column p_k... computed directly below).
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            int64_t v = 0;
            if (order == 0) {  // (M·Lᵀ)[i][j] = Σ_k M[i][k]·L[j][k] = M[i][p_j]·s_j
              v = m[size_t(i * n + p[size_t(j)])] * s[size_t(j)];
            } else {  // (Lᵀ·M)[i][j] = Σ_k L[k][i]·M[k][j]: the row k with p_k = i
              int k = 0;
              while (p[size_t(k)] != i) ++k;
              v = m[size_t(k * n + j)] * s[size_t(k)];
            }
            b[size_t(i * n + j)] = v;
          }
        Tag bt{};
        if (!block_tag(b, n, bt)) continue;
        std::vector<Tag> cand;
        if (order == 0) {
          cand = lt;
          cand.push_back(bt);
        } else {
          cand.push_back(bt);
          cand.insert(cand.end(), lt.begin(), lt.end());
        }
        if (best.empty() || cand.size() < best.size()) best = cand;
        break;
      }
    }
  } while (std::next_permutation(p.begin(), p.end()));
  if (best.empty()) return kNotDecomposed;
  tags = best;
  return "";
}

std::string compose_tags(const std::vector<Tag>& tags, int n, std::vector<int64_t>& out) {
  out.assign(size_t(n) * size_t(n), 0);
  for (int i = 0; i < n; ++i) out[size_t(i * n + i)] = 1;
  std::vector<int64_t> m(out.size()), r(out.size());
  auto lvl = [n](int64_t l) { return l >= 0 && l < n; };
  for (const Tag& tag : tags) {
    if (is_no_transformation(tag)) continue;
    const std::optional<Transformation> t = decode(tag);
    if (!t) return "unknown tag type " + std::to_string(tag[0]);
    for (int l = 0; l < t->n_levels; ++l)
      if (!lvl(t->levels[size_t(l)]))
        return std::string(kind_info(t->kind).noun) +
               " level outside the nest: " + tag_short_text(tag);
    std::fill(m.begin(), m.end(), 0);
    for (int i = 0; i < n; ++i) m[size_t(i * n + i)] = 1;
    const MatrixEntries e = matrix_entries(*t);
    for (int q = 0; q < e.size; ++q) {
      const MatrixEntry& x = e.at[size_t(q)];
      m[size_t(x.row * n + x.col)] = x.value;
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        i128 acc = 0;
        for (int k = 0; k < n; ++k)
          if (__builtin_add_overflow(acc, i128(m[size_t(i * n + k)]) * out[size_t(k * n + j)],
                                     &acc))
            return "entry overflows int64";
        if (!fits64(acc)) return "entry overflows int64";
        r[size_t(i * n + j)] = int64_t(acc);
      }
    out.swap(r);
  }
  return "";
}

ScheduleDifference compare_schedules(const Program& p, const NormalSchedule& a,
                                     const NormalSchedule& b) {
  const size_t nc = p.computations.size();
  if (!a.problem.empty() || !b.problem.empty())
    return {"unparsed", "a side was not parsed: " + (a.problem.empty() ? b.problem : a.problem)};
  if (a.comps.size() != nc || b.comps.size() != nc)
    return {"unparsed", std::to_string(a.comps.size()) + " vs " + std::to_string(b.comps.size()) +
                            " computation schedules for " + std::to_string(nc) + " computations"};
  for (size_t c = 0; c < nc; ++c) {
    const CompSchedule &x = a.comps[c], &y = b.comps[c];
    const std::string& name = p.computations[c].name;
    if (x.parallelized_dim != y.parallelized_dim)
      return {"parallelization", name + ": parallelized_dim \"" + x.parallelized_dim + "\" vs \"" +
                                     y.parallelized_dim + "\""};
    if (x.tiling_dims != y.tiling_dims || x.tiling_factors != y.tiling_factors)
      return {"tiling", name + ": tiling " + short_text(tiling_text(x)) + " vs " +
                            short_text(tiling_text(y))};
    if (x.unrolling_factor != y.unrolling_factor)
      return {"unrolling", name + ": unrolling_factor " + std::to_string(x.unrolling_factor) +
                               " vs " + std::to_string(y.unrolling_factor)};
    if (a.has_shiftings && b.has_shiftings && x.shiftings != y.shiftings)
      return {"shifting", name + ": shiftings " + short_text(shift_text(x)) + " vs " +
                              short_text(shift_text(y))};
    if (a.has_tag_order && b.has_tag_order) {
      if (x.transformations != y.transformations)
        return {"transformation", name + ": tags " + short_text(tags_text(x.transformations)) +
                                      " vs " + short_text(tags_text(y.transformations))};
    } else if (x.transformations != y.transformations) {  // equal lists: equal matrices
      const int n = int(p.computations[c].iterators.size());
      std::vector<int64_t> mx, my;
      const std::string ex = compose_tags(x.transformations, n, mx),
                        ey = compose_tags(y.transformations, n, my);
      if (!ex.empty() || !ey.empty() || mx != my)
        return {"transformation", name + ": matrix " +
                                      short_text(ex.empty() ? join_ints(mx, n) : ex) + " vs " +
                                      short_text(ey.empty() ? join_ints(my, n) : ey)};
    }
  }
  const bool levels = a.has_fusion_levels && b.has_fusion_levels;
  auto key = [levels](const std::vector<Fusion>& fs) {
    std::vector<std::pair<std::pair<std::string, std::string>, int>> v;
    for (const Fusion& f : fs) v.push_back({std::minmax(f.comp_a, f.comp_b), levels ? f.level : 0});
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto fa = key(a.fusions), fb = key(b.fusions);
  if (fa != fb) {
    auto text =
        [levels](const std::vector<std::pair<std::pair<std::string, std::string>, int>>& v) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i)
            s += (i ? "," : "") + v[i].first.first + "+" + v[i].first.second +
                 (levels ? "@" + std::to_string(v[i].second) : "");
          return short_text(s + "]");
        };
    return {"fusion", "fusions " + text(fa) + " vs " + text(fb)};
  }
  return {};
}

}  // namespace lcm::data
