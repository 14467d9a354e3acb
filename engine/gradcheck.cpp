// Finite-difference gradient checker (see gradcheck.hpp): analytic gradients from one backward,
// numeric ones from central differences on fresh tapes, compared element by element.
#include "engine/gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engine/device_memory.hpp"

namespace lcm {

namespace {

double eval_loss(const std::function<NodeId(Tape<double>&)>& build_loss, Tape<double>& tape) {
  tape.clear();
  const NodeId l = build_loss(tape);
  if (tape.value(l).numel() != 1)
    throw std::invalid_argument("grad_check: loss must be a scalar, has shape " +
                                tape.shape(l).str());
  return to_host(tape.value(l))[0];  // the loss may live on a CUDA device
}

}  // namespace

GradCheckResult grad_check(std::vector<Parameter<double>*> params,
                           const std::function<NodeId(Tape<double>&)>& build_loss, double eps,
                           double atol, double rtol) {
  if (params.empty()) throw std::invalid_argument("grad_check: no parameters to check");
  for (Parameter<double>* p : params) {
    if (!p) throw std::invalid_argument("grad_check: null parameter");
    if (!p->requires_grad)
      throw std::invalid_argument("grad_check: parameter " + p->name +
                                  " has requires_grad = false");
    p->zero_grad();
  }
  // Analytic gradients from one forward + backward.
  {
    Tape<double> tape;
    const NodeId l = build_loss(tape);
    if (tape.value(l).numel() != 1)
      throw std::invalid_argument("grad_check: loss must be a scalar, has shape " +
                                  tape.shape(l).str());
    tape.backward(l);
    // A build_loss that runs on a CUDA tape (parameters_to_device inside it) leaves the analytic
    // gradients on the device: bring them to Parameter::grad.
    if (tape.device() == Device::CUDA)
      for (Parameter<double>* p : params)
        if (p->device_grad) device_download(p->grad.data(), p->device_grad, p->numel());
  }
  GradCheckResult r;
  double worst_ratio = -1;
  Tape<double> tape;
  for (Parameter<double>* p : params) {
    for (int64_t i = 0; i < p->numel(); ++i) {
      const double v = p->value[size_t(i)];
      p->value[size_t(i)] = v + eps;
      const double lp = eval_loss(build_loss, tape);
      p->value[size_t(i)] = v - eps;
      const double lm = eval_loss(build_loss, tape);
      p->value[size_t(i)] = v;
      const double num = (lp - lm) / (2 * eps);
      const double ana = p->grad[size_t(i)];
      const double err = std::abs(ana - num);
      const double scale = std::max(std::abs(ana), std::abs(num));
      const double tol = atol + rtol * scale;
      const bool pass = err <= tol;  // false for NaN
      ++r.checked;
      if (!pass) r.ok = false;
      if (std::isnan(err) || err > r.max_abs_err) r.max_abs_err = std::isnan(err) ? NAN : err;
      if (scale > 0 && err / scale > r.max_rel_err) r.max_rel_err = err / scale;
      const double ratio = std::isnan(err) ? INFINITY : err / tol;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        char buf[160];
        std::snprintf(buf, sizeof buf, "[%lld]: analytic %.10g vs numeric %.10g",
                      static_cast<long long>(i), ana, num);
        r.worst = p->name + buf;
      }
    }
  }
  return r;
}

}  // namespace lcm
