// The key rows of training.*: optimisation, LR schedule, objective, early stopping,
// calibration; and eval.* (config/key_rows.hpp).
#include "config/key_rows.hpp"
#include "engine/threads.hpp"

namespace lcm::config::key_rows {

/// The rows of training.*: learning rate, epochs, seed, optimizer, threads.
void add_optimisation_keys(std::vector<ConfigKey>& k) {
  k.push_back(warn(double_key(LCM_KEY(training.lr), "0.001", 0.0, true,
                              "maximum learning rate (model-spec §6)")));
  k.push_back(warn(
      int_key(LCM_KEY(training.max_epochs), "30", 1,
              "number of epochs (with early stopping: docs/accuracy.md; reference release 1000)")));
  k.push_back(
      u64_key(LCM_KEY(training.seed), "42", "seed of parameter initialisation and dropout"));
  k.push_back(
      refuse(enum_key(LCM_KEY(training.optimizer), "adamw", "optimizer (reference: adamw)")));
  k.push_back(warn(double_key(LCM_KEY(training.weight_decay), "0.015", 0.0, false,
                              "decoupled weight decay (AdamW)")));
  k.push_back(int_key(LCM_KEY(training.threads), "0", 0, lcm::kMaxThreads,
                      "CPU threads of the engine; 0 = all hardware threads (more than the "
                      "machine's cores: a warning, and slower)"));
  k.push_back(warn(int_key(
      LCM_KEY(training.cpu_sub_batches), "1", 1, 64,
      "CPU: each training batch runs as this many sub-batches (whole programs each under a "
      "ranking loss) whose forward and backward run at once on the engine's threads, gradients "
      "summed in a fixed order: results depend on this count, never on training.threads, and "
      "equal the whole batch's up to float rounding and dropout masks; 1 = the whole batch, its "
      "products split across the threads (the default); 2 keeps a second core busy at about "
      "9% more CPU per datapoint (docs/results.md)")));
}

/// The rows of eval.*: what lcm-eval and lcm-predict load and score.
void add_eval_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      string_key(LCM_KEY(eval.weights_path), "",
                 "cost-model checkpoint that lcm-eval / lcm-predict load (\"\" = not set)"));
  k.push_back(string_key(
      LCM_KEY(eval.input_file), "",
      "programs that lcm-eval / lcm-predict score (LOOPerSet file); \"\" = data.valid_file"));
  k.push_back(bool_key(LCM_KEY(eval.calibrated), "true",
                       "apply the checkpoint's calibration map (lcm.calibration, fitted by "
                       "lcm-train on its training split) to predicted speedups; false = the "
                       "model's raw outputs"));
}

/// The rows of training.lr_schedule, clipping and warm-up.
void add_schedule_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      warn(enum_key(LCM_KEY(training.lr_schedule), "warmup_cosine",
                    "LR schedule: constant; one_cycle_per_epoch = reference OneCycleLR stepped "
                    "once per epoch (model-spec §6, Q1); one_cycle_per_batch; warmup_cosine; "
                    "reduce_on_plateau = training.lr times training.plateau_factor each time "
                    "training.select_metric has not improved on validation for "
                    "training.plateau_patience epochs")));
  k.push_back(warn(double_key(LCM_KEY(training.clip_grad_norm), "1", 0.0, false,
                              "clip the gradients' global 2-norm to this value; 0 = off")));
  k.push_back(warn(
      double_key(LCM_KEY(training.warmup_pct), "0.1", 0.0, false,
                 "warmup_cosine: warm-up length as a fraction of all batch steps (< 1)", 1.0)));
  k.push_back(warn(double_key(LCM_KEY(training.plateau_factor), "0.5", 0.0, true,
                              "reduce_on_plateau: the LR is multiplied by this factor (< 1) on "
                              "each plateau",
                              1.0)));
  k.push_back(warn(int_key(LCM_KEY(training.plateau_patience), "2", 1,
                           "reduce_on_plateau: epochs without a better validation "
                           "training.select_metric before the LR is reduced")));
}

/// The rows of the training objective (docs/accuracy.md).
void add_objective_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      refuse(objective_key(LCM_KEY(training.loss), "log_huber+pairwise",
                           "training objective, a sum of terms: mape = reference (model-spec §6, "
                           "output a speedup); the others train the output as ln(speedup): "
                           "log_mse / log_l1 / log_huber on ln speedups (log_huber: delta "
                           "training.huber_delta), ranking losses over the schedules of the same "
                           "program in a batch: pairwise (RankNet logistic), listnet (softmax "
                           "cross-entropy per program), lambdarank (pairwise weighted by |delta "
                           "nDCG|), or a sum 'pointwise+ranking' (ranking term x "
                           "training.rank_weight); or a list 'term:weight,...' of at most one "
                           "pointwise and one ranking term (e.g. log_mse:1,listnet:0.2)")));
  k.push_back(
      refuse(double_key(LCM_KEY(training.rank_weight), "1", 0.0, false,
                        "weight of the ranking term of a 'log_*+<ranking>' training.loss (the "
                        "list form writes its weights out)")));
  // bounded: a delta far below float resolution or far above any ln speedup is a typo, and
  // would only fail later, inside the loss, without naming the key
  k.push_back(refuse(double_key(LCM_KEY(training.huber_delta), "0.5", 1e-6, false,
                                "log_huber: the Huber loss's delta on ln speedups (quadratic "
                                "within +-delta, linear beyond)",
                                1e6)));
}

/// The rows of early stopping, checkpoint selection and ensembles (docs/accuracy.md).
void add_selection_keys(std::vector<ConfigKey>& k) {
  k.push_back(int_key(LCM_KEY(training.early_stop_patience), "5", 0,
                      "stop when training.select_metric has not improved on validation for this "
                      "many epochs; 0 = off (reference)"));
  k.push_back(int_key(LCM_KEY(training.early_stop_from_epoch), "10", 1,
                      "the first epoch (1-based) whose lack of improvement counts towards "
                      "training.early_stop_patience; earlier epochs still choose the best "
                      "checkpoint. Keeps a run from stopping in the slow first phase of training "
                      "(docs/accuracy.md); 1 = count from the start (reference)"));
  k.push_back(enum_key(LCM_KEY(training.select_metric), "spearman",
                       "validation metric choosing the best checkpoint and driving early stopping: "
                       "mape = reference (datapoint-weighted MAPE, lower is better); spearman / "
                       "ndcg = per-program mean (model-spec §7, higher is better)"));
  k.push_back(
      bool_key(LCM_KEY(training.log_train_metrics), "false",
               "also predict the training split in eval mode after each epoch and log its "
               "per-program Spearman / nDCG (train-vs-validation curves; costs ~1/3 epoch)"));
  k.push_back(int_key(LCM_KEY(training.ensemble), "1", 1, 64,
                      "train K models (seeds training.seed .. +K-1, runs <name>_m1.._mK) and "
                      "write their best checkpoints as one ensemble (scores averaged in ln-speedup "
                      "space) to best_model_<name>; 1 = one model"));
}

/// The rows of the calibration map (docs/accuracy.md).
void add_calibration_keys(std::vector<ConfigKey>& k) {
  k.push_back(bool_key(LCM_KEY(training.calibrate), "true",
                       "at the end of training, fit the monotone calibration map minimising the "
                       "squared ln-speedup error "
                       "(score -> reported speedup; per-program rankings unchanged) of the best "
                       "checkpoint on the training split and store it there (lcm.calibration, "
                       "docs/accuracy.md); false = report the model's raw outputs (reference)"));
  k.push_back(enum_key(LCM_KEY(training.calibration_weighting), "program",
                       "how the calibration map's fit weighs datapoints: program = every program "
                       "alike (as the per-program means of model-spec §7.4 that lcm-eval "
                       "reports; each datapoint weighted 1 / its program's datapoints); "
                       "datapoint = every datapoint alike, where programs with many schedules "
                       "dominate"));
  k.push_back(int_key(LCM_KEY(training.calibration_folds), "0", 0, 20,
                      "fit the calibration map on out-of-fold predictions of the training split: "
                      "K >= 2 fold models (runs <name>_fold1.._foldK, each trained without one "
                      "fold of the training programs, ~K-1 extra trainings) predict the programs "
                      "they did not see; 0 = fit it on the model's own (in-sample, over-confident) "
                      "predictions of its training split; 1 is refused (docs/accuracy.md)"));
}

/// The rows of the model's input scaling and output, and the preset.
void add_output_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      refuse(enum_key(LCM_KEY(model.input_scaling), "log_standardize",
                      "feature scaling of computation/loop vectors: none = reference; log = "
                      "sign*log10 for |x| >= 10 (model-spec §3.10); standardize = per-column "
                      "(x - mean) / std fitted on the training split; log_standardize = both; "
                      "stored in the checkpoint and reapplied by lcm-eval / lcm-predict")));
  k.push_back(refuse(bool_key(
      LCM_KEY(model.relative_to_identity), "false",
      "predict ln(speedup) relative to the program's own untransformed schedule: f(schedule) - "
      "f(untransformed), so the untransformed program predicts exactly 1x (needs a loss other "
      "than mape; docs/accuracy.md)")));
  {
    ConfigKey preset = enum_key(
        LCM_KEY(model.preset), "none",
        "none: use the keys as given; reference: at this point set the faithful behaviour "
        "(training.loss=mape, lr_schedule=constant, lr=0.001, adamw, weight_decay=0.015, no "
        "clipping, no early stopping, select_metric=mape, calibrate=false, calibration_folds=0, "
        "input_scaling=none, "
        "relative_to_identity=false, drops 0.05, "
        "data.min_functions_per_footprint=2, data.batching=per_footprint); "
        "keys given after it still override");
    auto set_name = preset.set;
    preset.set = [set_name](Config& c, const std::string& v) {
      set_name(c, v);  // validates
      if (c.model.preset == Preset::Reference) apply_reference_preset(c);
    };
    k.push_back(refuse(std::move(preset)));
  }
}

}  // namespace lcm::config::key_rows
