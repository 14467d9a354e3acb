// What the trainer prints (trainer_impl.hpp): its header, the epoch rows, the end of the run
// with the in-sample calibration map and the summary.
#include "train/trainer_impl.hpp"

namespace lcm::train {

void Trainer::print_header() const {
  const std::string overlap_note =
      overlap_.count > 0
          ? " (" + lcm::data::count_of(overlap_.count, "validation program") + " also in training)"
          : "";
  std::printf(
      "lcm-train: experiment %s: cost model with %s parameters; %lld training datapoints in "
      "%lld batches, %lld validation datapoints%s; %s, lr %g (%s), input scaling %s\n",
      c_.experiment.name.c_str(), thousands(model_->params().count()).c_str(), (long long)n_train_,
      (long long)n_batches_, (long long)valid_.dataset.n_datapoints(), overlap_note.c_str(),
      opt_->kind(), c_.training.lr, config::name_of(c_.training.lr_schedule).c_str(),
      scaling_.mode.c_str());
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

void Trainer::print_ranks_line() const {
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

void Trainer::print_epoch_row(const EpochRecord& r, bool improved) const {
  std::printf("%6d %s %s %s %s %s %9.2f %12.1f%s\n", r.epoch,
              fixed_or_na(12, 4, r.train_mape).c_str(), fixed_or_na(12, 4, r.val_mape).c_str(),
              fixed_or_na(10, 4, r.train_loss).c_str(), fixed_or_na(9, 4, r.val_spearman).c_str(),
              fixed_or_na(8, 4, r.val_ndcg).c_str(), r.seconds, r.datapoints_per_s,
              improved ? "  *best" : "");
}

TrainResult& Trainer::finish(int exit_code) {
  result_.exit_code = exit_code;
  result_.history = history_;
  result_.best_val_mape = best_val_;
  // `best` holds the last finished epoch while no epoch has improved the select metric
  result_.best_epoch = best_epoch_ > 0 || history_.empty() ? best_epoch_ : history_.back().epoch;
  if (graphs_) graph_counts_.nodes = graphs_->nodes();
  result_.cuda_graphs = graph_counts_;
  if (exit_code != 0) return result_;
  // with training.calibration_folds the map is fitted after the fold runs (train/run.hpp)
  if (c_.training.calibrate && c_.training.calibration_folds == 0 && root_ && !history_.empty())
    calibrate_best();
  if (comm_.size() > 1)
    std::printf("lcm-train: trained on %d MPI ranks x %d threads (%s)\n", comm_.size(),
                lcm::num_threads(), on_cuda_ ? "cuda" : "cpu");
  print_summary();
  if (graph_counts_.enabled && root_)
    std::printf("lcm-train: %s\n", step_graph_summary(graph_counts_).c_str());
  return result_;
}

void Trainer::print_summary() const {
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

void Trainer::calibrate_best() {
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
      const std::vector<Prediction> vp =
          predict_dataset(calibrated, valid_.dataset, {}, on_cuda_ ? valid_store_.get() : nullptr);
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

double Trainer::selected_value(const EpochRecord& r) const {
  const double score = select_score(c_.training.select_metric, r);
  return c_.training.select_metric == config::SelectMetric::Mape ? -score : score;
}

std::string Trainer::thousands(int64_t n) {
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return (n < 0 ? "-" : "") + out;
}

}  // namespace lcm::train
