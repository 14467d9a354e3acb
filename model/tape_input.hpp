// Constant input leaves made from host values, for the model's forwards (model/cost_model*.cpp,
// model/autoencoder.cpp). Internal to model/.
#pragma once

#include <vector>

#include "engine/tape.hpp"

namespace lcm::model {

/// A constant leaf of `shape` filled by fill(T* out) on the host: written in place on a CPU tape,
/// filled in a host buffer and copied to the device once on a CUDA tape.
template <class T, class F>
NodeId make_input(Tape<T>& t, Shape shape, F fill) {
  if (t.device() != Device::CPU) {
    std::vector<T> host(size_t(shape.numel()));
    fill(host.data());
    return t.constant(host.data(), shape);
  }
  const NodeId id = t.new_node(shape, "input");
  fill(t.value(id).data);
  return id;
}

/// A constant leaf of `shape` holding the floats src[0, shape.numel()) converted to T.
template <class T>
NodeId input_from(Tape<T>& t, Shape shape, const float* src) {
  return make_input(t, shape, [&](T* o) {
    for (int64_t i = 0; i < shape.numel(); ++i) o[i] = T(src[i]);
  });
}

}  // namespace lcm::model
