// The trainer's CPU step in sub-batches (trainer_impl.hpp forward_backward_split,
// train/sub_batches.hpp).
#include "train/trainer_impl.hpp"

namespace lcm::train {

double Trainer::forward_backward_split(int epoch, int64_t b, int64_t lb, const BatchInput& in,
                                       double* ape) {
  if (!sub_step_) {
    std::vector<lcm::Parameter<float>*> all;
    for (lcm::Parameter<float>& p : model_->params().all()) all.push_back(&p);
    sub_step_ = std::make_unique<SubBatchStep>(std::move(all), c_.training.cpu_sub_batches);
  }
  const auto& ds = train_.dataset;
  const lcm::data::BatchTensors& bt = in.host;
  if (comm_.size() > 1) seed_rank_dropout(epoch, b);
  // Each part's share of the batch's loss weights (loss_weights): its datapoints and its ranking
  // units over the batch's, so that the parts' losses add up to the whole batch's (a ranking
  // term's units lie in one part: parts hold whole programs then).
  const float batch_size = float(c_.data.batch_size);
  const LossWeights whole = loss_weights(b, bt, batch_size);
  const bool ranking = bool(c_.training.loss.ranking);
  const int64_t units =
      ranking ? ranking_unit_count(c_.training.loss, bt.speedup, bt.program_of) : 0;
  const bool relative = model_->config().relative_to_identity;
  const SubForward forward = [&](lcm::Tape<float>& tape, const SubBatch& sub, lcm::Rng& rng) {
    const lcm::NodeId y = model_->forward(tape, sub.trees, sub.bt, rng);
    if (!relative) return y;
    // as BatchInput::forward: minus the untransformed schedule of each datapoint's program
    lcm::data::Batch untransformed;
    for (int32_t p : sub.bt.programs)
      untransformed.points.push_back({p, lcm::data::kIdentitySchedule});
    lcm::data::BatchTensors it = ds.materialize(untransformed);
    lcm::model::scale_features(in.scaling, it);
    const lcm::NodeId f0 = model_->forward(tape, ds.trees(untransformed), it, rng);
    return lcm::model::relative_to_untransformed(tape, y, f0, sub.bt.program_of);
  };
  const SubLoss loss = [&](lcm::Tape<float>& tape, lcm::NodeId pred, const SubBatch& sub) {
    const double share = double(sub.bt.batch) / double(bt.batch);
    const int64_t mine =
        ranking ? ranking_unit_count(c_.training.loss, sub.bt.speedup, sub.bt.program_of) : 0;
    const LossWeights w{
        float(double(whole.pointwise) * share),
        units > 0 ? float(double(whole.pairwise) * double(mine) / double(units)) : 0.0f};
    return training_loss(tape, c_.training.loss, pred, sub.bt, w, float(c_.training.rank_weight),
                         float(c_.training.huber_delta));
  };
  std::vector<float> pv;
  const double lv = sub_step_->run(bt, ds.trees(lb), ranking, dropout_rng_, forward, loss, &pv);
  for (int64_t i = 0; i < bt.batch; ++i) {
    const double y = double(bt.speedup[size_t(i)]);
    const double yhat = lcm::model::speedup_from_score(double(pv[size_t(i)]), mc_.log_output);
    *ape += lcm::model::loss_ape(y, yhat);
  }
  if (!std::isfinite(lv))
    throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) +
                             ", batch " + std::to_string(b));
  return lv;
}

}  // namespace lcm::train
