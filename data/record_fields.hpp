// What marks a JSON object as a program record (internal to data/): its record-level field
// names, shared by the layout detection of RecordSource (record_source.cpp) and by parse_program
// (program_json.cpp), and a best-effort program name from raw record text for skip messages.
#pragma once
#include <rapidjson/document.h>

#include <string>

namespace lcm::data {

/// True for the record-level field names ("program_name", "program_annotation",
/// "schedules_list", "initial_execution_time", "filename", "node_name", "parameters",
/// "exploration_trace", "search_time", "best_schedule"): a top-level object with one of them is
/// a program record (docs/data-format.md).
bool is_record_key(const std::string& k);

/// True when `v` is an object with a record-level member (is_record_key).
bool has_record_key(const rapidjson::Value& v);

/// The value of the first "program_name" field in the first 64 KiB of a (possibly partial or
/// malformed) record's text, or "" when none is found; for naming the record in a skip.
std::string sniff_program_name(const std::string& text);

}  // namespace lcm::data
