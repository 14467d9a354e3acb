// The CUDA paths of the engine's ops (internal): what engine/ops/*.cpp run when select_backend
// returns Backend::Cuda. Inputs are already shape-checked by the calling op; these create the
// output nodes on the CUDA tape, launch kernels/*.cu and register device backward closures.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/lstm.hpp"
#include "engine/rng.hpp"
#include "engine/tape.hpp"

namespace lcm::ops::detail {

/// Unary kinds, numbered as lcm::cuda::Unary (kernels/cuda_ops.hpp).
enum class CudaUnary : int { Scale = 0, Elu = 1, LeakyRelu = 2, Sigmoid = 3, Tanh = 4 };
/// Reduction kinds, numbered as lcm::cuda::LossKind.
enum class CudaLoss : int { Sum = 0, SquaredError = 1, Mape = 2, AbsError = 3 };

template <class T>
NodeId cuda_unary(Tape<T>& t, NodeId x, const char* op, CudaUnary kind, T param);
template <class T>
NodeId cuda_add(Tape<T>& t, NodeId a, NodeId b);
template <class T>
NodeId cuda_mul(Tape<T>& t, NodeId a, NodeId b);
/// Inverted dropout on the device with the same counter_uniform stream (and mask) as the CPU.
template <class T>
NodeId cuda_dropout(Tape<T>& t, NodeId x, double p, Rng& rng);

template <class T>
NodeId cuda_reshape(Tape<T>& t, NodeId x, Shape s);
/// chunk[k]: values per outer row of input k; row: values per outer row of the result.
template <class T>
NodeId cuda_concat(Tape<T>& t, const std::vector<NodeId>& xs, Shape ys, int64_t outer, int64_t row,
                   const std::vector<int64_t>& chunk);
template <class T>
NodeId cuda_slice(Tape<T>& t, NodeId x, Shape ys, int64_t outer, int64_t xrow, int64_t yrow,
                  int64_t off);
template <class T>
NodeId cuda_index_select(Tape<T>& t, NodeId x, Shape ys, const std::vector<int64_t>& index,
                         int64_t outer, int64_t xdim, int64_t inner);
template <class T>
NodeId cuda_stack(Tape<T>& t, const std::vector<NodeId>& xs, Shape ys, int64_t outer,
                  int64_t inner);
template <class T>
NodeId cuda_broadcast_rows(Tape<T>& t, NodeId x, int64_t rows, int64_t h);

/// Scalar y = scale·Σ term over a (and b); backward with c = dy·mult (kernels/loss.cu).
template <class T>
NodeId cuda_reduce(Tape<T>& t, const char* op, CudaLoss kind, NodeId a, NodeId b, double scale,
                   double mult);

/// Pairwise logistic loss on the device (kernels/rank_loss.cu): y = weight/|pairs| · Σ softplus(
/// −(s_i − s_j)) over the host-built `pairs` (better i, worse j) of score [n]; 0 without pairs.
template <class T>
NodeId cuda_pairwise_logistic(Tape<T>& t, NodeId score,
                              const std::vector<std::pair<int64_t, int64_t>>& pairs, T weight);

/// y[rows, out] = x·Wᵀ + b through cuBLAS (b < 0: no bias).
template <class T>
NodeId cuda_linear(Tape<T>& t, NodeId x, NodeId w, NodeId b, Shape ys, int64_t rows, int64_t in,
                   int64_t out);

/// The fused LSTM on the device (engine/lstm.hpp semantics); inputs already checked.
template <class T>
LstmOutputs cuda_lstm(Tape<T>& t, NodeId x, const LstmSpec& spec, const std::vector<LstmWeights>& w,
                      std::vector<NodeId> inputs);

}  // namespace lcm::ops::detail
