// Throughput of the synthetic generator (data/synth.hpp, docs/synth.md): writes N programs × K
// schedules to a temporary gzip file and prints schedules/s, wall and CPU seconds and sizes.
// Usage: bench_synth [PROGRAMS=10000] [SCHEDULES_PER_PROGRAM=100] [THREADS=0]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>

#include "data/synth.hpp"

int main(int argc, char** argv) {
  lcm::data::SynthOptions opt;
  opt.programs = argc > 1 ? std::stoll(argv[1]) : 10000;
  opt.schedules_per_program = argc > 2 ? std::stoi(argv[2]) : 100;
  opt.threads = argc > 3 ? std::stoi(argv[3]) : 0;
  const std::string path = "/tmp/bench_synth_" + std::to_string(::getpid()) + ".jsonl.gz";
  try {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    const lcm::data::SynthStats st = lcm::data::write_synth_file(path, opt);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
    std::printf("programs %lld schedules %lld threads %d\n", (long long)st.programs,
                (long long)st.schedules, opt.threads);
    std::printf("wall %.2f s, cpu %.2f s, %.0f schedules/s (wall), %.0f schedules/cpu-s\n", wall,
                cpu, double(st.schedules) / wall, double(st.schedules) / cpu);
    std::printf("json %.1f MB, gzip %.1f MB (%.0f bytes/schedule compressed)\n",
                st.uncompressed_bytes / 1e6, st.compressed_bytes / 1e6,
                double(st.compressed_bytes) / double(std::max<int64_t>(1, st.schedules)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_synth: %s\n", e.what());
    std::remove(path.c_str());
    return 1;
  }
  std::remove(path.c_str());
  return 0;
}
