// The training objective of training.loss as a sum of terms: the table of pointwise terms (one
// value per datapoint, a mean over the batch), the table of ranking terms (over the schedules of
// one program in a batch), the aliases of the combined names ("log_huber+pairwise") and the list
// form ("log_mse:1,listnet:0.2"). The functions that build each term on the tape are in
// train/losses.cpp, one table per kind indexed by the enums below.
#pragma once
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>

namespace lcm::config {

/// A pointwise term: weight · mean over the batch of one value per datapoint (docs/tools.md
/// training.loss; model-spec §6 for mape).
enum class PointwiseTerm { Mape, LogMse, LogL1, LogHuber, Count };
/// A ranking term over the schedules of the same program in a batch (docs/accuracy.md).
enum class RankingTerm { Pairwise, ListNet, LambdaRank, Count };

/// What a ranking term averages over (its units, train/losses.hpp LossWeights): the ordered pairs
/// of schedules of one program with different speedups, or the programs with ≥ 2 schedules.
enum class RankingUnits { Pairs, Programs };

/// One row of the pointwise table: the term's name in training.loss, whether it trains the model
/// output as ln(speedup) (false: as a speedup ×), its weight when the list form names it without
/// one, and what it computes.
struct PointwiseTermInfo {
  PointwiseTerm term;
  const char* name;
  bool log_output;
  double default_weight;
  const char* what;
};
/// One row of the ranking table: name, units, weight when the list form gives none, what it is.
struct RankingTermInfo {
  RankingTerm term;
  const char* name;
  RankingUnits units;
  double default_weight;
  const char* what;
};

/// The pointwise terms, in enum order.
inline constexpr PointwiseTermInfo kPointwiseTerms[] = {
    {PointwiseTerm::Mape, "mape", false, 1.0,
     "100 mean |y - out| / (y + 1e-5), out a speedup (model-spec §6)"},
    {PointwiseTerm::LogMse, "log_mse", true, 1.0, "mean (out - ln y)^2"},
    {PointwiseTerm::LogL1, "log_l1", true, 1.0, "mean |out - ln y|"},
    {PointwiseTerm::LogHuber, "log_huber", true, 1.0,
     "mean Huber(out - ln y), delta training.huber_delta"},
};
static_assert(std::size(kPointwiseTerms) == size_t(PointwiseTerm::Count),
              "one row of kPointwiseTerms per PointwiseTerm");

/// The ranking terms, in enum order.
inline constexpr RankingTermInfo kRankingTerms[] = {
    {RankingTerm::Pairwise, "pairwise", RankingUnits::Pairs, 1.0,
     "RankNet: mean over pairs of log(1 + exp(-(out_i - out_j))), y_i > y_j"},
    {RankingTerm::ListNet, "listnet", RankingUnits::Programs, 1.0,
     "ListNet: softmax cross-entropy per program, target softmax(ln y)"},
    {RankingTerm::LambdaRank, "lambdarank", RankingUnits::Pairs, 1.0,
     "the pairwise terms weighted by |delta nDCG| of swapping the pair"},
};
static_assert(std::size(kRankingTerms) == size_t(RankingTerm::Count),
              "one row of kRankingTerms per RankingTerm");

/// The row of `t` (tables are in enum order; tests/test_loss_terms.cpp checks it).
inline const PointwiseTermInfo& info(PointwiseTerm t) {
  return kPointwiseTerms[size_t(t)];
}
inline const RankingTermInfo& info(RankingTerm t) {
  return kRankingTerms[size_t(t)];
}

/// training.loss: the objective, a sum of at most one pointwise and at most one ranking term,
/// each with a weight, the whole multiplied by the batch weighting (model-spec §6, Q10):
///   L = pointwise_weight · P(out) + ranking_weight · R(out)
/// Written either as an alias (`alias` non-empty: one of kLossAliases, the names training.loss
/// had before the list form; its ranking weight is training.rank_weight when it combines two
/// terms) or as a list `term[:weight],...` (weights written out; a term without one gets its
/// default_weight). The model output is a speedup when the pointwise term is mape, ln(speedup)
/// otherwise (a ranking term alone included).
struct Objective {
  std::string alias;  // the alias it was written as; "" for the list form
  std::optional<PointwiseTerm> pointwise;
  double pointwise_weight = 1;
  std::optional<RankingTerm> ranking;
  double ranking_weight = 1;
  /// The ranking weight is training.rank_weight (an alias 'pointwise+ranking'), not
  /// ranking_weight.
  bool ranking_weight_is_rank_weight = false;

  /// True when the model trained with it outputs ln(speedup) (every objective but mape's).
  bool log_output() const { return !pointwise || info(*pointwise).log_output; }
  /// True when it is the reference MAPE objective alone (its training loss is the MAPE).
  bool is_mape() const {
    return pointwise == PointwiseTerm::Mape && !ranking && pointwise_weight == 1.0;
  }
  /// The weight of the ranking term given training.rank_weight.
  double ranking_weight_with(double rank_weight) const {
    return ranking_weight_is_rank_weight ? rank_weight : ranking_weight;
  }
  /// Its text in training.loss and in the lcm.loss metadata: the alias, or the list form with
  /// every weight written out (pointwise term first: "log_mse:1,pairwise:0.05").
  std::string text() const;
};

/// One alias of training.loss: its name and the terms it stands for (combined = the ranking term
/// weighted by training.rank_weight; a term alone has weight 1).
struct LossAlias {
  const char* name;
  std::optional<PointwiseTerm> pointwise;
  std::optional<RankingTerm> ranking;
};
/// Every alias, in display order (the values training.loss had before the list form).
inline constexpr LossAlias kLossAliases[] = {
    {"mape", PointwiseTerm::Mape, std::nullopt},
    {"log_mse", PointwiseTerm::LogMse, std::nullopt},
    {"log_l1", PointwiseTerm::LogL1, std::nullopt},
    {"pairwise", std::nullopt, RankingTerm::Pairwise},
    {"log_mse+pairwise", PointwiseTerm::LogMse, RankingTerm::Pairwise},
    {"log_l1+pairwise", PointwiseTerm::LogL1, RankingTerm::Pairwise},
    {"listnet", std::nullopt, RankingTerm::ListNet},
    {"lambdarank", std::nullopt, RankingTerm::LambdaRank},
    {"log_mse+listnet", PointwiseTerm::LogMse, RankingTerm::ListNet},
    {"log_mse+lambdarank", PointwiseTerm::LogMse, RankingTerm::LambdaRank},
    {"log_huber", PointwiseTerm::LogHuber, std::nullopt},
    {"log_huber+pairwise", PointwiseTerm::LogHuber, RankingTerm::Pairwise},
};

/// The objective of alias `a`.
Objective objective_of(const LossAlias& a);

/// Parses training.loss: an alias name, or a comma-separated list of `term` or `term:weight`
/// (a term of kPointwiseTerms or kRankingTerms; weight a finite number > 0), at most one
/// pointwise and one ranking term. Throws std::invalid_argument saying what is wrong (unknown
/// term, two pointwise or two ranking terms, bad weight, empty entry); the caller names the key.
Objective parse_objective(const std::string& text);

/// The accepted forms, for --help and messages: "one of <aliases>, or a list term[:weight],...
/// of at most one pointwise (<names>) and one ranking (<names>) term".
std::string objective_type();

}  // namespace lcm::config
