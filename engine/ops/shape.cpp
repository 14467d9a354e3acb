// The shape ops (reshape, concat, slice, index_select, select_columns, gather_rows, stack,
// broadcast_rows): one body per op (shape check, tape node, backward) over the family's backend
// functions below, which run the CPU copies or launch kernels/shape.cu. All work on contiguous
// row-major data as [outer, extent·inner] blocks; reshape is a view of its input's memory (no
// copy). Scatter-adds (the backward of the gathers) add in increasing output order on both
// backends (deterministic, no atomics).
#include <algorithm>
#include <cstring>
#include <memory>

#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "kernels/cuda_ops.hpp"

namespace lcm::ops {

namespace {

using detail::add_into;
using detail::Backend;

std::string shapes_str(const std::vector<Shape>& ss) {
  std::string s;
  for (size_t i = 0; i < ss.size(); ++i) s += (i ? ", " : "") + ss[i].str();
  return s;
}

/// The shapes of the inputs `xs` of `op` (concat, stack); std::invalid_argument "op <op>: no
/// input tensors" when there is none.
template <class T>
std::vector<Shape> input_shapes(const char* op, const Tape<T>& t, const std::vector<NodeId>& xs) {
  if (xs.empty()) detail::shape_error(op, "no input tensors");
  std::vector<Shape> shapes;
  for (NodeId x : xs) shapes.push_back(t.shape(x));
  return shapes;
}

// ---- backend functions: the CPU copies or the kernels of kernels/shape.cu ----

/// For o < outer: dst[o·dst_row + dst_off + i] (+)= src[o·src_row + src_off + i], i < len
/// (`acc` adds; src_row = 0 repeats one source row). The forward and backward of concat, slice,
/// stack and broadcast_rows.
template <class T>
void copy_blocks(Backend be, T* dst, int64_t dst_row, int64_t dst_off, const T* src,
                 int64_t src_row, int64_t src_off, int64_t outer, int64_t len, bool acc) {
  LCM_ON_CUDA(be, cuda::copy_blocks(dst, dst_row, dst_off, src, src_row, src_off, outer, len, acc));
  for (int64_t o = 0; o < outer; ++o) {
    T* d = dst + o * dst_row + dst_off;
    const T* sp = src + o * src_row + src_off;
    if (acc)
      add_into(d, sp, len);
    else
      std::memcpy(d, sp, size_t(len) * sizeof(T));
  }
}

/// g[c] += Σ_r x[r·cols + c], summed in row order on the CPU (kernels/shape.cu: fixed chunks).
template <class T>
void column_sums_add(Backend be, Tape<T>& t, const T* x, T* g, int64_t rows, int64_t cols) {
  LCM_ON_CUDA(
      be, cuda::column_sums_add(x, g, rows, cols,
                                t.template device_scratch<T>(cuda::column_sums_work(rows, cols))));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) g[i] += x[r * cols + i];
}

/// A row index table for the gathers: the rows as given (host) and, on CUDA, a device copy (part of
/// the op's one packed upload of its tables).
struct RowIndex {
  std::vector<int64_t> host;
  const int64_t* device = nullptr;
};

/// The inverse of a row index over `xdim` rows for the deterministic scatter-add on CUDA (CSR:
/// the j of row r are sources[starts[r] .. starts[r + 1]), increasing), on the device; on the
/// CPU the scatter walks the index itself.
struct ScatterPlan {
  const int64_t* starts = nullptr;
  const int64_t* sources = nullptr;
};
/// The host tables of a ScatterPlan of `index` over xdim rows: starts [xdim + 1] then sources [m],
/// appended to `out` (the ops pack them with their row tables into one upload per op).
inline void append_scatter_tables(const std::vector<int64_t>& index, int64_t xdim,
                                  std::vector<int64_t>& out) {
  const int64_t m = int64_t(index.size());
  const size_t s0 = out.size(), q0 = s0 + size_t(xdim + 1);
  out.resize(q0 + size_t(m), 0);
  int64_t* starts = out.data() + s0;
  int64_t* sources = out.data() + q0;
  for (int64_t j = 0; j < m; ++j) ++starts[size_t(index[size_t(j)] + 1)];
  for (int64_t r = 0; r < xdim; ++r) starts[size_t(r + 1)] += starts[size_t(r)];
  std::vector<int64_t> fill(starts, starts + xdim);
  for (int64_t j = 0; j < m; ++j) sources[size_t(fill[size_t(index[size_t(j)])]++)] = j;
}

/// y[o, j, :] = x[o, index[j], :] for o < outer, j < m (rows of `inner` values, x has xdim rows
/// per outer index).
template <class T>
void gather(Backend be, T* y, const T* x, const RowIndex& index, int64_t outer, int64_t xdim,
            int64_t inner) {
  const int64_t m = int64_t(index.host.size());
  LCM_ON_CUDA(be, cuda::index_rows(y, x, index.device, outer, m, xdim, inner));
  const int64_t xrow = xdim * inner, yrow = m * inner;
  const int64_t* ix = index.host.data();
  if (inner == 1) {  // a column gather (select_columns): element by element, no memcpy calls
#pragma omp parallel for schedule(static) if (outer * yrow >= detail::kParallelMin && outer > 1)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j) y[o * yrow + j] = x[o * xrow + ix[j]];
    return;
  }
#pragma omp parallel for schedule(static) if (outer * yrow >= detail::kParallelMin && outer > 1)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(y + o * yrow + j * inner, x + o * xrow + ix[j] * inner,
                  size_t(inner) * sizeof(T));
}

/// The backward of gather: gx[o, index[j], :] += gy[o, j, :], repeated rows accumulating in
/// increasing j (deterministic; parallel only across outer rows, which are disjoint).
template <class T>
void scatter_add(Backend be, T* gx, const T* gy, const RowIndex& index, const ScatterPlan& plan,
                 int64_t outer, int64_t xdim, int64_t inner) {
  const int64_t m = int64_t(index.host.size());
  LCM_ON_CUDA(be, cuda::scatter_add_rows(gx, gy, plan.starts, plan.sources, outer, m, xdim, inner));
  const int64_t xrow = xdim * inner, yrow = m * inner;
  const int64_t* ix = index.host.data();
#pragma omp parallel for schedule(static) if (outer * yrow >= detail::kParallelMin && outer > 1)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      T* dst = gx + o * xrow + ix[j] * inner;
      const T* src = gy + o * yrow + j * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
}

/// dst[dst_rows[j], :] = src[src_rows[j], :] for j < m (rows of `width`; each dst row once).
template <class T>
void copy_rows(Backend be, T* dst, const RowIndex& dst_rows, const T* src, const RowIndex& src_rows,
               int64_t width) {
  const int64_t m = int64_t(dst_rows.host.size());
  LCM_ON_CUDA(be, cuda::copy_rows(dst, dst_rows.device, src, src_rows.device, m, width));
  const int64_t *dr = dst_rows.host.data(), *sr = src_rows.host.data();
#pragma omp parallel for schedule(static) if (m * width >= (1 << 16))
  for (int64_t j = 0; j < m; ++j)
    std::memcpy(dst + dr[j] * width, src + sr[j] * width, size_t(width) * sizeof(T));
}

/// g[in_rows[j], :] += gy[out_rows[j], :] for j < m, in increasing j (the backward of copy_rows
/// for one source of g_rows rows; gy has gy_rows rows). CUDA: the rows of gy gathered, then the
/// deterministic scatter-add through `plan` (the inverse of in_rows).
template <class T>
void add_rows(Backend be, Tape<T>& t, T* g, const RowIndex& in_rows, const ScatterPlan& plan,
              int64_t g_rows, const T* gy, const RowIndex& out_rows, int64_t gy_rows,
              int64_t width) {
  const int64_t m = int64_t(in_rows.host.size());
  if (be == Backend::Cuda) {
    T* sel = t.template device_scratch<T>(m * width);
    gather(be, sel, gy, out_rows, int64_t(1), gy_rows, width);
    scatter_add(be, g, sel, in_rows, plan, int64_t(1), g_rows, width);
    return;
  }
  const int64_t *ir = in_rows.host.data(), *orow = out_rows.host.data();
  for (int64_t j = 0; j < m; ++j) {
    T* dst = g + ir[j] * width;
    const T* s = gy + orow[j] * width;
    for (int64_t i = 0; i < width; ++i) dst[i] += s[i];
  }
}

}  // namespace

/// Same data, new shape `s` (numel must match): the result is a view of x's memory (no copy).
/// Gradient design: the view node gets its own gradient buffer and backward adds it into x's
/// gradient (one O(n) pass), so gradient buffers are never aliased between nodes and every
/// node's grad() stays meaningful. Throws std::invalid_argument naming both shapes on a numel
/// mismatch.
template <class T>
NodeId reshape(Tape<T>& t, NodeId x, Shape s) {
  const char* op = "reshape";
  const Shape xs = t.shape(x);
  if (xs.numel() != s.numel())
    detail::shape_error(op, "cannot view " + xs.str() + " (" + std::to_string(xs.numel()) +
                                " elements) as " + s.str() + " (" + std::to_string(s.numel()) +
                                " elements)");
  // Device dispatch point: a view needs no kernel; the backward adds on x's device.
  const Backend be = detail::select_backend(op, t, {x});
  Tensor<T> v = t.value(x);
  v.shape = s;
  const NodeId y = t.new_view(v, op, {x});
  if (t.requires_grad(y)) {
    const int64_t n = s.numel();
    t.set_backward(y, [x, n, be](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x)) detail::accumulate(be, gx, tp.grad_acc(self), n);
    });
  }
  return y;
}

/// Concatenation along `dim` (negative counts from the end). All inputs have the same rank and
/// the same extents except along `dim`. Backward copies each block of dY back (+=) into its
/// input. Throws std::invalid_argument for no input, a bad dim or mismatched shapes.
template <class T>
NodeId concat(Tape<T>& t, const std::vector<NodeId>& xs, int dim) {
  const char* op = "concat";
  const std::vector<Shape> shapes = input_shapes(op, t, xs);
  const Shape& s0 = shapes[0];
  if (s0.rank == 0)
    detail::shape_error(op, "cannot concatenate scalars (shapes " + shapes_str(shapes) + ")");
  const int d = detail::normalize_dim(op, dim, s0);
  Shape ys = s0;
  ys[d] = 0;
  for (const Shape& s : shapes) {
    bool ok = s.rank == s0.rank;
    for (int i = 0; ok && i < s0.rank; ++i) ok = i == d || s[i] == s0[i];
    if (!ok)
      detail::shape_error(
          op, "shapes " + shapes_str(shapes) + " differ outside dim " + std::to_string(dim));
    ys[d] += s[d];
  }
  // Device dispatch point: a CUDA tape and tensors select kernels/shape.cu.
  const Backend be = detail::select_backend(op, t, xs);
  const int64_t outer = ys.outer(d), row = ys.inner(d);
  std::vector<int64_t> chunk;  // elements per outer row contributed by each input
  for (const Shape& s : shapes) chunk.push_back(s.inner(d));
  const NodeId y = t.new_node(ys, op, xs);
  T* yp = t.value(y).data;
  int64_t off = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    copy_blocks(be, yp, row, off, t.value(xs[k]).data, chunk[k], int64_t(0), outer, chunk[k],
                false);
    off += chunk[k];
  }
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, chunk, outer, row, be](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      int64_t off = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        if (T* gx = tp.grad_acc(xs[k]))
          copy_blocks(be, gx, chunk[k], int64_t(0), gy, row, off, outer, chunk[k], true);
        off += chunk[k];
      }
    });
  }
  return y;
}

/// x[..., start:start+len, ...] along `dim` (a copy). Backward adds dY into that window of dX.
/// Throws std::invalid_argument for a bad dim or a window outside [0, x.shape[dim]].
template <class T>
NodeId slice(Tape<T>& t, NodeId x, int dim, int64_t start, int64_t len) {
  const char* op = "slice";
  const Shape xs = t.shape(x);
  if (xs.rank == 0) detail::shape_error(op, "cannot slice a scalar");
  const int d = detail::normalize_dim(op, dim, xs);
  if (start < 0 || len < 0 || start + len > xs[d])
    detail::shape_error(op, "window [" + std::to_string(start) + ", " +
                                std::to_string(start + len) + ") outside dim " +
                                std::to_string(dim) + " of " + xs.str());
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu.
  const Backend be = detail::select_backend(op, t, {x});
  Shape ys = xs;
  ys[d] = len;
  const int64_t outer = xs.outer(d), inner = xs.inner(d + 1);
  const int64_t xrow = xs[d] * inner, yrow = len * inner, off = start * inner;
  const NodeId y = t.new_node(ys, op, {x});
  copy_blocks(be, t.value(y).data, yrow, int64_t(0), t.value(x).data, xrow, off, outer, yrow,
              false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, outer, xrow, yrow, off, be](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x))
        copy_blocks(be, gx, xrow, off, tp.grad_acc(self), yrow, int64_t(0), outer, yrow, true);
    });
  }
  return y;
}

/// y[..., j, ...] = x[..., index[j], ...] along `dim` (repeats allowed; y.shape[dim] =
/// index.size()). Backward is a scatter-add: dX[..., index[j], ...] += dY[..., j, ...], repeated
/// indices accumulating in index order (deterministic; parallel only across outer rows, which
/// are disjoint). Throws std::out_of_range naming the index, std::invalid_argument for a bad dim.
template <class T>
NodeId index_select(Tape<T>& t, NodeId x, int dim, const std::vector<int64_t>& index) {
  const char* op = "index_select";
  const Shape xs = t.shape(x);
  if (xs.rank == 0) detail::shape_error(op, "cannot index a scalar");
  const int d = detail::normalize_dim(op, dim, xs);
  for (size_t j = 0; j < index.size(); ++j)
    if (index[j] < 0 || index[j] >= xs[d])
      throw std::out_of_range("op index_select: index[" + std::to_string(j) + "] = " +
                              std::to_string(index[j]) + " outside [0, " + std::to_string(xs[d]) +
                              ") of dim " + std::to_string(dim) + " of " + xs.str());
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu (gather, and a
  // deterministic scatter-add through the inverse index map for the backward).
  const Backend be = detail::select_backend(op, t, {x});
  Shape ys = xs;
  ys[d] = int64_t(index.size());
  const NodeId y = t.new_node(ys, op, {x});
  const int64_t outer = xs.outer(d), inner = xs.inner(d + 1), xdim = xs[d];
  const bool grad = t.requires_grad(y);
  RowIndex rix{index, nullptr};
  ScatterPlan plan;
  if (be == Backend::Cuda) {  // the index and its scatter plan in one upload
    std::vector<int64_t> packed(index);
    if (grad) append_scatter_tables(index, xdim, packed);
    packed.push_back(0);  // (room for an empty index)
    const int64_t* d = detail::upload_scratch(t, packed);
    rix.device = d;
    if (grad) plan = ScatterPlan{d + index.size(), d + index.size() + size_t(xdim + 1)};
  }
  auto ix = std::make_shared<const RowIndex>(std::move(rix));
  gather(be, t.value(y).data, t.value(x).data, *ix, outer, xdim, inner);
  if (grad) {
    t.set_backward(y, [x, ix, plan, outer, xdim, inner, be](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x))
        scatter_add(be, gx, tp.grad_acc(self), *ix, plan, outer, xdim, inner);
    });
  }
  return y;
}

/// y[r, j] = x[r, cols[j]] for a matrix x [R, K]: index_select along the last dim (a column
/// subset of a weight matrix; the CPU gathers element by element). Backward dX[r, cols[j]] +=
/// dY[r, j]. Throws std::invalid_argument for x not a matrix, std::out_of_range for a column
/// outside [0, K).
template <class T>
NodeId select_columns(Tape<T>& t, NodeId x, const std::vector<int64_t>& cols) {
  if (t.shape(x).rank != 2)
    detail::shape_error("select_columns", "expected a matrix, got " + t.shape(x).str());
  return index_select(t, x, 1, cols);
}

/// Output row r = row rows[r] of sources[src[r]] (each source viewed as [numel / width, width]),
/// y of shape `out` (numel = rows.size()·width). Backward: each output row's gradient is added
/// into its source row, per source in increasing r (deterministic). Lets a tree level pick its
/// children's embeddings from several earlier level outputs in one copy. Throws
/// std::invalid_argument naming the row or source that does not fit.
template <class T>
NodeId gather_rows(Tape<T>& t, const std::vector<NodeId>& sources, int64_t width,
                   const std::vector<int32_t>& src, const std::vector<int64_t>& rows, Shape out) {
  const char* op = "gather_rows";
  if (src.size() != rows.size() || width < 1 || out.numel() != int64_t(rows.size()) * width)
    detail::shape_error(op, std::to_string(rows.size()) + " rows of width " +
                                std::to_string(width) + " do not fill " + out.str());
  std::vector<int64_t> sn(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    const int64_t n = t.value(sources[s]).numel();
    if (n % width != 0)
      detail::shape_error(
          op, "source " + t.shape(sources[s]).str() + " not of width " + std::to_string(width));
    sn[s] = n / width;
  }
  for (size_t r = 0; r < rows.size(); ++r)
    if (src[r] < 0 || size_t(src[r]) >= sources.size() || rows[r] < 0 ||
        rows[r] >= sn[size_t(src[r])])
      detail::shape_error(op, "row " + std::to_string(r) + " points outside its source");
  // Device dispatch point: a CUDA tape and tensors select kernels/shape.cu.
  const Backend be = detail::select_backend(op, t, sources);
  // Per source: the output rows it fills and its rows they come from (increasing r).
  std::vector<std::vector<int64_t>> outs(sources.size()), ins(sources.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    outs[size_t(src[r])].push_back(int64_t(r));
    ins[size_t(src[r])].push_back(rows[r]);
  }
  struct Part {
    NodeId source;
    int64_t rows;
    RowIndex out, in;
    ScatterPlan plan;
  };
  auto parts = std::make_shared<std::vector<Part>>();
  const NodeId y = t.new_node(out, op, sources);
  T* yp = t.value(y).data;
  const bool grad = t.requires_grad(y);
  // CUDA: every part's row tables (and scatter plans) packed into one upload: one copy per
  // gather instead of 2 (forward) + 2 (backward) per source. Offsets into `packed` first.
  std::vector<int64_t> packed;
  struct Offsets {
    size_t out, in, starts, sources;
  };
  std::vector<Offsets> off;
  for (size_t s = 0; s < sources.size(); ++s) {
    if (outs[s].empty()) continue;
    Part p{sources[s], sn[s], RowIndex{std::move(outs[s]), nullptr}, {}, {}};
    p.in = RowIndex{std::move(ins[s]), nullptr};
    if (be == Backend::Cuda) {
      Offsets o{};
      o.out = packed.size();
      packed.insert(packed.end(), p.out.host.begin(), p.out.host.end());
      o.in = packed.size();
      packed.insert(packed.end(), p.in.host.begin(), p.in.host.end());
      if (grad) {
        o.starts = packed.size();
        append_scatter_tables(p.in.host, sn[s], packed);
        o.sources = o.starts + size_t(sn[s] + 1);
      }
      off.push_back(o);
    }
    parts->push_back(std::move(p));
  }
  if (be == Backend::Cuda && !parts->empty()) {
    const int64_t* d = detail::upload_scratch(t, packed);
    for (size_t i = 0; i < parts->size(); ++i) {
      Part& p = (*parts)[i];
      p.out.device = d + off[i].out;
      p.in.device = d + off[i].in;
      if (grad) p.plan = ScatterPlan{d + off[i].starts, d + off[i].sources};
    }
  }
  for (const Part& p : *parts) copy_rows(be, yp, p.out, t.value(p.source).data, p.in, width);
  if (grad) {
    t.set_backward(y, [parts, width, be](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      const int64_t total = tp.value(self).numel() / width;
      for (const Part& p : *parts)
        if (T* g = tp.grad_acc(p.source))
          add_rows(be, tp, g, p.in, p.plan, p.rows, gy, p.out, total, width);
    });
  }
  return y;
}

/// Stacks equal-shaped tensors along a new dimension `dim` ∈ [−(r+1), r] (r = input rank,
/// r + 1 ≤ 4): y.shape = x.shape with len(xs) inserted at dim. Backward copies each slice of dY
/// back (+=). Throws std::invalid_argument for no input, unequal shapes, a bad dim or rank > 4.
template <class T>
NodeId stack(Tape<T>& t, const std::vector<NodeId>& xs, int dim) {
  const char* op = "stack";
  const std::vector<Shape> shapes = input_shapes(op, t, xs);
  const Shape s0 = shapes[0];
  for (const Shape& s : shapes)
    if (s != s0) detail::shape_error(op, "shapes differ: " + shapes_str(shapes));
  if (s0.rank >= 4) detail::shape_error(op, "result rank would exceed 4 for inputs " + s0.str());
  const int d = dim < 0 ? dim + s0.rank + 1 : dim;
  if (d < 0 || d > s0.rank)
    detail::shape_error(op,
                        "dim " + std::to_string(dim) + " out of range for stacking " + s0.str());
  // Device dispatch point: a CUDA tape and tensors select kernels/shape.cu.
  const Backend be = detail::select_backend(op, t, xs);
  Shape ys;
  ys.rank = s0.rank + 1;
  for (int i = 0, j = 0; i < ys.rank; ++i)
    ys.dims[size_t(i)] = i == d ? int64_t(xs.size()) : s0[j++];
  const int64_t outer = s0.outer(d), inner = s0.inner(d), k_n = int64_t(xs.size());
  const NodeId y = t.new_node(ys, op, xs);
  T* yp = t.value(y).data;
  for (int64_t k = 0; k < k_n; ++k)
    copy_blocks(be, yp, k_n * inner, k * inner, t.value(xs[size_t(k)]).data, inner, int64_t(0),
                outer, inner, false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, outer, inner, k_n, be](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      for (int64_t k = 0; k < k_n; ++k)
        if (T* gx = tp.grad_acc(xs[size_t(k)]))
          copy_blocks(be, gx, inner, int64_t(0), gy, k_n * inner, k * inner, outer, inner, true);
    });
  }
  return y;
}

/// x: [1, H] or [H] repeated to [rows, H]. Backward: dX[h] += Σ_r dY[r, h], summed in row order
/// (deterministic). Throws std::invalid_argument for another input shape or rows < 0.
template <class T>
NodeId broadcast_rows(Tape<T>& t, NodeId x, int64_t rows) {
  const char* op = "broadcast_rows";
  const Shape xs = t.shape(x);
  if (!(xs.rank == 1 || (xs.rank == 2 && xs[0] == 1)) || rows < 0)
    detail::shape_error(op, "expected [1, H] or [H] and rows >= 0, got " + xs.str() + " and rows " +
                                std::to_string(rows));
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu (ordered column sums
  // for the backward).
  const Backend be = detail::select_backend(op, t, {x});
  const int64_t h = xs[-1];
  const NodeId y = t.new_node(Shape{rows, h}, op, {x});
  copy_blocks(be, t.value(y).data, h, int64_t(0), t.value(x).data, int64_t(0), int64_t(0), rows, h,
              false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, rows, h, be](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x)) column_sums_add(be, tp, tp.grad_acc(self), gx, rows, h);
    });
  }
  return y;
}

#define LCM_INSTANTIATE_SHAPE(T)                                                                   \
  template NodeId reshape<T>(Tape<T>&, NodeId, Shape);                                             \
  template NodeId concat<T>(Tape<T>&, const std::vector<NodeId>&, int);                            \
  template NodeId slice<T>(Tape<T>&, NodeId, int, int64_t, int64_t);                               \
  template NodeId index_select<T>(Tape<T>&, NodeId, int, const std::vector<int64_t>&);             \
  template NodeId select_columns<T>(Tape<T>&, NodeId, const std::vector<int64_t>&);                \
  template NodeId gather_rows<T>(Tape<T>&, const std::vector<NodeId>&, int64_t,                    \
                                 const std::vector<int32_t>&, const std::vector<int64_t>&, Shape); \
  template NodeId stack<T>(Tape<T>&, const std::vector<NodeId>&, int);                             \
  template NodeId broadcast_rows<T>(Tape<T>&, NodeId, int64_t);

LCM_INSTANTIATE_SHAPE(float)
LCM_INSTANTIATE_SHAPE(double)
#undef LCM_INSTANTIATE_SHAPE

}  // namespace lcm::ops
