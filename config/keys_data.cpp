// The key rows of experiment.*, data.* and the training device (config/key_rows.hpp).
#include "config/key_rows.hpp"

namespace lcm::config::key_rows {

/// The rows of experiment.*: the run name and the output folder.
void add_experiment_keys(std::vector<ConfigKey>& k) {
  {
    const std::string type = "a name of letters, digits, '.', '_', '-' (not starting with '.'; " +
                             std::to_string(kMaxExperimentName) + " characters at most)";
    k.push_back({"experiment.name", type, "name of the run (used in output file names)", "lcm",
                 OnResume::Free,
                 [type](Config& c, const std::string& v) {
                   if (v.size() > kMaxExperimentName)
                     bad_value("experiment.name", type, v.substr(0, 40) + "...",
                               std::to_string(v.size()) + " characters long; the limit is " +
                                   std::to_string(kMaxExperimentName));
                   if (!is_plain_name(v)) bad_value("experiment.name", type, v);
                   c.experiment.name = v;
                 },
                 [](const Config& c) { return c.experiment.name; }});
  }
  k.push_back(string_key(LCM_KEY(experiment.base_path), "runs",
                         "folder for outputs; the data cache is <base_path>/cache/<split>.lcmb "
                         "(relative = to the current directory)"));
  k.push_back(bool_key(LCM_KEY(experiment.overwrite), "false",
                       "a new lcm-train / lcm-pretrain run over an experiment that already holds "
                       "a run first moves that run's files into <base_path>/previous/<name>-<UTC "
                       "time>/ (false: the new run is refused; --resume continues the old one)"));
}

/// The rows of data.*: input files, batch size, workers and their memory.
void add_data_keys(std::vector<ConfigKey>& k) {
  // the defaults: the committed lcm-synth slice (tests/data/README.md), so a fresh clone trains
  k.push_back(string_key(LCM_KEY(data.train_file), "tests/data/synth_train.jsonl.gz",
                         "training set (LOOPerSet .jsonl/.jsonl.gz; relative = to the current "
                         "directory; empty = none)"));
  k.push_back(string_key(LCM_KEY(data.valid_file), "tests/data/synth_valid.jsonl.gz",
                         "validation set (same rules as data.train_file)"));
  k.push_back(refuse(int_key(LCM_KEY(data.batch_size), "512", 1,
                             "datapoints per batch (reference 2048; model-spec §6)")));
  k.push_back(int_key(LCM_KEY(data.nb_workers), "0", 0, kMaxWorkers,
                      "threads extracting features; 0 = all hardware threads"));
  k.push_back({"data.max_bytes_in_flight", "bytes with a unit such as 256MiB or 1GiB, or 0",
               "bytes of the records read and not yet taken in, across the reader and every "
               "feature thread of lcm-prepare, lcm-train and lcm-inspect (a record heavier than "
               "this is read alone); 0 = bounded by the record count only",
               "256MiB", OnResume::Free,
               [](Config& c, const std::string& v) {
                 const MemoryBudget b = parse_memory_budget(v, "data.max_bytes_in_flight");
                 if (b.is_fraction)
                   throw ConfigError(
                       "data.max_bytes_in_flight: expected bytes with a unit "
                       "(e.g. 256MiB) or 0, got '" +
                       v + "'");
                 c.data.max_bytes_in_flight = int64_t(b.bytes);
               },
               [](const Config& c) {
                 // the largest binary unit that divides it: 256MiB reads back as given
                 const int64_t n = c.data.max_bytes_in_flight;
                 const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
                 int u = 0;
                 int64_t v = n;
                 while (v != 0 && u < 4 && v % 1024 == 0) v /= 1024, ++u;
                 return n == 0 ? std::string("0") : std::to_string(v) + units[u];
               }});
}

/// The rows of data.*: footprint filter, batching, feature switches, schedule forms, cache.
void add_data_feature_keys(std::vector<ConfigKey>& k) {
  k.push_back(
      refuse(int_key(LCM_KEY(data.min_functions_per_footprint), "0", 0,
                     "drop footprint groups with fewer programs than this AND fewer than 100x "
                     "this many datapoints (model-spec §3.11; the reference preset: 2); 0 keeps "
                     "all")));
  k.push_back(refuse(enum_key(
      LCM_KEY(data.batching), "mixed",
      "mixed = batches of any mix of footprints, programs in pieces of data.program_piece, every "
      "batch full (docs/model-spec.md §5.5); per_footprint = one footprint per batch (the "
      "reference)")));
  k.push_back(refuse(int_key(
      LCM_KEY(data.program_piece), "32", 0,
      "mixed batches: a program's schedules enter batches in pieces of at most this many, so "
      "that a batch holds many programs (0 = whole programs)")));
  k.push_back(
      refuse(u64_key(LCM_KEY(data.seed), "42", "seed of the batch shuffles (model-spec §5.5)")));
  k.push_back(bool_key(LCM_KEY(data.strict), "false",
                       "stop at the first malformed line/program/schedule; policy drops are not "
                       "errors (small footprint groups, notes, schedules with no_execution_times/"
                       "negative_time/zero_time); not part of the cache key (a cache built with "
                       "such skips stops a strict run too)"));
  k.push_back(features(
      refuse(enum_key(LCM_KEY(data.loop_zeroing), "last_comp",
                      "loop-vector zeroing rule (model-spec §11 Q2; last_comp = reference)"))));
  k.push_back(features(
      refuse(enum_key(LCM_KEY(data.shift_match), "prefix",
                      "shift flag matching in the computation vector (model-spec §11 Q3; prefix = "
                      "reference)"))));
  k.push_back(features(refuse(enum_key(
      LCM_KEY(data.schedule_source), "auto",
      "where schedules are read from (docs/data-format.md \"Schedule forms\"): auto = the "
      "per-computation dicts when present, else the schedule-level typed transformations_list, "
      "else sched_str"))));
  k.push_back(refuse(enum_key(LCM_KEY(data.schedule_check), "report",
                              "two forms of one schedule that disagree: report (count, name, keep "
                              "the chosen form), skip (schedule/schedule_forms_disagree) or off")));
  k.push_back(features(
      refuse(enum_key(LCM_KEY(data.loop_level_base), "auto",
                      "loop levels of typed transformations_list entries: 0- or 1-based; "
                      "auto = detected per file (0-based when the data proves neither)"))));
  k.push_back(refuse(string_key(
      LCM_KEY(data.machine), "",
      "the machine whose times are read when execution_times are keyed by machine name; \"\" = "
      "the only one (several in a file and none chosen is an error naming them)")));
  k.push_back(refuse(int_key(LCM_KEY(data.max_programs), "0", 0,
                             "read only the first N records of each file; 0 = all")));
  k.push_back(refuse(int_key(
      LCM_KEY(data.cv_folds), "0", 0, 20,
      "cross-validation over the programs of data.train_file: K >= 2 cuts them into K folds (by "
      "a hash of the program name, as training.calibration_folds does) and the run trains on "
      "every fold but data.cv_fold and validates on that one (best checkpoint, early stopping, "
      "the log) instead of data.valid_file, so that settings are chosen without the validation "
      "split (docs/accuracy.md); 0 = off; 1 is refused")));
  k.push_back(refuse(
      int_key(LCM_KEY(data.cv_fold), "1", 1, 20, "with data.cv_folds=K: the held-out fold, 1..K")));
  k.push_back(bool_key(LCM_KEY(data.cache), "true", "read and write the prepared-data cache"));
  k.push_back(int_key(LCM_KEY(data.cache_lock_wait), "3600", 0,
                      "seconds to wait while another run (sharing experiment.base_path) builds "
                      "the same cache file, then read it; 0 = stop at once with an error"));
}

/// The rows of training.device, tf32 and the GPU memory budget.
void add_device_keys(std::vector<ConfigKey>& k) {
  {
    const std::string type = "cpu or cuda:N (N >= 0; cuda = cuda:0)";
    k.push_back({"training.device", type, "device for training and evaluation", "cpu",
                 OnResume::Free,
                 [type](Config& c, const std::string& v) {
                   try {
                     c.training.device = lcm::parse_device(v);
                   } catch (const std::invalid_argument&) {
                     bad_value("training.device", type, v);
                   }
                 },
                 [](const Config& c) { return c.training.device.str(); }});
  }
  k.push_back(bool_key(
      LCM_KEY(training.tf32), "false",
      "CUDA only: allow TF32 tensor cores in the float GEMMs (cuBLAS); false = full FP32"));
  k.push_back(enum_key(
      LCM_KEY(training.cuda_graphs), "auto",
      "CUDA only: capture each training step (forward, loss, backward, clipping, the optimizer) "
      "of a device-resident batch once as a CUDA graph and replay it at later steps (a few "
      "launches per step instead of hundreds, the same results); auto = on for cuda devices "
      "(one process, no pre-trained encoder), off = every step launched kernel by kernel; "
      "ignored on cpu"));
  k.push_back(int_key(
      LCM_KEY(training.cuda_graph_limit), "1024", 0, 1000000,
      "CUDA only: most captured training steps kept at once (one per device-resident training "
      "batch; each holds its uploads in pinned host memory, about the batch's index tables and "
      "labels, and a few KiB of device tables); batches beyond it run uncaptured; 0 = none"));
  k.push_back({"training.gpu_memory_budget",
               "a fraction in (0, 1] of free device memory, 0, or bytes with a unit such as 512MiB "
               "or 8GiB (a bare "
               "number > 1 is an error)",
               "CUDA only: device memory for the cached batches' model inputs (the rest are "
               "streamed); ignored on cpu",
               "0.5", OnResume::Free,
               [](Config& c, const std::string& v) {
                 c.training.gpu_memory_budget = parse_memory_budget(v);
               },
               [](const Config& c) { return c.training.gpu_memory_budget.text; }});
  k.push_back({"training.host_memory_budget",
               "bytes with a unit such as 4GiB or 512MiB, 0, or a fraction in (0, 1] of the "
               "physical memory",
               "host memory for the training data: the compact data of every program, then the "
               "expanded schedule rows of the training then validation programs while they fit; "
               "the others' rows are rebuilt at batch time (same results). The model and one "
               "batch's working memory come on top (about 0.5 GB at the release sizes)",
               "3GiB", OnResume::Free,
               [](Config& c, const std::string& v) {
                 c.training.host_memory_budget =
                     parse_memory_budget(v, "training.host_memory_budget");
               },
               [](const Config& c) { return c.training.host_memory_budget.text; }});
}

}  // namespace lcm::config::key_rows
