// The map from a cost model's raw output to the reported speedup (see speedup.hpp).
#include "model/speedup.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lcm::model {

double speedup_from_score(double score, bool log_output) {
  if (!std::isfinite(score)) return std::numeric_limits<double>::quiet_NaN();
  if (log_output) return std::exp(std::clamp(score, -kMaxAbsLogSpeedup, kMaxAbsLogSpeedup));
  const double k = kDirectSpeedupKnee;
  const double v = score >= k ? score : k * k / (2 * k - score);
  return std::clamp(v, kMinReportedSpeedup, kMaxReportedSpeedup);
}

double reported_speedup(double score, bool log_output, const Calibration* cal) {
  if (!std::isfinite(score)) return std::numeric_limits<double>::quiet_NaN();
  if (cal && cal->active()) return cal->apply(score);
  return speedup_from_score(score, log_output);
}

}  // namespace lcm::model
