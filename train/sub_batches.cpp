// The CPU training step in sub-batches (train/sub_batches.hpp).
#include "train/sub_batches.hpp"

#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "data/features.hpp"
#include "train/distributed.hpp"

namespace lcm::train {
namespace {

/// CPU time of the calling thread, ms.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

}  // namespace

data::BatchTensors select_points(const data::BatchTensors& bt, const data::BatchTrees& trees,
                                 const std::vector<int32_t>& idx, data::BatchTrees* trees_out) {
  data::BatchTensors out;
  select_points_into(bt, trees, idx, &out, trees_out);
  return out;
}

void select_points_into(const data::BatchTensors& bt, const data::BatchTrees& trees,
                        const std::vector<int32_t>& idx, data::BatchTensors* out_bt,
                        data::BatchTrees* trees_out) {
  const data::BatchLayout l = data::batch_layout(bt);
  if (idx.empty()) throw std::invalid_argument("select_points: no datapoint selected");
  if (trees.size() != l.segments.size())
    throw std::invalid_argument("select_points: " + std::to_string(trees.size()) + " trees for " +
                                std::to_string(l.segments.size()) + " segments");
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] < 0 || idx[i] >= bt.batch || (i > 0 && idx[i] <= idx[i - 1]))
      throw std::invalid_argument("select_points: indices must be ascending in [0, " +
                                  std::to_string(bt.batch) + ")");
  constexpr int64_t kExprWidth = data::kMaxExprLen * data::kExprNodeWidth;
  data::BatchTensors& out = *out_bt;  // cleared, its capacity kept (no page faults per step)
  out.batch = int64_t(idx.size());
  out.segments.clear();
  out.comp.clear();
  out.loops.clear();
  out.speedup.clear();
  out.programs.clear();
  out.program_of.clear();
  out.expr.clear();
  trees_out->clear();
  std::vector<int32_t> new_program(bt.programs.size(), -1);
  size_t seg = 0;
  int64_t last_seg = -1;
  for (int32_t i : idx) {
    while (l.segment_point[seg + 1] <= i) ++seg;
    const data::BatchSegment& s = l.segments[seg];
    if (int64_t(seg) != last_seg) {  // a new run of this segment's points
      // one segment with the previous run when their trees have one shape (as Dataset::trees
      // merges them: the selection dropped the segments between them)
      const bool same = !out.segments.empty() && out.segments.back().n_comps == s.n_comps &&
                        out.segments.back().n_loops == s.n_loops &&
                        data::footprint(*trees_out->back()) == data::footprint(*trees[seg]);
      if (!same) {
        out.segments.push_back({0, s.n_comps, s.n_loops});
        trees_out->push_back(trees[seg]);
      }
      last_seg = int64_t(seg);
    }
    ++out.segments.back().points;
    const int64_t c0 = l.comp_row[size_t(i)], c1 = l.comp_row[size_t(i) + 1];
    out.comp.insert(out.comp.end(), bt.comp.begin() + c0 * data::kCompVectorWidth,
                    bt.comp.begin() + c1 * data::kCompVectorWidth);
    const int64_t r0 = l.loop_row[size_t(i)], r1 = l.loop_row[size_t(i) + 1];
    out.loops.insert(out.loops.end(), bt.loops.begin() + r0 * data::kLoopVectorWidth,
                     bt.loops.begin() + r1 * data::kLoopVectorWidth);
    if (!bt.speedup.empty()) out.speedup.push_back(bt.speedup[size_t(i)]);
    const int32_t p = bt.program_of[size_t(i)];
    if (new_program[size_t(p)] < 0) {
      new_program[size_t(p)] = int32_t(out.programs.size());
      out.programs.push_back(bt.programs[size_t(p)]);
      out.expr.insert(out.expr.end(), bt.expr.begin() + l.expr_row[size_t(p)] * kExprWidth,
                      bt.expr.begin() + l.expr_row[size_t(p) + 1] * kExprWidth);
    }
    out.program_of.push_back(new_program[size_t(p)]);
  }
  out.n_comps = out.segments[0].n_comps;
  out.n_loops = out.segments[0].n_loops;
  for (const data::BatchSegment& s : out.segments) {
    if (s.n_comps != out.n_comps) out.n_comps = 0;
    if (s.n_loops != out.n_loops) out.n_loops = 0;
  }
  if (out.segments.size() == 1) out.segments.clear();  // the implicit single segment
}

std::vector<std::vector<int32_t>> sub_batch_points(const data::BatchTensors& bt, int parts,
                                                   bool whole_programs) {
  if (parts < 1)
    throw std::invalid_argument("sub_batch_points: " + std::to_string(parts) + " parts");
  if (whole_programs) {
    data::Batch batch;
    batch.points.reserve(size_t(bt.batch));
    for (int64_t i = 0; i < bt.batch; ++i)
      batch.points.push_back({bt.programs[size_t(bt.program_of[size_t(i)])], 0});
    return split_batch_by_program(batch, parts);
  }
  // Datapoints grouped by program (bt.programs order), cut into runs of ⌈B / parts⌉: at most
  // parts − 1 programs straddle two parts, so the per-program work (CostModel's shared static
  // columns) is hardly repeated, and the parts are even whatever the programs' sizes.
  std::vector<int32_t> order(size_t(bt.batch));
  for (int64_t i = 0; i < bt.batch; ++i) order[size_t(i)] = int32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bt.program_of[size_t(a)] < bt.program_of[size_t(b)];
  });
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(parts));
  const int64_t per = std::max<int64_t>(1, (bt.batch + parts - 1) / parts);
  for (int64_t j = 0; j < bt.batch; ++j) out[size_t(j / per)].push_back(order[size_t(j)]);
  for (auto& part : out) std::sort(part.begin(), part.end());
  return out;
}

SubBatchStep::SubBatchStep(std::vector<Parameter<float>*> params, int parts)
    : params_(std::move(params)), parts_(parts) {
  if (parts < 2)
    throw std::invalid_argument("SubBatchStep: " + std::to_string(parts) + " parts (at least 2)");
  for (int k = 0; k < parts; ++k) tapes_.push_back(std::make_unique<Tape<float>>());
  grads_.resize(size_t(parts));
  grad_maps_.resize(size_t(parts));
  for (int k = 1; k < parts; ++k)
    for (Parameter<float>* p : params_) {
      grads_[size_t(k)].emplace_back(p->grad.size(), 0.0f);
      grad_maps_[size_t(k)][p] = grads_[size_t(k)].back().data();
    }
  for (int k = 1; k < parts; ++k) tapes_[size_t(k)]->set_param_grads(&grad_maps_[size_t(k)]);
}

double SubBatchStep::run(const data::BatchTensors& bt, const data::BatchTrees& trees,
                         bool whole_programs, Rng& dropout, const SubForward& forward,
                         const SubLoss& loss, std::vector<float>* pred) {
  std::vector<std::vector<int32_t>> points = sub_batch_points(bt, parts_, whole_programs);
  subs_.resize(size_t(parts_));
  for (int k = 0; k < parts_; ++k) {
    subs_[size_t(k)].index = k;
    subs_[size_t(k)].points = std::move(points[size_t(k)]);
  }
  std::vector<double> losses(static_cast<size_t>(parts_), 0.0);
  std::vector<uint64_t> draws(static_cast<size_t>(parts_), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts_));
  pred->assign(size_t(bt.batch), 0.0f);
  std::vector<double> part_ms(static_cast<size_t>(parts_), 0.0);
  std::vector<int> part_thread(static_cast<size_t>(parts_), 0);
  const uint64_t counter = dropout.counter();
  const int team = std::max(1, std::min(parts_, omp_get_max_threads()));
  // One part per thread; the ops inside a part see an active parallel region and stay on its
  // thread (nested regions get one thread; oneDNN runs on the calling thread there).
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (int k = 0; k < parts_; ++k) {
    SubBatch& sub = subs_[size_t(k)];
    Tape<float>& tape = *tapes_[size_t(k)];
    tape.clear();
    if (sub.points.empty()) continue;
    const double t0 = thread_cpu_ms();
    part_thread[size_t(k)] = omp_get_thread_num();
    try {
      select_points_into(bt, trees, sub.points, &sub.bt, &sub.trees);  // on the part's thread
      Rng rng(dropout.seed() ^ (0xD1B54A32D192ED03ull * uint64_t(k + 1)));
      rng.set_counter(counter);
      tape.set_training(true);
      tape.set_grad_enabled(true);
      const NodeId y = forward(tape, sub, rng);
      const NodeId l = loss(tape, y, sub);
      losses[size_t(k)] = double(tape.value(l).data[0]);
      const float* yv = tape.value(y).data;
      for (size_t j = 0; j < sub.points.size(); ++j) (*pred)[size_t(sub.points[j])] = yv[j];
      draws[size_t(k)] = rng.counter() - counter;
      tape.backward(l);
    } catch (...) {
      errors[size_t(k)] = std::current_exception();
    }
    part_ms[size_t(k)] = thread_cpu_ms() - t0;
  }
  std::vector<double> thread_ms(static_cast<size_t>(team), 0.0);
  for (int k = 0; k < parts_; ++k) thread_ms[size_t(part_thread[size_t(k)])] += part_ms[size_t(k)];
  excess_ms_ = *std::max_element(thread_ms.begin(), thread_ms.end()) - thread_ms[0];
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  dropout.set_counter(counter + *std::max_element(draws.begin(), draws.end()));
  // Parameter::grad (part 0's) += part 1's, += part 2's, ... element by element: the same bits
  // for any thread count; each buffer is zeroed as it is read, ready for the next step.
  const int64_t np = int64_t(params_.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (int64_t i = 0; i < np; ++i) {
    float* g = params_[size_t(i)]->grad.data();
    const size_t n = params_[size_t(i)]->grad.size();
    for (int k = 1; k < parts_; ++k) {
      float* gk = grads_[size_t(k)][size_t(i)].data();
      for (size_t j = 0; j < n; ++j) g[j] += gk[j];
      std::memset(gk, 0, n * sizeof(float));
    }
  }
  double sum = 0;
  for (double v : losses) sum += v;
  return sum;
}

size_t SubBatchStep::peak_bytes() const {
  size_t total = 0;
  for (const auto& t : tapes_) total += t->peak_bytes();
  return total;
}

}  // namespace lcm::train
