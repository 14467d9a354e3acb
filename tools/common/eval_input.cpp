// The checkpoint and programs of lcm-eval and lcm-predict (eval_input.hpp).
#include "tools/common/eval_input.hpp"

#include <cstdio>

#include "train/splits.hpp"
#include "train/startup_checks.hpp"

namespace lcm::tools {

ScoredInput score_eval_input(const lcm::config::Config& c, const char* tool, bool all_schedules,
                             bool progress, bool bf16_weights) {
  ScoredInput s{lcm::train::Predictor(c), {}, {}};
  if (bf16_weights) s.predictor.use_bf16_weights();
  for (const std::string& n : s.predictor.notes())
    std::fprintf(stderr, "%s: %s\n", tool, n.c_str());
  s.split = lcm::train::prepare_eval_input(s.predictor.config(), all_schedules, progress);
  // what was read and skipped, the same line in lcm-eval and lcm-predict
  std::fprintf(stderr, "%s\n",
               lcm::train::skip_summary_line(tool, c.eval_input(), s.split.counts,
                                             int64_t(s.split.dataset.programs.size()))
                   .c_str());
  s.predictions = s.predictor.predict(s.split.dataset);
  return s;
}

}  // namespace lcm::tools
