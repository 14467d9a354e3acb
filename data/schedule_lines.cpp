// One schedule per JSONL line (schedule_lines.hpp): the top-level key scan of a line and the merge
// of a group of such lines into one program record.
#include "data/schedule_lines.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "data/record_fields.hpp"

namespace lcm::data {

namespace {

constexpr size_t npos = std::string::npos;

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t skip_ws(const char* s, size_t i, size_t n) {
  while (i < n && is_ws(s[i])) ++i;
  return i;
}

/// The index just past the string whose opening quote is s[i]; npos when it is not closed
/// before n. A quote preceded by an odd run of backslashes is escaped.
size_t skip_string(const char* s, size_t i, size_t n) {
  const size_t start = i + 1;
  for (size_t p = start; p < n;) {
    const char* q = static_cast<const char*>(std::memchr(s + p, '"', n - p));
    if (!q) return npos;
    const size_t k = size_t(q - s);
    size_t b = k;
    while (b > start && s[b - 1] == '\\') --b;
    if ((k - b) % 2 == 0) return k + 1;
    p = k + 1;
  }
  return npos;
}

/// The index just past the JSON value starting at s[i] (a string, an object or array by bracket
/// depth with its strings skipped whole, or a scalar up to the next delimiter); npos when it does
/// not end before n. Not a validator: brackets of the two kinds are not matched against each
/// other (RapidJSON validates a line before its spans are used).
size_t skip_value(const char* s, size_t i, size_t n) {
  if (i >= n) return npos;
  const char c = s[i];
  if (c == '"') return skip_string(s, i, n);
  if (c == '{' || c == '[') {
    size_t depth = 0;
    for (size_t p = i; p < n;) {
      const char x = s[p];
      if (x == '"') {
        p = skip_string(s, p, n);
        if (p == npos) return npos;
        continue;
      }
      if (x == '{' || x == '[') {
        ++depth;
      } else if (x == '}' || x == ']') {
        if (--depth == 0) return p + 1;
      }
      ++p;
    }
    return npos;
  }
  if (c == ',' || c == ':' || c == '}' || c == ']') return npos;
  size_t p = i;
  while (p < n && !is_ws(s[p]) && s[p] != ',' && s[p] != '}' && s[p] != ']') ++p;
  return p;
}

/// One top-level member: the key as written (without its quotes) and the byte spans of the
/// member (`"key": value`) and of its value.
struct Member {
  std::string_view key;
  size_t begin = 0;        // the key's opening quote
  size_t value_begin = 0;  // the value's first byte
  size_t end = 0;          // just past the value
};

/// Walks the members of the top-level object of s[0, n): next() gives each key with its value's
/// start; the value is skipped by the following next() (or by end_value()). Iterative.
class MemberScan {
 public:
  MemberScan(const char* s, size_t n) : s_(s), n_(n) {
    pos_ = skip_ws(s, 0, n);
    if (pos_ < n && s[pos_] == '{')
      ++pos_;
    else
      bad_ = true;
  }
  /// The next member into m (its end still unknown); false at the object's end or on a syntax
  /// problem (bad()).
  bool next(Member& m) {
    if (bad_ || closed_) return false;
    if (pending_ && !end_value(m)) return false;
    pos_ = skip_ws(s_, pos_, n_);
    if (pos_ >= n_) return fail();
    if (s_[pos_] == '}') {
      closed_ = true;
      end_ = pos_ + 1;
      return false;
    }
    if (!first_) {
      if (s_[pos_] != ',') return fail();
      pos_ = skip_ws(s_, pos_ + 1, n_);
    }
    first_ = false;
    if (pos_ >= n_ || s_[pos_] != '"') return fail();
    const size_t k = skip_string(s_, pos_, n_);
    if (k == npos) return fail();
    m.begin = pos_;
    m.key = std::string_view(s_ + pos_ + 1, k - pos_ - 2);
    pos_ = skip_ws(s_, k, n_);
    if (pos_ >= n_ || s_[pos_] != ':') return fail();
    pos_ = skip_ws(s_, pos_ + 1, n_);
    m.value_begin = pos_;
    pending_ = true;
    return true;
  }
  /// Skips the value of the member last given by next(), setting m.end; false on a problem.
  bool end_value(Member& m) {
    if (!pending_) return !bad_;
    pending_ = false;
    const size_t e = skip_value(s_, pos_, n_);
    if (e == npos) return fail();
    m.end = pos_ = e;
    return true;
  }
  bool bad() const { return bad_; }
  /// Just past the closing brace, once next() has returned false without bad().
  size_t end() const { return end_; }

 private:
  bool fail() {
    bad_ = true;
    return false;
  }
  const char* s_;
  size_t n_;
  size_t pos_ = 0, end_ = 0;
  bool bad_ = false, closed_ = false, first_ = true, pending_ = false;
};

bool is_schedule_field(std::string_view k) {
  return k == "execution_times" || k == "sched_str" || k == "fusions" || k == "tree_structure" ||
         k == "transformations_list";
}
bool is_index_key(std::string_view k) {
  return k == "schedule_index" || k == "schedule_id";
}

/// The number of entries of the array starting at s[i], counted up to 2 (2 = two or more); -1
/// when s[i] is not '[' or the first entry does not end.
int array_entries_upto_2(const char* s, size_t i, size_t n) {
  if (i >= n || s[i] != '[') return -1;
  size_t p = skip_ws(s, i + 1, n);
  if (p < n && s[p] == ']') return 0;
  p = skip_value(s, p, n);
  if (p == npos) return -1;
  p = skip_ws(s, p, n);
  return p < n && s[p] == ',' ? 2 : 1;
}

}  // namespace

LineSniff sniff_schedule_line(const char* text, size_t n) {
  LineSniff out;
  const bool cut_by_limit = n > kScheduleSniffBytes;
  n = std::min(n, kScheduleSniffBytes);
  MemberScan scan(text, n);
  bool marker = false, schedule_field = false, schedules_list = false, named = false;
  Member m;
  while (scan.next(m)) {
    const std::string_view k = m.key;
    if (k == "program_name") {
      if (!named && m.value_begin < n && text[m.value_begin] == '"') {
        const size_t e = skip_string(text, m.value_begin, n);
        if (e != npos) out.name.assign(text + m.value_begin + 1, e - m.value_begin - 2);
      }
      named = true;
    } else if (k == "schedule" || is_index_key(k)) {
      marker = true;
    } else if (k == "schedules_list") {
      schedules_list = true;
      if (!marker && array_entries_upto_2(text, m.value_begin, n) == 2) break;  // whole program
    } else if (is_schedule_field(k)) {
      schedule_field = true;
    }
    if (marker && named) break;
  }
  out.single_schedule = marker || (schedule_field && !schedules_list);
  out.malformed = scan.bad() && !cut_by_limit && !out.single_schedule;
  if (!out.single_schedule && !out.malformed) out.name.clear();
  return out;
}

namespace {

/// One line of a group and what its scan found.
struct LineParts {
  const std::string* text = nullptr;
  int64_t line = 0;
  bool ok = false;              // valid JSON object whose members were scanned
  std::vector<Member> members;  // every top-level member, in order
  const Member* annotation = nullptr;
  const Member* initial_time = nullptr;   // initial_execution_time
  const Member* index = nullptr;          // schedule_index, else schedule_id
  size_t sched_begin = 0, sched_end = 0;  // shapes a, b: the schedule's text
  bool top_level_schedule = false;        // shape c: the schedule is the other members
};

/// A schedule kept for the merge, with its sort key.
struct Entry {
  const LineParts* parts;
  int64_t index;  // -1 without one
};

/// The number written at s[b, e) as a JSON number or a numeric string; false when it is neither.
bool number_value(const char* s, size_t b, size_t e, double& out) {
  if (e > b + 1 && s[b] == '"' && s[e - 1] == '"') ++b, --e;
  std::string t(s + b, e - b);
  if (t.empty() || t.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

/// True when the values at a[ab, ae) and b[bb, be) are the same time: the same bytes, or the same
/// number however written (2, 2.0, "2").
bool same_time(const std::string& a, size_t ab, size_t ae, const std::string& b, size_t bb,
               size_t be) {
  if (std::string_view(a).substr(ab, ae - ab) == std::string_view(b).substr(bb, be - bb))
    return true;
  double x = 0, y = 0;
  return number_value(a.c_str(), ab, ae, x) && number_value(b.c_str(), bb, be, y) && x == y;
}

/// A non-negative integer written as a JSON number or a numeric string ("3", 3, 3.0, "4");
/// false otherwise.
bool index_value(const char* s, size_t b, size_t e, int64_t& out) {
  if (e > b + 1 && s[b] == '"' && s[e - 1] == '"') ++b, --e;
  std::string t(s + b, e - b);
  if (t.empty() || t.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(d) || d < 0 || d != std::floor(d) || d > 9.0e15)
    return false;
  out = int64_t(d);
  return true;
}

}  // namespace

bool merge_schedule_lines(const RawRecord& group, SkipLog& log, RawRecord& merged) {
  const size_t n_lines = 1 + group.more_schedule_lines.size();
  std::vector<LineParts> lines(n_lines);
  std::string name;  // for the skips: the program line's name, else the first line's sniffed one
  auto skip = [&](const char* level, const char* reason, int64_t line, const std::string& detail,
                  int64_t schedule = -1) {
    SkipEvent e;
    e.level = level;
    e.reason = reason;
    e.file = group.file;
    e.line = line;
    e.program = name;
    e.schedule = schedule;
    e.detail = detail;
    log.add(e);
  };
  name = group.name_hint.empty() ? sniff_program_name(group.json) : group.name_hint;

  rapidjson::Reader reader;
  for (size_t i = 0; i < n_lines; ++i) {
    LineParts& L = lines[i];
    L.text = i == 0 ? &group.json : &group.more_schedule_lines[i - 1];
    L.line = i == 0 ? group.line
                    : (i - 1 < group.more_schedule_line_numbers.size()
                           ? group.more_schedule_line_numbers[i - 1]
                           : group.line);
    const char* s = L.text->c_str();
    const size_t n = L.text->size();
    // Validate the whole line (iterative: any nesting is safe), then take its spans.
    rapidjson::StringStream ss(s);
    rapidjson::BaseReaderHandler<> null_handler;
    const rapidjson::ParseResult r = reader.Parse<rapidjson::kParseIterativeFlag>(ss, null_handler);
    if (r.IsError()) {
      skip("line", "malformed_json", L.line,
           std::string(rapidjson::GetParseError_En(r.Code())) + " at byte " +
               std::to_string(r.Offset()) + " of the line (one schedule of the program)");
      continue;
    }
    MemberScan scan(s, n);
    if (scan.bad()) {
      skip("line", "not_an_object", L.line, "a line of one schedule that is not a JSON object");
      continue;
    }
    Member m;
    while (scan.next(m)) {
      if (!scan.end_value(m)) break;
      L.members.push_back(m);
    }
    if (scan.bad() || skip_ws(s, scan.end(), n) != n) {  // e.g. a NUL byte the parse stopped at
      skip("line", "malformed_json", L.line,
           "content after the JSON object at byte " + std::to_string(scan.end()) + " of the line");
      L.members.clear();
      continue;
    }
    // The schedule and the keys that place it.
    const Member *sched = nullptr, *list = nullptr, *sched_index = nullptr, *sched_id = nullptr;
    std::string problem;
    for (const Member& x : L.members) {
      const Member** slot = x.key == "schedule"         ? &sched
                            : x.key == "schedules_list" ? &list
                            : x.key == "schedule_index" ? &sched_index
                            : x.key == "schedule_id"    ? &sched_id
                                                        : nullptr;
      if (x.key == "program_annotation" && !L.annotation) L.annotation = &x;
      if (x.key == "initial_execution_time" && !L.initial_time) L.initial_time = &x;
      if (!slot) continue;
      if (*slot && problem.empty()) problem = "key \"" + std::string(x.key) + "\" appears twice";
      *slot = &x;
    }
    L.index = sched_index ? sched_index : sched_id;
    if (problem.empty() && sched && list)
      problem = "both a \"schedule\" and a \"schedules_list\" on one line";
    if (problem.empty() && sched) {
      L.sched_begin = sched->value_begin;
      L.sched_end = sched->end;
    } else if (problem.empty() && list) {
      const int k = array_entries_upto_2(s, list->value_begin, n);
      if (k != 1) {
        problem = k < 0 ? "schedules_list is not an array"
                        : "schedules_list of a one-schedule line holds " +
                              std::string(k == 0 ? "no entry" : "more than one entry");
      } else {
        L.sched_begin = skip_ws(s, list->value_begin + 1, n);
        L.sched_end = skip_value(s, L.sched_begin, n);
      }
    } else if (problem.empty()) {
      L.top_level_schedule = true;
    }
    L.ok = true;  // its program fields are usable even when its schedule is not
    if (!problem.empty()) {
      L.sched_end = L.sched_begin = 0;
      L.top_level_schedule = false;
      skip("schedule", "bad_schedule_line", L.line, problem);
    }
  }

  const LineParts* prog = nullptr;
  for (const LineParts& L : lines)
    if (L.ok) {
      prog = &L;
      break;
    }
  if (!prog) return false;
  {
    const std::string& t = *prog->text;
    for (const Member& x : prog->members)
      if (x.key == "program_name" && x.end > x.value_begin && t[x.value_begin] == '"') {
        name.assign(t, x.value_begin + 1, x.end - x.value_begin - 2);
        break;
      }
  }

  // The schedules to keep, then their order.
  std::vector<Entry> entries;
  entries.reserve(n_lines);
  bool any_index = false;
  for (const LineParts& L : lines) any_index = any_index || (L.ok && L.index);
  const std::string_view ann =
      prog->annotation ? std::string_view(*prog->text)
                             .substr(prog->annotation->value_begin,
                                     prog->annotation->end - prog->annotation->value_begin)
                       : std::string_view();
  for (const LineParts& L : lines) {
    if (!L.ok || (!L.top_level_schedule && L.sched_end <= L.sched_begin)) continue;
    if (&L != prog && L.annotation && prog->annotation) {
      const std::string_view a = std::string_view(*L.text).substr(
          L.annotation->value_begin, L.annotation->end - L.annotation->value_begin);
      if (a != ann) {
        skip("schedule", "program_annotation_differs", L.line,
             "its program_annotation differs from that of line " + std::to_string(prog->line) +
                 " (the program's); the schedule is dropped");
        continue;
      }
    }
    // one program has one initial_execution_time, the numerator of every speedup: a line that
    // gives another is not a schedule of this program as read (a line without one is)
    if (&L != prog && L.initial_time) {
      const Member* pt = prog->initial_time;
      if (!pt || !same_time(*L.text, L.initial_time->value_begin, L.initial_time->end, *prog->text,
                            pt->value_begin, pt->end)) {
        skip("schedule", "initial_execution_time_differs", L.line,
             "its initial_execution_time " +
                 L.text->substr(
                     L.initial_time->value_begin,
                     std::min<size_t>(L.initial_time->end - L.initial_time->value_begin, 40)) +
                 (pt ? " differs from " +
                           prog->text->substr(pt->value_begin,
                                              std::min<size_t>(pt->end - pt->value_begin, 40)) +
                           ", that of line " + std::to_string(prog->line) + " (the program's)"
                     : " is not given by line " + std::to_string(prog->line) + " (the program's)") +
                 "; the schedule is dropped");
        continue;
      }
    }
    int64_t idx = -1;
    if (any_index) {
      if (!L.index) {
        skip("schedule", "bad_schedule_index", L.line,
             "no schedule_index (or schedule_id) where other lines of the program have one");
        continue;
      }
      if (!index_value(L.text->c_str(), L.index->value_begin, L.index->end, idx)) {
        skip("schedule", "bad_schedule_index", L.line,
             std::string(L.index->key) + " " +
                 L.text->substr(L.index->value_begin,
                                std::min<size_t>(L.index->end - L.index->value_begin, 40)) +
                 " is not a non-negative integer");
        continue;
      }
    }
    entries.push_back({&L, idx});
  }
  if (any_index) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.index < b.index; });
    std::vector<Entry> unique;
    unique.reserve(entries.size());
    for (const Entry& e : entries) {
      if (!unique.empty() && unique.back().index == e.index) {
        // the stable sort keeps line order among equal indices: the earlier line stays
        skip("schedule", "duplicate_schedule_index", e.parts->line,
             "schedule_index " + std::to_string(e.index) + " is already that of line " +
                 std::to_string(unique.back().parts->line) + "; this schedule is dropped",
             e.index);
        continue;
      }
      unique.push_back(e);
    }
    entries.swap(unique);
  }

  // The record: the program line's program fields, then the schedules.
  std::string& out = merged.json;
  out.clear();
  size_t total = 32;
  for (const LineParts& L : lines) total += L.text->size();
  out.reserve(total);
  out += '{';
  bool first = true;
  const std::string& pt = *prog->text;
  for (const Member& x : prog->members) {
    if (x.key == "schedules_list" || !is_record_key(std::string(x.key))) continue;
    if (!first) out += ',';
    out.append(pt, x.begin, x.end - x.begin);
    first = false;
  }
  if (!first) out += ',';
  out += "\"schedules_list\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    const LineParts& L = *entries[i].parts;
    const std::string& t = *L.text;
    if (i) out += ',';
    if (!L.top_level_schedule) {
      out.append(t, L.sched_begin, L.sched_end - L.sched_begin);
      continue;
    }
    out += '{';
    bool f = true;
    for (const Member& x : L.members) {
      if (is_index_key(x.key) || is_record_key(std::string(x.key))) continue;
      if (!f) out += ',';
      out.append(t, x.begin, x.end - x.begin);
      f = false;
    }
    out += '}';
  }
  out += "]}";
  merged.file = group.file;
  merged.line = group.line;
  merged.name_hint = group.name_hint;
  merged.schedule_line = false;
  merged.more_schedule_lines.clear();
  merged.more_schedule_line_numbers.clear();
  return true;
}

}  // namespace lcm::data
