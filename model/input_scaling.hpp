// Input scaling of the cost model's numeric features (docs/model-spec.md §3.10): the sign·log10
// transform of [PCV] and/or a per-column standardisation fitted on the TRAINING split only,
// serialised as JSON for checkpoint metadata and reapplied to every batch at train/eval/predict.
#pragma once
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "model/options.hpp"

namespace lcm::model {

/// §3.10 ([PCV] thresholding_bound): sign(x)·log10(|x|) when |x| ≥ 10, else x (9 → 9, 10 → 1,
/// −1000 → −3, 0 → 0).
double signed_log10(double x);

/// A fitted input scaling. Applies to the computation vectors ([B, C, 910] of BatchTensors::comp,
/// all 910 columns) and the loop vectors ([B, L, 8] of BatchTensors::loops); the expression
/// one-hots are left as they are. Element-wise per column, so the schedule-independent columns
/// stay equal across a program's datapoints (CostModel's static-column sharing still applies).
struct InputScaling {
  std::string mode = "none";
  /// Per-column mean and standard deviation (after the log when mode is log_standardize), fitted
  /// on every (datapoint, computation) row / (datapoint, loop) row of the training split. Empty
  /// unless the mode standardises. A column whose std is < 1e-6 (constant in training) gets
  /// std 1, so it is only centred.
  std::vector<double> comp_mean, comp_std;  // [910]
  std::vector<double> loop_mean, loop_std;  // [8]
  /// Computation columns [0, comp_scaled_columns) are scaled; the others pass through raw: a
  /// pre-trained encoder (model-spec §8) reads them and applies its own transform (0 for
  /// model.encoder=comp_vector, 207 for access_matrix, whose columns 0–206 go to the first MLP
  /// layer directly). The loop vectors are always scaled. 910 = every column.
  int comp_scaled_columns = 910;

  bool uses_log() const { return mode == "log" || mode == "log_standardize"; }
  bool standardizes() const { return mode == "standardize" || mode == "log_standardize"; }

  /// Scales bt.comp and bt.loops in place (no-op for "none"). Throws std::invalid_argument when
  /// a standardising scaling has no fitted statistics of the right width.
  void apply(data::BatchTensors& bt) const;
  /// Scales one value of computation column `col` (0..909) / loop column (0..7).
  float apply_comp(float x, int col) const;
  float apply_loop(float x, int col) const;

  /// JSON text {"format_version":1,"mode":...,"comp_mean":[...],...,"comp_scaled_columns":n
  /// (only when < 910)} (numbers with 17
  /// significant digits, so from_json(to_json()) is exact). Stored as checkpoint metadata
  /// "lcm.input_scaling".
  std::string to_json() const;
  /// Parses to_json()'s text. Throws std::runtime_error naming the bad field (unknown mode, wrong
  /// widths, non-numbers), or the input column whose fitted standard deviation is 0, negative or
  /// not finite (or whose mean is not finite): "lcm.input_scaling.comp_std[17] is 0: input column
  /// comp[17] (...) has standard deviation 0 in the training data the scaling was fitted on ...".
  static InputScaling from_json(const std::string& text);
};

/// Fits `mode` on the training split `train`: every kept schedule of every program contributes
/// its C computation rows and L loop rows (sums in double). Throws std::invalid_argument for an
/// unknown mode (naming the allowed ones) or an empty split when the mode standardises.
/// `comp_scaled_columns` (InputScaling::comp_scaled_columns, in [0, 910]): the raw columns
/// beyond it get mean 0 and std 1. Also throws std::invalid_argument for a count outside [0, 910],
/// and for a column holding a value that is not finite (naming the column and the first program
/// and schedule with it). A column constant in `train` (standard deviation 0) gets std 1.
InputScaling fit_input_scaling(const std::string& mode, const data::Dataset& train,
                               int comp_scaled_columns = 910);

}  // namespace lcm::model
