// training.loss as a sum of terms (see loss_terms.hpp): aliases, the list form, its text.
#include "config/loss_terms.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace lcm::config {

namespace {

std::string weight_text(double w) {
  std::ostringstream s;
  s.precision(10);
  s << w;
  return s.str();
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t'\"[]");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t'\"[]") - a + 1);
}

template <class Table>
std::string names_of(const Table& table) {
  std::string s;
  for (const auto& row : table) s += (s.empty() ? "" : "|") + std::string(row.name);
  return s;
}

/// Sets `term` and `term_weight` (`weight`, else the row's default) from the row of `table`
/// named `name`; false when no row has that name. Throws std::invalid_argument when `term` is
/// already set (at most one term of a `kind`).
template <class Table, class Term>
bool take_term(const Table& table, const char* kind, const std::string& name,
               const std::optional<double>& weight, std::optional<Term>& term,
               double& term_weight) {
  bool found = false;
  for (const auto& row : table) {
    if (name != row.name) continue;
    if (term)
      throw std::invalid_argument(std::string("two ") + kind + " terms (" +
                                  std::string(info(*term).name) + ", " + name + "); at most one");
    term = row.term;
    term_weight = weight.value_or(row.default_weight);
    found = true;
  }
  return found;
}

}  // namespace

std::string Objective::text() const {
  if (!alias.empty()) return alias;
  std::string s;
  if (pointwise) s = std::string(info(*pointwise).name) + ":" + weight_text(pointwise_weight);
  if (ranking)
    s += (s.empty() ? "" : ",") + std::string(info(*ranking).name) + ":" +
         weight_text(ranking_weight);
  return s;
}

Objective objective_of(const LossAlias& a) {
  Objective o;
  o.alias = a.name;
  o.pointwise = a.pointwise;
  o.ranking = a.ranking;
  o.ranking_weight_is_rank_weight = a.pointwise.has_value() && a.ranking.has_value();
  return o;
}

Objective parse_objective(const std::string& text) {
  for (const LossAlias& a : kLossAliases)
    if (text == a.name) return objective_of(a);
  Objective o;
  if (!text.empty() && text.back() == ',')
    throw std::invalid_argument("empty entry in '" + text + "'");
  std::string item;
  std::istringstream in(text);
  bool any = false;
  while (std::getline(in, item, ',')) {
    item = trimmed(item);
    if (item.empty()) throw std::invalid_argument("empty entry in '" + text + "'");
    const size_t colon = item.find(':');
    const std::string name = trimmed(item.substr(0, colon));
    std::optional<double> weight;
    if (colon != std::string::npos) {
      const std::string w = trimmed(item.substr(colon + 1));
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(w.c_str(), &end);
      if (w.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || !(v > 0))
        throw std::invalid_argument("the weight of " + name + " is '" + w +
                                    "', expected a finite number > 0");
      weight = v;
    }
    const bool pointwise =
        take_term(kPointwiseTerms, "pointwise", name, weight, o.pointwise, o.pointwise_weight);
    const bool ranking =
        take_term(kRankingTerms, "ranking", name, weight, o.ranking, o.ranking_weight);
    if (!pointwise && !ranking)
      throw std::invalid_argument("unknown term '" + name + "' (pointwise " +
                                  names_of(kPointwiseTerms) + ", ranking " +
                                  names_of(kRankingTerms) + ")");
    any = true;
  }
  if (!any) throw std::invalid_argument("no term");
  return o;
}

std::string objective_type() {
  return "one of " + names_of(kLossAliases) + ", or a list term[:weight],... of at most one " +
         "pointwise (" + names_of(kPointwiseTerms) + ") and one ranking (" +
         names_of(kRankingTerms) + ") term";
}

}  // namespace lcm::config
