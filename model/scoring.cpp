// From a batch's features to the reported speedups, in the order a reader follows (see
// scoring.hpp).
#include "model/scoring.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/rng.hpp"
#include "model/speedup.hpp"

namespace lcm::model {

const ModelConfig& ScoringModels::config() const {
  if (members.empty() || !members[0])
    throw std::invalid_argument("ScoringModels: no member model to score with");
  return members[0]->config();
}

void scale_features(const InputScaling* scaling, data::BatchTensors& bt) {
  if (scaling) scaling->apply(bt);
}

NodeId relative_to_untransformed(Tape<float>& tape, NodeId y, NodeId f0,
                                 const std::vector<int32_t>& program_of) {
  const std::vector<int64_t> of(program_of.begin(), program_of.end());
  return ops::add(tape, y, ops::scale(tape, ops::index_select(tape, f0, 0, of), -1.0f));
}

std::vector<std::vector<float>> untransformed_outputs(const ScoringModels& m,
                                                      const data::BatchTrees& trees,
                                                      data::BatchTensors features,
                                                      Tape<float>& tape) {
  scale_features(m.scaling, features);
  tape.clear();
  tape.set_training(false);
  tape.set_grad_enabled(false);
  std::vector<std::vector<float>> out;
  for (CostModel<float>* model : m.members) {
    Rng rng(0);
    const NodeId f0 = model->forward(tape, trees, features, rng);
    out.push_back(to_host(tape.value(f0)));
    tape.clear();
  }
  return out;
}

std::vector<std::vector<float>> scored_program_rows(const ScoringModels& m,
                                                    const data::BatchTrees& trees,
                                                    data::BatchTensors features, Tape<float>& tape,
                                                    int64_t max_rows) {
  scale_features(m.scaling, features);
  std::vector<std::vector<float>> rows;
  for (CostModel<float>* model : m.members) {
    rows.push_back(model->program_rows(tape, trees, features, max_rows));
    tape.clear();
  }
  return rows;
}

std::vector<ScoredDatapoint> score_batch(const ScoringModels& m, ScoringBatch& batch,
                                         Tape<float>& tape) {
  const ModelConfig& config = m.config();
  const size_t K = m.members.size();
  const bool relative = m.relative();
  if (batch.staged && K != 1)
    throw std::invalid_argument("score_batch: staged inputs are prepared for one model, not " +
                                std::to_string(K) + " ensemble members");
  if (relative && !batch.untransformed_output && batch.untransformed_trees.empty())
    throw std::invalid_argument(
        "score_batch: a score relative to the untransformed schedule needs the untransformed "
        "schedules' outputs or features");
  const size_t B = size_t(batch.features.batch);

  // 1. Input scaling (model-spec §3.10) of the features the forwards read.
  if (!batch.staged) scale_features(m.scaling, batch.features);
  if (relative && !batch.untransformed_output)
    scale_features(m.scaling, batch.untransformed_features);

  tape.clear();
  tape.set_training(false);
  tape.set_grad_enabled(false);
  std::vector<double> sum(B, 0.0);  // Σ_k s_k,i (step 4)
  for (size_t k = 0; k < K; ++k) {
    CostModel<float>& model = *m.members[k];
    Rng rng(0);  // eval mode: no dropout draws from it
    // 2. The member's forward (model-spec §5): y = f_k(schedule) [B].
    NodeId y = -1;
    std::vector<float> yv;  // ŷ on the host: read back below, or given by forward_memo
    ForwardMemo* memo = k < batch.memos.size() ? batch.memos[k] : nullptr;
    // a query of one program with more datapoints than one slice: CostModel::forward_parts
    const bool split = !batch.staged && tape.device() == Device::CPU && batch.trees.size() == 1 &&
                       batch.features.programs.size() == 1 &&
                       config.encoder.kind == EncoderKind::None &&
                       CostModel<float>::inference_parts(int64_t(B)) > 1;
    if (batch.staged) {
      y = model.forward(tape, batch.trees, *batch.staged, rng);
    } else if (batch.program_rows && split) {  // one program's schedules in slices
      yv =
          model.forward_parts(tape, *batch.trees[0], batch.features, &(*batch.program_rows)[k],
                              batch.schedule_weight ? (*batch.schedule_weight)[k].data() : nullptr);
    } else if (batch.program_rows) {
      ForwardInputs<float> in =
          model.prepare_shared_inputs(batch.trees, batch.features, &(*batch.program_rows)[k]);
      if (batch.schedule_weight) in.sched_weight = (*batch.schedule_weight)[k].data();
      // one datapoint of a program whose products all run the one-row kernel: there
      // forward_memo's answers are forward()'s bit for bit; a larger batch's or program's
      // products may round differently from those of its new rows alone
      if (memo && memo->max_bytes > 0 && B == 1 && batch.trees.size() == 1 &&
          tape.device() == Device::CPU && batch.features.n_comps > 0 &&
          model.memo_matches_forward(*batch.trees[0], batch.features.n_comps))
        yv = model.forward_memo(tape, *batch.trees[0], in, *memo);
      else
        y = model.forward(tape, batch.trees, in, rng);
    } else if (split) {
      yv = model.forward_parts(tape, *batch.trees[0], batch.features, nullptr);
    } else {
      y = model.forward(tape, batch.trees, batch.features, rng);
    }
    NodeId f0 = -1;  // f_k(untransformed schedule) [P], when forwarded here
    if (relative && !batch.untransformed_output)
      f0 = model.forward(tape, batch.untransformed_trees, batch.untransformed_features, rng);
    if (k + 1 == K && batch.on_queued) batch.on_queued();
    if (y >= 0) yv = to_host(tape.value(y));
    std::vector<float> f0v;
    if (relative)
      f0v = batch.untransformed_output ? (*batch.untransformed_output)[k] : to_host(tape.value(f0));
    tape.clear();
    for (size_t i = 0; i < B; ++i) {
      // 3. Relative to the untransformed schedule: s = y − f0 of its program, and that schedule
      //    itself exactly 0 (1×).
      double s = double(yv[i]);
      if (relative) {
        const bool untransformed = i < batch.untransformed.size() && batch.untransformed[i];
        s = untransformed ? 0.0 : double(yv[i] - f0v.at(size_t(batch.features.program_of[i])));
      }
      // 4. (the sum of) the ensemble mean
      sum[i] = k == 0 ? s : sum[i] + s;
    }
  }

  std::vector<ScoredDatapoint> out(B);
  for (size_t i = 0; i < B; ++i) {
    // 4. The ensemble mean in the output space (ln speedup: a geometric mean of speedups).
    const double score = K == 1 ? sum[i] : sum[i] / double(K);
    // 5.–6. The calibration map, else the head's map: a finite speedup > 0 (model-spec §4).
    out[i].score = score;
    out[i].uncalibrated = speedup_from_score(score, config.log_output);
    out[i].speedup = reported_speedup(score, config.log_output, m.calibration);
  }
  return out;
}

}  // namespace lcm::model
