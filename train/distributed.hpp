// Data-parallel training across processes (lcm-train under mpirun or srun): the communicator
// (a single-process one that does nothing, and the MPI one when built with LCM_HAVE_MPI), the
// split of a global batch into whole programs per rank, and the fixed-order gradient sum that
// leaves bit-identical gradients on every rank (docs/design.md, "Data-parallel training").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "data/dataset.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/parameter.hpp"

namespace lcm::train {

/// The processes of one training job. Every collective (barrier, sum_in_rank_order, broadcast,
/// any) must be called by all ranks in the same order. The single-process communicator
/// (size 1) returns its inputs unchanged.
class Communicator {
 public:
  virtual ~Communicator() = default;
  /// Number of ranks (≥ 1), this process's rank in [0, size), and its rank among the ranks of
  /// its host (selects the GPU under training.device=cuda).
  virtual int size() const = 0;
  virtual int rank() const = 0;
  virtual int local_rank() const = 0;
  /// "MPI" or "single process" (startup line).
  virtual std::string kind() const = 0;
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
  /// Element-wise sum over ranks of `n` floats at `data`, in place: element k becomes
  /// ((x_0[k] + x_1[k]) + x_2[k]) + … over ranks 0..size−1 in that order on every rank, so all
  /// ranks hold the same bits whatever the transport's own reduction order.
  virtual void sum_in_rank_order(float* data, int64_t n) = 0;
  /// The same for doubles (loss and APE sums, counts).
  virtual void sum_in_rank_order(double* data, int64_t n) = 0;
  /// Copies rank `root`'s `n` doubles at `data` to every rank.
  virtual void broadcast(double* data, int64_t n, int root) = 0;
  /// True on every rank when `flag` is true on at least one (a stop request, say).
  virtual bool any(bool flag) = 0;
  /// Ends every rank of the job with exit status `code` (never returns).
  [[noreturn]] virtual void abort(int code) = 0;
};

/// The communicator of this process: the MPI world after init_distributed() found an MPI
/// launch, else the single-process one.
Communicator& communicator();

/// Starts MPI when this build has it (LCM_HAVE_MPI) and the process was launched by mpirun /
/// srun (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, PMI_SIZE or SLURM_STEP_NUM_TASKS > 1 set);
/// a plain start stays single-process and never touches MPI. Call once, first thing in main.
/// Throws std::runtime_error when launched by an MPI launcher into a build without MPI and the
/// launcher asks for more than one rank (N copies would each train alone and race on the files).
void init_distributed(int argc, char** argv);

/// Ends the job after the tool's body returned `exit_code`: MPI_Finalize for 0 and 130 (every
/// rank reaches them together); otherwise the error was this rank's alone (or came before the
/// ranks agreed) and MPI_Abort ends all ranks with `exit_code`. Returns `exit_code`.
int finish_distributed(int exit_code);

/// While alive on a rank other than 0 of a multi-rank job, stdout and stderr go to /dev/null so
/// that the job prints rank 0's header, table and notes once; the destructor (also during stack
/// unwinding) restores them, so an error escaping the tool's body is printed by that rank.
/// A no-op on rank 0 and in a single process.
class QuietNonRootOutput {
 public:
  explicit QuietNonRootOutput(const Communicator& comm);
  ~QuietNonRootOutput();
  QuietNonRootOutput(const QuietNonRootOutput&) = delete;
  QuietNonRootOutput& operator=(const QuietNonRootOutput&) = delete;

 private:
  int saved_out_ = -1, saved_err_ = -1;
};

/// The device of this rank for training.device `d`: in a multi-rank job, cuda (= cuda:0) is one
/// GPU per rank, cuda:<local rank mod visible GPUs> (so all ranks of a one-GPU host share it);
/// cuda:N with N > 0 pins every rank to N; cpu stays cpu. One process: `d` unchanged.
DeviceSpec rank_device(const DeviceSpec& d, const Communicator& comm);

/// The tool name with the rank for messages under MPI ("lcm-train (rank 1 of 2)"), the plain
/// name in a single process.
std::string tool_name_with_rank(const std::string& tool, const Communicator& comm);

/// Which rank trains which datapoints of a batch: whole programs per rank (the ranking loss's
/// pairs are all within one program), balanced by datapoint count: programs by decreasing
/// datapoint count (ties: first seen in the batch first) each go to their home rank
/// (program index mod ranks, the same in every batch, so that a rank needs the features of few
/// programs) while that rank stays within ceil(B / ranks) + max(1, that / 16) datapoints, else to
/// the rank with the fewest datapoints so far (ties: the lowest rank). Deterministic. Returns
/// [ranks] lists of indices into batch.points, each in batch order (a rank may get none when the
/// batch has fewer programs than ranks). Throws std::invalid_argument for ranks < 1.
std::vector<std::vector<int32_t>> split_batch_by_program(const data::Batch& batch, int ranks);

/// Number of ordered pairs (i, j) of datapoints of the same program with
/// ln speedup_i − ln speedup_j > 0 (float logs, compared in double), i.e. the pairs that
/// ops::pairwise_logistic averages over (min_gap 0). speedup, program_of: [B].
int64_t ranking_pair_count(const std::vector<float>& speedup,
                           const std::vector<int32_t>& program_of);

/// Number of programs with ≥ 2 datapoints in program_of [B], i.e. the groups that ops::listnet
/// averages over.
int64_t ranking_group_count(const std::vector<int32_t>& program_of);

/// The units the ranking term of `loss` averages over (LossWeights, config::RankingUnits):
/// ranking_group_count for a term of RankingUnits::Programs (listnet), else ranking_pair_count
/// (pairwise, lambdarank; unused by an objective without a ranking term).
int64_t ranking_unit_count(const config::Objective& loss, const std::vector<float>& speedup,
                           const std::vector<int32_t>& program_of);

/// This rank's share of a training split: each global batch reduced to this rank's points, the
/// global sizes the loss weights need, and what freeing the unused programs saved.
struct RankShare {
  /// Per global batch b: its datapoint count, ranking-pair count and count of programs with ≥ 2
  /// datapoints (all ranks), and the index of this rank's part in the reduced Dataset::batches
  /// (−1 when this rank has no point of b).
  std::vector<int64_t> global_points, global_pairs, global_groups;
  std::vector<int64_t> local_batch;
  int64_t max_programs_per_batch = 0, min_programs_per_batch = 0;
  int64_t batches_with_idle_ranks = 0;  // batches with fewer programs than ranks
  /// Datapoints of the busiest rank summed over the batches, and of all ranks: their ratio is
  /// the share of the work on the critical path (1 / ranks when perfectly balanced).
  int64_t busiest_points = 0, total_points = 0;
  int64_t programs_kept = 0, programs_freed = 0;
  int64_t bytes_freed = 0, bytes_before = 0;  // ProgramFeatures payload (approximate)
};

/// Reduces `ds.batches` to rank `rank`'s part of each batch (split_batch_by_program; batches
/// where it has no point are left out, RankShare::local_batch maps them) and, when
/// `free_unused`, empties the ProgramFeatures of programs none of its batches uses (their name
/// stays; indices keep their meaning). With ranks == 1 the batches stay as they are. The pair
/// counts use the labels (ProgramFeatures::speedup) before anything is freed.
RankShare take_rank_share(data::Dataset& ds, int ranks, int rank, bool free_unused);

/// The gradients of a parameter list as one flat buffer, summed over ranks in rank order
/// (Communicator::sum_in_rank_order). Host gradients are copied in and out of the buffer; CUDA
/// gradients (Parameter::device_grad) go through a pinned host buffer (Open MPI from Debian is
/// not CUDA-aware).
class GradientReducer {
 public:
  /// `params` must outlive the reducer; their sizes are fixed at construction.
  explicit GradientReducer(std::vector<Parameter<float>*> params);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  /// Replaces every parameter's gradient by its sum over ranks (a no-op for one rank).
  void all_reduce(Communicator& comm);

 private:
  std::vector<Parameter<float>*> params_;
  int64_t total_ = 0;
  std::vector<float> host_;  // the flat buffer when every gradient lives on the host
  PinnedBuffer pinned_;      // the flat buffer when a gradient lives on a CUDA device
};

}  // namespace lcm::train
