// sched_str dialects (schedule_forms.hpp): recognising a dialect from its first characters.
#include <cctype>

#include "data/schedule_forms.hpp"

namespace lcm::data {

const char* sched_str_dialect_name(SchedStrDialect d) {
  switch (d) {
    case SchedStrDialect::Empty:
      return "empty";
    case SchedStrDialect::PerComputation:
      return "per_computation";
    case SchedStrDialect::PerComputationFused:
      return "per_computation_fused";
    case SchedStrDialect::Looper:
      return "looper";
    case SchedStrDialect::TiraLib:
      return "tiralib";
    case SchedStrDialect::Unknown:
      return "unknown";
  }
  return "unknown";
}

SchedStrDialect sched_str_dialect(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  s.remove_prefix(b);
  if (s.empty()) return SchedStrDialect::Empty;
  // TiraLib names the computations of every term with comps=[...] and separates terms by '|'.
  if (s.find("comps=") != std::string_view::npos || s.find('|') != std::string_view::npos)
    return SchedStrDialect::TiraLib;
  if (s[0] == '{') return SchedStrDialect::PerComputation;
  // A term: capital letters and digits, then '(' ("F(", "T2(", "M(").
  size_t i = 0;
  while (i < s.size() && (std::isupper(static_cast<unsigned char>(s[i])) ||
                          std::isdigit(static_cast<unsigned char>(s[i]))))
    ++i;
  if (i == 0 || i + 1 >= s.size() || s[i] != '(') return SchedStrDialect::Unknown;
  // Looper names computations {Cn}; the per-computation form's fusion prefix names them plainly.
  if (s[i + 1] == '{') return SchedStrDialect::Looper;
  if (s.substr(0, 2) == "F(") return SchedStrDialect::PerComputationFused;
  return SchedStrDialect::Unknown;
}

}  // namespace lcm::data

namespace lcm::data {
// Placeholders until the dialect parsers land: every sched_str is unreadable.
NormalSchedule parse_sched_str(std::string_view s, const Program& p, const LoopTree*) {
  NormalSchedule n;
  n.comps.resize(p.computations.size());
  if (sched_str_dialect(s) == SchedStrDialect::Empty) return n;
  n.problem = "bad_sched_str";
  n.detail = "not parsed yet";
  return n;
}
ScheduleDifference compare_schedules(const Program&, const NormalSchedule&, const NormalSchedule&) {
  return {};
}
}  // namespace lcm::data
