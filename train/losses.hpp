// The training objectives selected by training.loss, built on the tape for one batch: the
// reference MAPE (docs/model-spec.md §6) and the log-space and pairwise ranking losses
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
///   Pairwise         pairwise_logistic(out, ln y, bt.program_of, weight): RankNet loss over the
///                    pairs of schedules of the same program in the batch with different speedups
///   LogX + Pairwise  LogX + rank_weight · Pairwise
/// out: [B] model output; y = bt.speedup [B] (> 0, labels are clipped at 0.01, model-spec §4);
/// weight = batch_len / batch_size (model-spec §6, Q10). Throws std::invalid_argument for a
/// label ≤ 0 or NaN in a log loss.
NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight);

/// The weights of the two kinds of terms of training_loss on one rank's share of a batch
/// (data-parallel training, train/distributed.hpp): the pointwise terms (MAPE, log MSE/L1) are a
/// mean over the share's B_r datapoints, the pairwise term a mean over its pairs, so that the sum
/// over ranks is the one-process loss of the global batch (B_g datapoints, P_g pairs):
/// pointwise = (B_g / batch_size) · B_r / B_g, pairwise = (B_g / batch_size) · P_r / P_g
/// (0 when P_g = 0). With one rank both are batch_len / batch_size (model-spec §6, Q10).
struct LossWeights {
  float pointwise = 1;
  float pairwise = 1;
};

/// training_loss with the pointwise and pairwise terms weighted separately (LossWeights); the
/// pairwise term is additionally multiplied by rank_weight in the combined losses.
NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     LossWeights weights, float rank_weight);

}  // namespace lcm::train
