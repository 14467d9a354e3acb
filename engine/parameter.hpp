// Named trainable parameters and the store that owns them. Values and gradients are owned
// host vectors (stable addresses: the store never moves a Parameter once added).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tensor.hpp"

namespace lcm {

/// A BF16 copy of a parameter's value for inference (engine/bf16.hpp; set by
/// use_bf16_weights). A copy of the parameter does not take it: a copied model may be trained,
/// which would leave the copy stale (its FP32 values, rounded to BF16, are copied as they are).
struct Bf16Copy {
  std::vector<uint16_t> bits;  // empty: none

  Bf16Copy() = default;
  Bf16Copy(const Bf16Copy&) {}
  Bf16Copy& operator=(const Bf16Copy&) {
    bits.clear();
    return *this;
  }
  Bf16Copy(Bf16Copy&&) = default;
  Bf16Copy& operator=(Bf16Copy&&) = default;
};

/// One named tensor of weights with its gradient accumulator (same shape).
/// `requires_grad == false` freezes it: the tape treats it as a constant and optimizers skip it.
template <class T>
struct Parameter {
  std::string name;
  Shape shape;
  std::vector<T> value;
  std::vector<T> grad;
  bool requires_grad = true;
  /// Device copies (engine/device_memory.hpp parameters_to_device): value and gradient on
  /// cuda:device_index, owned by device_storage; nullptr / -1 while the parameter is host-only.
  T* device_value = nullptr;
  T* device_grad = nullptr;
  int device_index = -1;
  std::shared_ptr<void> device_storage;
  /// The value's BF16 bits, read by the one-row products of eval-mode forwards without
  /// gradients on a CPU tape (float only; empty: none).
  Bf16Copy bf16;

  Tensor<T> value_view() { return Tensor<T>{value.data(), shape, Device::CPU}; }
  Tensor<T> grad_view() { return Tensor<T>{grad.data(), shape, Device::CPU}; }
  int64_t numel() const { return shape.numel(); }
  void zero_grad() { std::fill(grad.begin(), grad.end(), T(0)); }
};

/// Owns parameters in insertion order (the order of saving and of optimizer state).
template <class T>
class ParameterStore {
 public:
  /// Adds a zero-initialised parameter. Throws std::invalid_argument on a duplicate name.
  Parameter<T>& add(const std::string& name, Shape shape) {
    if (index_.count(name)) throw std::invalid_argument("ParameterStore: duplicate name " + name);
    params_.emplace_back();
    Parameter<T>& p = params_.back();
    p.name = name;
    p.shape = shape;
    p.value.assign(size_t(shape.numel()), T(0));
    p.grad.assign(size_t(shape.numel()), T(0));
    index_[name] = params_.size() - 1;
    return p;
  }
  /// The parameter called `name`, or nullptr.
  Parameter<T>* find(const std::string& name) {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &params_[it->second];
  }
  const Parameter<T>* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &params_[it->second];
  }
  /// The parameter called `name`; throws std::out_of_range naming it when absent.
  Parameter<T>& at(const std::string& name) {
    Parameter<T>* p = find(name);
    if (!p) throw std::out_of_range("no parameter named " + name);
    return *p;
  }
  std::deque<Parameter<T>>& all() { return params_; }
  const std::deque<Parameter<T>>& all() const { return params_; }
  size_t size() const { return params_.size(); }
  /// Total number of scalar weights.
  int64_t count() const {
    int64_t n = 0;
    for (auto& p : params_) n += p.numel();
    return n;
  }
  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }

 private:
  std::deque<Parameter<T>> params_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace lcm
