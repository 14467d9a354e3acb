// libFuzzer target: one input = the bytes of one LOOPerSet data file (normally one JSONL line, a
// program record), read as lcm-prepare reads a file: RecordSource (layout detection, gzip, line
// splitting) → parse_program → featurize, then build_batches over the kept programs. Every skip is
// expected; a crash, a sanitizer report, an exception the tools do not expect, or a record dropped
// without a counted skip is a finding (docs/fuzzing.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/features.hpp"
#include "data/reader.hpp"
#include "data/skips.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace lcm::data;

// Sum of all counts at every level except "note" (notes are kept data, not skips).
int64_t skips_so_far(const SkipLog& log) {
  int64_t n = 0;
  for (const auto& [k, v] : log.counts())
    if (k.rfind("note/", 0) != 0) n += v;
  return n;
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_record: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The name decides nothing for plain text (a non-gzip file named .gz would be refused up
  // front, which lcm-prepare also does before reading).
  const std::string path = lcm::fuzz::write_input("record.jsonl", data, size);
  SkipLog log(false, 0);  // not strict: skips are expected; nothing printed
  Dataset ds;
  try {
    RecordSource source(path, log);  // DataError only for an unreadable / unsupported file
    RawRecord rec;
    while (source.next(rec)) {
      const int64_t before = skips_so_far(log);
      std::optional<Program> prog = parse_program(rec, log);
      if (!prog) {
        if (skips_so_far(log) == before) finding("parse_program dropped a record without a skip");
        continue;
      }
      std::optional<ProgramFeatures> f;
      const int64_t before_features = skips_so_far(log);
      const int64_t before_schedules = log.total("schedule");
      try {
        f = featurize(*prog, FeatureOptions{}, log);
      } catch (const DataError&) {
        continue;  // lcm-prepare counts it as program/feature_error
      }
      const int64_t logged = skips_so_far(log) - before_features;
      if (!f) {
        if (logged == 0) finding("featurize dropped a program without a skip");
        continue;
      }
      // Every schedule of the record is kept or has (at least) one counted skip.
      const int64_t schedule_skips = log.total("schedule") - before_schedules;
      if (f->n_schedules() + schedule_skips < int64_t(prog->schedules.size()))
        finding("featurize dropped a schedule without a skip");
      ds.programs.push_back(std::move(*f));
    }
  } catch (const DataError&) {
    return 0;
  }
  BatchingOptions batching;
  batching.batch_size = 4;
  batching.min_functions_per_footprint = 0;  // keep every group: batches are built for each
  build_batches(ds, batching, log);
  for (int64_t b = 0; b < int64_t(ds.batches.size()) && b < 4; ++b) ds.materialize(b);
  return 0;
}
