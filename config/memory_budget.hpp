// training.gpu_memory_budget (CUDA data placement, train/device_batch_store.hpp): how much device
// memory the cached batches may take, as a fraction of the device's free memory or as bytes
// ("8GiB"), parsed and resolved.
#pragma once
#include <cstddef>
#include <string>

namespace lcm::config {

/// A parsed memory budget: a fraction of the free device memory, or a byte count.
struct MemoryBudget {
  bool is_fraction = true;
  double fraction = 0.5;     // in (0, 1] when is_fraction
  size_t bytes = 0;          // when !is_fraction (0 = place nothing, stream every batch)
  std::string text = "0.5";  // the text it was parsed from (the config shows it as given)

  /// The budget in bytes for a device with `free_bytes` free now (fraction × free, rounded down).
  size_t resolve(size_t free_bytes) const;
  /// "0.5 of free memory" / "8.00 GiB" (for messages).
  std::string str() const;
};

/// Parses `text`: a plain number in (0, 1] is a fraction of the free device memory ("0.5", "1",
/// "5e-1"; decimal exponents are accepted, hex/inf/nan are not); "0" is 0 bytes (nothing placed);
/// a number with a unit is bytes ("512MiB", "8GiB", "1.5GiB", "4096B"; units B, KiB, MiB, GiB,
/// TiB, also KB/MB/GB/TB as powers of 1000, case-insensitive, spaces allowed before the unit;
/// rounded down to whole bytes). Throws ConfigError naming `key`, the allowed forms and the
/// bad text (negative, a number > 1 without a unit — "2" would be 2 bytes, a trap; the hint
/// suggests the whole number with B or GiB — a fractional count of B ("1.5B"), an unknown unit,
/// NaN, more than 2^60 bytes).
MemoryBudget parse_memory_budget(const std::string& text,
                                 const std::string& key = "training.gpu_memory_budget");

}  // namespace lcm::config
