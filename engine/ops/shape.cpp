// CPU implementations of the shape ops (reshape, concat, slice, index_select, stack,
// broadcast_rows), forward and backward side by side. All work on contiguous row-major data as
// [outer, extent·inner] blocks; reshape is a view of its input's memory (no copy).
#include <cstring>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"

namespace lcm::ops {

namespace {

/// y[i] += x[i] for i < n (vectorisable; OpenMP above detail::kParallelMin).
template <class T>
void add_into(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

std::string shapes_str(const std::vector<Shape>& ss) {
  std::string s;
  for (size_t i = 0; i < ss.size(); ++i) s += (i ? ", " : "") + ss[i].str();
  return s;
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
  // Device dispatch point: a view needs no kernel; the CUDA twin's backward adds on the device.
  LCM_IF_CUDA(detail::select_backend(op, t, {x}), detail::cuda_reshape(t, x, s));
  Tensor<T> v = t.value(x);
  v.shape = s;
  const NodeId y = t.new_view(v, op, {x});
  if (t.requires_grad(y)) {
    const int64_t n = s.numel();
    t.set_backward(y, [x, n](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x)) add_into(gx, tp.grad_acc(self), n);
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
  if (xs.empty()) detail::shape_error(op, "no input tensors");
  std::vector<Shape> shapes;
  for (NodeId x : xs) shapes.push_back(t.shape(x));
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
  const detail::Backend backend = detail::select_backend(op, t, xs);
  const int64_t outer = ys.outer(d), row = ys.inner(d);
  std::vector<int64_t> chunk;  // elements per outer row contributed by each input
  for (const Shape& s : shapes) chunk.push_back(s.inner(d));
  // Device dispatch point: a CUDA tape and tensors select kernels/shape.cu.
  LCM_IF_CUDA(backend, detail::cuda_concat(t, xs, ys, outer, row, chunk));
  const NodeId y = t.new_node(ys, op, xs);
  T* yp = t.value(y).data;
  int64_t off = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const T* xp = t.value(xs[k]).data;
    const int64_t c = chunk[k];
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(yp + o * row + off, xp + o * c, size_t(c) * sizeof(T));
    off += c;
  }
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, chunk, outer, row](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      int64_t off = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        const int64_t c = chunk[k];
        if (T* gx = tp.grad_acc(xs[k]))
          for (int64_t o = 0; o < outer; ++o) add_into(gx + o * c, gy + o * row + off, c);
        off += c;
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
  const detail::Backend backend = detail::select_backend(op, t, {x});
  Shape ys = xs;
  ys[d] = len;
  const int64_t outer = xs.outer(d), inner = xs.inner(d + 1);
  const int64_t xrow = xs[d] * inner, yrow = len * inner, off = start * inner;
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu.
  LCM_IF_CUDA(backend, detail::cuda_slice(t, x, ys, outer, xrow, yrow, off));
  const NodeId y = t.new_node(ys, op, {x});
  const T* xp = t.value(x).data;
  T* yp = t.value(y).data;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(yp + o * yrow, xp + o * xrow + off, size_t(yrow) * sizeof(T));
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, outer, xrow, yrow, off](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T* gy = tp.grad_acc(self);
      for (int64_t o = 0; o < outer; ++o) add_into(gx + o * xrow + off, gy + o * yrow, yrow);
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
  const detail::Backend backend = detail::select_backend(op, t, {x});
  Shape ys = xs;
  ys[d] = int64_t(index.size());
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu (gather, and a
  // deterministic scatter-add through the inverse index map for the backward).
  LCM_IF_CUDA(backend,
              detail::cuda_index_select(t, x, ys, index, xs.outer(d), xs[d], xs.inner(d + 1)));
  const NodeId y = t.new_node(ys, op, {x});
  const int64_t outer = xs.outer(d), inner = xs.inner(d + 1), m = int64_t(index.size());
  const int64_t xrow = xs[d] * inner, yrow = m * inner;
  const T* xp = t.value(x).data;
  T* yp = t.value(y).data;
#pragma omp parallel for schedule(static) if (outer * yrow >= detail::kParallelMin && outer > 1)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(yp + o * yrow + j * inner, xp + o * xrow + index[size_t(j)] * inner,
                  size_t(inner) * sizeof(T));
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, index, outer, inner, m, xrow, yrow](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T* gy = tp.grad_acc(self);
#pragma omp parallel for schedule(static) if (outer * yrow >= detail::kParallelMin && outer > 1)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < m; ++j) {
          T* dst = gx + o * xrow + index[size_t(j)] * inner;
          const T* src = gy + o * yrow + j * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
        }
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
  if (xs.empty()) detail::shape_error(op, "no input tensors");
  std::vector<Shape> shapes;
  for (NodeId x : xs) shapes.push_back(t.shape(x));
  const Shape s0 = shapes[0];
  for (const Shape& s : shapes)
    if (s != s0) detail::shape_error(op, "shapes differ: " + shapes_str(shapes));
  if (s0.rank >= 4) detail::shape_error(op, "result rank would exceed 4 for inputs " + s0.str());
  const int d = dim < 0 ? dim + s0.rank + 1 : dim;
  if (d < 0 || d > s0.rank)
    detail::shape_error(op,
                        "dim " + std::to_string(dim) + " out of range for stacking " + s0.str());
  const detail::Backend backend = detail::select_backend(op, t, xs);
  Shape ys;
  ys.rank = s0.rank + 1;
  for (int i = 0, j = 0; i < ys.rank; ++i)
    ys.dims[size_t(i)] = i == d ? int64_t(xs.size()) : s0[j++];
  const int64_t outer = s0.outer(d), inner = s0.inner(d), k_n = int64_t(xs.size());
  // Device dispatch point: a CUDA tape and tensors select kernels/shape.cu.
  LCM_IF_CUDA(backend, detail::cuda_stack(t, xs, ys, outer, inner));
  const NodeId y = t.new_node(ys, op, xs);
  T* yp = t.value(y).data;
  for (int64_t k = 0; k < k_n; ++k) {
    const T* xp = t.value(xs[size_t(k)]).data;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(yp + (o * k_n + k) * inner, xp + o * inner, size_t(inner) * sizeof(T));
  }
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, outer, inner, k_n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      for (int64_t k = 0; k < k_n; ++k)
        if (T* gx = tp.grad_acc(xs[size_t(k)]))
          for (int64_t o = 0; o < outer; ++o)
            add_into(gx + o * inner, gy + (o * k_n + k) * inner, inner);
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
  const detail::Backend backend = detail::select_backend(op, t, {x});
  const int64_t h = xs[-1];
  // Device dispatch point: a CUDA tape and tensor select kernels/shape.cu (ordered column sums
  // for the backward).
  LCM_IF_CUDA(backend, detail::cuda_broadcast_rows(t, x, rows, h));
  const NodeId y = t.new_node(Shape{rows, h}, op, {x});
  const T* xp = t.value(x).data;
  T* yp = t.value(y).data;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(yp + r * h, xp, size_t(h) * sizeof(T));
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, rows, h](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      const T* gy = tp.grad_acc(self);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < h; ++i) gx[i] += gy[r * h + i];
    });
  }
  return y;
}

#define LCM_INSTANTIATE_SHAPE(T)                                                       \
  template NodeId reshape<T>(Tape<T>&, NodeId, Shape);                                 \
  template NodeId concat<T>(Tape<T>&, const std::vector<NodeId>&, int);                \
  template NodeId slice<T>(Tape<T>&, NodeId, int, int64_t, int64_t);                   \
  template NodeId index_select<T>(Tape<T>&, NodeId, int, const std::vector<int64_t>&); \
  template NodeId stack<T>(Tape<T>&, const std::vector<NodeId>&, int);                 \
  template NodeId broadcast_rows<T>(Tape<T>&, NodeId, int64_t);

LCM_INSTANTIATE_SHAPE(float)
LCM_INSTANTIATE_SHAPE(double)
#undef LCM_INSTANTIATE_SHAPE

}  // namespace lcm::ops
