// The salts that derive each random stream of a run from training.seed, so that the streams are
// independent of each other and the same seed gives the same run (dropout masks, the
// pre-training split and shuffles). Changing one changes every result that depends on it.
#pragma once
#include <cstdint>

namespace lcm::train {

/// Dropout masks of the cost model and the autoencoders: Rng(training.seed ^ kDropoutSalt).
constexpr uint64_t kDropoutSalt = 0xD50F7A11u;
/// lcm-pretrain: which programs are held out for validation.
constexpr uint64_t kPretrainSplitSalt = 0x5EEDF00Du;
/// lcm-pretrain: the order of the training samples in each epoch.
constexpr uint64_t kPretrainShuffleSalt = 0x5A3F1Eu;
/// lcm-pretrain, objectives masked and contrastive: the masks of the training batches.
constexpr uint64_t kPretrainMaskSalt = 0x3A5C0FFEu;
/// lcm-pretrain: the validation masks, Rng(seed ^ kPretrainMaskSalt ^ kPretrainValidSalt), drawn
/// again every epoch.
constexpr uint64_t kPretrainValidSalt = 0x7A11DA7Eu;

}  // namespace lcm::train
