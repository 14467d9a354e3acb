// What this machine's cores can do in FP32, and what each GEMM library makes of the cost model's
// product shapes, to put lcm's GFLOP/s (bench_model) into proportion and to choose a GEMM by
// measurement (issue "Close to the machine", goal 1).
//  - FMA peak: independent chains of fused multiply-adds (AVX-512 and AVX2, 2 FLOPs per lane per
//    FMA) on 1 thread and on --threads threads: the ceiling no GEMM passes.
//  - GEMM: each product shape of a training batch (bench_model --gemm-shapes FILE, or a built-in
//    list of the release model's shapes at batch 512), one call at a time on 1 thread as lcm's
//    tiles call it, through lcm's own gemm() (its dispatch), Eigen 3.4's kernel alone and, where
//    installed, OpenBLAS,
//    BLIS, oneDNN (dnnl_sgemm) and libxsmm. The libraries are loaded at run time (dlopen; libxsmm
//    linked when CMake finds it), so the bench builds and runs with none of them. Each is called
//    single-threaded (omp_set_num_threads(1) and the library's own switch).
//  - The mix: the recorded shapes with their call counts, as one library would run them all:
//    seconds per recorded workload and its GFLOP/s, per library, and the best library per shape.
//
// Usage: bench_peak [--threads 2] [--shapes FILE] [--top 16] [--min-ms 40] [--peak-only]
#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu_gemm.hpp"
#include "engine/ops/gemm.hpp"
#include "engine/rng.hpp"

#ifdef LCM_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// 16 independent FMA chains of 16 floats for `iters` iterations: 2·16·16 FLOPs per iteration.
/// The chains hide the FMA latency (4 cycles on current x86 cores, two FMA pipes: ≥ 8 needed).
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  return t;
}

/// As fma_avx512 with 8-float AVX2 vectors: 2·8·16 FLOPs per iteration.
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm256_set1_ps(0.001f * float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  return t;
}

volatile float g_sink = 0;

/// GFLOP/s of `kernel` (FLOPs per iteration `flops_per_iter`) on `threads` threads at once: the
/// best of 20 runs of ~50 ms (a shared machine's other work only lowers a run; many short runs
/// catch its quiet moments).
double fma_gflops(float (*kernel)(int64_t), double flops_per_iter, int threads) {
  int64_t iters = 1 << 16;
  for (;;) {  // calibrate on one thread to ~50 ms
    const auto t0 = Clock::now();
    g_sink = g_sink + kernel(iters);
    if (seconds_since(t0) > 0.025) break;
    iters *= 2;
  }
  iters *= 2;
  double best = 0;
  for (int rep = 0; rep < 20; ++rep) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    {
      const float v = kernel(iters);
#pragma omp critical
      g_sink = g_sink + v;
    }
    best = std::max(best, double(threads) * double(iters) * flops_per_iter / seconds_since(t0));
  }
  return best / 1e9;
}

/// One product shape of the workload (engine/cpu_gemm.hpp GemmShape as a line of the file).
struct Shape {
  int64_t m, n, k;
  bool ta, tb;
  int64_t calls;
};

/// The release model's main products at batch 512 (one datapoint ≈ 3 computations, one tree
/// level of ≈ 512 nodes), when no --shapes file is given: the tree LSTMs (H = 180, 4H = 720),
/// the computation MLP (1146 → 600 → 350 → 200 → 180 on ~1,500 rows), the tag BiLSTM (H = 100)
/// and their backward products (dX = dY·W, dW = dYᵀ·X over the rows).
std::vector<Shape> default_shapes() {
  return {
      {512, 720, 180, false, true, 8},    {512, 180, 720, false, false, 8},
      {720, 180, 512, true, false, 8},    {1536, 600, 1146, false, true, 1},
      {1536, 1146, 600, false, false, 1}, {600, 1146, 1536, true, false, 1},
      {1536, 350, 600, false, true, 1},   {1536, 200, 350, false, true, 1},
      {512, 200, 368, false, true, 4},    {4608, 400, 100, false, true, 2},
  };
}

std::vector<Shape> read_shapes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Shape> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Shape s{};
    int ta = 0, tb = 0;
    if (!(ls >> s.m >> s.n >> s.k >> ta >> tb >> s.calls))
      throw std::runtime_error(path + ": bad line: " + line);
    s.ta = ta != 0, s.tb = tb != 0;
    out.push_back(s);
  }
  return out;
}

/// A row-major single-precision GEMM C[m, n] = op(A)·op(B) + beta·C with the operands of `s`.
using Gemm = std::function<void(const Shape& s, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float* c, int64_t ldc)>;

struct Library {
  std::string name;
  Gemm gemm;
};

// The C ABIs of the libraries' row-major entry points (their headers are not needed to call them).
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

/// The libraries found on this machine: lcm's own gemm() first (what training runs:
/// engine/cpu_gemm.hpp cpu_gemm_library()), then Eigen's kernel alone, then the others.
std::vector<Library> libraries(std::vector<std::string>& notes) {
  std::vector<Library> libs;
  libs.push_back({"lcm", [](const Shape& s, const float* a, int64_t lda, const float* b,
                            int64_t ldb, float* c, int64_t ldc) {
                    lcm::ops::detail::gemm<float>(s.m, s.n, s.k, {a, lda, s.ta}, {b, ldb, s.tb}, c,
                                                  ldc, false);
                  }});
  libs.push_back({"Eigen", [](const Shape& s, const float* a, int64_t lda, const float* b,
                              int64_t ldb, float* c, int64_t ldc) {
                    for (int64_t r = 0; r < s.m; ++r)
                      std::fill(c + r * ldc, c + r * ldc + s.n, 0.0f);
                    lcm::ops::detail::eigen_gemm_add<float>(s.m, s.n, s.k, {a, lda, s.ta},
                                                            {b, ldb, s.tb}, c, ldc);
                  }});
  auto cblas = [&](const char* name, const char* file, const char* threads_fn) {
    void* h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      notes.push_back(std::string(name) + ": not installed (" + file + ")");
      return;
    }
    auto f = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    if (!f) {
      notes.push_back(std::string(name) + ": " + file + " has no cblas_sgemm");
      return;
    }
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, threads_fn))) set(1);
    libs.push_back({name, [f](const Shape& s, const float* a, int64_t lda, const float* b,
                              int64_t ldb, float* c, int64_t ldc) {
                      f(kCblasRowMajor, s.ta ? kCblasTrans : kCblasNoTrans,
                        s.tb ? kCblasTrans : kCblasNoTrans, int(s.m), int(s.n), int(s.k), 1.0f, a,
                        int(lda), b, int(ldb), 0.0f, c, int(ldc));
                    }});
  };
  cblas("OpenBLAS", "libopenblas.so.0", "openblas_set_num_threads");
  cblas("BLIS", "libblis.so.4", "bli_thread_set_num_threads");
  if (void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL)) {
    if (auto f = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm")))
      libs.push_back({"oneDNN", [f](const Shape& s, const float* a, int64_t lda, const float* b,
                                    int64_t ldb, float* c, int64_t ldc) {
                        f(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, lda, b, ldb,
                          0.0f, c, ldc);
                      }});
  } else {
    notes.push_back("oneDNN: not installed (libdnnl.so.2)");
  }
#ifdef LCM_HAVE_LIBXSMM
  libxsmm_init();
  libs.push_back({"libxsmm", [](const Shape& s, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float* c, int64_t ldc) {
                    // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: libxsmm's
                    // column-major kernel with the operands swapped. A shape without a JIT kernel
                    // is reported as such (no silent BLAS fallback).
                    const libxsmm_blasint m = s.n, n = s.m, k = s.k, la = ldb, lb = lda, lc = ldc;
                    const float alpha = 1, beta = 0;
                    const int flags = (s.tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) |
                                      (s.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
                    const libxsmm_smmfunction f =
                        libxsmm_smmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, nullptr);
                    if (!f) throw std::runtime_error("no libxsmm kernel");
                    f(b, a, c);
                  }});
#else
  notes.push_back("libxsmm: not linked (CMake did not find libxsmm)");
#endif
  return libs;
}

/// Seconds per call of `g` on shape `s`: the best of 3 runs of ≥ min_ms each (after a warm-up
/// call); < 0 when the library has no kernel for the shape.
double seconds_per_call(const Gemm& g, const Shape& s, double min_ms, std::vector<float>& a,
                        std::vector<float>& b, std::vector<float>& c) {
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n, ldc = s.n;
  try {
    g(s, a.data(), lda, b.data(), ldb, c.data(), ldc);
  } catch (const std::exception&) {
    return -1;
  }
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 3; ++rep) {
    int64_t n = 0;
    const auto t0 = Clock::now();
    double el = 0;
    do {
      g(s, a.data(), lda, b.data(), ldb, c.data(), ldc);
      ++n;
      el = seconds_since(t0);
    } while (el * 1e3 < min_ms);
    best = std::min(best, el / double(n));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_peak: FP32 FMA peak of this machine and GEMM libraries on lcm's shapes"};
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::string shapes_path;
  int top = 16;
  double min_ms = 40;
  app.add_option("--threads", threads, "threads of the multi-thread FMA peak")
      ->check(CLI::Range(1, 1024));
  app.add_option("--shapes", shapes_path,
                 "product shapes with call counts (bench_model --gemm-shapes FILE); default: the "
                 "release model's main shapes at batch 512");
  app.add_option("--top", top, "the shapes with the most FLOPs to time")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-ms", min_ms, "milliseconds per timed run")->check(CLI::PositiveNumber);
  bool peak_only = false;
  app.add_flag("--peak-only", peak_only, "the FMA peak alone (no GEMM libraries)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    std::printf("machine: %u hardware threads; AVX-512F %s, AVX2+FMA %s\n",
                std::thread::hardware_concurrency(),
                __builtin_cpu_supports("avx512f") ? "yes" : "no",
                __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "yes" : "no");
    double peak1 = 0, peakn = 0;
    struct Isa {
      const char* name;
      float (*kernel)(int64_t);
      double flops;
      bool ok;
    };
    const Isa isas[] = {
        {"AVX-512", fma_avx512, 2.0 * 16 * 16, bool(__builtin_cpu_supports("avx512f"))},
        {"AVX2", fma_avx2, 2.0 * 8 * 16,
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")}};
    for (const Isa& isa : isas) {
      if (!isa.ok) continue;
      const double g1 = fma_gflops(isa.kernel, isa.flops, 1);
      const double gn = fma_gflops(isa.kernel, isa.flops, threads);
      std::printf("FMA peak %-8s: 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s\n", isa.name, g1,
                  threads, gn);
      peak1 = std::max(peak1, g1), peakn = std::max(peakn, gn);
    }
    std::printf("peak FP32: %.1f GFLOP/s per core, %.1f GFLOP/s on %d threads\n", peak1, peakn,
                threads);

    if (peak_only) return 0;
    std::printf("lcm's CPU GEMM: %s\n", lcm::cpu_gemm_library().c_str());
    omp_set_num_threads(1);
    std::vector<std::string> notes;
    const std::vector<Library> libs = libraries(notes);
    for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
    std::vector<Shape> shapes = shapes_path.empty() ? default_shapes() : read_shapes(shapes_path);
    double all_flops = 0;
    for (const Shape& s : shapes) all_flops += 2.0 * double(s.m * s.n * s.k) * double(s.calls);
    std::sort(shapes.begin(), shapes.end(), [](const Shape& x, const Shape& y) {
      return double(x.m * x.n * x.k) * double(x.calls) > double(y.m * y.n * y.k) * double(y.calls);
    });
    if (int(shapes.size()) > top) shapes.resize(size_t(top));
    double timed_flops = 0;
    for (const Shape& s : shapes) timed_flops += 2.0 * double(s.m * s.n * s.k) * double(s.calls);
    std::printf(
        "GEMM, 1 thread, GFLOP/s per call (%zu shapes = %.1f%% of the workload's %.3g FLOPs; "
        "m n k, t = operand read transposed):\n",
        shapes.size(), 100 * timed_flops / std::max(all_flops, 1.0), all_flops);
    std::printf("%-22s %7s", "shape", "share");
    for (const Library& l : libs) std::printf(" %10s", l.name.c_str());
    std::printf("  best\n");
    lcm::Rng rng(11);
    std::vector<double> total(libs.size(), 0);  // seconds for the timed shapes' calls
    std::vector<bool> complete(libs.size(), true);
    double best_total = 0;
    std::map<std::string, int> wins;
    for (const Shape& s : shapes) {
      std::vector<float> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n));
      for (float& v : a) v = float(rng.uniform(-1, 1));
      for (float& v : b) v = float(rng.uniform(-1, 1));
      const double flops = 2.0 * double(s.m * s.n * s.k);
      char label[64];
      std::snprintf(label, sizeof label, "%lld%s %lld%s %lld", (long long)s.m, s.ta ? "t" : "",
                    (long long)s.n, s.tb ? "t" : "", (long long)s.k);
      std::printf("%-22s %6.1f%%", label, 100 * flops * double(s.calls) / all_flops);
      double best = std::numeric_limits<double>::infinity();
      size_t best_lib = 0;
      for (size_t l = 0; l < libs.size(); ++l) {
        const double sec = seconds_per_call(libs[l].gemm, s, min_ms, a, b, c);
        if (sec < 0) {
          std::printf(" %10s", "n/a");
          complete[l] = false;
          continue;
        }
        std::printf(" %10.1f", flops / sec / 1e9);
        total[l] += sec * double(s.calls);
        if (sec < best) best = sec, best_lib = l;
      }
      best_total += best * double(s.calls);
      ++wins[libs[best_lib].name];
      std::printf("  %s\n", libs[best_lib].name.c_str());
    }
    std::printf("the timed shapes with their call counts, one library for all (1 thread):\n");
    for (size_t l = 0; l < libs.size(); ++l) {
      if (!complete[l]) {
        std::printf("  %-10s  (not every shape has a kernel)\n", libs[l].name.c_str());
        continue;
      }
      std::printf("  %-10s %9.2f ms  %7.1f GFLOP/s  %5.1f%% of the 1-thread peak\n",
                  libs[l].name.c_str(), total[l] * 1e3, timed_flops / total[l] / 1e9,
                  100 * timed_flops / total[l] / 1e9 / std::max(peak1, 1e-9));
    }
    std::printf("  %-10s %9.2f ms  %7.1f GFLOP/s  (the fastest library per shape)\n", "best",
                best_total * 1e3, timed_flops / best_total / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
