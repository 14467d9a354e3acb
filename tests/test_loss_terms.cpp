// Tests of the training objective as a sum of terms (config/loss_terms.hpp, train/losses.cpp):
// every pointwise and every ranking term (enumerated up to Count, so a new term cannot go
// untested) against a finite-difference gradient in double on the CPU and against its formula
// written out here; every alias of training.loss against the hard-coded combination of ops it
// named before the term tables (value and gradients, bit for bit); the list form, its text and
// its errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "engine/gradcheck.hpp"
#include "engine/ops.hpp"
#include "engine/tape.hpp"
#include "train/losses.hpp"

using namespace lcm;
using config::PointwiseTerm;
using config::RankingTerm;

namespace {

// a batch of 8 datapoints: programs 3 (3 schedules, one tie), 5 (2), 9 (2) and 4 (1, in no pair)
const std::vector<double> kSpeedup = {2.0, 0.5, 2.0, 3.0, 1.25, 0.7, 4.0, 1.5};
const std::vector<int32_t> kProgram = {3, 3, 3, 5, 5, 9, 9, 4};
// scores: for the log terms |out − ln y| is away from 0 and spans both sides of δ = 0.5; for
// mape the exp of these is away from y
const std::vector<double> kOut = {0.3, -1.2, 1.5, 0.2, 0.9, -0.1, 0.6, 1.1};
constexpr double kDelta = 0.5;

template <class T>
train::TermLabels<T> labels_of(const std::vector<double>& y, const std::vector<int32_t>& program,
                               double delta) {
  train::TermLabels<T> l;
  for (double v : y) l.speedup.push_back(T(v)), l.log_speedup.push_back(T(std::log(v)));
  l.program_of = program;
  l.huber_delta = T(delta);
  return l;
}

/// The scores a term of kind `log_output` reads: kOut as ln speedups, or their exp as speedups.
std::vector<double> scores(bool log_output) {
  std::vector<double> s = kOut;
  if (!log_output)
    for (double& v : s) v = std::exp(v);
  return s;
}

Parameter<double> param_of(const std::vector<double>& v) {
  Parameter<double> p;
  p.name = "out";
  p.shape = Shape{int64_t(v.size())};
  p.value = v;
  p.grad.assign(v.size(), 0.0);
  return p;
}

double value_of(const std::vector<double>& s,
                const std::function<NodeId(Tape<double>&, NodeId)>& build) {
  Parameter<double> p = param_of(s);
  Tape<double> t;
  return t.value(build(t, t.param(p))).data[0];
}

void expect_gradient_ok(const std::vector<double>& s,
                        const std::function<NodeId(Tape<double>&, NodeId)>& build) {
  Parameter<double> p = param_of(s);
  const GradCheckResult r = grad_check({&p}, [&](Tape<double>& t) { return build(t, t.param(p)); });
  INFO("worst: " << r.worst << " max_abs_err " << r.max_abs_err);
  CHECK(r.checked == int64_t(s.size()));
  CHECK(r.ok);
  double norm = 0;
  for (double g : p.grad) norm += g * g;
  CHECK(norm > 0);  // a term with no gradient would pass the comparison trivially
}

/// The formula of pointwise term k (docs/tools.md training.loss), in double, times w.
double pointwise_formula(PointwiseTerm k, const std::vector<double>& o, double w) {
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    const double y = kSpeedup[i], d = o[i] - std::log(y);
    switch (k) {
      case PointwiseTerm::Mape:
        s += 100.0 * std::fabs(y - o[i]) / (y + 1e-5);
        break;
      case PointwiseTerm::LogMse:
        s += d * d;
        break;
      case PointwiseTerm::LogL1:
        s += std::fabs(d);
        break;
      case PointwiseTerm::LogHuber:
        s += std::fabs(d) <= kDelta ? 0.5 * d * d : kDelta * (std::fabs(d) - 0.5 * kDelta);
        break;
      default:
        FAIL("no formula for pointwise term ", int(k));
    }
  }
  return w * s / double(o.size());
}

/// The formula of ranking term k (docs/tools.md training.loss), in double, times w. LambdaRank's
/// |ΔnDCG| weights come from ops::lambdarank_weights (tested against model::ndcg in
/// test_listwise_loss).
double ranking_formula(RankingTerm k, const std::vector<double>& o, double w) {
  const size_t n = o.size();
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (better, worse) of the same program
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (kProgram[i] == kProgram[j] && std::log(kSpeedup[i]) > std::log(kSpeedup[j]))
        pairs.emplace_back(int64_t(i), int64_t(j));
  auto pair_loss = [&](const std::pair<int64_t, int64_t>& p) {
    return std::log1p(std::exp(-(o[size_t(p.first)] - o[size_t(p.second)])));
  };
  switch (k) {
    case RankingTerm::Pairwise: {
      double s = 0;
      for (const auto& p : pairs) s += pair_loss(p);
      return w * s / double(pairs.size());
    }
    case RankingTerm::LambdaRank: {
      const std::vector<double> lw = ops::lambdarank_weights(o, kSpeedup, kProgram, pairs);
      double s = 0;
      for (size_t q = 0; q < pairs.size(); ++q) s += lw[q] * pair_loss(pairs[q]);
      return w * s / double(pairs.size());
    }
    case RankingTerm::ListNet: {
      double s = 0;
      int groups = 0;
      for (int32_t g : std::set<int32_t>(kProgram.begin(), kProgram.end())) {
        double zy = 0, zo = 0;
        int members = 0;
        for (size_t i = 0; i < n; ++i)
          if (kProgram[i] == g) zy += kSpeedup[i], zo += std::exp(o[i]), ++members;
        if (members < 2) continue;
        ++groups;
        for (size_t i = 0; i < n; ++i)
          if (kProgram[i] == g) s -= kSpeedup[i] / zy * std::log(std::exp(o[i]) / zo);
      }
      return w * s / double(groups);
    }
    default:
      FAIL("no formula for ranking term ", int(k));
  }
  return 0;
}

}  // namespace

TEST_CASE("term tables: one row per term, in enum order, with distinct names that parse") {
  std::set<std::string> names;
  for (int k = 0; k < int(PointwiseTerm::Count); ++k) {
    const config::PointwiseTermInfo& row = config::info(PointwiseTerm(k));
    CAPTURE(row.name);
    CHECK(int(row.term) == k);
    CHECK(names.insert(row.name).second);
    CHECK(row.default_weight > 0);
    const config::Objective o = config::parse_objective(std::string(row.name) + ":2.5");
    CHECK(o.pointwise == PointwiseTerm(k));
    CHECK(o.pointwise_weight == 2.5);
    CHECK(!o.ranking);
    CHECK(o.log_output() == row.log_output);
    CHECK(o.text() == std::string(row.name) + ":2.5");
  }
  for (int k = 0; k < int(RankingTerm::Count); ++k) {
    const config::RankingTermInfo& row = config::info(RankingTerm(k));
    CAPTURE(row.name);
    CHECK(int(row.term) == k);
    CHECK(names.insert(row.name).second);
    CHECK(row.default_weight > 0);
    const config::Objective o = config::parse_objective(std::string(row.name) + ":0.25");
    CHECK(o.ranking == RankingTerm(k));
    CHECK(o.ranking_weight == 0.25);
    CHECK(!o.ranking_weight_is_rank_weight);
    CHECK(o.log_output());  // a ranking term alone trains ln(speedup)
  }
}

TEST_CASE("every pointwise term: finite-difference gradient in double and its formula") {
  const auto labels = labels_of<double>(kSpeedup, kProgram, kDelta);
  for (int k = 0; k < int(PointwiseTerm::Count); ++k) {
    const PointwiseTerm term = PointwiseTerm(k);
    CAPTURE(config::info(term).name);
    const std::vector<double> s = scores(config::info(term).log_output);
    auto build = [&](Tape<double>& t, NodeId x) {
      return train::pointwise_term(t, term, x, labels, 0.7);
    };
    expect_gradient_ok(s, build);
    const double want = pointwise_formula(term, s, 0.7);
    CHECK(want > 0);
    CHECK(value_of(s, build) == doctest::Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("every ranking term: finite-difference gradient in double and its formula") {
  const auto labels = labels_of<double>(kSpeedup, kProgram, kDelta);
  for (int k = 0; k < int(RankingTerm::Count); ++k) {
    const RankingTerm term = RankingTerm(k);
    CAPTURE(config::info(term).name);
    auto build = [&](Tape<double>& t, NodeId x) {
      return train::ranking_term(t, term, x, labels, 1.3);
    };
    expect_gradient_ok(kOut, build);
    const double want = ranking_formula(term, kOut, 1.3);
    CHECK(want > 0);
    CHECK(value_of(kOut, build) == doctest::Approx(want).epsilon(1e-12));
  }
}

namespace {

/// The objective of training.loss `name` as lcm computed it before the term tables (the switch
/// over the 12 names of train/losses.cpp at 8f9ef15), written out: the same ops, weights and sum.
NodeId hard_coded_loss(Tape<float>& tape, const std::string& name, NodeId out,
                       const data::BatchTensors& bt, train::LossWeights weights, float rank_weight,
                       float huber_delta) {
  const float weight = weights.pointwise, pair_weight = weights.pairwise;
  const int64_t B = bt.batch;
  if (name == "mape") {
    NodeId target = tape.constant(bt.speedup.data(), Shape{B});
    return ops::mape(tape, out, target, weight);
  }
  std::vector<float> log_y;
  for (int64_t i = 0; i < B; ++i) log_y.push_back(std::log(bt.speedup[size_t(i)]));
  auto mse = [&] {
    return ops::scale(tape, ops::mse(tape, out, tape.constant(log_y.data(), Shape{B})), weight);
  };
  auto l1 = [&] { return ops::l1(tape, out, tape.constant(log_y.data(), Shape{B}), weight); };
  auto huber = [&] {
    return ops::huber(tape, out, tape.constant(log_y.data(), Shape{B}), huber_delta, weight);
  };
  auto pairwise = [&](float w) {
    return ops::pairwise_logistic(tape, out, log_y, bt.program_of, w);
  };
  auto listnet = [&](float w) { return ops::listnet(tape, out, log_y, bt.program_of, w); };
  auto lambdarank = [&](float w) {
    return ops::lambdarank(tape, out, log_y, bt.speedup, bt.program_of, w);
  };
  const float ranked = pair_weight * rank_weight;
  // ops::add(tape, pointwise(...), ranking(...)): GCC evaluated the arguments right to left,
  // so the ranking term was on the tape first (the order of the gradient additions into `out`)
  auto sum = [&](auto pointwise, NodeId r) { return ops::add(tape, pointwise(), r); };
  if (name == "log_mse") return mse();
  if (name == "log_l1") return l1();
  if (name == "log_huber") return huber();
  if (name == "pairwise") return pairwise(pair_weight);
  if (name == "listnet") return listnet(pair_weight);
  if (name == "lambdarank") return lambdarank(pair_weight);
  if (name == "log_mse+pairwise") return sum(mse, pairwise(ranked));
  if (name == "log_l1+pairwise") return sum(l1, pairwise(ranked));
  if (name == "log_huber+pairwise") return sum(huber, pairwise(ranked));
  if (name == "log_mse+listnet") return sum(mse, listnet(ranked));
  if (name == "log_mse+lambdarank") return sum(mse, lambdarank(ranked));
  FAIL("not a training.loss of 8f9ef15: ", name);
  return -1;
}

data::BatchTensors batch() {
  data::BatchTensors bt;
  bt.batch = int64_t(kSpeedup.size());
  for (double y : kSpeedup) bt.speedup.push_back(float(y));
  bt.program_of = kProgram;
  return bt;
}

/// The value and the gradient (float, as training runs) of `build` at scores `s`.
std::pair<float, std::vector<float>> float_value_and_grad(
    const std::vector<double>& s, const std::function<NodeId(Tape<float>&, NodeId)>& build) {
  Parameter<float> p;
  p.name = "out";
  p.shape = Shape{int64_t(s.size())};
  for (double v : s) p.value.push_back(float(v));
  p.grad.assign(s.size(), 0.0f);
  Tape<float> t;
  t.set_grad_enabled(true);
  const NodeId l = build(t, t.param(p));
  const float v = t.value(l).data[0];
  t.backward(l);
  return {v, p.grad};
}

}  // namespace

TEST_CASE("every alias expands to the terms and weights of the hard-coded combination") {
  const data::BatchTensors bt = batch();
  const std::vector<std::string> names = {"mape",
                                          "log_mse",
                                          "log_l1",
                                          "pairwise",
                                          "log_mse+pairwise",
                                          "log_l1+pairwise",
                                          "listnet",
                                          "lambdarank",
                                          "log_mse+listnet",
                                          "log_mse+lambdarank",
                                          "log_huber",
                                          "log_huber+pairwise"};
  CHECK(std::size(config::kLossAliases) == names.size());
  // weights that differ, so that a weight reaching the wrong term shows
  const train::LossWeights weights{0.6f, 0.35f};
  const float rank_weight = 0.2f, delta = 0.3f;
  for (const std::string& name : names) {
    CAPTURE(name);
    const config::Objective o = config::parse_objective(name);
    CHECK(o.alias == name);
    CHECK(o.text() == name);  // lcm.loss and get_config_value keep the name
    CHECK(o.log_output() == (name != "mape"));
    const std::vector<double> s = scores(o.log_output());
    const auto got = float_value_and_grad(s, [&](Tape<float>& t, NodeId x) {
      return train::training_loss(t, o, x, bt, weights, rank_weight, delta);
    });
    const auto want = float_value_and_grad(s, [&](Tape<float>& t, NodeId x) {
      return hard_coded_loss(t, name, x, bt, weights, rank_weight, delta);
    });
    CHECK(want.first > 0);
    CHECK(got.first == want.first);    // the same ops in the same order: the same bits
    CHECK(got.second == want.second);  // gradients too
  }
}

TEST_CASE("list form: weights written out, rank_weight not read, equal to the alias it spells") {
  const data::BatchTensors bt = batch();
  const train::LossWeights weights{0.6f, 0.35f};
  auto run = [&](const config::Objective& o, float rank_weight) {
    return float_value_and_grad(kOut, [&](Tape<float>& t, NodeId x) {
      return train::training_loss(t, o, x, bt, weights, rank_weight, 0.5f);
    });
  };
  const config::Objective list = config::parse_objective("log_huber:1, pairwise:0.25");
  CHECK(list.alias.empty());
  CHECK(list.text() == "log_huber:1,pairwise:0.25");
  CHECK(config::parse_objective(list.text()).text() == list.text());
  // the alias with training.rank_weight 0.25 is the same sum; the list ignores rank_weight
  CHECK(run(list, 7.0f) == run(config::parse_objective("log_huber+pairwise"), 0.25f));
  // a pointwise weight scales the pointwise term only
  const auto one = run(config::parse_objective("log_mse"), 1.0f);
  const auto three = run(config::parse_objective("log_mse:3"), 1.0f);
  CHECK(three.first == doctest::Approx(3 * one.first).epsilon(1e-6));
  // order in the text does not matter; a term without a weight gets its default (1)
  CHECK(config::parse_objective("listnet:0.5,log_mse").text() == "log_mse:1,listnet:0.5");
  CHECK(config::parse_objective("mape:1,pairwise:0.1").log_output() == false);
  CHECK(config::parse_objective("mape:1").is_mape());
  CHECK(!config::parse_objective("mape:2").is_mape());
}

TEST_CASE("training.loss: the list form through the key table, YAML sequence, and its errors") {
  config::Config c;
  config::set_config_value(c, "training.loss", "log_mse:1,listnet:0.2");
  CHECK(config::get_config_value(c, "training.loss") == "log_mse:1,listnet:0.2");
  CHECK(c.training.loss.ranking == RankingTerm::ListNet);
  config::apply_config_yaml(c, "training:\n  loss: [log_l1:2, lambdarank:0.5]\n", "test.yaml");
  CHECK(config::get_config_value(c, "training.loss") == "log_l1:2,lambdarank:0.5");
  config::apply_config_yaml(c, "training:\n  loss: log_mse+pairwise\n", "test.yaml");
  CHECK(config::get_config_value(c, "training.loss") == "log_mse+pairwise");
  CHECK(c.training.loss.ranking_weight_is_rank_weight);
  struct Bad {
    const char* text;
    const char* why;
  };
  for (const Bad& b : {Bad{"hinge", "unknown term 'hinge'"},
                       Bad{"log_mse:1,log_l1:1", "two pointwise terms (log_mse, log_l1)"},
                       Bad{"pairwise,listnet", "two ranking terms (pairwise, listnet)"},
                       Bad{"log_mse:0", "the weight of log_mse is '0'"},
                       Bad{"log_mse:-1", "the weight of log_mse is '-1'"},
                       Bad{"log_mse:x", "the weight of log_mse is 'x'"},
                       Bad{"log_mse:inf", "the weight of log_mse is 'inf'"},
                       Bad{"log_mse,,pairwise", "empty entry"}, Bad{"log_mse,", "empty entry"},
                       Bad{"", "no term"}}) {
    CAPTURE(b.text);
    std::string msg;
    try {
      config::set_config_value(c, "training.loss", b.text);
    } catch (const config::ConfigError& e) {
      msg = e.what();
    }
    CHECK(msg.rfind("training.loss: expected one of mape|", 0) == 0);
    CHECK(msg.find(b.why) != std::string::npos);
  }
}
