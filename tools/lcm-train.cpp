// lcm-train: trains the LOOPer cost model (model-spec §5–§6) with the training.loss objective (MAPE
// by default; log-space and ranking losses, input scaling and early stopping of issue 7) and
// Adam/AdamW on data.train_file, validates every epoch on data.valid_file, and writes best/last
// checkpoints, optimizer state for --resume, JSONL/CSV logs and loss/metric SVGs under
// experiment.base_path.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/atomic_file.hpp"
#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/ops.hpp"
#include "engine/optim.hpp"
#include "engine/safetensors.hpp"
#include "engine/tape.hpp"
#include "engine/threads.hpp"
#include "train/checkpoint.hpp"
#include "config/cli.hpp"
#include "config/config.hpp"
#include "tools/common/run_tool.hpp"
#include "train/device_batch_store.hpp"
#include "train/encoder.hpp"
#include "train/evaluate.hpp"
#include "train/overlap.hpp"
#include "train/splits.hpp"
#include "train/early_stopping.hpp"
#include "train/losses.hpp"
#include "train/report.hpp"
#include "train/startup_checks.hpp"

namespace {

std::atomic<bool> g_interrupted{false};
/// First SIGINT/SIGTERM: set the flag (the loop saves `last` and stops). A second one during that
/// shutdown exits at once without saving (128 + signal, 130 for Ctrl-C), removing the temp file of
/// a write in progress: the files on disk stay the previous complete ones (writes are temp+rename).
extern "C" void on_sigint(int sig) {
  if (!g_interrupted.exchange(true)) return;
  static const char msg[] = "lcm-train: second interrupt, exiting without saving\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  lcm::remove_pending_atomic_temp();
  lcm::data::remove_registered_cache_temp();
  ::_exit(128 + sig);
}
/// Test hook LCM_INTERRUPT_AFTER_STEPS: one Ctrl-C, or with LCM_INTERRUPT_TWICE=1 two real SIGINTs
/// (the second lands during the graceful shutdown the first started).
void simulate_interrupt() {
  const char* twice = std::getenv("LCM_INTERRUPT_TWICE");
  if (twice && std::string(twice) == "1") {
    std::raise(SIGINT);
    std::raise(SIGINT);
  }
  g_interrupted.store(true);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// One line of the training log.
struct EpochRecord {
  int epoch = 0;
  double train_mape = 0, val_mape = 0, seconds = 0, datapoints_per_s = 0, lr = 0;
  // issue 7: the training objective and validation ranking metrics (model-spec §7 means); the
  // train_* ranking metrics only with training.log_train_metrics (NaN otherwise)
  double train_loss = NAN, val_spearman = NAN, val_ndcg = NAN, val_top1 = NAN;
  double train_spearman = NAN, train_ndcg = NAN;
  // datapoints trained in this epoch by the process that finished it (-1: not logged) and the
  // seconds of those training steps: datapoints_per_s = datapoints / train_seconds
  int64_t datapoints = 0;
  double train_seconds = NAN;
};

/// The value of training.select_metric in `r`, oriented so that larger is better.
double select_score(lcm::config::SelectMetric metric, const EpochRecord& r) {
  if (metric == lcm::config::SelectMetric::Spearman) return r.val_spearman;
  if (metric == lcm::config::SelectMetric::Ndcg) return r.val_ndcg;
  return -r.val_mape;
}

std::string history_json(const std::vector<EpochRecord>& h) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartArray();
  for (auto& r : h) {
    w.StartObject();
    w.Key("epoch");
    w.Int(r.epoch);
    w.Key("train_mape");
    w.Double(r.train_mape);
    w.Key("val_mape");
    std::isfinite(r.val_mape) ? w.Double(r.val_mape) : w.Null();
    w.Key("seconds");
    w.Double(r.seconds);
    w.Key("datapoints_per_s");
    w.Double(r.datapoints_per_s);
    w.Key("lr");
    w.Double(r.lr);
    auto opt_num = [&](const char* k, double v) {
      w.Key(k);
      std::isfinite(v) ? w.Double(v) : w.Null();
    };
    opt_num("train_loss", r.train_loss);
    opt_num("val_spearman", r.val_spearman);
    opt_num("val_ndcg", r.val_ndcg);
    opt_num("val_top1_recovered", r.val_top1);
    opt_num("train_spearman", r.train_spearman);
    opt_num("train_ndcg", r.train_ndcg);
    // (JSONL only, the CSV's columns are unchanged) what datapoints_per_s is computed from;
    // null in entries written before they were recorded
    w.Key("datapoints");
    r.datapoints >= 0 ? w.Int64(r.datapoints) : w.Null();
    opt_num("train_seconds", r.train_seconds);
    w.EndObject();
  }
  w.EndArray();
  return sb.GetString();
}

std::vector<EpochRecord> history_from_json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  std::vector<EpochRecord> out;
  if (d.HasParseError() || !d.IsArray()) throw std::runtime_error("lcm.history: not a JSON array");
  size_t index = 0;
  for (auto& o : d.GetArray()) {
    // A hand-edited or damaged history names the entry and field instead of crashing.
    auto bad = [&](const char* k) {
      return std::runtime_error("lcm.history: entry " + std::to_string(index) + ": field \"" + k +
                                "\" is missing or not a number");
    };
    if (!o.IsObject()) throw std::runtime_error("lcm.history: entry " + std::to_string(index) + " is not an object");
    auto num = [&](const char* k) {
      if (!o.HasMember(k) || !o[k].IsNumber()) throw bad(k);
      return o[k].GetDouble();
    };
    EpochRecord r;
    if (!o.HasMember("epoch") || !o["epoch"].IsInt()) throw bad("epoch");
    r.epoch = o["epoch"].GetInt();
    r.train_mape = num("train_mape");
    r.val_mape = o.HasMember("val_mape") && o["val_mape"].IsNull() ? NAN : num("val_mape");
    r.seconds = num("seconds");
    r.datapoints_per_s = num("datapoints_per_s");
    r.lr = num("lr");
    ++index;
    auto opt_num = [&](const char* k) {  // absent in logs written before issue 7
      return o.HasMember(k) && o[k].IsNumber() ? o[k].GetDouble() : NAN;
    };
    r.train_loss = opt_num("train_loss");
    r.val_spearman = opt_num("val_spearman");
    r.val_ndcg = opt_num("val_ndcg");
    r.val_top1 = opt_num("val_top1_recovered");
    r.train_spearman = opt_num("train_spearman");
    r.train_ndcg = opt_num("train_ndcg");
    r.datapoints = o.HasMember("datapoints") && o["datapoints"].IsInt64() ? o["datapoints"].GetInt64() : -1;
    r.train_seconds = opt_num("train_seconds");
    out.push_back(r);
  }
  return out;
}

void write_logs(const lcm::train::RunPaths& p, const std::vector<EpochRecord>& h,
                const std::string& name) {
  std::string jsonl,
      csv = "epoch,train_mape,val_mape,train_loss,val_spearman,val_ndcg,val_top1_recovered,"
            "train_spearman,train_ndcg,seconds,datapoints_per_s,lr\n";
  rapidjson::Document d;
  d.Parse(history_json(h).c_str());
  for (auto& o : d.GetArray()) {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    o.Accept(w);
    jsonl += std::string(sb.GetString()) + "\n";
  }
  using lcm::train::format_number;
  lcm::train::PlotSeries tr{"train MAPE", "#1f77b4", {}, {}}, va{"validation MAPE", "#ff7f0e", {}, {}};
  lcm::train::PlotSeries vs{"validation Spearman", "#2ca02c", {}, {}},
      vn{"validation nDCG", "#d62728", {}, {}}, v1{"validation top-1 recovered", "#9467bd", {}, {}},
      ts{"train Spearman", "#17becf", {}, {}}, tn{"train nDCG", "#e377c2", {}, {}};
  for (auto& r : h) {
    csv += std::to_string(r.epoch) + "," + format_number(r.train_mape) + "," +
           format_number(r.val_mape) + "," + format_number(r.train_loss) + "," +
           format_number(r.val_spearman) + "," + format_number(r.val_ndcg) + "," +
           format_number(r.val_top1) + "," + format_number(r.train_spearman) + "," +
           format_number(r.train_ndcg) + "," + format_number(r.seconds) + "," +
           format_number(r.datapoints_per_s) + "," + format_number(r.lr) + "\n";
    tr.x.push_back(r.epoch), tr.y.push_back(r.train_mape);
    va.x.push_back(r.epoch), va.y.push_back(r.val_mape);
    auto add = [&](lcm::train::PlotSeries& s, double v) {
      if (std::isfinite(v)) s.x.push_back(r.epoch), s.y.push_back(v);
    };
    add(vs, r.val_spearman), add(vn, r.val_ndcg), add(v1, r.val_top1);
    add(ts, r.train_spearman), add(tn, r.train_ndcg);
  }
  std::vector<lcm::train::PlotSeries> ranking;
  for (auto* s : {&vs, &vn, &v1, &ts, &tn})
    if (!s->x.empty()) ranking.push_back(*s);
  lcm::atomic_write_file(p.log_jsonl, jsonl);
  lcm::atomic_write_file(p.log_csv, csv);
  lcm::atomic_write_file(p.loss_svg, lcm::train::svg_line_plot("lcm-train " + name + ": loss",
                                                               "epoch", "MAPE (%)", {tr, va}));
  if (!ranking.empty())
    lcm::atomic_write_file((std::filesystem::path(p.loss_svg).parent_path() / ("ranking_" + name + ".svg")).string(),
                           lcm::train::svg_line_plot("lcm-train " + name + ": ranking metrics",
                                                     "epoch", "per-program mean", ranking));
}

/// The LR schedule selected by training.lr_schedule for `steps_per_epoch` batches per epoch.
std::unique_ptr<lcm::LrSchedule> make_schedule(const lcm::config::Config& c, int64_t steps_per_epoch,
                                               bool& per_batch) {
  const auto& t = c.training;
  const int64_t total = int64_t(t.max_epochs) * std::max<int64_t>(1, steps_per_epoch);
  per_batch = lcm::config::steps_per_batch(t.lr_schedule);
  if (t.lr_schedule == lcm::config::LrScheduleKind::Constant) return std::make_unique<lcm::ConstantLr>(t.lr);
  if (t.lr_schedule == lcm::config::LrScheduleKind::OneCyclePerEpoch ||
      t.lr_schedule == lcm::config::LrScheduleKind::OneCyclePerBatch) {
    lcm::OneCycleOptions o;
    o.max_lr = t.lr;
    o.total_steps = total;  // faithful Q1: sized for per-batch stepping even when stepped per epoch
    return std::make_unique<lcm::OneCycleLr>(o);
  }
  if (t.lr_schedule == lcm::config::LrScheduleKind::WarmupCosine) {
    const int64_t warmup = int64_t(std::llround(t.warmup_pct * double(total)));
    if (warmup >= total)  // (the range [0, 1) is checked when the key is set)
      throw lcm::config::ConfigError(
          "training.warmup_pct=" + lcm::config::get_config_value(c, "training.warmup_pct") + ": the warm-up takes " +
          std::to_string(warmup) + " of the " + std::to_string(total) + " batch steps (training.max_epochs=" +
          std::to_string(t.max_epochs) + " x " + std::to_string(std::max<int64_t>(1, steps_per_epoch)) +
          " batches), leaving none for the cosine decay; lower training.warmup_pct or raise training.max_epochs");
    return std::make_unique<lcm::WarmupCosineLr>(t.lr, warmup, total);
  }
  throw lcm::config::ConfigError("training.lr_schedule: unknown value " + lcm::config::name_of(t.lr_schedule));
}

class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on && ::isatty(2)) {}
  void update(int epoch, int64_t done, int64_t total, double loss) {
    if (!on_ || seconds_since(last_) < 0.2) return;
    last_ = Clock::now();
    const int width = 30;
    int fill = total ? int(width * done / total) : width;
    std::fprintf(stderr, "\r  epoch %d [%s%s] %lld/%lld loss %.2f", epoch,
                 std::string(size_t(fill), '=').c_str(), std::string(size_t(width - fill), ' ').c_str(),
                 (long long)done, (long long)total, loss);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r%60s\r", "");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
  Clock::time_point last_ = Clock::now();
};

/// The line of a --resume that has nothing to do because all training.max_epochs are done
/// (`epochs_done` >= training.max_epochs).
std::string finished_line(const lcm::config::Config& c, int epochs_done, const std::string& best_path) {
  return "lcm-train: --resume: nothing to do: the run already finished at epoch " + std::to_string(epochs_done) +
         " of training.max_epochs=" + std::to_string(c.training.max_epochs) +
         "; raise training.max_epochs to continue (best checkpoint " + best_path + ")";
}

/// The line of a --resume that has nothing to do because early stopping (training.early_stop_patience)
/// already stopped the run at `epochs_done`, `bad_epochs` epochs after the best one.
std::string early_stopped_line(const lcm::config::Config& c, int epochs_done, int bad_epochs,
                               const std::string& best_path) {
  return "lcm-train: --resume: nothing to do: the run stopped early at epoch " + std::to_string(epochs_done) +
         " of training.max_epochs=" + std::to_string(c.training.max_epochs) + " (validation " +
         lcm::config::name_of(c.training.select_metric) + " has not improved for " + lcm::data::count_of(bad_epochs, "epoch") +
         "); raise training.early_stop_patience (or 0 = off) to continue (best checkpoint " + best_path + ")";
}

/// For --resume, before any data is read or folder created: finished_line / early_stopped_line
/// when the optimizer state (paths.optimizer: lcm.epoch at an epoch boundary, lcm.history) and
/// the last model (paths.last, same lcm.epoch) say the run is over under config `c`; "" when it
/// can continue, or when the files cannot be judged here (unreadable, malformed, saved at
/// different steps): the full --resume path then names the problem.
std::string finished_before_data(const lcm::config::Config& c, const lcm::train::RunPaths& paths) {
  std::map<std::string, std::string> om, mm;
  try {
    om = lcm::read_safetensors(paths.optimizer).metadata;
    mm = lcm::read_safetensors(paths.last).metadata;
  } catch (const std::exception&) {
    return "";
  }
  auto get = [](const std::map<std::string, std::string>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  const std::string epoch_text = get(om, "lcm.epoch");
  const std::string batches = get(om, "lcm.batches_done");
  if (epoch_text.empty() || (!batches.empty() && batches != "0")) return "";  // mid-epoch: resumable
  if (mm.count("lcm.epoch") && (mm["lcm.epoch"] != epoch_text || (!get(mm, "lcm.batches_done").empty() &&
                                                                   get(mm, "lcm.batches_done") != "0")))
    return "";  // model and optimizer of different steps: reported by the full path
  int epochs_done = 0;
  try {
    size_t used = 0;
    epochs_done = std::stoi(epoch_text, &used);
    if (used != epoch_text.size()) return "";
  } catch (const std::logic_error&) {
    return "";
  }
  if (epochs_done >= c.training.max_epochs) return finished_line(c, epochs_done, paths.best);
  lcm::train::EarlyStopping stopper;
  stopper.patience = c.training.early_stop_patience;
  try {
    for (auto& r : history_from_json(get(om, "lcm.history"))) stopper.update(select_score(c.training.select_metric, r));
  } catch (const std::exception&) {
    return "";
  }
  if (stopper.should_stop()) return early_stopped_line(c, epochs_done, stopper.bad_epochs, paths.best);
  return "";
}

/// For --resume: one warning line ("" when none) when data.train_file / data.valid_file differ
/// from the files recorded in the last model's metadata `meta` (lcm.train_file, lcm.valid_file;
/// checkpoints written before they were recorded give no warning). Paths naming the same existing
/// file (e.g. relative vs absolute) are not a change.
std::string changed_data_warning(const lcm::config::Config& c, const std::map<std::string, std::string>& meta) {
  std::string changes;
  for (const auto& [key, now] : {std::pair<std::string, std::string>{"train_file", c.data.train_file},
                                 std::pair<std::string, std::string>{"valid_file", c.data.valid_file}}) {
    auto it = meta.find("lcm." + key);
    if (it == meta.end() || it->second == now) continue;
    std::error_code ec;
    if (!it->second.empty() && !now.empty() && std::filesystem::equivalent(it->second, now, ec) && !ec) continue;
    changes += std::string(changes.empty() ? "" : ", ") + "data." + key + "=" + now + " (the checkpointed run used " +
               it->second + ")";
  }
  if (changes.empty()) return "";
  return "lcm-train: warning: --resume with other data: " + changes +
         "; the log and the best-checkpoint comparison now mix results on different data";
}

/// Settings that define a run's objective, model or batch order: --resume refuses to continue a
/// run under other values (the saved run's values are in the optimizer state's lcm.run_settings).
const std::vector<std::string>& fixed_run_keys() {
  static const std::vector<std::string> keys{
      "data.batch_size",        "data.seed",          "data.min_functions_per_footprint",
      "data.loop_zeroing",      "data.shift_match",   "data.max_programs",
      "training.loss",          "training.rank_weight", "training.optimizer",
      "model.input_scaling",    "model.preset",       "model.comp_embed_layer_sizes",
      "model.drops",            "model.lstm_embedding_size", "model.expr_embed_size",
      "model.encoder"};
  return keys;
}
/// Optimizer-schedule settings: --resume under other values warns (old → new) and continues.
/// (training.max_epochs is compared separately: raising it is how a run is continued; a warning
/// only when the LR schedule depends on it.)
const std::vector<std::string>& warned_run_keys() {
  static const std::vector<std::string> keys{"training.lr",           "training.lr_schedule",
                                             "training.warmup_pct",   "training.weight_decay",
                                             "training.clip_grad_norm", "training.max_epochs"};
  return keys;
}

/// The values (text form of get_config_value) of fixed_run_keys() and warned_run_keys() under
/// config `c`, as a JSON object: stored as the optimizer state's metadata "lcm.run_settings".
std::string run_settings_json(const lcm::config::Config& c) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  for (const auto* keys : {&fixed_run_keys(), &warned_run_keys()})
    for (const auto& k : *keys) {
      w.Key(k.c_str());
      const std::string v = lcm::config::get_config_value(c, k);
      w.String(v.c_str());
    }
  w.EndObject();
  return sb.GetString();
}

/// For --resume, before any data is read: the settings of the saved run, from the optimizer
/// state's "lcm.run_settings" (optimizer metadata `om`), or, for runs saved before it existed,
/// training.loss and model.input_scaling from the last model's lcm.loss / lcm.input_scaling
/// (`mm`), training.weight_decay from the optimizer's own "weight_decay". Unparsable entries are left out (the full --resume path reports damaged files).
std::map<std::string, std::string> saved_run_settings(const std::map<std::string, std::string>& om,
                                                      const std::map<std::string, std::string>& mm) {
  std::map<std::string, std::string> out;
  if (auto it = om.find("lcm.run_settings"); it != om.end()) {
    rapidjson::Document d;
    d.Parse(it->second.c_str());
    if (!d.HasParseError() && d.IsObject())
      for (auto& m : d.GetObject())
        if (m.value.IsString()) out[m.name.GetString()] = m.value.GetString();
    return out;
  }
  if (auto it = mm.find("lcm.loss"); it != mm.end()) out["training.loss"] = it->second;
  if (auto it = om.find("weight_decay"); it != om.end())  // the optimizer's own record (%.17g)
    out["training.weight_decay"] = lcm::train::format_number(std::strtod(it->second.c_str(), nullptr));
  if (auto it = mm.find("lcm.input_scaling"); it != mm.end()) {
    rapidjson::Document d;
    d.Parse(it->second.c_str());
    if (!d.HasParseError() && d.IsObject() && d.HasMember("mode") && d["mode"].IsString())
      out["model.input_scaling"] = d["mode"].GetString();
  }
  return out;
}

/// For --resume, before any data is read: throws ConfigError (exit 2, one line) when a setting
/// of fixed_run_keys() differs from the saved run `saved` (saved_run_settings), naming each key
/// with the new and the saved value; returns one warning line per changed warned_run_keys()
/// setting except training.max_epochs ("" entries are not made). Numbers are compared by value
/// (0.001 = 1e-3).
/// --resume of a run interrupted in (0-based) epoch `epoch` under a training.max_epochs that does
/// not reach it: the refusal (exit 2). `after_batch`: the saved batch count, named when known.
lcm::config::ConfigError interrupted_epoch_error(int max_epochs, int epoch, const std::string& after_batch) {
  return lcm::config::ConfigError("training.max_epochs=" + std::to_string(max_epochs) + " is below epoch " +
                                 std::to_string(epoch + 1) + ", in which the run was interrupted" +
                                 (after_batch.empty() ? "" : " (after batch " + after_batch + ")") +
                                 "; resume with training.max_epochs >= " + std::to_string(epoch + 1) +
                                 " to finish it");
}

std::vector<std::string> check_resume_settings(const lcm::config::Config& c,
                                               const std::map<std::string, std::string>& saved) {
  auto same = [](const std::string& a, const std::string& b) {
    if (a == b) return true;
    char *ea = nullptr, *eb = nullptr;
    const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
    return ea != a.c_str() && *ea == '\0' && eb != b.c_str() && *eb == '\0' && x == y;
  };
  std::string refused;
  for (const auto& k : fixed_run_keys()) {
    auto it = saved.find(k);
    if (it == saved.end()) continue;
    const std::string now = lcm::config::get_config_value(c, k);
    if (!same(now, it->second))
      refused += std::string(refused.empty() ? "" : ", ") + k + "=" + now + " (the run used " + it->second + ")";
  }
  if (!refused.empty())
    throw lcm::config::ConfigError("--resume with other settings than the saved run: " + refused +
                                  "; these define the run's objective, model or batch order: resume with the "
                                  "saved values, or start a new run (another experiment.name)");
  std::vector<std::string> warnings;
  for (const auto& k : warned_run_keys()) {
    if (k == "training.max_epochs") continue;  // see max_epochs_warning
    auto it = saved.find(k);
    if (it == saved.end()) continue;
    const std::string now = lcm::config::get_config_value(c, k);
    if (!same(now, it->second))
      warnings.push_back("lcm-train: warning: --resume with " + k + " " + it->second + " -> " + now +
                         ": the optimizer continues with the new value");
  }
  return warnings;
}

int train(int argc, char** argv) {
  bool resume = false, quiet = false;
  lcm::config::Config c = lcm::config::load_config(
      argc, argv,
      "lcm-train: train the cost model (training.loss, Adam/AdamW) and keep the best checkpoint.\n"
      "Usage: lcm-train [--config FILE] [key=value | key value ...] [--resume]\n"
      "Outputs under experiment.base_path: weights/{best,last}_model_<name>.safetensors, "
      "weights/last_optimizer_<name>.safetensors, log_<name>.{jsonl,csv}, loss_<name>.svg.\n"
      "Ctrl-C finishes the current step, saves `last` and exits with code 130.",
      [&](CLI::App& app) {
        app.add_flag("--resume", resume, "continue from weights/last_* of this experiment");
        app.add_flag("-q,--quiet", quiet, "no progress bar / prepare progress");
      });
  // From here on Ctrl-C only sets a flag; the loop stops after the current step.
  std::signal(SIGINT, on_sigint);
  std::signal(SIGTERM, on_sigint);  // a batch system's stop request: the same clean save
  // Test hook: LCM_INTERRUPT_AFTER_STEPS=N behaves as a Ctrl-C right after the N-th optimizer step
  // of this process (the interrupt/resume tests need a deterministic interruption point).
  const char* interrupt_env = std::getenv("LCM_INTERRUPT_AFTER_STEPS");
  const int64_t interrupt_after = interrupt_env ? std::atoll(interrupt_env) : 0;
  int64_t steps_taken = 0;
  // Device check first: one clear line when it cannot be used.
  const lcm::DeviceSpec dev = c.training.device;
  lcm::require_device(dev);
  const bool on_cuda = dev.kind == lcm::Device::CUDA;
  lcm::set_cuda_tf32(c.training.tf32);
  if (c.data.valid_file.empty()) throw lcm::config::ConfigError("data.valid_file is empty");
  lcm::set_num_threads(c.training.threads);
  // model.encoder / model.encoder_weights (model-spec §8): sizes from the autoencoder checkpoint
  const lcm::model::ModelConfig mc = lcm::train::model_config_with_encoder(c);
  // A pre-trained encoder (model-spec §8) reads the raw computation vectors (it applies its own
  // §3.10 transform): standardised or log-scaled inputs would not be what it was trained on.
  if (mc.encoder.kind != lcm::model::EncoderKind::None && c.model.input_scaling != lcm::config::ScalingMode::None)
    throw lcm::config::ConfigError("model.encoder=" + lcm::config::name_of(c.model.encoder) + " needs model.input_scaling=none (got " +
                                  lcm::config::name_of(c.model.input_scaling) + "): the encoder reads raw computation vectors");
  const lcm::train::RunPaths paths = lcm::train::run_paths(c);
  std::map<std::string, std::string> saved_settings;  // --resume: the saved run's settings
  std::vector<std::string> resume_warnings;
  std::string saved_weight_decay;  // --resume: the optimizer file's weight_decay (text)
  // Failures detectable now come before preparing the data (which can take minutes).
  if (resume) {
    lcm::train::require_resume_files(paths, c.experiment.name);  // before creating folders
    // Settings that define the run's math or batch order must be those of the saved run
    // (refused, exit 2); optimizer-schedule changes are warned about; a max_epochs below the
    // epoch a mid-epoch interruption reached is refused. Decided from metadata: no data read.
    {
      std::map<std::string, std::string> om, mm;
      try {
        om = lcm::read_safetensors(paths.optimizer).metadata;
        mm = lcm::read_safetensors(paths.last).metadata;
      } catch (const std::exception&) {  // unreadable: the full --resume path names the problem
      }
      saved_settings = saved_run_settings(om, mm);
      if (auto it = om.find("weight_decay"); it != om.end()) saved_weight_decay = it->second;
      resume_warnings = check_resume_settings(c, saved_settings);
      auto it_e = om.find("lcm.epoch"), it_b = om.find("lcm.batches_done");
      if (it_e != om.end() && it_b != om.end() && it_b->second != "0") {
        const int epochs_done = std::atoi(it_e->second.c_str());
        if (epochs_done >= c.training.max_epochs)
          throw interrupted_epoch_error(c.training.max_epochs, epochs_done, it_b->second);
      }
    }
    // A finished run (all epochs done, or stopped early by the same patience): one line saying
    // so and what to change, exit 0, decided from the saved metadata: no data read, nothing made.
    const std::string finished = finished_before_data(c, paths);
    if (!finished.empty()) {
      std::fprintf(stderr, "%s\n", finished.c_str());
      return 0;
    }
    for (const auto& w : resume_warnings) std::fprintf(stderr, "%s\n", w.c_str());
  }
  lcm::train::check_data_files(c);
  // An empty validation file fails now, not after the (long) preparation of the training file.
  lcm::train::require_program_records(c.data.valid_file, "data.valid_file");
  if (!resume) {  // a new run under an existing name replaces that run's files: say so first
    std::error_code ec;
    if (std::filesystem::exists(paths.last, ec))
      std::fprintf(stderr,
                   "lcm-train: warning: %s exists: this new run replaces the weights and logs of the earlier run "
                   "'%s' (--resume continues it; another experiment.name keeps both)\n",
                   paths.last.c_str(), c.experiment.name.c_str());
  }
  lcm::train::require_writable_base_path(c);
  lcm::train::ensure_cache_folder(c);  // <base_path>/cache a regular file: one line now, not after preparing

  // Each file's read / kept / skipped-by-reason counts (the cache stores them: also printed when
  // the data comes from there), so that no loss of data goes unnoticed; the line of lcm-eval.
  auto prepare_and_summarise = [&](const std::string& split, const std::string& file) {
    lcm::data::PreparedSplit s = lcm::train::prepare_from_config(c, split, !quiet);
    // on stderr, with the skips themselves, as in lcm-eval / lcm-predict / lcm-pretrain
    std::fprintf(stderr, "%s\n", lcm::train::skip_summary_line("lcm-train", file, s.counts,
                                                               int64_t(s.dataset.programs.size())).c_str());
    return s;
  };
  lcm::data::PreparedSplit train_split = prepare_and_summarise("train", c.data.train_file);
  // Records that are all skipped are only known after reading them: the error names the setting.
  // (Every kept program has >= 2 labelled schedules, lt_2_schedules, so none kept = no datapoint.)
  lcm::data::PreparedSplit valid_split = [&] {
    try {
      return prepare_and_summarise("valid", c.data.valid_file);
    } catch (const lcm::data::DataError&) {
      throw;  // data.strict, unreadable file: already one line naming the file
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("data.valid_file: " + std::string(e.what()) +
                               "; lcm-train needs validation programs with measured speedups");
    }
  }();
  const lcm::data::Dataset& train_ds = train_split.dataset;
  const lcm::data::Dataset& valid_ds = valid_split.dataset;
  // The same program in both files is data leakage: warned (one line) and counted, both kept.
  const lcm::train::ProgramOverlap overlap = lcm::train::program_overlap(lcm::train::program_names(train_ds), valid_ds);
  if (overlap.count > 0)
    std::fprintf(stderr, "lcm-train: %s\n",
                 lcm::train::overlap_warning(overlap, c.data.train_file, c.data.valid_file).c_str());
  if (train_ds.batches.empty())
    throw std::runtime_error("no training batches in " + c.data.train_file);
  const int64_t n_train = train_ds.n_datapoints();
  const int64_t n_batches = int64_t(train_ds.batches.size());
  // issue 7: input scaling fitted on the training split only (deterministic, so --resume refits
  // the same statistics); stored in every checkpoint and reapplied by lcm-eval / lcm-predict.
  const lcm::model::InputScaling scaling = lcm::model::fit_input_scaling(lcm::config::name_of(c.model.input_scaling), train_ds);
  const std::string scaling_json = scaling.to_json();
  const bool log_output = mc.log_output;

  lcm::model::CostModel<float> model(mc, c.training.seed);
  // A pre-trained encoder (model-spec §8) has its own optimizer: frozen (eval mode, no updates)
  // before training.fine_tune_epoch, then fine-tuned with training.fine_tune_lr. The main
  // optimizer updates every other parameter (all of them without an encoder).
  const bool has_encoder = mc.encoder.kind != lcm::model::EncoderKind::None;
  if (has_encoder) lcm::train::load_encoder_weights(c.model.encoder_weights, model);
  auto params = model.non_encoder_parameters();
  lcm::AdamOptions ao;
  ao.lr = c.training.lr;
  ao.weight_decay = c.training.weight_decay;
  lcm::Adam<float> opt(params, ao, c.training.optimizer == lcm::config::OptimizerKind::AdamW);
  bool per_batch = false;
  std::unique_ptr<lcm::LrSchedule> sched = make_schedule(c, n_batches, per_batch);
  std::unique_ptr<lcm::Adam<float>> enc_opt;
  std::unique_ptr<lcm::LrSchedule> enc_sched;
  const std::string enc_opt_path = paths.weights_dir + "/last_encoder_optimizer_" + c.experiment.name + ".safetensors";
  if (has_encoder) {
    lcm::AdamOptions eo = ao;
    eo.lr = c.training.fine_tune_lr;
    enc_opt = std::make_unique<lcm::Adam<float>>(model.encoder_parameters(), eo, c.training.optimizer == lcm::config::OptimizerKind::AdamW);
    const int64_t ft_epochs = std::max<int64_t>(1, int64_t(c.training.max_epochs) - c.training.fine_tune_epoch);
    if (c.training.lr_schedule == lcm::config::LrScheduleKind::OneCyclePerEpoch) {  // reference: own OneCycleLR, stepped per epoch
      lcm::OneCycleOptions o;
      o.max_lr = c.training.fine_tune_lr;
      o.total_steps = ft_epochs * std::max<int64_t>(1, n_batches);
      enc_sched = std::make_unique<lcm::OneCycleLr>(o);
    } else {
      enc_sched = std::make_unique<lcm::ConstantLr>(c.training.fine_tune_lr);
    }
    enc_sched->apply(*enc_opt);
  }
  lcm::Rng dropout_rng(c.training.seed ^ 0xD50F7A11u);
  std::vector<EpochRecord> history;
  int start_epoch = 0;
  int64_t resume_batches = 0;  // batches of epoch start_epoch already trained (Ctrl-C mid-epoch)
  double resume_loss_sum = 0, resume_ape_sum = 0, resume_lr = 0;
  double best_val = INFINITY;        // validation MAPE of the best checkpoint (logged)
  lcm::train::EarlyStopping stopper;  // select_score of the best checkpoint, early stopping
  stopper.patience = c.training.early_stop_patience;

  if (resume) {
    auto meta = lcm::load_parameters(paths.last, model.params(), true);
    // a changed training.weight_decay (warned about above): the state is loaded under the
    // file's value, which load_state checks, then the new one applies to the following steps
    if (!saved_weight_decay.empty()) opt.set_weight_decay(std::strtod(saved_weight_decay.c_str(), nullptr));
    auto ometa = opt.load_state(paths.optimizer);
    opt.set_weight_decay(c.training.weight_decay);
    auto need = [&](const char* k) {
      auto it = ometa.find(k);
      if (it == ometa.end())
        throw std::runtime_error("--resume: " + paths.optimizer + " lacks metadata " + k);
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
      throw std::runtime_error("--resume: " + paths.optimizer + ": metadata " + k + " is not a number: '" + v + "'");
    };
    start_epoch = int(number("lcm.epoch"));
    sched->set_last_step(int64_t(number("lcm.schedule_step")));
    dropout_rng.set_counter(std::stoull(need("lcm.rng_counter")));
    best_val = number("lcm.best_val_mape");
    history = history_from_json(need("lcm.history"));
    // The model and optimizer files must come from the same step: a save cut between the two
    // renames (a second Ctrl-C) would otherwise resume new weights with old optimizer state.
    {
      const std::string o_step = need("lcm.epoch") + "/" + (ometa.count("lcm.batches_done") ? ometa["lcm.batches_done"] : "0");
      const bool stamped = meta.count("lcm.epoch") > 0;
      const std::string m_step = (stamped ? meta["lcm.epoch"] : std::string("?")) + "/" +
                                 (meta.count("lcm.batches_done") ? meta["lcm.batches_done"] : "0");
      if (stamped && (meta["lcm.epoch"] != need("lcm.epoch") ||
                      (meta.count("lcm.batches_done") && m_step != o_step)))
        throw std::runtime_error("--resume: " + paths.last + " (epoch/batch " + m_step + ") and " + paths.optimizer +
                                 " (epoch/batch " + o_step +
                                 ") were saved at different steps (an interrupted save?); resume from a matching "
                                 "pair or train again");
    }
    // Other data than the checkpointed run (recorded since lcm.train_file / lcm.valid_file exist):
    // one warning, since the best-checkpoint comparison then mixes validation sets.
    if (const std::string w = changed_data_warning(c, meta); !w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
    // interrupted mid-epoch: continue at the next batch of that epoch (absent: epoch boundary)
    if (ometa.count("lcm.batches_done")) {
      resume_batches = int64_t(number("lcm.batches_done"));
      resume_loss_sum = number("lcm.partial_loss_sum");
      resume_ape_sum = number("lcm.partial_ape_sum");
      resume_lr = number("lcm.epoch_lr");
      if (resume_batches < 0 || resume_batches >= n_batches)
        throw std::runtime_error("--resume: " + paths.optimizer + ": lcm.batches_done " +
                                 std::to_string(resume_batches) + " outside [0, " + std::to_string(n_batches) +
                                 ") (was the data or data.batch_size changed?)");
    }
    std::error_code eec;
    if (enc_opt && std::filesystem::is_regular_file(enc_opt_path, eec)) {
      auto emeta = enc_opt->load_state(enc_opt_path);
      if (emeta.count("lcm.schedule_step")) enc_sched->set_last_step(std::stoll(emeta["lcm.schedule_step"]));
    }
    for (auto& r : history) stopper.update(select_score(c.training.select_metric, r));  // from the log
    // A finished run (all epochs done, or stopped early by the same patience): one line saying
    // so and what to change, exit 0, nothing rewritten.
    // (normally decided before the data by finished_before_data; kept for files it could not judge)
    if (resume_batches == 0 && start_epoch >= c.training.max_epochs) {
      std::fprintf(stderr, "%s\n", finished_line(c, start_epoch, paths.best).c_str());
      return 0;
    }
    if (resume_batches == 0 && stopper.should_stop()) {
      std::fprintf(stderr, "%s\n", early_stopped_line(c, start_epoch, stopper.bad_epochs, paths.best).c_str());
      return 0;
    }
    if (resume_batches > 0 && start_epoch >= c.training.max_epochs)  // (normally refused before the data)
      throw interrupted_epoch_error(c.training.max_epochs, start_epoch, "");
    // A schedule sized by training.max_epochs is recomputed over the new total: say so, with the
    // learning rate of the saved step under the saved and the new total.
    if (auto it = saved_settings.find("training.max_epochs");
        it != saved_settings.end() && it->second != std::to_string(c.training.max_epochs) &&
        c.training.lr_schedule != lcm::config::LrScheduleKind::Constant) {
      std::string jump;
      try {
        lcm::config::Config old = c;
        old.training.max_epochs = std::stoi(it->second);
        bool old_per_batch = false;
        const auto old_sched = make_schedule(old, n_batches, old_per_batch);
        char buf[160];
        std::snprintf(buf, sizeof buf, " (the learning rate at epoch %d jumps from %.3g to %.3g)", start_epoch + 1,
                      old_sched->lr_at(sched->last_step()), sched->lr_at(sched->last_step()));
        jump = buf;
      } catch (const std::exception&) {  // the old schedule cannot be rebuilt: no numbers
      }
      std::fprintf(stderr, "lcm-train: warning: training.max_epochs %s -> %d: the %s schedule is recomputed over %d epochs%s\n",
                   it->second.c_str(), c.training.max_epochs, lcm::config::name_of(c.training.lr_schedule).c_str(),
                   c.training.max_epochs, jump.c_str());
    }
    if (resume_batches > 0)
      std::fprintf(stderr, "lcm-train: resumed from %s in epoch %d at batch %lld/%lld\n", paths.last.c_str(),
                   start_epoch + 1, (long long)(resume_batches + 1), (long long)n_batches);
    else
      std::fprintf(stderr, "lcm-train: resumed from %s after epoch %d\n", paths.last.c_str(), start_epoch);
  }
  sched->apply(opt);
  // CUDA: parameters (and, at the first step, the optimizer moments) move to the device once;
  // batches are built on the host and copied in by the model's inputs (Tape::constant).
  if (on_cuda) lcm::parameters_to_device(model.params(), dev.index);
  // CUDA data placement (issue 5): as many batches' inputs as fit training.gpu_memory_budget stay
  // on the device (training first, validation with the rest); the others are streamed.
  std::unique_ptr<lcm::train::DeviceBatchStore> train_store, valid_store;
  if (on_cuda && !has_encoder) {
    const size_t budget = lcm::train::resolve_gpu_memory_budget(
        c.training.gpu_memory_budget, dev.index);
    train_store = std::make_unique<lcm::train::DeviceBatchStore>(model, train_ds, &scaling, dev.index, budget);
    valid_store = std::make_unique<lcm::train::DeviceBatchStore>(model, valid_ds, &scaling, dev.index,
                                                                 budget - train_store->resident_bytes());
    std::printf("lcm-train: %s\nlcm-train: %s\n", train_store->summary("training").c_str(),
                valid_store->summary("validation").c_str());
  }
  if (g_interrupted.load()) {
    std::fprintf(stderr, "lcm-train: interrupted before training started; nothing saved\n");
    return 130;
  }

  const std::string overlap_note =
      overlap.count > 0 ? " (" + lcm::data::count_of(overlap.count, "validation program") + " also in training)" : "";
  std::printf("lcm-train: %s: %lld parameters, %lld training datapoints in %lld batches, %lld "
              "validation datapoints%s; %s, lr %g (%s); loss %s, input scaling %s, select %s\n",
              c.experiment.name.c_str(), (long long)model.params().count(), (long long)n_train,
              (long long)n_batches, (long long)valid_ds.n_datapoints(),
              overlap_note.c_str(), opt.kind(), c.training.lr,
              lcm::config::name_of(c.training.lr_schedule).c_str(), lcm::config::name_of(c.training.loss).c_str(), scaling.mode.c_str(),
              lcm::config::name_of(c.training.select_metric).c_str());
  std::printf("%6s %12s %12s %10s %9s %8s %9s %12s\n", "epoch", "train_MAPE", "val_MAPE", "train_loss",
              "val_Spear", "val_nDCG", "seconds", "points/s");
  std::fflush(stdout);

  // `batches_done` > 0: interrupted inside epoch epochs_done + 1 (weights, optimizer, schedule and
  // dropout RNG are those after that batch; --resume continues at the next one).
  auto save_last = [&](int epochs_done, int64_t batches_done = 0, double loss_sum = 0, double ape_sum = 0,
                       double epoch_lr = 0) {
    if (on_cuda) lcm::parameters_to_host(model.params());
    std::map<std::string, std::string> extra{{"lcm.epoch", std::to_string(epochs_done)},
                                             {"lcm.batches_done", std::to_string(batches_done)},
                                             {"lcm.experiment", c.experiment.name},
                                             {"lcm.input_scaling", scaling_json},
                                             {"lcm.loss", lcm::config::name_of(c.training.loss)},
                                             {"lcm.train_file", c.data.train_file},   // for --resume's
                                             {"lcm.valid_file", c.data.valid_file}};  // changed-data warning
    lcm::train::save_checkpoint(paths.last, model, extra);
    std::map<std::string, std::string> st{
        {"lcm.epoch", std::to_string(epochs_done)},
        {"lcm.schedule_step", std::to_string(sched->last_step())},
        {"lcm.rng_counter", std::to_string(dropout_rng.counter())},
        {"lcm.best_val_mape", lcm::train::format_number(best_val).empty()
                                  ? "inf"
                                  : lcm::train::format_number(best_val)},
        {"lcm.history", history_json(history)},
        {"lcm.run_settings", run_settings_json(c)}};  // compared by --resume
    if (batches_done > 0) {
      st["lcm.batches_done"] = std::to_string(batches_done);
      st["lcm.partial_loss_sum"] = lcm::train::format_number(loss_sum);
      st["lcm.partial_ape_sum"] = lcm::train::format_number(ape_sum);
      st["lcm.epoch_lr"] = lcm::train::format_number(epoch_lr);
    }
    opt.save_state(paths.optimizer, st);
    if (enc_opt) enc_opt->save_state(enc_opt_path, {{"lcm.schedule_step", std::to_string(enc_sched->last_step())}});
  };

  ProgressBar bar(!quiet);
  lcm::Tape<float> tape;
  if (on_cuda) tape.set_device(lcm::Device::CUDA, dev.index);
  const float batch_size = float(c.data.batch_size);
  for (int epoch = start_epoch; epoch < c.training.max_epochs; ++epoch) {
    const auto t0 = Clock::now();
    const int64_t b_begin = epoch == start_epoch ? resume_batches : 0;
    const double lr_used = b_begin > 0 ? resume_lr : opt.lr();  // logged: the LR of the epoch's first step
    const bool fine_tuning = has_encoder && epoch >= c.training.fine_tune_epoch;
    model.set_encoder_frozen(!fine_tuning);  // no-op without an encoder
    double loss_sum = b_begin > 0 ? resume_loss_sum : 0, ape_sum = b_begin > 0 ? resume_ape_sum : 0;
    int64_t points_trained = 0;  // datapoints of this epoch trained by this process (throughput)
    for (int64_t b = b_begin; b < n_batches; ++b) {
      tape.clear();  // (before acquire: the previous step's device memory is no longer viewed)
      // on CUDA the batch's inputs are on the device already (resident or streamed in)
      const lcm::train::BatchInput in = lcm::train::batch_input(train_ds, b, train_store.get(), &scaling);
      const lcm::data::BatchTensors& bt = in.labels();
      tape.set_training(true);
      tape.set_grad_enabled(true);
      lcm::NodeId pred = in.forward(model, tape, train_ds, b, dropout_rng);
      // Q10: batch loss weighted by batch_len / batch_size (model-spec §6).
      lcm::NodeId loss = lcm::train::training_loss(tape, c.training.loss, pred, bt, float(bt.batch) / batch_size,
                                                   float(c.training.rank_weight));
      const double lv = double(lcm::to_host(tape.value(loss))[0]);
      points_trained += bt.batch;
      {  // training MAPE of this batch's (training-mode) predictions, as a speedup ×
        const std::vector<float> pv = lcm::to_host(tape.value(pred));  // host or device
        for (int64_t i = 0; i < bt.batch; ++i) {
          const double y = double(bt.speedup[size_t(i)]);
          const double yhat = log_output ? std::exp(double(pv[size_t(i)])) : double(pv[size_t(i)]);
          ape_sum += 100.0 * std::fabs(y - yhat) / (y + 1e-5);
        }
      }
      if (!std::isfinite(lv))
        throw std::runtime_error("loss is not finite at epoch " + std::to_string(epoch + 1) +
                                 ", batch " + std::to_string(b));
      tape.backward(loss);
      // host or device gradients (one deterministic norm reduction + one scale kernel on CUDA)
      if (c.training.clip_grad_norm > 0) lcm::clip_grad_norm(params, c.training.clip_grad_norm);
      opt.step();
      opt.zero_grad();
      if (fine_tuning) {
        enc_opt->step();
        enc_opt->zero_grad();
      }
      if (train_store) train_store->prefetch((b + 1) % n_batches);  // overlaps this step's queued device work
      if (per_batch && sched->last_step() + 1 <= int64_t(c.training.max_epochs) * n_batches)
        sched->step(opt);
      loss_sum += lv * double(batch_size);
      if (interrupt_after > 0 && ++steps_taken == interrupt_after) simulate_interrupt();
      bar.update(epoch + 1, b + 1, n_batches, loss_sum / double((b + 1) * int64_t(batch_size)));
      // (after the epoch's last batch the epoch is finished, validated and saved as usual below)
      if (g_interrupted.load() && b + 1 < n_batches) {
        bar.clear();
        save_last(epoch, b + 1, loss_sum, ape_sum, lr_used);  // --resume continues at batch b + 2
        write_logs(paths, history, c.experiment.name);
        std::fprintf(stderr,
                     "lcm-train: interrupted in epoch %d after batch %lld/%lld; saved %s (--resume continues "
                     "from there)\n",
                     epoch + 1, (long long)(b + 1), (long long)n_batches, paths.last.c_str());
        return 130;
      }
    }
    bar.clear();
    if (on_cuda) lcm::parameters_to_host(model.params());  // checkpoints are written from the host
    const double train_seconds = seconds_since(t0);
    // MAPE loss: the objective itself (faithful, §6 epoch loss); otherwise the MAPE of the
    // training-mode predictions (exp of the output for log losses) and the objective separately.
    const double train_mape = c.training.loss == lcm::config::Loss::Mape ? loss_sum / double(n_train) : ape_sum / double(n_train);
    if (!per_batch) sched->step(opt);  // constant: no-op; one_cycle_per_epoch: faithful Q1
    if (fine_tuning && enc_sched->last_step() + 1 <= int64_t(c.training.max_epochs) * n_batches)
      enc_sched->step(*enc_opt);  // stepped once per epoch, only while fine-tuning (§8)
    std::vector<lcm::train::Prediction> vp = lcm::train::predict_dataset(model, valid_ds, {}, &scaling, valid_store.get());
    const double val_mape = lcm::train::loss_mape(vp);
    // throughput of this process: a resumed epoch counts only the batches trained after the resume
    EpochRecord r{epoch + 1, train_mape, val_mape, 0, double(points_trained) / std::max(1e-9, train_seconds), lr_used};
    r.datapoints = points_trained;
    r.train_seconds = train_seconds;
    r.train_loss = loss_sum / double(n_train);
    if (vp.size()) {
      const lcm::model::MetricsSummary vm = lcm::train::evaluate_predictions(valid_ds, vp);
      r.val_spearman = vm.mean_spearman, r.val_ndcg = vm.mean_ndcg, r.val_top1 = vm.mean_top1_recovered;
    }
    if (c.training.log_train_metrics) {
      const lcm::model::MetricsSummary tm =
          lcm::train::evaluate_predictions(train_ds, lcm::train::predict_dataset(model, train_ds, {}, &scaling, train_store.get()));
      r.train_spearman = tm.mean_spearman, r.train_ndcg = tm.mean_ndcg;
    }
    r.seconds = seconds_since(t0);
    history.push_back(r);
    const bool improved = stopper.update(select_score(c.training.select_metric, r));
    if (improved) {
      best_val = val_mape;
      lcm::train::save_checkpoint(paths.best, model,
                                  {{"lcm.epoch", std::to_string(epoch + 1)},
                                   {"lcm.val_mape", lcm::train::format_number(val_mape)},
                                   {"lcm.select_metric", lcm::config::name_of(c.training.select_metric)},
                                   {"lcm.experiment", c.experiment.name},
                                   {"lcm.input_scaling", scaling_json},
                                   {"lcm.loss", lcm::config::name_of(c.training.loss)}});
    }
    save_last(epoch + 1);
    write_logs(paths, history, c.experiment.name);
    std::printf("%6d %12.4f %12.4f %10.4f %9.4f %8.4f %9.2f %12.1f%s\n", r.epoch, r.train_mape, r.val_mape,
                r.train_loss, r.val_spearman, r.val_ndcg, r.seconds, r.datapoints_per_s,
                improved ? "  *best" : "");
    std::fflush(stdout);
    if (stopper.should_stop()) {
      std::printf("lcm-train: early stop after epoch %d: validation %s has not improved for %s\n",
                  epoch + 1, lcm::config::name_of(c.training.select_metric).c_str(), lcm::data::count_of(stopper.bad_epochs, "epoch").c_str());
      break;
    }
    if (g_interrupted.load()) {
      std::fprintf(stderr, "lcm-train: interrupted after epoch %d; saved %s\n", epoch + 1,
                   paths.last.c_str());
      return 130;
    }
  }
  std::printf("lcm-train: best checkpoint (validation %s) has validation MAPE %.4f; weights %s\n",
              lcm::config::name_of(c.training.select_metric).c_str(), best_val, paths.best.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-train", [&] { return train(argc, argv); });
}
