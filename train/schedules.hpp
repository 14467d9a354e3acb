// The learning-rate schedules of a training run, built from training.lr_schedule
// (docs/model-spec.md §6, §11 Q1) for the main optimizer, and the schedule of a pre-trained
// encoder's own optimizer while it is fine-tuned (model-spec §8).
#pragma once
#include <cstdint>
#include <memory>

#include "config/config.hpp"
#include "engine/optim.hpp"

namespace lcm::train {

/// The schedule of training.lr_schedule for `steps_per_epoch` batches per epoch and
/// training.max_epochs epochs (total = max_epochs × max(1, steps_per_epoch) steps):
///   constant             training.lr throughout (stepped per epoch: a no-op)
///   one_cycle_per_epoch  OneCycleLR sized for per-batch stepping but stepped once per epoch
///                        (the reference's behaviour, §11 Q1)
///   one_cycle_per_batch  the same OneCycleLR stepped once per batch
///   warmup_cosine        linear warm-up over round(warmup_pct × total) steps, then cosine decay
///   reduce_on_plateau    lcm::ReduceOnPlateauLr(lr, plateau_factor, plateau_patience), stepped
///                        per epoch; the trainer feeds it the validation select_metric (observe)
/// Throws config::ConfigError when the warm-up takes every step (none left for the decay), naming
/// training.warmup_pct, the step counts and what to change.
std::unique_ptr<lcm::LrSchedule> make_schedule(const config::Config& c, int64_t steps_per_epoch);

/// The schedule of a pre-trained encoder's optimizer (training.fine_tune_lr): OneCycleLR over
/// the fine-tuning epochs (max_epochs − fine_tune_epoch, at least 1) × `steps_per_epoch` when
/// training.lr_schedule is one_cycle_per_epoch (the reference, stepped per epoch), else constant.
std::unique_ptr<lcm::LrSchedule> make_encoder_schedule(const config::Config& c,
                                                       int64_t steps_per_epoch);

}  // namespace lcm::train
