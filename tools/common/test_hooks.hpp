// The test hooks of lcm-train and lcm-pretrain (train/test_hooks.hpp) as the tests start the
// tools: from environment variables, read here and nowhere in the library.
#pragma once
#include "train/test_hooks.hpp"

namespace lcm::tools {

/// The hooks the environment asks for: LCM_TEST_PAUSE_AT=P1,P2 (pause_at),
/// LCM_INTERRUPT_AFTER_STEPS=N (interrupt_after_steps), LCM_INTERRUPT_TWICE=1
/// (interrupt_twice), LCM_TEST_FAIL_RANK=R[:N] (fail_rank R, fail_after_steps N, default 1).
/// Unset variables leave their fields off; numbers are read as atoll reads them.
lcm::train::TestHooks test_hooks_from_environment();

}  // namespace lcm::tools
