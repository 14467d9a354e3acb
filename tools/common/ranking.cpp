// Training objectives and checkpointed input scaling of the ranking study (see ranking.hpp).
#include "tools/common/ranking.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/ops.hpp"
#include "engine/safetensors.hpp"

namespace lcm::tools {

bool is_log_loss(const std::string& loss) { return loss != "mape"; }

NodeId training_loss(Tape<float>& tape, const std::string& loss, NodeId out, const data::BatchTensors& bt,
                     float weight, float rank_weight) {
  const int64_t B = bt.batch;
  if (loss == "mape") {
    NodeId target = tape.constant(bt.speedup.data(), Shape{B});
    return ops::mape(tape, out, target, weight);
  }
  std::vector<float> log_y(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    const float y = bt.speedup[size_t(i)];
    if (!(y > 0)) throw std::invalid_argument("training_loss: " + loss + " needs speedups > 0, got " + std::to_string(y));
    log_y[size_t(i)] = std::log(y);
  }
  auto pointwise = [&](const std::string& kind) {
    NodeId target = tape.constant(log_y.data(), Shape{B});
    if (kind == "log_mse") return ops::scale(tape, ops::mse(tape, out, target), weight);
    return ops::l1(tape, out, target, weight);
  };
  auto pairwise = [&](float w) { return ops::pairwise_logistic(tape, out, log_y, bt.program_of, w); };
  if (loss == "log_mse" || loss == "log_l1") return pointwise(loss);
  if (loss == "pairwise") return pairwise(weight);
  if (loss == "log_mse+pairwise" || loss == "log_l1+pairwise")
    return ops::add(tape, pointwise(loss.substr(0, loss.find('+'))), pairwise(weight * rank_weight));
  throw std::invalid_argument("training.loss: unknown value " + loss +
                              " (expected mape|log_mse|log_l1|pairwise|log_mse+pairwise|log_l1+pairwise)");
}

lcm::model::InputScaling load_input_scaling(const std::string& checkpoint_path) {
  lcm::SafeTensorsFile f = lcm::read_safetensors(checkpoint_path);
  auto it = f.metadata.find("lcm.input_scaling");
  if (it == f.metadata.end()) return {};
  return lcm::model::InputScaling::from_json(it->second);
}

}  // namespace lcm::tools
