// Activation memory: a chunked bump allocator reused across training steps. It grows on demand
// (a new chunk when the current ones are full; existing allocations never move), reset() makes
// all of it reusable, and it reports the peak number of bytes handed out between resets.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace lcm {

/// The typed allocations of a bump arena (CRTP), shared by the host Arena below and DeviceArena
/// (engine/device_memory.hpp): `Derived` provides `void* alloc_bytes(size_t)` and
/// `static void zero(void*, size_t)` (reachable from this base).
template <class Derived>
class TypedArenaAllocs {
 public:
  /// Uninitialised storage for n values of T, aligned as Derived::alloc_bytes aligns. Errors:
  /// those of Derived::alloc_bytes (out of memory).
  template <class T>
  T* alloc(int64_t n) {
    return static_cast<T*>(static_cast<Derived*>(this)->alloc_bytes(size_t(n) * sizeof(T)));
  }
  /// Zero-filled storage for n values of T.
  template <class T>
  T* alloc_zero(int64_t n) {
    T* p = alloc<T>(n);
    Derived::zero(p, size_t(n) * sizeof(T));
    return p;
  }
};

/// Host arena with 64-byte aligned allocations (alloc<T> and alloc_zero<T> throw
/// std::bad_alloc). Not thread-safe (one per tape).
class Arena : public TypedArenaAllocs<Arena> {
 public:
  explicit Arena(size_t first_chunk_bytes = size_t(1) << 20) : first_chunk_(first_chunk_bytes) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* alloc_bytes(size_t bytes) {
    bytes = (bytes + 63) & ~size_t(63);
    if (bytes == 0) bytes = 64;
    while (cur_ < chunks_.size()) {
      Chunk& c = chunks_[cur_];
      if (c.used + bytes <= c.size) {
        void* p = c.mem.get() + c.used;
        c.used += bytes;
        note(bytes);
        return p;
      }
      ++cur_;
    }
    size_t sz = std::max(bytes, chunks_.empty() ? first_chunk_ : chunks_.back().size * 2);
    Chunk c;
    c.mem.reset(static_cast<char*>(std::aligned_alloc(64, (sz + 63) & ~size_t(63))));
    if (!c.mem) throw std::bad_alloc();
    c.size = sz;
    c.used = bytes;
    chunks_.push_back(std::move(c));
    cur_ = chunks_.size() - 1;
    note(bytes);
    return chunks_.back().mem.get();
  }
  /// Makes every allocation reusable (memory is kept). Pointers handed out before are invalid.
  void reset() {
    for (auto& c : chunks_) c.used = 0;
    cur_ = 0;
    live_ = 0;
  }
  /// Bytes handed out since the last reset.
  size_t live_bytes() const { return live_; }
  /// Largest live_bytes() ever seen.
  size_t peak_bytes() const { return peak_; }
  /// Bytes reserved from the OS.
  size_t capacity_bytes() const {
    size_t s = 0;
    for (auto& c : chunks_) s += c.size;
    return s;
  }

 private:
  friend class TypedArenaAllocs<Arena>;
  static void zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  struct Chunk {
    std::unique_ptr<char, FreeDeleter> mem;
    size_t size = 0, used = 0;
  };
  void note(size_t b) {
    live_ += b;
    if (live_ > peak_) peak_ = live_;
  }
  std::vector<Chunk> chunks_;
  size_t cur_ = 0, live_ = 0, peak_ = 0, first_chunk_;
};

}  // namespace lcm
