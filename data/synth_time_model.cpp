// The analytic execution-time model of the synthetic generator (docs/synth.md §3): the mean time
// of a schedule from trip counts, access strides, cache footprint, tiling, unrolling,
// parallelization and fusion, and the noisy measurements drawn around it.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "data/synth_internal.hpp"
#include "data/transformations.hpp"

namespace lcm::data::synth_detail {

/// Mean time (ms) of a schedule under the analytic model of docs/synth.md §3.
double model_time_ms(const Record& rec, const Schedule& s, const SynthTimeModel& tm) {
  const Program& p = rec.program;
  double total_ns = 0;
  for (size_t c = 0; c < p.computations.size(); ++c) {
    const Computation& comp = p.computations[c];
    const CompInfo& info = rec.info[c];
    const CompSchedule& cs = s.comps[c];
    int n = int(info.loops.size());
    // loop order after interchanges (positions → original iterator index)
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    double skew_factor = 1, misc_factor = 1;
    for (const auto& tag : cs.transformations) {
      const std::optional<Transformation> t = decode(tag);
      if (!t) continue;
      const auto& l = t->levels;
      if (t->kind == TransformKind::Interchange) {
        if (l[0] < n && l[1] < n) std::swap(order[size_t(l[0])], order[size_t(l[1])]);
      } else if (t->kind == TransformKind::Skewing) {
        int64_t off = 0;  // the block's off-diagonal entries
        for (int q = 0; q < t->n_params; ++q)
          if (q % (t->n_levels + 1) != 0) off += std::abs(t->params[size_t(q)]);
        skew_factor *= 1.0 + 0.05 * double(off) + 0.03 * double(std::abs(t->params[0]) - 1);
      } else {  // reversal, and any other kind: a small cost
        misc_factor *= 1.01;
      }
    }
    misc_factor *= std::pow(1.02, double(cs.shiftings.size()));
    std::vector<double> trip(n);
    for (int i = 0; i < n; ++i) trip[i] = rec.loops[info.loops[i]].trip;
    double points = 1;
    for (double t : trip) points *= t;
    int inner = order[n - 1];
    int second = n >= 2 ? order[n - 2] : -1;
    // footprint of the two innermost loops (after interchange); a tiled loop counts its tile
    std::vector<double> tile(n, 0.0);
    double tile_overhead = 1;
    for (size_t d = 0; d < cs.tiling_dims.size() && d < cs.tiling_factors.size(); ++d) {
      auto pos = std::find(comp.iterators.begin(), comp.iterators.end(), cs.tiling_dims[d]);
      if (pos == comp.iterators.end()) continue;
      int it = int(pos - comp.iterators.begin());
      double f = double(std::max<int64_t>(1, cs.tiling_factors[d]));
      tile[it] = f;
      tile_overhead *= 1.02 + 0.5 / f;
      if (f > trip[it]) tile_overhead *= 1.03;  // tile larger than the loop: wasted control
    }
    auto extent_in_cache = [&](int it) {
      return tile[it] > 0 ? std::min(tile[it], trip[it]) : trip[it];
    };
    double inner_points = extent_in_cache(inner) * (second >= 0 ? extent_in_cache(second) : 1.0);
    bool tiled = tile[inner] > 0;
    double n_acc = double(info.matrices.size());
    bool over_cache = inner_points * n_acc * double(info.type_size) > tm.cache_bytes;
    double mem = 0;
    for (const auto& flat : info.matrices) {
      int cols = n + 1;
      int rows = int(flat.size()) / cols;
      bool used = false, contiguous = true;
      for (int row = 0; row < rows; ++row) {
        int coef = flat[size_t(row * cols + inner)];
        if (coef != 0) {
          used = true;
          if (row != rows - 1 || std::abs(coef) != 1) contiguous = false;
        }
      }
      double cost;
      if (!used)
        cost = 0.25;  // invariant in the innermost loop: kept in a register
      else if (contiguous)
        cost = 1.0;  // stride-1
      else
        cost = 1.0 + tm.strided_penalty * (tiled ? 0.5 : 1.0);
      if (over_cache && used) cost *= 1.0 + tm.capacity_penalty * (contiguous ? 0.3 : 1.0);
      mem += cost;
    }
    double compute = info.ops * (info.type == 0   ? tm.ns_per_op_int32
                                 : info.type == 1 ? tm.ns_per_op_float32
                                                  : tm.ns_per_op_float64);
    if (cs.unrolling_factor > 0) {
      double u = double(cs.unrolling_factor);
      if (u <= trip[inner])
        compute *= 1.0 - 0.3 * (1.0 - 1.0 / u);
      else
        compute *= 1.05;
      if (info.ops * u > 96) compute *= 1.15;  // register pressure
    }
    double ns =
        points * (compute + tm.ns_per_access * mem) * skew_factor * misc_factor * tile_overhead;
    if (!cs.parallelized_dim.empty()) {
      int orig = int(std::find(comp.iterators.begin(), comp.iterators.end(), cs.parallelized_dim) -
                     comp.iterators.begin());
      if (orig < n) {
        int pos = int(std::find(order.begin(), order.end(), orig) - order.begin());
        double outer = 1;
        for (int q = 0; q < pos; ++q) outer *= trip[order[q]];
        double par = std::min(double(tm.cores), trip[orig]) * 0.9;
        if (orig == info.reduction_level) par = 0.5;  // parallel reduction: contention, no gain
        if (pos == n - 1) par *= 0.6;                 // innermost: loses vectorization
        ns = ns / std::max(par, 0.05) + tm.parallel_overhead_ns * outer;
      }
    }
    for (const auto& f : s.fusions) {
      if (f.comp_a != comp.name && f.comp_b != comp.name) continue;
      int other = p.computation_index(f.comp_a == comp.name ? f.comp_b : f.comp_a);
      bool shared = false;
      if (other >= 0)
        for (int b1 : info.buffers)
          for (int b2 : rec.info[size_t(other)].buffers) shared = shared || b1 == b2;
      ns *= shared ? 0.8 : 0.97;
    }
    total_ns += ns;
  }
  return total_ns * 1e-6 + 1e-4;
}

std::vector<double> measure(Rng& r, double mean_ms, const SynthTimeModel& tm) {
  int k = chance(r, 0.8) ? 30 : between(r, 1, 29);
  std::vector<double> out(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    double v = mean_ms * std::exp(tm.noise_sigma * normal(r));
    if ((i == 0 && chance(r, 0.3)) || chance(r, tm.outlier_probability)) v *= r.uniform(1.2, 3.0);
    out[size_t(i)] = round6(v);
  }
  return out;
}

}  // namespace lcm::data::synth_detail
