// The pieces of lcm-inspect's logic (internal to data/; the public API is inspect.hpp): the keys
// lcm reads at each level of a record (inspect_keys.cpp), the histogram helpers, and the walk of
// one record's DOM (inspect_walk.cpp) that inspect_file (inspect.cpp) runs per record and the
// reports (inspect_report.cpp) print.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lcm::data {
// inspect.hpp's types (declared here so that inspect.cpp and its pieces stay one-way).
enum class KeyUse;
struct InspectReport;
struct UnknownEntry;
struct RawRecord;
}  // namespace lcm::data

namespace lcm::data::inspect_detail {

using Histogram = std::map<std::string, int64_t>;  // inspect.hpp's Histogram

/// The levels of a record whose keys lcm-inspect counts, in the order the reports list them.
enum class KeyLevel { Top, Annotation, Computation, Schedule, CompEntry, TypedEntry, Count };

/// One level's key histogram in the reports: its titles, the report's member, and the keys lcm
/// reads or ignores there (docs/data-format.md "Program record"; any other key is unknown).
struct KeySection {
  const char* text_title;  // inspect_text: "program_annotation.computations.<c>"
  const char* json_name;   // inspect_json: "computation"
  Histogram InspectReport::*keys;
  bool text_when_empty;  // inspect_text lists the level even when no key was seen
};

/// The section of `level`.
const KeySection& key_section(KeyLevel level);

/// What lcm does with key `k` at `level`; KeyUse::Unknown for a key of no table (and for
/// kOtherKeys).
KeyUse key_use(KeyLevel level, std::string_view k);

/// The key under which a histogram full of kMaxHistogramKeys distinct keys counts the others.
inline constexpr char kOtherKeys[] = "(other keys)";

/// Adds `n` to key `k` of `h`, or to kOtherKeys once `h` holds kMaxHistogramKeys keys.
void add(Histogram& h, std::string_view k, int64_t n = 1);
/// Adds every count of `from` to `into` (add).
void add_all(Histogram& into, const Histogram& from);

/// True for a typed entry's type lcm reads: a tag-vector kind's name (transformations.hpp) or
/// parallelization, tiling, unrolling, shifting, fusion.
bool is_known_type(const std::string& t);

/// The walk of one record: counts into `r` (order-free), examples into `unknown` (in record
/// order). Returns the schedules_list size as count_schedules (prepare.cpp) gives it (-1 when
/// the record is not an object with a schedules_list array).
int64_t walk_record(const RawRecord& rec, InspectReport& r, std::vector<UnknownEntry>& unknown);

}  // namespace lcm::data::inspect_detail
