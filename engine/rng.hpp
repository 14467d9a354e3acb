// Seeded, counter-based random numbers (splitmix64 of seed and counter), so that a CUDA kernel
// can draw the same stream from (seed, offset) without sequential state. Passed explicitly.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/hd.hpp"

namespace lcm {

/// splitmix64 finaliser: a bijective 64-bit mix. The one definition of the engine's random
/// stream: the CPU ops, the CUDA kernels and their emulation all draw through it.
LCM_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The 24 random bits k ∈ [0, 2^24) of element `index` of the stream (seed, offset), from
/// `seed_mixed` = mix64(seed) (hoisted out of element loops): k = mix64(seed_mixed ^ (offset +
/// index)) >> 40.
LCM_HD inline uint32_t counter_bits24(uint64_t seed_mixed, uint64_t offset, uint64_t index) {
  return uint32_t(mix64(seed_mixed ^ (offset + index)) >> 40);
}

/// Uniform float in [0, 1) for element `index` of the stream (seed, offset): k / 2^24 with k =
/// counter_bits24(mix64(seed), offset, index).
LCM_HD inline float counter_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return float(counter_bits24(mix64(seed), offset, index)) * (1.0f / 16777216.0f);
}

/// Inverted dropout's keep rule, shared by the CPU op, the kernel and the emulation: element i is
/// kept iff counter_uniform(seed, offset, i) ≥ p. The uniform is k / 2^24 for the integer k =
/// counter_bits24, so the test is k ≥ ⌈p·2^24⌉ exactly: dropout_threshold(p) (≤ 2^24; p = 1 keeps
/// nothing) compared in 32 bits, which vectorises.
inline uint32_t dropout_threshold(double p) {
  return uint32_t(std::ceil(p * 16777216.0));
}
/// Whether dropout keeps element `index` (see dropout_threshold; seed_mixed = mix64(seed)).
LCM_HD inline bool dropout_keeps(uint64_t seed_mixed, uint64_t offset, uint64_t index,
                                 uint32_t threshold) {
  return counter_bits24(seed_mixed, offset, index) >= threshold;
}

/// A seeded generator. next_*() advance a counter; take(n) reserves n draws for a kernel that
/// computes counter_uniform(seed(), offset, i) for i < n itself.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }
  uint64_t next_u64() { return mix64(mix64(seed_) ^ counter_++); }
  /// Uniform in [0, 1) with 24 random bits (float) / 53 bits (double).
  float next_float() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }
  double next_double() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * next_double(); }
  /// Uniform integer in [0, n) (n > 0).
  uint64_t below(uint64_t n) { return next_u64() % n; }
  /// Reserves n draws and returns the offset of the first.
  uint64_t take(uint64_t n) {
    uint64_t o = counter_;
    counter_ += n;
    return o;
  }
  /// For a captured device step (a CUDA graph replayed at later steps): kernels that draw from
  /// this generator take their counter base from device memory, `*counter` (a uint64 the caller
  /// writes before each replay), so that each replay draws the stream of its own step. A draw
  /// taken at host offset o then uses offset *counter + (o − device_origin()), where
  /// device_origin() is counter() when this was called. nullptr ends it (the default: offsets are
  /// the host counter's, baked into each launch).
  void set_device_counter(const uint64_t* counter) {
    device_counter_ = counter;
    device_origin_ = counter_;
  }
  const uint64_t* device_counter() const { return device_counter_; }
  uint64_t device_origin() const { return device_origin_; }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
  const uint64_t* device_counter_ = nullptr;  // set_device_counter
  uint64_t device_origin_ = 0;
};

}  // namespace lcm
