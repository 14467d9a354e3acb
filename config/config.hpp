// The typed configuration of every lcm tool. Each key is one row of one table (config_keys()):
// its dotted name, type, documentation, default, validation and --resume policy. Values are
// layered: the rows' defaults (equal to configs/default.yaml) → a YAML file (--config) →
// `key=value` / `key value` overrides from the command line (config/cli.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "config/error.hpp"
#include "config/memory_budget.hpp"
#include "data/options.hpp"
#include "engine/device.hpp"
#include "model/options.hpp"

namespace lcm::config {

/// Upper bound of data.nb_workers (a larger value is a config error, not a thread failure).
constexpr int kMaxWorkers = 1024;
/// The deepest nesting of collections a YAML config may have (a config needs 3: sections, their
/// keys, a list value), aliases counted at the depth they expand to; deeper, or an alias inside
/// the collection it names (a cycle), is a ConfigError naming the file and line.
constexpr int kMaxConfigDepth = 16;
/// The longest experiment.name, in characters: with the longest prefix and suffix lcm adds
/// ("best_autoencoder_", ".safetensors.tmp.<host>.<pid>") a file name stays within the usual
/// 255-byte limit. A longer name is a ConfigError that says its length and this limit.
constexpr size_t kMaxExperimentName = 128;

// The sections below are filled by Config's constructor from the rows' defaults; a section
// default-constructed on its own holds zeros and empty strings.

/// `experiment.*`: naming and where outputs (cache, weights, logs) go.
struct ExperimentConfig {
  std::string name;       // experiment.name: part of every output file name
  std::string base_path;  // experiment.base_path: outputs; the cache in <base_path>/cache/
  /// experiment.overwrite: a new run over an experiment that holds a run first moves the earlier
  /// run's files into <base_path>/previous/ (false: such a run is refused; docs/run-state.md)
  bool overwrite = false;
};

/// `data.*`: input files, feature switches (docs/model-spec.md §11), batching (§5.5) and the cache.
/// Relative paths are resolved against the current directory of the process.
struct DataConfig {
  std::string train_file;               // LOOPerSet file of the training split ("" = none)
  std::string valid_file;               // validation split ("" = none)
  int batch_size = 0;                   // datapoints per batch (reference 2048, §6)
  int nb_workers = 0;                   // feature threads; 0 = all hardware threads
  int64_t max_bytes_in_flight = 0;      // record bytes in flight across the threads; 0 = no bound
  int min_functions_per_footprint = 0;  // §3.11 footprint-group rule; 0 keeps all groups
  lcm::data::BatchingMode batching{};   // mixed footprints per batch, or one footprint (§5.5)
  int program_piece = 0;                // mixed: most schedules of one program per piece
  uint64_t seed = 0;                    // batch shuffling seed (§5.5 is unseeded; we seed)
  bool strict = false;                  // first skipped line/program/schedule is an error
  lcm::data::FeatureOptions::LoopZeroing loop_zeroing{};  // §11 Q2
  lcm::data::FeatureOptions::ShiftMatch shift_match{};    // §11 Q3
  lcm::data::ScheduleSource schedule_source{};            // data-format.md "Schedule forms"
  lcm::data::ScheduleCheck schedule_check{};              // cross-check of two forms
  lcm::data::LoopLevelBase loop_level_base{};             // typed-list loop levels
  std::string machine;                                    // "" = the only machine of the times
  int64_t max_programs = 0;                               // read only the first N records; 0 = all
  bool cache = false;  // read/write <base_path>/cache/<split>.lcmb
  /// data.cache_lock_wait: seconds a run waits for another process that holds the lock of the
  /// same cache file (building it) before it stops with an error
  int64_t cache_lock_wait = 3600;
  /// Not a configuration key: the programs of data.train_file the training split keeps, set by
  /// the cross-fitted calibration for its fold runs (train/crossfit.hpp); default all.
  lcm::data::FoldSelection train_folds;
  /// data.cv_folds / data.cv_fold: K folds of data.train_file's programs (0 = off), held-out
  /// fold 1..K.
  int cv_folds = 0;
  int cv_fold = 1;
  /// Not a configuration key: the programs of data.valid_file the validation split keeps, set
  /// from data.cv_folds by apply_cross_validation (train/run.hpp); default all.
  lcm::data::FoldSelection valid_folds;
};

/// `training.*`: device, optimisation and the training objective (model-spec §6, §8).
struct TrainingConfig {
  lcm::DeviceSpec device;           // cpu | cuda:N
  bool tf32 = false;                // CUDA: TF32 tensor cores in the float GEMMs
  MemoryBudget gpu_memory_budget;   // CUDA: device memory for resident batches
  CudaGraphs cuda_graphs{};         // CUDA: each training step captured and replayed as a graph
  int cuda_graph_limit = 0;         // CUDA: most captured steps kept at once
  MemoryBudget host_memory_budget;  // host memory for the training data (data/row_budget)
  double lr = 0;                    // maximum learning rate
  int max_epochs = 0;
  uint64_t seed = 0;  // parameter init, dropout
  OptimizerKind optimizer{};
  double weight_decay = 0;
  int threads = 0;          // CPU threads of the engine; 0 = all hardware threads
  int cpu_sub_batches = 1;  // CPU: sub-batches per batch run at once (train/sub_batches.hpp)
  LrScheduleKind lr_schedule{};
  double clip_grad_norm = 0;   // max global gradient 2-norm; 0 = off
  double warmup_pct = 0;       // warmup_cosine: warm-up fraction of all batch steps
  double plateau_factor = 0;   // reduce_on_plateau: LR multiplier on a plateau
  int plateau_patience = 0;    // reduce_on_plateau: epochs without improvement before reducing
  int fine_tune_epoch = 0;     // epoch (0-based) from which a pre-trained encoder is tuned
  double fine_tune_lr = 0;     // LR of the encoder's own optimizer while fine-tuning
  std::string init_weights;    // cost-model checkpoint whose weights start the run ("" = random)
  InitScaling init_scaling{};  // with init_weights: keep its input scaling or refit on train
  // training.loss, a sum of terms (config/loss_terms.hpp)
  Objective loss;
  double rank_weight = 0;         // weight of the ranking term of a "log_*+<ranking>" loss
  double huber_delta = 0;         // log_huber: the Huber loss's delta on ln speedups
  int early_stop_patience = 0;    // epochs without a better select_metric; 0 = off
  int early_stop_from_epoch = 1;  // first epoch (1-based) whose lack of improvement counts
  SelectMetric select_metric{};
  bool log_train_metrics = false;  // also evaluate the training split each epoch
  bool calibrate = false;          // fit the best checkpoint's calibration map at the end
  CalibrationWeighting calibration_weighting{};  // whose MAPE the map minimises
  int calibration_folds = 0;  // 0: map fitted in-sample; K: on K fold models' out-of-fold scores
  int ensemble = 1;           // members of an ensemble run (train/ensemble.hpp)
};

/// `model.*`: everything that defines the cost model: sizes (model-spec §5.1; they become
/// lcm::model::ModelConfig), the pre-trained encoder (§8), the input scaling (§3.10) and the
/// preset that sets the faithful reference behaviour.
struct CostModelConfig {
  std::vector<int> comp_embed_layer_sizes;  // computation-MLP widths; the last is the embedding
  std::vector<double> drops;                // dropout per computation-MLP layer
  int lstm_embedding_size = 0;
  int expr_embed_size = 0;
  lcm::model::EncoderKind encoder{};  // none | comp_vector | access_matrix (§8)
  std::string encoder_weights;        // autoencoder checkpoint for `encoder`
  ScalingMode input_scaling{};
  bool relative_to_identity = false;  // predict relative to the untransformed schedule
  Preset preset{};
};

/// `pretrain.*`: lcm-pretrain, the self-supervised autoencoders of model-spec §8.
struct PretrainConfig {
  lcm::model::EncoderKind kind{};  // comp_vector | access_matrix
  std::vector<std::string> files;  // LOOPerSet files; labels unused
  int epochs = 0;
  int batch_size = 0;             // samples per batch ([PCV]/[PAM]: 256)
  double lr = 0;                  // Adam ([PCV]/[PAM]: 1e-4)
  double valid_fraction = 0;      // share of programs held out for validation, in [0, 1)
  int64_t max_samples = 0;        // cap on training samples per epoch (seeded pick); 0 = all
  PretrainObjective objective{};  // reconstruct | masked | contrastive
  double mask_rate = 0;           // masked, contrastive: share of input entries masked, (0, 1)
  double temperature = 0;         // contrastive: softmax temperature τ, > 0
};

/// `eval.*`: what lcm-eval and lcm-predict score.
struct EvalConfig {
  std::string weights_path;  // cost-model checkpoint; "" = not set
  std::string input_file;    // programs to score; "" = data.valid_file
  bool calibrated = true;    // apply the checkpoint's lcm.calibration map
};

/// The whole configuration, plus where it came from (for messages and reports).
struct Config {
  /// Every key at its row's default (config_keys()[i].default_value).
  Config();

  ExperimentConfig experiment;
  DataConfig data;
  TrainingConfig training;
  EvalConfig eval;
  CostModelConfig model;
  PretrainConfig pretrain;
  std::string config_file;  // the YAML file loaded ("" when only built-in defaults were used)
  /// The keys the user gave, each with where ("command line", or the --config file and line):
  /// every key set by apply_config_file, apply_config_yaml or apply_overrides. parse_cli clears
  /// what configs/default.yaml set when it was found rather than named (it restates the built-in
  /// defaults); set_config_value records nothing. Checkpoint feature settings (train/checkpoint.hpp
  /// adopt_checkpoint_features) refuse a given key that conflicts and replace the others.
  std::map<std::string, std::string> given;

  /// The file lcm-eval / lcm-predict score: eval.input_file, or data.valid_file when it is empty.
  const std::string& eval_input() const;
  /// The key that names eval_input() ("eval.input_file" or "data.valid_file"), for messages.
  const char* eval_input_key() const;
};

/// What lcm-train --resume does when a key's value differs from the saved run's.
enum class OnResume {
  Free,    // nothing: the key does not change the run (paths, threads, logging)
  Refuse,  // refused (exit 2): the key defines the run's objective, model or batch order
  Warn,    // one warning, then the run continues with the new value (optimizer schedule)
};

/// One row of the key table: the dotted key, a type description used in messages and --help
/// ("an integer >= 1", "one of adam|adamw"), a one-line doc, the default in text form, the
/// --resume policy, and typed accessors through text. `set` parses and validates the text and
/// throws ConfigError naming the key, the expected type/values and the bad text, leaving the
/// config unchanged; `get` gives a text that `set` accepts (round trip).
struct ConfigKey {
  std::string key;
  std::string type;
  std::string doc;
  std::string default_value;
  OnResume on_resume = OnResume::Free;
  std::function<void(Config&, const std::string&)> set;
  std::function<std::string(const Config&)> get;
  bool is_list = false;  // a comma-separated list; a YAML file may give it as a sequence
  /// The key changes the features of a schedule (model-spec §3, data-format.md "Schedule forms"):
  /// a checkpoint records its value (lcm.feature_config) and scoring uses the recorded one.
  bool changes_features = false;
};

/// The table of every key, in display order (configs/default.yaml follows it).
const std::vector<ConfigKey>& config_keys();

/// The keys whose --resume policy is `p`, in table order.
std::vector<std::string> keys_on_resume(OnResume p);

/// The keys that change features (ConfigKey::changes_features), in table order.
std::vector<std::string> feature_keys();

/// Sets one key from its text form. Throws ConfigError for an unknown key ("unknown config key
/// 'data.bach_size'; did you mean data.batch_size?") or a bad value.
void set_config_value(Config& c, const std::string& key, const std::string& value);
/// The text form of one key's value. Throws ConfigError for an unknown key.
std::string get_config_value(const Config& c, const std::string& key);

/// Applies a YAML file (nested maps, e.g. `data: {batch_size: 256}`) on top of `c`. Every leaf
/// must be a scalar under a known key. Throws ConfigError naming the file and the key, "config
/// file not found: <path>", or "config file <path>: is a directory, not a YAML file".
void apply_config_file(Config& c, const std::string& path);
/// Applies YAML text (same rules; `origin` names it in messages). An alias inside the collection
/// it names (`training: &t` then `  x: *t`) and nesting deeper than kMaxConfigDepth (aliases
/// counted expanded) are refused before any node is built: ConfigError "<origin> line N: alias
/// *t refers to the collection that holds it ..." / "<origin> line N: nested deeper than 16
/// levels ...".
void apply_config_yaml(Config& c, const std::string& yaml_text, const std::string& origin);

/// Applies overrides given as "key=value" or as the pair "key" "value". Throws ConfigError for
/// an unknown key (suggesting keys within a small edit distance), a bad value, a key without a
/// value ("data.train_file: missing value": at the end, or followed by a `known.key=...`
/// token, which is never taken as a value), or an argument that is neither a known key nor
/// key=value ("unexpected argument 'X' (overrides are key=value or key value)"), or a key given
/// twice in `args`, in either syntax ("config key 'K' given twice on the command line: 'A' and
/// 'B'; give each key once").
void apply_overrides(Config& c, const std::vector<std::string>& args);

/// The configs/default.yaml found by looking, in order, at $LCM_CONFIG, then upward from the
/// executable's folder (build/bin/../../configs), then upward from the current directory.
/// Returns "" when none exists (built-in defaults are then used). Throws ConfigError when
/// $LCM_CONFIG is set to a path that is not a file.
std::string find_default_config();

/// Multi-line "key = value" listing of every key (for --help, logs and reports).
std::string describe_config(const Config& c, bool with_docs);
/// describe_config(c, true) for the given keys only, in their order (a tool that accepts a few
/// keys lists those). Throws ConfigError for an unknown key.
std::string describe_config_keys(const Config& c, const std::vector<std::string>& keys);

/// The feature switches of model-spec §11 selected by data.loop_zeroing / data.shift_match.
lcm::data::FeatureOptions feature_options(const DataConfig& d);

/// Sets every switch that the ranking defaults change to the faithful reference behaviour
/// (model.preset=reference; docs/accuracy.md): training.loss=mape, lr_schedule=constant,
/// lr=0.001, optimizer=adamw, weight_decay=0.015, clip_grad_norm=0, warmup_pct=0.1,
/// rank_weight=1, early_stop_patience=0, early_stop_from_epoch=1, select_metric=mape,
/// calibrate=false, calibration_folds=0, model.input_scaling=none, model.drops=0.05 ×5,
/// data.min_functions_per_footprint=2, data.batching=per_footprint (one footprint per batch,
/// model-spec §5.5). Sizes, epochs, batch size and seeds are left alone.
void apply_reference_preset(Config& c);

}  // namespace lcm::config
