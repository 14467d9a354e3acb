// Tensor views, shapes and the device tag of the engine. A Tensor never owns memory: values live
// in an Arena (activations) or in a Parameter (weights); ops read and write through views.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace lcm {

/// Where a tensor's memory lives. CUDA arrives with the CUDA backend; the CPU is the oracle.
enum class Device : uint8_t { CPU = 0, CUDA = 1 };

/// A shape of rank 0..4 (contiguous, row-major). Rank 0 is a scalar with numel() == 1.
struct Shape {
  std::array<int64_t, 4> dims{0, 0, 0, 0};
  int rank = 0;

  Shape() = default;
  /// Throws std::invalid_argument for rank > 4 or a negative extent.
  Shape(std::initializer_list<int64_t> d) {
    if (d.size() > 4) throw std::invalid_argument("Shape: rank > 4");
    for (int64_t v : d) {
      if (v < 0) throw std::invalid_argument("Shape: negative extent");
      dims[rank++] = v;
    }
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t operator[](int i) const { return dims.at(i < 0 ? i + rank : i); }
  int64_t& operator[](int i) { return dims.at(i < 0 ? i + rank : i); }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[2, 3, 910]"
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }
  /// Product of the extents from dimension `from` (inclusive) to the end.
  int64_t inner(int from) const {
    int64_t n = 1;
    for (int i = from; i < rank; ++i) n *= dims[i];
    return n;
  }
  /// Product of the extents before dimension `to` (exclusive).
  int64_t outer(int to) const {
    int64_t n = 1;
    for (int i = 0; i < to; ++i) n *= dims[i];
    return n;
  }
};

/// A non-owning, contiguous, row-major view of T (float or double) on a device.
template <class T>
struct Tensor {
  T* data = nullptr;
  Shape shape;
  Device device = Device::CPU;

  int64_t numel() const { return shape.numel(); }
  int64_t size(int d) const { return shape[d]; }
  int rank() const { return shape.rank; }
  T& operator[](int64_t i) const { return data[i]; }
};

}  // namespace lcm
