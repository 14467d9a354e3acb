// The fused LSTM op (engine/lstm.hpp): one body (checks, the core node and its three output views,
// the backward) over two drivers. CPU: one input-projection GEMM per layer-direction, then per step
// one recurrent GEMM + one fused element-wise pass (fixed blocks of batch rows on OpenMP threads),
// a hand-written backward through time. CUDA: cuBLAS projections and the fused recurrence kernels
// of kernels/lstm.cu (or per step cuBLAS + the cell kernel). The cell's formulas are
// engine/ops/lstm_math.hpp's on both. PyTorch-named parameters.
#include "engine/lstm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/device_memory.hpp"
#include "engine/eigen.hpp"
#include "engine/ops/common.hpp"
#include "engine/ops/gemm.hpp"
#include "engine/ops/lstm_math.hpp"
#include "kernels/cuda_ops.hpp"

namespace lcm {
namespace {

using ops::detail::blocks_of;
using ops::detail::gemm;
using ops::detail::gemm_rows;
using ops::detail::gemm_weight_grad;
using ops::detail::kDepthChunk;
using ops::detail::kParallelMinFlops;
namespace lm = ops::lstm_math;

template <class T>
using VecMap = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstVecMap = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;

/// Batch rows per block of a step: a function of B alone (never of the thread count), so results
/// are bit-identical for any thread count. Every block's recurrent GEMM packs the whole W_hh
/// (4H×H) again, so blocks are few and large: 1 below 64 rows, 2 below 1024, else 4 (rounded up
/// to 8 rows). 512 rows of 4H = 720 gates are 1.5 MB: a block's gates still sit in the 2 MB L2
/// between its GEMM and its element-wise pass. (Blocks of 32–128 rows spent a third to a half of
/// the step re-packing W_hh at B = 2048.)
inline int64_t row_block(int64_t B) {
  const int64_t nblk = B < 64 ? 1 : B < 1024 ? 2 : 4;
  return std::max<int64_t>(8, ((B + nblk - 1) / nblk + 7) / 8 * 8);
}

/// Whether a multi-step forward projects the inputs per step and row block (just before the block's
/// recurrent product and element-wise pass, so its 4H gates stay in cache) instead of in one GEMM
/// over all steps first. A function of B alone. From B = 1024 (row blocks of ≥ 256 rows) the
/// extra packing of W_ih per block costs less than writing all gates to memory and reading them
/// back (2 × 47 MB at B = 2048, T = 8, H = 180); below, one GEMM over T·B rows is faster.
inline bool project_per_step(int64_t B) {
  return B >= 1024;
}

/// Whether the backward computes each step's weight and input gradients inside the step, per row
/// block, while the block's gate gradients dG are still in cache (dW_ih += dG_blkᵀ·x_blk,
/// dW_hh += dG_blkᵀ·h_blk(t−1) into one accumulator per block, dX_blk = dG_blk·W_ih), instead of
/// keeping dG for all steps [T·B, 4H] and running those products over the stacked steps after the
/// loop. A function of the shape alone (never of the thread count), decided once per call from the
/// first layer's input width In0 (every layer takes the same path). From B = 1024 with a weight of
/// ≥ 16384 values (4H·(In0 + H)) the per-block products (k ≥ 256 rows) run near the kernel's peak,
/// and the stacked dG (24 MB at B = 2048, T = 4, H = 180) is no longer written to memory and
/// packed from it twice (tree LSTM 180, T = 4, B = 2048: 10% faster; tag and expression LSTMs,
/// H = 100: 7–17%). Below, one product over T·B rows is faster: the autoencoder's 4H = 80-row
/// weights made 768 small products per call and took 18% longer.
inline bool grads_per_step(int64_t B, int64_t In0, int64_t H) {
  return B >= 1024 && 4 * H * (In0 + H) >= 16384;
}

/// Whether the input x, the output and their gradients are used where they lie, batch-first
/// [B, T, ·], instead of being copied to and from time-major [T, B, ·] (4 passes over [B, T, In or
/// D·H] per forward + backward). With one step the two layouts are the same; with
/// project_per_step and grads_per_step every product reads or writes one step's block of rows,
/// which is a matrix with leading dimension T·width in either layout. Otherwise the products over
/// all stacked steps need time-major rows.
inline bool boundaries_in_place(int64_t B, int64_t S, bool per_step_grads) {
  return S == 1 || (project_per_step(B) && per_step_grads);
}

/// The rows of a sequence tensor in either layout: row (t, b) (`width` values) starts at
/// p + t·ts + b·bs. Time-major [T, B, width]: ts = B·width, bs = width; batch-first [B, T, width]:
/// ts = width, bs = T·width. One step's block of consecutive batch rows is a matrix with leading
/// dimension bs. The stacked-steps products (T·B rows as one matrix) need time-major rows.
template <class P>
struct SeqRows {
  P* p = nullptr;
  int64_t ts = 0, bs = 0;
  P* row(int64_t t, int64_t b) const { return p + t * ts + b * bs; }
  /// The same rows from column `c` on (a direction's block of a bidirectional output).
  SeqRows col(int64_t c) const { return {p ? p + c : p, ts, bs}; }
};
template <class P>
SeqRows<P> time_major(P* p, int64_t B, int64_t width) {
  return {p, B * width, width};
}
template <class P>
SeqRows<P> batch_first(P* p, int64_t S, int64_t width) {
  return {p, width, S * width};
}
template <class P>
SeqRows<const P> as_const(SeqRows<P> r) {
  return {r.p, r.ts, r.bs};
}

/// The sizes and nodes of one lstm call, the same for both drivers.
struct LstmCall {
  int64_t B, S, In, H, L, D;  // S = number of steps T
  NodeId x;
  const NodeId* w;  // [L·D·4] in the tape's arena: w_ih, w_hh, b_ih, b_hh per layer-direction
  NodeId out_view = -1, hn_view = -1,
         cn_view = -1;  // the three output nodes (their gradients are read directly)
};

/// Everything the CPU backward needs, placed in the tape's arena (trivially destructible).
/// Time-major: A [L·D][T, B, 4H] activated gates (i, f, g, o), C and TC [L·D][T, B, H] (c_t and
/// tanh c_t). x0, the input, and Y[l], the layer outputs [T, B, D·H], are time-major or, with
/// boundaries_in_place, the input x and (top layer) the op's own output, batch-first.
template <class T>
struct LstmSaved : LstmCall {
  bool per_step_grads;  // grads_per_step(B, In, H)
  bool in_place;        // boundaries_in_place(B, S, per_step_grads)
  SeqRows<const T> x0;
  T* A;
  T* C;
  T* TC;
  SeqRows<T>* Y;                    // [L]
  int64_t out_off, hn_off, cn_off;  // offsets of output, h_n, c_n in the packed core value
};

/// Time index of processing step s for direction d (d = 1 runs backwards in time).
inline int64_t time_of(int64_t s, int64_t S, int64_t d) {
  return d == 0 ? s : S - 1 - s;
}

template <class T>
void check_weight(const Tape<T>& t, NodeId id, Shape want, const char* what, int l, int d) {
  const Shape& got = t.shape(id);
  if (got != want)
    throw std::invalid_argument(std::string("ops::lstm: ") + what + " of layer " +
                                std::to_string(l) + (d ? " (reverse)" : "") + " has shape " +
                                got.str() + ", expected " + want.str());
}

/// Forward of one layer-direction. X: the layer's input rows (In values each; time-major unless
/// s.in_place); writes A, C, TC and the direction's column block of Y[l]. Each step runs per
/// block of row_block(B) batch rows: the block's recurrent GEMM, then its element-wise pass while
/// the block is still in cache. wb_ih, wb_hh: the weights' BF16 bits or nullptr (read by the
/// one-row products, engine/ops/gemm.hpp).
template <class T>
void forward_direction(const LstmSaved<T>& s, int64_t l, int64_t d, SeqRows<const T> X, int64_t In,
                       const T* w_ih, const T* w_hh, const T* b_ih, const T* b_hh, T* bsum,
                       const uint16_t* wb_ih, const uint16_t* wb_hh) {
  const int64_t B = s.B, S = s.S, H = s.H, G4 = 4 * H;
  const int64_t ld = l * s.D + d;
  T* A = s.A + ld * S * B * G4;
  T* C = s.C + ld * S * B * H;
  T* TC = s.TC + ld * S * B * H;
  const SeqRows<T> Y = s.Y[l].col(d * H);
  const int64_t rb = row_block(B);
  const bool per_step = S > 1 && project_per_step(B);  // else projected here, before the steps
  if (S == 1) {
    // One step from the zero initial state: the forget gate multiplies c_{-1} = 0, so its
    // quarter of the input projection is not computed (its pre-activation is the bias alone;
    // its gradient is zero either way). The tree LSTMs of the cost model are mostly one step.
    gemm_rows<T>(B, H, In, {X.p, X.bs, false}, {w_ih, In, true, wb_ih}, A, G4, false,
                 rb);  // i: rows [0, H)
    gemm_rows<T>(B, 2 * H, In, {X.p, X.bs, false},
                 {w_ih + 2 * H * In, In, true, wb_ih ? wb_ih + 2 * H * In : nullptr}, A + 2 * H, G4,
                 false, rb);  // g, o
    for (int64_t b = 0; b < B; ++b) std::fill(A + b * G4 + H, A + b * G4 + 2 * H, T(0));
  } else if (!per_step) {
    // All input projections of the sequence in one GEMM: [S·B, In] × [In, 4H] (time-major X).
    gemm_rows<T>(S * B, G4, In, {X.p, X.bs, false}, {w_ih, In, true, wb_ih}, A, G4, false, rb);
  }
  for (int64_t j = 0; j < G4; ++j) bsum[j] = b_ih[j] + b_hh[j];
  const int64_t nblk = blocks_of(B, rb);
  const bool parallel = nblk > 1 && 2.0 * B * H * G4 >= kParallelMinFlops;
  for (int64_t st = 0; st < S; ++st) {
    const int64_t tt = time_of(st, S, d);
    T* At = A + tt * B * G4;
    const T* Cp = st > 0 ? C + time_of(st - 1, S, d) * B * H : nullptr;
    const int64_t tp = st > 0 ? time_of(st - 1, S, d) : -1;  // time of h_{t−1}
    T* Ct = C + tt * B * H;
    T* TCt = TC + tt * B * H;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t blk = 0; blk < nblk; ++blk) {
      const int64_t r0 = blk * rb, nr = std::min(rb, B - r0);
      if (per_step) {  // this block's input projection onto the biases, left in cache for the
                       // recurrent product
        for (int64_t b = r0; b < r0 + nr; ++b) std::copy(bsum, bsum + G4, At + b * G4);
        gemm<T>(nr, G4, In, {X.row(tt, r0), X.bs, false}, {w_ih, In, true, wb_ih}, At + r0 * G4, G4,
                true);
      }
      if (tp >= 0)  // h_{-1} = 0: no recurrent product at the first step
        gemm<T>(nr, G4, H, {Y.row(tp, r0), Y.bs, false}, {w_hh, H, true, wb_hh}, At + r0 * G4, G4,
                true);
      for (int64_t b = r0; b < r0 + nr; ++b) {
        VecMap<T> z(At + b * G4, G4);
        if (!per_step)
          z += ConstVecMap<T>(bsum, G4);  // per step: the projection started from the biases
        // The gates (Eigen's vectorised logistic and tanh, the CPU's activations), then the cell
        // of lstm_math.hpp.
        z.head(2 * H) = z.head(2 * H).logistic();
        z.segment(2 * H, H) = z.segment(2 * H, H).tanh();
        z.tail(H) = z.tail(H).logistic();
        VecMap<T> c(Ct + b * H, H), tc(TCt + b * H, H), h(Y.row(tt, b), H);
        if (Cp)
          c = lm::cell(z.segment(H, H), ConstVecMap<T>(Cp + b * H, H), z.head(H),
                       z.segment(2 * H, H));
        else
          c = lm::cell_first(z.head(H), z.segment(2 * H, H));
        tc = c.tanh();
        h = lm::hidden(z.tail(H), tc);
      }
    }
  }
}

/// Backward of one layer-direction. X: the layer's input rows (as in forward_direction); dY: the
/// gradient of this layer's output rows (D·H wide; reads the direction's block; p = nullptr: none),
/// dhn/dcn: [B, H] gradients of its final h and c. Accumulates into the weight gradients (nullptr =
/// not needed) and sets (accumulate = false) or adds into the rows of dX (In wide; p = nullptr: not
/// needed). Unless s.per_step_grads (or S = 1), X, Y and dX are time-major. Scratch: dh, dc [B, H],
/// colsum [blocks, 4H]; dG [S·B, 4H], or with s.per_step_grads [blocks, row_block, 4H]; partial
/// (see gemm_weight_grad; unused with per_step_grads); wacc: with per_step_grads,
/// [blocks, 4H·(In + H)] per-block dW accumulators.
/// Each step runs per block of rows: element-wise gate gradients, then the block's
/// dh_{t−1} = dG_t·W_hh (and with per_step_grads its dW and dX products). Bias and (per-step)
/// weight gradients are summed per block, then over blocks in block order (deterministic for any
/// thread count).
template <class T>
void backward_direction(Tape<T>& t, const LstmSaved<T>& s, int64_t l, int64_t d, SeqRows<const T> X,
                        int64_t In, SeqRows<const T> dY, const T* dhn, const T* dcn, T* dG, T* dh,
                        T* dc, T* colsum, T* partial, T* wacc, SeqRows<T> dX, bool accumulate) {
  const int64_t B = s.B, S = s.S, H = s.H, G4 = 4 * H;
  const int64_t ld = l * s.D + d;
  const T* A = s.A + ld * S * B * G4;
  const T* C = s.C + ld * S * B * H;
  const T* TC = s.TC + ld * S * B * H;
  const SeqRows<const T> Y = as_const(s.Y[l].col(d * H));
  const NodeId* wid = s.w + ld * 4;
  const T* w_ih = t.value(wid[0]).data;
  const T* w_hh = t.value(wid[1]).data;
  dY = dY.col(d * H);
  if (dhn)
    std::memcpy(dh, dhn, sizeof(T) * B * H);
  else
    std::memset(dh, 0, sizeof(T) * B * H);
  if (dcn)
    std::memcpy(dc, dcn, sizeof(T) * B * H);
  else
    std::memset(dc, 0, sizeof(T) * B * H);
  const int64_t rb = row_block(B), nblk = blocks_of(B, rb);
  std::memset(colsum, 0, sizeof(T) * nblk * G4);
  const bool parallel = nblk > 1 && 2.0 * B * H * G4 >= kParallelMinFlops;
  const bool per_step = s.per_step_grads;
  T* g_ih = t.grad_acc(wid[0]);
  T* g_hh = S > 1 ? t.grad_acc(wid[1]) : nullptr;
  const int64_t wsz =
      G4 * (In + H);  // one block's accumulators: dW_ih [4H, In], then dW_hh [4H, H]
  for (int64_t st = S - 1; st >= 0; --st) {
    const int64_t tt = time_of(st, S, d);
    const T* At = A + tt * B * G4;
    const T* TCt = TC + tt * B * H;
    const T* Cp = st > 0 ? C + time_of(st - 1, S, d) * B * H : nullptr;
    const int64_t tp = st > 0 ? time_of(st - 1, S, d) : -1;  // time of h_{t−1}
    const bool first =
        st == S - 1;  // the first step processed: the accumulators are written, not added
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t blk = 0; blk < nblk; ++blk) {
      const int64_t r0 = blk * rb, nr = std::min(rb, B - r0);
      VecMap<T> cs(colsum + blk * G4, G4);
      // This block's gate gradients: its own scratch rows (per step), or rows of the stacked dG.
      T* dGb = per_step ? dG + blk * rb * G4 : dG + (tt * B + r0) * G4;
      for (int64_t b = r0; b < r0 + nr; ++b) {
        ConstVecMap<T> z(At + b * G4, G4), tc(TCt + b * H, H);
        VecMap<T> dhb(dh + b * H, H), dcb(dc + b * H, H), g(dGb + (b - r0) * G4, G4);
        auto i = z.head(H);
        auto f = z.segment(H, H);
        auto gg = z.segment(2 * H, H);
        auto o = z.tail(H);
        if (dY.p) dhb += ConstVecMap<T>(dY.row(tt, b), H);
        // dc_t = dc_{t+1}·f_{t+1} (carried) + dh_t·o·(1 − tanh² c_t); the gate gradients.
        dcb = lm::cell_grad<T>(dcb, dhb, o, tc);
        g.tail(H) = lm::grad_o<T>(dhb, tc, o);
        g.head(H) = lm::grad_i<T>(dcb, gg, i);
        if (Cp)
          g.segment(H, H) = lm::grad_f<T>(dcb, ConstVecMap<T>(Cp + b * H, H), f);
        else
          g.segment(H, H).setZero();
        g.segment(2 * H, H) = lm::grad_g<T>(dcb, i, gg);
        dcb = lm::carry(dcb, f);
        cs += g;
      }
      if (st > 0)  // dh_{t−1} = dG_t·W_hh for this block's rows
        gemm<T>(nr, H, G4, {dGb, G4, false}, {w_hh, H, false}, dh + r0 * H, H, false);
      if (per_step) {  // this step's share of dW_ih, dW_hh and dX for this block, dG still in cache
        T* acc = wacc + blk * wsz;
        if (g_ih)
          gemm<T>(G4, In, nr, {dGb, G4, true}, {X.row(tt, r0), X.bs, false}, acc, In, !first);
        if (g_hh && tp >= 0)
          gemm<T>(G4, H, nr, {dGb, G4, true}, {Y.row(tp, r0), Y.bs, false}, acc + G4 * In, H,
                  !first);
        if (dX.p)
          gemm<T>(nr, In, G4, {dGb, G4, false}, {w_ih, In, false}, dX.row(tt, r0), dX.bs,
                  accumulate);
      }
    }
  }
  if (per_step) {
    // Block accumulators into the weight gradients, in block order. dW_hh's were first written at
    // step S − 1 > 0 (g_hh is nullptr when S = 1).
    auto add_blocks = [&](T* g, int64_t off, int64_t n) {
#pragma omp parallel for schedule(static) if (n * nblk >= (int64_t(1) << 18))
      for (int64_t j0 = 0; j0 < n; j0 += 4096) {
        const int64_t j1 = std::min(n, j0 + 4096);
        for (int64_t blk = 0; blk < nblk; ++blk) {
          const T* a = wacc + blk * wsz + off;
          for (int64_t j = j0; j < j1; ++j) g[j] += a[j];
        }
      }
    };
    if (g_ih) add_blocks(g_ih, 0, G4 * In);
    if (g_hh) add_blocks(g_hh, G4 * In, G4 * H);
  } else {
    // Over the stacked steps: X, Y and dX are time-major here.
    if (g_ih) gemm_weight_grad(G4, In, S * B, dG, G4, X.p, X.bs, g_ih, partial);
    if (g_hh) {
      // dW_hh = Σ_t dG_tᵀ·h_{t−1}: one GEMM over the stacked steps that had a predecessor.
      const int64_t g0 = d == 0 ? 1 : 0, h0 = d == 0 ? 0 : 1;
      gemm_weight_grad(G4, H, (S - 1) * B, dG + g0 * B * G4, G4, Y.row(h0, 0), Y.bs, g_hh, partial);
    }
  }
  for (int64_t blk = 1; blk < nblk; ++blk)
    for (int64_t j = 0; j < G4; ++j) colsum[j] += colsum[blk * G4 + j];
  for (int k = 2; k < 4; ++k)
    if (T* g = t.grad_acc(wid[k]))
      for (int64_t j = 0; j < G4; ++j) g[j] += colsum[j];
  if (dX.p && !per_step)
    gemm_rows<T>(S * B, In, G4, {dG, G4, false}, {w_ih, In, false}, dX.p, dX.bs, accumulate, rb);
}

template <class T>
void lstm_backward(Tape<T>& t, NodeId self, const LstmSaved<T>& s) {
  const int64_t B = s.B, S = s.S, H = s.H, D = s.D, L = s.L, DH = D * H, G4 = 4 * H;
  (void)self;  // the core's own gradient buffer is only a marker (see view_of_core)
  // Gradients of the three outputs, read from their nodes; nullptr: nothing flowed into that
  // output (the cost model uses h_n only), so nothing is copied or added for it.
  const T* gout = t.grad_if_any(s.out_view);  // [B, S, DH]
  const T* ghn = t.grad_if_any(s.hn_view);    // [L·D, B, H]
  const T* gcn = t.grad_if_any(s.cn_view);
  SeqRows<const T> dY;  // gradient of the top layer's output: where it lies, or a time-major copy
  if (gout && s.in_place) {
    dY = batch_first(gout, S, DH);
  } else if (gout) {
    T* dytm = t.template scratch<T>(S * B * DH);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tt = 0; tt < S; ++tt)
        std::memcpy(dytm + (tt * B + b) * DH, gout + (b * S + tt) * DH, sizeof(T) * DH);
    dY = time_major<const T>(dytm, B, DH);
  }
  const int64_t rb = row_block(B), nblk = blocks_of(B, rb), max_in = std::max(s.In, DH);
  const bool per_step = s.per_step_grads;
  T* dG = t.template scratch<T>(per_step ? nblk * rb * G4 : S * B * G4);
  T* dh = t.template scratch<T>(B * H);
  T* dc = t.template scratch<T>(B * H);
  T* colsum = t.template scratch<T>(nblk * G4);
  T* partial = per_step
                   ? nullptr
                   : t.template scratch<T>(std::max<int64_t>(1, blocks_of(S * B, kDepthChunk) - 1) *
                                           G4 * max_in);
  T* wacc = per_step ? t.template scratch<T>(nblk * G4 * (max_in + H)) : nullptr;
  // Gradients of the lower layers' outputs: layer l writes layer l−1's into one buffer while it
  // reads its own from the other (or from dY at the top).
  T* below[2] = {L > 1 ? t.template scratch<T>(S * B * DH) : nullptr,
                 L > 2 ? t.template scratch<T>(S * B * DH) : nullptr};
  bool gx_fresh = false;
  T* gx = t.grad_write(s.x, gx_fresh);
  // x's gradient: written (or added, when x already had one) where it lies, or through a
  // time-major scratch moved into it at the end.
  T* dXtm = nullptr;
  if (gx && !s.in_place) dXtm = t.template scratch<T>(S * B * s.In);
  SeqRows<const T> dYcur = dY;
  for (int64_t l = L - 1; l >= 0; --l) {
    const int64_t In = l == 0 ? s.In : DH;
    const SeqRows<const T> X = l == 0 ? s.x0 : as_const(s.Y[l - 1]);
    const SeqRows<T> dX = l > 0        ? time_major(below[(L - 1 - l) % 2], B, DH)
                          : s.in_place ? batch_first(gx, S, In)
                                       : time_major(dXtm, B, In);
    const bool add_into_x = l == 0 && s.in_place && !gx_fresh;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t ld = l * D + d;
      backward_direction(t, s, l, d, X, In, dYcur, ghn ? ghn + ld * B * H : nullptr,
                         gcn ? gcn + ld * B * H : nullptr, dG, dh, dc, colsum, partial, wacc, dX,
                         d > 0 || add_into_x);
    }
    dYcur = as_const(dX);
  }
  if (dXtm) {
    const int64_t In = s.In;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tt = 0; tt < S; ++tt) {
        T* dst = gx + (b * S + tt) * In;
        const T* src = dXtm + (tt * B + b) * In;
        if (gx_fresh)
          std::memcpy(dst, src, sizeof(T) * In);
        else
          for (int64_t j = 0; j < In; ++j) dst[j] += src[j];
      }
  }
}

/// A node that views shape.numel() values of `core`'s value from offset `off` as `shape`. Its
/// backward only marks the core as reached (an uninitialised gradient buffer, so that the core's
/// backward runs); the core's backward reads the views' gradients directly (LstmSaved::*_view),
/// so no [B, T, H]-sized core gradient is zero-filled and added into.
template <class T>
NodeId view_of_core(Tape<T>& t, NodeId core, int64_t off, Shape shape, const char* op) {
  NodeId id = t.new_node(Shape{0}, op, {core});  // storage comes from the core (64 wasted bytes)
  t.value(id) = Tensor<T>{t.value(core).data + off, shape, t.value(core).device};
  t.set_backward(id, [core](Tape<T>& tp, NodeId) {
    bool fresh = false;
    tp.grad_write(core, fresh);
  });
  return id;
}

void check_spec(const LstmSpec& spec, const char* who) {
  if (spec.input_size < 1 || spec.hidden_size < 1 || spec.num_layers < 1)
    throw std::invalid_argument(std::string(who) + ": bad LstmSpec (input_size " +
                                std::to_string(spec.input_size) + ", hidden_size " +
                                std::to_string(spec.hidden_size) + ", num_layers " +
                                std::to_string(spec.num_layers) + "; all must be >= 1)");
}

const char* const kKinds[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};

Shape lstm_param_shape(const LstmSpec& spec, int kind, int layer) {
  const int64_t G4 = 4 * int64_t(spec.hidden_size);
  switch (kind) {
    case 0:
      return Shape{G4, spec.layer_input_size(layer)};
    case 1:
      return Shape{G4, spec.hidden_size};
    default:
      return Shape{G4};
  }
}

/// The CPU driver: the forward of all layers and directions into `core` (laid out as ops::lstm
/// describes), its saved state in the tape's arena, and the core's backward.
template <class T>
void cpu_lstm_forward(Tape<T>& t, NodeId core, const LstmCall& call) {
  const int64_t B = call.B, S = call.S, In = call.In, H = call.H, L = call.L, D = call.D;
  const int64_t DH = D * H, G4 = 4 * H;
  const int64_t n_out = B * S * DH, n_state = L * D * B * H;
  auto* s = new (t.template scratch<char>(sizeof(LstmSaved<T>))) LstmSaved<T>();
  static_cast<LstmCall&>(*s) = call;
  s->per_step_grads = grads_per_step(B, In, H);
  s->in_place = boundaries_in_place(B, S, s->per_step_grads);
  const T* xd = t.value(call.x).data;
  if (s->in_place) {
    s->x0 = batch_first(xd, S, In);
  } else {
    T* xtm = t.template scratch<T>(S * B * In);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tt = 0; tt < S; ++tt)
        std::memcpy(xtm + (tt * B + b) * In, xd + (b * S + tt) * In, sizeof(T) * In);
    s->x0 = time_major<const T>(xtm, B, In);
  }
  s->A = t.template scratch<T>(L * D * S * B * G4);
  s->C = t.template scratch<T>(L * D * S * B * H);
  s->TC = t.template scratch<T>(L * D * S * B * H);
  T* out = t.value(core).data;
  // Layer outputs: time-major scratch; the top layer's is the op's output itself when in place.
  s->Y = t.template scratch<SeqRows<T>>(L);
  for (int64_t l = 0; l < L; ++l) new (s->Y + l) SeqRows<T>();
  const int64_t n_scratch_layers = s->in_place ? L - 1 : L;
  T* ys = n_scratch_layers > 0 ? t.template scratch<T>(n_scratch_layers * S * B * DH) : nullptr;
  for (int64_t l = 0; l < n_scratch_layers; ++l) s->Y[l] = time_major(ys + l * S * B * DH, B, DH);
  if (s->in_place) s->Y[L - 1] = batch_first(out, S, DH);
  s->out_off = 0;
  s->hn_off = n_out;
  s->cn_off = n_out + n_state;
  T* bsum = t.template scratch<T>(G4);

  for (int64_t l = 0; l < L; ++l) {
    const int64_t In_l = l == 0 ? In : DH;
    const SeqRows<const T> X = l == 0 ? s->x0 : as_const(s->Y[l - 1]);
    for (int64_t d = 0; d < D; ++d) {
      const NodeId* wi = s->w + (l * D + d) * 4;
      // the weights' BF16 copies only where no gradient is recorded (eval-mode inference)
      const bool grads = t.requires_grad(wi[0]) || t.requires_grad(wi[1]);
      forward_direction(*s, l, d, X, In_l, t.value(wi[0]).data, t.value(wi[1]).data,
                        t.value(wi[2]).data, t.value(wi[3]).data, bsum,
                        grads ? nullptr : t.node(wi[0]).bf16, grads ? nullptr : t.node(wi[1]).bf16);
      // h_n, c_n: state after the direction's last processing step.
      const int64_t last = time_of(S - 1, S, d), ld = l * D + d;
      T* hn = out + n_out + ld * B * H;
      T* cn = out + n_out + n_state + ld * B * H;
      const SeqRows<T> Yl = s->Y[l].col(d * H);
      const T* Cl = s->C + ld * S * B * H + last * B * H;
      for (int64_t b = 0; b < B; ++b) std::memcpy(hn + b * H, Yl.row(last, b), sizeof(T) * H);
      std::memcpy(cn, Cl, sizeof(T) * B * H);
    }
  }
  if (!s->in_place) {
    const SeqRows<T> Ytop = s->Y[L - 1];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tt = 0; tt < S; ++tt)
        std::memcpy(out + (b * S + tt) * DH, Ytop.row(tt, b), sizeof(T) * DH);
  }

  t.set_backward(core, [s](Tape<T>& tp, NodeId self) { lstm_backward(tp, self, *s); });
}

#ifdef LCM_WITH_CUDA
/// The CUDA driver's saved state (device arrays, time-major as LstmSaved).
template <class T>
struct CudaLstmSaved : LstmCall {
  T* xtm;
  T* A;
  T* C;
  T* TC;
  T* Y;
  bool fused = false;  // the forward ran the fused recurrence; the backward does too
};

/// The CUDA backward: the views' gradients (absent ones as zeros) through all layers.
template <class T>
void cuda_lstm_backward(Tape<T>& t, const CudaLstmSaved<T>& s) {
  const int64_t B = s.B, S = s.S, H = s.H, D = s.D, L = s.L, DH = D * H, G4 = 4 * H;
  const T* gout = t.grad_if_any(s.out_view);  // [B, S, DH]
  const T* ghn = t.grad_if_any(s.hn_view);    // [L·D, B, H]
  const T* gcn = t.grad_if_any(s.cn_view);
  T* dY = t.template device_scratch<T>(S * B * DH);
  if (gout)
    cuda::swap_leading(dY, gout, B, S, DH, false);  // [B, S, DH] → [S, B, DH]
  else
    device_zero(dY, sizeof(T) * size_t(S * B * DH));
  T* dG = t.template device_scratch<T>(S * B * G4);
  T* dh = t.template device_scratch<T>(B * H);
  T* dc = t.template device_scratch<T>(B * H);
  T* colsum_work = t.template device_scratch<T>(cuda::column_sums_work(S * B, G4));
  T* dYbelow = L > 1 ? t.template device_scratch<T>(S * B * DH) : nullptr;
  T* gx = t.grad_acc(s.x);
  T* dXtm = gx ? t.template device_scratch<T>(S * B * s.In) : nullptr;
  for (int64_t l = L - 1; l >= 0; --l) {
    const int64_t In = l == 0 ? s.In : DH;
    const T* X = l == 0 ? s.xtm : s.Y + (l - 1) * S * B * DH;
    T* dX = l == 0 ? dXtm : dYbelow;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t ld = l * D + d;
      const T* A = s.A + ld * S * B * G4;
      const T* C = s.C + ld * S * B * H;
      const T* TC = s.TC + ld * S * B * H;
      const T* Y = s.Y + l * S * B * DH + d * H;
      const NodeId* wid = s.w + ld * 4;
      const T* w_ih = t.value(wid[0]).data;
      const T* w_hh = t.value(wid[1]).data;
      if (ghn)
        cuda::copy_blocks(dh, B * H, int64_t(0), ghn + ld * B * H, B * H, int64_t(0), int64_t(1),
                          B * H, false);
      else
        device_zero(dh, sizeof(T) * size_t(B * H));
      if (gcn)
        cuda::copy_blocks(dc, B * H, int64_t(0), gcn + ld * B * H, B * H, int64_t(0), int64_t(1),
                          B * H, false);
      else
        device_zero(dc, sizeof(T) * size_t(B * H));
      if (s.fused) {
        cuda::lstm_backward_recurrence(A, C, TC, dY + d * H, DH, w_hh, dh, dc, dG, S, B, H, d == 1);
      } else {
        for (int64_t st = S - 1; st >= 0; --st) {
          const int64_t tt = time_of(st, S, d);
          const T* Cp = st > 0 ? C + time_of(st - 1, S, d) * B * H : nullptr;
          T* dGt = dG + tt * B * G4;
          cuda::lstm_cell_backward(A + tt * B * G4, TC + tt * B * H, Cp, dY + tt * B * DH + d * H,
                                   DH, dh, dc, dGt, B, H);
          if (st > 0)  // dh_{t−1} = dG_t·W_hh
            cuda::gemm(false, false, B, H, G4, dGt, G4, w_hh, H, dh, H, false);
        }
      }
      if (T* gw = t.grad_acc(wid[0]))
        cuda::gemm(true, false, G4, In, S * B, dG, G4, X, In, gw, In, true);
      if (S > 1)
        if (T* gw = t.grad_acc(wid[1])) {
          const int64_t g0 = d == 0 ? 1 : 0, h0 = d == 0 ? 0 : 1;
          cuda::gemm(true, false, G4, H, (S - 1) * B, dG + g0 * B * G4, G4, Y + h0 * B * DH, DH, gw,
                     H, true);
        }
      // Both biases get the column sums of dG: summed straight into each (g + Σ, the same bits
      // as zeroing a sum, summing into it and adding it), 2–4 launches instead of 4–5.
      if (T* gbi = t.grad_acc(wid[2])) cuda::column_sums_add(dG, gbi, S * B, G4, colsum_work);
      if (T* gbh = t.grad_acc(wid[3])) cuda::column_sums_add(dG, gbh, S * B, G4, colsum_work);
      if (dX) cuda::gemm(false, false, S * B, In, G4, dG, G4, w_ih, In, dX, In, d > 0);
    }
    if (l > 0) std::swap(dY, dYbelow);
  }
  if (gx) cuda::swap_leading(gx, dXtm, S, B, s.In, true);  // [S, B, In] → [B, S, In], added
}

/// The CUDA driver: the forward into `core` (as cpu_lstm_forward) and the core's backward.
template <class T>
void cuda_lstm_forward(Tape<T>& t, NodeId core, const LstmCall& call) {
  const int64_t B = call.B, S = call.S, In = call.In, H = call.H, L = call.L, D = call.D;
  const int64_t DH = D * H, G4 = 4 * H;
  const int64_t n_out = B * S * DH, n_state = L * D * B * H;
  auto s = std::make_shared<CudaLstmSaved<T>>();
  static_cast<LstmCall&>(*s) = call;
  s->xtm = t.template device_scratch<T>(S * B * In);
  cuda::swap_leading(s->xtm, t.value(call.x).data, B, S, In, false);  // [B, S, In] → [S, B, In]
  s->A = t.template device_scratch<T>(L * D * S * B * G4);
  s->C = t.template device_scratch<T>(L * D * S * B * H);
  s->TC = t.template device_scratch<T>(L * D * S * B * H);
  s->Y = t.template device_scratch<T>(L * S * B * DH);
  T* out = t.value(core).data;
  T* bsum = t.template device_scratch<T>(G4);
  // The recurrence as one launch per layer-direction where W_hh fits in shared memory (the
  // expression LSTM, H = 100, 66 steps: 2·66 launches → 1), else per step cuBLAS + cell kernel.
  const bool fused = cuda::lstm_recurrence_shape<T>(B, H).rows_per_block > 0;
  s->fused = fused;
  for (int64_t l = 0; l < L; ++l) {
    const int64_t In_l = l == 0 ? In : DH;
    const T* X = l == 0 ? s->xtm : s->Y + (l - 1) * S * B * DH;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t ld = l * D + d;
      const NodeId* wi = s->w + ld * 4;
      T* A = s->A + ld * S * B * G4;
      T* C = s->C + ld * S * B * H;
      T* TC = s->TC + ld * S * B * H;
      T* Y = s->Y + l * S * B * DH + d * H;
      const T* w_hh = t.value(wi[1]).data;
      cuda::gemm(false, true, S * B, G4, In_l, X, In_l, t.value(wi[0]).data, In_l, A, G4, false);
      cuda::add(t.value(wi[2]).data, t.value(wi[3]).data, bsum, G4);
      if (fused) {  // all steps in one launch, W_hh in shared memory (kernels/lstm.cu)
        cuda::lstm_forward_recurrence(A, bsum, w_hh, C, TC, Y, DH, S, B, H, d == 1);
      } else {
        for (int64_t st = 0; st < S; ++st) {
          const int64_t tt = time_of(st, S, d);
          T* At = A + tt * B * G4;
          if (st > 0)
            cuda::gemm(false, true, B, G4, H, Y + time_of(st - 1, S, d) * B * DH, DH, w_hh, H, At,
                       G4, true);
          const T* Cp = st > 0 ? C + time_of(st - 1, S, d) * B * H : nullptr;
          cuda::lstm_cell_forward(At, bsum, Cp, C + tt * B * H, TC + tt * B * H, Y + tt * B * DH,
                                  DH, B, H);
        }
      }
      const int64_t last = time_of(S - 1, S, d);
      cuda::copy_blocks(out + n_out + ld * B * H, H, int64_t(0), Y + last * B * DH, DH, int64_t(0),
                        B, H, false);
      cuda::copy_blocks(out + n_out + n_state + ld * B * H, B * H, int64_t(0), C + last * B * H,
                        B * H, int64_t(0), int64_t(1), B * H, false);
    }
  }
  cuda::swap_leading(out, s->Y + (L - 1) * S * B * DH, S, B, DH, false);  // [S, B, DH] → [B, S, DH]
  t.set_backward(core, [s](Tape<T>& tp, NodeId) { cuda_lstm_backward(tp, *s); });
}
#endif  // LCM_WITH_CUDA

}  // namespace

namespace ops {

template <class T>
LstmOutputs lstm(Tape<T>& t, NodeId x, const LstmSpec& spec, const std::vector<LstmWeights>& w) {
  check_spec(spec, "ops::lstm");
  const Tensor<T>& xv = t.value(x);
  if (xv.rank() != 3 || xv.size(2) != spec.input_size || xv.size(0) < 1 || xv.size(1) < 1)
    throw std::invalid_argument("ops::lstm: x has shape " + xv.shape.str() + ", expected [B, T, " +
                                std::to_string(spec.input_size) + "] with B, T >= 1");
  const int64_t B = xv.size(0), S = xv.size(1), H = spec.hidden_size;
  const int64_t L = spec.num_layers, D = spec.directions(), DH = D * H;
  if (int64_t(w.size()) != L * D)
    throw std::invalid_argument("ops::lstm: " + std::to_string(w.size()) + " weight sets for " +
                                std::to_string(L) + " layer(s) x " + std::to_string(D) +
                                " direction(s)");
  std::vector<NodeId> inputs;
  inputs.reserve(1 + 4 * w.size());
  inputs.push_back(x);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const LstmWeights& lw = w[l * D + d];
      for (int k = 0; k < 4; ++k) {
        NodeId id = k == 0 ? lw.w_ih : k == 1 ? lw.w_hh : k == 2 ? lw.b_ih : lw.b_hh;
        if (id < 0 || size_t(id) >= t.size())
          throw std::invalid_argument(std::string("ops::lstm: ") + kKinds[k] + " of layer " +
                                      std::to_string(l) + (d ? " (reverse)" : "") +
                                      " is not a node of this tape");
        check_weight(t, id, lstm_param_shape(spec, k, int(l)), kKinds[k], int(l), int(d));
        inputs.push_back(id);
      }
    }
  // Device dispatch point: a CUDA tape and tensors select the CUDA driver (kernels/lstm.cu +
  // cuBLAS).
  const ops::detail::Backend be = ops::detail::select_backend("lstm", t, inputs);
  const int64_t n_out = B * S * DH, n_state = L * D * B * H;
  // The weight ids, as `inputs` lists them after x, for both drivers' backward.
  NodeId* wid = t.template scratch<NodeId>(L * D * 4);
  std::copy(inputs.begin() + 1, inputs.end(), wid);
  // The op's value: [output | h_n | c_n] in one node; three views of it are the op's outputs. The
  // views' backward only marks the core as reached; the core's backward reads their gradients.
  const NodeId core = t.new_node(Shape{n_out + 2 * n_state}, "lstm", std::move(inputs));
  LstmOutputs r;
  r.output = view_of_core(t, core, 0, Shape{B, S, DH}, "lstm.output");
  r.h_n = view_of_core(t, core, n_out, Shape{L * D, B, H}, "lstm.h_n");
  r.c_n = view_of_core(t, core, n_out + n_state, Shape{L * D, B, H}, "lstm.c_n");
  const LstmCall call{B, S, spec.input_size, H, L, D, x, wid, r.output, r.h_n, r.c_n};
#ifdef LCM_WITH_CUDA
  if (be == ops::detail::Backend::Cuda) {
    cuda_lstm_forward(t, core, call);
    return r;
  }
#endif
  (void)be;
  cpu_lstm_forward(t, core, call);
  return r;
}

template LstmOutputs lstm<float>(Tape<float>&, NodeId, const LstmSpec&,
                                 const std::vector<LstmWeights>&);
template LstmOutputs lstm<double>(Tape<double>&, NodeId, const LstmSpec&,
                                  const std::vector<LstmWeights>&);

}  // namespace ops

std::string lstm_parameter_name(const std::string& prefix, const std::string& kind, int layer,
                                int direction) {
  std::string n = prefix.empty() ? std::string() : prefix + ".";
  n += kind + "_l" + std::to_string(layer);
  if (direction == 1) n += "_reverse";
  return n;
}

template <class T>
void add_lstm_parameters(ParameterStore<T>& store, const std::string& prefix, const LstmSpec& spec,
                         Rng* rng) {
  check_spec(spec, "add_lstm_parameters");
  const double bound = 1.0 / std::sqrt(double(spec.hidden_size));
  for (int l = 0; l < spec.num_layers; ++l)
    for (int d = 0; d < spec.directions(); ++d)
      for (int k = 0; k < 4; ++k) {
        Parameter<T>& p =
            store.add(lstm_parameter_name(prefix, kKinds[k], l, d), lstm_param_shape(spec, k, l));
        if (rng)
          for (T& v : p.value) v = T(rng->uniform(-bound, bound));
      }
}

template <class T>
std::vector<LstmWeights> lstm_weight_nodes(Tape<T>& t, ParameterStore<T>& store,
                                           const std::string& prefix, const LstmSpec& spec) {
  check_spec(spec, "lstm_weight_nodes");
  std::vector<LstmWeights> w;
  w.reserve(size_t(spec.num_layers * spec.directions()));
  for (int l = 0; l < spec.num_layers; ++l)
    for (int d = 0; d < spec.directions(); ++d) {
      NodeId ids[4];
      for (int k = 0; k < 4; ++k) {
        Parameter<T>& p = store.at(lstm_parameter_name(prefix, kKinds[k], l, d));
        Shape want = lstm_param_shape(spec, k, l);
        if (p.shape != want)
          throw std::invalid_argument("lstm_weight_nodes: " + p.name + " has shape " +
                                      p.shape.str() + ", expected " + want.str());
        ids[k] = t.param(p);
      }
      w.push_back(LstmWeights{ids[0], ids[1], ids[2], ids[3]});
    }
  return w;
}

template void add_lstm_parameters<float>(ParameterStore<float>&, const std::string&,
                                         const LstmSpec&, Rng*);
template void add_lstm_parameters<double>(ParameterStore<double>&, const std::string&,
                                          const LstmSpec&, Rng*);
template std::vector<LstmWeights> lstm_weight_nodes<float>(Tape<float>&, ParameterStore<float>&,
                                                           const std::string&, const LstmSpec&);
template std::vector<LstmWeights> lstm_weight_nodes<double>(Tape<double>&, ParameterStore<double>&,
                                                            const std::string&, const LstmSpec&);

}  // namespace lcm
