// Declarations of every differentiable op of the engine (one body per op under engine/ops/, one
// file per op family, forward and backward side by side, on the CPU or the CUDA kernels). Each op
// checks shapes and throws std::invalid_argument naming the op and the offending shapes. All ops
// exist for T = float (training) and T = double (gradient checks); they are explicitly instantiated
// for both.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/rng.hpp"
#include "engine/tape.hpp"

namespace lcm::ops {

// ---- linear algebra (engine/ops/linear.cpp) ----
/// y = x·Wᵀ + b. x: [..., in] (rank 1–4, leading dims flattened), W: [out, in], b: [out] or -1
/// for no bias → y: [..., out]. One GEMM for all rows.
template <class T>
NodeId linear(Tape<T>& t, NodeId x, NodeId w, NodeId b = -1);
/// ELU(x·Wᵀ + b) (α = 1), the same values and gradients as elu(linear(x, w, b)) bit for bit, in
/// one op that keeps only the output (ELU's derivative is 1 where y > 0, else y + 1): on the CPU
/// the bias and the ELU are applied to each GEMM tile while it is in cache; on CUDA the ELU runs
/// in place after cuBLAS. Shapes and errors as linear. (The MLPs of docs/model-spec.md §5.2/§5.4:
/// Linear → ELU.)
template <class T>
NodeId linear_elu(Tape<T>& t, NodeId x, NodeId w, NodeId b = -1);

// ---- element-wise (engine/ops/elementwise.cpp) ----
/// a + b, same shapes.
template <class T>
NodeId add(Tape<T>& t, NodeId a, NodeId b);
/// a ⊙ b, same shapes.
template <class T>
NodeId mul(Tape<T>& t, NodeId a, NodeId b);
/// s · a for a constant scalar s.
template <class T>
NodeId scale(Tape<T>& t, NodeId a, T s);
/// ELU with α = 1: x if x > 0 else exp(x) − 1.
template <class T>
NodeId elu(Tape<T>& t, NodeId x);
/// LeakyReLU: x if x ≥ 0 else slope·x (PyTorch default slope 0.01).
template <class T>
NodeId leaky_relu(Tape<T>& t, NodeId x, T slope = T(0.01));
template <class T>
NodeId sigmoid(Tape<T>& t, NodeId x);
template <class T>
NodeId tanh(Tape<T>& t, NodeId x);
/// Inverted dropout: in training mode each element is kept with probability 1−p and scaled by
/// 1/(1−p), mask drawn from `rng` (counter-based, reproducible); identity in eval mode or p == 0.
template <class T>
NodeId dropout(Tape<T>& t, NodeId x, double p, Rng& rng);

// ---- shape ops (engine/ops/shape.cpp) ----
/// Same data, new shape (numel must match). No copy.
template <class T>
NodeId reshape(Tape<T>& t, NodeId x, Shape s);
/// Concatenation along `dim` (negative counts from the end); other extents must match.
template <class T>
NodeId concat(Tape<T>& t, const std::vector<NodeId>& xs, int dim);
/// x[..., start:start+len, ...] along `dim`.
template <class T>
NodeId slice(Tape<T>& t, NodeId x, int dim, int64_t start, int64_t len);
/// Rows of x picked along `dim` by `index` (repeats allowed); backward is a scatter-add.
/// Throws std::out_of_range for an index outside [0, x.shape[dim]).
template <class T>
NodeId index_select(Tape<T>& t, NodeId x, int dim, const std::vector<int64_t>& index);
/// y[r, j] = x[r, cols[j]] for a matrix x [R, K] (index_select along the last dim, e.g. a column
/// subset of a weight matrix). Throws std::invalid_argument for x not a matrix,
/// std::out_of_range for a column outside [0, K).
template <class T>
NodeId select_columns(Tape<T>& t, NodeId x, const std::vector<int64_t>& cols);
/// Multi-source row gather: output row r = row rows[r] of sources[src[r]] (each source viewed as
/// [numel / width, width]), result of shape `out` (numel = rows.size()·width); backward adds
/// each output row's gradient into its source row, per source in increasing r (deterministic;
/// the sources are expected distinct). Throws std::invalid_argument for width < 1, a row outside
/// its source or sizes that do not fit.
template <class T>
NodeId gather_rows(Tape<T>& t, const std::vector<NodeId>& sources, int64_t width,
                   const std::vector<int32_t>& src, const std::vector<int64_t>& rows, Shape out);
/// Stacks equal-shaped tensors along a new dimension `dim`.
template <class T>
NodeId stack(Tape<T>& t, const std::vector<NodeId>& xs, int dim);
/// A [1, H] or [H] tensor repeated to [B, H]; backward sums over the B rows.
template <class T>
NodeId broadcast_rows(Tape<T>& t, NodeId x, int64_t rows);

// ---- reductions and losses (engine/ops/loss.cpp) ----
/// Sum of all elements → scalar (shape []).
template <class T>
NodeId sum(Tape<T>& t, NodeId x);
/// Mean of all elements → scalar.
template <class T>
NodeId mean(Tape<T>& t, NodeId x);
/// mean((pred − target)²) → scalar; pred, target same shape.
template <class T>
NodeId mse(Tape<T>& t, NodeId pred, NodeId target);
/// MAPE of model-spec §6: 100·mean_i |y_i − ŷ_i| / (y_i + 1e-5) multiplied by `weight`
/// (the batch weighting batch_len / batch_size, Q10; 1 for the plain mean). pred, target: [B].
template <class T>
NodeId mape(Tape<T>& t, NodeId pred, NodeId target, T weight = T(1));

// ---- ranking losses (engine/ops/rank_loss.cpp; the ranking objective, docs/accuracy.md) ----
/// weight · mean_i |pred_i − target_i| → scalar; pred, target same shape (e.g. [B] ln speedups).
template <class T>
NodeId l1(Tape<T>& t, NodeId pred, NodeId target, T weight = T(1));
/// Pairwise logistic (RankNet) loss over pairs of the same group: score [B] (e.g. predicted
/// ln speedup), target [B] and group [B] (e.g. BatchTensors::program_of) are constants;
/// weight · mean over pairs (i, j) with group_i == group_j and target_i − target_j > min_gap of
/// log(1 + exp(−(score_i − score_j))) → scalar (0 when there is no such pair). Throws
/// std::invalid_argument when score is not [B] or the sizes differ.
template <class T>
NodeId pairwise_logistic(Tape<T>& t, NodeId score, const std::vector<T>& target,
                         const std::vector<int32_t>& group, T weight = T(1), T min_gap = T(0));
/// Huber loss (Huber 1964) → scalar []: weight · mean_i h_δ(pred_i − target_i) with
/// h_δ(d) = ½d² for |d| ≤ δ and δ·(|d| − ½δ) beyond; gradient clamp(d, −δ, δ)·weight/n. pred,
/// target same shape (e.g. [B] ln speedups). Throws std::invalid_argument for different or empty
/// shapes or delta ≤ 0.
template <class T>
NodeId huber(Tape<T>& t, NodeId pred, NodeId target, T delta, T weight = T(1));
/// LambdaRank (Burges 2010, "From RankNet to LambdaRank to LambdaMART", §4): the pairs and terms
/// of pairwise_logistic (min_gap 0; target e.g. ln speedup), each term weighted by the constant
/// w_ij = |ΔnDCG_ij| of lambdarank_weights(score, gain, group) at the forward's scores (no
/// gradient through w): weight · (1/|P|) · Σ_{(i,j)∈P} w_ij · log(1 + exp(−(s_i − s_j))) →
/// scalar (0 when there is no pair). score [B]; target, gain (e.g. speedup, > 0), group [B]
/// constants. Backward: ds_i −= dL·weight·w_ij·σ_ij/|P|, ds_j += the same. Throws
/// std::invalid_argument when score is not [B] or the sizes differ.
template <class T>
NodeId lambdarank(Tape<T>& t, NodeId score, const std::vector<T>& target,
                  const std::vector<T>& gain, const std::vector<int32_t>& group, T weight = T(1));
/// The |ΔnDCG| of swapping i and j in the predicted order of their group, for each pair (i, j) of
/// `pairs` (same group): |g_i − g_j| · |1/log2(1 + r_i) − 1/log2(1 + r_j)| / IDCG, with r the
/// 1-based rank by score descending (ties by index), gains g linear as the nDCG of
/// docs/model-spec.md §7.3 (model/metrics.hpp ndcg) and IDCG the group's ideal DCG (gains
/// sorted descending); 0 when IDCG ≤ 0. score, gain, group: [B]. → [|pairs|].
std::vector<double> lambdarank_weights(const std::vector<double>& score,
                                       const std::vector<double>& gain,
                                       const std::vector<int32_t>& group,
                                       const std::vector<std::pair<int64_t, int64_t>>& pairs);
/// ListNet (Cao et al. 2007, "Learning to Rank: From Pairwise Approach to Listwise Approach",
/// top-one probabilities): over the groups G with ≥ 2 members (e.g. the schedules of one program,
/// BatchTensors::program_of), with p = softmax(target) and q = softmax(score) within each group,
/// weight · (1/|G|) · Σ_g −Σ_{i∈g} p_i · ln q_i → scalar (0, no gradient, when no group has 2
/// members). target = ln speedup makes p_i = y_i / Σ_g y (temperature 1). score [B]; target,
/// group [B] constants. Backward: ds_i += dL·weight·(q_i − p_i)/|G|. Throws
/// std::invalid_argument when score is not [B] or the sizes differ.
template <class T>
NodeId listnet(Tape<T>& t, NodeId score, const std::vector<T>& target,
               const std::vector<int32_t>& group, T weight = T(1));

}  // namespace lcm::ops
