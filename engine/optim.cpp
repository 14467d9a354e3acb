// Adam/AdamW (PyTorch's single-tensor update), LR schedules (constant, OneCycle, warm-up cosine),
// clip_grad_norm and the optimizer-state safetensors format. Formulas: docs/model-spec.md §6 and
// the PyTorch 1.12/1.13 sources named in optim.hpp.
#include "engine/optim.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <unordered_set>

#include "engine/device_memory.hpp"
#include "engine/safetensors.hpp"

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_ops.hpp"
#endif

namespace lcm {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string fmt17(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void check_beta(double b, const char* what) {
  if (!(b >= 0.0 && b < 1.0))
    throw std::invalid_argument(std::string("Adam: ") + what + " must be in [0, 1), got " +
                                fmt17(b));
}

}  // namespace

// ---------------------------------------------------------------- Adam / AdamW

template <class T>
Adam<T>::Adam(std::vector<Parameter<T>*> params, AdamOptions options, bool decoupled)
    : params_(std::move(params)), opt_(options), decoupled_(decoupled) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (!(opt_.lr >= 0.0))
    throw std::invalid_argument("Adam: lr must be >= 0, got " + fmt17(opt_.lr));
  if (!(opt_.eps >= 0.0))
    throw std::invalid_argument("Adam: eps must be >= 0, got " + fmt17(opt_.eps));
  if (!(opt_.weight_decay >= 0.0))
    throw std::invalid_argument("Adam: weight_decay must be >= 0, got " + fmt17(opt_.weight_decay));
  check_beta(opt_.beta1, "beta1");
  check_beta(opt_.beta2, "beta2");
  std::unordered_set<const Parameter<T>*> seen;
  for (Parameter<T>* p : params_) {
    if (!p) throw std::invalid_argument("Adam: null parameter pointer");
    if (!seen.insert(p).second)
      throw std::invalid_argument("Adam: parameter " + p->name + " given twice");
    m_.emplace_back(size_t(p->numel()), T(0));
    v_.emplace_back(size_t(p->numel()), T(0));
  }
  steps_.assign(params_.size(), 0);
}

template <class T>
void Adam<T>::set_lr(double lr) {
  if (!(lr >= 0.0)) throw std::invalid_argument("Adam: lr must be >= 0, got " + fmt17(lr));
  opt_.lr = lr;
}

template <class T>
void Adam<T>::set_weight_decay(double wd) {
  if (!(wd >= 0.0) || !std::isfinite(wd))
    throw std::invalid_argument("Adam: weight_decay must be a finite number >= 0, got " +
                                fmt17(wd));
  opt_.weight_decay = wd;
}

template <class T>
void Adam<T>::set_beta1(double b) {
  check_beta(b, "beta1");
  opt_.beta1 = b;
}

template <class T>
void Adam<T>::zero_grad() {
  // Device parameters: their gradients live in device_grad (the host copy is only written by
  // parameters_to_host(store, true)); one multi-tensor kernel zeroes them all instead of a
  // memset per parameter plus a host fill of every parameter's unused host gradient.
#ifdef LCM_WITH_CUDA
  std::vector<cuda::GradSlot<T>> slots;
  for (Parameter<T>* p : params_)
    if (p->device_grad) slots.push_back(cuda::GradSlot<T>{p->device_grad, p->numel()});
  if (!slots.empty()) cuda::zero_grads(slots.data(), int(slots.size()));
#endif
  for (Parameter<T>* p : params_)
    if (!p->device_grad) p->zero_grad();
}

/// CUDA Adam/AdamW: the same per-parameter scalars as the CPU step, one kernel for every
/// trainable parameter. Throws std::logic_error when only some trainable parameters are on a
/// device.
template <class T>
void Adam<T>::step_device() {
#ifdef LCM_WITH_CUDA
  const double lr = opt_.lr, b1 = opt_.beta1, b2 = opt_.beta2, wd = opt_.weight_decay;
  prepare_device_step();
  std::vector<cuda::AdamSlot<T>> slots;
  for (size_t k = 0; k < params_.size(); ++k) {
    Parameter<T>& p = *params_[k];
    if (!p.requires_grad) continue;
    const int64_t n = p.numel();
    const int64_t t = ++steps_[k];
    const double bias_c1 = 1.0 - std::pow(b1, double(t));
    const double bias_c2 = 1.0 - std::pow(b2, double(t));
    T* mv = static_cast<T*>(static_cast<DeviceBuffer*>(device_moments_[k].get())->get());
    slots.push_back(cuda::AdamSlot<T>{p.device_value, p.device_grad, mv, mv + n, n,
                                      T(-(lr / bias_c1)), T(std::sqrt(bias_c2))});
  }
  cuda::adam_step(slots.data(), int(slots.size()), decoupled_, T(1.0 - lr * wd), T(wd), T(b1),
                  T(1.0 - b1), T(b2), T(1.0 - b2), T(opt_.eps));
  host_moments_stale_ = true;
#else
  throw_cuda_not_built("Adam step on a CUDA device");
#endif
}

template <class T>
void Adam<T>::prepare_device_step() {
#ifdef LCM_WITH_CUDA
  if (device_moments_.size() != params_.size()) device_moments_.assign(params_.size(), nullptr);
  for (size_t k = 0; k < params_.size(); ++k) {
    Parameter<T>& p = *params_[k];
    if (!p.requires_grad) continue;
    if (!p.device_value)
      throw std::logic_error("Adam: parameter " + p.name +
                             " is on the host while others are on a CUDA device");
    const int64_t n = p.numel();
    if (!device_moments_[k]) {
      device_moments_[k] =
          std::make_shared<DeviceBuffer>(p.device_index, size_t(2 * n) * sizeof(T));
      device_moments_current_ = false;
    }
  }
  if (!device_moments_current_) {
    pull_device_state();  // never loses device-side progress
    for (size_t k = 0; k < params_.size(); ++k) {
      if (!device_moments_[k]) continue;
      T* mv = static_cast<T*>(static_cast<DeviceBuffer*>(device_moments_[k].get())->get());
      const int64_t n = params_[k]->numel();
      device_upload(mv, m_[k].data(), n);
      device_upload(mv + n, v_[k].data(), n);
    }
    device_moments_current_ = true;
  }
#else
  throw_cuda_not_built("Adam step on a CUDA device");
#endif
}

template <class T>
int64_t Adam<T>::device_scalar_count() const {
  int64_t n = 7;
  for (const Parameter<T>* p : params_) n += p->requires_grad ? 2 : 0;
  return n;
}

template <class T>
void Adam<T>::device_step_scalars(T* out) {
  const double lr = opt_.lr, b1 = opt_.beta1, b2 = opt_.beta2, wd = opt_.weight_decay;
  // the scalars of step_device(), in the same double arithmetic, rounded to T as it rounds them
  const T head[7] = {T(1.0 - lr * wd), T(wd), T(b1), T(1.0 - b1), T(b2), T(1.0 - b2), T(opt_.eps)};
  std::copy(head, head + 7, out);
  T* o = out + 7;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k]->requires_grad) continue;
    const int64_t t = ++steps_[k];
    const double bias_c1 = 1.0 - std::pow(b1, double(t));
    const double bias_c2 = 1.0 - std::pow(b2, double(t));
    *o++ = T(-(lr / bias_c1));
    *o++ = T(std::sqrt(bias_c2));
  }
  host_moments_stale_ = true;  // the step these scalars are for updates the device moments
}

template <class T>
void Adam<T>::step_from_device(const T* scalars) {
#ifdef LCM_WITH_CUDA
  std::vector<cuda::AdamSlot<T>> slots;
  for (size_t k = 0; k < params_.size(); ++k) {
    Parameter<T>& p = *params_[k];
    if (!p.requires_grad) continue;
    if (!p.device_value || k >= device_moments_.size() || !device_moments_[k])
      throw std::logic_error("Adam::step_from_device: parameter " + p.name +
                             " is not on a CUDA device or prepare_device_step() was not called");
    const int64_t n = p.numel();
    T* mv = static_cast<T*>(static_cast<DeviceBuffer*>(device_moments_[k].get())->get());
    slots.push_back(cuda::AdamSlot<T>{p.device_value, p.device_grad, mv, mv + n, n, T(0), T(1)});
  }
  cuda::adam_step_from_device(slots.data(), int(slots.size()), decoupled_, scalars);
  host_moments_stale_ = true;
#else
  (void)scalars;
  throw_cuda_not_built("Adam step on a CUDA device");
#endif
}

template <class T>
void Adam<T>::pull_device_state() const {
  if (!host_moments_stale_) return;
  for (size_t k = 0; k < params_.size() && k < device_moments_.size(); ++k) {
    if (!device_moments_[k]) continue;
    const T* mv =
        static_cast<const T*>(static_cast<DeviceBuffer*>(device_moments_[k].get())->get());
    const int64_t n = params_[k]->numel();
    device_download(m_[k].data(), mv, n);
    device_download(v_[k].data(), mv + n, n);
  }
  host_moments_stale_ = false;
}

template <class T>
void Adam<T>::step() {
  for (Parameter<T>* p : params_)
    if (p->requires_grad && p->device_value) return step_device();
  const double lr = opt_.lr, b1 = opt_.beta1, b2 = opt_.beta2, wd = opt_.weight_decay;
  // Scalars as PyTorch passes them to its float kernels (computed in double, used as T).
  const T decay = T(1.0 - lr * wd);  // AdamW: param.mul_(1 - lr*wd)
  const T wd_t = T(wd);              // Adam: grad.add(param, alpha=wd)
  const T beta1 = T(b1), one_m_beta1 = T(1.0 - b1);
  const T beta2 = T(b2), one_m_beta2 = T(1.0 - b2);
  const T eps = T(opt_.eps);
  for (size_t k = 0; k < params_.size(); ++k) {
    Parameter<T>& p = *params_[k];
    if (!p.requires_grad) continue;
    const int64_t n = p.numel();
    if (int64_t(p.value.size()) != n || int64_t(p.grad.size()) != n || int64_t(m_[k].size()) != n)
      throw std::logic_error("Adam: parameter " + p.name + " changed size (shape " + p.shape.str() +
                             ")");
    const int64_t t = ++steps_[k];
    const double bias_c1 = 1.0 - std::pow(b1, double(t));
    const double bias_c2 = 1.0 - std::pow(b2, double(t));
    const T neg_step_size = T(-(lr / bias_c1));
    const T bias_c2_sqrt = T(std::sqrt(bias_c2));
    T* __restrict pv = p.value.data();
    const T* __restrict g = p.grad.data();
    T* __restrict m = m_[k].data();
    T* __restrict v = v_[k].data();
    const bool l2 = !decoupled_ && wd != 0.0;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      // The rounding steps of PyTorch's CPU kernels (AVX2 build): add(alpha) is an explicit
      // fmadd, addcmul contracts to fma(s·g, g, ·), the rest rounds op by op. With these, lcm
      // matches torch 1.13 float32 AdamW bit for bit (measured on 4096 elements × 5 steps).
      T gi = g[i];
      if (decoupled_) pv[i] = pv[i] * decay;           // param.mul_(1 - lr*wd)
      if (l2) gi = std::fma(pv[i], wd_t, gi);          // grad.add(param, alpha=wd)
      m[i] = std::fma(gi, one_m_beta1, m[i] * beta1);  // exp_avg.mul_(b1).add_(g, alpha=1-b1)
      v[i] =
          std::fma(one_m_beta2 * gi, gi, v[i] * beta2);  // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
      T denom = std::sqrt(v[i]) / bias_c2_sqrt + eps;    // (sqrt(v) / sqrt(bc2)).add_(eps)
      pv[i] = pv[i] + (neg_step_size * m[i]) / denom;    // param.addcdiv_(m, denom, -step_size)
    }
  }
}

template <class T>
void Adam<T>::save_state(const std::string& path,
                         const std::map<std::string, std::string>& extra) const {
  pull_device_state();
  SafeTensorsFile f;
  f.metadata["lcm.format"] = "optimizer-state";
  f.metadata["lcm.format_version"] = "1";
  f.metadata["optimizer"] = kind();
  f.metadata["dtype"] = std::is_same_v<T, float> ? "F32" : "F64";
  f.metadata["lr"] = fmt17(opt_.lr);
  f.metadata["beta1"] = fmt17(opt_.beta1);
  f.metadata["beta2"] = fmt17(opt_.beta2);
  f.metadata["eps"] = fmt17(opt_.eps);
  f.metadata["weight_decay"] = fmt17(opt_.weight_decay);
  std::set<std::string> names;
  for (size_t k = 0; k < params_.size(); ++k) {
    const Parameter<T>& p = *params_[k];
    if (p.name.empty()) throw std::invalid_argument("Adam::save_state: a parameter has no name");
    if (!names.insert(p.name).second)
      throw std::invalid_argument("Adam::save_state: two parameters are named " + p.name);
    f.metadata["step." + p.name] = std::to_string(steps_[k]);
    auto shape = shape_vector(p.shape);
    if constexpr (std::is_same_v<T, float>) {
      f.add("exp_avg." + p.name, SafeTensor::from_f32(shape, m_[k].data()));
      f.add("exp_avg_sq." + p.name, SafeTensor::from_f32(shape, v_[k].data()));
    } else {
      f.add("exp_avg." + p.name, SafeTensor::from_f64(shape, m_[k].data()));
      f.add("exp_avg_sq." + p.name, SafeTensor::from_f64(shape, v_[k].data()));
    }
  }
  for (auto& kv : extra) {
    if (f.metadata.count(kv.first))
      throw std::invalid_argument("Adam::save_state: extra metadata key " + kv.first +
                                  " is reserved");
    f.metadata[kv.first] = kv.second;
  }
  write_safetensors(path, f);
}

template <class T>
std::map<std::string, std::string> Adam<T>::load_state(const std::string& path) {
  SafeTensorsFile f = read_safetensors(path);
  const std::string prefix = "optimizer state " + path + ": ";
  auto meta = [&](const std::string& key) -> const std::string* {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? nullptr : &it->second;
  };
  const std::string* format = meta("lcm.format");
  if (!format || *format != "optimizer-state")
    throw std::runtime_error(prefix + "not an lcm optimizer-state file (metadata lcm.format is " +
                             (format ? "\"" + *format + "\"" : std::string("absent")) + ")");
  const std::string* version = meta("lcm.format_version");
  if (!version || *version != "1")
    throw std::runtime_error(prefix + "unsupported lcm.format_version " +
                             (version ? *version : "(absent)") + ", this build reads 1");
  std::vector<std::string> problems;
  const std::string* kind_s = meta("optimizer");
  if (!kind_s || *kind_s != kind())
    problems.push_back(std::string("state is for ") + (kind_s ? *kind_s : "(unknown optimizer)") +
                       ", this optimizer is " + kind());
  auto number = [&](const char* key, double& out) {
    const std::string* s = meta(key);
    char* end = nullptr;
    if (!s || s->empty() || (out = std::strtod(s->c_str(), &end), *end != '\0')) {
      problems.push_back(std::string("metadata ") + key + " missing or not a number");
      return false;
    }
    return true;
  };
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, wd = 0;
  bool have_lr = number("lr", lr), have_b1 = number("beta1", beta1);
  auto same = [&](const char* key, double& out, double mine) {
    if (number(key, out) && out != mine)
      problems.push_back(std::string(key) + " " + fmt17(out) + " in file, " + fmt17(mine) +
                         " in this optimizer");
  };
  same("beta2", beta2, opt_.beta2);
  same("eps", eps, opt_.eps);
  same("weight_decay", wd, opt_.weight_decay);
  if (have_lr && !(lr >= 0.0)) problems.push_back("lr " + fmt17(lr) + " is negative");
  if (have_b1 && !(beta1 >= 0.0 && beta1 < 1.0))
    problems.push_back("beta1 " + fmt17(beta1) + " outside [0, 1)");

  const char* want_dtype = std::is_same_v<T, float> ? "F32" : "F64";
  std::vector<std::vector<T>> m(params_.size()), v(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  std::set<std::string> expected;
  for (size_t k = 0; k < params_.size(); ++k) {
    const Parameter<T>& p = *params_[k];
    expected.insert("exp_avg." + p.name);
    expected.insert("exp_avg_sq." + p.name);
    const std::string* st = meta("step." + p.name);
    char* end = nullptr;
    long long sv = 0;
    if (!st || st->empty() || (sv = std::strtoll(st->c_str(), &end, 10), *end != '\0') || sv < 0) {
      problems.push_back(p.name + ": step count missing or invalid");
    } else {
      steps[k] = sv;
    }
    for (int which = 0; which < 2; ++which) {
      std::string tname = (which == 0 ? "exp_avg." : "exp_avg_sq.") + p.name;
      const SafeTensor* t = f.find(tname);
      if (!t) {
        problems.push_back(tname + ": missing (the optimizer has parameter " + p.name +
                           ", the file does not)");
        continue;
      }
      bool ok = true;
      if (t->dtype != want_dtype) {
        problems.push_back(tname + ": dtype " + t->dtype + " in file, " + want_dtype + " expected");
        ok = false;
      }
      if (t->shape != shape_vector(p.shape)) {
        std::string fs = "[";
        for (size_t i = 0; i < t->shape.size(); ++i)
          fs += (i ? ", " : "") + std::to_string(t->shape[i]);
        problems.push_back(tname + ": shape " + fs + "] in file, " + p.shape.str() + " expected");
        ok = false;
      }
      if (!ok) continue;
      const std::string values = nonfinite_values_problem(tname, *t);
      if (!values.empty()) {
        problems.push_back(values);
        continue;
      }
      std::vector<T>& dst = which == 0 ? m[k] : v[k];
      dst.resize(size_t(p.numel()));
      std::memcpy(dst.data(), t->bytes.data(), t->bytes.size());
    }
  }
  for (auto& kv : f.tensors)
    if (!expected.count(kv.first))
      problems.push_back(kv.first + ": unexpected (no parameter of this optimizer has that name)");
  if (!problems.empty()) {
    std::string msg = prefix + "refused: ";
    const size_t shown = 20;
    for (size_t i = 0; i < problems.size() && i < shown; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > shown)
      msg += "; ... and " + std::to_string(problems.size() - shown) + " more";
    throw std::runtime_error(msg);
  }
  m_ = std::move(m);
  v_ = std::move(v);
  host_moments_stale_ = false;      // the file's moments replace any device-side ones
  device_moments_current_ = false;  // uploaded at the next device step
  steps_ = std::move(steps);
  opt_.lr = lr;
  opt_.beta1 = beta1;
  return f.metadata;
}

template class Adam<float>;
template class Adam<double>;

// ---------------------------------------------------------------- schedules

void LrSchedule::set_last_step(int64_t step) {
  if (step < 0) throw std::out_of_range("LrSchedule: negative step " + std::to_string(step));
  (void)lr_at(step);  // throws past the end
  last_step_ = step;
}

void LrSchedule::step() {
  (void)lr_at(last_step_ + 1);  // throws past the end, leaving the schedule unchanged
  ++last_step_;
}

void LrSchedule::apply(Optimizer& opt) const {
  opt.set_lr(lr());
  if (auto b = beta1()) opt.set_beta1(*b);
}

OneCycleLr::OneCycleLr(OneCycleOptions o) : o_(o) {
  if (o_.total_steps <= 0)
    throw std::invalid_argument("OneCycleLr: total_steps must be a positive integer, got " +
                                std::to_string(o_.total_steps));
  if (!(o_.pct_start >= 0.0 && o_.pct_start <= 1.0))
    throw std::invalid_argument("OneCycleLr: pct_start must be in [0, 1], got " +
                                fmt17(o_.pct_start));
  if (!(o_.max_lr >= 0.0) || !(o_.div_factor > 0.0) || !(o_.final_div_factor > 0.0))
    throw std::invalid_argument("OneCycleLr: max_lr must be >= 0 and the div factors > 0");
  const double initial = initial_lr(), max = o_.max_lr, min = min_lr();
  const double mx = o_.max_momentum, base = o_.base_momentum;
  const double total = double(o_.total_steps);
  if (o_.three_phase) {
    phases_ = {{o_.pct_start * total - 1.0, initial, max, mx, base},
               {2.0 * o_.pct_start * total - 2.0, max, initial, base, mx},
               {total - 1.0, initial, min, mx, mx}};
  } else {
    phases_ = {{o_.pct_start * total - 1.0, initial, max, mx, base},
               {total - 1.0, max, min, base, mx}};
  }
  double start = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    if (phases_[i].end_step == start)
      throw std::invalid_argument("OneCycleLr: phase " + std::to_string(i + 1) +
                                  " has zero length (total_steps " +
                                  std::to_string(o_.total_steps) + ", pct_start " +
                                  fmt17(o_.pct_start) + "); PyTorch would divide by zero");
    start = phases_[i].end_step;
  }
}

std::pair<double, double> OneCycleLr::at(int64_t step) const {
  if (step < 0) throw std::out_of_range("OneCycleLr: negative step " + std::to_string(step));
  if (step > o_.total_steps)
    throw std::out_of_range("OneCycleLr: tried to step " + std::to_string(step + 1) +
                            " times; the specified number of total steps is " +
                            std::to_string(o_.total_steps));
  auto anneal = [&](double start, double end, double pct) {
    if (o_.anneal_cos) return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1.0);
    return (end - start) * pct + start;
  };
  const double t = double(step);
  double start_step = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& ph = phases_[i];
    if (t <= ph.end_step || i + 1 == phases_.size()) {
      double pct = (t - start_step) / (ph.end_step - start_step);
      return {anneal(ph.start_lr, ph.end_lr, pct), anneal(ph.start_m, ph.end_m, pct)};
    }
    start_step = ph.end_step;
  }
  return {0.0, 0.0};  // unreachable: the last phase always matches
}

double OneCycleLr::lr_at(int64_t step) const {
  return at(step).first;
}

std::optional<double> OneCycleLr::beta1_at(int64_t step) const {
  double m = at(step).second;
  if (!o_.cycle_momentum) return std::nullopt;
  return m;
}

ReduceOnPlateauLr::ReduceOnPlateauLr(double lr, double factor, int patience)
    : factor_(factor), patience_(patience), lr_(lr) {
  if (!(lr > 0) || !(factor > 0 && factor < 1) || patience < 1)
    throw std::invalid_argument(
        "ReduceOnPlateauLr: needs lr > 0, factor in (0, 1) and patience "
        ">= 1, got lr " +
        std::to_string(lr) + ", factor " + std::to_string(factor) + ", patience " +
        std::to_string(patience));
}

bool ReduceOnPlateauLr::observe(double score) {
  if (score >= best_) {  // NaN compares false: never an improvement
    best_ = score;
    bad_ = 0;
    return false;
  }
  if (++bad_ < patience_) return false;
  lr_ *= factor_;
  ++reductions_;
  bad_ = 0;
  return true;
}

WarmupCosineLr::WarmupCosineLr(double max_lr, int64_t warmup_steps, int64_t total_steps,
                               double min_lr)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (warmup_steps < 0) throw std::invalid_argument("WarmupCosineLr: warmup_steps must be >= 0");
  if (total_steps <= warmup_steps)
    throw std::invalid_argument("WarmupCosineLr: total_steps (" + std::to_string(total_steps) +
                                ") must exceed warmup_steps (" + std::to_string(warmup_steps) +
                                ")");
  if (!(min_lr >= 0.0 && min_lr <= max_lr))
    throw std::invalid_argument("WarmupCosineLr: need 0 <= min_lr <= max_lr, got min_lr " +
                                fmt17(min_lr) + ", max_lr " + fmt17(max_lr));
}

double WarmupCosineLr::lr_at(int64_t step) const {
  if (step < 0) throw std::out_of_range("WarmupCosineLr: negative step " + std::to_string(step));
  // (step + 1): the first optimizer step (step 0) already learns, at max_lr / warmup_steps, and
  // the warm-up's last step reaches max_lr (lr 0 at step 0 would be a wasted step).
  if (step < warmup_) return max_lr_ * double(step + 1) / double(warmup_);
  double progress = std::min(1.0, double(step - warmup_) / double(total_ - warmup_));
  return min_lr_ + (max_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(kPi * progress));
}

// ---------------------------------------------------------------- clipping

template <class T>
double clip_grad_norm(const std::vector<Parameter<T>*>& params, double max_norm) {
  if (!(max_norm >= 0.0))
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + fmt17(max_norm));
  bool any_device = false, any_host = false;
  for (Parameter<T>* p : params) {
    if (!p) throw std::invalid_argument("clip_grad_norm: null parameter pointer");
    if (p->requires_grad) (p->device_value ? any_device : any_host) = true;
  }
  if (any_device) {
    // Parameters on a CUDA device: one deterministic reduction over every device gradient
    // (kernels/optim.cu grad_sq_norm) and, when clipping, one scale kernel; same formula.
#ifdef LCM_WITH_CUDA
    if (any_host)
      throw std::logic_error(
          "clip_grad_norm: some trainable parameters are on the host, others on a CUDA device");
    std::vector<cuda::GradSlot<T>> slots;
    for (Parameter<T>* p : params)
      if (p->requires_grad) slots.push_back(cuda::GradSlot<T>{p->device_grad, p->numel()});
    const double total = std::sqrt(cuda::grad_sq_norm(slots.data(), int(slots.size())));
    const double coef = max_norm / (total + 1e-6);
    if (coef < 1.0) cuda::scale_grads(slots.data(), int(slots.size()), T(coef));
    return total;
#else
    throw_cuda_not_built("clip_grad_norm on a CUDA device");
#endif
  }
  double sum = 0.0;
  for (Parameter<T>* p : params) {
    if (!p->requires_grad) continue;
    double s = 0.0;
    for (T g : p->grad) s += double(g) * double(g);
    sum += s;
  }
  const double total = std::sqrt(sum);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    const T c = T(coef);
    for (Parameter<T>* p : params)
      if (p->requires_grad)
        for (T& g : p->grad) g *= c;
  }
  return total;
}

template double clip_grad_norm<float>(const std::vector<Parameter<float>*>&, double);
template double clip_grad_norm<double>(const std::vector<Parameter<double>*>&, double);

template <class T>
void clip_grad_norm_on_device(const std::vector<Parameter<T>*>& params, double max_norm) {
  if (!(max_norm >= 0.0))
    throw std::invalid_argument("clip_grad_norm_on_device: max_norm must be >= 0, got " +
                                fmt17(max_norm));
#ifdef LCM_WITH_CUDA
  std::vector<cuda::GradSlot<T>> slots;
  for (Parameter<T>* p : params) {
    if (!p) throw std::invalid_argument("clip_grad_norm_on_device: null parameter pointer");
    if (!p->requires_grad) continue;
    if (!p->device_value)
      throw std::logic_error("clip_grad_norm_on_device: parameter " + p->name + " is on the host");
    slots.push_back(cuda::GradSlot<T>{p->device_grad, p->numel()});
  }
  cuda::clip_grads_on_device(slots.data(), int(slots.size()), max_norm);
#else
  (void)params;
  throw_cuda_not_built("clip_grad_norm_on_device");
#endif
}

template void clip_grad_norm_on_device<float>(const std::vector<Parameter<float>*>&, double);
template void clip_grad_norm_on_device<double>(const std::vector<Parameter<double>*>&, double);

}  // namespace lcm
