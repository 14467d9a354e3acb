// Host emulation of the CUDA kernel target (CMake -DLCM_CUDA_EMULATE=ON, developer check only):
// every function of kernels/cuda_device.hpp, cuda_memory.hpp and cuda_ops.hpp written as plain
// sequential C++ over host memory that pretends to be one device "cuda:0", one file per kernel
// file (this one: the device, its memory, streams and events; elementwise.cpp, shape.cpp,
// loss.cpp, rank_loss.cpp, linear.cpp, lstm.cpp and optim.cpp: the kernels). With it, the CUDA
// paths of the engine (tape on a device, dispatch, op glue, LSTM, AdamW slots, arena, model and
// lcm-train on cuda:0) run and are checked against the CPU backend by the same tests on a machine
// without a GPU. The kernels' per-element formulas are the shared ones (engine/rng.hpp,
// engine/ops/*_math.hpp); the emulation mirrors the kernels' summation orders. It does not test
// the .cu code itself.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "kernels/cuda_memory.hpp"
#include "kernels/emulated/emu.hpp"

namespace lcm::cuda {

namespace {
constexpr size_t kEmulatedBytes = size_t(1) << 40;  // "device memory" of the emulated GPU

/// The emulated device's memory: LCM_CUDA_EMULATE_MEMORY bytes when set (read at every call, so
/// a test can shrink it to provoke out-of-memory), else 1 TiB. Allocations are counted against it.
size_t emulated_capacity() {
  const char* e = std::getenv("LCM_CUDA_EMULATE_MEMORY");
  return e && *e ? size_t(std::strtoull(e, nullptr, 10)) : kEmulatedBytes;
}
std::unordered_map<void*, size_t>& live_allocations() {
  static std::unordered_map<void*, size_t> m;
  return m;
}
size_t g_used_bytes = 0;

std::string gib(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}
}  // namespace

// ---- cuda_device.hpp ----
int device_count(std::string* why) {
  if (why) why->clear();
  return 1;
}
std::string device_description(int index) {
  if (index != 0)
    throw std::runtime_error("cuda:" + std::to_string(index) +
                             " is out of range (1 CUDA device(s) visible)");
  return "emulated CUDA device (host memory, LCM_CUDA_EMULATE)";
}
void device_memory(int index, size_t* free_bytes, size_t* total_bytes) {
  device_description(index);
  const size_t cap = emulated_capacity();
  *free_bytes = cap > g_used_bytes ? cap - g_used_bytes : 0;
  *total_bytes = cap;
}

// ---- cuda_memory.hpp ----
void set_device(int index) {
  if (index < 0 || index >= 1)
    throw std::runtime_error("cuda:" + std::to_string(index) +
                             ": device index out of range (1 CUDA device(s) visible)");
}
void* device_alloc(int index, size_t bytes) {
  set_device(index);
  const size_t cap = emulated_capacity(), free_b = cap > g_used_bytes ? cap - g_used_bytes : 0;
  const size_t asked = ((bytes == 0 ? 256 : bytes) + 255) & ~size_t(255);
  void* p = asked > free_b ? nullptr : std::aligned_alloc(256, asked);
  if (!p)
    throw std::runtime_error("cuda:" + std::to_string(index) + ": out of memory allocating " +
                             std::to_string(bytes) + " bytes (" + gib(bytes) + "; " + gib(free_b) +
                             " free of " + gib(cap) + ")");
  live_allocations()[p] = asked;
  g_used_bytes += asked;
  // Fresh device memory is not zeroed: poison it so that a missing initialisation shows.
  std::memset(p, 0x7f, std::min<size_t>(bytes, size_t(1) << 26));
  return p;
}
void device_free(void* p) noexcept {
  if (!p) return;
  auto it = live_allocations().find(p);
  if (it != live_allocations().end()) {
    g_used_bytes -= it->second;
    live_allocations().erase(it);
  }
  std::free(p);
}
void* pinned_alloc(size_t bytes) {
  return std::aligned_alloc(64, ((bytes == 0 ? 64 : bytes) + 63) & ~size_t(63));
}
void pinned_free(void* p) noexcept {
  std::free(p);
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  if (!emu::capturing()) return emu::launch(emu::Work::Copy, [=] { std::memcpy(dst, src, bytes); });
  // captured: the source as it is now (kernels/cuda_graph.hpp)
  const auto snap = emu::snapshot(static_cast<const unsigned char*>(src), bytes);
  emu::launch(emu::Work::Copy, [=] { std::memcpy(dst, snap->data(), bytes); });
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  emu::forbid_in_capture("copy device->host");
  if (bytes) emu::launch(emu::Work::Copy, [=] { std::memcpy(dst, src, bytes); });
}
void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) emu::launch(emu::Work::Copy, [=] { std::memmove(dst, src, bytes); });
}
void zero_device(void* dst, size_t bytes) {
  if (bytes) emu::launch(emu::Work::Copy, [=] { std::memset(dst, 0, bytes); });
}
// Streams and events. The default stream (nullptr) runs everything at once, as the emulated
// kernels do. A created stream is asynchronous like a real one: its copies are queued and run only
// when something waits for them (an event it recorded, synchronize, destroy), reading the source
// at that moment. So a consumer that forgets to wait for a copy sees stale data, and a producer
// that overwrites a pinned source before the copy completed sends the wrong data: both show in
// the tests. (Compute on the default stream finishes before the host continues here, so a copy
// that overwrites memory the compute still reads cannot be caught.)
namespace {
struct EmuStream {
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> queued;  // queued[i] has sequence number done + i + 1
  uint64_t done = 0;         // copies completed so far
  uint64_t issued() const { return done + queued.size(); }
  /// Completes the copies up to sequence number `seq`.
  void run_until(uint64_t seq) {
    size_t n = 0;
    while (n < queued.size() && done + n + 1 <= seq) {
      if (queued[n].bytes) std::memcpy(queued[n].dst, queued[n].src, queued[n].bytes);
      ++n;
    }
    queued.erase(queued.begin(), queued.begin() + std::ptrdiff_t(n));
    done += n;
  }
};
struct EmuEvent {
  EmuStream* stream = nullptr;  // nullptr: recorded on the default stream (or never): complete
  uint64_t seq = 0;
};
std::vector<EmuStream*>& live_streams() {
  static std::vector<EmuStream*> v;
  return v;
}
void complete(const EmuEvent* e) {
  if (e && e->stream) e->stream->run_until(e->seq);
}
}  // namespace

Stream stream_create() {
  emu::forbid_in_capture("stream_create");
  auto* s = new EmuStream();
  live_streams().push_back(s);
  return s;
}
void stream_destroy(Stream s) noexcept {
  if (!s) return;
  auto* es = static_cast<EmuStream*>(s);
  es->run_until(es->issued());  // a real destroy lets queued work finish
  auto& v = live_streams();
  v.erase(std::remove(v.begin(), v.end(), es), v.end());
  delete es;
}
void copy_to_device_async(void* dst, const void* src, size_t bytes, Stream s) {
  emu::forbid_in_capture("copy_to_device_async");
  if (!s) return copy_to_device(dst, src, bytes);
  emu::count(emu::Work::Copy);
  static_cast<EmuStream*>(s)->queued.push_back({dst, src, bytes});
}
void synchronize(Stream s) {
  emu::forbid_in_capture("synchronize");
  if (s) {
    auto* es = static_cast<EmuStream*>(s);
    es->run_until(es->issued());
    return;
  }
  for (EmuStream* es : live_streams()) es->run_until(es->issued());
}
Event event_create() {
  return new EmuEvent();
}
void event_destroy(Event e) noexcept {
  delete static_cast<EmuEvent*>(e);
}
void event_record(Event e, Stream s) {
  emu::forbid_in_capture("event_record");
  auto* ev = static_cast<EmuEvent*>(e);
  ev->stream = static_cast<EmuStream*>(s);
  ev->seq = ev->stream ? ev->stream->issued() : 0;
}
// The default stream is synchronous here, so waiting for an event means completing it now (for a
// created stream waiting on another one this is earlier than a GPU would, never later).
void stream_wait_event(Stream, Event e) {
  emu::forbid_in_capture("stream_wait_event");
  complete(static_cast<EmuEvent*>(e));
}
void event_synchronize(Event e) {
  emu::forbid_in_capture("event_synchronize");
  complete(static_cast<EmuEvent*>(e));
}
void fill(float* p, int64_t n, float v) {
  if (n > 0) emu::launch(emu::Work::Kernel, [=] { std::fill(p, p + n, v); });
}
void fill(double* p, int64_t n, double v) {
  if (n > 0) emu::launch(emu::Work::Kernel, [=] { std::fill(p, p + n, v); });
}
void add_scalar(float* p, float v) {
  emu::launch(emu::Work::Kernel, [=] { p[0] += v; });
}
void add_scalar(double* p, double v) {
  emu::launch(emu::Work::Kernel, [=] { p[0] += v; });
}

}  // namespace lcm::cuda
