// libFuzzer target: one input = the bytes of one LOOPerSet data file (normally one JSONL line, a
// program record), read as lcm-prepare reads a file: read_features (RecordSource's layout
// detection, gzip and line splitting on its reader thread; parse_program and featurize on one
// worker thread; duplicate names, skip replay), then build_batches over the kept programs and the
// batches' tensors. Every skip is expected; a crash, a sanitizer report, an exception the tools do
// not expect, or a record dropped without a counted skip is a finding (docs/fuzzing.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/dataset.hpp"
#include "data/prepare.hpp"
#include "data/skips.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace lcm::data;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_record: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The name decides nothing for plain text; a gzip input is recognised by its magic bytes.
  const std::string path = lcm::fuzz::write_input("record.jsonl", data, size);
  PrepareOptions opt;  // lcm-prepare's defaults (FeatureOptions{}), not strict
  opt.source = path;
  opt.nb_workers = 1;
  SkipLog log(false, 0);  // skips are expected; nothing printed
  SplitCounts counts;
  Dataset ds;
  try {
    ds.programs = read_features(opt, log, counts);
  } catch (const DataError&) {
    return 0;  // documented: a file that cannot be read at all (never bad records when not strict)
  }
  // Nothing is dropped silently: every record not kept has at least one line or program skip.
  const int64_t dropped = counts.records_read - int64_t(ds.programs.size());
  if (dropped > log.total("line") + log.total("program"))
    finding("a record was dropped without a counted line/program skip");
  BatchingOptions batching;
  batching.batch_size = 4;
  batching.min_functions_per_footprint = 0;  // keep every group: each kept program is batched
  build_batches(ds, batching, log);
  for (int64_t b = 0; b < int64_t(ds.batches.size()) && b < 4; ++b) (void)ds.materialize(b);
  return 0;
}
