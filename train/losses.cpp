// The training objectives of training.loss (see losses.hpp).
#include "train/losses.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/ops.hpp"

namespace lcm::train {

NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight, float huber_delta) {
  return training_loss(tape, loss, out, bt, LossWeights{weight, weight}, rank_weight, huber_delta);
}

NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     LossWeights weights, float rank_weight, float huber_delta) {
  using config::Loss;
  const float weight = weights.pointwise, pair_weight = weights.pairwise;
  const int64_t B = bt.batch;
  if (loss == Loss::Mape) {
    NodeId target = tape.constant(bt.speedup.data(), Shape{B});
    return ops::mape(tape, out, target, weight);
  }
  std::vector<float> log_y(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    const float y = bt.speedup[size_t(i)];
    if (!(y > 0))
      throw std::invalid_argument("training_loss: " + config::name_of(loss) +
                                  " needs speedups > 0, got " + std::to_string(y));
    log_y[size_t(i)] = std::log(y);
  }
  enum class Point { Mse, L1, Huber };
  auto pointwise = [&](Point kind) {
    NodeId target = tape.constant(log_y.data(), Shape{B});
    if (kind == Point::Mse) return ops::scale(tape, ops::mse(tape, out, target), weight);
    if (kind == Point::Huber) return ops::huber(tape, out, target, huber_delta, weight);
    return ops::l1(tape, out, target, weight);
  };
  auto pairwise = [&](float w) {
    return ops::pairwise_logistic(tape, out, log_y, bt.program_of, w);
  };
  auto listnet = [&](float w) { return ops::listnet(tape, out, log_y, bt.program_of, w); };
  auto lambdarank = [&](float w) {
    const std::vector<float> gain(bt.speedup.begin(), bt.speedup.begin() + B);
    return ops::lambdarank(tape, out, log_y, gain, bt.program_of, w);
  };
  const float ranked = pair_weight * rank_weight;
  switch (loss) {
    case Loss::LogMse:
      return pointwise(Point::Mse);
    case Loss::LogL1:
      return pointwise(Point::L1);
    case Loss::LogHuber:
      return pointwise(Point::Huber);
    case Loss::Pairwise:
      return pairwise(pair_weight);
    case Loss::ListNet:
      return listnet(pair_weight);
    case Loss::LambdaRank:
      return lambdarank(pair_weight);
    case Loss::LogMsePairwise:
      return ops::add(tape, pointwise(Point::Mse), pairwise(ranked));
    case Loss::LogL1Pairwise:
      return ops::add(tape, pointwise(Point::L1), pairwise(ranked));
    case Loss::LogHuberPairwise:
      return ops::add(tape, pointwise(Point::Huber), pairwise(ranked));
    case Loss::LogMseListNet:
      return ops::add(tape, pointwise(Point::Mse), listnet(ranked));
    case Loss::LogMseLambdaRank:
      return ops::add(tape, pointwise(Point::Mse), lambdarank(ranked));
    case Loss::Mape:
      break;
  }
  throw std::logic_error("training_loss: unhandled loss");
}

}  // namespace lcm::train
