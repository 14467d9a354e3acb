// The memory one lcm-serve / liblcm request takes, estimated from the program's size and the
// number of schedules before anything is allocated (docs/tools.md "lcm-serve", § Memory), and the
// gate that keeps the server's model, program cache and requests in scoring within one bound.
#pragma once
#include <rapidjson/document.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "model/cost_model.hpp"

namespace lcm::serve {

/// The forward memory of one chunk of a program's per-program rows (RequestMemory::
/// rows_per_forward).
constexpr size_t kRowsForwardBytes = size_t(32) << 20;

/// The default bound of the server's memory while it scores (lcm-serve --max-request-memory,
/// liblcm PredictorOptions::max_request_memory_mib): 1 GiB.
constexpr size_t kDefaultMaxRequestBytes = size_t(1) << 30;

/// The size of a program annotation as the memory estimate counts it, read from its JSON before
/// it is parsed into lcm's program form.
struct ProgramShape {
  int64_t comps = 0;       // computations
  int64_t loops = 0;       // iterators
  int64_t accesses = 0;    // read accesses of all computations
  int64_t expr_nodes = 0;  // nodes of all expression trees
  size_t json_bytes = 0;   // the annotation's JSON text (and the untransformed schedule's)
  size_t dom_bytes = 0;    // RequestMemory::json_bytes of that text: its parse
};

/// Counts `program` (a program_annotation object; members that are not of the expected JSON
/// types count 0: the parse that follows names them). `json_bytes` is its text's length.
ProgramShape program_shape(const rapidjson::Value& program, size_t json_bytes);

/// Byte estimates of the stages of one request for a model of `mc` with `members` ensemble
/// members. Each is an upper bound of what the stage allocates (the engine arena's peak plus the
/// host vectors of features, batches and parsed JSON), calibrated against the arena's measured
/// peak and the heap in tests/test_serve_memory.cpp with a margin; formulas in request_memory.cpp.
struct RequestMemory {
  RequestMemory(const lcm::model::ModelConfig& mc, int members);

  /// The DOM of the JSON text `text` (RapidJSON: a 16-byte value per value, 32 bytes per object
  /// member, copied strings, the iterative parse's stack), bounded from a scan of its bytes:
  /// values ≤ commas + opening brackets + 1, members ≤ colons (bytes inside strings count too:
  /// an overestimate). One pass over the text, nothing allocated.
  static size_t json_bytes(std::string_view text);
  /// A program cache entry (parsed program, its features twice: all and per query, the
  /// per-program first-layer rows of every member, the key strings).
  size_t entry_bytes(const ProgramShape& p) const;
  /// Parsing and featurizing a program on a cache miss: the entry plus the transient parse and
  /// the per-program forward (expression LSTM and first layer of every computation at once).
  size_t build_bytes(const ProgramShape& p) const;
  /// One forward of `schedules` schedules of the program (their parsed JSON, descriptors, batch
  /// tensors, the forward's input leaves and activations, the outputs).
  size_t forward_bytes(const ProgramShape& p, int64_t schedules) const;
  /// Computations whose per-program rows one forward computes at a time on a cache miss
  /// (CostModel::program_rows with max_rows): ≈ kRowsForwardBytes of forward.
  int64_t rows_per_forward() const;

 private:
  size_t per_comp_row_ = 0;   // forward bytes per (schedule, computation)
  size_t per_loop_node_ = 0;  // forward bytes per (schedule, loop)
  size_t per_comp_rows_ = 0;  // per-program forward bytes per computation
  size_t row_bytes_ = 0;      // per-program first-layer row of one computation, all members
  bool shared_rows_ = true;   // no encoder: per-program rows cached, expression LSTM once
  bool relative_ = false;     // a forward of the untransformed schedule on a cache miss
};

/// "request_too_large: estimated X MiB > bound Y MiB (<what>; lcm-serve --max-request-memory)",
/// the reason and message of a request refused for its memory.
std::string request_too_large_message(const std::string& what, size_t estimate, size_t available,
                                      size_t bound);

/// Bytes the server may use at once: the fixed part (model, process) plus what cached programs
/// and requests being scored hold, within `bound`. Requests reserve their estimate before they
/// allocate and wait while others' reservations leave no room; cached programs are evicted to
/// make room (through `evict`, called with the gate's lock released). Thread-safe.
class MemoryGate {
 public:
  /// `fixed` bytes are always held (the model and the process's own memory); `bound` ≥ fixed.
  MemoryGate(size_t bound, size_t fixed) : bound_(bound), fixed_(fixed) {}

  /// What a request may reserve at most: bound − fixed.
  size_t capacity() const { return bound_ > fixed_ ? bound_ - fixed_ : 0; }
  size_t bound() const { return bound_; }

  /// Waits until `bytes` fit next to the cache (`cached()` bytes) and the reservations, asking
  /// `evict()` to drop a cached program while they do not (evict returns false when there is
  /// nothing left to drop), then reserves them. The caller refuses a request whose
  /// held_by_this_thread() + bytes exceed capacity() first; with no other thread's reservation
  /// left and nothing to evict it reserves anyway (a thread never waits for itself).
  void acquire(size_t bytes, const std::function<size_t()>& cached,
               const std::function<bool()>& evict);
  void release(size_t bytes);
  /// Bytes reserved by requests now.
  size_t reserved() const;
  /// Bytes the calling thread holds in reservations (of any gate; one request's nested stages).
  static size_t held_by_this_thread();

 private:
  size_t bound_, fixed_;
  size_t reserved_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

/// A reservation held for a scope.
class Reservation {
 public:
  Reservation() = default;
  Reservation(MemoryGate* gate, size_t bytes) : gate_(gate), bytes_(bytes) {}
  Reservation(Reservation&& o) noexcept : gate_(o.gate_), bytes_(o.bytes_) { o.gate_ = nullptr; }
  Reservation& operator=(Reservation&& o) noexcept {
    if (this != &o) {
      reset();
      gate_ = o.gate_;
      bytes_ = o.bytes_;
      o.gate_ = nullptr;
    }
    return *this;
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() { reset(); }
  void reset() {
    if (gate_) gate_->release(bytes_);
    gate_ = nullptr;
  }
  size_t bytes() const { return gate_ ? bytes_ : 0; }

 private:
  MemoryGate* gate_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lcm::serve
