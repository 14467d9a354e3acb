// The CUDA paths of the engine's ops (see engine/ops/cuda_ops.hpp): output nodes on the CUDA tape,
// kernel launches (kernels/cuda_ops.hpp) and device backward closures, mirroring the CPU code of
// engine/ops/{elementwise,shape,loss,rank_loss,linear,lstm}.cpp op by op. Compiled only with
// LCM_WITH_CUDA.
#ifdef LCM_WITH_CUDA
#include "engine/ops/cuda_ops.hpp"

#include <algorithm>

#include "kernels/cuda_ops.hpp"

namespace lcm::ops::detail {

// ---- element-wise ----

template <class T>
NodeId cuda_unary(Tape<T>& t, NodeId x, const char* op, CudaUnary kind, T param) {
  const auto k = cuda::Unary(int(kind));
  const NodeId y = t.new_node(t.shape(x), op, {x});
  const int64_t n = t.value(x).numel();
  cuda::unary_forward(k, t.value(x).data, t.value(y).data, n, param);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, k, param](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      cuda::unary_backward(k, tp.value(x).data, tp.value(self).data, tp.grad_acc(self), gx, n,
                           param);
    });
  }
  return y;
}

template <class T>
NodeId cuda_add(Tape<T>& t, NodeId a, NodeId b) {
  const NodeId y = t.new_node(t.shape(a), "add", {a, b});
  const int64_t n = t.value(a).numel();
  cuda::add(t.value(a).data, t.value(b).data, t.value(y).data, n);
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      if (T* ga = tp.grad_acc(a)) cuda::accumulate(ga, gy, n);
      if (T* gb = tp.grad_acc(b)) cuda::accumulate(gb, gy, n);
    });
  }
  return y;
}

template <class T>
NodeId cuda_mul(Tape<T>& t, NodeId a, NodeId b) {
  const NodeId y = t.new_node(t.shape(a), "mul", {a, b});
  const int64_t n = t.value(a).numel();
  cuda::mul(t.value(a).data, t.value(b).data, t.value(y).data, n);
  if (t.requires_grad(y)) {
    t.set_backward(y, [a, b, n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      if (T* ga = tp.grad_acc(a)) cuda::accumulate_product(ga, gy, tp.value(b).data, n);
      if (T* gb = tp.grad_acc(b)) cuda::accumulate_product(gb, gy, tp.value(a).data, n);
    });
  }
  return y;
}

template <class T>
NodeId cuda_dropout(Tape<T>& t, NodeId x, double p, Rng& rng) {
  const int64_t n = t.value(x).numel();
  const uint64_t seed = rng.seed();
  const uint64_t offset = rng.take(uint64_t(n));
  const T keep_scale = p >= 1.0 ? T(0) : T(1.0 / (1.0 - p));
  const NodeId y = t.new_node(t.shape(x), "dropout", {x});
  uint8_t* mask = t.template device_scratch<uint8_t>(n);
  cuda::dropout_forward(t.value(x).data, t.value(y).data, mask, n, seed, offset, p, keep_scale);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, n, mask, keep_scale](Tape<T>& tp, NodeId self) {
      T* gx = tp.grad_acc(x);
      if (!gx) return;
      cuda::dropout_backward(tp.grad_acc(self), mask, gx, n, keep_scale);
    });
  }
  return y;
}

// ---- shape ----

template <class T>
NodeId cuda_reshape(Tape<T>& t, NodeId x, Shape s) {
  Tensor<T> v = t.value(x);
  v.shape = s;
  const NodeId y = t.new_view(v, "reshape", {x});
  if (t.requires_grad(y)) {
    const int64_t n = s.numel();
    t.set_backward(y, [x, n](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x)) cuda::accumulate(gx, tp.grad_acc(self), n);
    });
  }
  return y;
}

template <class T>
NodeId cuda_concat(Tape<T>& t, const std::vector<NodeId>& xs, Shape ys, int64_t outer, int64_t row,
                   const std::vector<int64_t>& chunk) {
  const NodeId y = t.new_node(ys, "concat", xs);
  T* yp = t.value(y).data;
  int64_t off = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    cuda::copy_blocks(yp, row, off, t.value(xs[k]).data, chunk[k], int64_t(0), outer, chunk[k],
                      false);
    off += chunk[k];
  }
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, chunk, outer, row](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      int64_t off = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        if (T* gx = tp.grad_acc(xs[k]))
          cuda::copy_blocks(gx, chunk[k], int64_t(0), gy, row, off, outer, chunk[k], true);
        off += chunk[k];
      }
    });
  }
  return y;
}

template <class T>
NodeId cuda_slice(Tape<T>& t, NodeId x, Shape ys, int64_t outer, int64_t xrow, int64_t yrow,
                  int64_t off) {
  const NodeId y = t.new_node(ys, "slice", {x});
  cuda::copy_blocks(t.value(y).data, yrow, int64_t(0), t.value(x).data, xrow, off, outer, yrow,
                    false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, outer, xrow, yrow, off](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x))
        cuda::copy_blocks(gx, xrow, off, tp.grad_acc(self), yrow, int64_t(0), outer, yrow, true);
    });
  }
  return y;
}

template <class T>
NodeId cuda_index_select(Tape<T>& t, NodeId x, Shape ys, const std::vector<int64_t>& index,
                         int64_t outer, int64_t xdim, int64_t inner) {
  const NodeId y = t.new_node(ys, "index_select", {x});
  const int64_t m = int64_t(index.size());
  int64_t* d_index = t.template device_scratch<int64_t>(std::max<int64_t>(m, 1));
  device_upload_bytes(d_index, index.data(), sizeof(int64_t) * size_t(m));
  cuda::gather_rows(t.value(y).data, t.value(x).data, d_index, outer, m, xdim, inner);
  if (t.requires_grad(y)) {
    // Inverse map (CSR) for the deterministic scatter-add: the j of each source row, increasing.
    std::vector<int64_t> starts(size_t(xdim + 1), 0);
    std::vector<int64_t> sources(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j) ++starts[size_t(index[size_t(j)] + 1)];
    for (int64_t r = 0; r < xdim; ++r) starts[size_t(r + 1)] += starts[size_t(r)];
    std::vector<int64_t> fill(starts.begin(), starts.end() - 1);
    for (int64_t j = 0; j < m; ++j) sources[size_t(fill[size_t(index[size_t(j)])]++)] = j;
    int64_t* d_starts = t.template device_scratch<int64_t>(xdim + 1);
    int64_t* d_sources = t.template device_scratch<int64_t>(std::max<int64_t>(m, 1));
    device_upload_bytes(d_starts, starts.data(), sizeof(int64_t) * starts.size());
    device_upload_bytes(d_sources, sources.data(), sizeof(int64_t) * sources.size());
    t.set_backward(y, [x, d_starts, d_sources, outer, m, xdim, inner](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x))
        cuda::scatter_add_rows(gx, tp.grad_acc(self), d_starts, d_sources, outer, m, xdim, inner);
    });
  }
  return y;
}

template <class T>
NodeId cuda_stack(Tape<T>& t, const std::vector<NodeId>& xs, Shape ys, int64_t outer,
                  int64_t inner) {
  const NodeId y = t.new_node(ys, "stack", xs);
  const int64_t k_n = int64_t(xs.size());
  for (int64_t k = 0; k < k_n; ++k)
    cuda::copy_blocks(t.value(y).data, k_n * inner, k * inner, t.value(xs[size_t(k)]).data, inner,
                      int64_t(0), outer, inner, false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [xs, outer, inner, k_n](Tape<T>& tp, NodeId self) {
      const T* gy = tp.grad_acc(self);
      for (int64_t k = 0; k < k_n; ++k)
        if (T* gx = tp.grad_acc(xs[size_t(k)]))
          cuda::copy_blocks(gx, inner, int64_t(0), gy, k_n * inner, k * inner, outer, inner, true);
    });
  }
  return y;
}

template <class T>
NodeId cuda_broadcast_rows(Tape<T>& t, NodeId x, int64_t rows, int64_t h) {
  const NodeId y = t.new_node(Shape{rows, h}, "broadcast_rows", {x});
  cuda::copy_blocks(t.value(y).data, h, int64_t(0), t.value(x).data, int64_t(0), int64_t(0), rows,
                    h, false);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, rows, h](Tape<T>& tp, NodeId self) {
      if (T* gx = tp.grad_acc(x))
        cuda::column_sums_add(tp.grad_acc(self), gx, rows, h,
                              tp.template device_scratch<T>(cuda::column_sums_work(rows, h)));
    });
  }
  return y;
}

// ---- reductions and losses ----

template <class T>
NodeId cuda_reduce(Tape<T>& t, const char* op, CudaLoss kind, NodeId a, NodeId b, double scale,
                   double mult) {
  const auto k = cuda::LossKind(int(kind));
  const int64_t n = t.value(a).numel();
  const NodeId y = b >= 0 ? t.new_node(Shape{}, op, {a, b}) : t.new_node(Shape{}, op, {a});
  double* scratch = t.template device_scratch<double>(cuda::reduce_scratch_size(n));
  cuda::reduce_loss(k, t.value(a).data, b >= 0 ? t.value(b).data : static_cast<const T*>(nullptr),
                    n, scale, t.value(y).data, scratch);
  if (t.requires_grad(y)) {
    t.set_backward(y, [k, a, b, n, mult](Tape<T>& tp, NodeId self) {
      T* ga = tp.grad_acc(a);
      T* gb = b >= 0 ? tp.grad_acc(b) : nullptr;
      cuda::loss_backward(k, tp.value(a).data,
                          b >= 0 ? tp.value(b).data : static_cast<const T*>(nullptr),
                          tp.grad_acc(self), ga, gb, n, mult);
    });
  }
  return y;
}

template <class T>
NodeId cuda_pairwise_logistic(Tape<T>& t, NodeId score,
                              const std::vector<std::pair<int64_t, int64_t>>& pairs, T weight) {
  const int64_t n = t.value(score).numel(), np = int64_t(pairs.size());
  const NodeId y = t.new_node(Shape{}, "pairwise_logistic", {score});
  if (np == 0) {  // no pair: L = 0, no gradient (as the CPU)
    device_fill(t.value(y).data, int64_t(1), T(0));
    return y;
  }
  std::vector<int64_t> flat(size_t(2 * np));
  for (int64_t p = 0; p < np; ++p) {
    flat[size_t(2 * p)] = pairs[size_t(p)].first;
    flat[size_t(2 * p + 1)] = pairs[size_t(p)].second;
  }
  int64_t* d_pairs = t.template device_scratch<int64_t>(2 * np);
  device_upload_bytes(d_pairs, flat.data(), sizeof(int64_t) * flat.size());
  double* scratch = t.template device_scratch<double>(cuda::reduce_scratch_size(np));
  const double scale = double(weight) / double(np);
  cuda::pairwise_logistic_forward(t.value(score).data, d_pairs, np, scale, t.value(y).data,
                                  scratch);
  if (t.requires_grad(y)) {
    // Incidence lists (CSR) for the backward without atomics: per score k its pairs in increasing
    // order, p + 1 where k is the worse j (gradient +), −(p + 1) where k is the better i (−).
    std::vector<int64_t> starts(size_t(n + 1), 0), inc(size_t(2 * np));
    for (const auto& pr : pairs) {
      ++starts[size_t(pr.first + 1)];
      ++starts[size_t(pr.second + 1)];
    }
    for (int64_t k = 0; k < n; ++k) starts[size_t(k + 1)] += starts[size_t(k)];
    std::vector<int64_t> fill(starts.begin(), starts.end() - 1);
    for (int64_t p = 0; p < np; ++p) {
      inc[size_t(fill[size_t(pairs[size_t(p)].first)]++)] = -(p + 1);
      inc[size_t(fill[size_t(pairs[size_t(p)].second)]++)] = p + 1;
    }
    int64_t* d_starts = t.template device_scratch<int64_t>(n + 1);
    int64_t* d_inc = t.template device_scratch<int64_t>(2 * np);
    device_upload_bytes(d_starts, starts.data(), sizeof(int64_t) * starts.size());
    device_upload_bytes(d_inc, inc.data(), sizeof(int64_t) * inc.size());
    t.set_backward(y, [score, d_pairs, d_starts, d_inc, n, scale](Tape<T>& tp, NodeId self) {
      if (T* gs = tp.grad_acc(score))
        cuda::pairwise_logistic_backward(tp.value(score).data, d_pairs, d_starts, d_inc,
                                         tp.grad_acc(self), gs, n, scale);
    });
  }
  return y;
}

// ---- linear ----

template <class T>
NodeId cuda_linear(Tape<T>& t, NodeId x, NodeId w, NodeId b, Shape ys, int64_t rows, int64_t in,
                   int64_t out) {
  std::vector<NodeId> inputs{x, w};
  if (b >= 0) inputs.push_back(b);
  const NodeId y = t.new_node(ys, "linear", inputs);
  T* Y = t.value(y).data;
  if (b >= 0)
    cuda::copy_blocks(Y, out, int64_t(0), t.value(b).data, int64_t(0), int64_t(0), rows, out,
                      false);
  cuda::gemm(false, true, rows, out, in, t.value(x).data, in, t.value(w).data, in, Y, out, b >= 0);
  if (t.requires_grad(y)) {
    t.set_backward(y, [x, w, b, rows, in, out](Tape<T>& tp, NodeId self) {
      const T* dY = tp.grad_acc(self);
      if (T* gx = tp.grad_acc(x))  // dX[rows, in] += dY[rows, out]·W[out, in]
        cuda::gemm(false, false, rows, in, out, dY, out, tp.value(w).data, in, gx, in, true);
      if (T* gw = tp.grad_acc(w))  // dW[out, in] += dYᵀ·X
        cuda::gemm(true, false, out, in, rows, dY, out, tp.value(x).data, in, gw, in, true);
      if (b >= 0)
        if (T* gb = tp.grad_acc(b))
          cuda::column_sums_add(dY, gb, rows, out,
                                tp.template device_scratch<T>(cuda::column_sums_work(rows, out)));
    });
  }
  return y;
}

// ---- LSTM ----

namespace {

/// Device arrays the LSTM backward needs (time-major, as engine/ops/lstm.cpp LstmSaved).
template <class T>
struct CudaLstmSaved {
  int64_t B, S, In, H, L, D;
  NodeId x;
  std::vector<NodeId> w;  // [L·D·4]: w_ih, w_hh, b_ih, b_hh per layer-direction
  T* xtm;
  T* A;
  T* C;
  T* TC;
  T* Y;
  int64_t out_off, hn_off, cn_off;
  bool fused = false;  // the forward ran the fused recurrence; the backward does too
};

inline int64_t time_of(int64_t s, int64_t S, int64_t d) {
  return d == 0 ? s : S - 1 - s;
}

template <class T>
void cuda_lstm_backward(Tape<T>& t, NodeId self, const CudaLstmSaved<T>& s) {
  const int64_t B = s.B, S = s.S, H = s.H, D = s.D, L = s.L, DH = D * H, G4 = 4 * H;
  const T* g = t.grad(self).data;
  T* dY = t.template device_scratch<T>(S * B * DH);
  cuda::swap_leading(dY, g + s.out_off, B, S, DH, false);  // [B, S, DH] → [S, B, DH]
  T* dG = t.template device_scratch<T>(S * B * G4);
  T* dh = t.template device_scratch<T>(B * H);
  T* dc = t.template device_scratch<T>(B * H);
  T* colsum = t.template device_scratch<T>(G4);
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
      const NodeId* wid = s.w.data() + ld * 4;
      const T* w_ih = t.value(wid[0]).data;
      const T* w_hh = t.value(wid[1]).data;
      cuda::copy_blocks(dh, B * H, int64_t(0), g + s.hn_off + ld * B * H, B * H, int64_t(0),
                        int64_t(1), B * H, false);
      cuda::copy_blocks(dc, B * H, int64_t(0), g + s.cn_off + ld * B * H, B * H, int64_t(0),
                        int64_t(1), B * H, false);
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
      T* gbi = t.grad_acc(wid[2]);
      T* gbh = t.grad_acc(wid[3]);
      if (gbi || gbh) {
        device_zero(colsum, sizeof(T) * size_t(G4));
        cuda::column_sums_add(dG, colsum, S * B, G4, colsum_work);
        if (gbi) cuda::accumulate(gbi, colsum, G4);
        if (gbh) cuda::accumulate(gbh, colsum, G4);
      }
      if (dX) cuda::gemm(false, false, S * B, In, G4, dG, G4, w_ih, In, dX, In, d > 0);
    }
    if (l > 0) std::swap(dY, dYbelow);
  }
  if (gx) cuda::swap_leading(gx, dXtm, S, B, s.In, true);  // [S, B, In] → [B, S, In], added
}

template <class T>
NodeId cuda_view_of_core(Tape<T>& t, NodeId core, int64_t off, Shape shape, const char* op) {
  const NodeId id =
      t.new_view(Tensor<T>{t.value(core).data + off, shape, Device::CUDA}, op, {core});
  t.set_backward(id, [core, off](Tape<T>& tp, NodeId self) {
    cuda::accumulate(tp.grad_acc(core) + off, tp.grad_acc(self), tp.value(self).numel());
  });
  return id;
}

}  // namespace

template <class T>
LstmOutputs cuda_lstm(Tape<T>& t, NodeId x, const LstmSpec& spec, const std::vector<LstmWeights>& w,
                      std::vector<NodeId> inputs) {
  const Tensor<T>& xv = t.value(x);
  const int64_t B = xv.size(0), S = xv.size(1), In = spec.input_size, H = spec.hidden_size;
  const int64_t L = spec.num_layers, D = spec.directions(), DH = D * H, G4 = 4 * H;
  const int64_t n_out = B * S * DH, n_state = L * D * B * H;
  const NodeId core = t.new_node(Shape{n_out + 2 * n_state}, "lstm", std::move(inputs));
  auto s = std::make_shared<CudaLstmSaved<T>>();
  s->B = B;
  s->S = S;
  s->In = In;
  s->H = H;
  s->L = L;
  s->D = D;
  s->x = x;
  for (const LstmWeights& lw : w) s->w.insert(s->w.end(), {lw.w_ih, lw.w_hh, lw.b_ih, lw.b_hh});
  s->xtm = t.template device_scratch<T>(S * B * In);
  cuda::swap_leading(s->xtm, t.value(x).data, B, S, In, false);  // [B, S, In] → [S, B, In]
  s->A = t.template device_scratch<T>(L * D * S * B * G4);
  s->C = t.template device_scratch<T>(L * D * S * B * H);
  s->TC = t.template device_scratch<T>(L * D * S * B * H);
  s->Y = t.template device_scratch<T>(L * S * B * DH);
  s->out_off = 0;
  s->hn_off = n_out;
  s->cn_off = n_out + n_state;
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
      const NodeId* wi = s->w.data() + ld * 4;
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
  t.set_backward(core, [s](Tape<T>& tp, NodeId self) { cuda_lstm_backward(tp, self, *s); });
  LstmOutputs r;
  r.output = cuda_view_of_core(t, core, 0, Shape{B, S, DH}, "lstm.output");
  r.h_n = cuda_view_of_core(t, core, n_out, Shape{L * D, B, H}, "lstm.h_n");
  r.c_n = cuda_view_of_core(t, core, n_out + n_state, Shape{L * D, B, H}, "lstm.c_n");
  return r;
}

#define LCM_INSTANTIATE_CUDA_OPS(T)                                                                \
  template NodeId cuda_unary<T>(Tape<T>&, NodeId, const char*, CudaUnary, T);                      \
  template NodeId cuda_add<T>(Tape<T>&, NodeId, NodeId);                                           \
  template NodeId cuda_mul<T>(Tape<T>&, NodeId, NodeId);                                           \
  template NodeId cuda_dropout<T>(Tape<T>&, NodeId, double, Rng&);                                 \
  template NodeId cuda_reshape<T>(Tape<T>&, NodeId, Shape);                                        \
  template NodeId cuda_concat<T>(Tape<T>&, const std::vector<NodeId>&, Shape, int64_t, int64_t,    \
                                 const std::vector<int64_t>&);                                     \
  template NodeId cuda_slice<T>(Tape<T>&, NodeId, Shape, int64_t, int64_t, int64_t, int64_t);      \
  template NodeId cuda_index_select<T>(Tape<T>&, NodeId, Shape, const std::vector<int64_t>&,       \
                                       int64_t, int64_t, int64_t);                                 \
  template NodeId cuda_stack<T>(Tape<T>&, const std::vector<NodeId>&, Shape, int64_t, int64_t);    \
  template NodeId cuda_broadcast_rows<T>(Tape<T>&, NodeId, int64_t, int64_t);                      \
  template NodeId cuda_reduce<T>(Tape<T>&, const char*, CudaLoss, NodeId, NodeId, double, double); \
  template NodeId cuda_pairwise_logistic<T>(Tape<T>&, NodeId,                                      \
                                            const std::vector<std::pair<int64_t, int64_t>>&, T);   \
  template NodeId cuda_linear<T>(Tape<T>&, NodeId, NodeId, NodeId, Shape, int64_t, int64_t,        \
                                 int64_t);                                                         \
  template LstmOutputs cuda_lstm<T>(Tape<T>&, NodeId, const LstmSpec&,                             \
                                    const std::vector<LstmWeights>&, std::vector<NodeId>);
LCM_INSTANTIATE_CUDA_OPS(float)
LCM_INSTANTIATE_CUDA_OPS(double)
#undef LCM_INSTANTIATE_CUDA_OPS

}  // namespace lcm::ops::detail
#endif  // LCM_WITH_CUDA
