// The LSTM cell's formulas (torch.nn.LSTM, gate order i, f, g, o; docs/model-spec.md §5.1),
// written once and used by the CPU op (engine/ops/lstm.cpp, over Eigen arrays of a row), the CUDA
// kernels (kernels/lstm.cu: the per-step cell and the fused recurrences) and their emulation
// (kernels/emulated/lstm.cpp), over scalars.
//
//   forward:  i, f, o = σ(z_i, z_f, z_o), g = tanh(z_g); c = f·c_prev + i·g (c = i·g at the first
//             step, c_prev = 0); h = o·tanh(c)
//   backward: dc = dc_next + dh·o·(1 − tanh²c); dz_o = dh·tanh(c)·o(1 − o); dz_i = dc·g·i(1 − i);
//             dz_f = dc·c_prev·f(1 − f) (0 at the first step); dz_g = dc·i·(1 − g²);
//             dc_prev = dc·f
//
// The generic templates take scalars or Eigen array expressions (they return expressions, to be
// assigned in the same statement). The activations: math::sigmoid and the library's tanh on the
// device and in the emulation; on the CPU, Eigen's vectorised logistic() and tanh() (within 4 ulp
// of these in float, tests/test_lstm.cpp).
#pragma once
#include <cstdint>

#include "engine/hd.hpp"
#include "engine/ops/elementwise_math.hpp"

namespace lcm::ops::lstm_math {

/// c = f·c_prev + i·g.
template <class F, class C, class I, class G>
LCM_HD inline auto cell(const F& f, const C& c_prev, const I& i, const G& g) {
  return f * c_prev + i * g;
}
/// c = i·g (first step: c_prev = 0).
template <class I, class G>
LCM_HD inline auto cell_first(const I& i, const G& g) {
  return i * g;
}
/// h = o·tanh(c).
template <class O, class TC>
LCM_HD inline auto hidden(const O& o, const TC& tc) {
  return o * tc;
}
/// dc = dc_next + dh·o·(1 − tc²): the carried gradient of c plus h's share (S: the scalar type).
template <class S, class DC, class DH, class O, class TC>
LCM_HD inline auto cell_grad(const DC& dc_next, const DH& dh, const O& o, const TC& tc) {
  return dc_next + dh * o * (S(1) - tc * tc);
}
/// dz_o = dh·tc·o(1 − o).
template <class S, class DH, class TC, class O>
LCM_HD inline auto grad_o(const DH& dh, const TC& tc, const O& o) {
  return dh * tc * o * (S(1) - o);
}
/// dz_i = dc·g·i(1 − i).
template <class S, class DC, class G, class I>
LCM_HD inline auto grad_i(const DC& dc, const G& g, const I& i) {
  return dc * g * i * (S(1) - i);
}
/// dz_f = dc·c_prev·f(1 − f).
template <class S, class DC, class C, class F>
LCM_HD inline auto grad_f(const DC& dc, const C& c_prev, const F& f) {
  return dc * c_prev * f * (S(1) - f);
}
/// dz_g = dc·i·(1 − g²).
template <class S, class DC, class I, class G>
LCM_HD inline auto grad_g(const DC& dc, const I& i, const G& g) {
  return dc * i * (S(1) - g * g);
}
/// dc_prev = dc·f.
template <class DC, class F>
LCM_HD inline auto carry(const DC& dc, const F& f) {
  return dc * f;
}

/// One unit of one row, forward: the activated gates, c, tanh c and h.
template <class T>
struct CellForward {
  T i, f, g, o, c, tc, h;
};
/// The forward of one unit from its pre-activations; c_prev is ignored unless has_prev (callers
/// pass 0 at the first step).
template <class T>
LCM_HD inline CellForward<T> cell_forward(T zi, T zf, T zg, T zo, bool has_prev, T c_prev) {
  CellForward<T> r;
  r.i = math::sigmoid(zi);
  r.f = math::sigmoid(zf);
  r.g = math::lib_tanh(zg);
  r.o = math::sigmoid(zo);
  r.c = has_prev ? cell(r.f, c_prev, r.i, r.g) : cell_first(r.i, r.g);
  r.tc = math::lib_tanh(r.c);
  r.h = hidden(r.o, r.tc);
  return r;
}

/// One unit of one row, backward: the pre-activation gradients, and dc_prev = dc·f.
template <class T>
struct CellBackward {
  T di, df, dg, do_, dc_prev;
};
/// The backward of one unit from the saved activated gates and tanh c, the total gradient of h
/// (dh: carried plus the output's) and the carried gradient of c (dc_next).
template <class T>
LCM_HD inline CellBackward<T> cell_backward(T i, T f, T g, T o, T tc, bool has_prev, T c_prev, T dh,
                                            T dc_next) {
  const T dc = cell_grad<T>(dc_next, dh, o, tc);
  CellBackward<T> r;
  r.do_ = grad_o<T>(dh, tc, o);
  r.di = grad_i<T>(dc, g, i);
  r.df = has_prev ? T(grad_f<T>(dc, c_prev, f)) : T(0);
  r.dg = grad_g<T>(dc, i, g);
  r.dc_prev = carry(dc, f);
  return r;
}

/// One (row b, unit j) of the per-step cell pass over the kernels' layout (kernels/lstm.cu
/// lstm_cell_forward): At [B, 4H] holds the step's pre-activations less the bias sums
/// bsum [4H] and gets the activated gates; Cp [B, H] c_{t−1} (nullptr at the first step); writes
/// c, tanh c into Ct, TCt [B, H] and h into Yt (row stride ldy).
template <class T>
LCM_HD inline void cell_step_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt,
                                     int64_t ldy, int64_t H, int64_t b, int64_t j) {
  T* z = At + b * 4 * H;
  const int64_t k = b * H + j;
  const CellForward<T> r =
      cell_forward(z[j] + bsum[j], z[H + j] + bsum[H + j], z[2 * H + j] + bsum[2 * H + j],
                   z[3 * H + j] + bsum[3 * H + j], Cp != nullptr, Cp ? Cp[k] : T(0));
  z[j] = r.i;
  z[H + j] = r.f;
  z[2 * H + j] = r.g;
  z[3 * H + j] = r.o;
  Ct[k] = r.c;
  TCt[k] = r.tc;
  Yt[b * ldy + j] = r.h;
}
/// One (row b, unit j) of the per-step cell backward (kernels/lstm.cu lstm_cell_backward):
/// dh += dYt (row stride ldy), then the pre-activation gradients into dGt [B, 4H] and dc ← dc·f.
template <class T>
LCM_HD inline void cell_step_backward(const T* At, const T* TCt, const T* Cp, const T* dYt,
                                      int64_t ldy, T* dh, T* dc, T* dGt, int64_t H, int64_t b,
                                      int64_t j) {
  const int64_t k = b * H + j;
  const T* z = At + b * 4 * H;
  T* g = dGt + b * 4 * H;
  const T dhv = dh[k] + dYt[b * ldy + j];
  dh[k] = dhv;
  const CellBackward<T> r = cell_backward(z[j], z[H + j], z[2 * H + j], z[3 * H + j], TCt[k],
                                          Cp != nullptr, Cp ? Cp[k] : T(0), dhv, dc[k]);
  g[j] = r.di;
  g[H + j] = r.df;
  g[2 * H + j] = r.dg;
  g[3 * H + j] = r.do_;
  dc[k] = r.dc_prev;
}

}  // namespace lcm::ops::lstm_math
