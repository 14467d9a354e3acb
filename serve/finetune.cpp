// Per-program fine-tuning for learning during search (see finetune.hpp).
#include "serve/finetune.hpp"

#include <cmath>
#include <stdexcept>

#include "engine/device_memory.hpp"
#include "engine/optim.hpp"
#include "engine/rng.hpp"
#include "model/scoring.hpp"
#include "train/losses.hpp"

namespace lcm::serve {

Learning parse_learning(const std::string& name) {
  if (name == "none") return Learning::None;
  if (name == "correction") return Learning::Correction;
  if (name == "finetune") return Learning::Finetune;
  if (name == "both") return Learning::Both;
  throw std::invalid_argument("learning: '" + name +
                              "' (expected none, correction, finetune or both)");
}

const char* learning_name(Learning l) {
  switch (l) {
    case Learning::None:
      return "none";
    case Learning::Correction:
      return "correction";
    case Learning::Finetune:
      return "finetune";
    case Learning::Both:
      return "both";
  }
  return "none";
}

Learning parse_learning_spec(const std::string& spec, FinetuneOptions& o) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t comma = spec.find(',', start);
    parts.push_back(
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const Learning l = parse_learning(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("learning: '" + parts[i] + "' is not key=value");
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      throw std::invalid_argument("learning: " + key + "=" + value + " is not a number");
    }
    const auto count = [&](double lo, double hi) {
      if (!(v >= lo && v <= hi) || v != std::floor(v))
        throw std::invalid_argument("learning: " + key + "=" + value + " (an integer in [" +
                                    std::to_string(int64_t(lo)) + ", " +
                                    std::to_string(int64_t(hi)) + "])");
      return v;
    };
    if (key == "steps")
      o.steps = int(count(1, 1000));
    else if (key == "lr")
      o.lr = v;
    else if (key == "anchor")
      o.anchor = v;
    else if (key == "head_only")
      o.head_only = count(0, 1) != 0;
    else if (key == "buffer")
      o.buffer = size_t(count(1, 4096));
    else if (key == "programs")
      o.max_programs = size_t(count(1, 4096));
    else if (key == "synchronous")
      o.synchronous = count(0, 1) != 0;
    else
      throw std::invalid_argument("learning: unknown key '" + key +
                                  "' (steps, lr, anchor, head_only, buffer, programs, "
                                  "synchronous)");
  }
  o.validate();
  return l;
}

void FinetuneOptions::validate() const {
  if (steps < 1 || steps > 1000)
    throw std::invalid_argument("finetune steps: " + std::to_string(steps) + " (1 to 1000)");
  if (!(lr > 0) || !std::isfinite(lr))
    throw std::invalid_argument("finetune lr: " + std::to_string(lr) + " (> 0 and finite)");
  if (!(anchor >= 0) || !(lr * anchor < 1))
    throw std::invalid_argument("finetune anchor: " + std::to_string(anchor) +
                                " (>= 0 with lr * anchor < 1)");
  if (buffer < 1 || buffer > 4096)
    throw std::invalid_argument("finetune buffer: " + std::to_string(buffer) + " (1 to 4096)");
  if (max_programs < 1 || max_programs > 4096)
    throw std::invalid_argument("finetune max_programs: " + std::to_string(max_programs) +
                                " (1 to 4096)");
}

bool head_parameter(const std::string& name) {
  return name.rfind("regression_layers.", 0) == 0 || name.rfind("predict.", 0) == 0;
}

std::unique_ptr<model::CostModel<float>> copy_weights(const model::CostModel<float>& m) {
  auto c = std::make_unique<model::CostModel<float>>(m);
  for (auto& p : c->params().all()) {
    p.grad.clear();
    p.grad.shrink_to_fit();
  }
  return c;
}

std::unique_ptr<AdaptedModels> finetune(const std::vector<model::CostModel<float>*>& original,
                                        const AdaptedModels* start,
                                        const model::InputScaling* scaling,
                                        const config::Config& training_config, FinetuneBatch batch,
                                        const FinetuneOptions& o, Tape<float>& tape) {
  o.validate();
  if (original.empty()) throw std::invalid_argument("finetune: no model");
  if (start && start->members.size() != original.size())
    throw std::invalid_argument("finetune: the adapted weights have another member count");
  model::scale_features(scaling, batch.features);
  const bool relative = original[0]->config().relative_to_identity;
  if (relative) model::scale_features(scaling, batch.identity);
  const auto& t = training_config.training;
  auto out = std::make_unique<AdaptedModels>();
  for (size_t k = 0; k < original.size(); ++k) {
    const model::CostModel<float>& from = start ? *start->members[k] : *original[k];
    auto m = std::make_unique<model::CostModel<float>>(from);
    std::vector<Parameter<float>*> trained;
    std::vector<const Parameter<float>*> anchors;
    for (auto& p : m->params().all()) {
      const bool encoder = p.name.rfind("encoder.", 0) == 0;
      p.requires_grad = !encoder && (!o.head_only || head_parameter(p.name));
      p.grad.assign(p.value.size(), 0.0f);
      if (p.requires_grad) {
        trained.push_back(&p);
        anchors.push_back(original[k]->params().find(p.name));
      }
    }
    AdamOptions ao;
    ao.lr = o.lr;
    Adam<float> opt(trained, ao, /*decoupled_weight_decay=*/true);
    Rng rng(0);  // eval mode: no dropout draws
    for (int s = 0; s < o.steps; ++s) {
      tape.clear();
      tape.set_training(false);
      tape.set_grad_enabled(true);
      NodeId y = m->forward(tape, batch.trees, batch.features, rng);
      if (relative) {
        const NodeId f0 = m->forward(tape, batch.trees, batch.identity, rng);
        y = model::relative_to_untransformed(tape, y, f0, batch.features.program_of);
      }
      const NodeId loss = train::training_loss(tape, t.loss, y, batch.features, 1.0f,
                                               float(t.rank_weight), float(t.huber_delta));
      const float lv = to_host(tape.value(loss))[0];
      if (!std::isfinite(lv)) {
        tape.clear();
        throw std::invalid_argument("finetune: the loss is not finite");
      }
      opt.zero_grad();
      tape.backward(loss);
      clip_grad_norm(trained, 1.0);
      opt.step();
      const float pull = float(o.lr * o.anchor);
      for (size_t i = 0; i < trained.size(); ++i) {
        std::vector<float>& w = trained[i]->value;
        const std::vector<float>& w0 = anchors[i]->value;
        for (size_t j = 0; j < w.size(); ++j) w[j] -= pull * (w[j] - w0[j]);
      }
    }
    tape.clear();
    for (auto& p : m->params().all()) {
      p.requires_grad = true;
      p.grad.clear();
      p.grad.shrink_to_fit();
    }
    out->members.push_back(std::move(m));
  }
  return out;
}

}  // namespace lcm::serve
