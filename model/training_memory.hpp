// The memory a training run of lcm-train / lcm-pretrain needs for its model, optimizer and one
// batch, computed from the configured sizes before anything is allocated (docs/tools.md
// "lcm-train", § Memory check), so that a size too large for the machine fails in the first
// second with the estimate and the key to change instead of std::bad_alloc later.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/autoencoder.hpp"
#include "model/cost_model.hpp"

namespace lcm::model {

/// Bytes of one training run's model-side memory (float32).
struct TrainingMemory {
  int64_t parameter_count = 0;  // weights of the model (every parameter tensor)
  size_t parameters = 0;        // their values
  size_t gradients = 0;         // one gradient per weight (the store holds it)
  size_t optimizer_state = 0;   // Adam's two moments per weight
  size_t activations = 0;       // one batch's forward values and their gradients
  size_t total() const { return parameters + gradients + optimizer_state + activations; }
  /// "6.61 GiB (parameters 0.26 GiB, gradients 0.26 GiB, Adam state 0.52 GiB, activations of
  /// one batch 5.57 GiB)".
  std::string str() const;
};

/// Parameters, gradients and Adam's two moments of `parameter_count` float32 weights (the
/// activations left at 0): 16 bytes a weight. lcm-train's startup line on what lies outside
/// training.host_memory_budget uses it with the built model's count.
TrainingMemory model_state_memory(int64_t parameter_count);

/// The cost model's weight count for `mc`, from its layer widths (model-spec §5.2 table; the
/// encoder's, with model.encoder, from its sizes), without allocating the model.
int64_t cost_model_parameter_count(const ModelConfig& mc);

/// The typical datapoint the activation estimate counts: LOOPerSet programs hold 1 to 12
/// computations (median 1) and 3 to 20 loops; a batch is charged 4 computations and 8 loops per
/// datapoint.
constexpr double kEstimateCompsPerDatapoint = 4.0;
constexpr double kEstimateLoopsPerDatapoint = 8.0;

/// Parameters, gradients, Adam state and the activations (with their gradients) of one batch of
/// `batch_size` datapoints of the cost model `mc` (kEstimate*PerDatapoint computations and
/// loops each; per computation: its 910 columns, the tag BiLSTM, every MLP layer's pre- and
/// post-activation and dropout mask; per program: the expression LSTM over 66 steps; per loop:
/// the tree LSTM cells and concat layers).
TrainingMemory estimate_training_memory(const ModelConfig& mc, int64_t batch_size);

/// The same for lcm-pretrain's autoencoder `ac` and `batch_size` samples (computations).
TrainingMemory estimate_pretraining_memory(const AutoencoderConfig& ac, int64_t batch_size);

}  // namespace lcm::model
