// The typed configuration of every lcm tool: defaults (built in, equal to configs/default.yaml),
// then a YAML file (--config), then `key=value` / `key value` overrides from the command line.
// Keys are dotted ("data.batch_size") and live in one table (config_keys()) with type and docs.
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/features.hpp"

namespace CLI {
class App;
}

namespace lcm::tools {

/// A bad configuration: unknown key (the message names it and suggests close keys), bad value
/// (names the key and the allowed values or type), unreadable or malformed YAML file.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by load_config() after --help or --version was printed: the tool should exit with
/// `code` (0) without doing anything else. run_tool() handles it.
struct CliExit {
  int code = 0;
};

/// `experiment.*`: naming and where outputs (cache, weights, logs) go.
struct ExperimentConfig {
  std::string name = "lcm";        // experiment.name
  std::string base_path = "runs";  // experiment.base_path: cache in <base_path>/cache/
};

/// Upper bound of data.nb_workers (a larger value is a config error, not a thread failure).
constexpr int kMaxWorkers = 1024;

/// `data.*`: input files, feature switches (model-spec §11), batching (§5.5) and the cache.
/// Relative paths are resolved against the current directory of the process.
struct DataConfig {
  std::string train_file = "tests/data/synth_train.jsonl.gz";  // committed lcm-synth slice
  std::string valid_file = "tests/data/synth_valid.jsonl.gz";  // (tests/data/README.md)
  int batch_size = 512;                    // datapoints per batch (reference 2048, §6)
  int nb_workers = 0;                      // feature threads; 0 = all hardware threads
  int min_functions_per_footprint = 2;     // §3.11 footprint-group rule; 0 keeps all groups
  uint64_t seed = 42;                      // batch shuffling seed (§5.5 is unseeded; we seed)
  bool strict = false;                     // first skipped line/program/schedule is an error
  std::string loop_zeroing = "last_comp";  // Q2: last_comp | removed_by_fusion | off
  std::string shift_match = "prefix";      // Q3: prefix | exact
  int64_t max_programs = 0;                // read only the first N records; 0 = all
  bool cache = true;                       // read/write <base_path>/cache/<split>.lcmb
};

/// `training.*`: optimisation (model-spec §6).
struct TrainingConfig {
  std::string device = "cpu";  // cpu | cuda:N
  bool tf32 = false;           // CUDA: TF32 tensor cores in the float GEMMs (cuBLAS); false = full FP32
  double lr = 0.001;           // maximum learning rate
  int max_epochs = 30;  // issue 7 default (with early stopping); the reference release used 1000
  uint64_t seed = 42;               // parameter init, dropout
  std::string optimizer = "adamw";  // adam | adamw
  double weight_decay = 0.015;
  int threads = 0;  // CPU threads for the engine; 0 = all hardware threads
  // -- added by lcm-train (tools helper) --
  std::string lr_schedule = "warmup_cosine";  // constant | one_cycle_per_epoch | one_cycle_per_batch | warmup_cosine
  double clip_grad_norm = 1.0;           // max gradient 2-norm; 0 = off
  double warmup_pct = 0.1;               // warmup_cosine: warm-up fraction of all batch steps
  // -- added by the pre-training helper (model-spec §8) --
  int fine_tune_epoch = 120;   // epoch (0-based) from which a pre-trained encoder is fine-tuned
  double fine_tune_lr = 2e-4;  // LR of the encoder's own optimizer while fine-tuning
  // -- added for ranking (issue 7) --
  std::string loss = "log_mse+pairwise";         // mape | log_mse | log_l1 | pairwise | log_mse+pairwise | log_l1+pairwise
  double rank_weight = 1.0;          // weight of the pairwise term in a "+pairwise" loss
  int early_stop_patience = 5;       // stop after N epochs without a better select_metric; 0 = off
  std::string select_metric = "spearman";  // best checkpoint / early stopping: mape | spearman | ndcg (validation)
  bool log_train_metrics = false;      // also evaluate the training split each epoch (learning curves)
  // -- added for data placement (issue 5) --
  std::string gpu_memory_budget = "0.5";  // CUDA: batches kept on the device: fraction of free memory or bytes ("8GiB")
};

/// `model.*`: the cost model's sizes (model-spec §5.1; lcm::model::ModelConfig). Lists are
/// comma-separated text ("600,350,200,180") so they fit the scalar key table.
struct ModelSizesConfig {
  std::string comp_embed_layer_sizes = "600,350,200,180";
  std::string drops = "0.05,0.05,0.05,0.05,0.05";
  int lstm_embedding_size = 100;
  int expr_embed_size = 100;
  std::string encoder = "none";  // none | comp_vector | access_matrix (model-spec §8)
  std::string encoder_weights;   // autoencoder checkpoint (lcm-pretrain output or published file)
  // -- added for ranking (issue 7) --
  std::string input_scaling = "log_standardize";  // none | log | standardize | log_standardize (model-spec §3.10)
  std::string preset = "none";         // none | reference (sets the faithful values where it appears)
};

/// `pretrain.*`: lcm-pretrain, the self-supervised autoencoders of model-spec §8.
struct PretrainConfig {
  std::string kind = "comp_vector";  // comp_vector | access_matrix
  std::string files;                 // LOOPerSet files, comma-separated ("[a,b]" accepted)
  int epochs = 50;
  int batch_size = 256;              // samples per batch ([PCV]/[PAM]: 256)
  double lr = 1e-4;                  // Adam ([PCV]/[PAM]: 1e-4)
  double valid_fraction = 0.1;       // share of programs held out for validation
  int64_t max_samples = 0;           // cap on training samples (seeded pick); 0 = all
};

/// `eval.*`: evaluation.
struct EvalConfig {
  std::string weights_path;  // safetensors file to evaluate; "" = not set
};

/// The whole configuration, plus where it came from (for messages and reports).
struct Config {
  ExperimentConfig experiment;
  DataConfig data;
  TrainingConfig training;
  EvalConfig eval;
  ModelSizesConfig model;  // model.* (added by the tools helper)
  PretrainConfig pretrain;  // pretrain.* (added by the pre-training helper)
  std::string config_file;  // the YAML file loaded ("" when only built-in defaults were used)
};

/// One row of the key table: the dotted key, a type description used in messages and --help
/// ("int >= 1", "one of: adam|adamw"), a one-line doc, and typed accessors through strings.
/// `set` throws ConfigError (naming the key, the expected type/values and the bad text).
struct ConfigKey {
  std::string key;
  std::string type;
  std::string doc;
  std::function<void(Config&, const std::string&)> set;
  std::function<std::string(const Config&)> get;
};

/// The table of every key, in display order. Later issues add rows in config.cpp.
const std::vector<ConfigKey>& config_keys();

/// Sets one key from its text form. Throws ConfigError for an unknown key ("unknown config key
/// 'data.bach_size'; did you mean data.batch_size?") or a bad value.
void set_config_value(Config& c, const std::string& key, const std::string& value);
/// The text form of one key's value. Throws ConfigError for an unknown key.
std::string get_config_value(const Config& c, const std::string& key);

/// Applies a YAML file (nested maps, e.g. `data: {batch_size: 256}`) on top of `c`. Every leaf
/// must be a scalar under a known key. Throws ConfigError naming the file and the key, "config
/// file not found: <path>", or "config file <path>: is a directory, not a YAML file".
void apply_config_file(Config& c, const std::string& path);
/// Applies YAML text (same rules; `origin` names it in messages).
void apply_config_yaml(Config& c, const std::string& yaml_text, const std::string& origin);

/// Applies overrides given as "key=value" or as the pair "key" "value". Throws ConfigError for
/// an unknown key (suggesting keys within a small edit distance), a bad value, a key without a
/// value ("data.train_file: missing value": at the end, or followed by a `known.key=...`
/// token, which is never taken as a value), or an argument that is neither a known key nor
/// key=value ("unexpected argument 'X' (overrides are key=value or key value)").
void apply_overrides(Config& c, const std::vector<std::string>& args);

/// The configs/default.yaml found by looking, in order, at $LCM_CONFIG, then upward from the
/// executable's folder (build/bin/../../configs), then upward from the current directory.
/// Returns "" when none exists (built-in defaults are then used).
std::string find_default_config();

/// Parses a tool's command line: `[--config FILE] [key=value | key value ...]` plus the tool's
/// own options added by `add_options`. Layering: built-in defaults → FILE (default:
/// find_default_config()) → overrides. --help prints the options and every config key with its
/// current default and doc, then throws CliExit{0}; --version likewise.
/// Throws ConfigError for bad keys/values/files and for unknown options.
Config load_config(int argc, char** argv, const std::string& description,
                   const std::function<void(CLI::App&)>& add_options = {});

/// Multi-line "key = value" listing of every key (for --help, logs and reports).
std::string describe_config(const Config& c, bool with_docs);

/// The feature switches of model-spec §11 selected by data.loop_zeroing / data.shift_match.
lcm::data::FeatureOptions feature_options(const DataConfig& d);

/// Sets every switch that issue 7 added or may change to the faithful reference behaviour
/// (model.preset=reference): training.loss=mape, lr_schedule=constant, lr=0.001, optimizer=adamw,
/// weight_decay=0.015, clip_grad_norm=0, warmup_pct=0.1, rank_weight=1, early_stop_patience=0,
/// select_metric=mape, model.input_scaling=none, model.drops=0.05 ×5. Sizes, epochs, batches and
/// seeds are left alone.
void apply_reference_preset(Config& c);

/// Parsed training.device: "cpu" → {false, 0}; "cuda" → {true, 0}; "cuda:N" → {true, N}. Throws ConfigError.
struct DeviceSpec {
  bool cuda = false;
  int index = 0;
};
DeviceSpec parse_device(const std::string& text);

/// Runs a tool's body: returns its exit code; CliExit → its code; ConfigError → prints
/// "<tool>: config error: ..." and returns 2; any other std::exception → "<tool>: error: ..."
/// and returns 1. Messages are one line on stderr.
int run_tool(const char* tool, const std::function<int()>& body);

}  // namespace lcm::tools
