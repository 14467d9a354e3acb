// The training objective of training.loss built on the tape for one batch: a sum of a pointwise
// term (the reference MAPE of docs/model-spec.md §6, or a log-space loss) and a ranking term
// (pairwise, ListNet, LambdaRank; docs/accuracy.md), each built by the one function of its row in
// the term tables of losses.cpp (config/loss_terms.hpp names them).
#pragma once
#include <cstdint>
#include <vector>

#include "config/loss_terms.hpp"
#include "data/dataset.hpp"
#include "engine/tape.hpp"

namespace lcm::train {

/// The labels the terms of an objective read, for a batch of B datapoints.
template <class T>
struct TermLabels {
  std::vector<T> speedup;      // y [B], speedup × (labels are clipped at 0.01, model-spec §4)
  std::vector<T> log_speedup;  // ln y [B], in T (empty when no term reads it)
  std::vector<int32_t> program_of;  // [B] the program of each datapoint (the ranking groups)
  T huber_delta = T(0.5);           // log_huber's δ on ln speedups (training.huber_delta)
};

/// The pointwise term `term` of the output `out` [B] times `weight`, a scalar []:
///   Mape      ops::mape(out, y, weight) = weight · 100 · mean |y − out| / (y + 1e-5)
///             (model-spec §6; out = speedup ×)
///   LogMse    weight · mean (out − ln y)²   (ops::scale of ops::mse; out = ln speedup)
///   LogL1     ops::l1(out, ln y, weight) = weight · mean |out − ln y|
///   LogHuber  ops::huber(out, ln y, huber_delta, weight) = weight · mean h_δ(out − ln y)
/// Throws std::invalid_argument (from the op) for mismatched shapes.
template <class T>
NodeId pointwise_term(Tape<T>& tape, config::PointwiseTerm term, NodeId out,
                      const TermLabels<T>& labels, T weight);

/// The ranking term `term` of the scores `out` [B] times `weight`, a scalar []:
///   Pairwise    ops::pairwise_logistic(out, ln y, program_of, weight): RankNet loss over the
///               pairs of schedules of the same program with ln y_i > ln y_j, the softplus form
///               log(1 + exp(−(ŝ_i − ŝ_j))), mean over those pairs
///   ListNet     ops::listnet(out, ln y, program_of, weight): softmax cross-entropy per program
///               with ≥ 2 schedules, target softmax(ln y) (Cao et al. 2007), mean over programs
///   LambdaRank  ops::lambdarank(out, ln y, y, program_of, weight): the Pairwise terms weighted
///               by |ΔnDCG| of swapping the pair (linear gains y, Burges 2010)
template <class T>
NodeId ranking_term(Tape<T>& tape, config::RankingTerm term, NodeId out,
                    const TermLabels<T>& labels, T weight);

/// The weights of the two kinds of terms of training_loss on one rank's share of a batch
/// (data-parallel training, train/distributed.hpp): the pointwise term is a mean over the
/// share's B_r datapoints, the ranking term a mean over its units U_r, so that the sum over
/// ranks is the one-process loss of the global batch (B_g datapoints, U_g units): pointwise =
/// (B_g / batch_size) · B_r / B_g, ranking = (B_g / batch_size) · U_r / U_g (0 when U_g = 0).
/// The units (ranking_unit_count, config::RankingUnits) are the ordered pairs for pairwise and
/// lambdarank, the programs with ≥ 2 schedules for listnet. The split is exact for all three:
/// a program's schedules of a batch are on one rank (split_batch_by_program), and each term of
/// a ranking loss depends on one program only (LambdaRank's |ΔnDCG| weights too: the ranks and
/// the ideal DCG are those of the program's schedules in the batch). With one rank both weights
/// are batch_len / batch_size (model-spec §6, Q10).
struct LossWeights {
  float pointwise = 1;
  float pairwise = 1;  // the ranking term (pairwise, listnet or lambdarank)
};

/// The training objective `loss` (training.loss) of one batch, a scalar []:
///   weights.pointwise · pointwise_weight · P(out) + weights.pairwise · w_r · R(out)
/// with P = pointwise_term, R = ranking_term (each only when the objective has it) and w_r =
/// loss.ranking_weight_with(rank_weight) (training.rank_weight for an alias 'pointwise+ranking').
/// The weights multiply in float: weights.pointwise · float(pointwise_weight), weights.pairwise
/// · float(w_r). out: [B] model output (a speedup for mape, ln speedup otherwise); y =
/// bt.speedup [B]. Throws std::invalid_argument for a label ≤ 0 or NaN when a term reads ln y.
NodeId training_loss(Tape<float>& tape, const config::Objective& loss, NodeId out,
                     const data::BatchTensors& bt, LossWeights weights, float rank_weight,
                     float huber_delta = 0.5f);

/// training_loss with both weights equal to `weight` (one process: batch_len / batch_size).
NodeId training_loss(Tape<float>& tape, const config::Objective& loss, NodeId out,
                     const data::BatchTensors& bt, float weight, float rank_weight,
                     float huber_delta = 0.5f);

}  // namespace lcm::train
