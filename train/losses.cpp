// The training objectives of training.loss (see losses.hpp).
#include "train/losses.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/ops.hpp"

namespace lcm::train {

NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight) {
  return training_loss(tape, loss, out, bt, LossWeights{weight, weight}, rank_weight);
}

NodeId training_loss(Tape<float>& tape, config::Loss loss, NodeId out, const data::BatchTensors& bt,
                     LossWeights weights, float rank_weight) {
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
  auto pointwise = [&](bool squared) {
    NodeId target = tape.constant(log_y.data(), Shape{B});
    if (squared) return ops::scale(tape, ops::mse(tape, out, target), weight);
    return ops::l1(tape, out, target, weight);
  };
  auto pairwise = [&](float w) {
    return ops::pairwise_logistic(tape, out, log_y, bt.program_of, w);
  };
  switch (loss) {
    case Loss::LogMse:
      return pointwise(true);
    case Loss::LogL1:
      return pointwise(false);
    case Loss::Pairwise:
      return pairwise(pair_weight);
    case Loss::LogMsePairwise:
      return ops::add(tape, pointwise(true), pairwise(pair_weight * rank_weight));
    case Loss::LogL1Pairwise:
      return ops::add(tape, pointwise(false), pairwise(pair_weight * rank_weight));
    case Loss::Mape:
      break;
  }
  throw std::logic_error("training_loss: unhandled loss");
}

}  // namespace lcm::train
