// The trainer behind fit_model() (train/trainer.hpp), private to its files: trainer.cpp (the
// phases and their setup: checks, data, model, resume, device), trainer_epoch.cpp (the epoch
// loop: steps, validation, checkpoints) and trainer_report.cpp (what the run prints, its end).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "data/row_budget.hpp"
#include "data/skips.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "model/input_scaling.hpp"
#include "model/metrics.hpp"
#include "model/scoring.hpp"
#include "model/speedup.hpp"
#include "model/training_memory.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "train/device_batch_store.hpp"
#include "train/distributed.hpp"
#include "train/early_stopping.hpp"
#include "train/encoder.hpp"
#include "train/evaluate.hpp"
#include "train/init_weights.hpp"
#include "train/interrupt.hpp"
#include "train/losses.hpp"
#include "train/overlap.hpp"
#include "train/progress.hpp"
#include "train/report.hpp"
#include "train/resume.hpp"
#include "train/run_files.hpp"
#include "train/run_state.hpp"
#include "train/schedules.hpp"
#include "train/seeds.hpp"
#include "train/splits.hpp"
#include "train/startup_checks.hpp"
#include "train/step_graphs.hpp"
#include "train/sub_batches.hpp"
#include "train/train_options.hpp"
#include "util/run_lock.hpp"

namespace lcm::train {

/// Where to continue an interrupted epoch: batches already trained and their partial sums.
struct EpochStart {
  int64_t batch = 0;
  double loss_sum = 0, ape_sum = 0, lr = 0;
};

class HostBatchPrefetch;  // trainer_epoch.cpp

/// One training run; the phases of fit_model() in order.
class Trainer {
 public:
  Trainer(const config::Config& c, const TrainOptions& o)
      : c_(c), o_(o), stop_(o.stop ? o.stop : &stop_requested()), paths_(run_paths(c)) {}

  TrainResult run();

 private:
  /// Everything that can fail before the data is read (which can take minutes), and --resume's
  /// verdict from the saved metadata. False when there is nothing to do.
  bool check_before_data();

  /// Keeps the expanded schedule rows of as many programs (training first) as fit
  /// training.host_memory_budget; the others stay compact, their rows rebuilt at batch time. One
  /// line on stderr when some program is left compact.
  void place_host_rows();

  /// One line on stderr (rank 0): what host memory lies outside training.host_memory_budget
  /// and how large it is (data/row_budget.hpp host_memory_outside_summary).
  void print_host_memory() const;

  /// Prepares (or reads from the cache) both splits, printing each file's skip summary, and
  /// fits the input scaling on the training split.
  void prepare_data();

  /// This rank's part of every training batch (whole programs per rank, train/distributed.hpp);
  /// the features of programs it never trains are freed, and validation is rank 0's alone. With
  /// one process every batch stays whole.
  void take_share();

  /// The fixed-order gradient sums over ranks (after place_on_device: they read where each
  /// gradient lives).
  void make_gradient_reducers();

  /// True on every rank when a stop was requested on any (a rank's Ctrl-C or SIGTERM stops all
  /// at the same step).
  bool stop_now() { return comm_.size() > 1 ? comm_.any(stop_->load()) : stop_->load(); }

  /// The next batch after global batch `b` (wrapping) that has a part on this rank, as an index
  /// into this rank's batches; −1 when it has none.
  int64_t next_local_batch(int64_t b) const;

  /// The model, its optimizers and schedules. A pre-trained encoder (docs/model-spec.md §8) has its
  /// own optimizer: frozen (eval mode, no updates) before training.fine_tune_epoch, then fine-tuned
  /// with training.fine_tune_lr; the main optimizer updates every other parameter.
  void build();

  /// --resume: weights, optimizer state, schedule, RNG and history of the saved step. False
  /// when the run is already over (said on stderr; normally decided by precheck_resume).
  bool restore();

  /// Loads `last` and the optimizer states of the saved step into the model, optimizers,
  /// schedules, dropout RNG, history and resume_. Throws std::runtime_error when the model and
  /// optimizer files are of different steps or the saved batch lies outside this data's epoch.
  void load_saved_state();

  /// A schedule sized by training.max_epochs is recomputed over a new total: say so, with the
  /// learning rate of the saved step under the saved and the new total.
  void warn_recomputed_schedule() const;

  /// CUDA: parameters (and, at the first step, the optimizer moments) move to the device once;
  /// as many batches' inputs as fit training.gpu_memory_budget stay there (training first,
  /// validation with the rest), the others are streamed.
  void place_on_device();

  /// The run's header on stdout: experiment, model size, data, optimizer and schedule, the
  /// objective and the selection metric, the ranks line under MPI, the epoch table's heads.
  void print_header() const;

  /// The startup line of a multi-rank run: ranks, threads and devices, programs per batch
  /// against ranks (with the idle-rank warning), and the memory the share freed.
  void print_ranks_line() const;

  /// This rank's own dropout stream at global step (epoch, b) under MPI: its start depends on the
  /// rank and the step only, not on a count of earlier draws, so that --resume continues the same
  /// masks. (They differ from the one-process run's masks.)
  void seed_rank_dropout(int epoch, int64_t b);

  /// Saves `last` (model and optimizer state). `mid` is the position inside epoch
  /// `epochs_done` + 1 when interrupted there (batch 0: at the epoch boundary).
  void save_last(int epochs_done, const EpochStart& mid = {});

  /// Trains the batches of one epoch (from the resumed batch in the first epoch of a resume).
  /// False when a stop request came before the epoch's last batch (`last` saved to resume).
  bool train_epoch(int epoch);

  /// One optimizer step on global batch `b`: this rank's part forward and backward (nothing when
  /// no point of b is here), under MPI the ranks' sums of gradients, loss and APEs, gradient
  /// clipping, the optimizers and a per-batch LR schedule. Returns the batch's loss.
  double train_step(int epoch, int64_t b, HostBatchPrefetch* prefetch);

  /// training.cuda_graphs (trainer_graphs.cpp): after place_on_device, decides whether steps are
  /// captured (a cuda device, one process, batches in a DeviceBatchStore) and makes the graph
  /// cache and the per-step device state; one line on stdout saying which.
  void make_step_graphs();

  /// The step on global batch `b` as a replay of its captured graph (captured first when the
  /// cache has room): the dropout counter and the optimizer's scalars uploaded, one graph launch,
  /// the loss and predictions read back; then what train_step does after the optimizer. False
  /// (nothing done) when the step must run uncaptured: the batch is streamed, the cache is full,
  /// or its capture was refused. Sets *loss to the batch's loss. Throws std::runtime_error when
  /// the loss is not finite (the update of that step has then been applied on the device).
  bool graph_step(int epoch, int64_t b, double* loss);

  /// Captures the training step of local batch `lb` (global batch `b`) into the cache. nullptr
  /// when the capture fails (the batch is marked refused, one warning on stderr the first time).
  CapturedStep* capture_step(int64_t b, int64_t lb);

  /// Forward and backward of this rank's part `lb` of global batch `b` in training mode: returns
  /// its loss and adds each datapoint's APE (its prediction as a speedup ×) to *ape. Throws
  /// std::runtime_error when the loss is not finite.
  double forward_backward(int epoch, int64_t b, int64_t lb, HostBatchPrefetch* prefetch,
                          double* ape);

  /// forward_backward on the CPU in training.cpu_sub_batches parts (train/sub_batches.hpp) of
  /// the host batch `in` (local batch `lb` of global batch `b`): the same loss and APEs, the
  /// gradients summed into the parameters'. Same errors as forward_backward.
  double forward_backward_split(int epoch, int64_t b, int64_t lb, const BatchInput& in,
                                double* ape);

  /// The first local batch after global batch `b` in this epoch (no wrap); −1 when none.
  int64_t next_local_batch_in_epoch(int64_t b) const;

  /// One line on stderr (rank 0) after the run's first step: what it added (its tape's peak).
  void print_first_step_memory();

  /// A stop request after batch `b` (not the epoch's last) of epoch `epoch`: saves `last` and
  /// the logs so that --resume continues at batch b + 2.
  void save_interrupted_epoch(int epoch, int64_t b);

  /// The weights of this rank's share `bt` of global batch `b` (LossWeights; with one process
  /// both are bt.batch / batch_size as before).
  LossWeights loss_weights(int64_t b, const lcm::data::BatchTensors& bt, float batch_size) const;

  /// Validates, logs and checkpoints epoch `epoch`. False when the run ends here: early
  /// stopping (stopped_early_) or a stop request.
  bool end_epoch(int epoch);

  /// The record of epoch `epoch` as far as training knows it: training MAPE and objective,
  /// learning rate, throughput of this process (a resumed epoch counts only the batches trained
  /// after the resume).
  EpochRecord training_record(int epoch, double train_seconds) const;

  /// The validation metrics of `r` (rank 0 predicts the validation split; under MPI it sends
  /// them to every rank, so that all keep the same history and early-stopping state), and with
  /// training.log_train_metrics the training split's ranking metrics.
  void validate(EpochRecord& r);

  /// Writes `best` after epoch `epoch` when it improved the selection metric. Until an epoch has
  /// a defined (non-NaN) selection metric, `best` holds the latest epoch's weights, marked
  /// lcm.selection=last_epoch: a run whose metric is NaN in every epoch still ends with the
  /// model it reports (finish() says why no epoch was selected).
  void save_best(int epoch, bool improved, double val_mape);

  /// The row of epoch record `r` in the epoch table on stdout.
  void print_epoch_row(const EpochRecord& r, bool improved) const;

  /// True when the run ends after epoch `epoch` (said on stdout / stderr): early stopping
  /// (stopped_early_) or a stop request.
  bool run_ends_after(int epoch);

  /// Ends the run with `exit_code`: the result, and for a finished run the in-sample
  /// calibration map and the summary lines.
  TrainResult& finish(int exit_code);

  /// The run's last lines: the reported model (the best checkpoint, or the last epoch when no
  /// epoch had a defined selection metric, with a warning saying why).
  void print_summary() const;

  /// Fits the calibration map (train/calibrate.hpp) of the weights in paths_.best on the
  /// training split, in eval mode, and stores it in that checkpoint. A fit that cannot be made
  /// (no labelled, finite prediction) is a warning; the checkpoint then stays uncalibrated.
  void calibrate_best();

  /// The value of training.select_metric in `r` as the metric reads (MAPE in %, not negated).
  double selected_value(const EpochRecord& r) const;

  /// The logs and plots of history_ (write_training_logs).
  void write_logs() const;

  /// `n` with a comma between groups of three digits ("2,109,623").
  static std::string thousands(int64_t n);

  const config::Config& c_;
  const TrainOptions& o_;
  Communicator& comm_ = communicator();
  const bool root_ = comm_.rank() == 0;  // rank 0 validates and writes checkpoints and logs
  const std::atomic<bool>* stop_;
  const RunPaths paths_;
  lcm::RunLock run_lock_;  // held from startup to the end of run()
  TrainResult result_;
  lcm::DeviceSpec device_;
  bool on_cuda_ = false, has_encoder_ = false, per_batch_ = false;
  lcm::model::ModelConfig mc_;
  ResumePrecheck precheck_;
  lcm::data::PreparedSplit train_, valid_;
  ProgramOverlap overlap_;
  int64_t n_batches_ = 0, n_train_ = 0;  // global batches and training datapoints
  RankShare share_;                      // this rank's part of each batch
  std::unique_ptr<GradientReducer> reducer_, enc_reducer_;
  bool prefetch_host_batches_ = false;  // some training program is compact (place_host_rows)
  lcm::data::RowPlacement host_rows_;   // what place_host_rows placed
  int64_t rss_before_data_ = 0;         // resident bytes when prepare_data began
  bool host_after_step_said_ = false;   // the line after the first step is printed
  lcm::model::InputScaling scaling_;
  std::string scaling_json_;
  std::unique_ptr<lcm::model::CostModel<float>> model_;
  std::vector<lcm::Parameter<float>*> params_;
  std::unique_ptr<lcm::Adam<float>> opt_, enc_opt_;
  std::unique_ptr<lcm::LrSchedule> sched_, enc_sched_;
  std::string enc_opt_path_;
  std::string run_id_;  // lcm.run_id of every file this run writes (kept by --resume)
  lcm::Rng dropout_rng_{0};
  EarlyStopping stopper_;
  std::vector<EpochRecord> history_;
  int start_epoch_ = 0;
  EpochStart resume_;
  double best_val_ = INFINITY;    // validation MAPE of the best checkpoint (logged)
  int best_epoch_ = 0;            // epoch (1-based) of the best checkpoint; 0: none improved yet
  std::string undefined_reason_;  // why the latest epoch's selection metric is NaN ("" if not)
  std::unique_ptr<DeviceBatchStore> train_store_, valid_store_;
  std::unique_ptr<StepGraphCache> graphs_;  // training.cuda_graphs; nullptr: steps uncaptured
  std::unique_ptr<StepState> graph_state_;  // what a replay reads per step
  bool graph_refusal_said_ = false;         // the first refused capture is warned about
  StepGraphCounts graph_counts_;            // what the graphs did (TrainResult, summary)
  lcm::Tape<float> tape_;
  std::unique_ptr<SubBatchStep> sub_step_;  // CPU, training.cpu_sub_batches > 1: its tapes
  ProgressBar bar_{!o_.quiet};
  // the epoch in progress
  Clock::time_point epoch_t0_;
  double epoch_lr_ = 0, loss_sum_ = 0, ape_sum_ = 0;
  int64_t points_trained_ = 0, steps_taken_ = 0;
  bool fine_tuning_ = false, stopped_early_ = false;
};

}  // namespace lcm::train
