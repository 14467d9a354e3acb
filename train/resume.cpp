// The --resume policy of lcm-train (see resume.hpp).
#include "train/resume.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "data/skips.hpp"
#include "engine/safetensors.hpp"
#include "train/early_stopping.hpp"
#include "train/report.hpp"
#include "util/json_parse.hpp"

namespace lcm::train {
namespace {

/// Two settings' texts are the same value: equal text, or both numbers of equal value.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char *ea = nullptr, *eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  return ea != a.c_str() && *ea == '\0' && eb != b.c_str() && *eb == '\0' && x == y;
}

/// A whole decimal number (the text of lcm.epoch), or false.
bool parse_epoch(const std::string& text, int& out) {
  try {
    size_t used = 0;
    out = std::stoi(text, &used);
    return used == text.size();
  } catch (const std::logic_error&) {
    return false;
  }
}

}  // namespace

std::string run_settings_json(const config::Config& c) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  for (const auto& k : config::config_keys()) {
    if (k.on_resume == config::OnResume::Free) continue;
    w.Key(k.key.c_str());
    const std::string v = k.get(c);
    w.String(v.c_str());
  }
  w.EndObject();
  return sb.GetString();
}

Metadata saved_run_settings(const Metadata& om, const Metadata& mm) {
  Metadata out;
  if (auto it = om.find(meta::kRunSettings); it != om.end()) {
    // A damaged record is an error: read as "no settings", --resume would skip the check of
    // every setting that defines the run.
    rapidjson::Document d;
    const std::string why = parse_json_bounded<rapidjson::kParseFullPrecisionFlag>(d, it->second);
    if (!why.empty() || !d.IsObject())
      throw std::runtime_error(
          std::string(meta::kRunSettings) + " is damaged (" +
          (why.empty() ? std::string("not a JSON object") : "bad JSON " + why) +
          "): the saved run's settings cannot be checked");
    for (auto& m : d.GetObject()) {
      if (!m.value.IsString())
        throw std::runtime_error(std::string(meta::kRunSettings) + " is damaged (" +
                                 m.name.GetString() +
                                 " is not a string): the saved run's settings cannot be checked");
      out[m.name.GetString()] = m.value.GetString();
    }
    if (out.empty())
      throw std::runtime_error(std::string(meta::kRunSettings) +
                               " is damaged (no setting): the saved run's settings cannot be "
                               "checked");
    return out;
  }
  if (auto it = mm.find(meta::kLoss); it != mm.end()) out["training.loss"] = it->second;
  if (auto it = om.find("weight_decay"); it != om.end())  // the optimizer's own record (%.17g)
    out["training.weight_decay"] = format_number(std::strtod(it->second.c_str(), nullptr));
  if (auto it = mm.find(meta::kInputScaling); it != mm.end()) {
    rapidjson::Document d;
    if (parse_json_bounded(d, it->second).empty() && d.IsObject() && d.HasMember("mode") &&
        d["mode"].IsString())
      out["model.input_scaling"] = d["mode"].GetString();
  }
  return out;
}

std::vector<std::string> check_resume_settings(const config::Config& c, const Metadata& saved) {
  std::string refused;
  std::vector<std::string> warnings;
  for (const auto& k : config::config_keys()) {
    if (k.on_resume == config::OnResume::Free) continue;
    if (k.key == "training.max_epochs") continue;  // raising it is how a run is continued
    auto it = saved.find(k.key);
    if (it == saved.end()) continue;
    const std::string now = k.get(c);
    if (same_value(now, it->second)) continue;
    if (k.on_resume == config::OnResume::Refuse)
      refused += std::string(refused.empty() ? "" : ", ") + k.key + "=" + now + " (the run used " +
                 it->second + ")";
    else
      warnings.push_back("lcm-train: warning: --resume with " + k.key + " " + it->second + " -> " +
                         now + ": the optimizer continues with the new value");
  }
  if (!refused.empty())
    throw config::ConfigError(
        "--resume with other settings than the saved run: " + refused +
        "; these define the run's objective, model or batch order: resume with the "
        "saved values, or start a new run (another experiment.name)");
  return warnings;
}

config::ConfigError interrupted_epoch_error(int max_epochs, int epoch,
                                            const std::string& after_batch) {
  return config::ConfigError(
      "training.max_epochs=" + std::to_string(max_epochs) + " is below epoch " +
      std::to_string(epoch + 1) + ", in which the run was interrupted" +
      (after_batch.empty() ? "" : " (after batch " + after_batch + ")") +
      "; resume with training.max_epochs >= " + std::to_string(epoch + 1) + " to finish it");
}

std::string finished_line(const config::Config& c, int epochs_done, const std::string& best_path) {
  return "lcm-train: --resume: nothing to do: the run already finished at epoch " +
         std::to_string(epochs_done) +
         " of training.max_epochs=" + std::to_string(c.training.max_epochs) +
         "; raise training.max_epochs to continue (best checkpoint " + best_path + ")";
}

std::string early_stopped_line(const config::Config& c, int epochs_done, int bad_epochs,
                               const std::string& best_path) {
  return "lcm-train: --resume: nothing to do: the run stopped early at epoch " +
         std::to_string(epochs_done) +
         " of training.max_epochs=" + std::to_string(c.training.max_epochs) + " (validation " +
         config::name_of(c.training.select_metric) + " has not improved for " +
         lcm::data::count_of(bad_epochs, "epoch") +
         "); raise training.early_stop_patience (or 0 = off) to continue (best checkpoint " +
         best_path + ")";
}

ResumePrecheck precheck_resume(const config::Config& c, const RunPaths& paths) {
  ResumePrecheck r;
  Metadata om, mm;
  bool readable = true;
  try {
    om = lcm::read_safetensors(paths.optimizer).metadata;
    mm = lcm::read_safetensors(paths.last).metadata;
  } catch (const std::exception&) {  // unreadable: the full --resume path names the problem
    readable = false;
  }
  // Settings that define the run's math or batch order must be those of the saved run
  // (refused, exit 2); optimizer-schedule changes are warned about.
  try {
    r.saved_settings = saved_run_settings(om, mm);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("cannot --resume from " + paths.optimizer + ": " + e.what() +
                             "; restore the file or start a new run (another experiment.name)");
  }
  r.saved_weight_decay = metadata_value(om, "weight_decay");
  r.warnings = check_resume_settings(c, r.saved_settings);
  const std::string epoch_text = metadata_value(om, meta::kEpoch);
  const std::string batches = metadata_value(om, meta::kBatchesDone);
  // A max_epochs below the epoch a mid-epoch interruption reached is refused.
  if (!epoch_text.empty() && !batches.empty() && batches != "0") {
    const int epochs_done = std::atoi(epoch_text.c_str());
    if (epochs_done >= c.training.max_epochs)
      throw interrupted_epoch_error(c.training.max_epochs, epochs_done, batches);
  }
  // A finished run (all epochs done, or stopped early by the same patience), at an epoch
  // boundary where model and optimizer agree.
  if (!readable || epoch_text.empty() || (!batches.empty() && batches != "0"))
    return r;  // mid-epoch: resumable
  if (mm.count(meta::kEpoch) && step_stamp(mm) != epoch_text + "/0")
    return r;  // different steps: full path
  int epochs_done = 0;
  if (!parse_epoch(epoch_text, epochs_done)) return r;
  if (epochs_done >= c.training.max_epochs) {
    r.nothing_to_do = finished_line(c, epochs_done, paths.best);
    return r;
  }
  EarlyStopping stopper;
  stopper.patience = c.training.early_stop_patience;
  stopper.count_from_epoch = early_stop_count_from(
      c.training.early_stop_from_epoch, c.model.encoder != lcm::model::EncoderKind::None,
      c.training.fine_tune_epoch, c.training.max_epochs);
  try {
    for (auto& e : history_from_json(metadata_value(om, meta::kHistory)))
      stopper.update(select_score(c.training.select_metric, e), e.epoch);
  } catch (const std::exception&) {
    return r;
  }
  if (stopper.should_stop())
    r.nothing_to_do = early_stopped_line(c, epochs_done, stopper.bad_epochs, paths.best);
  return r;
}

std::string changed_data_warning(const config::Config& c, const Metadata& meta) {
  std::string changes;
  struct Recorded {
    const char* key;         // data.<key>
    const char* meta_key;    // where the last checkpoint records it
    const std::string& now;  // this run's value
  };
  for (const Recorded& r : {Recorded{"train_file", meta::kTrainFile, c.data.train_file},
                            Recorded{"valid_file", meta::kValidFile, c.data.valid_file}}) {
    const std::string key = r.key, &now = r.now;
    auto it = meta.find(r.meta_key);
    if (it == meta.end() || it->second == now) continue;
    std::error_code ec;
    if (!it->second.empty() && !now.empty() && std::filesystem::equivalent(it->second, now, ec) &&
        !ec)
      continue;
    changes += std::string(changes.empty() ? "" : ", ") + "data." + key + "=" + now +
               " (the checkpointed run used " + it->second + ")";
  }
  if (changes.empty()) return "";
  return "lcm-train: warning: --resume with other data: " + changes +
         "; the log and the best-checkpoint comparison now mix results on different data";
}

}  // namespace lcm::train
