// The cost-model trainer behind lcm-train (see trainer.hpp): startup checks, data preparation,
// resume, the epoch loop with validation, early stopping, checkpoints and logs.
#include "train/trainer.hpp"

#include <unistd.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

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
#include "util/run_lock.hpp"

namespace lcm::train {
namespace {

using config::Config;

/// Where to continue an interrupted epoch: batches already trained and their partial sums.
struct EpochStart {
  int64_t batch = 0;
  double loss_sum = 0, ape_sum = 0, lr = 0;
};

/// With programs left compact and batches built on the host, a second thread builds and scales
/// the next local batch while the current one trains (the same bits: materialize and the scaling
/// are pure, and the thread rounds and flushes as the trainer's thread does).
class HostBatchPrefetch {
 public:
  HostBatchPrefetch(const lcm::data::Dataset& ds, const lcm::model::InputScaling& scaling)
      : ds_(ds), scaling_(scaling) {}

  /// Local batch `lb` (the thread's result when it built `lb`, else built now), then starts the
  /// thread on local batch `next` (−1: none).
  lcm::data::BatchTensors take(int64_t lb, int64_t next) {
    lcm::data::BatchTensors t = next_.valid() && next_lb_ == lb ? next_.get() : build(lb);
    next_lb_ = next;
    if (next_lb_ >= 0) next_ = std::async(std::launch::async, [this, next] { return build(next); });
    return t;
  }

 private:
  lcm::data::BatchTensors build(int64_t i) const {
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr(csr_);
#endif
    lcm::data::BatchTensors t = ds_.materialize(i);
    lcm::model::scale_features(&scaling_, t);
    return t;
  }

  const lcm::data::Dataset& ds_;
  const lcm::model::InputScaling& scaling_;
#if defined(__SSE__) || defined(__x86_64__)
  const unsigned int csr_ = _mm_getcsr();
#endif
  // declared after what the thread reads: destroyed (waiting for the thread) before it
  std::future<lcm::data::BatchTensors> next_;
  int64_t next_lb_ = -1;  // the local batch `next_` builds
};

/// One training run; the phases of fit_model() in order.
class Trainer {
 public:
  Trainer(const config::Config& c, const TrainOptions& o)
      : c_(c), o_(o), stop_(o.stop ? o.stop : &stop_requested()), paths_(run_paths(c)) {}

  TrainResult run() {
    result_.paths = paths_;
    if (!check_before_data()) return result_;
    prepare_data();
    take_share();
    place_host_rows();  // after the share: a rank holds rows only of the programs it trains
    build();
    print_host_memory();
    if (o_.resume && !restore()) return result_;
    place_on_device();
    make_gradient_reducers();
    if (stop_now()) {
      std::fprintf(stderr, "lcm-train: interrupted before training started; nothing saved\n");
      result_.exit_code = 130;
      return result_;
    }
    print_header();
    for (int epoch = start_epoch_; epoch < c_.training.max_epochs; ++epoch) {
      if (!train_epoch(epoch)) return finish(130);
      if (!end_epoch(epoch)) return finish(stopped_early_ ? 0 : 130);
    }
    return finish(0);
  }

 private:
  /// Everything that can fail before the data is read (which can take minutes), and --resume's
  /// verdict from the saved metadata. False when there is nothing to do.
  bool check_before_data() {
    device_ = c_.training.device;
    device_ = rank_device(device_, comm_);  // under MPI: one GPU per rank (said at startup)
    if (comm_.size() > 1 && c_.training.log_train_metrics)
      throw config::ConfigError(
          "training.log_train_metrics=true is not available with " + std::to_string(comm_.size()) +
          " MPI ranks (each rank holds only its share of the training data); run it as one "
          "process or set training.log_train_metrics=false");
    lcm::require_device(device_);  // one clear line when the device cannot be used
    on_cuda_ = device_.kind == lcm::Device::CUDA;
    lcm::set_cuda_tf32(c_.training.tf32);
    if (c_.data.valid_file.empty()) throw config::ConfigError("data.valid_file is empty");
    if (c_.training.calibration_folds == 1)
      throw config::ConfigError(
          "training.calibration_folds=1: out-of-fold predictions need at least 2 folds (0 fits "
          "the calibration map on the training split itself)");
    lcm::set_num_threads(c_.training.threads);
    mc_ = model_config_with_encoder(c_);  // sizes of model.encoder from its checkpoint (§8)
    has_encoder_ = mc_.encoder.kind != lcm::model::EncoderKind::None;
    if (o_.resume) {
      require_resume_files(paths_, c_.experiment.name);  // before creating folders
      precheck_ = precheck_resume(c_, paths_);
      if (!precheck_.nothing_to_do.empty()) {
        std::fprintf(stderr, "%s\n", precheck_.nothing_to_do.c_str());
        result_.nothing_to_do = true;
        return false;
      }
      for (const auto& w : precheck_.warnings) std::fprintf(stderr, "%s\n", w.c_str());
    }
    check_data_files(c_);
    // An empty validation file fails now, not after the (long) preparation of the training file.
    require_program_records(c_.data.valid_file, "data.valid_file");
    require_writable_base_path(c_);
    ensure_cache_folder(c_);  // <base_path>/cache a regular file: one line now, not after preparing
    // One run per experiment at a time (a second stops naming the first); then what killed runs
    // of this host left. Under MPI only rank 0 locks (lock_experiment's `take`).
    run_lock_ = lcm::lock_experiment(c_.experiment.base_path, c_.experiment.name, root_);
    if (root_) lcm::remove_stale_run_temps(c_.experiment.base_path);
    // A new run never mixes its files with an earlier run's: refused, or that run moved aside
    // whole (docs/run-state.md); the files of this run then carry one run id.
    if (root_)
      claim_experiment(c_.experiment.base_path, c_.experiment.name, RunTool::Train, o_.resume,
                       c_.experiment.overwrite || o_.replace, o_.quiet && o_.replace, o_.hooks);
    run_id_ = new_run_id();
    o_.hooks.pause("claimed");
    return true;
  }

  /// Keeps the expanded schedule rows of as many programs (training first) as fit
  /// training.host_memory_budget; the others stay compact, their rows rebuilt at batch time. One
  /// line on stderr when some program is left compact.
  void place_host_rows() {
    const config::MemoryBudget& hb = c_.training.host_memory_budget;
    const double physical = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
    const int64_t budget =
        hb.is_fraction ? int64_t(hb.fraction * std::max(physical, 0.0)) : int64_t(hb.bytes);
    const lcm::data::RowPlacement r =
        lcm::data::place_rows({&train_.dataset, &valid_.dataset}, budget);
    host_rows_ = r;
    prefetch_host_batches_ = r.programs_compact > 0;
    // news only when the budget leaves rows out: a run that holds every row prints as before
    if (r.programs_compact > 0)
      std::fprintf(stderr, "lcm-train: %s\n", lcm::data::row_placement_summary(r).c_str());
  }

  /// One line on stderr (rank 0): what host memory lies outside training.host_memory_budget
  /// and how large it is (data/row_budget.hpp host_memory_outside_summary).
  void print_host_memory() const {
    if (!root_) return;
    lcm::data::HostMemoryOutside o;
    o.process = rss_before_data_;
    o.model_state =
        int64_t(lcm::model::model_state_memory(int64_t(model_->params().count())).total());
    int64_t largest = 0;
    for (int64_t b = 0; b < int64_t(train_.dataset.batches.size()); ++b)
      largest = std::max(largest, lcm::data::batch_tensor_bytes(train_.dataset, b));
    o.batches = 2 * largest;
    std::fprintf(stderr, "lcm-train: %s\n",
                 lcm::data::host_memory_outside_summary(host_rows_, o).c_str());
  }

  /// Prepares (or reads from the cache) both splits, printing each file's skip summary, and
  /// fits the input scaling on the training split.
  void prepare_data() {
    rss_before_data_ = lcm::data::process_resident_bytes();
    // Each file's read / kept / skipped-by-reason counts, on stderr with the skips themselves
    // (the cache stores them: also printed when the data comes from there).
    auto prepare_and_summarise = [&](const std::string& split, const std::string& file) {
      lcm::data::PreparedSplit s = prepare_from_config(c_, split, !o_.quiet);
      std::fprintf(
          stderr, "%s\n",
          skip_summary_line("lcm-train", file, s.counts, int64_t(s.dataset.programs.size()))
              .c_str());
      return s;
    };
    // Under MPI rank 0 prepares first (and writes the cache); the others then read the cache, so
    // that N ranks do not race on the same cache files.
    if (!root_) comm_.barrier();
    train_ = prepare_and_summarise("train", c_.data.train_file);
    // Records that are all skipped are only known after reading them: the error names the setting.
    // (Every kept program has >= 2 labelled schedules, lt_2_schedules, so none kept = no
    // datapoint.)
    try {
      valid_ = prepare_and_summarise("valid", c_.data.valid_file);
    } catch (const lcm::data::DataError&) {
      throw;  // data.strict, unreadable file: already one line naming the file
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("data.valid_file: " + std::string(e.what()) +
                               "; lcm-train needs validation programs with measured speedups");
    }
    if (root_) comm_.barrier();
    // The same program in both files is data leakage: warned (one line) and counted, both kept.
    overlap_ = program_overlap(program_names(train_.dataset), valid_.dataset);
    if (overlap_.count > 0)
      std::fprintf(stderr, "lcm-train: %s\n",
                   overlap_warning(overlap_, c_.data.train_file, c_.data.valid_file).c_str());
    if (train_.dataset.batches.empty())
      throw std::runtime_error("no training batches in " + c_.data.train_file);
    n_batches_ = int64_t(train_.dataset.batches.size());
    // Fitted on the training split only (deterministic, so --resume refits the same statistics);
    // stored in every checkpoint and reapplied by lcm-eval / lcm-predict.
    // A pre-trained encoder reads its computation columns raw (it applies its own §3.10
    // transform), so only the other columns and the loop vectors are scaled.
    scaling_ = lcm::model::fit_input_scaling(config::name_of(c_.model.input_scaling),
                                             train_.dataset, lcm::model::scaled_comp_columns(mc_));
    scaling_json_ = scaling_.to_json();
  }

  /// This rank's part of every training batch (whole programs per rank, train/distributed.hpp);
  /// the features of programs it never trains are freed, and validation is rank 0's alone. With
  /// one process every batch stays whole.
  void take_share() {
    n_train_ = train_.dataset.n_datapoints();
    share_ = take_rank_share(train_.dataset, comm_.size(), comm_.rank(), true);
    if (!root_) valid_.dataset = lcm::data::Dataset{};
  }

  /// The fixed-order gradient sums over ranks (after place_on_device: they read where each
  /// gradient lives).
  void make_gradient_reducers() {
    reducer_ = std::make_unique<GradientReducer>(params_);
    if (has_encoder_)
      enc_reducer_ = std::make_unique<GradientReducer>(model_->encoder_parameters());
  }

  /// True on every rank when a stop was requested on any (a rank's Ctrl-C or SIGTERM stops all
  /// at the same step).
  bool stop_now() { return comm_.size() > 1 ? comm_.any(stop_->load()) : stop_->load(); }

  /// The next batch after global batch `b` (wrapping) that has a part on this rank, as an index
  /// into this rank's batches; −1 when it has none.
  int64_t next_local_batch(int64_t b) const {
    for (int64_t k = 1; k <= n_batches_; ++k) {
      const int64_t l = share_.local_batch[size_t((b + k) % n_batches_)];
      if (l >= 0) return l;
    }
    return -1;
  }

  /// The model, its optimizers and schedules. A pre-trained encoder (docs/model-spec.md §8) has its
  /// own optimizer: frozen (eval mode, no updates) before training.fine_tune_epoch, then fine-tuned
  /// with training.fine_tune_lr; the main optimizer updates every other parameter.
  void build() {
    model_ = std::make_unique<lcm::model::CostModel<float>>(mc_, c_.training.seed);
    if (has_encoder_) load_encoder_weights(c_.model.encoder_weights, *model_);
    params_ = model_->non_encoder_parameters();
    lcm::AdamOptions ao;
    ao.lr = c_.training.lr;
    ao.weight_decay = c_.training.weight_decay;
    const bool decoupled = c_.training.optimizer == config::OptimizerKind::AdamW;
    opt_ = std::make_unique<lcm::Adam<float>>(params_, ao, decoupled);
    sched_ = make_schedule(c_, n_batches_);
    per_batch_ = config::steps_per_batch(c_.training.lr_schedule);
    enc_opt_path_ =
        paths_.weights_dir + "/last_encoder_optimizer_" + c_.experiment.name + ".safetensors";
    if (has_encoder_) {
      lcm::AdamOptions eo = ao;
      eo.lr = c_.training.fine_tune_lr;
      enc_opt_ = std::make_unique<lcm::Adam<float>>(model_->encoder_parameters(), eo, decoupled);
      enc_sched_ = make_encoder_schedule(c_, n_batches_);
      enc_sched_->apply(*enc_opt_);
    }
    dropout_rng_ = lcm::Rng(c_.training.seed ^ kDropoutSalt);
    stopper_.patience = c_.training.early_stop_patience;
    stopper_.count_from_epoch =
        early_stop_count_from(c_.training.early_stop_from_epoch, has_encoder_,
                              c_.training.fine_tune_epoch, c_.training.max_epochs);
  }

  /// --resume: weights, optimizer state, schedule, RNG and history of the saved step. False
  /// when the run is already over (said on stderr; normally decided by precheck_resume).
  bool restore() {
    load_saved_state();
    for (const auto& r : history_) {
      if (stopper_.update(select_score(c_.training.select_metric, r), r.epoch))
        best_epoch_ = r.epoch;
      // reduce_on_plateau: the finished epochs' scores replayed give the saved LR and count
      if (auto* plateau = dynamic_cast<lcm::ReduceOnPlateauLr*>(sched_.get()))
        plateau->observe(select_score(c_.training.select_metric, r));
    }
    // A finished run: one line saying so and what to change, exit 0, nothing rewritten.
    if (resume_.batch == 0 && start_epoch_ >= c_.training.max_epochs) {
      std::fprintf(stderr, "%s\n", finished_line(c_, start_epoch_, paths_.best).c_str());
      result_.nothing_to_do = true;
      return false;
    }
    if (resume_.batch == 0 && stopper_.should_stop()) {
      std::fprintf(stderr, "%s\n",
                   early_stopped_line(c_, start_epoch_, stopper_.bad_epochs, paths_.best).c_str());
      result_.nothing_to_do = true;
      return false;
    }
    if (resume_.batch > 0 &&
        start_epoch_ >= c_.training.max_epochs)  // (normally refused before the data)
      throw interrupted_epoch_error(c_.training.max_epochs, start_epoch_, "");
    warn_recomputed_schedule();
    if (resume_.batch > 0)
      std::fprintf(stderr, "lcm-train: resumed from %s in epoch %d at batch %lld/%lld\n",
                   paths_.last.c_str(), start_epoch_ + 1, (long long)(resume_.batch + 1),
                   (long long)n_batches_);
    else
      std::fprintf(stderr, "lcm-train: resumed from %s after epoch %d\n", paths_.last.c_str(),
                   start_epoch_);
    return true;
  }

  /// Loads `last` and the optimizer states of the saved step into the model, optimizers,
  /// schedules, dropout RNG, history and resume_. Throws std::runtime_error when the model and
  /// optimizer files are of different steps or the saved batch lies outside this data's epoch.
  void load_saved_state() {
    Metadata meta = lcm::load_parameters(paths_.last, model_->params(), true);
    // the resumed run is the same run: its id stays (files without one get this run's new id)
    if (!metadata_value(meta, meta::kRunId).empty()) run_id_ = metadata_value(meta, meta::kRunId);
    // A changed training.weight_decay (warned about): the state is loaded under the file's
    // value, which load_state checks, then the new one applies to the following steps.
    if (!precheck_.saved_weight_decay.empty())
      opt_->set_weight_decay(std::strtod(precheck_.saved_weight_decay.c_str(), nullptr));
    Metadata ometa = opt_->load_state(paths_.optimizer);
    opt_->set_weight_decay(c_.training.weight_decay);
    const RunState s = RunState::from_metadata(ometa, paths_.optimizer);
    start_epoch_ = s.epochs_done;
    sched_->set_last_step(s.schedule_step);
    dropout_rng_.set_counter(s.rng_counter);
    best_val_ = s.best_val_mape;
    history_ = s.history;
    // The model and optimizer files must come from the same step: a save cut between the two
    // renames (a second Ctrl-C) would otherwise resume new weights with old optimizer state.
    if (meta.count(meta::kEpoch) &&
        (meta[meta::kEpoch] != ometa[meta::kEpoch] ||
         (meta.count(meta::kBatchesDone) && step_stamp(meta) != step_stamp(ometa))))
      throw std::runtime_error(
          "--resume: " + paths_.last + " (epoch/batch " + step_stamp(meta) + ") and " +
          paths_.optimizer + " (epoch/batch " + step_stamp(ometa) +
          ") were saved at different steps (an interrupted save?); resume from a matching "
          "pair or train again");
    // Other data than the checkpointed run: one warning (the best-checkpoint comparison then
    // mixes validation sets).
    if (const std::string w = changed_data_warning(c_, meta); !w.empty())
      std::fprintf(stderr, "%s\n", w.c_str());
    if (s.batches_done != 0) {  // interrupted mid-epoch: continue at the next batch of that epoch
      resume_ = {s.batches_done, s.partial_loss_sum, s.partial_ape_sum, s.epoch_lr};
      if (s.batches_done < 0 || s.batches_done >= n_batches_)
        throw std::runtime_error("--resume: " + paths_.optimizer + ": lcm.batches_done " +
                                 std::to_string(s.batches_done) + " outside [0, " +
                                 std::to_string(n_batches_) +
                                 ") (was the data or data.batch_size changed?)");
    }
    std::error_code ec;
    if (enc_opt_ && std::filesystem::is_regular_file(enc_opt_path_, ec)) {
      Metadata emeta = enc_opt_->load_state(enc_opt_path_);
      if (emeta.count(meta::kScheduleStep))
        enc_sched_->set_last_step(std::stoll(emeta[meta::kScheduleStep]));
    }
  }

  /// A schedule sized by training.max_epochs is recomputed over a new total: say so, with the
  /// learning rate of the saved step under the saved and the new total.
  void warn_recomputed_schedule() const {
    auto it = precheck_.saved_settings.find("training.max_epochs");
    if (it == precheck_.saved_settings.end() ||
        it->second == std::to_string(c_.training.max_epochs) ||
        c_.training.lr_schedule == config::LrScheduleKind::Constant ||
        c_.training.lr_schedule == config::LrScheduleKind::ReduceOnPlateau)
      return;
    std::string jump;
    try {
      config::Config old = c_;
      old.training.max_epochs = std::stoi(it->second);
      const auto old_sched = make_schedule(old, n_batches_);
      char buf[160];
      std::snprintf(buf, sizeof buf, " (the learning rate at epoch %d jumps from %.3g to %.3g)",
                    start_epoch_ + 1, old_sched->lr_at(sched_->last_step()),
                    sched_->lr_at(sched_->last_step()));
      jump = buf;
    } catch (const std::exception&) {  // the old schedule cannot be rebuilt: no numbers
    }
    std::fprintf(stderr,
                 "lcm-train: warning: training.max_epochs %s -> %d: the %s schedule is recomputed "
                 "over %d epochs%s\n",
                 it->second.c_str(), c_.training.max_epochs,
                 config::name_of(c_.training.lr_schedule).c_str(), c_.training.max_epochs,
                 jump.c_str());
  }

  /// CUDA: parameters (and, at the first step, the optimizer moments) move to the device once;
  /// as many batches' inputs as fit training.gpu_memory_budget stay there (training first,
  /// validation with the rest), the others are streamed.
  void place_on_device() {
    sched_->apply(*opt_);
    if (!on_cuda_) return;
    tape_.set_device(lcm::Device::CUDA, device_.index);
    lcm::parameters_to_device(model_->params(), device_.index);
    if (has_encoder_) return;  // the encoder reads host rows: batches are built on the host
    const size_t budget = resolve_gpu_memory_budget(c_.training.gpu_memory_budget, device_.index);
    train_store_ = std::make_unique<DeviceBatchStore>(*model_, train_.dataset, &scaling_,
                                                      device_.index, budget);
    if (!root_) return;  // validation runs on rank 0
    valid_store_ = std::make_unique<DeviceBatchStore>(
        *model_, valid_.dataset, &scaling_, device_.index, budget - train_store_->resident_bytes());
    std::printf("lcm-train: %s\nlcm-train: %s\n", train_store_->summary("training").c_str(),
                valid_store_->summary("validation").c_str());
  }

  void print_header() const {
    const std::string overlap_note =
        overlap_.count > 0 ? " (" + lcm::data::count_of(overlap_.count, "validation program") +
                                 " also in training)"
                           : "";
    std::printf(
        "lcm-train: experiment %s: cost model with %s parameters; %lld training datapoints in "
        "%lld batches, %lld validation datapoints%s; %s, lr %g (%s), input scaling %s\n",
        c_.experiment.name.c_str(), thousands(model_->params().count()).c_str(),
        (long long)n_train_, (long long)n_batches_, (long long)valid_.dataset.n_datapoints(),
        overlap_note.c_str(), opt_->kind(), c_.training.lr,
        config::name_of(c_.training.lr_schedule).c_str(), scaling_.mode.c_str());
    // what is optimised (column train_loss) and what picks the best checkpoint; MAPE is shown
    // in every case but optimised only under training.loss=mape
    const bool mape_objective = c_.training.loss.is_mape();
    std::printf(
        "lcm-train: objective (training.loss) %s, column train_loss%s; best checkpoint: %s "
        "%s (training.select_metric), marked *best\n",
        c_.training.loss.text().c_str(),
        mape_objective ? " (= train_MAPE)" : "; MAPE is measured, not optimised",
        c_.training.select_metric == config::SelectMetric::Mape ? "lowest" : "highest",
        select_metric_label(c_.training.select_metric).c_str());
    if (comm_.size() > 1) print_ranks_line();
    std::printf("%6s %12s %12s %10s %9s %8s %9s %12s\n", "epoch", "train_MAPE", "val_MAPE",
                "train_loss", "val_Spear", "val_nDCG", "seconds", "points/s");
    std::fflush(stdout);
  }

  /// The startup line of a multi-rank run: ranks, threads and devices, programs per batch
  /// against ranks (with the idle-rank warning), and the memory the share freed.
  void print_ranks_line() const {
    const int n = comm_.size();
    std::string devices = "cpu";
    if (on_cuda_)
      devices = c_.training.device.index == 0
                    ? "one GPU per rank by local rank (cuda:<local rank mod visible GPUs>; "
                      "rank 0 on " +
                          device_.str() + ")"
                    : "every rank on " + c_.training.device.str() +
                          " (cuda:N with N > 0 pins all ranks; training.device=cuda gives one "
                          "GPU per rank)";
    std::printf(
        "lcm-train: %s: %d ranks x %d threads, devices %s; each batch split by program: %lld to "
        "%lld programs per batch for %d ranks, the busiest rank trains %.1f%% of the datapoints "
        "(ideal %.1f%%); rank 0 keeps the features of %lld of %lld programs (freed %.1f of %.1f "
        "MiB)\n",
        comm_.kind().c_str(), n, lcm::num_threads(), devices.c_str(),
        (long long)share_.min_programs_per_batch, (long long)share_.max_programs_per_batch, n,
        100.0 * double(share_.busiest_points) / double(std::max<int64_t>(1, share_.total_points)),
        100.0 / n, (long long)share_.programs_kept,
        (long long)(share_.programs_kept + share_.programs_freed),
        double(share_.bytes_freed) / 1048576.0, double(share_.bytes_before) / 1048576.0);
    if (share_.batches_with_idle_ranks > 0)
      std::printf(
          "lcm-train: warning: %lld of %lld batches have fewer programs than the %d ranks: the "
          "extra ranks idle in those steps; a larger data.batch_size (now %d; the release config "
          "uses 2048) gives every rank work\n",
          (long long)share_.batches_with_idle_ranks, (long long)n_batches_, n, c_.data.batch_size);
  }

  /// This rank's own dropout stream at global step (epoch, b) under MPI: its start depends on the
  /// rank and the step only, not on a count of earlier draws, so that --resume continues the same
  /// masks. (They differ from the one-process run's masks.)
  void seed_rank_dropout(int epoch, int64_t b) {
    dropout_rng_ = lcm::Rng((c_.training.seed ^ kDropoutSalt) +
                            0x9E3779B97F4A7C15ull * uint64_t(comm_.rank() + 1));
    dropout_rng_.set_counter(uint64_t(int64_t(epoch) * n_batches_ + b) << 32);
  }

  /// Saves `last` (model and optimizer state). `mid` is the position inside epoch
  /// `epochs_done` + 1 when interrupted there (batch 0: at the epoch boundary).
  void save_last(int epochs_done, const EpochStart& mid = {}) {
    if (!root_) return;  // rank 0 alone writes checkpoints and logs
    if (on_cuda_) lcm::parameters_to_host(model_->params());
    Metadata m = last_checkpoint_metadata(c_, epochs_done, mid.batch, scaling_json_);
    m[meta::kRunId] = run_id_;
    save_checkpoint(paths_.last, *model_, m);
    o_.hooks.pause("checkpoint");
    RunState s;
    s.epochs_done = epochs_done;
    s.batches_done = mid.batch;
    s.schedule_step = sched_->last_step();
    s.rng_counter = dropout_rng_.counter();
    s.best_val_mape = best_val_;
    s.history = history_;
    s.run_settings = run_settings_json(c_);
    s.partial_loss_sum = mid.loss_sum;
    s.partial_ape_sum = mid.ape_sum;
    s.epoch_lr = mid.lr;
    Metadata om = s.to_metadata();
    om[meta::kRunId] = run_id_;
    opt_->save_state(paths_.optimizer, om);
    if (enc_opt_)
      enc_opt_->save_state(enc_opt_path_,
                           {{meta::kScheduleStep, std::to_string(enc_sched_->last_step())},
                            {meta::kRunId, run_id_}});
  }

  /// Trains the batches of one epoch (from the resumed batch in the first epoch of a resume).
  /// False when a stop request came before the epoch's last batch (`last` saved to resume).
  bool train_epoch(int epoch) {
    epoch_t0_ = Clock::now();
    const EpochStart from = epoch == start_epoch_ ? resume_ : EpochStart{};
    epoch_lr_ = from.batch > 0 ? from.lr : opt_->lr();  // logged: the LR of the epoch's first step
    fine_tuning_ = has_encoder_ && epoch >= c_.training.fine_tune_epoch;
    model_->set_encoder_frozen(!fine_tuning_);  // no-op without an encoder
    loss_sum_ = from.loss_sum;
    ape_sum_ = from.ape_sum;
    points_trained_ = 0;
    const double batch_size = double(c_.data.batch_size);
    // With programs left compact (training.host_memory_budget) and batches built on the host, a
    // second thread rebuilds and scales the next batch while this one trains.
    std::unique_ptr<HostBatchPrefetch> prefetch;
    if (prefetch_host_batches_ && !train_store_)
      prefetch = std::make_unique<HostBatchPrefetch>(train_.dataset, scaling_);
    for (int64_t b = from.batch; b < n_batches_; ++b) {
      loss_sum_ += train_step(epoch, b, prefetch.get()) * batch_size;
      ++steps_taken_;
      if (o_.after_step) o_.after_step(steps_taken_);
      o_.hooks.after_step(steps_taken_, comm_.rank());
      o_.hooks.pause("step");
      print_first_step_memory();
      bar_.update("epoch " + std::to_string(epoch + 1), b + 1, n_batches_, "loss",
                  loss_sum_ / double((b + 1) * int64_t(batch_size)));
      // (after the epoch's last batch the epoch is finished, validated and saved as usual)
      if (stop_now() && b + 1 < n_batches_) {
        save_interrupted_epoch(epoch, b);
        return false;
      }
    }
    bar_.clear();
    return true;
  }

  /// One optimizer step on global batch `b`: this rank's part forward and backward (nothing when
  /// no point of b is here), under MPI the ranks' sums of gradients, loss and APEs, gradient
  /// clipping, the optimizers and a per-batch LR schedule. Returns the batch's loss.
  double train_step(int epoch, int64_t b, HostBatchPrefetch* prefetch) {
    tape_.clear();  // (before acquire: the previous step's device memory is no longer viewed)
    const bool ranks = comm_.size() > 1;
    // This rank's part of batch b (all of it in one process; -1: no point of b here).
    const int64_t lb = share_.local_batch[size_t(b)];
    // This rank's loss and APE sum; in one process the APEs add to ape_sum_ directly.
    double part[2] = {0, 0};
    if (lb >= 0) part[0] = forward_backward(epoch, b, lb, prefetch, ranks ? &part[1] : &ape_sum_);
    if (ranks) {  // the global batch's gradients, loss and APE sum, the same bits on all ranks
      reducer_->all_reduce(comm_);
      if (fine_tuning_) enc_reducer_->all_reduce(comm_);
      comm_.sum_in_rank_order(part, 2);
      ape_sum_ += part[1];
    }
    points_trained_ += share_.global_points[size_t(b)];
    // host or device gradients (one deterministic norm reduction + one scale kernel on CUDA)
    if (c_.training.clip_grad_norm > 0) lcm::clip_grad_norm(params_, c_.training.clip_grad_norm);
    opt_->step();
    opt_->zero_grad();
    if (fine_tuning_) {
      enc_opt_->step();
      enc_opt_->zero_grad();
    }
    if (train_store_ && next_local_batch(b) >= 0)
      train_store_->prefetch(next_local_batch(b));  // overlaps this step's queued work
    if (per_batch_ && sched_->last_step() + 1 <= int64_t(c_.training.max_epochs) * n_batches_)
      sched_->step(*opt_);
    return part[0];
  }

  /// Forward and backward of this rank's part `lb` of global batch `b` in training mode: returns
  /// its loss and adds each datapoint's APE (its prediction as a speedup ×) to *ape. Throws
  /// std::runtime_error when the loss is not finite.
  double forward_backward(int epoch, int64_t b, int64_t lb, HostBatchPrefetch* prefetch,
                          double* ape) {
    const auto& ds = train_.dataset;
    BatchInput in;
    in.scaling = &scaling_;
    if (prefetch)
      in.host = prefetch->take(lb, next_local_batch_in_epoch(b));
    else
      in = batch_input(ds, lb, train_store_.get(), &scaling_);  // on CUDA: on the device
    const lcm::data::BatchTensors& bt = in.labels();
    tape_.set_training(true);
    tape_.set_grad_enabled(true);
    if (comm_.size() > 1) seed_rank_dropout(epoch, b);
    lcm::NodeId pred = in.forward(*model_, tape_, ds, lb, dropout_rng_);
    // Q10: batch loss weighted by batch_len / batch_size (model-spec §6), of the global
    // batch: each rank's share weighs its part (LossWeights), the ranks' sum is that loss.
    const float batch_size = float(c_.data.batch_size);
    lcm::NodeId loss =
        training_loss(tape_, c_.training.loss, pred, bt, loss_weights(b, bt, batch_size),
                      float(c_.training.rank_weight), float(c_.training.huber_delta));
    const double lv = double(lcm::to_host(tape_.value(loss))[0]);
    // training MAPE of this batch's (training-mode) predictions, as a speedup ×
    const std::vector<float> pv = lcm::to_host(tape_.value(pred));  // host or device
    for (int64_t i = 0; i < bt.batch; ++i) {
      const double y = double(bt.speedup[size_t(i)]);
      const double yhat = lcm::model::speedup_from_score(double(pv[size_t(i)]), mc_.log_output);
      *ape += lcm::model::loss_ape(y, yhat);
    }
    if (!std::isfinite(lv))
      throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) +
                               ", batch " + std::to_string(b));
    tape_.backward(loss);
    return lv;
  }

  /// The first local batch after global batch `b` in this epoch (no wrap); −1 when none.
  int64_t next_local_batch_in_epoch(int64_t b) const {
    for (int64_t nb = b + 1; nb < n_batches_; ++nb)
      if (share_.local_batch[size_t(nb)] >= 0) return share_.local_batch[size_t(nb)];
    return -1;
  }

  /// One line on stderr (rank 0) after the run's first step: what it added (its tape's peak).
  void print_first_step_memory() {
    if (host_after_step_said_ || !root_) return;
    host_after_step_said_ = true;
    std::fprintf(stderr,
                 "lcm-train: host memory after the first step: %.1f MiB resident (peak %.1f "
                 "MiB), of which the tape's activations %.1f MiB\n",
                 double(lcm::data::process_resident_bytes()) / double(1 << 20),
                 double(lcm::data::process_peak_resident_bytes()) / double(1 << 20),
                 double(tape_.peak_bytes()) / double(1 << 20));
  }

  /// A stop request after batch `b` (not the epoch's last) of epoch `epoch`: saves `last` and
  /// the logs so that --resume continues at batch b + 2.
  void save_interrupted_epoch(int epoch, int64_t b) {
    bar_.clear();
    save_last(epoch, {b + 1, loss_sum_, ape_sum_, epoch_lr_});
    write_logs();
    std::fprintf(stderr,
                 "lcm-train: interrupted in epoch %d after batch %lld/%lld; saved %s (--resume "
                 "continues "
                 "from there)\n",
                 epoch + 1, (long long)(b + 1), (long long)n_batches_, paths_.last.c_str());
  }

  /// The weights of this rank's share `bt` of global batch `b` (LossWeights; with one process
  /// both are bt.batch / batch_size as before).
  LossWeights loss_weights(int64_t b, const lcm::data::BatchTensors& bt, float batch_size) const {
    if (comm_.size() == 1) return {float(bt.batch) / batch_size, float(bt.batch) / batch_size};
    const double global = double(share_.global_points[size_t(b)]);
    const double batch_weight = global / double(batch_size);
    // the ranking term's units: pairs (pairwise, lambdarank) or programs (listnet)
    const bool per_program =
        c_.training.loss.ranking &&
        config::info(*c_.training.loss.ranking).units == config::RankingUnits::Programs;
    const int64_t units =
        per_program ? share_.global_groups[size_t(b)] : share_.global_pairs[size_t(b)];
    const double mine = double(ranking_unit_count(c_.training.loss, bt.speedup, bt.program_of));
    return {float(batch_weight * double(bt.batch) / global),
            units > 0 ? float(batch_weight * mine / double(units)) : 0.0f};
  }

  /// Validates, logs and checkpoints epoch `epoch`. False when the run ends here: early
  /// stopping (stopped_early_) or a stop request.
  bool end_epoch(int epoch) {
    if (on_cuda_)
      lcm::parameters_to_host(model_->params());  // checkpoints are written from the host
    const double train_seconds = seconds_since(epoch_t0_);
    if (!per_batch_) sched_->step(*opt_);  // constant: no-op; one_cycle_per_epoch: faithful Q1
    if (fine_tuning_ && enc_sched_->last_step() + 1 <= int64_t(c_.training.max_epochs) * n_batches_)
      enc_sched_->step(*enc_opt_);  // stepped once per epoch, only while fine-tuning (§8)
    EpochRecord r = training_record(epoch, train_seconds);
    validate(r);
    r.seconds = seconds_since(epoch_t0_);
    history_.push_back(r);
    const bool improved = stopper_.update(select_score(c_.training.select_metric, r), r.epoch);
    // reduce_on_plateau steps here, after validation: every rank sees the broadcast metrics, so
    // all take the same decision
    auto* plateau = dynamic_cast<lcm::ReduceOnPlateauLr*>(sched_.get());
    const bool reduced = plateau && plateau->observe(select_score(c_.training.select_metric, r));
    if (reduced) plateau->apply(*opt_);
    save_best(epoch, improved, r.val_mape);
    save_last(epoch + 1);
    write_logs();
    print_epoch_row(r, improved);
    if (reduced && root_)
      std::printf("lcm-train: %s has not improved for %s: learning rate reduced to %g\n",
                  select_metric_label(c_.training.select_metric).c_str(),
                  lcm::data::count_of(c_.training.plateau_patience, "epoch").c_str(),
                  plateau->lr());
    std::fflush(stdout);
    return !run_ends_after(epoch);
  }

  /// The record of epoch `epoch` as far as training knows it: training MAPE and objective,
  /// learning rate, throughput of this process (a resumed epoch counts only the batches trained
  /// after the resume).
  EpochRecord training_record(int epoch, double train_seconds) const {
    const double n_train = double(n_train_);
    // MAPE loss: the objective itself (faithful, §6 epoch loss); otherwise the MAPE of the
    // training-mode predictions (exp of the output for log losses) and the objective separately.
    const double train_mape =
        c_.training.loss.is_mape() ? loss_sum_ / n_train : ape_sum_ / n_train;
    EpochRecord r{
        epoch + 1, train_mape, 0, 0, double(points_trained_) / std::max(1e-9, train_seconds),
        epoch_lr_};
    r.datapoints = points_trained_;
    r.train_seconds = train_seconds;
    r.train_loss = loss_sum_ / n_train;
    return r;
  }

  /// The validation metrics of `r` (rank 0 predicts the validation split; under MPI it sends
  /// them to every rank, so that all keep the same history and early-stopping state), and with
  /// training.log_train_metrics the training split's ranking metrics.
  void validate(EpochRecord& r) {
    std::vector<Prediction> vp;
    if (root_) vp = predict_dataset(*model_, valid_.dataset, {}, &scaling_, valid_store_.get());
    r.val_mape = root_ ? loss_mape(vp) : 0.0;
    undefined_reason_ = "no labelled validation datapoint";
    if (!vp.empty()) {
      const lcm::model::MetricsSummary vm = evaluate_predictions(valid_.dataset, vp);
      r.val_spearman = vm.mean_spearman, r.val_ndcg = vm.mean_ndcg,
      r.val_top1 = vm.mean_top1_recovered;
      undefined_reason_ = undefined_metric_reason(vm, config::name_of(c_.training.select_metric));
    }
    if (c_.training.log_train_metrics) {
      const lcm::model::MetricsSummary tm = evaluate_predictions(
          train_.dataset,
          predict_dataset(*model_, train_.dataset, {}, &scaling_, train_store_.get()));
      r.train_spearman = tm.mean_spearman, r.train_ndcg = tm.mean_ndcg;
    }
    if (comm_.size() > 1) {
      double v[4] = {r.val_mape, r.val_spearman, r.val_ndcg, r.val_top1};
      comm_.broadcast(v, 4, 0);
      r.val_mape = v[0];
      r.val_spearman = v[1];
      r.val_ndcg = v[2];
      r.val_top1 = v[3];
    }
  }

  /// Writes `best` after epoch `epoch` when it improved the selection metric. Until an epoch has
  /// a defined (non-NaN) selection metric, `best` holds the latest epoch's weights, marked
  /// lcm.selection=last_epoch: a run whose metric is NaN in every epoch still ends with the
  /// model it reports (finish() says why no epoch was selected).
  void save_best(int epoch, bool improved, double val_mape) {
    if (!improved && best_epoch_ != 0) return;
    best_val_ = val_mape;
    Metadata m = best_checkpoint_metadata(c_, epoch + 1, val_mape, scaling_json_);
    m[meta::kSelection] = improved ? "best" : "last_epoch";
    m[meta::kRunId] = run_id_;
    if (root_) save_checkpoint(paths_.best, *model_, m);
    o_.hooks.pause("best");
    if (improved) best_epoch_ = epoch + 1;
  }

  /// The row of epoch record `r` in the epoch table on stdout.
  void print_epoch_row(const EpochRecord& r, bool improved) const {
    std::printf("%6d %s %s %s %s %s %9.2f %12.1f%s\n", r.epoch,
                fixed_or_na(12, 4, r.train_mape).c_str(), fixed_or_na(12, 4, r.val_mape).c_str(),
                fixed_or_na(10, 4, r.train_loss).c_str(), fixed_or_na(9, 4, r.val_spearman).c_str(),
                fixed_or_na(8, 4, r.val_ndcg).c_str(), r.seconds, r.datapoints_per_s,
                improved ? "  *best" : "");
  }

  /// True when the run ends after epoch `epoch` (said on stdout / stderr): early stopping
  /// (stopped_early_) or a stop request.
  bool run_ends_after(int epoch) {
    if (stopper_.should_stop()) {
      std::printf("lcm-train: early stop after epoch %d: %s has not improved for %s%s\n", epoch + 1,
                  select_metric_label(c_.training.select_metric).c_str(),
                  lcm::data::count_of(stopper_.bad_epochs, "epoch").c_str(),
                  best_epoch_ == 0 ? " (undefined, NaN, in every epoch)" : "");
      stopped_early_ = true;
      return true;
    }
    if (stop_now()) {
      std::fprintf(stderr, "lcm-train: interrupted after epoch %d; saved %s\n", epoch + 1,
                   paths_.last.c_str());
      return true;
    }
    return false;
  }

  /// Ends the run with `exit_code`: the result, and for a finished run the in-sample
  /// calibration map and the summary lines.
  TrainResult& finish(int exit_code) {
    result_.exit_code = exit_code;
    result_.history = history_;
    result_.best_val_mape = best_val_;
    // `best` holds the last finished epoch while no epoch has improved the select metric
    result_.best_epoch = best_epoch_ > 0 || history_.empty() ? best_epoch_ : history_.back().epoch;
    if (exit_code != 0) return result_;
    // with training.calibration_folds the map is fitted after the fold runs (train/run.hpp)
    if (c_.training.calibrate && c_.training.calibration_folds == 0 && root_ && !history_.empty())
      calibrate_best();
    if (comm_.size() > 1)
      std::printf("lcm-train: trained on %d MPI ranks x %d threads (%s)\n", comm_.size(),
                  lcm::num_threads(), on_cuda_ ? "cuda" : "cpu");
    print_summary();
    return result_;
  }

  /// The run's last lines: the reported model (the best checkpoint, or the last epoch when no
  /// epoch had a defined selection metric, with a warning saying why).
  void print_summary() const {
    const std::string metric = select_metric_label(c_.training.select_metric);
    if (best_epoch_ == 0 && !history_.empty()) {
      // no epoch had a defined selection metric: the last epoch's weights are the reported model
      const EpochRecord& last = history_.back();
      std::fprintf(stderr,
                   "lcm-train: warning: no epoch improved the selection metric %s "
                   "(training.select_metric=%s): it was NaN in all %s%s; the reported model is "
                   "the last epoch's (epoch %d), saved as %s with lcm.selection=last_epoch\n",
                   metric.c_str(), config::name_of(c_.training.select_metric).c_str(),
                   lcm::data::count_of(int64_t(history_.size()), "epoch").c_str(),
                   undefined_reason_.empty() ? "" : (": " + undefined_reason_).c_str(), last.epoch,
                   paths_.best.c_str());
      std::printf(
          "lcm-train: reported model: epoch %d (the last; no epoch had a defined %s), validation "
          "MAPE %s; objective %s; weights %s\n",
          last.epoch, metric.c_str(), fixed_or_na(0, 4, last.val_mape).c_str(),
          c_.training.loss.text().c_str(), paths_.best.c_str());
      return;
    }
    const EpochRecord* best = nullptr;
    for (const auto& r : history_)
      if (r.epoch == best_epoch_) best = &r;
    std::printf(
        "lcm-train: best checkpoint: epoch %d, %s %s (training.select_metric), validation MAPE "
        "%s; objective %s; weights %s\n",
        best_epoch_, metric.c_str(), best ? fixed_or_na(0, 4, selected_value(*best)).c_str() : "?",
        fixed_or_na(0, 4, best_val_).c_str(), c_.training.loss.text().c_str(), paths_.best.c_str());
  }

  /// Fits the calibration map (train/calibrate.hpp) of the weights in paths_.best on the
  /// training split, in eval mode, and stores it in that checkpoint. A fit that cannot be made
  /// (no labelled, finite prediction) is a warning; the checkpoint then stays uncalibrated.
  void calibrate_best() {
    std::unique_ptr<lcm::model::CostModel<float>> best = load_checkpoint(paths_.best, c_);
    DeviceBatchStore* store = nullptr;
    if (on_cuda_) {
      lcm::parameters_to_device(best->params(), device_.index);
      store = train_store_.get();
    }
    try {
      const lcm::model::Calibration cal =
          fit_calibration(predict_dataset(*best, train_.dataset, {}, &scaling_, store),
                          best->config().relative_to_identity, c_.training.calibration_weighting);
      store_calibration(paths_.best, cal);
      std::printf("lcm-train: %s; stored in %s\n", calibration_summary(cal).c_str(),
                  paths_.best.c_str());
      if (cal.active() && valid_.dataset.n_datapoints() > 0) {  // what it does on unseen programs
        lcm::model::ScoringModels calibrated;
        calibrated.members = {best.get()};
        calibrated.scaling = &scaling_;
        calibrated.calibration = &cal;
        const std::vector<Prediction> vp = predict_dataset(calibrated, valid_.dataset, {},
                                                           on_cuda_ ? valid_store_.get() : nullptr);
        const std::string check = calibration_check(vp, "validation");
        if (!check.empty()) std::printf("lcm-train: calibration map on the %s\n", check.c_str());
      }
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr,
                   "lcm-train: warning: no calibration map fitted (%s); %s reports raw "
                   "model outputs\n",
                   e.what(), paths_.best.c_str());
    }
  }

  /// The value of training.select_metric in `r` as the metric reads (MAPE in %, not negated).
  double selected_value(const EpochRecord& r) const {
    const double score = select_score(c_.training.select_metric, r);
    return c_.training.select_metric == config::SelectMetric::Mape ? -score : score;
  }

  /// The logs and plots of history_ (write_training_logs).
  void write_logs() const {
    if (!root_) return;
    write_training_logs(paths_, history_, c_.experiment.name, c_.training.loss,
                        c_.training.select_metric, run_id_);
  }

  /// `n` with a comma between groups of three digits ("2,109,623").
  static std::string thousands(int64_t n) {
    std::string d = std::to_string(n < 0 ? -n : n), out;
    for (size_t i = 0; i < d.size(); ++i) {
      if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
      out += d[i];
    }
    return (n < 0 ? "-" : "") + out;
  }

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
  lcm::Tape<float> tape_;
  ProgressBar bar_{!o_.quiet};
  // the epoch in progress
  Clock::time_point epoch_t0_;
  double epoch_lr_ = 0, loss_sum_ = 0, ape_sum_ = 0;
  int64_t points_trained_ = 0, steps_taken_ = 0;
  bool fine_tuning_ = false, stopped_early_ = false;
};

}  // namespace

TrainResult fit_model(const config::Config& c, const TrainOptions& o) {
  return Trainer(c, o).run();
}

}  // namespace lcm::train
