// The CPU backend's product library name and the matrix-product counters of engine/cpu_gemm.hpp.
#include "engine/cpu_gemm.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "engine/eigen.hpp"

#ifdef LCM_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace lcm {
namespace {

/// FLOPs summed in integer units (exact for any order of the threads' adds).
std::atomic<int64_t> g_flops{0};
std::atomic<bool> g_shapes{false};
std::mutex g_shape_mu;
using ShapeKey = std::tuple<int64_t, int64_t, int64_t, bool, bool>;
std::map<ShapeKey, int64_t>& shape_calls() {
  static std::map<ShapeKey, int64_t> calls;
  return calls;
}

}  // namespace

std::string cpu_gemm_library() {
  const std::string eigen = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                            std::to_string(EIGEN_MAJOR_VERSION) + "." +
                            std::to_string(EIGEN_MINOR_VERSION);
#ifdef LCM_WITH_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " sgemm (products of at least " +
         std::to_string(kLibraryMinDim) + "x" + std::to_string(kLibraryMinDim) + " and " +
         std::to_string(kLibraryMinMacs) + " multiply-adds; " + eigen + " below)";
#else
  return eigen;
#endif
}

void detail::count_gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  g_flops.fetch_add(2 * m * n * k, std::memory_order_relaxed);
  if (!g_shapes.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_shape_mu);
  ++shape_calls()[ShapeKey{m, n, k, trans_a, trans_b}];
}

void set_flop_counting(bool on, bool shapes) {
  g_shapes.store(on && shapes, std::memory_order_relaxed);
  detail::g_flop_counting.store(on, std::memory_order_relaxed);
}

double flop_count() {
  return double(g_flops.load(std::memory_order_relaxed));
}

void reset_flop_count() {
  g_flops.store(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_shape_mu);
  shape_calls().clear();
}

std::vector<GemmShape> gemm_shapes() {
  std::vector<GemmShape> out;
  {
    std::lock_guard<std::mutex> lock(g_shape_mu);
    for (const auto& [key, calls] : shape_calls()) {
      GemmShape s;
      std::tie(s.m, s.n, s.k, s.trans_a, s.trans_b) = key;
      s.calls = calls;
      s.flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(calls);
      out.push_back(s);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GemmShape& a, const GemmShape& b) { return a.flops > b.flops; });
  return out;
}

}  // namespace lcm
