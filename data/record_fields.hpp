// What marks a JSON object as a program record (internal to data/): its record-level field
// names, shared by the layout detection of RecordSource (record_source.cpp) and by parse_program
// (program_json.cpp), and a best-effort program name from raw record text for skip messages.
#pragma once
#include <rapidjson/document.h>

#include <string>
#include <vector>

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

/// Per-thread buffers for parsing records in place: the record's text, and one pool block sized
/// by the largest DOM seen (+25%) so that most records need no malloc.
struct InsituBuffers {
  std::vector<char> text;
  std::vector<char> pool;
  size_t want = 65536;  // pool size for the next record
};

/// One record's DOM, parsed in place from a copy of `json` in `b.text` with its allocator on
/// `b.pool`, by the iterative parser: no recursion, so hostile nesting cannot overflow the stack
/// (and it measured faster than a depth pre-scan followed by the recursive parser). Afterwards
/// `b.want` fits this record's DOM. `b` must outlive it and not be touched while it lives. A
/// parse error is in doc.HasParseError().
class InsituDocument {
 public:
  InsituDocument(InsituBuffers& b, const std::string& json)
      : ready_(prepare(b, json)), pool_(b.pool.data(), b.pool.size()), doc(&pool_) {
    doc.ParseInsitu<rapidjson::kParseIterativeFlag>(b.text.data());
    if (pool_.Size() > b.want) b.want = pool_.Size() + pool_.Size() / 4;
  }

 private:
  static bool prepare(InsituBuffers& b, const std::string& json) {
    b.text.assign(json.begin(), json.end());
    b.text.push_back('\0');
    if (b.pool.size() < b.want) b.pool.resize(b.want);
    return true;
  }
  bool ready_;
  rapidjson::MemoryPoolAllocator<> pool_;

 public:
  rapidjson::Document doc;
};

}  // namespace lcm::data
