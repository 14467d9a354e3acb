// CostModel::forward_parts (model/cost_model.hpp): one query's datapoints forwarded in slices on
// the OpenMP threads, one tape per thread.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/threads.hpp"
#include "model/cost_model.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace lcm::model {
namespace {

/// Datapoints [begin, end) of `bt` (one segment, one program) as a batch of their own: their
/// computation and loop rows, labels and program_of; the program's expression rows whole.
data::BatchTensors slice_datapoints(const data::BatchTensors& bt, int64_t begin, int64_t end) {
  const int64_t C = bt.n_comps, L = bt.n_loops;
  data::BatchTensors s;
  s.batch = end - begin;
  s.n_comps = C;
  s.n_loops = L;
  constexpr int64_t CW = data::kCompVectorWidth, LW = data::kLoopVectorWidth;
  s.comp.assign(bt.comp.begin() + begin * C * CW, bt.comp.begin() + end * C * CW);
  s.loops.assign(bt.loops.begin() + begin * L * LW, bt.loops.begin() + end * L * LW);
  if (!bt.speedup.empty()) s.speedup.assign(bt.speedup.begin() + begin, bt.speedup.begin() + end);
  s.programs = bt.programs;
  s.program_of.assign(bt.program_of.begin() + begin, bt.program_of.begin() + end);
  s.expr = bt.expr;
  return s;
}

}  // namespace

template <class T>
int CostModel<T>::inference_parts(int64_t batch) {
  constexpr int64_t kRowsPerPart = 64, kMaxParts = 8;
  return int(std::clamp<int64_t>((batch + kRowsPerPart - 1) / kRowsPerPart, 1, kMaxParts));
}

template <class T>
std::vector<T> CostModel<T>::forward_parts(Tape<T>& tape, const data::ProgramTree& tree,
                                           const data::BatchTensors& bt,
                                           const std::vector<T>* program_rows,
                                           const T* sched_weight) {
  if (tape.device() != Device::CPU)
    throw std::logic_error("CostModel::forward_parts: a CPU tape only");
  if (cfg_.encoder.kind != EncoderKind::None)
    throw std::logic_error(
        "CostModel::forward_parts: not available for a model with a pre-trained encoder");
  const bool one_program =
      bt.segments.size() <= 1 && bt.programs.size() == 1 && bt.n_comps > 0 && bt.n_loops > 0;
  const int parts = one_program ? inference_parts(bt.batch) : 1;
  // one slice's forward on `t` → its ŷ on the host
  auto run = [&](Tape<T>& t, const data::BatchTensors& part) {
    t.clear();
    t.set_training(false);
    t.set_grad_enabled(false);
    Rng rng(0);  // eval mode: no dropout draws from it
    NodeId y;
    if (program_rows) {
      ForwardInputs<T> in = prepare_shared_inputs(data::BatchTrees{&tree}, part, program_rows);
      in.sched_weight = sched_weight;
      y = forward(t, tree, in, rng);
    } else {
      y = forward(t, tree, part, rng);
    }
    std::vector<T> out = to_host(t.value(y));
    t.clear();
    return out;
  };
  if (parts == 1) return run(tape, bt);
  // The slices share the program's first-layer rows and the schedule columns of its weight:
  // computed once here rather than once per slice (the expression LSTM, a GEMV over the static
  // columns, and a gather of the weight's columns).
  std::vector<T> own_rows, own_weight;
  if (!program_rows && cfg_.share_static_columns) {
    own_rows = this->program_rows(tape, data::BatchTrees{&tree}, bt);
    tape.clear();
    try {  // static columns that differ within the program: each slice's forward() alone
      (void)prepare_shared_inputs(data::BatchTrees{&tree}, bt, &own_rows);
      own_weight = schedule_weight();
      program_rows = &own_rows;
      sched_weight = own_weight.data();
    } catch (const std::invalid_argument&) {
      own_rows.clear();
    }
  }
  const int64_t B = bt.batch, per = (B + parts - 1) / parts;
  std::vector<data::BatchTensors> slices;
  for (int64_t b = 0; b < B; b += per)
    slices.push_back(slice_datapoints(bt, b, std::min(B, b + per)));
  std::vector<T> out(static_cast<size_t>(B));
  std::vector<std::string> errors(slices.size());
  const int threads = std::max(1, std::min(num_threads(), int(slices.size())));
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int tid = 0, nt = 1;
#endif
    // the calling thread uses the caller's tape; a worker thread keeps its own across queries
    thread_local std::unique_ptr<Tape<T>> own;
    if (tid != 0 && !own) own = std::make_unique<Tape<T>>();
    Tape<T>& t = tid == 0 ? tape : *own;
    for (size_t p = size_t(tid); p < slices.size(); p += size_t(nt)) {
      try {
        const std::vector<T> y = run(t, slices[p]);
        std::copy(y.begin(), y.end(), out.begin() + int64_t(p) * per);
      } catch (const std::exception& e) {  // never across the parallel region
        errors[p] = e.what();
      }
    }
  }
  for (const std::string& e : errors)
    if (!e.empty()) throw std::invalid_argument(e);
  return out;
}

template int CostModel<float>::inference_parts(int64_t);
template int CostModel<double>::inference_parts(int64_t);
template std::vector<float> CostModel<float>::forward_parts(Tape<float>&, const data::ProgramTree&,
                                                            const data::BatchTensors&,
                                                            const std::vector<float>*,
                                                            const float*);
template std::vector<double> CostModel<double>::forward_parts(Tape<double>&,
                                                              const data::ProgramTree&,
                                                              const data::BatchTensors&,
                                                              const std::vector<double>*,
                                                              const double*);

}  // namespace lcm::model
