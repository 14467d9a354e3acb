// The key table, YAML loading, command-line overrides and --help of the lcm configuration
// (see config.hpp for the layering rules).
#include "tools/common/config.hpp"

#include <cctype>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "data/skips.hpp"
#include "engine/atomic_file.hpp"
#include "engine/threads.hpp"
#include "tools/common/memory_budget.hpp"
#include "tools/common/version.hpp"

namespace lcm::tools {
namespace {

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

[[noreturn]] void bad_value(const std::string& key, const std::string& expected,
                            const std::string& got) {
  throw ConfigError(key + ": expected " + expected + ", got " + quote(got));
}

int64_t parse_int(const std::string& key, const std::string& text, int64_t lo, int64_t hi,
                  const std::string& type) {
  errno = 0;
  char* end = nullptr;
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  if (*s == '\0') bad_value(key, type, text);
  long long v = std::strtoll(s, &end, 10);
  while (end && *end == ' ') ++end;
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) bad_value(key, type, text);
  return v;
}

uint64_t parse_u64(const std::string& key, const std::string& text, const std::string& type) {
  errno = 0;
  char* end = nullptr;
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  if (*s == '\0' || *s == '-') bad_value(key, type, text);
  unsigned long long v = std::strtoull(s, &end, 10);
  while (end && *end == ' ') ++end;
  if (errno != 0 || end == s || *end != '\0') bad_value(key, type, text);
  return v;
}

double parse_double(const std::string& key, const std::string& text, double lo, bool lo_open,
                    const std::string& type) {
  errno = 0;
  char* end = nullptr;
  const char* s = text.c_str();
  while (*s == ' ') ++s;
  if (*s == '\0') bad_value(key, type, text);
  double v = std::strtod(s, &end);
  while (end && *end == ' ') ++end;
  if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v) || v < lo || (lo_open && v == lo))
    bad_value(key, type, text);
  return v;
}

bool parse_bool(const std::string& key, const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  bad_value(key, "a boolean (true|false)", text);
}

std::string format_double(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

template <class F>
ConfigKey string_key(std::string key, std::string doc, F field) {
  return {key, "string", std::move(doc), [field](Config& c, const std::string& v) { field(c) = v; },
          [field](const Config& c) { return field(const_cast<Config&>(c)); }};
}

template <class F>
ConfigKey int_key(std::string key, int64_t lo, std::string doc, F field) {
  std::string type = "an integer >= " + std::to_string(lo);
  return {key, type, std::move(doc),
          [key, lo, type, field](Config& c, const std::string& v) {
            using T = std::decay_t<decltype(field(c))>;
            field(c) = T(parse_int(key, v, lo, int64_t(std::numeric_limits<T>::max()), type));
          },
          [field](const Config& c) { return std::to_string(field(const_cast<Config&>(c))); }};
}

/// An integer key bounded on both sides ("an integer in [lo, hi]").
template <class F>
ConfigKey int_range_key(std::string key, int64_t lo, int64_t hi, std::string doc, F field) {
  std::string type = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {key, type, std::move(doc),
          [key, lo, hi, type, field](Config& c, const std::string& v) {
            using T = std::decay_t<decltype(field(c))>;
            field(c) = T(parse_int(key, v, lo, hi, type));
          },
          [field](const Config& c) { return std::to_string(field(const_cast<Config&>(c))); }};
}

template <class F>
ConfigKey u64_key(std::string key, std::string doc, F field) {
  std::string type = "an unsigned integer";
  return {
      key, type, std::move(doc),
      [key, type, field](Config& c, const std::string& v) { field(c) = parse_u64(key, v, type); },
      [field](const Config& c) { return std::to_string(field(const_cast<Config&>(c))); }};
}

template <class F>
ConfigKey double_key(std::string key, double lo, bool lo_open, std::string doc, F field) {
  std::string type = std::string("a finite number ") + (lo_open ? "> " : ">= ") + format_double(lo);
  return {key, type, std::move(doc),
          [key, lo, lo_open, type, field](Config& c, const std::string& v) {
            field(c) = parse_double(key, v, lo, lo_open, type);
          },
          [field](const Config& c) { return format_double(field(const_cast<Config&>(c))); }};
}

/// A number key in [lo, hi) ("a finite number in [0, 1)"): an out-of-range value fails when the
/// key is set, naming the key, the range and the value given.
template <class F>
ConfigKey double_below_key(std::string key, double lo, double hi, std::string doc, F field) {
  std::string type = "a finite number in [" + format_double(lo) + ", " + format_double(hi) + ")";
  return {key, type, std::move(doc),
          [key, lo, hi, type, field](Config& c, const std::string& v) {
            const double x = parse_double(key, v, lo, false, type);
            if (!(x < hi)) bad_value(key, type, v);
            field(c) = x;
          },
          [field](const Config& c) { return format_double(field(const_cast<Config&>(c))); }};
}

template <class F>
ConfigKey bool_key(std::string key, std::string doc, F field) {
  return {key, "a boolean (true|false)", std::move(doc),
          [key, field](Config& c, const std::string& v) { field(c) = parse_bool(key, v); },
          [field](const Config& c) {
            return std::string(field(const_cast<Config&>(c)) ? "true" : "false");
          }};
}

template <class F>
ConfigKey enum_key(std::string key, std::vector<std::string> choices, std::string doc, F field) {
  std::string joined;
  for (auto& ch : choices) joined += (joined.empty() ? "" : "|") + ch;
  std::string type = "one of " + joined;
  return {key, type, std::move(doc),
          [key, choices, type, field](Config& c, const std::string& v) {
            if (std::find(choices.begin(), choices.end(), v) == choices.end())
              bad_value(key, type, v);
            field(c) = v;
          },
          [field](const Config& c) { return field(const_cast<Config&>(c)); }};
}

std::vector<ConfigKey> make_keys() {
  std::vector<ConfigKey> k;
  // ---- experiment ----
  k.push_back({"experiment.name", "a name of letters, digits, '.', '_', '-' (not starting with '.')",
               "name of the run (used in output file names)",
               [](Config& c, const std::string& v) {
                 // it becomes part of file names under base_path: no '/', no "..", not empty
                 bool ok = !v.empty() && v[0] != '.' && v.size() <= 128;
                 for (char ch : v) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ||
                                               ch == '_' || ch == '-');
                 if (!ok)
                   bad_value("experiment.name", "a name of letters, digits, '.', '_', '-' (not starting with '.')",
                             v);
                 c.experiment.name = v;
               },
               [](const Config& c) { return c.experiment.name; }});
  k.push_back(string_key("experiment.base_path",
                         "folder for outputs; the data cache is <base_path>/cache/<split>.lcmb "
                         "(relative = to the current directory)",
                         [](Config& c) -> std::string& { return c.experiment.base_path; }));
  // ---- data ----
  k.push_back(string_key("data.train_file",
                         "training set (LOOPerSet .jsonl/.jsonl.gz; relative = to the current "
                         "directory; empty = none)",
                         [](Config& c) -> std::string& { return c.data.train_file; }));
  k.push_back(string_key("data.valid_file", "validation set (same rules as data.train_file)",
                         [](Config& c) -> std::string& { return c.data.valid_file; }));
  k.push_back(int_key("data.batch_size", 1, "datapoints per batch (reference 2048; model-spec §6)",
                      [](Config& c) -> int& { return c.data.batch_size; }));
  k.push_back(int_range_key("data.nb_workers", 0, kMaxWorkers,
                            "threads extracting features; 0 = all hardware threads",
                            [](Config& c) -> int& { return c.data.nb_workers; }));
  k.push_back(int_key("data.min_functions_per_footprint", 0,
                      "drop footprint groups with fewer programs than this AND fewer than 100x "
                      "this many datapoints (model-spec §3.11); 0 keeps all",
                      [](Config& c) -> int& { return c.data.min_functions_per_footprint; }));
  k.push_back(u64_key("data.seed", "seed of the batch shuffles (model-spec §5.5)",
                      [](Config& c) -> uint64_t& { return c.data.seed; }));
  k.push_back(bool_key("data.strict",
                       "stop at the first malformed line/program/schedule; policy drops are not "
                       "errors (small footprint groups, notes, schedules with no_execution_times/"
                       "negative_time/zero_time); not part of the cache key (a cache built with "
                       "such skips stops a strict run too)",
                       [](Config& c) -> bool& { return c.data.strict; }));
  k.push_back(enum_key("data.loop_zeroing", {"last_comp", "removed_by_fusion", "off"},
                       "loop-vector zeroing rule (model-spec §11 Q2; last_comp = reference)",
                       [](Config& c) -> std::string& { return c.data.loop_zeroing; }));
  k.push_back(enum_key("data.shift_match", {"prefix", "exact"},
                       "shift flag matching in the computation vector (model-spec §11 Q3; prefix = "
                       "reference)",
                       [](Config& c) -> std::string& { return c.data.shift_match; }));
  k.push_back(int_key("data.max_programs", 0, "read only the first N records of each file; 0 = all",
                      [](Config& c) -> int64_t& { return c.data.max_programs; }));
  k.push_back(bool_key("data.cache", "read and write the prepared-data cache",
                       [](Config& c) -> bool& { return c.data.cache; }));
  // ---- training ----
  k.push_back({"training.device", "cpu or cuda:N (N >= 0; cuda = cuda:0)", "device for training and evaluation",
               [](Config& c, const std::string& v) {
                 parse_device(v);
                 c.training.device = v;
               },
               [](const Config& c) { return c.training.device; }});
  k.push_back(bool_key("training.tf32",
                       "CUDA only: allow TF32 tensor cores in the float GEMMs (cuBLAS); false = full FP32",
                       [](Config& c) -> bool& { return c.training.tf32; }));
  k.push_back({"training.gpu_memory_budget",
               "a fraction in (0, 1] of free device memory, 0, or bytes with a unit such as 512MiB or 8GiB (a bare "
               "number > 1 is an error)",
               "CUDA only: device memory for the cached batches' model inputs (the rest are streamed); ignored on cpu",
               [](Config& c, const std::string& v) {
                 parse_memory_budget(v);
                 c.training.gpu_memory_budget = v;
               },
               [](const Config& c) { return c.training.gpu_memory_budget; }});
  k.push_back(double_key("training.lr", 0.0, true, "maximum learning rate (model-spec §6)",
                         [](Config& c) -> double& { return c.training.lr; }));
  k.push_back(int_key("training.max_epochs", 1, "number of epochs",
                      [](Config& c) -> int& { return c.training.max_epochs; }));
  k.push_back(u64_key("training.seed", "seed of parameter initialisation and dropout",
                      [](Config& c) -> uint64_t& { return c.training.seed; }));
  k.push_back(enum_key("training.optimizer", {"adam", "adamw"}, "optimizer (reference: adamw)",
                       [](Config& c) -> std::string& { return c.training.optimizer; }));
  k.push_back(double_key("training.weight_decay", 0.0, false, "decoupled weight decay (AdamW)",
                         [](Config& c) -> double& { return c.training.weight_decay; }));
  k.push_back(int_range_key("training.threads", 0, kMaxThreads,
                            "CPU threads of the engine; 0 = all hardware threads (more than the "
                            "machine's cores: a warning, and slower)",
                            [](Config& c) -> int& { return c.training.threads; }));
  // ---- eval ----
  k.push_back(string_key("eval.weights_path", "safetensors weights to evaluate (\"\" = not set)",
                         [](Config& c) -> std::string& { return c.eval.weights_path; }));
  // ---- training schedule and model sizes (tools helper: lcm-train / lcm-eval / lcm-predict) ----
  k.push_back(enum_key("training.lr_schedule",
                       {"constant", "one_cycle_per_epoch", "one_cycle_per_batch", "warmup_cosine"},
                       "LR schedule: constant; one_cycle_per_epoch = reference OneCycleLR stepped "
                       "once per epoch (model-spec §6, Q1); one_cycle_per_batch; warmup_cosine",
                       [](Config& c) -> std::string& { return c.training.lr_schedule; }));
  k.push_back(double_key("training.clip_grad_norm", 0.0, false,
                         "clip the gradients' global 2-norm to this value; 0 = off",
                         [](Config& c) -> double& { return c.training.clip_grad_norm; }));
  k.push_back(double_below_key("training.warmup_pct", 0.0, 1.0,
                         "warmup_cosine: warm-up length as a fraction of all batch steps (< 1)",
                         [](Config& c) -> double& { return c.training.warmup_pct; }));
  k.push_back(string_key("model.comp_embed_layer_sizes",
                         "computation-MLP widths, comma-separated, >= 2 entries; the last is the "
                         "embedding size (model-spec §5.1)",
                         [](Config& c) -> std::string& { return c.model.comp_embed_layer_sizes; }));
  k.push_back(string_key("model.drops",
                         "dropout probabilities, comma-separated, one per computation-MLP layer "
                         "(and >= 2)",
                         [](Config& c) -> std::string& { return c.model.drops; }));
  k.push_back(int_key("model.lstm_embedding_size", 1,
                      "hidden size per direction of the transformation-tag BiLSTM",
                      [](Config& c) -> int& { return c.model.lstm_embedding_size; }));
  k.push_back(int_key("model.expr_embed_size", 1, "hidden size of the expression LSTM",
                      [](Config& c) -> int& { return c.model.expr_embed_size; }));
  // ---- pre-training (model-spec §8; lcm-pretrain, and the encoder in lcm-train) ----
  k.push_back(enum_key("model.encoder", {"none", "comp_vector", "access_matrix"},
                       "pre-trained encoder of the computation vectors (model-spec §8): none = the "
                       "§5 model; needs model.encoder_weights",
                       [](Config& c) -> std::string& { return c.model.encoder; }));
  k.push_back(string_key("model.encoder_weights",
                         "autoencoder checkpoint for model.encoder (lcm-pretrain's best_autoencoder_"
                         "<name>.safetensors or the published access-matrix file)",
                         [](Config& c) -> std::string& { return c.model.encoder_weights; }));
  k.push_back(int_key("training.fine_tune_epoch", 0,
                      "epoch (0-based) from which the pre-trained encoder is unfrozen and fine-tuned "
                      "(model-spec §8; reference 120); >= max_epochs keeps it frozen",
                      [](Config& c) -> int& { return c.training.fine_tune_epoch; }));
  k.push_back(double_key("training.fine_tune_lr", 0.0, true,
                         "learning rate of the encoder's own optimizer while fine-tuning "
                         "(model-spec §8; reference 2e-4)",
                         [](Config& c) -> double& { return c.training.fine_tune_lr; }));
  k.push_back(enum_key("pretrain.kind", {"comp_vector", "access_matrix"},
                       "lcm-pretrain: which autoencoder (model-spec §8.1 / §8.2)",
                       [](Config& c) -> std::string& { return c.pretrain.kind; }));
  k.push_back(string_key("pretrain.files",
                         "lcm-pretrain: LOOPerSet files, comma-separated (\"[a,b]\" accepted); labels "
                         "are not used",
                         [](Config& c) -> std::string& { return c.pretrain.files; }));
  k.push_back(int_key("pretrain.epochs", 1, "lcm-pretrain: epochs (reference 200 / 700)",
                      [](Config& c) -> int& { return c.pretrain.epochs; }));
  k.push_back(int_key("pretrain.batch_size", 1, "lcm-pretrain: samples per batch (reference 256)",
                      [](Config& c) -> int& { return c.pretrain.batch_size; }));
  k.push_back(double_key("pretrain.lr", 0.0, true, "lcm-pretrain: Adam learning rate (reference 1e-4)",
                         [](Config& c) -> double& { return c.pretrain.lr; }));
  k.push_back(double_key("pretrain.valid_fraction", 0.0, false,
                         "lcm-pretrain: share of programs held out for validation (< 1)",
                         [](Config& c) -> double& { return c.pretrain.valid_fraction; }));
  k.push_back(int_key("pretrain.max_samples", 0,
                      "lcm-pretrain: at most this many training samples per epoch (seeded pick); 0 = all",
                      [](Config& c) -> int64_t& { return c.pretrain.max_samples; }));
  // ---- ranking (issue 7): loss, input scaling, early stopping, preset ----
  k.push_back(enum_key("training.loss",
                       {"mape", "log_mse", "log_l1", "pairwise", "log_mse+pairwise", "log_l1+pairwise"},
                       "training objective: mape = reference (model-spec §6, output a speedup); the "
                       "others train the output as ln(speedup): MSE / L1 on ln speedups, pairwise "
                       "logistic ranking loss over schedules of the same program in a batch, or a "
                       "sum (pairwise term x training.rank_weight)",
                       [](Config& c) -> std::string& { return c.training.loss; }));
  k.push_back(double_key("training.rank_weight", 0.0, false,
                         "weight of the pairwise term of a '+pairwise' training.loss",
                         [](Config& c) -> double& { return c.training.rank_weight; }));
  k.push_back(int_key("training.early_stop_patience", 0,
                      "stop when training.select_metric has not improved on validation for this "
                      "many epochs; 0 = off (reference)",
                      [](Config& c) -> int& { return c.training.early_stop_patience; }));
  k.push_back(enum_key("training.select_metric", {"mape", "spearman", "ndcg"},
                       "validation metric choosing the best checkpoint and driving early stopping: "
                       "mape = reference (datapoint-weighted MAPE, lower is better); spearman / "
                       "ndcg = per-program mean (model-spec §7, higher is better)",
                       [](Config& c) -> std::string& { return c.training.select_metric; }));
  k.push_back(bool_key("training.log_train_metrics",
                       "also predict the training split in eval mode after each epoch and log its "
                       "per-program Spearman / nDCG (train-vs-validation curves; costs ~1/3 epoch)",
                       [](Config& c) -> bool& { return c.training.log_train_metrics; }));
  k.push_back(enum_key("model.input_scaling", {"none", "log", "standardize", "log_standardize"},
                       "feature scaling of computation/loop vectors: none = reference; log = "
                       "sign*log10 for |x| >= 10 (model-spec §3.10); standardize = per-column "
                       "(x - mean) / std fitted on the training split; log_standardize = both; "
                       "stored in the checkpoint and reapplied by lcm-eval / lcm-predict",
                       [](Config& c) -> std::string& { return c.model.input_scaling; }));
  k.push_back({"model.preset", "one of none|reference",
               "none: use the keys as given; reference: at this point set the faithful behaviour "
               "(training.loss=mape, lr_schedule=constant, lr=0.001, adamw, weight_decay=0.015, no "
               "clipping, no early stopping, select_metric=mape, input_scaling=none, drops 0.05); "
               "keys given after it still override",
               [](Config& c, const std::string& v) {
                 if (v != "none" && v != "reference")
                   bad_value("model.preset", "one of none|reference", v);
                 if (v == "reference") apply_reference_preset(c);
                 c.model.preset = v;
               },
               [](const Config& c) { return c.model.preset; }});
  return k;
}

}  // namespace

void apply_reference_preset(Config& c) {
  auto& t = c.training;
  t.loss = "mape";
  t.lr_schedule = "constant";
  t.lr = 0.001;
  t.optimizer = "adamw";
  t.weight_decay = 0.015;
  t.clip_grad_norm = 0;
  t.warmup_pct = 0.1;
  t.rank_weight = 1.0;
  t.early_stop_patience = 0;
  t.select_metric = "mape";
  c.model.input_scaling = "none";
  c.model.drops = "0.05,0.05,0.05,0.05,0.05";
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string after_dot(const std::string& k) {
  auto p = k.rfind('.');
  return p == std::string::npos ? k : k.substr(p + 1);
}

const ConfigKey* find_key(const std::string& key) {
  for (auto& k : config_keys())
    if (k.key == key) return &k;
  return nullptr;
}

/// Keys within a small edit distance of `key` (typos): at most 2 edits on the whole key (1 for
/// keys under 6 characters), the same last part ("batch_size" → data.batch_size), or at most 1
/// edit on a last part of 4+ characters. At most 3, closest first.
std::vector<std::string> close_keys(const std::string& key) {
  std::vector<std::pair<size_t, std::string>> close;
  const size_t limit = key.size() < 6 ? 1 : 2;
  const std::string tail = after_dot(key);
  for (auto& k : config_keys()) {
    size_t d = edit_distance(key, k.key);
    const std::string ktail = after_dot(k.key);
    if (d <= limit || ktail == tail ||
        (tail.size() >= 4 && ktail.size() >= 4 && edit_distance(tail, ktail) <= 1))
      close.emplace_back(d, k.key);
  }
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < close.size() && i < 3; ++i) out.push_back(close[i].second);
  return out;
}

std::string did_you_mean(const std::vector<std::string>& close) {
  if (close.empty()) return "";
  std::string msg = "; did you mean ";
  for (size_t i = 0; i < close.size(); ++i) msg += (i ? " or " : "") + close[i];
  return msg + "?";
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::vector<std::string> close = close_keys(key);
  std::string msg = "unknown config key " + quote(key);
  if (!origin.empty()) msg += " (in " + origin + ")";
  if (!close.empty())
    msg += did_you_mean(close);
  else
    msg += "; see --help for the list of keys";
  throw ConfigError(msg);
}

void set_value(Config& c, const std::string& key, const std::string& value,
               const std::string& origin) {
  const ConfigKey* k = find_key(key);
  if (!k) unknown_key(key, origin);
  try {
    k->set(c, value);
  } catch (const ConfigError& e) {
    if (origin.empty()) throw;
    throw ConfigError(std::string(e.what()) + " (in " + origin + ")");
  }
}

void apply_node(Config& c, const YAML::Node& node, const std::string& prefix,
                const std::string& origin) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    if (prefix.empty())
      throw ConfigError(origin + ": expected a map of sections (experiment:, data:, ...)");
    throw ConfigError(prefix + ": expected a scalar value (in " + origin + ")");
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Node v = kv.second;
    if (v.IsMap()) {
      apply_node(c, v, key, origin);
    } else if (v.IsScalar()) {
      set_value(c, key, v.Scalar(), origin);
    } else if (v.IsNull()) {
      if (!find_key(key)) unknown_key(key, origin);
      // `key:` with nothing means "empty" for strings; other types reject the empty text.
      set_value(c, key, "", origin);
    } else {
      if (!find_key(key)) unknown_key(key, origin);
      throw ConfigError(key + ": expected a scalar value, got a list (in " + origin + ")");
    }
  }
}

std::string executable_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return p.parent_path().string();
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

void set_config_value(Config& c, const std::string& key, const std::string& value) {
  set_value(c, key, value, "");
}

std::string get_config_value(const Config& c, const std::string& key) {
  const ConfigKey* k = find_key(key);
  if (!k) unknown_key(key, "");
  return k->get(c);
}

void apply_config_yaml(Config& c, const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": malformed YAML: " + e.what());
  }
  apply_node(c, root, "", origin);
}

void apply_config_file(Config& c, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("config file " + path + ": is a directory, not a YAML file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError("config file not found: " + path);
  std::string text;
  try {
    text = lcm::read_file(path);
  } catch (const std::exception& e) {
    throw ConfigError(e.what());
  }
  apply_config_yaml(c, text, path);
}

void apply_overrides(Config& c, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      std::string key = a.substr(0, eq);
      if (key.rfind("--", 0) == 0) key = key.substr(2);
      set_value(c, key, a.substr(eq + 1), "command line");
      continue;
    }
    std::string key = a.rfind("--", 0) == 0 ? a.substr(2) : a;
    if (!find_key(key))  // neither a known key nor key=value
      throw ConfigError("unexpected argument " + quote(a) +
                        " (overrides are key=value or key value)" + did_you_mean(close_keys(key)));
    const std::string missing = key + ": missing value (use " + key + "=VALUE)";
    if (i + 1 >= args.size()) throw ConfigError(missing);
    // `key value`: a following `key2=...` token is the next override, not this key's value.
    const std::string& next = args[i + 1];
    auto next_eq = next.find('=');
    if (next_eq != std::string::npos) {
      std::string next_key = next.substr(0, next_eq);
      if (next_key.rfind("--", 0) == 0) next_key = next_key.substr(2);
      if (find_key(next_key)) throw ConfigError(missing);
    }
    set_value(c, key, args[++i], "command line");
  }
}

std::string find_default_config() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* env = std::getenv("LCM_CONFIG")) {
    if (*env && fs::is_regular_file(env, ec)) return env;
    // set but unusable: say so rather than silently falling back to another file
    if (*env) throw ConfigError(std::string("LCM_CONFIG=") + env + ": no such file");
  }
  auto search_up = [&](fs::path dir) -> std::string {
    for (int up = 0; up < 5 && !dir.empty(); ++up) {
      fs::path cand = dir / "configs" / "default.yaml";
      if (fs::is_regular_file(cand, ec)) return cand.lexically_normal().string();
      if (dir == dir.parent_path()) break;
      dir = dir.parent_path();
    }
    return "";
  };
  std::string exe = executable_dir();
  if (!exe.empty()) {
    std::string f = search_up(exe);
    if (!f.empty()) return f;
  }
  return search_up(fs::current_path(ec));
}

std::string describe_config(const Config& c, bool with_docs) {
  std::ostringstream s;
  size_t w = 0;
  for (auto& k : config_keys()) w = std::max(w, k.key.size());
  for (auto& k : config_keys()) {
    std::string v = k.get(c);
    s << "  " << k.key << std::string(w - k.key.size(), ' ') << " = " << (v.empty() ? "\"\"" : v);
    if (with_docs) s << "\n      " << k.doc << " [" << k.type << "]";
    s << "\n";
  }
  return s.str();
}

Config load_config(int argc, char** argv, const std::string& description,
                   const std::function<void(CLI::App&)>& add_options) {
  // A "Usage: ..." line in the description replaces CLI11's own usage line (one Usage line).
  std::string desc = description, usage_line;
  {
    size_t u = desc.find("Usage:");
    if (u != std::string::npos && (u == 0 || desc[u - 1] == '\n')) {
      size_t e = desc.find('\n', u);
      usage_line = desc.substr(u, e == std::string::npos ? std::string::npos : e - u);
      desc.erase(u, e == std::string::npos ? std::string::npos : e - u + 1);
      while (!desc.empty() && desc.back() == '\n') desc.pop_back();
    }
  }
  CLI::App app(desc);
  app.set_help_flag();  // printed by us, with the key table
  bool help = false, version = false;
  std::string config_path;
  std::vector<std::string> overrides;
  app.add_flag("-h,--help", help, "print this help (options and every config key) and exit");
  app.add_flag("--version", version, "print the lcm version and exit");
  app.add_option("--config", config_path,
                 "YAML config file (default: configs/default.yaml next to the executable or the "
                 "current directory)");
  app.add_option("overrides", overrides, "config overrides: key=value or key value");
  app.allow_extras(false);
  if (add_options) add_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  if (version) {
    std::string name = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "lcm";
    std::printf("%s %s\n", name.c_str(), lcm::version_string());
    throw CliExit{0};
  }
  Config c;
  std::string file = config_path.empty() ? find_default_config() : config_path;
  if (!file.empty()) {
    apply_config_file(c, file);
    c.config_file = file;
  }
  if (help) {
    std::string help_text = app.help();
    if (!usage_line.empty()) {  // swap CLI11's generated "Usage: ..." line for the tool's own
      size_t u = help_text.find("Usage:");
      if (u != std::string::npos) {
        size_t e = help_text.find('\n', u);
        help_text.replace(u, e == std::string::npos ? std::string::npos : e - u, usage_line);
      } else {
        help_text = usage_line + "\n" + help_text;
      }
    }
    std::printf("%s\n", help_text.c_str());
    std::printf("Config keys (value after loading %s):\n%s",
                file.empty() ? "built-in defaults" : file.c_str(),
                describe_config(c, true).c_str());
    throw CliExit{0};
  }
  apply_overrides(c, overrides);
  return c;
}

lcm::data::FeatureOptions feature_options(const DataConfig& d) {
  using FO = lcm::data::FeatureOptions;
  FO o;
  if (d.loop_zeroing == "last_comp")
    o.loop_zeroing = FO::LoopZeroing::LastComp;
  else if (d.loop_zeroing == "removed_by_fusion")
    o.loop_zeroing = FO::LoopZeroing::RemovedByFusion;
  else if (d.loop_zeroing == "off")
    o.loop_zeroing = FO::LoopZeroing::Off;
  else
    bad_value("data.loop_zeroing", "one of last_comp|removed_by_fusion|off", d.loop_zeroing);
  if (d.shift_match == "prefix")
    o.shift_match = FO::ShiftMatch::Prefix;
  else if (d.shift_match == "exact")
    o.shift_match = FO::ShiftMatch::Exact;
  else
    bad_value("data.shift_match", "one of prefix|exact", d.shift_match);
  return o;
}

DeviceSpec parse_device(const std::string& text) {
  const std::string expected = "cpu or cuda:N (N >= 0; cuda = cuda:0)";
  if (text == "cpu") return {false, 0};
  if (text == "cuda") return {true, 0};  // as lcm::parse_device (engine/device.hpp)
  if (text.rfind("cuda:", 0) == 0) {
    std::string n = text.substr(5);
    if (!n.empty() && n.size() <= 4 &&
        std::all_of(n.begin(), n.end(), [](unsigned char ch) { return std::isdigit(ch); }))
      return {true, std::stoi(n)};
  }
  bad_value("training.device", expected, text);
}

int run_tool(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const CliExit& e) {
    return e.code;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: config error: %s\n", tool, e.what());
    return 2;
  } catch (const lcm::data::DataError& e) {
    std::fprintf(stderr, "%s: data error: %s\n", tool, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace lcm::tools
