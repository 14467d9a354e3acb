// The range of every speedup lcm reports (docs/model-spec.md §4), which both the map from a raw
// score (speedup.hpp) and the calibration map (calibration.hpp) hold to.
#pragma once

namespace lcm::model {

/// The largest |ln speedup| lcm reports: every reported speedup lies in [e^−50, e^50]
/// (≈ 1.9e−22 … 5.2e21), far outside any measured speedup and far inside double and float range.
constexpr double kMaxAbsLogSpeedup = 50;
/// e^−50 and e^50: the smallest and largest speedup (×) lcm reports.
constexpr double kMinReportedSpeedup = 1.9287498479639178e-22;
constexpr double kMaxReportedSpeedup = 5.184705528587072e21;

}  // namespace lcm::model
