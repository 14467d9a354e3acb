// Learning-rate schedules from the configuration (see schedules.hpp).
#include "train/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace lcm::train {

std::unique_ptr<lcm::LrSchedule> make_schedule(const config::Config& c, int64_t steps_per_epoch) {
  using config::LrScheduleKind;
  const auto& t = c.training;
  const int64_t steps = std::max<int64_t>(1, steps_per_epoch);
  const int64_t total = int64_t(t.max_epochs) * steps;
  switch (t.lr_schedule) {
    case LrScheduleKind::Constant:
      return std::make_unique<lcm::ConstantLr>(t.lr);
    case LrScheduleKind::OneCyclePerEpoch:
    case LrScheduleKind::OneCyclePerBatch: {
      lcm::OneCycleOptions o;
      o.max_lr = t.lr;
      o.total_steps =
          total;  // faithful Q1: sized for per-batch stepping even when stepped per epoch
      return std::make_unique<lcm::OneCycleLr>(o);
    }
    case LrScheduleKind::WarmupCosine: {
      const int64_t warmup = int64_t(std::llround(t.warmup_pct * double(total)));
      if (warmup >= total)  // (the range [0, 1) is checked when the key is set)
        throw config::ConfigError(
            "training.warmup_pct=" + config::get_config_value(c, "training.warmup_pct") +
            ": the warm-up takes " + std::to_string(warmup) + " of the " + std::to_string(total) +
            " batch steps (training.max_epochs=" + std::to_string(t.max_epochs) + " x " +
            std::to_string(steps) +
            " batches), leaving none for the cosine decay; lower training.warmup_pct or raise "
            "training.max_epochs");
      return std::make_unique<lcm::WarmupCosineLr>(t.lr, warmup, total);
    }
    case LrScheduleKind::ReduceOnPlateau:
      return std::make_unique<lcm::ReduceOnPlateauLr>(t.lr, t.plateau_factor, t.plateau_patience);
  }
  throw std::logic_error("make_schedule: unhandled training.lr_schedule");
}

std::unique_ptr<lcm::LrSchedule> make_encoder_schedule(const config::Config& c,
                                                       int64_t steps_per_epoch) {
  const auto& t = c.training;
  if (t.lr_schedule != config::LrScheduleKind::OneCyclePerEpoch)
    return std::make_unique<lcm::ConstantLr>(t.fine_tune_lr);
  const int64_t ft_epochs = std::max<int64_t>(1, int64_t(t.max_epochs) - t.fine_tune_epoch);
  lcm::OneCycleOptions o;
  o.max_lr = t.fine_tune_lr;
  o.total_steps = ft_epochs * std::max<int64_t>(1, steps_per_epoch);
  return std::make_unique<lcm::OneCycleLr>(o);
}

}  // namespace lcm::train
