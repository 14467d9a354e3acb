// Data-parallel training across processes (see distributed.hpp): the communicators, the split of
// a batch into whole programs per rank and the fixed-order gradient sum.
#include "train/distributed.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#ifdef LCM_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings are deprecated)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#endif

namespace lcm::train {
namespace {

/// One process: every collective returns its input.
class SingleProcess final : public Communicator {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  int local_rank() const override { return 0; }
  std::string kind() const override { return "single process"; }
  void barrier() override {}
  void sum_in_rank_order(float*, int64_t) override {}
  void sum_in_rank_order(double*, int64_t) override {}
  void broadcast(double*, int64_t, int) override {}
  bool any(bool flag) override { return flag; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

#ifndef LCM_HAVE_MPI
/// The integer value of environment variable `name`, or 0 when unset or not a number.
long env_long(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : 0;
}
#endif

/// True when an MPI launcher (Open MPI's mpirun, or srun / another PMI / PMIx launcher) started
/// this process.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

#ifdef LCM_HAVE_MPI
/// MPI_COMM_WORLD. Sums use MPI_Alltoallv + MPI_Allgatherv, never MPI_Allreduce's float
/// arithmetic, whose association may differ between ranks and algorithms.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
  }
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int local_rank() const override { return local_rank_; }
  std::string kind() const override { return "MPI"; }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void sum_in_rank_order(float* data, int64_t n) override { sum(data, n, MPI_FLOAT); }
  void sum_in_rank_order(double* data, int64_t n) override { sum(data, n, MPI_DOUBLE); }
  void broadcast(double* data, int64_t n, int root) override {
    MPI_Bcast(data, checked_int(n), MPI_DOUBLE, root, MPI_COMM_WORLD);
  }
  bool any(bool flag) override {
    int in = flag ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return out != 0;
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);  // (MPI_Abort does not return)
  }

 private:
  static int checked_int(int64_t n) {
    if (n < 0 || n > INT_MAX)
      throw std::length_error("MPI: " + std::to_string(n) + " values in one message");
    return int(n);
  }

  /// Reduce-scatter by slices (rank s sums slice s over ranks 0..N−1 in order), then all-gather:
  /// every rank ends with the same bits.
  template <class T>
  void sum(T* data, int64_t n, MPI_Datatype type) {
    checked_int(n);
    const int N = size_;
    std::vector<int> count(static_cast<size_t>(N)), offset(static_cast<size_t>(N));
    for (int s = 0, off = 0; s < N; ++s) {
      count[size_t(s)] = int(n / N + (s < n % N ? 1 : 0));
      offset[size_t(s)] = off;
      off += count[size_t(s)];
    }
    const int mine = count[size_t(rank_)];
    std::vector<int> recv_count(static_cast<size_t>(N), mine), recv_offset(static_cast<size_t>(N));
    for (int r = 0; r < N; ++r) recv_offset[size_t(r)] = r * mine;
    std::vector<T> slices(size_t(N) * size_t(mine));
    MPI_Alltoallv(data, count.data(), offset.data(), type, slices.data(), recv_count.data(),
                  recv_offset.data(), type, MPI_COMM_WORLD);
    std::vector<T> total(slices.begin(), slices.begin() + mine);
    for (int r = 1; r < N; ++r)
      for (int k = 0; k < mine; ++k) total[size_t(k)] += slices[size_t(r) * size_t(mine) + k];
    MPI_Allgatherv(total.data(), mine, type, data, count.data(), offset.data(), type,
                   MPI_COMM_WORLD);
  }

  int size_ = 1, rank_ = 0, local_rank_ = 0;
};
#endif

std::unique_ptr<Communicator>& world() {
  static std::unique_ptr<Communicator> w = std::make_unique<SingleProcess>();
  return w;
}

#ifdef LCM_HAVE_MPI
/// True once MPI_Init_thread ran (finish_distributed then finalizes MPI).
bool mpi_started = false;
#endif

/// Approximate bytes held by a program's features (the vectors that scale with its size).
int64_t payload_bytes(const data::ProgramFeatures& p) {
  int64_t b =
      int64_t(sizeof(float)) * int64_t(p.comp_static.size() + p.expr.size() + p.comp_sched.size() +
                                       p.loops.size() + p.speedup.size());
  b += int64_t(sizeof(double)) * int64_t(p.min_time_ms.size());
  b += int64_t(sizeof(int32_t)) * int64_t(p.schedule_index.size());
  for (const std::string& s : p.sched_str) b += int64_t(s.size());
  return b;
}

}  // namespace

Communicator& communicator() {
  return *world();
}

void init_distributed(int argc, char** argv) {
  if (!launched_by_mpi()) return;
#ifdef LCM_HAVE_MPI
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  mpi_started = true;
  world() = std::make_unique<MpiCommunicator>();
#else
  (void)argc, (void)argv;
  const long n = std::max(env_long("OMPI_COMM_WORLD_SIZE"), env_long("PMI_SIZE"));
  if (n > 1)
    throw std::runtime_error("started as " + std::to_string(n) +
                             " MPI ranks, but this build has no MPI (configure with Open MPI "
                             "installed, libopenmpi-dev, and LCM_MPI=ON): each rank would train "
                             "alone on the same files; run one process or rebuild");
#endif
}

int finish_distributed(int exit_code) {
#ifdef LCM_HAVE_MPI
  if (mpi_started) {
    if (exit_code != 0 && exit_code != 130) world()->abort(exit_code);
    MPI_Finalize();
  }
#endif
  return exit_code;
}

QuietNonRootOutput::QuietNonRootOutput(const Communicator& comm) {
  if (comm.rank() == 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (null_fd < 0) return;  // nothing to redirect to: the rank prints as rank 0 does
  saved_out_ = ::dup(1);
  saved_err_ = ::dup(2);
  ::dup2(null_fd, 1);
  ::dup2(null_fd, 2);
  ::close(null_fd);
}

QuietNonRootOutput::~QuietNonRootOutput() {
  std::fflush(stdout);
  std::fflush(stderr);
  if (saved_out_ >= 0) ::dup2(saved_out_, 1), ::close(saved_out_);
  if (saved_err_ >= 0) ::dup2(saved_err_, 2), ::close(saved_err_);
}

DeviceSpec rank_device(const DeviceSpec& d, const Communicator& comm) {
  if (comm.size() == 1 || d.kind != Device::CUDA || d.index != 0) return d;
  int visible = 1;
#ifdef LCM_WITH_CUDA
  visible = std::max(1, cuda::device_count());
#endif
  DeviceSpec r = d;
  r.index = comm.local_rank() % visible;
  return r;
}

std::string tool_name_with_rank(const std::string& tool, const Communicator& comm) {
  if (comm.size() == 1) return tool;
  return tool + " (rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
         ")";
}

std::vector<std::vector<int32_t>> split_batch_by_program(const data::Batch& batch, int ranks) {
  if (ranks < 1)
    throw std::invalid_argument("split_batch_by_program: ranks " + std::to_string(ranks));
  // programs in first-seen order with their datapoint counts
  std::unordered_map<int32_t, int32_t> slot_of;
  std::vector<int64_t> count;
  std::vector<int32_t> slot(batch.points.size());
  for (size_t i = 0; i < batch.points.size(); ++i) {
    auto it = slot_of.emplace(batch.points[i].program, int32_t(count.size())).first;
    if (size_t(it->second) == count.size()) count.push_back(0);
    ++count[size_t(it->second)];
    slot[i] = it->second;
  }
  std::vector<int32_t> order(count.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = int32_t(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return count[size_t(a)] > count[size_t(b)]; });
  std::vector<int32_t> program_of_slot(count.size());
  for (const auto& [program, k] : slot_of) program_of_slot[size_t(k)] = program;
  const int64_t total = int64_t(batch.points.size());
  const int64_t target = (total + ranks - 1) / ranks;
  const int64_t cap = target + std::max<int64_t>(1, target / 16);
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0);
  std::vector<int32_t> owner(count.size());
  for (int32_t k : order) {
    // the program's home rank while it has room (so a rank meets the same programs in every
    // batch and frees the others' features), else the least loaded rank
    size_t r = size_t(program_of_slot[size_t(k)] % ranks);
    if (load[r] + count[size_t(k)] > cap)
      r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    owner[size_t(k)] = int32_t(r);
    load[r] += count[size_t(k)];
  }
  std::vector<std::vector<int32_t>> share(static_cast<size_t>(ranks));
  for (size_t i = 0; i < batch.points.size(); ++i)
    share[size_t(owner[size_t(slot[i])])].push_back(int32_t(i));
  return share;
}

int64_t ranking_pair_count(const std::vector<float>& speedup,
                           const std::vector<int32_t>& program_of) {
  std::unordered_map<int32_t, std::vector<double>> logs;
  for (size_t i = 0; i < speedup.size() && i < program_of.size(); ++i) {
    const double l = double(std::log(speedup[i]));  // float log, as training_loss computes it
    if (!std::isnan(l)) logs[program_of[i]].push_back(l);  // NaN is in no pair
  }
  int64_t pairs = 0;
  for (auto& [program, v] : logs) {
    std::sort(v.begin(), v.end());
    for (size_t a = 0; a < v.size(); ++a)  // pairs (a, j) with v[j] < v[a]
      pairs += int64_t(std::lower_bound(v.begin(), v.end(), v[a]) - v.begin());
  }
  return pairs;
}

int64_t ranking_group_count(const std::vector<int32_t>& program_of) {
  std::unordered_map<int32_t, int64_t> n;
  for (int32_t p : program_of) ++n[p];
  int64_t groups = 0;
  for (const auto& [program, count] : n) groups += count >= 2;
  return groups;
}

int64_t ranking_unit_count(const config::Objective& loss, const std::vector<float>& speedup,
                           const std::vector<int32_t>& program_of) {
  return loss.ranking && config::info(*loss.ranking).units == config::RankingUnits::Programs
             ? ranking_group_count(program_of)
             : ranking_pair_count(speedup, program_of);
}

RankShare take_rank_share(data::Dataset& ds, int ranks, int rank, bool free_unused) {
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("take_rank_share: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks));
  RankShare s;
  const size_t nb = ds.batches.size();
  s.global_points.resize(nb);
  s.global_pairs.resize(nb);
  s.global_groups.resize(nb);
  s.local_batch.resize(nb);
  std::vector<data::Batch> mine;
  for (size_t b = 0; b < nb; ++b) {
    const data::Batch& batch = ds.batches[b];
    s.global_points[b] = batch.size();
    std::vector<float> y(batch.points.size());
    std::vector<int32_t> program_of(batch.points.size());
    for (size_t i = 0; i < batch.points.size(); ++i) {
      const data::DatapointRef& r = batch.points[i];
      y[i] = ds.programs.at(size_t(r.program)).speedup.at(size_t(r.schedule));
      program_of[i] = r.program;
    }
    s.global_pairs[b] = ranking_pair_count(y, program_of);
    s.global_groups[b] = ranking_group_count(program_of);
    const std::vector<std::vector<int32_t>> share = split_batch_by_program(batch, ranks);
    std::unordered_map<int32_t, char> distinct;
    for (const data::DatapointRef& r : batch.points) distinct.emplace(r.program, 1);
    const int64_t np = int64_t(distinct.size());
    s.max_programs_per_batch = b == 0 ? np : std::max(s.max_programs_per_batch, np);
    s.min_programs_per_batch = b == 0 ? np : std::min(s.min_programs_per_batch, np);
    if (np < ranks) ++s.batches_with_idle_ranks;
    size_t busiest = 0;
    for (const auto& part : share) busiest = std::max(busiest, part.size());
    s.busiest_points += int64_t(busiest);
    s.total_points += batch.size();
    if (ranks == 1) {
      s.local_batch[b] = int64_t(b);
      continue;
    }
    const std::vector<int32_t>& idx = share[size_t(rank)];
    if (idx.empty()) {
      s.local_batch[b] = -1;
      continue;
    }
    data::Batch part;
    part.group = batch.group;
    part.points.reserve(idx.size());
    for (int32_t i : idx) part.points.push_back(batch.points[size_t(i)]);
    s.local_batch[b] = int64_t(mine.size());
    mine.push_back(std::move(part));
  }
  if (ranks > 1) ds.batches = std::move(mine);
  std::vector<char> used(ds.programs.size(), 0);
  for (const data::Batch& batch : ds.batches)
    for (const data::DatapointRef& r : batch.points) used[size_t(r.program)] = 1;
  for (size_t p = 0; p < ds.programs.size(); ++p) {
    data::ProgramFeatures& f = ds.programs[p];
    const int64_t bytes = payload_bytes(f);
    s.bytes_before += bytes;
    if (used[p] || !free_unused || ranks == 1) {
      ++s.programs_kept;
      continue;
    }
    data::ProgramFeatures empty;
    empty.name = f.name;
    empty.footprint = f.footprint;
    empty.n_comps = f.n_comps;
    empty.n_loops = f.n_loops;
    f = std::move(empty);
    s.bytes_freed += bytes;
    ++s.programs_freed;
  }
  return s;
}

GradientReducer::GradientReducer(std::vector<Parameter<float>*> params)
    : params_(std::move(params)) {
  for (const Parameter<float>* p : params_) total_ += p->numel();
}

void GradientReducer::all_reduce(Communicator& comm) {
  if (comm.size() == 1 || total_ == 0) return;
  bool on_device = false;
  for (const Parameter<float>* p : params_) on_device = on_device || p->device_grad != nullptr;
  float* buf = nullptr;
  if (on_device) {
    if (!pinned_.get()) pinned_ = PinnedBuffer(size_t(total_) * sizeof(float));
    buf = static_cast<float*>(pinned_.get());
  } else {
    host_.resize(size_t(total_));
    buf = host_.data();
  }
  int64_t off = 0;
  for (Parameter<float>* p : params_) {
    if (p->device_grad)
      device_download(buf + off, p->device_grad, p->numel());
    else
      std::memcpy(buf + off, p->grad.data(), sizeof(float) * size_t(p->numel()));
    off += p->numel();
  }
  comm.sum_in_rank_order(buf, total_);
  off = 0;
  for (Parameter<float>* p : params_) {
    if (p->device_grad)
      device_upload(p->device_grad, buf + off, p->numel());
    else
      std::memcpy(p->grad.data(), buf + off, sizeof(float) * size_t(p->numel()));
    off += p->numel();
  }
}

}  // namespace lcm::train
