// Emulation of kernels/lstm.cu (see device.cpp): the cell of engine/ops/lstm_math.hpp per (row,
// unit), the fused recurrences' launch-shape decision and per-(row, unit) arithmetic order.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/lstm_math.hpp"
#include "kernels/cuda_ops.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

namespace lm = ops::lstm_math;

template <class T>
void lstm_cell_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy,
                       int64_t B, int64_t H) {
  if (B * H <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j)
        lm::cell_step_forward(At, bsum, Cp, Ct, TCt, Yt, ldy, H, b, j);
  });
}
template <class T>
void lstm_cell_backward(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh,
                        T* dc, T* dGt, int64_t B, int64_t H) {
  if (B * H <= 0) return;
  emu::launch(emu::Work::Kernel, [=] {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j)
        lm::cell_step_backward(At, TCt, Cp, dYt, ldy, dh, dc, dGt, H, b, j);
  });
}

// ---- fused LSTM recurrence (kernels/lstm.cu): the same launch-shape decision for a nominal
// H100/H200 (132 multiprocessors, 227 KiB of shared memory per block), the same arithmetic order
// per (row, unit) as the kernels ----
namespace {
bool g_fused_recurrence = true;
}
void set_lstm_fused_recurrence(bool on) {
  g_fused_recurrence = on;
}
bool lstm_fused_recurrence() {
  return g_fused_recurrence;
}

template <class T>
LstmRecurrenceShape lstm_recurrence_shape(int64_t B, int64_t H) {
  if (!g_fused_recurrence) return LstmRecurrenceShape{};
  return lstm_recurrence_plan(B, H, sizeof(T), 132, 232448);  // a nominal H100/H200
}

template <class T>
void lstm_forward_recurrence(T* A, const T* bsum, const T* w_hh, T* C, T* TC, T* Y, int64_t ldy,
                             int64_t S, int64_t B, int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  if (lstm_recurrence_shape<T>(B, H).rows_per_block == 0)
    throw std::logic_error("lstm_forward_recurrence: does not fit (hidden " + std::to_string(H) +
                           ")");
  emu::launch(emu::Work::Kernel, [=] {
    const int64_t G4 = 4 * H;
    std::vector<T> hprev(size_t(B * H), T(0)), hnext(size_t(B * H)), c(size_t(B * H), T(0));
    for (int64_t st = 0; st < S; ++st) {
      const int64_t tt = reverse ? S - 1 - st : st;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          T* a = A + (tt * B + b) * G4;
          T zi = a[j] + bsum[j], zf = a[H + j] + bsum[H + j], zg = a[2 * H + j] + bsum[2 * H + j],
            zo = a[3 * H + j] + bsum[3 * H + j];
          if (st > 0)
            for (int64_t k = 0; k < H; ++k) {
              const T hv = hprev[size_t(b * H + k)];
              zi += hv * w_hh[j * H + k];
              zf += hv * w_hh[(H + j) * H + k];
              zg += hv * w_hh[(2 * H + j) * H + k];
              zo += hv * w_hh[(3 * H + j) * H + k];
            }
          const lm::CellForward<T> r =
              lm::cell_forward(zi, zf, zg, zo, st > 0, c[size_t(b * H + j)]);
          a[j] = r.i;
          a[H + j] = r.f;
          a[2 * H + j] = r.g;
          a[3 * H + j] = r.o;
          c[size_t(b * H + j)] = r.c;
          C[(tt * B + b) * H + j] = r.c;
          TC[(tt * B + b) * H + j] = r.tc;
          Y[(tt * B + b) * ldy + j] = hnext[size_t(b * H + j)] = r.h;
        }
      std::swap(hprev, hnext);
    }
  });
}

template <class T>
void lstm_backward_recurrence(const T* A, const T* C, const T* TC, const T* dY, int64_t ldy,
                              const T* w_hh, const T* dh0, const T* dc0, T* dG, int64_t S,
                              int64_t B, int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  if (lstm_recurrence_shape<T>(B, H).rows_per_block == 0)
    throw std::logic_error("lstm_backward_recurrence: does not fit (hidden " + std::to_string(H) +
                           ")");
  emu::launch(emu::Work::Kernel, [=] {
    const int64_t G4 = 4 * H;
    std::vector<T> dh(dh0, dh0 + B * H), dc(dc0, dc0 + B * H);
    for (int64_t st = S - 1; st >= 0; --st) {
      const int64_t tt = reverse ? S - 1 - st : st, tp = reverse ? S - st : st - 1;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          const T* z = A + (tt * B + b) * G4;
          const T dhv = dh[size_t(b * H + j)] + dY[(tt * B + b) * ldy + j];
          const lm::CellBackward<T> r = lm::cell_backward(
              z[j], z[H + j], z[2 * H + j], z[3 * H + j], TC[(tt * B + b) * H + j], st > 0,
              st > 0 ? C[(tp * B + b) * H + j] : T(0), dhv, dc[size_t(b * H + j)]);
          T* out = dG + (tt * B + b) * G4;
          out[j] = r.di;
          out[H + j] = r.df;
          out[2 * H + j] = r.dg;
          out[3 * H + j] = r.do_;
          dc[size_t(b * H + j)] = r.dc_prev;
        }
      if (st > 0)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t j = 0; j < H; ++j) {
            T acc = T(0);
            for (int64_t q = 0; q < G4; ++q) acc += dG[(tt * B + b) * G4 + q] * w_hh[q * H + j];
            dh[size_t(b * H + j)] = acc;
          }
    }
  });
}

LCM_CUDA_LSTM_INSTANCES(float)
LCM_CUDA_LSTM_INSTANCES(double)

}  // namespace lcm::cuda
