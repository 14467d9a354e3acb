// The BF16 one-row product kernels (engine/bf16.hpp) on the release model's product shapes: m
// rows of activations against a weight, as m calls of bf16_dot_rows (one pass over the weight
// per row) and as one bf16_dot_rows_multi (one pass for all rows), with the weight hot in cache
// (the same one each call) or streamed (a different copy each call, 32 MB in all, as a query's
// forward streams the model's 4 MB of BF16 weights past the other jobs' data).
//
// Usage: bench_bf16_kernel [--reps N]   Prints ns per call for each shape, m and way.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/bf16.hpp"

int main(int argc, char** argv) {
  int reps = 2000;
  if (argc == 3 && std::string(argv[1]) == "--reps") reps = std::atoi(argv[2]);
  struct Shape {
    const char* what;
    int64_t n, k;
  };
  const Shape shapes[] = {{"tree LSTM W_ih 720x180", 720, 180},
                          {"comp layer 350x600", 350, 600},
                          {"comp layer 180x200", 180, 200}};
  std::printf("bench_bf16_kernel: %s kernel, %d calls per row\n", lcm::bf16_kernel(), reps);
  std::printf("%-24s %2s %-6s %12s %12s %8s\n", "shape", "m", "weight", "per-row ns", "multi ns",
              "ratio");
  double sink = 0;  // keeps the results live
  for (const Shape& s : shapes) {
    const int64_t one = s.n * s.k;
    const int64_t copies = std::max<int64_t>(1, (int64_t(32) << 20) / (2 * one));
    std::vector<float> wf(size_t(one * copies));
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = float(int(i % 97) - 48) / 97.0f;
    const std::vector<uint16_t> w = lcm::round_to_bf16(wf.data(), int64_t(wf.size()));
    std::vector<float> x(size_t(8 * s.k), 0.5f), y(size_t(8 * s.n), 0.0f);
    for (int64_t m : {1, 2, 4, 7, 8})
      for (int hot = 1; hot >= 0; --hot) {
        double t[2] = {0, 0};
        for (int way = 0; way < 2; ++way)
          for (int round = 0; round < 3; ++round) {  // alternating, the best of three
            const auto t0 = std::chrono::steady_clock::now();
            for (int r = 0; r < reps; ++r) {
              const uint16_t* wp = w.data() + (hot ? 0 : (r % copies) * one);
              if (way == 0)
                for (int64_t q = 0; q < m; ++q)
                  lcm::bf16_dot_rows(s.n, s.k, x.data() + q * s.k, wp, s.k, y.data() + q * s.n, 1);
              else
                lcm::bf16_dot_rows_multi(m, s.n, s.k, x.data(), s.k, wp, s.k, y.data(), s.n);
            }
            const double ns =
                std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                    .count() /
                reps;
            t[way] = round == 0 ? ns : std::min(t[way], ns);
          }
        std::printf("%-24s %2lld %-6s %12.0f %12.0f %8.3f\n", s.what, (long long)m,
                    hot ? "hot" : "stream", t[0], t[1], t[1] / t[0]);
      }
    sink += double(y[0]);
  }
  std::printf("(checksum %g)\n", sink);
  return 0;
}
