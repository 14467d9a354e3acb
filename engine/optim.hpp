// Optimizers (Adam, AdamW: PyTorch's update, bit for bit in float32), LR schedules stepped
// explicitly (constant, OneCycle = torch OneCycleLR, warm-up cosine) and gradient-norm clipping
// (docs/model-spec.md §6), and optimizer-state save/load for resume (docs/run-state.md).
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/parameter.hpp"

namespace lcm {

/// The pointers to every parameter of `store`, in insertion order (what optimizers take).
template <class T>
std::vector<Parameter<T>*> parameter_pointers(ParameterStore<T>& store) {
  std::vector<Parameter<T>*> out;
  for (auto& p : store.all()) out.push_back(&p);
  return out;
}

/// What an LR schedule drives: the learning rate and, for momentum cycling, β1.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every trainable parameter from its current gradient.
  virtual void step() = 0;
  /// Sets every parameter's gradient to 0 (frozen ones included).
  virtual void zero_grad() = 0;
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual double beta1() const = 0;
  virtual void set_beta1(double beta1) = 0;
};

/// Hyper-parameters of Adam / AdamW (torch.optim.Adam / AdamW; model-spec §6 uses AdamW with
/// lr 1e-3, weight_decay 0.015, betas (0.9, 0.999), eps 1e-8).
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// Adam: L2 term added to the gradient (g ← g + wd·p). AdamW: decoupled decay
  /// (p ← p·(1 − lr·wd) before the Adam update).
  double weight_decay = 0.0;
};

/// Adam (Kingma & Ba 2015) or AdamW (Loshchilov & Hutter 2019) exactly as PyTorch 1.12/1.13's
/// single-tensor implementation computes it, per parameter with its own step count t
/// (torch keeps state["step"] per parameter; a parameter skipped while frozen does not advance):
///   t ← t + 1
///   AdamW: p ← p·(1 − lr·wd)            Adam: g ← g + wd·p
///   m ← β1·m + (1 − β1)·g,   v ← β2·v + (1 − β2)·g²
///   denom = √v / √(1 − β2^t) + eps,   p ← p − (lr / (1 − β1^t)) · m / denom
/// in T arithmetic (float for training: scalars rounded to float as PyTorch does, the bias
/// corrections in double, std::fma where PyTorch's CPU kernels fuse), which reproduces torch 1.13
/// CPU float32 Adam/AdamW bit for bit (tests/fixtures/optim_torch_f32.safetensors). Parameters with
/// requires_grad == false are skipped (no update, no decay, no state change). T = float or double.
template <class T>
class Adam : public Optimizer {
 public:
  /// `params`: the parameters to update (not owned; must outlive the optimizer), no nullptr, no
  /// duplicates (std::invalid_argument otherwise). `decoupled_weight_decay` = true is AdamW.
  /// Throws std::invalid_argument for lr < 0, eps < 0, betas outside [0, 1), weight_decay < 0.
  Adam(std::vector<Parameter<T>*> params, AdamOptions options = {},
       bool decoupled_weight_decay = false);

  void step() override;
  void zero_grad() override;
  double lr() const override { return opt_.lr; }
  void set_lr(double lr) override;
  double beta1() const override { return opt_.beta1; }
  void set_beta1(double beta1) override;
  const AdamOptions& options() const { return opt_; }
  /// Changes the weight decay of the following steps (lcm-train --resume under another
  /// training.weight_decay: loaded with the file's value, then set, with a warning). Throws
  /// std::invalid_argument for a negative or non-finite value.
  void set_weight_decay(double weight_decay);
  bool decoupled_weight_decay() const { return decoupled_; }
  /// "AdamW" or "Adam".
  const char* kind() const { return decoupled_ ? "AdamW" : "Adam"; }
  const std::vector<Parameter<T>*>& params() const { return params_; }
  /// Step count t of parameter i (0 before its first update).
  int64_t step_count(size_t i) const { return steps_.at(i); }
  /// First / second moment of parameter i (numel values, zeros before the first update).
  const std::vector<T>& exp_avg(size_t i) const {
    pull_device_state();
    return m_.at(i);
  }
  const std::vector<T>& exp_avg_sq(size_t i) const {
    pull_device_state();
    return v_.at(i);
  }

  /// A device step in two parts, for a step captured in a CUDA graph and replayed (lcm-train's
  /// training.cuda_graphs): prepare_device_step() and device_step_scalars() run on the host
  /// before each replay, step_from_device() is captured once. Together they make the update of
  /// step(), bit for bit. All trainable parameters must be on a CUDA device (std::logic_error).
  /// prepare_device_step(): allocates the device moments and uploads the host ones when they are
  /// newer (first step, load_state); never call it during a capture.
  void prepare_device_step();
  /// Values device_step_scalars() writes: 7 + 2 × the trainable parameters.
  int64_t device_scalar_count() const;
  /// Advances every trainable parameter's step count t and writes this step's scalars, computed
  /// as step() computes them from lr, β1 and t: [1 − lr·wd, wd, β1, 1 − β1, β2, 1 − β2, eps,
  /// then per trainable parameter −lr / (1 − β1^t), √(1 − β2^t)] into out[0,
  /// device_scalar_count()).
  void device_step_scalars(T* out);
  /// Queues the update of every trainable parameter reading device_step_scalars()'s values from
  /// `scalars` (device memory) when it runs: one kernel (kernels/optim.cu adam_step_from_device).
  /// Capturable; the moments become the device's (exp_avg and save_state read them back).
  void step_from_device(const T* scalars);

  /// Writes the state as safetensors (atomic): tensors "exp_avg.<name>", "exp_avg_sq.<name>"
  /// (F32 for float, F64 for double, shape of the parameter); metadata "lcm.format" =
  /// "optimizer-state", "lcm.format_version" = "1", "optimizer" = kind(), "lr", "beta1", "beta2",
  /// "eps", "weight_decay" (%.17g), "step.<name>" per parameter, plus `extra` (e.g. the
  /// schedule's step; keys must not collide, std::invalid_argument otherwise).
  /// Throws std::invalid_argument for empty or duplicate parameter names.
  void save_state(const std::string& path,
                  const std::map<std::string, std::string>& extra = {}) const;

  /// Restores a state written by save_state: moments and step counts per parameter name, and lr
  /// and beta1 (schedule state). Refuses (std::runtime_error listing every problem, state
  /// unchanged) a file that is not optimizer state, of another version or kind (Adam vs AdamW),
  /// with beta2 / eps / weight_decay different from this optimizer's (a resume must not change
  /// them silently), with missing or unexpected parameter names, or wrong shapes / dtypes.
  /// Returns the whole metadata (so the caller can read back its `extra` keys).
  std::map<std::string, std::string> load_state(const std::string& path);

 private:
  std::vector<Parameter<T>*> params_;
  AdamOptions opt_;
  bool decoupled_;
  mutable std::vector<std::vector<T>> m_, v_;
  std::vector<int64_t> steps_;
  // CUDA path (parameters on a device, engine/device_memory.hpp): step() runs one kernel over all
  // parameters (kernels/optim.cu) with moments kept on the device; the host moments are refreshed
  // on demand (exp_avg, save_state) and uploaded again after load_state.
  void step_device();
  void pull_device_state() const;
  std::vector<std::shared_ptr<void>> device_moments_;  // per parameter: [m | v] on its device
  bool device_moments_current_ = false;                // device copies hold the latest moments
  mutable bool host_moments_stale_ = false;            // host m_, v_ older than the device's
};

/// AdamW: Adam with decoupled weight decay (torch.optim.AdamW; its default weight_decay is 0.01).
template <class T>
class AdamW : public Adam<T> {
 public:
  explicit AdamW(std::vector<Parameter<T>*> params, AdamOptions options = AdamW::default_options())
      : Adam<T>(std::move(params), options, true) {}
  /// torch.optim.AdamW's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01.
  static AdamOptions default_options() {
    AdamOptions o;
    o.weight_decay = 0.01;
    return o;
  }
};

/// A learning-rate (and optionally β1) schedule, stepped explicitly like a PyTorch scheduler:
/// last_step() is the number of step() calls so far (PyTorch's last_epoch; 0 after construction).
/// Typical use: apply(opt) once after construction (PyTorch's constructor does this), then
/// step(opt) after each unit (batch or epoch — faithful §6/Q1 training steps once per epoch).
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  /// Learning rate after `step` step() calls. Throws std::out_of_range beyond the schedule's end
  /// where it has one (OneCycle).
  virtual double lr_at(int64_t step) const = 0;
  /// β1 after `step` step() calls, or nullopt when the schedule leaves β1 alone.
  virtual std::optional<double> beta1_at(int64_t step) const { return std::nullopt; }

  int64_t last_step() const { return last_step_; }
  /// For resume: jump to `step` (validated through lr_at).
  void set_last_step(int64_t step);
  double lr() const { return lr_at(last_step_); }
  std::optional<double> beta1() const { return beta1_at(last_step_); }
  /// Advances one step. Throws std::out_of_range (unchanged) when that passes the end.
  void step();
  /// Writes lr() (and beta1() when cycled) into the optimizer.
  void apply(Optimizer& opt) const;
  /// step() then apply(opt).
  void step(Optimizer& opt) {
    step();
    apply(opt);
  }

 protected:
  int64_t last_step_ = 0;
};

/// The same learning rate forever (no scheduler).
class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr) : lr_(lr) {}
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

/// Options of OneCycleLr (torch.optim.lr_scheduler.OneCycleLR's arguments and defaults).
struct OneCycleOptions {
  double max_lr = 1e-3;
  /// Total steps of the cycle (PyTorch: epochs × steps_per_epoch), > 0.
  int64_t total_steps = 0;
  double pct_start = 0.3;
  bool anneal_cos = true;  ///< false = linear annealing
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  bool three_phase = false;
};

/// PyTorch's OneCycleLR (1.12/1.13 get_lr), with initial_lr = max_lr/div_factor and
/// min_lr = initial_lr/final_div_factor. Two phases (default): phase 1 ends at step
/// e1 = pct_start·total − 1 (float), phase 2 at total − 1, and phase 2 starts at e1 (PyTorch's
/// start_step = previous end_step). In a phase [s, e], pct = (t − s)/(e − s) and
/// cos annealing gives end + (start − end)/2·(1 + cos(π·pct)); lr goes initial → max → min and β1
/// max_momentum → base_momentum → max_momentum. Steps past total − 1 stay in the last phase
/// (pct > 1, as PyTorch); more than total_steps steps throw std::out_of_range like PyTorch's
/// ValueError. three_phase: initial → max (e1), max → initial (2·pct·total − 2), initial → min.
/// Faithful per-epoch stepping (model-spec §6, Q1) is calling step() once per epoch.
/// Throws std::invalid_argument for total_steps ≤ 0, pct_start outside [0, 1], or a phase of zero
/// length (PyTorch would divide by zero).
class OneCycleLr : public LrSchedule {
 public:
  explicit OneCycleLr(OneCycleOptions o);
  double lr_at(int64_t step) const override;
  std::optional<double> beta1_at(int64_t step) const override;
  const OneCycleOptions& options() const { return o_; }
  double initial_lr() const { return o_.max_lr / o_.div_factor; }
  double min_lr() const { return initial_lr() / o_.final_div_factor; }

 private:
  struct Phase {
    double end_step;
    double start_lr, end_lr, start_m, end_m;
  };
  /// (lr, momentum) at `step`.
  std::pair<double, double> at(int64_t step) const;
  OneCycleOptions o_;
  std::vector<Phase> phases_;
};

/// Cosine decay with linear warm-up (HuggingFace get_cosine_schedule_with_warmup, with a floor,
/// but the warm-up counts the step being taken, so that the first step does not run at lr 0):
/// t < warmup_steps: lr = max_lr · (t + 1) / warmup_steps (t = 0: max_lr / warmup_steps);
/// t ≥ warmup_steps: lr = min_lr + (max_lr − min_lr) · ½(1 + cos(π·min(1, (t − W)/(T − W)))),
/// so lr stays at min_lr after total_steps. Throws std::invalid_argument for warmup_steps < 0,
/// total_steps ≤ warmup_steps, or min_lr > max_lr.
class WarmupCosineLr : public LrSchedule {
 public:
  WarmupCosineLr(double max_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
  double lr_at(int64_t step) const override;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_, total_;
};

/// Reduce-on-plateau (in the spirit of torch.optim.lr_scheduler.ReduceLROnPlateau, mode "max",
/// threshold 0, cooldown 0): the LR starts at `lr` and is multiplied by `factor` each time
/// observe() has seen `patience` consecutive epochs without an improvement, after which the count
/// restarts. An epoch improves when its score is ≥ the best so far (a tie counts, as
/// train/early_stopping.hpp's EarlyStopping; a NaN score never improves). Unlike PyTorch, which
/// reduces after more than `patience` bad epochs, the reduction comes after exactly `patience`
/// (the wording of training.plateau_patience, and early stopping's count). The LR does not depend
/// on the step (lr_at ignores it; step() is a no-op but for the count); a resumed run replays the
/// finished epochs' scores through observe() to restore the state. Throws std::invalid_argument
/// for lr ≤ 0, factor outside (0, 1) or patience < 1.
class ReduceOnPlateauLr : public LrSchedule {
 public:
  ReduceOnPlateauLr(double lr, double factor, int patience);
  double lr_at(int64_t) const override { return lr_; }
  /// Records one epoch's validation score (larger is better). Returns true when this epoch ends
  /// a plateau, i.e. the LR was just multiplied by factor (apply() then writes it).
  bool observe(double score);
  int bad_epochs() const { return bad_; }
  int reductions() const { return reductions_; }

 private:
  double factor_;
  int patience_;
  double lr_;
  double best_ = -std::numeric_limits<double>::infinity();
  int bad_ = 0, reductions_ = 0;
};

/// torch.nn.utils.clip_grad_norm_ (2-norm): total = √(Σ over trainable parameters of Σ g²)
/// (accumulated in double, fixed order); if max_norm / (total + 1e-6) < 1 every gradient is
/// multiplied by that factor. Parameters with requires_grad == false are ignored (PyTorch sees
/// no gradient for them). Returns the total norm before clipping (may be inf/NaN: then nothing is
/// scaled; check it). Parameters on a CUDA device (parameters_to_device): the same formula over
/// their device gradients, a deterministic reduction (no atomics) plus one scale kernel
/// (kernels/optim.cu); the sum order differs from the CPU's, so the norm may differ in the last
/// bits. Throws std::invalid_argument for max_norm < 0 or a null pointer, std::logic_error when
/// some trainable parameters are on a device and others on the host.
template <class T>
double clip_grad_norm(const std::vector<Parameter<T>*>& params, double max_norm);

/// clip_grad_norm of parameters on a CUDA device without reading the norm back to the host, so
/// that it can be captured in a CUDA graph: the same reduction, coefficient and scale (the same
/// bits), decided on the device (kernels/optim.cu clip_grads_on_device). Throws
/// std::invalid_argument for max_norm < 0 or a null pointer, std::logic_error when a trainable
/// parameter is on the host, std::runtime_error in a build without CUDA.
template <class T>
void clip_grad_norm_on_device(const std::vector<Parameter<T>*>& params, double max_norm);

}  // namespace lcm
