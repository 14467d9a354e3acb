// The terms of training.loss and their sum (see losses.hpp): one table of builders per kind of
// term, indexed by the enums of config/loss_terms.hpp.
#include "train/losses.hpp"

#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>

#include "engine/ops.hpp"

namespace lcm::train {

namespace {

template <class T>
using TermBuilder = NodeId (*)(Tape<T>&, NodeId, const TermLabels<T>&, T);

template <class T>
NodeId log_target(Tape<T>& t, const TermLabels<T>& l) {
  return t.constant(l.log_speedup.data(), Shape{int64_t(l.log_speedup.size())});
}

// ---- pointwise terms ----
template <class T>
NodeId mape_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::mape(t, out, t.constant(l.speedup.data(), Shape{int64_t(l.speedup.size())}), w);
}
template <class T>
NodeId log_mse_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::scale(t, ops::mse(t, out, log_target(t, l)), w);
}
template <class T>
NodeId log_l1_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::l1(t, out, log_target(t, l), w);
}
template <class T>
NodeId log_huber_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::huber(t, out, log_target(t, l), l.huber_delta, w);
}

// ---- ranking terms ----
template <class T>
NodeId pairwise_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::pairwise_logistic(t, out, l.log_speedup, l.program_of, w);
}
template <class T>
NodeId listnet_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::listnet(t, out, l.log_speedup, l.program_of, w);
}
template <class T>
NodeId lambdarank_term(Tape<T>& t, NodeId out, const TermLabels<T>& l, T w) {
  return ops::lambdarank(t, out, l.log_speedup, l.speedup, l.program_of, w);
}

template <class T, class Term>
struct TermRow {
  Term term;
  TermBuilder<T> build;
};

/// The builder of each pointwise term, in config::PointwiseTerm order.
template <class T>
constexpr TermRow<T, config::PointwiseTerm> kPointwiseBuilders[] = {
    {config::PointwiseTerm::Mape, &mape_term<T>},
    {config::PointwiseTerm::LogMse, &log_mse_term<T>},
    {config::PointwiseTerm::LogL1, &log_l1_term<T>},
    {config::PointwiseTerm::LogHuber, &log_huber_term<T>},
};
/// The builder of each ranking term, in config::RankingTerm order.
template <class T>
constexpr TermRow<T, config::RankingTerm> kRankingBuilders[] = {
    {config::RankingTerm::Pairwise, &pairwise_term<T>},
    {config::RankingTerm::ListNet, &listnet_term<T>},
    {config::RankingTerm::LambdaRank, &lambdarank_term<T>},
};

/// True when row i of `rows` builds term i.
template <class Rows>
constexpr bool in_enum_order(const Rows& rows) {
  for (size_t i = 0; i < std::size(rows); ++i)
    if (size_t(rows[i].term) != i) return false;
  return true;
}
static_assert(std::size(kPointwiseBuilders<float>) == size_t(config::PointwiseTerm::Count),
              "one builder per pointwise term");
static_assert(std::size(kRankingBuilders<float>) == size_t(config::RankingTerm::Count),
              "one builder per ranking term");
static_assert(in_enum_order(kPointwiseBuilders<float>) && in_enum_order(kRankingBuilders<float>),
              "builders in enum order");

/// Term `term` of builder table `table` on the tape (`what`: the caller, for the error).
/// Throws std::invalid_argument for a term outside the table.
template <class Table, class Term, class T>
NodeId build_term(const Table& table, const char* what, Term term, Tape<T>& tape, NodeId out,
                  const TermLabels<T>& labels, T weight) {
  if (size_t(term) >= std::size(table))
    throw std::invalid_argument(std::string(what) + ": no term " + std::to_string(int(term)));
  return table[size_t(term)].build(tape, out, labels, weight);
}

}  // namespace

template <class T>
NodeId pointwise_term(Tape<T>& tape, config::PointwiseTerm term, NodeId out,
                      const TermLabels<T>& labels, T weight) {
  return build_term(kPointwiseBuilders<T>, "pointwise_term", term, tape, out, labels, weight);
}

template <class T>
NodeId ranking_term(Tape<T>& tape, config::RankingTerm term, NodeId out,
                    const TermLabels<T>& labels, T weight) {
  return build_term(kRankingBuilders<T>, "ranking_term", term, tape, out, labels, weight);
}

template NodeId pointwise_term<float>(Tape<float>&, config::PointwiseTerm, NodeId,
                                      const TermLabels<float>&, float);
template NodeId pointwise_term<double>(Tape<double>&, config::PointwiseTerm, NodeId,
                                       const TermLabels<double>&, double);
template NodeId ranking_term<float>(Tape<float>&, config::RankingTerm, NodeId,
                                    const TermLabels<float>&, float);
template NodeId ranking_term<double>(Tape<double>&, config::RankingTerm, NodeId,
                                     const TermLabels<double>&, double);

NodeId training_loss(Tape<float>& tape, const config::Objective& loss, NodeId out,
                     const data::BatchTensors& bt, float weight, float rank_weight,
                     float huber_delta) {
  return training_loss(tape, loss, out, bt, LossWeights{weight, weight}, rank_weight, huber_delta);
}

NodeId training_loss(Tape<float>& tape, const config::Objective& loss, NodeId out,
                     const data::BatchTensors& bt, LossWeights weights, float rank_weight,
                     float huber_delta) {
  if (!loss.pointwise && !loss.ranking)
    throw std::invalid_argument("training_loss: an objective without terms");
  const size_t B = size_t(bt.batch);
  TermLabels<float> labels;
  labels.speedup.assign(bt.speedup.begin(), bt.speedup.begin() + std::ptrdiff_t(B));
  labels.huber_delta = huber_delta;
  if (loss.log_output() || loss.ranking) {  // a term reads ln y
    labels.log_speedup.resize(B);
    for (size_t i = 0; i < B; ++i) {
      const float y = labels.speedup[i];
      if (!(y > 0))
        throw std::invalid_argument("training_loss: " + loss.text() + " needs speedups > 0, got " +
                                    std::to_string(y));
      labels.log_speedup[i] = std::log(y);
    }
  }
  if (loss.ranking) labels.program_of = bt.program_of;
  // The ranking term goes on the tape first: backward then adds the pointwise term's gradient
  // of `out` last, and with fused multiply-adds (-march) the order of those two additions
  // changes the bits of training.
  NodeId ranking = -1;
  if (loss.ranking) {
    const float w = weights.pairwise * float(loss.ranking_weight_with(double(rank_weight)));
    ranking = ranking_term(tape, *loss.ranking, out, labels, w);
  }
  if (!loss.pointwise) return ranking;
  const NodeId pointwise = pointwise_term(tape, *loss.pointwise, out, labels,
                                          weights.pointwise * float(loss.pointwise_weight));
  return ranking < 0 ? pointwise : ops::add(tape, pointwise, ranking);
}

}  // namespace lcm::train
