// SkipLog: counting and reporting of skipped lines, programs and schedules.
#include "data/skips.hpp"

#include <cstdio>
#include <sstream>

#include "util/log.hpp"

namespace lcm::data {

static std::string describe(const SkipEvent& e) {
  std::ostringstream s;
  s << "skip " << e.level << " (" << e.reason << "): " << (e.file.empty() ? "?" : e.file);
  if (e.line > 0) s << ":" << e.line;
  if (!e.program.empty()) s << " program " << e.program;
  if (e.schedule >= 0) s << " schedule " << e.schedule;
  if (!e.detail.empty()) s << ": " << e.detail;
  return s.str();
}

std::string count_of(int64_t n, const std::string& noun, const std::string& plural) {
  const bool one = n == 1 || n == -1;
  return std::to_string(n) + " " + (one ? noun : plural.empty() ? noun + "s" : plural);
}

bool strict_exempt(const std::string& level, const std::string& reason) {
  if (level == "note" || level == "footprint" || level == "fold") return true;
  return level == "schedule" &&
         (reason == "no_execution_times" || reason == "negative_time" || reason == "zero_time");
}

void SkipLog::add(const SkipEvent& e) {
  // Notes record something odd about data that is kept, and policy drops (small footprint
  // groups, failed runs) are not malformed input: strict mode stops only on the rest.
  if (strict_ && !strict_exempt(e.level, e.reason)) throw DataError("data.strict: " + describe(e));
  std::lock_guard<std::mutex> lk(mu_);
  ++counts_[e.level + "/" + e.reason];
  if (events_.size() < 1000) events_.push_back(e);
  // Notes (kept data) have their own budget: many of them never hide the first dropped data.
  const bool note = e.level == "note";
  int64_t& printed = note ? printed_notes_ : printed_;
  if (printed < limit_) {
    ++printed;
    log_line("lcm: " + describe(e));
  } else if (limit_ > 0 && printed == limit_) {
    // said once, when a skip is actually left unprinted (not after exactly `limit_` skips)
    ++printed;
    log_line(note ? "lcm: (further notes are counted, not printed)"
                  : "lcm: (further skips are counted, not printed)");
  }
}

int64_t SkipLog::count(const std::string& level, const std::string& reason) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = counts_.find(level + "/" + reason);
  return it == counts_.end() ? 0 : it->second;
}

int64_t SkipLog::total(const std::string& level) const {
  std::lock_guard<std::mutex> lk(mu_);
  int64_t n = 0;
  for (auto& [k, v] : counts_)
    if (k.compare(0, level.size() + 1, level + "/") == 0) n += v;
  return n;
}

std::map<std::string, int64_t> SkipLog::counts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counts_;
}

std::vector<SkipEvent> SkipLog::events() const {
  std::lock_guard<std::mutex> lk(mu_);
  return events_;
}

void SkipLog::add_count(const std::string& level, const std::string& reason, int64_t n) {
  if (n <= 0) return;
  if (strict_ && !strict_exempt(level, reason))
    throw DataError("data.strict: " + std::to_string(n) + " skip(s) " + level + "/" + reason);
  std::lock_guard<std::mutex> lk(mu_);
  counts_[level + "/" + reason] += n;
}

void SkipLog::merge(const SkipLog& o) {
  auto c = o.counts();
  auto ev = o.events();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [k, v] : c) counts_[k] += v;
  for (auto& e : ev)
    if (events_.size() < 1000) events_.push_back(e);
}

std::string SkipLog::summary() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::ostringstream s;
  for (auto& [k, v] : counts_) s << "  " << k << ": " << v << "\n";
  return s.str();
}

}  // namespace lcm::data
