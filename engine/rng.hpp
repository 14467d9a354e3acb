// Seeded, counter-based random numbers (splitmix64 of seed and counter), so that a CUDA kernel
// can draw the same stream from (seed, offset) without sequential state. Passed explicitly.
#pragma once
#include <cmath>
#include <cstdint>

namespace lcm {

/// splitmix64 finaliser: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform float in [0, 1) for element `index` of the stream (seed, offset).
inline float counter_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  uint64_t r = mix64(mix64(seed) ^ (offset + index));
  return float(r >> 40) * (1.0f / 16777216.0f);
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

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

}  // namespace lcm
