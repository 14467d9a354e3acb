// The cost-model trainer behind lcm-train (see trainer.hpp): the phases of a run and their
// setup: startup checks, data preparation, the model and optimizers, resume, the device.
#include <unistd.h>

#include "train/trainer_impl.hpp"

namespace lcm::train {

TrainResult Trainer::run() {
  result_.paths = paths_;
  if (!check_before_data()) return result_;
  prepare_data();
  take_share();
  place_host_rows();  // after the share: a rank holds rows only of the programs it trains
  build();
  print_host_memory();
  if (o_.resume && !restore()) return result_;
  place_on_device();
  make_step_graphs();  // trainer_graphs.cpp
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

bool Trainer::check_before_data() {
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

void Trainer::place_host_rows() {
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

void Trainer::print_host_memory() const {
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

void Trainer::prepare_data() {
  rss_before_data_ = lcm::data::process_resident_bytes();
  // Each file's read / kept / skipped-by-reason counts, on stderr with the skips themselves
  // (the cache stores them: also printed when the data comes from there).
  auto prepare_and_summarise = [&](const std::string& split, const std::string& file) {
    lcm::data::PreparedSplit s = prepare_from_config(c_, split, !o_.quiet);
    std::fprintf(
        stderr, "%s\n",
        skip_summary_line("lcm-train", file, s.counts, int64_t(s.dataset.programs.size())).c_str());
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
  // A run started from training.init_weights keeps, by default, the statistics its weights
  // learned on (training.init_scaling=checkpoint).
  if (!c_.training.init_weights.empty() &&
      c_.training.init_scaling == config::InitScaling::Checkpoint)
    scaling_ = load_input_scaling(c_.training.init_weights);
  else
    scaling_ = lcm::model::fit_input_scaling(config::name_of(c_.model.input_scaling),
                                             train_.dataset, lcm::model::scaled_comp_columns(mc_));
  scaling_json_ = scaling_.to_json();
}

void Trainer::take_share() {
  n_train_ = train_.dataset.n_datapoints();
  share_ = take_rank_share(train_.dataset, comm_.size(), comm_.rank(), true);
  if (!root_) valid_.dataset = lcm::data::Dataset{};
}

void Trainer::make_gradient_reducers() {
  reducer_ = std::make_unique<GradientReducer>(params_);
  if (has_encoder_) enc_reducer_ = std::make_unique<GradientReducer>(model_->encoder_parameters());
}

int64_t Trainer::next_local_batch(int64_t b) const {
  for (int64_t k = 1; k <= n_batches_; ++k) {
    const int64_t l = share_.local_batch[size_t((b + k) % n_batches_)];
    if (l >= 0) return l;
  }
  return -1;
}

void Trainer::build() {
  model_ = std::make_unique<lcm::model::CostModel<float>>(mc_, c_.training.seed);
  if (has_encoder_) load_encoder_weights(c_.model.encoder_weights, *model_);
  if (!c_.training.init_weights.empty()) load_init_weights(c_.training.init_weights, *model_);
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

bool Trainer::restore() {
  load_saved_state();
  for (const auto& r : history_) {
    if (stopper_.update(select_score(c_.training.select_metric, r), r.epoch)) best_epoch_ = r.epoch;
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

void Trainer::load_saved_state() {
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

void Trainer::warn_recomputed_schedule() const {
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

void Trainer::place_on_device() {
  sched_->apply(*opt_);
  if (!on_cuda_) return;
  tape_.set_device(lcm::Device::CUDA, device_.index);
  lcm::parameters_to_device(model_->params(), device_.index);
  if (has_encoder_) return;  // the encoder reads host rows: batches are built on the host
  const size_t budget = resolve_gpu_memory_budget(c_.training.gpu_memory_budget, device_.index);
  train_store_ =
      std::make_unique<DeviceBatchStore>(*model_, train_.dataset, &scaling_, device_.index, budget);
  if (!root_) return;  // validation runs on rank 0
  valid_store_ = std::make_unique<DeviceBatchStore>(
      *model_, valid_.dataset, &scaling_, device_.index, budget - train_store_->resident_bytes());
  std::printf("lcm-train: %s\nlcm-train: %s\n", train_store_->summary("training").c_str(),
              valid_store_->summary("validation").c_str());
}

TrainResult fit_model(const config::Config& c, const TrainOptions& o) {
  return Trainer(c, o).run();
}

}  // namespace lcm::train
