// CPU implementation of the linear (fully connected) op: y = x·Wᵀ + b as one row-major GEMM over
// all leading rows (bias fused into the output's initialisation), with its backward (dX += dY·W, dW
// += dYᵀ·X, db += column sums of dY), and of linear_elu (the same with ELU applied to each GEMM
// tile in cache); GEMMs run on fixed tiles (engine/ops/gemm.hpp): deterministic.
// The CUDA twin will live in kernels/linear.cu (cuBLAS), chosen at the dispatch point below.
#include <algorithm>
#include <array>

#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/cuda_ops.hpp"
#include "engine/ops/gemm.hpp"

namespace lcm::ops {

namespace {

/// Checks linear's shapes; returns {rows, in, out}. Throws std::invalid_argument naming `op`.
template <class T>
std::array<int64_t, 3> linear_dims(const char* op, const Tape<T>& t, NodeId x, NodeId w, NodeId b) {
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
  return {xs.outer(xs.rank - 1), ws[1], ws[0]};
}

/// linear's backward from the gradient dY [rows, out] of its output (pre-activation).
template <class T>
void linear_backward(Tape<T>& tp, const T* dY, NodeId x, NodeId w, NodeId b, int64_t rows,
                     int64_t in, int64_t out) {
  bool fresh = false;
  if (T* gx = tp.grad_write(x, fresh))  // dX[rows, in] (+)= dY[rows, out]·W[out, in]; set if first
    detail::gemm_tiled<T>(rows, in, out, {dY, out, false}, {tp.value(w).data, in, false}, gx, in,
                          !fresh);
  if (T* gw = tp.grad_acc(w))  // dW[out, in] += dYᵀ[out, rows]·X[rows, in]
    detail::gemm_tiled<T>(out, in, rows, {dY, out, true}, {tp.value(x).data, in, false}, gw, in,
                          true);
  if (b >= 0) {
    if (T* gb = tp.grad_acc(b)) detail::column_sums_add(rows, out, dY, gb);
  }
}

/// The forward and backward of linear (kElu = false) and linear_elu (kElu = true): x: [..., in]
/// (rank 1–4), w: [out, in], b: [out] or -1 → y: [..., out]. Forward per GEMM tile (in cache):
/// bias rows → Y += X·Wᵀ (Wᵀ read in place) → with kElu, ELU in place (detail::expm1, the function
/// of ops::elu). Backward with kElu: dY_pre = dY ⊙ (y > 0 ? 1 : y + 1) into scratch, its bias sums
/// in the same pass, then linear's backward. Throws std::invalid_argument naming `op` and the
/// shapes.
template <class T, bool kElu>
NodeId linear_op(Tape<T>& t, NodeId x, NodeId w, NodeId b) {
  const char* op = kElu ? "linear_elu" : "linear";
  const auto [rows, in, out] = linear_dims(op, t, x, w, b);
  const detail::Backend backend = detail::select_backend(op, t, {x, w, b});
  Shape ys = t.shape(x);
  ys[-1] = out;
  // Device dispatch point: a CUDA tape and tensors select cuBLAS (kernels/linear.cu); linear_elu
  // is the two ops there.
  if constexpr (kElu) {
    LCM_IF_CUDA(backend, elu(t, linear(t, x, w, b)));
  } else {
    LCM_IF_CUDA(backend, detail::cuda_linear(t, x, w, b, ys, rows, in, out));
  }
  std::vector<NodeId> inputs{x, w};
  if (b >= 0) inputs.push_back(b);
  const NodeId y = t.new_node(ys, op, inputs);

  const T* X = t.value(x).data;
  const T* W = t.value(w).data;
  T* Y = t.value(y).data;
  const T* B = b >= 0 ? t.value(b).data : nullptr;
  const int64_t ld = out;
  auto bias_rows = [B, Y, ld](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    if (B)
      for (int64_t r = r0; r < r0 + nr; ++r) std::copy(B + c0, B + c0 + nc, Y + r * ld + c0);
  };
  auto elu_tile = [Y, ld](int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    if constexpr (kElu)
      for (int64_t r = r0; r < r0 + nr; ++r) {
        T* yr = Y + r * ld + c0;
#pragma omp simd
        for (int64_t j = 0; j < nc; ++j) yr[j] = yr[j] > T(0) ? yr[j] : detail::expm1(yr[j]);
      }
  };
  detail::gemm_tiled<T>(rows, out, in, {X, in, false}, {W, in, true}, Y, out, B != nullptr,
                        bias_rows, elu_tile);

  if (t.requires_grad(y)) {
    t.set_backward(y, [x, w, b, rows = rows, in = in, out = out](Tape<T>& tp, NodeId self) {
      if constexpr (!kElu) {
        linear_backward(tp, tp.grad_acc(self), x, w, b, rows, in, out);
      } else {
        const T* gy = tp.grad_acc(self);
        const T* yv = tp.value(self).data;
        T* g = tp.template scratch<T>(rows * out);
        T* gb = b >= 0 ? tp.grad_acc(b) : nullptr;
        // dY_pre and (when the bias needs it) its column sums in one pass, per block of 64 columns
        // summed in row order: the same sums as column_sums_add, for any thread count.
        constexpr int64_t kCols = 64;
        const int64_t nblk = detail::blocks_of(out, kCols);
#pragma omp parallel for schedule(static) if (nblk > 1 && rows * out >= detail::kParallelMin)
        for (int64_t blk = 0; blk < nblk; ++blk) {
          const int64_t c0 = blk * kCols, nc = std::min(kCols, out - c0);
          T acc[kCols] = {};
          if (gb) std::copy(gb + c0, gb + c0 + nc, acc);
          for (int64_t r = 0; r < rows; ++r) {
            const T* gyr = gy + r * out + c0;
            const T* yr = yv + r * out + c0;
            T* gr = g + r * out + c0;
#pragma omp simd
            for (int64_t j = 0; j < nc; ++j) {
              gr[j] = gyr[j] * (yr[j] > T(0) ? T(1) : yr[j] + T(1));
              acc[j] += gr[j];
            }
          }
          if (gb) std::copy(acc, acc + nc, gb + c0);
        }
        linear_backward(tp, g, x, w, NodeId(-1), rows, in, out);
      }
    });
  }
  return y;
}

}  // namespace

/// See engine/ops.hpp (linear_op above).
template <class T>
NodeId linear(Tape<T>& t, NodeId x, NodeId w, NodeId b) {
  return linear_op<T, false>(t, x, w, b);
}

/// See engine/ops.hpp (linear_op above).
template <class T>
NodeId linear_elu(Tape<T>& t, NodeId x, NodeId w, NodeId b) {
  return linear_op<T, true>(t, x, w, b);
}

template NodeId linear<float>(Tape<float>&, NodeId, NodeId, NodeId);
template NodeId linear<double>(Tape<double>&, NodeId, NodeId, NodeId);
template NodeId linear_elu<float>(Tape<float>&, NodeId, NodeId, NodeId);
template NodeId linear_elu<double>(Tape<double>&, NodeId, NodeId, NodeId);

}  // namespace lcm::ops
