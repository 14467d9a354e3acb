// Learning during search by per-program fine-tuning (docs/tools.md "Learning during search",
// variant "finetune"): a few AdamW steps on a program's observed schedules, from its weights so
// far, pulled toward the checkpoint's weights after every step. serve::Scorer keeps the adapted
// weights per program and runs the steps in a background worker.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "engine/tape.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"

namespace lcm::serve {

/// What observe() learns: nothing, the per-program correction of ln speedup
/// (model/adaptation.hpp), per-program fine-tuned weights, or both (the correction is fitted to
/// the fine-tuned model's answers at the time of each observation).
enum class Learning { None, Correction, Finetune, Both };

/// "none", "correction", "finetune", "both" → Learning; std::invalid_argument otherwise.
Learning parse_learning(const std::string& name);
/// The name parse_learning reads.
const char* learning_name(Learning l);
/// Whether `l` includes the correction / the fine-tuning.
inline bool learns_correction(Learning l) {
  return l == Learning::Correction || l == Learning::Both;
}
inline bool learns_finetune(Learning l) {
  return l == Learning::Finetune || l == Learning::Both;
}

/// The fine-tuning of one program (defaults chosen by bench/simulate_search.py on the valid
/// split, docs/accuracy.md "Learning during search").
struct FinetuneOptions {
  /// AdamW steps after each observation, on the whole replay buffer as one batch ([1, 1000]).
  int steps = 10;
  /// Their learning rate (> 0, finite); Adam's betas and eps are the training defaults.
  double lr = 1e-3;
  /// The anchor: after each step every trained weight moves toward the checkpoint's value,
  /// w ← w − lr·anchor·(w − w_checkpoint) (AdamW's decoupled weight decay with the checkpoint's
  /// weights as its centre, i.e. an L2 penalty anchor/2·‖w − w_checkpoint‖²; ≥ 0, lr·anchor < 1).
  double anchor = 10;
  /// true: only the regression head (regression_layers.*, predict.*) is trained; false: every
  /// parameter outside a pre-trained encoder.
  bool head_only = true;
  /// The replay buffer: the last `buffer` observations of a program ([1, 4096]).
  size_t buffer = 64;
  /// Programs with adapted weights held at once, the least recently used dropped ([1, 4096]).
  /// Each holds a copy of every member's weights (ScorerOptions docstring: the memory bound).
  size_t max_programs = 16;
  /// true: observe() returns after the steps (results reproducible); false: they run in the
  /// background worker and queries use the latest completed weights.
  bool synchronous = false;
  /// Throws std::invalid_argument naming the first field out of range.
  void validate() const;
};

/// One program's adapted weights: a copy of every member of the checkpoint. Immutable once a
/// Scorer publishes it (queries only read it; `members` is mutable because a forward records on
/// a tape).
struct AdaptedModels {
  mutable std::vector<std::unique_ptr<model::CostModel<float>>> members;
  /// Observations of the program these weights were trained through.
  int64_t observations = 0;
};

/// One batch to fine-tune on: the replay buffer's schedules of one program (data::program_batch
/// of its features, unscaled, with bt.speedup the measured speedups > 0) and, for a model
/// relative to the untransformed schedule, that schedule's batch (data::identity_batch).
struct FinetuneBatch {
  data::BatchTrees trees;
  data::BatchTensors features;
  data::BatchTensors identity;  // [1] datapoint; used only by a relative model
};

/// `o.steps` AdamW steps on `batch` starting from `start` (each member trained on its own output
/// with the loss `loss`, rank weight and Huber delta of the checkpoint's training.*), in eval
/// mode (no dropout: deterministic), each step's gradient clipped to norm 1 and followed by the
/// anchor's pull toward `original`'s weights. `original` holds the checkpoint's members and the
/// input scaling (`scaling`, may be nullptr). Returns new weights (the grad buffers dropped);
/// `start` is not changed. Throws std::invalid_argument for a non-finite loss (weights
/// unchanged: the caller keeps `start`) and as the model's forward.
std::unique_ptr<AdaptedModels> finetune(const std::vector<model::CostModel<float>*>& original,
                                        const AdaptedModels* start,
                                        const model::InputScaling* scaling,
                                        const config::Config& training_config, FinetuneBatch batch,
                                        const FinetuneOptions& o, Tape<float>& tape);

/// A copy of `m`'s weights without gradient buffers (what AdaptedModels hold).
std::unique_ptr<model::CostModel<float>> copy_weights(const model::CostModel<float>& m);

/// A learning specification "VARIANT[,key=value...]" (liblcm PredictorOptions::learning,
/// lcm-serve --learning, Python Model(learning=)): VARIANT one of parse_learning's names, keys
/// steps, lr, anchor, head_only (0|1), buffer, programs (max_programs), synchronous (0|1)
/// setting `o`'s fields (the others keep their values). Throws std::invalid_argument naming the
/// bad part (also for options out of range, FinetuneOptions::validate).
Learning parse_learning_spec(const std::string& spec, FinetuneOptions& o);

/// Whether parameter `name` is in the regression head (FinetuneOptions::head_only).
bool head_parameter(const std::string& name);

}  // namespace lcm::serve
