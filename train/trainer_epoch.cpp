// The trainer's epoch loop (trainer_impl.hpp): optimizer steps, validation, checkpoints and
// logs after each epoch, a stop request inside an epoch.
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "train/trainer_impl.hpp"

namespace lcm::train {

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

void Trainer::seed_rank_dropout(int epoch, int64_t b) {
  dropout_rng_ = lcm::Rng((c_.training.seed ^ kDropoutSalt) +
                          0x9E3779B97F4A7C15ull * uint64_t(comm_.rank() + 1));
  dropout_rng_.set_counter(uint64_t(int64_t(epoch) * n_batches_ + b) << 32);
}

void Trainer::save_last(int epochs_done, const EpochStart& mid) {
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
    enc_opt_->save_state(
        enc_opt_path_,
        {{meta::kScheduleStep, std::to_string(enc_sched_->last_step())}, {meta::kRunId, run_id_}});
}

bool Trainer::train_epoch(int epoch) {
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

double Trainer::train_step(int epoch, int64_t b, HostBatchPrefetch* prefetch) {
  if (double loss = 0; graphs_ && graph_step(epoch, b, &loss)) return loss;  // trainer_graphs.cpp
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

double Trainer::forward_backward(int epoch, int64_t b, int64_t lb, HostBatchPrefetch* prefetch,
                                 double* ape) {
  const auto& ds = train_.dataset;
  BatchInput in;
  in.scaling = &scaling_;
  if (prefetch)
    in.host = prefetch->take(lb, next_local_batch_in_epoch(b));
  else
    in = batch_input(ds, lb, train_store_.get(), &scaling_);  // on CUDA: on the device
  if (!on_cuda_ && !in.staged && c_.training.cpu_sub_batches > 1)
    return forward_backward_split(epoch, b, lb, in, ape);
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

int64_t Trainer::next_local_batch_in_epoch(int64_t b) const {
  for (int64_t nb = b + 1; nb < n_batches_; ++nb)
    if (share_.local_batch[size_t(nb)] >= 0) return share_.local_batch[size_t(nb)];
  return -1;
}

void Trainer::print_first_step_memory() {
  if (host_after_step_said_ || !root_) return;
  host_after_step_said_ = true;
  std::fprintf(
      stderr,
      "lcm-train: host memory after the first step: %.1f MiB resident (peak %.1f "
      "MiB), of which the tape's activations %.1f MiB\n",
      double(lcm::data::process_resident_bytes()) / double(1 << 20),
      double(lcm::data::process_peak_resident_bytes()) / double(1 << 20),
      double(tape_.peak_bytes() + (sub_step_ ? sub_step_->peak_bytes() : 0)) / double(1 << 20));
}

void Trainer::save_interrupted_epoch(int epoch, int64_t b) {
  bar_.clear();
  save_last(epoch, {b + 1, loss_sum_, ape_sum_, epoch_lr_});
  write_logs();
  std::fprintf(stderr,
               "lcm-train: interrupted in epoch %d after batch %lld/%lld; saved %s (--resume "
               "continues "
               "from there)\n",
               epoch + 1, (long long)(b + 1), (long long)n_batches_, paths_.last.c_str());
}

LossWeights Trainer::loss_weights(int64_t b, const lcm::data::BatchTensors& bt,
                                  float batch_size) const {
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

bool Trainer::end_epoch(int epoch) {
  if (on_cuda_) lcm::parameters_to_host(model_->params());  // checkpoints are written from the host
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
                lcm::data::count_of(c_.training.plateau_patience, "epoch").c_str(), plateau->lr());
  std::fflush(stdout);
  return !run_ends_after(epoch);
}

EpochRecord Trainer::training_record(int epoch, double train_seconds) const {
  const double n_train = double(n_train_);
  // MAPE loss: the objective itself (faithful, §6 epoch loss); otherwise the MAPE of the
  // training-mode predictions (exp of the output for log losses) and the objective separately.
  const double train_mape = c_.training.loss.is_mape() ? loss_sum_ / n_train : ape_sum_ / n_train;
  EpochRecord r{
      epoch + 1, train_mape, 0, 0, double(points_trained_) / std::max(1e-9, train_seconds),
      epoch_lr_};
  r.datapoints = points_trained_;
  r.train_seconds = train_seconds;
  r.train_loss = loss_sum_ / n_train;
  return r;
}

void Trainer::validate(EpochRecord& r) {
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

void Trainer::save_best(int epoch, bool improved, double val_mape) {
  if (!improved && best_epoch_ != 0) return;
  best_val_ = val_mape;
  Metadata m = best_checkpoint_metadata(c_, epoch + 1, val_mape, scaling_json_);
  m[meta::kSelection] = improved ? "best" : "last_epoch";
  m[meta::kRunId] = run_id_;
  if (root_) save_checkpoint(paths_.best, *model_, m);
  o_.hooks.pause("best");
  if (improved) best_epoch_ = epoch + 1;
}

bool Trainer::run_ends_after(int epoch) {
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

void Trainer::write_logs() const {
  if (!root_) return;
  write_training_logs(paths_, history_, c_.experiment.name, c_.training.loss,
                      c_.training.select_metric, run_id_);
}

}  // namespace lcm::train
