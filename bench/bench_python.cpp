// liblcm's own time per call (lcm::Predictor::score, its program cached), the baseline of the
// Python module's per-call overhead (bench/bench_python.py runs this and the same calls through
// `lcm.Model.predict`). Only liblcm's public API: what the module calls.
//
// Usage: bench_python CKPT PROGRAMS [--calls 2000]
// Prints one line per batch size (1 and 100 schedules): "liblcm <n> <median µs per call>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lcm/lcm.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_python CKPT PROGRAMS [--calls N]\n");
    return 2;
  }
  int calls = 2000;
  if (argc >= 5 && std::string(argv[3]) == "--calls") calls = std::atoi(argv[4]);
  try {
    lcm::Predictor p(argv[1]);
    lcm::ProgramFile f(argv[2]);
    lcm::ProgramRecord r, best;
    while (f.next(r))
      if (r.schedule_jsons.size() > best.schedule_jsons.size()) best = r;
    for (size_t n : {size_t(1), size_t(100)}) {
      std::vector<std::string> s;
      for (size_t i = 0; i < n; ++i)
        s.push_back(best.schedule_jsons[i % best.schedule_jsons.size()]);
      p.score(best.program_json, s, best.untransformed_json);  // the program into the cache
      std::vector<double> us;
      const int reps = n == 1 ? calls : std::max(calls / 20, 50);
      for (int k = 0; k < reps; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        p.score(best.program_json, s, best.untransformed_json);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(us.begin(), us.end());
      std::printf("liblcm %zu %.3f\n", n, us[us.size() / 2]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_python: %s\n", e.what());
    return 1;
  }
  return 0;
}
