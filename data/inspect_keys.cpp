// The keys lcm reads at each level of a record, as lcm-inspect reports them (inspect_internal.hpp),
// and the histogram helpers of the reports.
#include <string>
#include <string_view>

#include "data/inspect.hpp"
#include "data/inspect_internal.hpp"
#include "data/json_fields.hpp"
#include "util/name_table.hpp"

namespace lcm::data {
namespace inspect_detail {
namespace {

// ---- the keys lcm reads, per level (docs/data-format.md "Program record") ----
struct KnownKey {
  const char* key;
  KeyUse use;
};
const KnownKey kTopKeys[] = {
    {"program_name", KeyUse::Read},
    {"program_annotation", KeyUse::Read},
    {"schedules_list", KeyUse::Read},
    {"initial_execution_time", KeyUse::Read},
    // one schedule per line (docs/data-format.md "One schedule per line")
    {"schedule", KeyUse::Read},
    {"schedule_index", KeyUse::Read},
    {"schedule_id", KeyUse::Read},
    {"execution_times", KeyUse::Read},
    {"sched_str", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
    {"fusions", KeyUse::Read},
    {"tree_structure", KeyUse::Read},
    {"node_name", KeyUse::Ignored},
    {"filename", KeyUse::Ignored},
    {"parameters", KeyUse::Ignored},
    {"exploration_trace", KeyUse::Ignored},
    {"search_time", KeyUse::Ignored},
    {"best_schedule", KeyUse::Ignored},
};
const KnownKey kAnnotationKeys[] = {
    {"iterators", KeyUse::Read},
    {"computations", KeyUse::Read},
    {"memory_size", KeyUse::Ignored},
    {"data_type_size", KeyUse::Ignored},
    {"number_of_additions", KeyUse::Ignored},
    {"buffers", KeyUse::Ignored},
};
// The operation counts and data_type_size are in the real sample's computations; lcm derives
// its features from the expression tree and the accesses instead.
const KnownKey kComputationKeys[] = {
    {"absolute_order", KeyUse::Read},
    {"iterators", KeyUse::Read},
    {"comp_is_reduction", KeyUse::Read},
    {"write_access_relation", KeyUse::Read},
    {"write_buffer_id", KeyUse::Read},
    {"data_type", KeyUse::Read},
    {"accesses", KeyUse::Read},
    {"expression_representation", KeyUse::Read},
    {"data_type_size", KeyUse::Ignored},
    {"number_of_additions", KeyUse::Ignored},
    {"number_of_subtraction", KeyUse::Ignored},
    {"number_of_multiplication", KeyUse::Ignored},
    {"number_of_division", KeyUse::Ignored},
};
// A schedule-level transformations_list is the typed form of data.schedule_source
// (schedule_forms.hpp).
const KnownKey kScheduleKeys[] = {
    {"<computation>", KeyUse::Read},
    {"execution_times", KeyUse::Read},
    {"fusions", KeyUse::Read},
    {"tree_structure", KeyUse::Read},
    {"sched_str", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
    {"legality_check", KeyUse::Ignored},
    {"exploration_method", KeyUse::Ignored},
    {"unfuse_iterators", KeyUse::Ignored},
};
const KnownKey kCompEntryKeys[] = {
    {"parallelized_dim", KeyUse::Read},     {"tiling", KeyUse::Read},
    {"unrolling_factor", KeyUse::Read},     {"shiftings", KeyUse::Read},
    {"transformations_list", KeyUse::Read},
};
const KnownKey kTypedEntryKeys[] = {
    {"type", KeyUse::Read},         {"loop_levels", KeyUse::Read}, {"parameters", KeyUse::Read},
    {"computations", KeyUse::Read}, {"comps", KeyUse::Read},
};

/// One level's known keys.
struct KeyTable {
  const KnownKey* keys;
  size_t n;
};
template <size_t N>
constexpr KeyTable table(const KnownKey (&t)[N]) {
  return {t, N};
}

struct Level {
  KeySection section;
  KeyTable known;
};
const Level kLevels[] = {
    {{"top level", "top_level", &InspectReport::top_keys, true}, table(kTopKeys)},
    {{"program_annotation", "program_annotation", &InspectReport::annotation_keys, true},
     table(kAnnotationKeys)},
    {{"program_annotation.computations.<c>", "computation", &InspectReport::computation_keys, true},
     table(kComputationKeys)},
    {{"schedules_list[i]", "schedule", &InspectReport::schedule_keys, true}, table(kScheduleKeys)},
    {{"schedules_list[i].<computation>", "schedule_computation_entry",
      &InspectReport::comp_entry_keys, true},
     table(kCompEntryKeys)},
    {{"schedules_list[i].transformations_list[k] (typed)", "typed_entry",
      &InspectReport::typed_entry_keys, false},
     table(kTypedEntryKeys)},
};
static_assert(sizeof kLevels / sizeof kLevels[0] == size_t(KeyLevel::Count),
              "one row of kLevels per KeyLevel, in its order");

}  // namespace

const KeySection& key_section(KeyLevel level) {
  return kLevels[size_t(level)].section;
}

KeyUse key_use(KeyLevel level, std::string_view k) {
  const KeyTable& t = kLevels[size_t(level)].known;
  for (size_t i = 0; i < t.n; ++i)
    if (k == t.keys[i].key) return t.keys[i].use;
  return KeyUse::Unknown;
}

void add(Histogram& h, std::string_view k, int64_t n) {
  auto it = h.lower_bound(std::string(k));
  if (it != h.end() && it->first == k) {
    it->second += n;
    return;
  }
  if (h.size() >= kMaxHistogramKeys) {
    h[kOtherKeys] += n;
    return;
  }
  h.emplace_hint(it, std::string(k), n);
}

void add_all(Histogram& into, const Histogram& from) {
  for (const auto& [k, v] : from) add(into, k, v);
}

bool is_known_type(const std::string& t) {
  return json_detail::is_typed_transformation_type(t);
}

}  // namespace inspect_detail

const char* key_use_name(KeyUse u) {
  static constexpr NameRow<KeyUse> kNames[] = {
      {KeyUse::Read, "read"}, {KeyUse::Ignored, "ignored"}, {KeyUse::Unknown, "unknown"}};
  return name_of(kNames, u, "unknown");
}

}  // namespace lcm::data
