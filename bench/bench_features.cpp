// Benchmark of feature extraction (data/features.hpp): reads a LOOPerSet file once, then times
// featurize() over every program and prints schedules/s and the skip summary.
// Usage: bench_features [file=../shared/data/looperset-sample/train.jsonl.gz] [repeats=3]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/features.hpp"
#include "data/reader.hpp"

int main(int argc, char** argv) {
  using namespace lcm::data;
  const std::string path = argc > 1 ? argv[1] : "../shared/data/looperset-sample/train.jsonl.gz";
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  SkipLog rlog(false, 5);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Program> progs;
  try {
    progs = read_all_programs(path, rlog);
  } catch (const DataError& e) {
    std::fprintf(stderr, "bench_features: %s\n", e.what());
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  int64_t raw = 0;
  for (const auto& p : progs) raw += int64_t(p.schedules.size());
  std::printf("read %zu programs / %lld schedules in %.3f s\n", progs.size(), (long long)raw,
              std::chrono::duration<double>(t1 - t0).count());
  for (int r = 0; r < repeats; ++r) {
    SkipLog log(false, 0);
    int64_t kept = 0, kept_progs = 0;
    auto a = std::chrono::steady_clock::now();
    for (const auto& p : progs) {
      auto f = featurize(p, FeatureOptions{}, log);
      if (f) {
        ++kept_progs;
        kept += f->n_schedules();
      }
    }
    auto b = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(b - a).count();
    std::printf(
        "featurize (1 thread): %lld programs, %lld schedules kept in %.3f s = %.0f schedules/s\n",
        (long long)kept_progs, (long long)kept, s, double(raw) / s);
    if (r == repeats - 1) std::printf("skips:\n%s", log.summary().c_str());
  }
  return 0;
}
