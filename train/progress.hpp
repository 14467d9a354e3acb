// Wall-clock timing and the one-line progress bar of long loops (lcm-train, lcm-pretrain): drawn
// on stderr only when it is a terminal, at most five times a second, erased before results print.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lcm::train {

using Clock = std::chrono::steady_clock;

/// Seconds elapsed since `t`.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// "\r  <label> [=====     ] done/total <metric> <value>" on stderr while the loop runs.
class ProgressBar {
 public:
  /// `on`: the caller wants progress (not --quiet); the bar is drawn only when stderr is a tty.
  explicit ProgressBar(bool on) : on_(on && ::isatty(2)) {}
  /// Redraws the bar (throttled to 5 Hz): `label` such as "epoch 3", `done` of `total` steps,
  /// then "<metric> <value>" with `precision` decimals.
  void update(const std::string& label, int64_t done, int64_t total, const char* metric,
              double value, int precision = 2) {
    if (!on_ || seconds_since(last_) < 0.2) return;
    last_ = Clock::now();
    const int width = 30;
    const int fill = total ? int(width * done / total) : width;
    std::fprintf(stderr, "\r  %s [%s%s] %lld/%lld %s %.*f", label.c_str(),
                 std::string(size_t(fill), '=').c_str(),
                 std::string(size_t(width - fill), ' ').c_str(), (long long)done, (long long)total,
                 metric, precision, value);
    std::fflush(stderr);
    shown_ = true;
  }
  /// Erases the bar (no-op when nothing was drawn).
  void clear() {
    if (shown_) std::fprintf(stderr, "\r%78s\r", "");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
  Clock::time_point last_ = Clock::now();
};

}  // namespace lcm::train
