// Test hooks of the training tools: points where a test makes a run stop, pause or fail at a
// known step. Fields of the run's options (TrainOptions::hooks, PretrainOptions::hooks), off by
// default; the tools fill them from environment variables (tools/common/test_hooks.hpp), the
// library never reads the environment for them.
#pragma once
#include <cstdint>
#include <string>

namespace lcm::train {

/// What a test asks of a run; every field off by default.
struct TestHooks {
  /// Points where the process stops itself with SIGSTOP (pause()), comma-separated
  /// (LCM_TEST_PAUSE_AT). Empty: none.
  std::string pause_at;
  /// > 0: a stop request (as Ctrl-C) right after this optimizer step of each trainer call
  /// (LCM_INTERRUPT_AFTER_STEPS); 0: none.
  int64_t interrupt_after_steps = 0;
  /// With interrupt_after_steps: the stop arrives as two real SIGINTs, the second during the
  /// graceful shutdown the first started (LCM_INTERRUPT_TWICE=1).
  bool interrupt_twice = false;
  /// ≥ 0: the rank of this number throws std::runtime_error right after its optimizer step
  /// fail_after_steps, as a failing rank would (LCM_TEST_FAIL_RANK=R:N); −1: none.
  int fail_rank = -1;
  int64_t fail_after_steps = 1;

  /// When pause_at names `point` (points: "claimed" after claim_experiment, "moving" after the
  /// first file of a move, "step" after the first optimizer step, "checkpoint" between
  /// `last_model` and `last_optimizer`, "best" after `best` before `last`), the process stops
  /// itself with SIGSTOP there, so that a test can send it SIGINT, SIGKILL or SIGCONT at a known
  /// step (tests/test_run_rule.cpp). Each point stops once per process. No-op otherwise.
  void pause(const char* point) const;

  /// The hooks of optimizer step `steps` (1-based, counted per trainer call) of rank `rank`:
  /// the interrupt (stop_requested(), interrupt.hpp) and the injected fault. Throws
  /// std::runtime_error "injected fault on rank R after step N (LCM_TEST_FAIL_RANK)".
  void after_step(int64_t steps, int rank) const;
};

}  // namespace lcm::train
