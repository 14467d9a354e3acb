// CPU implementation of the linear (fully connected) op: y = x·Wᵀ + b as one row-major Eigen GEMM
// over all leading rows, with its backward (dX = dY·W, dW += dYᵀ·X, db += column sums of dY).
// The CUDA twin will live in kernels/linear.cu (cuBLAS), chosen at the dispatch point below.
#include "engine/ops.hpp"
#include "engine/ops/common.hpp"

namespace lcm::ops {

using detail::CMapM;
using detail::MapM;

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
  // Device dispatch point (issue CUDA): a CUDA tensor will select kernels/linear.cu here.
  detail::select_backend(op, t, {x, w, b});

  const int64_t in = ws[1], out = ws[0], rows = xs.outer(xs.rank - 1);
  Shape ys = xs;
  ys[-1] = out;
  std::vector<NodeId> inputs{x, w};
  if (b >= 0) inputs.push_back(b);
  const NodeId y = t.new_node(ys, op, inputs);

  CMapM<T> X(t.value(x).data, rows, in);
  CMapM<T> W(t.value(w).data, out, in);
  MapM<T> Y(t.value(y).data, rows, out);
  Y.noalias() = X * W.transpose();
  if (b >= 0) {
    Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> B(t.value(b).data, out);
    Y.rowwise() += B;
  }

  if (t.requires_grad(y)) {
    t.set_backward(y, [x, w, b, rows, in, out](Tape<T>& tp, NodeId self) {
      CMapM<T> dY(tp.grad_acc(self), rows, out);
      if (T* gx = tp.grad_acc(x)) {
        MapM<T> dX(gx, rows, in);
        dX.noalias() += dY * CMapM<T>(tp.value(w).data, out, in);
      }
      if (T* gw = tp.grad_acc(w)) {
        MapM<T> dW(gw, out, in);
        dW.noalias() += dY.transpose() * CMapM<T>(tp.value(x).data, rows, in);
      }
      if (b >= 0) {
        if (T* gb = tp.grad_acc(b)) {
          // Column sums in fixed row order (deterministic, independent of the thread count).
          Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>> dB(gb, out);
          for (int64_t r = 0; r < rows; ++r) dB += dY.row(r);
        }
      }
    });
  }
  return y;
}

template NodeId linear<float>(Tape<float>&, NodeId, NodeId, NodeId);
template NodeId linear<double>(Tape<double>&, NodeId, NodeId, NodeId);

}  // namespace lcm::ops
