// Epoch history: JSON form and the log files written from it (see history.hpp).
#include "train/history.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <stdexcept>

#include "train/report.hpp"
#include "util/atomic_file.hpp"
#include "util/json_parse.hpp"

namespace lcm::train {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

/// The JSON object `object` with the field "run_id": `run_id` added last (unchanged when empty; a
/// run id holds only [A-Za-z0-9_-], train/run_files.hpp).
std::string with_run_id(const std::string& object, const std::string& run_id) {
  if (run_id.empty() || object.size() < 2 || object.back() != '}') return object;
  return object.substr(0, object.size() - 1) + ",\"run_id\":\"" + run_id + "\"}";
}

void write_record(JsonWriter& w, const EpochRecord& r) {
  w.StartObject();
  json_int(w, "epoch", r.epoch);
  json_double(w, "train_mape", r.train_mape);
  json_number_or_null(w, "val_mape", r.val_mape);
  json_double(w, "seconds", r.seconds);
  json_double(w, "datapoints_per_s", r.datapoints_per_s);
  json_double(w, "lr", r.lr);
  json_number_or_null(w, "train_loss", r.train_loss);
  json_number_or_null(w, "val_spearman", r.val_spearman);
  json_number_or_null(w, "val_ndcg", r.val_ndcg);
  json_number_or_null(w, "val_top1_recovered", r.val_top1);
  json_number_or_null(w, "train_spearman", r.train_spearman);
  json_number_or_null(w, "train_ndcg", r.train_ndcg);
  // (JSONL only, the CSV's columns do not have them) what datapoints_per_s is computed from
  w.Key("datapoints");
  r.datapoints >= 0 ? w.Int64(r.datapoints) : w.Null();
  json_number_or_null(w, "train_seconds", r.train_seconds);
  w.EndObject();
}

}  // namespace

double select_score(config::SelectMetric metric, const EpochRecord& r) {
  switch (metric) {
    case config::SelectMetric::Spearman:
      return r.val_spearman;
    case config::SelectMetric::Ndcg:
      return r.val_ndcg;
    case config::SelectMetric::Mape:
      break;
  }
  return -r.val_mape;
}

std::string history_json(const std::vector<EpochRecord>& h) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartArray();
  for (const auto& r : h) write_record(w, r);
  w.EndArray();
  return sb.GetString();
}

std::vector<EpochRecord> history_from_json(const std::string& text) {
  rapidjson::Document d;
  // iterative, nesting bounded; full precision: the numbers read back are the bits written
  const std::string why = parse_json_bounded<rapidjson::kParseFullPrecisionFlag>(d, text);
  std::vector<EpochRecord> out;
  if (!why.empty())
    throw std::runtime_error("lcm.history: not a JSON array (bad JSON " + why + ")");
  if (!d.IsArray()) throw std::runtime_error("lcm.history: not a JSON array");
  size_t index = 0;
  for (auto& o : d.GetArray()) {
    // A hand-edited or damaged history names the entry and field instead of crashing.
    auto bad = [&](const char* k) {
      return std::runtime_error("lcm.history: entry " + std::to_string(index) + ": field \"" + k +
                                "\" is missing or not a number");
    };
    if (!o.IsObject())
      throw std::runtime_error("lcm.history: entry " + std::to_string(index) + " is not an object");
    auto num = [&](const char* k) {
      if (!o.HasMember(k) || !o[k].IsNumber()) throw bad(k);
      return o[k].GetDouble();
    };
    auto optional_num = [&](const char* k) {  // absent in logs written before the field existed
      return o.HasMember(k) && o[k].IsNumber() ? o[k].GetDouble() : NAN;
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
    r.train_loss = optional_num("train_loss");
    r.val_spearman = optional_num("val_spearman");
    r.val_ndcg = optional_num("val_ndcg");
    r.val_top1 = optional_num("val_top1_recovered");
    r.train_spearman = optional_num("train_spearman");
    r.train_ndcg = optional_num("train_ndcg");
    r.datapoints =
        o.HasMember("datapoints") && o["datapoints"].IsInt64() ? o["datapoints"].GetInt64() : -1;
    r.train_seconds = optional_num("train_seconds");
    out.push_back(r);
  }
  return out;
}

std::string select_metric_label(config::SelectMetric select) {
  return select == config::SelectMetric::Mape ? "validation MAPE"
                                              : "validation " + config::name_of(select);
}

void write_training_logs(const RunPaths& paths, const std::vector<EpochRecord>& h,
                         const std::string& name, const config::Objective& loss,
                         config::SelectMetric select, const std::string& run_id) {
  const std::string objective = loss.text();
  std::string jsonl,
      csv =
          "epoch,train_mape,val_mape,train_loss,val_spearman,val_ndcg,val_top1_recovered,"
          "train_spearman,train_ndcg,seconds,datapoints_per_s,lr\n";
  PlotSeries tr{"train MAPE", "#1f77b4", {}, {}}, va{"validation MAPE", "#ff7f0e", {}, {}},
      ob{"train " + objective, "#8c564b", {}, {}};
  PlotSeries vs{"validation Spearman", "#2ca02c", {}, {}}, vn{"validation nDCG", "#d62728", {}, {}},
      v1{"validation top-1 recovered", "#9467bd", {}, {}}, ts{"train Spearman", "#17becf", {}, {}},
      tn{"train nDCG", "#e377c2", {}, {}};
  for (const auto& r : h) {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    write_record(w, r);
    jsonl += with_run_id(sb.GetString(), run_id) + "\n";
    csv += std::to_string(r.epoch);
    for (double v : {r.train_mape, r.val_mape, r.train_loss, r.val_spearman, r.val_ndcg, r.val_top1,
                     r.train_spearman, r.train_ndcg, r.seconds, r.datapoints_per_s, r.lr})
      csv += "," + format_number(v);
    csv += "\n";
    tr.x.push_back(r.epoch), tr.y.push_back(r.train_mape);
    va.x.push_back(r.epoch), va.y.push_back(r.val_mape);
    ob.x.push_back(r.epoch), ob.y.push_back(r.train_loss);
    auto add = [&](PlotSeries& s, double v) {
      if (std::isfinite(v)) s.x.push_back(r.epoch), s.y.push_back(v);
    };
    add(vs, r.val_spearman), add(vn, r.val_ndcg), add(v1, r.val_top1);
    add(ts, r.train_spearman), add(tn, r.train_ndcg);
  }
  std::vector<PlotSeries> ranking;
  for (auto* s : {&vs, &vn, &v1, &ts, &tn})
    if (!s->x.empty()) ranking.push_back(*s);
  lcm::atomic_write_file(paths.log_jsonl, jsonl);
  lcm::atomic_write_file(paths.log_csv, csv);
  const std::filesystem::path dir = std::filesystem::path(paths.loss_svg).parent_path();
  // MAPE is what the reference optimises; under another objective it is measured, not optimised
  const std::string about = "training objective (training.loss): " + objective +
                            "; best checkpoint by " + select_metric_label(select) +
                            " (training.select_metric)";
  lcm::atomic_write_file(
      paths.loss_svg, svg_line_plot("lcm-train " + name + ": train and validation MAPE\n" + about,
                                    "epoch", "MAPE (%)", {tr, va}, true));
  lcm::atomic_write_file(
      (dir / ("objective_" + name + ".svg")).string(),
      svg_line_plot("lcm-train " + name + ": training objective " + objective +
                        "\nthe training.loss minimised (epoch mean, model-spec §6 batch weighting)",
                    "epoch", objective, {ob}, true));
  if (!ranking.empty())
    lcm::atomic_write_file(
        (dir / ("ranking_" + name + ".svg")).string(),
        svg_line_plot("lcm-train " + name + ": validation ranking metrics\n" + about, "epoch",
                      "per-program mean", ranking, true));
}

void write_pretrain_logs(const std::string& base, const std::string& name, const std::string& kind,
                         const std::vector<PretrainEpochRecord>& h, const std::string& run_id,
                         const std::string& objective) {
  const bool mse = objective.empty();
  const std::string tr_key = mse ? "train_mse" : "train_loss",
                    va_key = mse ? "val_mse" : "val_loss";
  const std::string what = mse ? "MSE" : objective == "contrastive" ? "InfoNCE" : "masked MSE";
  std::string jsonl, csv = "epoch," + tr_key + "," + va_key + ",seconds,samples_per_s\n";
  PlotSeries tr{"train " + what, "#1f77b4", {}, {}}, va{"validation " + what, "#ff7f0e", {}, {}};
  for (const auto& r : h) {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    json_int(w, "epoch", r.epoch);
    if (!mse) {
      w.Key("objective");
      w.String(objective.c_str());
    }
    json_number_or_null(w, tr_key.c_str(), r.train_mse);
    json_number_or_null(w, va_key.c_str(), r.val_mse);
    json_number_or_null(w, "seconds", r.seconds);
    json_number_or_null(w, "samples_per_s", r.samples_per_s);
    w.EndObject();
    jsonl += with_run_id(sb.GetString(), run_id) + "\n";
    csv += std::to_string(r.epoch);
    for (double v : {r.train_mse, r.val_mse, r.seconds, r.samples_per_s})
      csv += "," + format_number(v);
    csv += "\n";
    tr.x.push_back(r.epoch), tr.y.push_back(r.train_mse);
    va.x.push_back(r.epoch), va.y.push_back(r.val_mse);
  }
  lcm::atomic_write_file(base + "/log_pretrain_" + name + ".jsonl", jsonl);
  lcm::atomic_write_file(base + "/log_pretrain_" + name + ".csv", csv);
  lcm::atomic_write_file(
      base + "/loss_pretrain_" + name + ".svg",
      svg_line_plot("lcm-pretrain " + name + " (" + kind +
                        "): " + (mse ? std::string("reconstruction loss") : objective + " loss"),
                    "epoch", what, {tr, va}, true));
}

}  // namespace lcm::train
