// Launchers of the CUDA kernels behind the engine's ops (the CUDA backend chosen by
// ops::detail::select_backend): raw device pointers in, no tape, no Eigen. Each is defined in the
// .cu file mirroring the op family (kernels/elementwise.cu, shape.cu, loss.cu, rank_loss.cu,
// linear.cu, lstm.cu, optim.cu; emulated in kernels/emulated/ under the same names) and explicitly
// instantiated for T = float and double. Their scalar formulas are the engine's
// __host__ __device__ headers (engine/rng.hpp, engine/ops/*_math.hpp). All run on
// the default stream and throw std::runtime_error naming the kernel on a launch error. Reductions
// are deterministic: fixed blocks, fixed tree order, no atomics.
#pragma once
#include <cstdint>

#include "engine/ops/elementwise_math.hpp"
#include "engine/ops/loss_math.hpp"

namespace lcm::cuda {

// ---- element-wise (kernels/elementwise.cu) ----

/// The unary element-wise ops: y = f(x) with backward dx += dy ⊙ f'(x, y) (the op's own enum and
/// formulas, engine/ops/elementwise_math.hpp).
using Unary = ops::Unary;

/// y[i] = f(x[i]), i < n.
template <class T>
void unary_forward(Unary kind, const T* x, T* y, int64_t n, T param);
/// gx[i] += gy[i]·f'(x[i], y[i]).
template <class T>
void unary_backward(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param);
/// gx[i] = gy[i]·f'(x[i], y[i]): unary_backward into a gradient it writes whole (no zero-fill
/// first: one launch instead of two).
template <class T>
void unary_grad(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param);
/// y[r·cols + c] = f(y[r·cols + c] + bias[c]) for r < rows, c < cols: a linear layer's bias and
/// activation after its GEMM, in one launch (bias nullptr: f(y) alone).
template <class T>
void bias_unary_forward(Unary kind, T* y, const T* bias, int64_t rows, int64_t cols, T param);
/// y = a + b (n values).
template <class T>
void add(const T* a, const T* b, T* y, int64_t n);
/// y = a ⊙ b.
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n);
/// g += x (n values).
template <class T>
void accumulate(T* g, const T* x, int64_t n);
/// g += x ⊙ w.
template <class T>
void accumulate_product(T* g, const T* x, const T* w, int64_t n);
/// Inverted dropout forward: mask[i] = counter_uniform(seed, offset, i) ≥ p (engine/rng.hpp, the
/// same stream as the CPU, hence the same mask for the same seed); y = mask ? x·keep_scale : 0.
/// `offset_base` (device memory, or nullptr): the offset is then *offset_base + offset, read when
/// the kernel runs (Rng::set_device_counter: a replayed graph draws its step's masks).
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset,
                     double p, T keep_scale, const uint64_t* offset_base = nullptr);
/// gx += mask ? gy·keep_scale : 0.
template <class T>
void dropout_backward(const T* gy, const uint8_t* mask, T* gx, int64_t n, T keep_scale);

/// The explicit instantiations of this family (kernels/elementwise.cu and its emulation).
#define LCM_CUDA_ELEMENTWISE_INSTANCES(T)                                                          \
  template void unary_forward<T>(Unary, const T*, T*, int64_t, T);                                 \
  template void unary_backward<T>(Unary, const T*, const T*, const T*, T*, int64_t, T);            \
  template void unary_grad<T>(Unary, const T*, const T*, const T*, T*, int64_t, T);                \
  template void bias_unary_forward<T>(Unary, T*, const T*, int64_t, int64_t, T);                   \
  template void add<T>(const T*, const T*, T*, int64_t);                                           \
  template void mul<T>(const T*, const T*, T*, int64_t);                                           \
  template void accumulate<T>(T*, const T*, int64_t);                                              \
  template void accumulate_product<T>(T*, const T*, const T*, int64_t);                            \
  template void dropout_forward<T>(const T*, T*, uint8_t*, int64_t, uint64_t, uint64_t, double, T, \
                                   const uint64_t*);                                               \
  template void dropout_backward<T>(const T*, const uint8_t*, T*, int64_t, T);

// ---- shape (kernels/shape.cu) ----

/// Strided block copy: for o < outer, i < len: dst[o·dst_row + dst_off + i] (+)= src[o·src_row +
/// src_off + i] (`accumulate` adds). src_row = 0 repeats one source row (broadcast). Covers the
/// forward and backward of concat, slice, stack and broadcast_rows.
template <class T>
void copy_blocks(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row,
                 int64_t src_off, int64_t outer, int64_t len, bool accumulate);
/// y[o, j, :] = x[o, index[j], :] for o < outer, j < m (rows of `inner` values; x has `xdim` rows
/// per outer index). `index`: device int64 [m].
template <class T>
void index_rows(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim,
                int64_t inner);
/// dst[dst_rows[j]·width + i] = src[src_rows[j]·width + i] for j < m, i < width (device int64
/// row tables; every dst row appears at most once).
template <class T>
void copy_rows(T* dst, const int64_t* dst_rows, const T* src, const int64_t* src_rows, int64_t m,
               int64_t width);
/// Deterministic scatter-add (backward of index_rows, no atomics): gx[o, r, :] += Σ_{j: index[j]
/// == r} gy[o, j, :] summed in increasing j, through the inverse map `starts` [xdim+1] /
/// `sources` [m] (CSR: the j of row r are sources[starts[r] .. starts[r+1]), increasing).
template <class T>
void scatter_add_rows(T* gx, const T* gy, const int64_t* starts, const int64_t* sources,
                      int64_t outer, int64_t m, int64_t xdim, int64_t inner);
/// Rows per chunk and the chunk cap of column_sums_add's first pass.
constexpr int64_t kColumnSumChunkRows = 512, kColumnSumMaxChunks = 256;
/// Values of device scratch column_sums_add needs for a [rows, cols] input: one partial row per
/// chunk when the rows make more than one chunk, else 0 (work may then be nullptr).
inline int64_t column_sums_work(int64_t rows, int64_t cols) {
  int64_t chunks = (rows + kColumnSumChunkRows - 1) / kColumnSumChunkRows;
  chunks = chunks < kColumnSumMaxChunks ? chunks : kColumnSumMaxChunks;
  return chunks > 1 ? chunks * cols : 0;
}
/// g[c] += Σ_{r<rows} x[r·cols + c], c < cols (bias gradients: x is dY [rows, cols]).
/// Deterministic, no atomics: the rows are cut into at most kColumnSumMaxChunks fixed chunks,
/// each summed by a fixed lane tree into `work` ([chunks, cols], column_sums_work values), then
/// the chunk partials summed in the same fixed order. The rows are spread over thousands of
/// threads (a serial loop over 135k rows per column took ~13 ms on an H200 in the T = 66 LSTM).
template <class T>
void column_sums_add(const T* x, T* g, int64_t rows, int64_t cols, T* work);
/// dst[(b·A + a)·W + j] (+)= src[(a·B + b)·W + j]: swaps the two leading dims of [A, B, W]
/// (batch-first ↔ time-major for the LSTM).
template <class T>
void swap_leading(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool accumulate);

/// The explicit instantiations of this family (kernels/shape.cu and its emulation).
#define LCM_CUDA_SHAPE_INSTANCES(T)                                                                \
  template void copy_blocks<T>(T*, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, \
                               bool);                                                              \
  template void index_rows<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t);   \
  template void copy_rows<T>(T*, const int64_t*, const T*, const int64_t*, int64_t, int64_t);      \
  template void scatter_add_rows<T>(T*, const T*, const int64_t*, const int64_t*, int64_t,         \
                                    int64_t, int64_t, int64_t);                                    \
  template void column_sums_add<T>(const T*, T*, int64_t, int64_t, T*);                            \
  template void swap_leading<T>(T*, const T*, int64_t, int64_t, int64_t, bool);

// ---- reductions and losses (kernels/loss.cu) ----

/// What reduce_loss sums: Σ a (Sum), Σ (a − b)² (SquaredError), Σ |b − a| / (b + 1e-5) (Mape,
/// docs/model-spec.md §6 with a = prediction, b = target), Σ |a − b| (AbsError, the L1 loss of
/// engine/ops/rank_loss.cpp): the terms of ops::math::loss_term (engine/ops/loss_math.hpp),
/// accumulated in double.
using LossKind = ops::LossKind;
/// Double scratch values reduce_loss needs for n elements.
int64_t reduce_scratch_size(int64_t n);
/// out[0] = T(scale · Σ_i term(i)) over n elements (device scalar). Deterministic: fixed blocks of
/// 4096 elements reduced in a fixed tree order, then the block partials in a fixed order (no
/// atomics; the same bits run after run; may differ from the CPU's order in the last bits).
/// `scratch`: reduce_scratch_size(n) doubles of device memory. b may be nullptr for Sum.
template <class T>
void reduce_loss(LossKind kind, const T* a, const T* b, int64_t n, double scale, T* out,
                 double* scratch);
/// Backward of reduce_loss with c = T(gy[0]·mult) (gy: device scalar): ga += loss_grad_pred,
/// gb += loss_grad_target (engine/ops/loss_math.hpp). ga / gb may be nullptr (no gradient wanted).
template <class T>
void loss_backward(LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb, int64_t n,
                   double mult);

/// The explicit instantiations of this family (kernels/loss.cu and its emulation).
#define LCM_CUDA_LOSS_INSTANCES(T)                                                          \
  template void reduce_loss<T>(LossKind, const T*, const T*, int64_t, double, T*, double*); \
  template void loss_backward<T>(LossKind, const T*, const T*, const T*, T*, T*, int64_t, double);

// ---- ranking losses (kernels/rank_loss.cu) ----

/// Forward of the pairwise logistic (RankNet) loss of engine/ops/rank_loss.cpp over n_pairs pairs
/// (i_p, j_p) = (pairs[2p], pairs[2p + 1]) of the scores s (device int64 pair table, built on
/// the host), with optional pair weights w (device double [n_pairs]; nullptr = 1, the LambdaRank
/// form passes its |ΔnDCG| weights): out[0] = T(scale · Σ_p w_p · softplus(−(s[i_p] − s[j_p]))),
/// terms and sums in double, deterministic as reduce_loss (fixed blocks of 4096 pairs, fixed tree
/// order, no atomics). `scratch`: reduce_scratch_size(n_pairs) doubles of device memory.
template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, const double* w, int64_t n_pairs,
                               double scale, T* out, double* scratch);
/// Backward without atomics: with c = gy[0]·mult and σ_p = sigmoid(−(s[i_p] − s[j_p])) (double),
/// gs[k] += T(Σ_q sign_q · c · w_p · σ_{p_q}) over the incidence list of score k, q in
/// [starts[k], starts[k+1]), entry inc[q] = p + 1 when k = j_p (sign +1) or −(p + 1) when k = i_p
/// (sign −1), in increasing p (one thread per score, a fixed order). starts: device int64 [n + 1];
/// w as in the forward (nullptr = 1).
template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const double* w,
                                const int64_t* starts, const int64_t* inc, const T* gy, T* gs,
                                int64_t n, double mult);
/// Forward of the ListNet loss of engine/ops/rank_loss.cpp over n_groups groups, group g holding
/// the scores s[members[q]], q in [starts[g], starts[g+1]) (device int64 CSR tables, built on the
/// host), with target probabilities p[q] (device double, Σ over a group = 1): out[0] =
/// T(scale · Σ_g listnet_group_term(g)) (engine/ops/loss_math.hpp), one thread per group, the
/// group terms summed in a fixed order (no atomics). `scratch`: max(1, n_groups) doubles of
/// device memory.
template <class T>
void listnet_forward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                     int64_t n_groups, double scale, T* out, double* scratch);
/// Backward: with c = gy[0]·mult, gs[members[q]] += T(c·(softmax(s)_q − p[q])) within each group
/// (one thread per group; the groups' members are disjoint, so no atomics).
template <class T>
void listnet_backward(const T* s, const double* p, const int64_t* members, const int64_t* starts,
                      int64_t n_groups, const T* gy, T* gs, double mult);

/// The explicit instantiations of this family (kernels/rank_loss.cu and its emulation).
#define LCM_CUDA_RANK_LOSS_INSTANCES(T)                                                        \
  template void pairwise_logistic_forward<T>(const T*, const int64_t*, const double*, int64_t, \
                                             double, T*, double*);                             \
  template void pairwise_logistic_backward<T>(const T*, const int64_t*, const double*,         \
                                              const int64_t*, const int64_t*, const T*, T*,    \
                                              int64_t, double);                                \
  template void listnet_forward<T>(const T*, const double*, const int64_t*, const int64_t*,    \
                                   int64_t, double, T*, double*);                              \
  template void listnet_backward<T>(const T*, const double*, const int64_t*, const int64_t*,   \
                                    int64_t, const T*, T*, double);

// ---- GEMM (kernels/linear.cu, cuBLAS) ----

/// Row-major C[m, n] = (accumulate ? C : 0) + op(A)·op(B) through cuBLAS on the current device
/// (op(A) = A [m, k] with leading dim lda, or the transpose of the row-major [k, m] at A when
/// ta). float: SGEMM, FP32 by default, TF32 tensor cores when set_tf32(true); double: DGEMM.
/// Throws std::runtime_error with the cuBLAS status.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate);
/// Allows TF32 tensor-core math in float GEMMs (default off: full FP32).
void set_tf32(bool on);
bool tf32();

// ---- LSTM (kernels/lstm.cu) ----

/// The fused element-wise pass of one LSTM step for B rows (torch.nn.LSTM, gate order i, f, g, o):
/// z = At[b] + bsum; i, f, o = σ, g = tanh; c = f·c_prev + i·g (c_prev = 0 when Cp is nullptr);
/// writes the activated gates back into At [B, 4H], c into Ct [B, H], tanh c into TCt [B, H] and
/// h = o·tanh c into Yt (row stride ldy).
template <class T>
void lstm_cell_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy,
                       int64_t B, int64_t H);
/// Backward of one step (engine/ops/lstm.cpp backward_direction): dh += dYt (row stride ldy);
/// dc += dh·o·(1 − tc²); writes the pre-activation gate gradients into dGt [B, 4H]; dc ← dc·f.
template <class T>
void lstm_cell_backward(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh,
                        T* dc, T* dGt, int64_t B, int64_t H);

/// The fused recurrence (one launch for all S steps of one layer-direction) is used when on
/// (default) and lstm_recurrence_fits; off: the per-step cuBLAS GEMM + cell kernel (tests
/// compare the two).
void set_lstm_fused_recurrence(bool on);
bool lstm_fused_recurrence();
/// Launch shape of the fused recurrence for B rows of hidden size H in T: rows_per_block 0 when
/// it cannot run (switched off, 4H > 1024 threads, or W_hh [4H, H] plus the block's state does
/// not fit the device's shared memory per block: float H ≤ ~110 on an H100/H200, double ≤ ~78).
/// The blocks own disjoint rows for all steps, so they need no grid-wide synchronisation.
struct LstmRecurrenceShape {
  int rows_per_block = 0;                      // R = row_groups · rows_per_thread
  int row_groups = 0;                          // threads per unit (blockDim.y); blockDim.x = H
  int rows_per_thread = 0;                     // 1, 2, 4 or 8 (template instance)
  size_t smem_forward = 0, smem_backward = 0;  // bytes of dynamic shared memory
};
template <class T>
LstmRecurrenceShape lstm_recurrence_shape(int64_t B, int64_t H);
/// The decision behind lstm_recurrence_shape (shared by the kernels and the emulated device):
/// for B rows of hidden H in values of `value_bytes`, on `sms` multiprocessors with `smem_limit`
/// bytes of shared memory per block. Rows per block: enough blocks to fill the multiprocessors,
/// at most 16 (2 row groups × 8 rows per thread), halved until W_hh plus the block's state fits;
/// rows_per_block 0 when even one row does not fit or 2H threads exceed 1024.
inline LstmRecurrenceShape lstm_recurrence_plan(int64_t B, int64_t H, size_t value_bytes,
                                                int64_t sms, size_t smem_limit) {
  if (B <= 0 || H <= 0 || H * 2 > 1024) return LstmRecurrenceShape{};
  const int64_t need = (B + sms - 1) / (sms > 0 ? sms : 1);
  int rg = 2, rpt = 8;
  if (need <= 1)
    rg = 1, rpt = 1;
  else if (need <= 2)
    rpt = 1;
  else if (need <= 4)
    rpt = 2;
  else if (need <= 8)
    rpt = 4;
  const size_t w_bytes = size_t(4 * H * H) * value_bytes;
  for (;;) {
    const size_t R = size_t(rg * rpt);
    const size_t fwd = w_bytes + 2 * R * size_t(H) * value_bytes,
                 bwd = w_bytes + R * size_t(4 * H) * value_bytes;
    if (fwd <= smem_limit && bwd <= smem_limit)
      return LstmRecurrenceShape{rg * rpt, rg, rpt, fwd, bwd};
    if (rpt > 1)
      rpt /= 2;
    else if (rg > 1)
      rg = 1;
    else
      return LstmRecurrenceShape{};
  }
}
/// All S steps of one layer-direction's forward in one launch (time-major, as the per-step
/// path): step s runs time tt = reverse ? S−1−s : s; A [S, B, 4H] holds X·W_ihᵀ on entry and the
/// activated gates (i, f, g, o) on exit; C, TC [S, B, H] get c_t and tanh(c_t); Y gets h_t at
/// Y[tt·B·ldy + b·ldy + j]. bsum [4H] = b_ih + b_hh, w_hh [4H, H]. Zero initial state. Each
/// block keeps W_hh (transposed) and its rows' h in shared memory, c in registers. Requires
/// lstm_recurrence_shape(B, H).rows_per_block > 0 (throws std::logic_error otherwise).
template <class T>
void lstm_forward_recurrence(T* A, const T* bsum, const T* w_hh, T* C, T* TC, T* Y, int64_t ldy,
                             int64_t S, int64_t B, int64_t H, bool reverse);
/// The matching backward through time in one launch: for s = S−1 … 0 the cell backward of
/// lstm_cell_backward (dh += dY_t, dY at dY[tt·B·ldy + b·ldy + j]) writing dG [S, B, 4H], then
/// dh ← dG_t·W_hh from shared memory. dh, dc [B, H]: the gradients of h_n, c_n on entry
/// (unchanged on exit: the carried values live in registers).
template <class T>
void lstm_backward_recurrence(const T* A, const T* C, const T* TC, const T* dY, int64_t ldy,
                              const T* w_hh, const T* dh, const T* dc, T* dG, int64_t S, int64_t B,
                              int64_t H, bool reverse);

/// The explicit instantiations of this family (kernels/lstm.cu and its emulation).
#define LCM_CUDA_LSTM_INSTANCES(T)                                                                 \
  template void lstm_cell_forward<T>(T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,         \
                                     int64_t);                                                     \
  template void lstm_cell_backward<T>(const T*, const T*, const T*, const T*, int64_t, T*, T*, T*, \
                                      int64_t, int64_t);                                           \
  template LstmRecurrenceShape lstm_recurrence_shape<T>(int64_t, int64_t);                         \
  template void lstm_forward_recurrence<T>(T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,   \
                                           int64_t, int64_t, bool);                                \
  template void lstm_backward_recurrence<T>(const T*, const T*, const T*, const T*, int64_t,       \
                                            const T*, const T*, const T*, T*, int64_t, int64_t,    \
                                            int64_t, bool);

// ---- optimizer (kernels/optim.cu) ----

/// One parameter's slice of a multi-tensor Adam/AdamW step (device pointers, n values, and the
/// step's per-parameter scalars as engine/optim.cpp computes them).
template <class T>
struct AdamSlot {
  T* value;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  int64_t n;
  T neg_step_size;  // −lr / (1 − β1^t)
  T bias_c2_sqrt;   // √(1 − β2^t)
};
/// Adam/AdamW update of every slot in one kernel launch (PyTorch 1.13's per-element formula,
/// engine/optim.hpp): decoupled → p ← p·decay; else g ← g + wd·p; m, v, p updated with fma as
/// the CPU. `slots`: host array of n_slots; copied to the device per call.
template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps);

/// One parameter's gradient for the multi-tensor clipping kernels (device pointer, n values).
template <class T>
struct GradSlot {
  T* grad;
  int64_t n;
};
/// Σ over the slots of Σ g² in double (the squared global 2-norm of engine/optim.cpp
/// clip_grad_norm), deterministic: one partial per chunk of 4096 values of a slot (fixed tree
/// order), the partials summed in slot / chunk order by one block; no atomics. Copies the result
/// to the host (synchronises). `slots`: host array of n_slots.
template <class T>
double grad_sq_norm(const GradSlot<T>* slots, int n_slots);
/// g ← g·c for every value of every slot, one kernel launch.
template <class T>
void scale_grads(const GradSlot<T>* slots, int n_slots, T c);
/// clip_grad_norm without a host read (capturable in a graph): the same partials and final sum
/// as grad_sq_norm into device memory, then c = max_norm / (√total + 1e-6) in double and, where
/// c < 1, g ← g·T(c) for every slot: the values grad_sq_norm + scale_grads give, three kernels.
template <class T>
void clip_grads_on_device(const GradSlot<T>* slots, int n_slots, double max_norm);
/// Adam/AdamW as adam_step, but every step scalar read from device memory when the kernel runs
/// (capturable in a graph replayed under a changing LR, β1 and step count): `scalars` =
/// [decay, wd, β1, 1 − β1, β2, 1 − β2, eps, then per slot k: neg_step_size, bias_c2_sqrt] (7 + 2
/// n_slots values of T); the slots' own neg_step_size and bias_c2_sqrt are ignored.
template <class T>
void adam_step_from_device(const AdamSlot<T>* slots, int n_slots, bool decoupled, const T* scalars);
/// g ← 0 for every value of every slot, one kernel launch (Adam::zero_grad of device parameters:
/// one launch instead of one memset per parameter).
template <class T>
void zero_grads(const GradSlot<T>* slots, int n_slots);

}  // namespace lcm::cuda
