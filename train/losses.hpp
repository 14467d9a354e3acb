// The training objectives selected by training.loss, built on the tape for one batch: the
// reference MAPE (docs/model-spec.md §6) and the log-space, pairwise and listwise ranking losses
// (docs/accuracy.md).
#pragma once
#include "config/enums.hpp"
#include "data/dataset.hpp"
#include "engine/tape.hpp"

namespace lcm::train {

/// The training objective `loss` (training.loss) of one batch, a scalar []:
///   Mape             ops::mape(out, y, weight)              (model-spec §6; out = speedup ×)
///   LogMse           weight · mean (out − ln y)²             (out = ln speedup)
///   LogL1            weight · mean |out − ln y|
///   LogHuber         ops::huber(out, ln y, huber_delta, weight): weight · mean h_δ(out − ln y)
///   Pairwise         pairwise_logistic(out, ln y, bt.program_of, weight): RankNet loss over the
///                    pairs of schedules of the same program in the batch with different speedups
///                    (the softplus form log(1 + exp(−(ŝ_i − ŝ_j))) for ln y_i > ln y_j)
///   ListNet          ops::listnet(out, ln y, bt.program_of, weight): softmax cross-entropy per
///                    program with ≥ 2 schedules in the batch, target softmax(ln y) (Cao et al.
///                    2007), mean over those programs
///   LambdaRank       ops::lambdarank(out, ln y, y, bt.program_of, weight): the Pairwise terms
///                    weighted by |ΔnDCG| of swapping the pair (linear gains y, Burges 2010)
///   LogX + R         LogX + rank_weight · R (R one of the three ranking terms)
/// out: [B] model output; y = bt.speedup [B] (> 0, labels are clipped at 0.01, model-spec §4);
/// weight = batch_len / batch_size (model-spec §6, Q10). Throws std::invalid_argument for a
/// label ≤ 0 or NaN in a log loss.
NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight, float huber_delta = 0.5f);

/// The weights of the two kinds of terms of training_loss on one rank's share of a batch
/// (data-parallel training, train/distributed.hpp): the pointwise terms (MAPE, log MSE/L1/Huber)
/// are a mean over the share's B_r datapoints, the ranking term a mean over its units U_r, so
/// that the sum over ranks is the one-process loss of the global batch (B_g datapoints, U_g
/// units): pointwise = (B_g / batch_size) · B_r / B_g, ranking = (B_g / batch_size) · U_r / U_g
/// (0 when U_g = 0). The units (ranking_unit_count) are the ordered pairs for pairwise and
/// lambdarank, the programs with ≥ 2 schedules for listnet. The split is exact for all three:
/// a program's schedules of a batch are on one rank (split_batch_by_program), and each term of
/// a ranking loss depends on one program only (LambdaRank's |ΔnDCG| weights too: the ranks and
/// the ideal DCG are those of the program's schedules in the batch). With one rank both weights
/// are batch_len / batch_size (model-spec §6, Q10).
struct LossWeights {
  float pointwise = 1;
  float pairwise = 1;  // the ranking term (pairwise, listnet or lambdarank)
};

/// training_loss with the pointwise and ranking terms weighted separately (LossWeights); the
/// ranking term is additionally multiplied by rank_weight in the combined losses.
NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     LossWeights weights, float rank_weight, float huber_delta = 0.5f);

}  // namespace lcm::train
