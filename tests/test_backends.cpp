// Every op on every available backend from one list (docs/design.md "Tests"): the CPU is the
// oracle; on a CUDA device each op's values and gradients must match it within stated tolerances,
// and the double-precision finite-difference gradient check must pass there too. Without a GPU the
// CUDA half reports "skipped: <reason>"; the CPU half and the device-error checks run everywhere.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device.hpp"
#include "engine/device_memory.hpp"
#include "engine/gradcheck.hpp"
#include "engine/lstm.hpp"
#include "engine/ops.hpp"
#include "engine/ops/elementwise_math.hpp"
#include "engine/ops/loss_math.hpp"
#include "engine/optim.hpp"
#include "engine/tape.hpp"
#include "support/test_support.hpp"
#ifdef LCM_WITH_CUDA
#include "kernels/cuda_device.hpp"
#include "kernels/cuda_ops.hpp"
#endif

using lcm::test::contains;
using lcm::test::error_of;
using namespace lcm;

namespace {

/// Number of visible CUDA devices, and why there is none (for the skip message).
int cuda_devices(std::string* why) {
#ifdef LCM_WITH_CUDA
  return cuda::device_count(why);
#else
  *why = "this build has no CUDA kernels (nvcc not found or -DLCM_CUDA=OFF)";
  return 0;
#endif
}

/// The backends this run can test: the CPU always, cuda:0 when a device is visible.
std::vector<DeviceSpec> available_backends() {
  std::vector<DeviceSpec> out{DeviceSpec{Device::CPU, 0}};
  std::string why;
  if (cuda_devices(&why) > 0) out.push_back(DeviceSpec{Device::CUDA, 0});
  return out;
}

/// Prints "skipped: <reason>" once per test case when no CUDA device can be tested.
bool report_cuda_skip(const char* what) {
  std::string why;
  if (cuda_devices(&why) > 0) return false;
  MESSAGE("skipped: " << std::string(what) << " on CUDA: no CUDA device (" << why << ")");
  return true;
}

/// One op under test: parameter shapes (values uniform in [-1.5, 1.5), or magnitude in
/// [0.2, 1.5) with a random sign when away_from_zero), and a builder written once as a generic
/// lambda so that the same code runs for float and double, on any tape.
struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  bool away_from_zero = false;
  std::function<NodeId(Tape<double>&, const std::vector<NodeId>&)> build_d;
  std::function<NodeId(Tape<float>&, const std::vector<NodeId>&)> build_f;
};

template <class F>
OpCase op_case(std::string name, std::vector<Shape> shapes, F f, bool away_from_zero = false) {
  return OpCase{std::move(name), std::move(shapes), away_from_zero, f, f};
}

template <class T>
struct Builder;
template <>
struct Builder<double> {
  static const std::function<NodeId(Tape<double>&, const std::vector<NodeId>&)>& of(
      const OpCase& c) {
    return c.build_d;
  }
};
template <>
struct Builder<float> {
  static const std::function<NodeId(Tape<float>&, const std::vector<NodeId>&)>& of(
      const OpCase& c) {
    return c.build_f;
  }
};

/// The op case of unary kind `k` (ops::scale, elu, leaky_relu, sigmoid, tanh). Every kind has a
/// case (no default: -Wswitch names a missing one); Count, not a kind, throws.
OpCase unary_case(ops::Unary k) {
  switch (k) {
    case ops::Unary::Scale:
      return op_case("scale", {Shape{3, 4}}, [](auto& t, const std::vector<NodeId>& p) {
        using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
        return ops::scale(t, p[0], T(-2.5));
      });
    case ops::Unary::Elu:
      return op_case(
          "elu", {Shape{4, 5}},
          [](auto& t, const std::vector<NodeId>& p) { return ops::elu(t, p[0]); }, true);
    case ops::Unary::LeakyRelu:
      return op_case(
          "leaky_relu", {Shape{4, 5}},
          [](auto& t, const std::vector<NodeId>& p) { return ops::leaky_relu(t, p[0]); }, true);
    case ops::Unary::Sigmoid:
      return op_case("sigmoid", {Shape{4, 5}},
                     [](auto& t, const std::vector<NodeId>& p) { return ops::sigmoid(t, p[0]); });
    case ops::Unary::Tanh:
      return op_case("tanh", {Shape{4, 5}},
                     [](auto& t, const std::vector<NodeId>& p) { return ops::tanh(t, p[0]); });
    case ops::Unary::Count:
      break;
  }
  throw std::logic_error("no op case for unary kind " + std::to_string(int(k)));
}

/// The op case of a scaled loss over [7]: `loss(t, y, target, T(scale))` with target = the second
/// parameter + `shift` (the parameters are away from zero: no kink or pole of the loss near the
/// finite-difference steps).
template <class F>
OpCase shifted_target_case(std::string name, double shift, double scale, F loss) {
  return op_case(
      std::move(name), {Shape{7}, Shape{7}},
      [shift, scale, loss](auto& t, const std::vector<NodeId>& p) {
        using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
        const NodeId target = ops::add(t, p[1], t.full(Shape{7}, T(shift)));
        return loss(t, p[0], target, T(scale));
      },
      true);
}

/// The op case of reduction kind `k` (ops::sum, mse, mape, l1, huber), as unary_case.
OpCase loss_case(ops::LossKind k) {
  switch (k) {
    case ops::LossKind::Sum:
      return op_case("sum", {Shape{3, 4}},
                     [](auto& t, const std::vector<NodeId>& p) { return ops::sum(t, p[0]); });
    case ops::LossKind::SquaredError:
      return op_case("mse", {Shape{7}, Shape{7}},
                     [](auto& t, const std::vector<NodeId>& p) { return ops::mse(t, p[0], p[1]); });
    case ops::LossKind::Mape:
      return shifted_target_case("mape (target shifted positive)", 3, 0.75,
                                 [](auto& t, NodeId y, NodeId target, auto scale) {
                                   return ops::mape(t, y, target, scale);
                                 });
    case ops::LossKind::AbsError:
      return shifted_target_case("l1 (target shifted)", 2, 0.6,
                                 [](auto& t, NodeId y, NodeId target, auto scale) {
                                   return ops::l1(t, y, target, scale);
                                 });
    case ops::LossKind::Huber1:
      return op_case("huber", {Shape{7}, Shape{7}}, [](auto& t, const std::vector<NodeId>& p) {
        using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
        return ops::huber(t, ops::scale(t, p[0], T(2)), p[1], T(0.5), T(0.9));
      });
    case ops::LossKind::Count:
      break;
  }
  throw std::logic_error("no op case for reduction kind " + std::to_string(int(k)));
}

/// The one list: every op of engine/ops.hpp and the fused LSTM.
std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> cs;
  cs.push_back(op_case(
      "linear+bias", {Shape{5, 4}, Shape{3, 4}, Shape{3}},
      [](auto& t, const std::vector<NodeId>& p) { return ops::linear(t, p[0], p[1], p[2]); }));
  cs.push_back(op_case(
      "linear_elu+bias", {Shape{5, 4}, Shape{3, 4}, Shape{3}},
      [](auto& t, const std::vector<NodeId>& p) { return ops::linear_elu(t, p[0], p[1], p[2]); }));
  cs.push_back(
      op_case("linear rank 3, no bias", {Shape{2, 3, 4}, Shape{3, 4}},
              [](auto& t, const std::vector<NodeId>& p) { return ops::linear(t, p[0], p[1]); }));
  cs.push_back(
      op_case("add", {Shape{3, 4}, Shape{3, 4}},
              [](auto& t, const std::vector<NodeId>& p) { return ops::add(t, p[0], p[1]); }));
  cs.push_back(
      op_case("mul", {Shape{3, 4}, Shape{3, 4}},
              [](auto& t, const std::vector<NodeId>& p) { return ops::mul(t, p[0], p[1]); }));
  cs.push_back(op_case("mul same node", {Shape{3, 4}}, [](auto& t, const std::vector<NodeId>& p) {
    return ops::mul(t, p[0], p[0]);
  }));
  // every unary kind, enumerated: a kind added to ops::Unary without a case is tested as an
  // error (unary_case)
  for (int k = 0; k < int(ops::Unary::Count); ++k) cs.push_back(unary_case(ops::Unary(k)));
  cs.push_back(op_case("dropout p=0.3", {Shape{6, 7}}, [](auto& t, const std::vector<NodeId>& p) {
    Rng rng(99);  // re-created per build: the same counter-based mask on every backend
    return ops::dropout(t, p[0], 0.3, rng);
  }));
  cs.push_back(op_case("reshape", {Shape{3, 4}}, [](auto& t, const std::vector<NodeId>& p) {
    return ops::reshape(t, p[0], Shape{2, 6});
  }));
  cs.push_back(op_case("concat dim 0", {Shape{2, 3}, Shape{1, 3}},
                       [](auto& t, const std::vector<NodeId>& p) {
                         return ops::concat(t, {p[0], p[1]}, 0);
                       }));
  cs.push_back(op_case("concat dim -1 (rank 3)", {Shape{2, 2, 3}, Shape{2, 2, 1}, Shape{2, 2, 2}},
                       [](auto& t, const std::vector<NodeId>& p) {
                         return ops::concat(t, {p[0], p[1], p[2]}, -1);
                       }));
  cs.push_back(op_case("slice dim 1", {Shape{3, 5, 2}}, [](auto& t, const std::vector<NodeId>& p) {
    return ops::slice(t, p[0], 1, 1, 3);
  }));
  cs.push_back(
      op_case("index_select repeated", {Shape{4, 3}}, [](auto& t, const std::vector<NodeId>& p) {
        return ops::index_select(t, p[0], 0, {2, 0, 2, 3, 2});
      }));
  cs.push_back(
      op_case("index_select dim 1", {Shape{2, 4, 3}}, [](auto& t, const std::vector<NodeId>& p) {
        return ops::index_select(t, p[0], 1, {3, 3, 1});
      }));
  cs.push_back(
      op_case("select_columns repeated", {Shape{3, 5}}, [](auto& t, const std::vector<NodeId>& p) {
        return ops::select_columns(t, p[0], {4, 0, 4, 2});
      }));
  cs.push_back(op_case(
      "gather_rows two sources, repeated rows", {Shape{3, 2}, Shape{2, 2}},
      [](auto& t, const std::vector<NodeId>& p) {
        return ops::gather_rows(t, {p[0], p[1]}, 2, {1, 0, 0, 1, 0}, {1, 2, 2, 0, 0}, Shape{5, 2});
      }));
  cs.push_back(
      op_case("gather_rows rank-3 source, unused source", {Shape{2, 3, 2}, Shape{1, 2}},
              [](auto& t, const std::vector<NodeId>& p) {
                return ops::gather_rows(t, {p[0], p[1]}, 2, {0, 0, 0}, {5, 1, 1}, Shape{1, 3, 2});
              }));
  cs.push_back(
      op_case("stack dim 1", {Shape{2, 3}, Shape{2, 3}}, [](auto& t, const std::vector<NodeId>& p) {
        return ops::stack(t, {p[0], p[1]}, 1);
      }));
  cs.push_back(op_case("broadcast_rows", {Shape{1, 4}}, [](auto& t, const std::vector<NodeId>& p) {
    return ops::broadcast_rows(t, p[0], 5);
  }));
  // every reduction kind, enumerated (loss_case): sum, mse, mape, l1 (its target shifted
  // positive: |pred − target| ≥ ~0.5, away from the kink) and huber on both sides of δ (C¹ at the
  // kink: finite differences hold there too)
  for (int k = 0; k < int(ops::LossKind::Count); ++k) cs.push_back(loss_case(ops::LossKind(k)));
  cs.push_back(op_case("mean", {Shape{3, 4}},
                       [](auto& t, const std::vector<NodeId>& p) { return ops::mean(t, p[0]); }));
  // ranking losses (engine/ops/rank_loss.cpp): pairwise logistic over three groups with a tie
  // (not a pair) and a gap.
  cs.push_back(op_case("pairwise_logistic", {Shape{9}}, [](auto& t, const std::vector<NodeId>& p) {
    using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
    const std::vector<T> target{T(0.3), T(-1.0), T(0.3),  T(2.0), T(0.5),
                                T(1.0), T(-0.5), T(0.25), T(1.5)};
    const std::vector<int32_t> group{4, 4, 4, 1, 1, 7, 7, 7, 7};
    return ops::pairwise_logistic(t, ops::scale(t, p[0], T(2)), target, group, T(0.8));
  }));
  cs.push_back(op_case("pairwise_logistic min_gap, no pair in a group", {Shape{6}},
                       [](auto& t, const std::vector<NodeId>& p) {
                         using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
                         const std::vector<T> target{T(1.0), T(1.1), T(0.0),
                                                     T(3.0), T(2.0), T(2.05)};
                         const std::vector<int32_t> group{0, 0, 0, 1, 2, 2};
                         return ops::pairwise_logistic(t, p[0], target, group, T(1.3), T(0.5));
                       }));
  // LambdaRank over two groups and a singleton, ListNet over groups of 3, 2, 4 and a singleton.
  cs.push_back(op_case("lambdarank", {Shape{8}}, [](auto& t, const std::vector<NodeId>& p) {
    using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
    const std::vector<T> gain{T(2.0), T(0.5), T(1.2), T(3.0), T(0.8), T(4.0), T(1.0), T(2.5)};
    std::vector<T> target;
    for (T g : gain) target.push_back(std::log(g));
    const std::vector<int32_t> group{3, 3, 3, 3, 9, 5, 5, 5};
    return ops::lambdarank(t, ops::scale(t, p[0], T(2)), target, gain, group, T(0.7));
  }));
  cs.push_back(op_case("listnet", {Shape{10}}, [](auto& t, const std::vector<NodeId>& p) {
    using T = std::remove_reference_t<decltype(t.value(0).data[0])>;
    const std::vector<T> target{T(0.3), T(-1.0), T(0.7),  T(2.0), T(0.5),
                                T(1.0), T(-0.5), T(0.25), T(1.5), T(0.1)};
    const std::vector<int32_t> group{4, 4, 4, 1, 1, 7, 7, 7, 7, 2};
    return ops::listnet(t, ops::scale(t, p[0], T(2)), target, group, T(0.8));
  }));
  // LSTM: x [B=3, T=4, In=3], H = 2; uni- and bidirectional (weights: w_ih, w_hh, b_ih, b_hh).
  cs.push_back(op_case(
      "lstm unidirectional", {Shape{3, 4, 3}, Shape{8, 3}, Shape{8, 2}, Shape{8}, Shape{8}},
      [](auto& t, const std::vector<NodeId>& p) {
        LstmOutputs o =
            ops::lstm(t, p[0], LstmSpec{3, 2, 1, false}, {LstmWeights{p[1], p[2], p[3], p[4]}});
        return ops::concat(t,
                           {ops::reshape(t, o.output, Shape{24}), ops::reshape(t, o.h_n, Shape{6}),
                            ops::reshape(t, o.c_n, Shape{6})},
                           0);
      }));
  cs.push_back(op_case(
      "lstm 2-layer bidirectional",
      {Shape{2, 3, 3}, Shape{8, 3}, Shape{8, 2}, Shape{8}, Shape{8}, Shape{8, 3}, Shape{8, 2},
       Shape{8}, Shape{8}, Shape{8, 4}, Shape{8, 2}, Shape{8}, Shape{8}, Shape{8, 4}, Shape{8, 2},
       Shape{8}, Shape{8}},
      [](auto& t, const std::vector<NodeId>& p) {
        std::vector<LstmWeights> w;
        for (int k = 0; k < 4; ++k)
          w.push_back(LstmWeights{p[1 + 4 * k], p[2 + 4 * k], p[3 + 4 * k], p[4 + 4 * k]});
        LstmOutputs o = ops::lstm(t, p[0], LstmSpec{3, 2, 2, true}, w);
        return ops::concat(
            t, {ops::reshape(t, o.output, Shape{24}), ops::reshape(t, o.c_n, Shape{16})}, 0);
      }));
  return cs;
}

/// Parameters p0, p1, ... of a case, filled from Rng(seed).
template <class T>
void fill_store(ParameterStore<T>& store, const OpCase& c, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Parameter<T>& p = store.add("p" + std::to_string(i), c.shapes[i]);
    for (T& v : p.value) {
      if (c.away_from_zero) {
        const double mag = rng.uniform(0.2, 1.5);
        v = T(rng.next_double() < 0.5 ? -mag : mag);
      } else {
        v = T(rng.uniform(-1.5, 1.5));
      }
    }
  }
}

/// Values of the op's output, the scalarised loss and every parameter gradient on one backend.
template <class T>
struct RunResult {
  std::vector<T> out;
  T loss = 0;
  std::vector<std::vector<T>> grads;
};

template <class T>
RunResult<T> run_case(const OpCase& c, const DeviceSpec& dev, uint64_t seed) {
  ParameterStore<T> store;
  fill_store(store, c, seed);
  Tape<T> t;
  if (dev.kind == Device::CUDA) {
    parameters_to_device(store, dev.index);
    t.set_device(Device::CUDA, dev.index);
  }
  std::vector<NodeId> p;
  for (auto& par : store.all()) p.push_back(t.param(par));
  const NodeId y = Builder<T>::of(c)(t, p);
  const NodeId loss = weighted_sum(t, y, seed + 7);
  t.backward(loss);
  RunResult<T> r;
  r.out = to_host(t.value(y));
  r.loss = to_host(t.value(loss))[0];
  if (dev.kind == Device::CUDA) parameters_to_host(store, /*grads=*/true);
  for (auto& par : store.all()) r.grads.push_back(par.grad);
  return r;
}

/// |a − b| ≤ atol + rtol·max(|a|, |b|) for every element; reports the first failure.
template <class T>
void expect_close(const std::vector<T>& a, const std::vector<T>& b, double rtol, double atol,
                  const std::string& what) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    const bool ok = std::abs(x - y) <= atol + rtol * std::max(std::abs(x), std::abs(y));
    if (!ok) {
      FAIL_CHECK(what << "[" << i << "]: cuda " << x << " vs cpu " << y);
      return;
    }
  }
  CHECK(true);
}

/// Op case `c` run in T (parameters from `seed`) on cuda:0 and on the CPU: values and the loss
/// equal within atol + rtol·scale, gradients within grad_atol + rtol·scale (expect_close).
template <class T>
void expect_cuda_equals_cpu(const OpCase& c, uint64_t seed, double rtol, double atol,
                            double grad_atol, const std::string& type) {
  const DeviceSpec cpu{Device::CPU, 0}, gpu{Device::CUDA, 0};
  auto a = run_case<T>(c, gpu, seed), b = run_case<T>(c, cpu, seed);
  expect_close(a.out, b.out, rtol, atol, type + " value");
  expect_close(std::vector<T>{a.loss}, std::vector<T>{b.loss}, rtol, atol, type + " loss");
  for (size_t i = 0; i < a.grads.size(); ++i)
    expect_close(a.grads[i], b.grads[i], rtol, grad_atol, type + " grad");
}

}  // namespace

TEST_CASE("backend list: the CPU is always there; CUDA only with a device") {
  auto b = available_backends();
  REQUIRE(!b.empty());
  CHECK(b[0].kind == Device::CPU);
  std::string why;
  CHECK(int(b.size()) == 1 + (cuda_devices(&why) > 0 ? 1 : 0));
}

TEST_CASE("every op, every backend: finite-difference gradient check in double") {
  const auto cases = all_op_cases();
  for (const DeviceSpec& dev : available_backends()) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const OpCase& c = cases[k];
      INFO(dev.str() << " " << c.name);
      ParameterStore<double> store;
      fill_store(store, c, 1000 + k);
      std::vector<Parameter<double>*> ps;
      for (auto& p : store.all()) ps.push_back(&p);
      GradCheckResult r = grad_check(ps, [&](Tape<double>& t) {
        if (dev.kind == Device::CUDA) {
          parameters_to_device(store, dev.index);  // the perturbed host values
          t.set_device(Device::CUDA, dev.index);
        }
        std::vector<NodeId> p;
        for (auto& par : store.all()) p.push_back(t.param(par));
        return weighted_sum(t, c.build_d(t, p), 2000 + k);
      });
      INFO("worst: " << r.worst << " max_abs_err " << r.max_abs_err);
      CHECK(r.checked > 0);
      CHECK(r.ok);
    }
  }
  report_cuda_skip("gradient checks");
}

TEST_CASE("every op: CUDA values and gradients match the CPU (double 1e-10, float 2e-5 relative)") {
  if (report_cuda_skip("CPU-vs-CUDA comparison")) return;
  const auto cases = all_op_cases();
  for (size_t k = 0; k < cases.size(); ++k) {
    const OpCase& c = cases[k];
    INFO(c.name);
    expect_cuda_equals_cpu<double>(c, 3000 + k, 1e-10, 1e-12, 1e-12, "double");
    expect_cuda_equals_cpu<float>(c, 3000 + k, 2e-5, 1e-6, 1e-5, "float");
  }
}

TEST_CASE("CUDA: dropout draws the CPU's mask; reductions are bit-identical run after run") {
  if (report_cuda_skip("dropout mask / determinism")) return;
  std::vector<float> x(10000);
  Rng init(5);
  for (float& v : x) v = float(init.uniform(0.5, 1.5));
  auto run = [&](Device d) {
    Tape<float> t;
    if (d == Device::CUDA) t.set_device(Device::CUDA, 0);
    Rng rng(42);
    NodeId y = ops::dropout(t, t.constant(x.data(), Shape{10000}), 0.4, rng);
    NodeId s = ops::sum(t, y);
    return std::make_pair(to_host(t.value(y)), to_host(t.value(s))[0]);
  };
  auto cpu = run(Device::CPU);
  auto gpu1 = run(Device::CUDA), gpu2 = run(Device::CUDA);
  int64_t same_zero = 0;
  for (size_t i = 0; i < x.size(); ++i)
    same_zero += (cpu.first[i] == 0.0f) == (gpu1.first[i] == 0.0f);
  CHECK(same_zero == int64_t(x.size()));  // the same mask, element for element
  CHECK(gpu1.second == gpu2.second);      // bit-identical sum (no atomics)
  CHECK(std::abs(gpu1.second - cpu.second) <= 1e-5 * std::abs(cpu.second));
}

TEST_CASE("CUDA: AdamW on the device follows the CPU AdamW for 5 steps") {
  if (report_cuda_skip("AdamW kernel")) return;
  auto make = [](ParameterStore<float>& s) {
    Rng rng(8);
    for (int k = 0; k < 3; ++k) {
      Parameter<float>& p = s.add("w" + std::to_string(k), Shape{int64_t(1000 + 3000 * k)});
      for (float& v : p.value) v = float(rng.uniform(-1, 1));
    }
  };
  ParameterStore<float> cpu, gpu;
  make(cpu);
  make(gpu);
  parameters_to_device(gpu, 0);
  AdamOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.015;
  AdamW<float> a(parameter_pointers(cpu), o), b(parameter_pointers(gpu), o);
  for (int step = 0; step < 5; ++step) {
    Rng g(100 + step);
    for (size_t k = 0; k < cpu.size(); ++k) {
      auto& pc = cpu.all()[k];
      auto& pg = gpu.all()[k];
      for (auto& v : pc.grad) v = float(g.uniform(-1, 1));
      device_upload(pg.device_grad, pc.grad.data(), pc.numel());
    }
    a.step();
    b.step();
  }
  parameters_to_host(gpu);
  for (size_t k = 0; k < cpu.size(); ++k)
    expect_close(gpu.all()[k].value, cpu.all()[k].value, 1e-6, 1e-7, "AdamW value");
  expect_close(b.exp_avg(2), a.exp_avg(2), 1e-6, 1e-9, "AdamW exp_avg");
}

TEST_CASE(
    "CUDA: pairwise_logistic over many pairs (several reduction blocks) and without pairs matches "
    "the CPU") {
  if (report_cuda_skip("pairwise_logistic at scale")) return;
  // 300 scores in 3 programs of 100 schedules: ~14850 pairs, more than one 4096-pair block.
  const int64_t n = 300;
  Rng rng(21);
  std::vector<float> score(static_cast<size_t>(n)), target(static_cast<size_t>(n));
  std::vector<int32_t> group(static_cast<size_t>(n)), singles(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    score[size_t(i)] = float(rng.uniform(-2, 2));
    target[size_t(i)] = float(std::round(rng.uniform(-3, 3) * 8) / 8);  // ties: not pairs
    group[size_t(i)] = int32_t(i % 3);
    singles[size_t(i)] = int32_t(i);  // one schedule per program: no pair at all
  }
  struct Out {
    float loss;
    std::vector<float> grad;
  };
  auto run = [&](Device d, const std::vector<int32_t>& g) {
    ParameterStore<float> s;
    Parameter<float>& p = s.add("score", Shape{n});
    p.value = score;
    Tape<float> t;
    if (d == Device::CUDA) {
      parameters_to_device(s, 0);
      t.set_device(Device::CUDA, 0);
    }
    const NodeId l = ops::pairwise_logistic(t, ops::tanh(t, t.param(p)), target, g, 0.9f);
    t.backward(l);
    if (d == Device::CUDA) parameters_to_host(s, /*grads=*/true);
    return Out{to_host(t.value(l))[0], p.grad};
  };
  const Out cpu = run(Device::CPU, group), gpu = run(Device::CUDA, group),
            gpu2 = run(Device::CUDA, group);
  CHECK(cpu.loss > 0.1f);
  expect_close(std::vector<float>{gpu.loss}, std::vector<float>{cpu.loss}, 1e-6, 1e-7,
               "pairwise loss");
  expect_close(gpu.grad, cpu.grad, 1e-5, 1e-8, "pairwise grad");
  CHECK(gpu.loss == gpu2.loss);  // deterministic: the same bits run after run (no atomics)
  CHECK(gpu.grad == gpu2.grad);
  const Out none_cpu = run(Device::CPU, singles), none_gpu = run(Device::CUDA, singles);
  CHECK(none_cpu.loss == 0.0f);
  CHECK(none_gpu.loss == 0.0f);
  for (float g : none_gpu.grad) CHECK(g == 0.0f);
}

TEST_CASE(
    "CUDA: lambdarank over many weighted pairs and listnet over many groups (several blocks) match "
    "the CPU") {
  if (report_cuda_skip("lambdarank and listnet at scale")) return;
  // lambdarank: 300 scores in 3 programs of 100 (~14850 weighted pairs, several 4096-pair
  // blocks); listnet: 1500 programs of 2-5 schedules (more groups than one block of threads).
  const int64_t n = 300, m = 5000;
  Rng rng(23);
  std::vector<float> score(static_cast<size_t>(n)), target(static_cast<size_t>(n)),
      gain(static_cast<size_t>(n)), ls(static_cast<size_t>(m)), lt(static_cast<size_t>(m));
  std::vector<int32_t> group(static_cast<size_t>(n)), lg(static_cast<size_t>(m));
  for (int64_t i = 0; i < n; ++i) {
    score[size_t(i)] = float(rng.uniform(-2, 2));
    target[size_t(i)] = float(std::round(rng.uniform(-3, 3) * 8) / 8);
    gain[size_t(i)] = std::exp(target[size_t(i)]);
    group[size_t(i)] = int32_t(i % 3);
  }
  int32_t g = 0;
  for (int64_t i = 0; i < m;) {
    const int64_t len = 2 + int64_t(rng.uniform(0, 4));
    for (int64_t k = 0; k < len && i < m; ++k, ++i) {
      ls[size_t(i)] = float(rng.uniform(-2, 2));
      lt[size_t(i)] = float(rng.uniform(-3, 3));
      lg[size_t(i)] = g;
    }
    ++g;
  }
  struct Out {
    float loss;
    std::vector<float> grad;
  };
  auto run = [&](Device d, bool listwise) {
    ParameterStore<float> s;
    Parameter<float>& p = s.add("score", Shape{listwise ? m : n});
    p.value = listwise ? ls : score;
    Tape<float> t;
    if (d == Device::CUDA) {
      parameters_to_device(s, 0);
      t.set_device(Device::CUDA, 0);
    }
    const NodeId x = ops::tanh(t, t.param(p));
    const NodeId l = listwise ? ops::listnet(t, x, lt, lg, 0.9f)
                              : ops::lambdarank(t, x, target, gain, group, 0.9f);
    t.backward(l);
    if (d == Device::CUDA) parameters_to_host(s, /*grads=*/true);
    return Out{to_host(t.value(l))[0], p.grad};
  };
  for (bool listwise : {false, true}) {
    INFO(std::string(listwise ? "listnet" : "lambdarank"));
    const Out cpu = run(Device::CPU, listwise), gpu = run(Device::CUDA, listwise),
              gpu2 = run(Device::CUDA, listwise);
    CHECK(cpu.loss > 0.0f);
    expect_close(std::vector<float>{gpu.loss}, std::vector<float>{cpu.loss}, 1e-6, 1e-7, "loss");
    expect_close(gpu.grad, cpu.grad, 1e-5, 1e-8, "grad");
    CHECK(gpu.loss == gpu2.loss);  // deterministic: no atomics
    CHECK(gpu.grad == gpu2.grad);
  }
}

TEST_CASE(
    "CUDA: bias and broadcast gradients over many rows (several column-sum chunks) match the CPU") {
  if (report_cuda_skip("column sums at scale")) return;
  // Row counts around the 512-row chunk of cuda::column_sums_add, and beyond 256 chunks (then
  // longer chunks); 37 columns: a partial 32-column tile.
  const int64_t cols = 37, in = 3;
  for (int64_t rows :
       {int64_t(1), int64_t(511), int64_t(512), int64_t(513), int64_t(1030), int64_t(140000)}) {
    INFO("rows = " << rows);
    Rng rng(uint64_t(40 + rows));
    std::vector<float> x(static_cast<size_t>(rows * in)), weight(static_cast<size_t>(rows * cols)),
        w(static_cast<size_t>(cols * in)), bias(static_cast<size_t>(cols));
    for (float& v : x) v = float(rng.uniform(-1, 1));
    for (float& v : weight) v = float(rng.uniform(0.5, 1.5));
    for (float& v : w) v = float(rng.uniform(-1, 1));
    for (float& v : bias) v = float(rng.uniform(-1, 1));
    // loss = Σ weight ⊙ (linear(x) + broadcast(v)): d bias = d v = Σ_rows weight (column sums)
    auto run = [&](Device d) {
      ParameterStore<float> s;
      s.add("w", Shape{cols, in}).value = w;
      s.add("b", Shape{cols}).value = bias;
      s.add("v", Shape{1, cols}).value = bias;
      Tape<float> t;
      if (d == Device::CUDA) {
        parameters_to_device(s, 0);
        t.set_device(Device::CUDA, 0);
      }
      const NodeId y = ops::linear(t, t.constant(x.data(), Shape{rows, in}), t.param(s.at("w")),
                                   t.param(s.at("b")));
      const NodeId z = ops::add(t, y, ops::broadcast_rows(t, t.param(s.at("v")), rows));
      t.backward(ops::sum(t, ops::mul(t, z, t.constant(weight.data(), Shape{rows, cols}))));
      if (d == Device::CUDA) parameters_to_host(s, /*grads=*/true);
      return std::make_pair(s.at("b").grad, s.at("v").grad);
    };
    const auto cpu = run(Device::CPU), gpu = run(Device::CUDA), gpu2 = run(Device::CUDA);
    std::vector<float> exact(static_cast<size_t>(cols));  // in double, row order
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < rows; ++r) acc += double(weight[size_t(r * cols + c)]);
      exact[size_t(c)] = float(acc);
    }
    expect_close(gpu.first, exact, 1e-5, 1e-6, "bias grad vs double sum");
    expect_close(gpu.second, exact, 1e-5, 1e-6, "broadcast grad vs double sum");
    expect_close(gpu.first, cpu.first, 1e-4, 1e-6, "bias grad vs CPU (its float sum in row order)");
    CHECK(gpu.first == gpu2.first);  // deterministic: the same bits run after run (no atomics)
    CHECK(gpu.second == gpu2.second);
  }
}

#ifdef LCM_WITH_CUDA
TEST_CASE(
    "CUDA: the fused LSTM recurrence (one launch for all steps) matches the per-step path and the "
    "CPU") {
  if (report_cuda_skip("fused LSTM recurrence")) return;
  struct Case {
    const char* name;
    int64_t B, S;
    LstmSpec spec;
  };
  // rows per block 1 (B ≤ 132), 4 (B = 300) and 16 (B = 2100: blocks with a partial last block);
  // the expression LSTM's shape (11 → 100, 66 steps); 2-layer bidirectional (reverse direction,
  // a layer reading the one below)
  const std::vector<Case> cases{
      {"small", 3, 5, LstmSpec{4, 6, 1, false}},
      {"2-layer bidirectional", 5, 4, LstmSpec{3, 7, 2, true}},
      {"B = 300 bidirectional", 300, 3, LstmSpec{5, 8, 1, true}},
      {"B = 2100", 2100, 3, LstmSpec{4, 12, 1, false}},
      {"expression LSTM 11 -> 100, 66 steps", 40, 66, LstmSpec{11, 100, 1, false}}};
  for (const Case& c : cases) {
    INFO(std::string(c.name));
    const int64_t DH = c.spec.directions() * c.spec.hidden_size,
                  LD = c.spec.num_layers * c.spec.directions();
    const int64_t n_out = c.B * c.S * DH, n_state = LD * c.B * c.spec.hidden_size;
    Rng rng(uint64_t(70 + c.B));
    std::vector<double> x(static_cast<size_t>(c.B * c.S * c.spec.input_size)),
        r_out(static_cast<size_t>(n_out)), r_h(static_cast<size_t>(n_state)),
        r_c(static_cast<size_t>(n_state));
    for (double& v : x) v = rng.uniform(-1, 1);
    for (auto* r : {&r_out, &r_h, &r_c})
      for (double& v : *r) v = rng.uniform(-1, 1);
    struct Out {
      std::vector<double> out, h, cn;
      std::vector<std::vector<double>> grads;
    };
    // one run in T on device d (fused recurrence on or off), every value as double
    auto run = [&](auto zero, Device d, bool fused) {
      using T = decltype(zero);
      auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
      auto back = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
      cuda::set_lstm_fused_recurrence(fused);
      ParameterStore<T> s;
      Rng init(9);
      add_lstm_parameters(s, "lstm", c.spec, &init);
      s.add("x", Shape{c.B, c.S, c.spec.input_size}).value = cast(x);
      Tape<T> t;
      if (d == Device::CUDA) {
        parameters_to_device(s, 0);
        t.set_device(Device::CUDA, 0);
      }
      const std::vector<T> ro = cast(r_out), rh = cast(r_h), rc = cast(r_c);
      const LstmOutputs o =
          ops::lstm(t, t.param(s.at("x")), c.spec, lstm_weight_nodes(t, s, "lstm", c.spec));
      // every output used, with asymmetric weights
      NodeId loss = ops::sum(t, ops::mul(t, o.output, t.constant(ro.data(), Shape{c.B, c.S, DH})));
      loss =
          ops::add(t, loss, ops::sum(t, ops::mul(t, o.h_n, t.constant(rh.data(), t.shape(o.h_n)))));
      loss =
          ops::add(t, loss, ops::sum(t, ops::mul(t, o.c_n, t.constant(rc.data(), t.shape(o.c_n)))));
      t.backward(loss);
      Out r{back(to_host(t.value(o.output))),
            back(to_host(t.value(o.h_n))),
            back(to_host(t.value(o.c_n))),
            {}};
      if (d == Device::CUDA) parameters_to_host(s, /*grads=*/true);
      for (auto& p : s.all()) r.grads.push_back(back(p.grad));
      cuda::set_lstm_fused_recurrence(true);
      return r;
    };
    auto compare = [](const Out& a, const Out& b, double rtol, double atol) {
      expect_close(a.out, b.out, rtol, atol, "output");
      expect_close(a.h, b.h, rtol, atol, "h_n");
      expect_close(a.cn, b.cn, rtol, atol, "c_n");
      REQUIRE(a.grads.size() == b.grads.size());
      for (size_t k = 0; k < a.grads.size(); ++k) {
        INFO("parameter " << k);
        expect_close(a.grads[k], b.grads[k], rtol, atol, "grad");
      }
    };
    const Out ref = run(0.0, Device::CPU, true);  // the CPU in double: the reference
    // float: the fused recurrence and the per-step path both within float rounding of it
    CHECK(cuda::lstm_recurrence_shape<float>(c.B, c.spec.hidden_size).rows_per_block > 0);
    const Out fused = run(0.0f, Device::CUDA, true), per_step = run(0.0f, Device::CUDA, false);
    compare(fused, ref, 1e-4, 2e-5);
    compare(per_step, ref, 1e-4, 2e-5);
    const Out again = run(0.0f, Device::CUDA, true);
    CHECK(again.out == fused.out);  // no atomics: the same bits run after run
    CHECK(again.grads == fused.grads);
    // double, where W_hh fits shared memory in double too: the same function to 1e-10
    if (cuda::lstm_recurrence_shape<double>(c.B, c.spec.hidden_size).rows_per_block > 0)
      compare(run(0.0, Device::CUDA, true), ref, 1e-10, 1e-12);
  }
  // too wide for shared memory (W_hh of the 180-wide LSTMs): the per-step path is chosen
  CHECK(cuda::lstm_recurrence_shape<float>(2048, 180).rows_per_block == 0);
  CHECK(cuda::lstm_recurrence_shape<double>(64, 100).rows_per_block == 0);
}
#endif

TEST_CASE("CUDA: clip_grad_norm on device gradients gives the CPU's norm and clipped gradients") {
  if (report_cuda_skip("gradient clipping")) return;
  // Sizes across the 4096-value chunks of the device reduction; a frozen parameter is ignored.
  auto make = [](ParameterStore<float>& s) {
    Rng rng(31);
    for (int64_t n : {5000, 3, 9000, 17}) {
      Parameter<float>& p = s.add("w" + std::to_string(n), Shape{n});
      p.value.assign(size_t(n), 0.5f);
      for (float& g : p.grad) g = float(rng.uniform(-1, 1));
    }
    s.all()[3].requires_grad = false;
    for (float& g : s.all()[3].grad) g = 1e3f;  // would dominate the norm if it counted
  };
  for (double max_norm : {5.0, 1e6}) {  // clipped (norm ≈ 67) and untouched
    INFO("max_norm " << max_norm);
    ParameterStore<float> cpu, gpu;
    make(cpu);
    make(gpu);
    parameters_to_device(gpu, 0);  // device gradients start at zero: upload the host ones
    for (auto& p : gpu.all()) device_upload(p.device_grad, p.grad.data(), p.numel());
    const double a = clip_grad_norm(parameter_pointers(cpu), max_norm);
    const double b = clip_grad_norm(parameter_pointers(gpu), max_norm);
    CHECK(a > 60.0);
    CHECK(std::abs(a - b) <= 1e-12 * a);  // both in double, different summation order
    parameters_to_host(gpu, /*grads=*/true);
    for (size_t k = 0; k < 3; ++k)
      expect_close(gpu.all()[k].grad, cpu.all()[k].grad, 1e-6, 1e-9, "clipped grad");
    if (max_norm > 1e5) {
      ParameterStore<float> orig;
      make(orig);
      CHECK(gpu.all()[0].grad == orig.all()[0].grad);  // not clipped: unchanged bit for bit
    }
  }
  // Parameters split between the host and a device: refused, nothing scaled.
  ParameterStore<float> on_gpu, on_cpu;
  make(on_gpu);
  make(on_cpu);
  parameters_to_device(on_gpu, 0);
  std::vector<Parameter<float>*> mixed{&on_gpu.all()[0], &on_cpu.all()[0]};
  CHECK(contains(error_of<std::logic_error>([&] { clip_grad_norm(mixed, 1.0); }),
                 "some trainable parameters are on the host"));
}

TEST_CASE("CUDA: the device arena grows on demand, reports its peak and is reused after clear()") {
  if (report_cuda_skip("device arena")) return;
  DeviceArena arena(0, 1 << 10);
  void* a = arena.alloc_bytes(100);
  void* b = arena.alloc_bytes(5000);  // larger than the first chunk: a new chunk
  CHECK(a != b);
  CHECK(arena.live_bytes() == 256 + 5120);
  CHECK(arena.peak_bytes() == 256 + 5120);
  const size_t cap = arena.capacity_bytes();
  arena.reset();
  CHECK(arena.live_bytes() == 0);
  arena.alloc_bytes(100);
  CHECK(arena.capacity_bytes() == cap);  // reused, nothing new reserved
  CHECK(arena.peak_bytes() == 256 + 5120);
  // Out of memory: one line naming the device and the bytes asked for.
  const std::string e =
      error_of<std::runtime_error>([&] { DeviceBuffer huge(0, size_t(1) << 50); });
  CHECK(contains(e, "cuda:0: out of memory allocating 1125899906842624 bytes"));
}

TEST_CASE("without a CUDA device: one clear error naming the device, for tapes and memory") {
  std::string why;
  const int n = cuda_devices(&why);
  // Out of range is an error everywhere (with or without a device).
  const std::string far = error_of<std::runtime_error>([&] {
    Tape<float> t;
    t.set_device(Device::CUDA, n + 3);
  });
  CHECK(contains(far, "cuda:" + std::to_string(n + 3) + ": "));
  if (n > 0) {
    CHECK(contains(far, "out of range"));
    return;
  }
  for (int index : {0, 1}) {
    const std::string dev = "cuda:" + std::to_string(index);
    const std::string e1 = error_of<std::runtime_error>([&] {
      Tape<float> t;
      t.set_device(Device::CUDA, index);
    });
    const std::string e2 = error_of<std::runtime_error>([&] { DeviceBuffer b(index, 1024); });
    const std::string e3 = error_of<std::runtime_error>([&] {
      ParameterStore<float> s;
      s.add("w", Shape{4});
      parameters_to_device(s, index);
    });
    for (const std::string& e : {e1, e2, e3}) {
      INFO(e);
      CHECK(e.rfind(dev + ": ", 0) == 0);
      CHECK(e.find('\n') == std::string::npos);
#ifdef LCM_WITH_CUDA
      CHECK(contains(e, "no CUDA device available"));
#else
      CHECK(contains(e, "no CUDA support"));
#endif
    }
  }
  MESSAGE("checked the no-device errors (" << why << ")");
}
