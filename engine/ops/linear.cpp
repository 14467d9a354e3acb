// CPU implementation of the linear (fully connected) op: y = x·Wᵀ + b as one row-major GEMM over all
// leading rows (bias fused into the output's initialisation), with its backward (dX += dY·W,
// dW += dYᵀ·X, db += column sums of dY); GEMMs run on fixed tiles (engine/ops/gemm.hpp): deterministic.
// The CUDA twin will live in kernels/linear.cu (cuBLAS), chosen at the dispatch point below.
#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"
#include "engine/ops/gemm.hpp"

#include <algorithm>

namespace lcm::ops {

/// See engine/ops.hpp. x: [..., in] (rank 1–4), w: [out, in], b: [out] or -1 → y: [..., out].
/// Throws std::invalid_argument naming "linear" and the shapes on a mismatch.
template <class T>
NodeId linear(Tape<T>& t, NodeId x, NodeId w, NodeId b) {
  const char* op = "linear";
  const Shape xs = t.shape(x), ws = t.shape(w);
  if (ws.rank != 2) detail::shape_error(op, "weight must be [out, in], got " + ws.str());
  if (xs.rank < 1 || xs.rank > 4 || xs[-1] != ws[1])
    detail::shape_error(op, "input " + xs.str() + " does not match weight " + ws.str() +
                                " (expected [..., " + std::to_string(ws[1]) + "])");
  if (b >= 0) {
    const Shape bs = t.shape(b);
    if (bs.rank != 1 || bs[0] != ws[0])
      detail::shape_error(op, "bias " + bs.str() + " does not match weight " + ws.str() +
                                  " (expected [" + std::to_string(ws[0]) + "])");
  }
  const detail::Backend backend = detail::select_backend(op, t, {x, w, b});

  const int64_t in = ws[1], out = ws[0], rows = xs.outer(xs.rank - 1);
  Shape ys = xs;
  ys[-1] = out;
  // Device dispatch point: a CUDA tape and tensors select cuBLAS (kernels/linear.cu).
  LCM_IF_CUDA(backend, detail::cuda_linear(t, x, w, b, ys, rows, in, out));
  std::vector<NodeId> inputs{x, w};
  if (b >= 0) inputs.push_back(b);
  const NodeId y = t.new_node(ys, op, inputs);

  const T* X = t.value(x).data;
  const T* W = t.value(w).data;
  T* Y = t.value(y).data;
  // Bias fused into the output's initialisation, then Y += X·Wᵀ (Wᵀ read in place, no copy).
  if (b >= 0) {
    const T* B = t.value(b).data;
    for (int64_t r = 0; r < rows; ++r) std::copy(B, B + out, Y + r * out);
  }
  detail::gemm_tiled<T>(rows, out, in, {X, in, false}, {W, in, true}, Y, out, b >= 0);

  if (t.requires_grad(y)) {
    t.set_backward(y, [x, w, b, rows, in, out](Tape<T>& tp, NodeId self) {
      const T* dY = tp.grad_acc(self);
      if (T* gx = tp.grad_acc(x))  // dX[rows, in] += dY[rows, out]·W[out, in]
        detail::gemm_tiled<T>(rows, in, out, {dY, out, false}, {tp.value(w).data, in, false}, gx, in, true);
      if (T* gw = tp.grad_acc(w))  // dW[out, in] += dYᵀ[out, rows]·X[rows, in]
        detail::gemm_tiled<T>(out, in, rows, {dY, out, true}, {tp.value(x).data, in, false}, gw, in, true);
      if (b >= 0) {
        if (T* gb = tp.grad_acc(b)) detail::column_sums_add(rows, out, dY, gb);
      }
    });
  }
  return y;
}

template NodeId linear<float>(Tape<float>&, NodeId, NodeId, NodeId);
template NodeId linear<double>(Tape<double>&, NodeId, NodeId, NodeId);

}  // namespace lcm::ops
