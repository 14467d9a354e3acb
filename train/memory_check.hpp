// The startup check of lcm-train and lcm-pretrain that the configured model, optimizer and one
// batch fit the machine's memory (model/training_memory.hpp), before any data is read.
#pragma once
#include <cstddef>
#include <string>

#include "config/config.hpp"
#include "model/training_memory.hpp"

namespace lcm::train {

/// Bytes of memory available to this process now: MemAvailable of /proc/meminfo (physical
/// memory when it cannot be read), at most the cgroup's memory.max less its memory.current when
/// one is set. 0 when nothing can be read (the check is then skipped).
size_t available_host_memory();

/// Throws std::runtime_error "<tool>: the model and one batch need about <estimate> but only
/// <N> GiB of memory is available (<where>): lower <keys>" when `need` exceeds `available`
/// bytes (0 = unknown: no check). `keys` names the settings that change the estimate.
void require_memory_fits(const std::string& tool, const lcm::model::TrainingMemory& need,
                         size_t available, const std::string& where, const std::string& keys);

/// lcm-train: estimate_training_memory(model.*, data.batch_size) against the available host
/// memory, and on training.device=cuda:N against the device's free memory (parameters,
/// gradients, Adam state and activations live there). Throws as require_memory_fits.
void check_training_memory(const config::Config& c, const std::string& tool = "lcm-train");

/// lcm-pretrain: estimate_pretraining_memory(pretrain.kind, pretrain.batch_size) likewise.
void check_pretraining_memory(const config::Config& c, const std::string& tool = "lcm-pretrain");

}  // namespace lcm::train
