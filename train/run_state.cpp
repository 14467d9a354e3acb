// Reading and writing the run-state metadata of lcm-train's files (see run_state.hpp).
#include "train/run_state.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <stdexcept>

#include "train/report.hpp"

namespace lcm::train {

std::string metadata_value(const Metadata& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

Metadata RunState::to_metadata() const {
  const std::string best = format_number(best_val_mape);
  Metadata m{{meta::kEpoch, std::to_string(epochs_done)},
             {meta::kScheduleStep, std::to_string(schedule_step)},
             {meta::kRngCounter, std::to_string(rng_counter)},
             {meta::kBestValMape, best.empty() ? "inf" : best},
             {meta::kHistory, history_json(history)},
             {meta::kRunSettings, run_settings}};
  if (batches_done > 0) {
    m[meta::kBatchesDone] = std::to_string(batches_done);
    m[meta::kPartialLossSum] = format_number(partial_loss_sum);
    m[meta::kPartialApeSum] = format_number(partial_ape_sum);
    m[meta::kEpochLr] = format_number(epoch_lr);
  }
  return m;
}

RunState RunState::from_metadata(const Metadata& m, const std::string& path) {
  auto need = [&](const char* k) {
    auto it = m.find(k);
    if (it == m.end()) throw std::runtime_error("--resume: " + path + " lacks metadata " + k);
    return it->second;
  };
  // numbers of the optimizer file's metadata; a malformed one names the file and the key
  auto number = [&](const char* k) -> double {
    const std::string v = need(k);
    try {
      size_t used = 0;
      const double x = std::stod(v, &used);
      if (used == v.size()) return x;
    } catch (const std::logic_error&) {
    }
    throw std::runtime_error("--resume: " + path + ": metadata " + k + " is not a number: '" + v +
                             "'");
  };
  RunState s;
  s.epochs_done = int(number(meta::kEpoch));
  s.schedule_step = int64_t(number(meta::kScheduleStep));
  try {
    s.rng_counter = std::stoull(need(meta::kRngCounter));
  } catch (const std::logic_error&) {
    throw std::runtime_error("--resume: " + path + ": metadata " + meta::kRngCounter +
                             " is not a number: '" + need(meta::kRngCounter) + "'");
  }
  s.best_val_mape = number(meta::kBestValMape);
  s.history = history_from_json(need(meta::kHistory));
  s.run_settings = metadata_value(m, meta::kRunSettings);
  if (m.count(meta::kBatchesDone)) {  // interrupted inside an epoch (absent: epoch boundary)
    s.batches_done = int64_t(number(meta::kBatchesDone));
    s.partial_loss_sum = number(meta::kPartialLossSum);
    s.partial_ape_sum = number(meta::kPartialApeSum);
    s.epoch_lr = number(meta::kEpochLr);
  }
  return s;
}

std::string feature_config_json(const config::Config& c) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  for (const std::string& k : config::feature_keys()) {
    w.Key(k.c_str());
    const std::string v = config::get_config_value(c, k);
    w.String(v.c_str(), rapidjson::SizeType(v.size()));
  }
  w.EndObject();
  return sb.GetString();
}

Metadata last_checkpoint_metadata(const config::Config& c, int epochs_done, int64_t batches_done,
                                  const std::string& input_scaling_json) {
  Metadata m{{meta::kEpoch, std::to_string(epochs_done)},
             {meta::kBatchesDone, std::to_string(batches_done)},
             {meta::kExperiment, c.experiment.name},
             {meta::kInputScaling, input_scaling_json},
             {meta::kLoss, c.training.loss.text()},
             {meta::kFeatureConfig, feature_config_json(c)},
             {meta::kTrainFile, c.data.train_file},   // for --resume's
             {meta::kValidFile, c.data.valid_file}};  // changed-data warning
  if (c.data.train_folds.active()) m[meta::kTrainFolds] = c.data.train_folds.text();
  return m;
}

Metadata best_checkpoint_metadata(const config::Config& c, int epoch, double val_mape,
                                  const std::string& input_scaling_json) {
  Metadata m{{meta::kEpoch, std::to_string(epoch)},
             {meta::kValMape, format_number(val_mape)},
             {meta::kSelectMetric, config::name_of(c.training.select_metric)},
             {meta::kExperiment, c.experiment.name},
             {meta::kInputScaling, input_scaling_json},
             {meta::kLoss, c.training.loss.text()},
             {meta::kFeatureConfig, feature_config_json(c)}};
  if (c.data.train_folds.active()) m[meta::kTrainFolds] = c.data.train_folds.text();
  return m;
}

std::string step_stamp(const Metadata& m) {
  const std::string epoch = metadata_value(m, meta::kEpoch),
                    batches = metadata_value(m, meta::kBatchesDone);
  return (epoch.empty() ? "?" : epoch) + "/" + (batches.empty() ? "0" : batches);
}

}  // namespace lcm::train
