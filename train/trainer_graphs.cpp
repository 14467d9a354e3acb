// The trainer's CUDA-graph steps (training.cuda_graphs, trainer_impl.hpp): each device-resident
// training batch's whole step (forward, loss, backward, gradient clipping, the optimizer update,
// zero_grad) captured once and replayed at later steps. What changes between steps is read from
// device memory that the host writes before each replay (StepState): the dropout counter, so that
// each replay draws the masks of its own step, and the optimizer's scalars (learning rate of the
// schedule, β1, bias corrections of the step count); clipping decides on the device. A replayed
// step therefore computes the uncaptured step's values, bit for bit.
#include "train/trainer_impl.hpp"

namespace lcm::train {

void Trainer::make_step_graphs() {
  const config::CudaGraphs mode = c_.training.cuda_graphs;
  if (!on_cuda_ || mode == config::CudaGraphs::Off) return;
  // MPI sums the gradients on the host between backward and the optimizer; an encoder's batches
  // are built on the host: those steps are not captured
  std::string why;
  if (comm_.size() > 1)
    why = std::to_string(comm_.size()) + " MPI ranks (the gradient sums run on the host)";
  else if (!train_store_)
    why = "a pre-trained model.encoder (its batches are built on the host)";
  else if (c_.training.cuda_graph_limit == 0)
    why = "training.cuda_graph_limit=0";
  if (!why.empty()) {
    if (mode == config::CudaGraphs::On && root_)
      std::fprintf(stderr, "lcm-train: training.cuda_graphs=on: steps run uncaptured with %s\n",
                   why.c_str());
    return;
  }
  graphs_ = std::make_unique<StepGraphCache>(c_.training.cuda_graph_limit);
  graph_state_ = std::make_unique<StepState>(device_.index, *opt_);
  graph_counts_.enabled = true;
  std::printf(
      "lcm-train: cuda graphs: each resident training batch's step is captured once and "
      "replayed (at most %d graphs; training.cuda_graphs=off runs every step uncaptured)\n",
      c_.training.cuda_graph_limit);
}

CapturedStep* Trainer::capture_step(int64_t b, int64_t lb) {
  const auto& ds = train_.dataset;
  tape_.clear();
  tape_.set_training(true);
  tape_.set_grad_enabled(true);
  opt_->prepare_device_step();  // the optimizer's moments on the device (uploads: not captured)
  const BatchInput in = batch_input(ds, lb, train_store_.get(), &scaling_);  // resident: no copy
  const lcm::data::BatchTensors& bt = in.labels();
  // a copy of the run's generator whose draws add the device counter's value at replay time
  lcm::Rng rng = dropout_rng_;
  rng.set_device_counter(graph_state_->counter());
  CapturedStep s;
  try {
    s.graph.begin_capture(device_.index);
    const lcm::NodeId pred = in.forward(*model_, tape_, ds, lb, rng);
    const float batch_size = float(c_.data.batch_size);
    const lcm::NodeId loss =
        training_loss(tape_, c_.training.loss, pred, bt, loss_weights(b, bt, batch_size),
                      float(c_.training.rank_weight), float(c_.training.huber_delta));
    tape_.backward(loss);
    if (c_.training.clip_grad_norm > 0)
      lcm::clip_grad_norm_on_device(params_, c_.training.clip_grad_norm);
    opt_->step_from_device(graph_state_->scalars());
    opt_->zero_grad();
    s.graph.end_capture();
    s.loss = tape_.value(loss);
    s.pred = tape_.value(pred);
  } catch (const std::exception& e) {
    s.graph.abort_capture();
    tape_.clear();
    graphs_->refuse(lb);
    ++graph_counts_.refused;
    if (!graph_refusal_said_ && root_)
      std::fprintf(stderr,
                   "lcm-train: warning: the training step of batch %lld cannot be captured as a "
                   "CUDA graph (%s); such batches run uncaptured\n",
                   (long long)b, e.what());
    graph_refusal_said_ = true;
    return nullptr;
  }
  s.labels = &bt;  // (a resident batch's labels stay in the store)
  s.draws = rng.counter() - dropout_rng_.counter();
  ++graph_counts_.captures;
  return &graphs_->add(lb, std::move(s));
}

bool Trainer::graph_step(int epoch, int64_t b, double* loss) {
  const int64_t lb = share_.local_batch[size_t(b)];  // (one process: every batch is local)
  CapturedStep* s = lb >= 0 ? graphs_->find(lb) : nullptr;
  if (!s) {
    if (lb < 0 || !train_store_->is_resident(lb) || graphs_->refused(lb) || !graphs_->has_room() ||
        !(s = capture_step(b, lb))) {
      ++graph_counts_.fallbacks;
      return false;
    }
  }
  (void)train_store_->acquire(lb);  // (a resident batch: only marks a streamed slot free)
  // The host part of the step: the dropout counter and the optimizer's scalars of this step.
  opt_->prepare_device_step();
  graph_state_->write(dropout_rng_.counter(), *opt_);
  s->graph.launch();
  (void)dropout_rng_.take(s->draws);  // the draws the uncaptured step takes
  ++graph_counts_.replays;
  const lcm::data::BatchTensors& bt = *s->labels;
  const double lv = double(lcm::to_host(s->loss)[0]);  // waits for the step
  const std::vector<float> pv = lcm::to_host(s->pred);
  for (int64_t i = 0; i < bt.batch; ++i) {
    const double y = double(bt.speedup[size_t(i)]);
    const double yhat = lcm::model::speedup_from_score(double(pv[size_t(i)]), mc_.log_output);
    ape_sum_ += lcm::model::loss_ape(y, yhat);
  }
  if (!std::isfinite(lv))
    throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) +
                             ", batch " + std::to_string(b) +
                             " (a CUDA-graph step: its update was applied; "
                             "training.cuda_graphs=off stops before it)");
  points_trained_ += share_.global_points[size_t(b)];
  if (next_local_batch(b) >= 0) train_store_->prefetch(next_local_batch(b));
  if (per_batch_ && sched_->last_step() + 1 <= int64_t(c_.training.max_epochs) * n_batches_)
    sched_->step(*opt_);
  *loss = lv;
  return true;
}

}  // namespace lcm::train
