// Throughput of the LOOPerSet reader (data/reader.hpp): reads one file given on the command line
// and prints programs, schedules, seconds and MB/s of uncompressed JSON (compare: zcat FILE).
// Usage: bench_reader FILE [--raw]   (--raw: only split records, no parse_program)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "data/reader.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--raw]\n", argv[0]);
    return 2;
  }
  const bool raw_only = argc > 2 && std::strcmp(argv[2], "--raw") == 0;
  try {
    lcm::data::SkipLog log;
    auto t0 = std::chrono::steady_clock::now();
    std::clock_t c0 = std::clock();
    lcm::data::RecordSource src(argv[1], log);
    lcm::data::RawRecord rec;
    int64_t programs = 0, schedules = 0, records = 0;
    while (src.next(rec)) {
      ++records;
      if (raw_only) continue;
      if (auto p = lcm::data::parse_program(rec, log)) {
        ++programs;
        schedules += int64_t(p->schedules.size());
      }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;  // robust on a shared, loaded machine
    double mb = double(src.uncompressed_bytes_read()) / 1e6;
    std::printf("file %s (%s, %s)\n", argv[1], src.is_gzip() ? "gzip" : "plain",
                src.is_jsonl() ? "jsonl" : "legacy/bare json");
    std::printf("records %lld programs %lld schedules %lld\n", (long long)records,
                (long long)programs, (long long)schedules);
    std::printf("uncompressed %.1f MB in %.3f s wall (%.1f MB/s), %.3f s CPU (%.1f MB/s)%s\n", mb,
                s, mb / s, cpu, mb / std::max(cpu, 1e-9), raw_only ? " (raw split only)" : "");
    std::string sum = log.summary();
    if (!sum.empty()) std::printf("skips:\n%s", sum.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reader: %s\n", e.what());
    return 1;
  }
  return 0;
}
