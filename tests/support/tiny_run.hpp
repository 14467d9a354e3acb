// A tiny end-to-end training setup shared by the suites that train real checkpoints through
// lcm-train's code path (test_calibration, test_identity, test_ensemble): a synthetic train/valid
// pair of LOOPerSet files and the overrides of a small cost model that trains in about a second.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/synth.hpp"
#include "train/run.hpp"

namespace lcm::test {

/// The two LOOPerSet files written by write_tiny_splits.
struct TinySplits {
  std::string train;  ///< `<dir>/train.jsonl.gz`: 16 programs
  std::string valid;  ///< `<dir>/valid.jsonl.gz`: 6 programs
};

/// Writes lcm-synth files into `dir` (which must exist): 16 training and 6 validation programs of
/// `schedules_per_program` schedules each, drawn from 2 shared loop structures (so footprint
/// groups hold several programs), seeds `seed` (train) and `seed + 1` (valid). Throws what
/// data::write_synth_file throws.
inline TinySplits write_tiny_splits(const std::string& dir, uint64_t seed,
                                    int schedules_per_program = 12) {
  TinySplits s{dir + "/train.jsonl.gz", dir + "/valid.jsonl.gz"};
  data::SynthOptions o;
  o.programs = 16;
  o.schedules_per_program = schedules_per_program;
  o.structures = 2;
  o.threads = 1;
  o.seed = seed;
  data::write_synth_file(s.train, o);
  o.programs = 6;
  o.seed = seed + 1;
  data::write_synth_file(s.valid, o);
  return s;
}

/// The defaults plus a small model (comp layers 32,16, embeddings 8) trained for 2 epochs on
/// `splits` with batches of 32, one thread, no early stopping, the calibration map fitted on the
/// training split (no fold runs), runs written under `base`; `extra` overrides are applied last.
/// Throws config::ConfigError on a bad `extra` override.
inline config::Config tiny_run_config(const TinySplits& splits, const std::string& base,
                                      const std::vector<std::string>& extra = {}) {
  config::Config c;
  std::vector<std::string> o{"data.train_file=" + splits.train, "data.valid_file=" + splits.valid,
                             "experiment.base_path=" + base, "data.batch_size=32",
                             "training.threads=1", "data.nb_workers=1", "training.max_epochs=2",
                             "training.early_stop_patience=0", "model.comp_embed_layer_sizes=32,16",
                             "model.drops=0.05,0.05", "model.lstm_embedding_size=8",
                             "model.expr_embed_size=8",
                             // the in-sample map: test_crossfit sets its folds itself
                             "training.calibration_folds=0"};
  config::apply_overrides(c, o);
  config::apply_overrides(c, extra);  // over the defaults above (each list gives a key once)
  return c;
}

/// TrainOptions of a run that prints no progress (quiet), for train() and calibrate_checkpoint.
inline train::TrainOptions quiet_training() {
  train::TrainOptions o;
  o.quiet = true;
  return o;
}

}  // namespace lcm::test
