// FNV-1a 64 (Fowler–Noll–Vo, http://www.isthe.com/chongo/tech/comp/fnv/): a fast, stable hash of
// bytes, the same in every process and build (keys and identities written to files).
#pragma once
#include <cstddef>
#include <cstdint>

namespace lcm {

/// FNV-1a 64's standard offset basis.
inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;

/// FNV-1a 64 of the `n` bytes at `p`, continuing from `h` (the offset basis for a fresh hash;
/// the result of an earlier call to hash several pieces as one).
inline uint64_t fnv1a64(const void* p, size_t n, uint64_t h = kFnv1a64Offset) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace lcm
