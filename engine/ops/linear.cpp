// The linear (fully connected) op y = x·Wᵀ + b and linear_elu (the same with ELU, the formulas of
// engine/ops/elementwise_math.hpp): one body over the family's backend functions below. CPU: one
// row-major GEMM over all leading rows on fixed tiles (engine/ops/gemm.hpp, deterministic) with
// the bias written into each tile before its product and the ELU applied after, in cache; its
// backward dX += dY·W, dW += dYᵀ·X, db += column sums of dY. CUDA: cuBLAS (kernels/linear.cu),
// the bias copied in first and the ELU applied in place by kernels/elementwise.cu.
#include <algorithm>
#include <array>

#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/elementwise_math.hpp"
#include "engine/ops/gemm.hpp"
#include "kernels/cuda_ops.hpp"

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

using detail::Backend;

#ifdef LCM_WITH_CUDA
/// The CUDA forward: Y = bias rows, Y += X·Wᵀ (cuBLAS); with `elu`, Y = X·Wᵀ, then
/// Y = ELU(Y + bias) in one launch (the same sum, one launch fewer).
template <class T>
void cuda_linear_forward(const T* X, const T* W, const T* B, T* Y, int64_t rows, int64_t in,
                         int64_t out, bool elu) {
  if (elu) {
    cuda::gemm(false, true, rows, out, in, X, in, W, in, Y, out, false);
    cuda::bias_unary_forward(Unary::Elu, Y, B, rows, out, T(0));
    return;
  }
  if (B) cuda::copy_blocks(Y, out, int64_t(0), B, int64_t(0), int64_t(0), rows, out, false);
  cuda::gemm(false, true, rows, out, in, X, in, W, in, Y, out, B != nullptr);
}
/// The CUDA backward from dY [rows, out] (pre-activation).
template <class T>
void cuda_linear_backward(Tape<T>& tp, const T* dY, NodeId x, NodeId w, NodeId b, int64_t rows,
                          int64_t in, int64_t out) {
  if (T* gx = tp.grad_acc(x))  // dX[rows, in] += dY[rows, out]·W[out, in]
    cuda::gemm(false, false, rows, in, out, dY, out, tp.value(w).data, in, gx, in, true);
  if (T* gw = tp.grad_acc(w))  // dW[out, in] += dYᵀ·X
    cuda::gemm(true, false, out, in, rows, dY, out, tp.value(x).data, in, gw, in, true);
  if (b >= 0)
    if (T* gb = tp.grad_acc(b))
      cuda::column_sums_add(dY, gb, rows, out,
                            tp.template device_scratch<T>(cuda::column_sums_work(rows, out)));
}
/// linear_elu's CUDA backward: dY_pre = dY ⊙ elu'(y) (from y alone: y > 0 ⇔ x > 0), then linear's.
template <class T>
void cuda_linear_elu_backward(Tape<T>& tp, NodeId self, NodeId x, NodeId w, NodeId b, int64_t rows,
                              int64_t in, int64_t out) {
  T* g = tp.template device_scratch<T>(rows * out);
  const T* yv = tp.value(self).data;
  cuda::unary_grad(Unary::Elu, yv, yv, tp.grad_acc(self), g, rows * out, T(0));
  cuda_linear_backward(tp, g, x, w, b, rows, in, out);
}
#endif

// ---- backend functions: the CPU GEMM tiles or cuBLAS ----

/// Y [rows, out] = X·Wᵀ + B (B may be nullptr), with kElu ELU applied to each value. `Wb`: W's
/// BF16 bits or nullptr (the one-row products read them, engine/ops/gemm.hpp).
template <class T, bool kElu>
void linear_forward(Backend be, const T* X, const T* W, const uint16_t* Wb, const T* B, T* Y,
                    int64_t rows, int64_t in, int64_t out) {
  LCM_ON_CUDA(be, cuda_linear_forward(X, W, B, Y, rows, in, out, kElu));
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
        for (int64_t j = 0; j < nc; ++j) yr[j] = detail::cpu_elu(yr[j]);
      }
  };
  detail::gemm_tiled<T>(rows, out, in, {X, in, false}, {W, in, true, Wb}, Y, out, B != nullptr,
                        bias_rows, elu_tile);
}

/// linear's CPU backward from the gradient dY [rows, out] of its output (pre-activation).
template <class T>
void cpu_linear_backward(Tape<T>& tp, const T* dY, NodeId x, NodeId w, NodeId b, int64_t rows,
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

/// The backward of linear (kElu = false) or linear_elu from the output's gradient. With kElu on
/// the CPU: dY_pre = dY ⊙ elu'(y) into scratch, its bias sums in the same pass, then linear's
/// backward.
template <class T, bool kElu>
void linear_backward(Backend be, Tape<T>& tp, NodeId self, NodeId x, NodeId w, NodeId b,
                     int64_t rows, int64_t in, int64_t out) {
  if constexpr (!kElu) {
    LCM_ON_CUDA(be, cuda_linear_backward(tp, tp.grad_acc(self), x, w, b, rows, in, out));
    cpu_linear_backward(tp, tp.grad_acc(self), x, w, b, rows, in, out);
  } else {
    LCM_ON_CUDA(be, cuda_linear_elu_backward(tp, self, x, w, b, rows, in, out));
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
          gr[j] = gyr[j] * math::elu_grad(yr[j], yr[j]);  // y > 0 ⇔ x > 0
          acc[j] += gr[j];
        }
      }
      if (gb) std::copy(acc, acc + nc, gb + c0);
    }
    cpu_linear_backward(tp, g, x, w, NodeId(-1), rows, in, out);
  }
}

/// The forward and backward of linear (kElu = false) and linear_elu (kElu = true): x: [..., in]
/// (rank 1–4), w: [out, in], b: [out] or -1 → y: [..., out]. Throws std::invalid_argument naming
/// `op` and the shapes.
template <class T, bool kElu>
NodeId linear_op(Tape<T>& t, NodeId x, NodeId w, NodeId b) {
  const char* op = kElu ? "linear_elu" : "linear";
  const auto [rows, in, out] = linear_dims(op, t, x, w, b);
  // Device dispatch point: a CUDA tape and tensors select cuBLAS (kernels/linear.cu).
  const Backend be = detail::select_backend(op, t, {x, w, b});
  Shape ys = t.shape(x);
  ys[-1] = out;
  std::vector<NodeId> inputs{x, w};
  if (b >= 0) inputs.push_back(b);
  const NodeId y = t.new_node(ys, op, inputs);
  // a weight's BF16 copy only where no gradient is recorded (eval-mode inference)
  const uint16_t* wb = t.requires_grad(y) ? nullptr : t.node(w).bf16;
  linear_forward<T, kElu>(be, t.value(x).data, t.value(w).data, wb,
                          b >= 0 ? t.value(b).data : nullptr, t.value(y).data, rows, in, out);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, w, b, rows = rows, in = in, out = out, be](Tape<T>& tp, NodeId self) {
      linear_backward<T, kElu>(be, tp, self, x, w, b, rows, in, out);
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
