// Program names seen so far, held as 128-bit hashes (24 bytes a name with its line, whatever the
// name's length): the duplicate_program rule of lcm-prepare and lcm-inspect and the train/valid
// overlap of lcm-prepare, without keeping every name in memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lcm::data {

/// A 128-bit hash of a program name (two 64-bit FNV-1a hashes of different offset bases, each
/// finished by splitmix64). Distinct names get equal hashes with probability about 2^-128 a pair:
/// among n names about n² / 2^129 false matches are expected (10^-24 for 10^7 names).
struct NameHash {
  uint64_t a = 0, b = 0;
  bool operator==(const NameHash& o) const { return a == o.a && b == o.b; }
  bool operator<(const NameHash& o) const { return a != o.a ? a < o.a : b < o.b; }
};

/// The NameHash of `name`; never {0, 0}.
inline NameHash name_hash(const std::string& name) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t h1 = 0xCBF29CE484222325ull, h2 = 0x84222325CBF29CE4ull ^ uint64_t(name.size());
  for (unsigned char c : name) {
    h1 = (h1 ^ c) * 0x100000001B3ull;
    h2 = (h2 ^ c) * 0x100000001B3ull;
    h2 ^= h2 >> 29;
  }
  NameHash h{mix(h1), mix(h2 ^ 0x5851F42D4C957F2Dull)};
  if (h.a == 0 && h.b == 0) h.b = 1;
  return h;
}

/// A set of program names (their NameHash) with one int64 value each (the line of the first
/// record of that name): an open-addressing table of 24-byte slots, grown ×2 at 3/4 load, so
/// 32–64 bytes a name (twice that for the moment of a growth). Not thread-safe.
class NameSet {
 public:
  /// Adds `name` with `value` when absent and returns nullptr; when present returns a pointer
  /// to the value stored with it (valid until the next insert).
  const int64_t* insert(const std::string& name, int64_t value) {
    return insert(name_hash(name), value);
  }
  const int64_t* insert(const NameHash& h, int64_t value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    Slot* s = find_slot(h);
    if (s->a != 0 || s->b != 0) return &s->value;
    *s = Slot{h.a, h.b, value};
    ++size_;
    return nullptr;
  }
  /// The value stored with `name`, or nullptr when absent.
  const int64_t* find(const std::string& name) const { return find(name_hash(name)); }
  const int64_t* find(const NameHash& h) const {
    if (slots_.empty()) return nullptr;
    const Slot* s = const_cast<NameSet*>(this)->find_slot(h);
    return s->a != 0 || s->b != 0 ? &s->value : nullptr;
  }
  /// Names held.
  int64_t size() const { return int64_t(size_); }
  /// Bytes of the table (its slots).
  int64_t bytes() const { return int64_t(slots_.size() * sizeof(Slot)); }

 private:
  struct Slot {
    uint64_t a = 0, b = 0;  // {0, 0}: empty
    int64_t value = 0;
  };
  Slot* find_slot(const NameHash& h) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h.a) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if ((s.a == 0 && s.b == 0) || (s.a == h.a && s.b == h.b)) return &s;
    }
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& s : old)
      if (s.a != 0 || s.b != 0) *find_slot(NameHash{s.a, s.b}) = s;
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace lcm::data
