// Host emulation of the CUDA kernel target (CMake -DLCM_CUDA_EMULATE=ON, developer check only):
// every function of kernels/cuda_device.hpp, cuda_memory.hpp and cuda_ops.hpp written as plain
// sequential C++ over host memory that pretends to be one device "cuda:0". With it, the CUDA
// paths of the engine (tape on a device, dispatch, op glue, LSTM, AdamW slots, arena, model and
// lcm-train on cuda:0) run and are checked against the CPU backend by the same tests on a machine
// without a GPU. It mirrors the kernels' arithmetic; it does not test the .cu code itself.
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
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {
constexpr size_t kEmulatedBytes = size_t(1) << 40;  // "device memory" of the emulated GPU
bool g_tf32 = false;

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
  if (bytes) std::memcpy(dst, src, bytes);
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}
void zero_device(void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
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
  if (!s) return copy_to_device(dst, src, bytes);
  static_cast<EmuStream*>(s)->queued.push_back({dst, src, bytes});
}
void synchronize(Stream s) {
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
  auto* ev = static_cast<EmuEvent*>(e);
  ev->stream = static_cast<EmuStream*>(s);
  ev->seq = ev->stream ? ev->stream->issued() : 0;
}
// The default stream is synchronous here, so waiting for an event means completing it now (for a
// created stream waiting on another one this is earlier than a GPU would, never later).
void stream_wait_event(Stream, Event e) {
  complete(static_cast<EmuEvent*>(e));
}
void event_synchronize(Event e) {
  complete(static_cast<EmuEvent*>(e));
}
void fill(float* p, int64_t n, float v) {
  std::fill(p, p + std::max<int64_t>(n, 0), v);
}
void fill(double* p, int64_t n, double v) {
  std::fill(p, p + std::max<int64_t>(n, 0), v);
}
void add_scalar(float* p, float v) {
  p[0] += v;
}
void add_scalar(double* p, double v) {
  p[0] += v;
}

// ---- cuda_ops.hpp: element-wise ----
namespace {
template <class T>
T unary_f(Unary k, T v, T param) {
  switch (k) {
    case Unary::Scale:
      return param * v;
    case Unary::Elu:
      return v > T(0) ? v : T(std::expm1(v));
    case Unary::LeakyRelu:
      return v >= T(0) ? v : param * v;
    case Unary::Sigmoid:
      return T(1) / (T(1) + std::exp(-v));
    default:
      return std::tanh(v);
  }
}
template <class T>
T unary_d(Unary k, T v, T y, T param) {
  switch (k) {
    case Unary::Scale:
      return param;
    case Unary::Elu:
      return v > T(0) ? T(1) : y + T(1);
    case Unary::LeakyRelu:
      return v >= T(0) ? T(1) : param;
    case Unary::Sigmoid:
      return y * (T(1) - y);
    default:
      return T(1) - y * y;
  }
}
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <class T>
T sign_of(T v) {
  return T((v > T(0)) - (v < T(0)));
}
}  // namespace

template <class T>
void unary_forward(Unary kind, const T* x, T* y, int64_t n, T param) {
  for (int64_t i = 0; i < n; ++i) y[i] = unary_f(kind, x[i], param);
}
template <class T>
void unary_backward(Unary kind, const T* x, const T* y, const T* gy, T* gx, int64_t n, T param) {
  for (int64_t i = 0; i < n; ++i) gx[i] += gy[i] * unary_d(kind, x[i], y[i], param);
}
template <class T>
void add(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
template <class T>
void accumulate(T* g, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] += x[i];
}
template <class T>
void accumulate_product(T* g, const T* x, const T* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] += x[i] * w[i];
}
template <class T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset,
                     double p, T keep_scale) {
  const uint64_t sm = mix64(seed);
  for (int64_t i = 0; i < n; ++i) {
    const float u = float(mix64(sm ^ (offset + uint64_t(i))) >> 40) * (1.0f / 16777216.0f);
    mask[i] = double(u) >= p ? 1 : 0;
    y[i] = mask[i] ? x[i] * keep_scale : T(0);
  }
}
template <class T>
void dropout_backward(const T* gy, const uint8_t* mask, T* gx, int64_t n, T keep_scale) {
  for (int64_t i = 0; i < n; ++i) gx[i] += mask[i] ? gy[i] * keep_scale : T(0);
}

// ---- shape ----
template <class T>
void copy_blocks(T* dst, int64_t dst_row, int64_t dst_off, const T* src, int64_t src_row,
                 int64_t src_off, int64_t outer, int64_t len, bool acc) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < len; ++i) {
      T* d = dst + o * dst_row + dst_off + i;
      const T v = src[o * src_row + src_off + i];
      *d = acc ? *d + v : v;
    }
}
template <class T>
void gather_rows(T* y, const T* x, const int64_t* index, int64_t outer, int64_t m, int64_t xdim,
                 int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t i = 0; i < inner; ++i)
        y[(o * m + j) * inner + i] = x[(o * xdim + index[j]) * inner + i];
}
template <class T>
void scatter_add_rows(T* gx, const T* gy, const int64_t* starts, const int64_t* sources,
                      int64_t outer, int64_t m, int64_t xdim, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < xdim; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        T s = gx[(o * xdim + r) * inner + i];
        for (int64_t q = starts[r]; q < starts[r + 1]; ++q)
          s += gy[(o * m + sources[q]) * inner + i];
        gx[(o * xdim + r) * inner + i] = s;
      }
}
template <class T>
void column_sums_add(const T* x, T* g, int64_t rows, int64_t cols, T* work) {
  // The kernel's arithmetic (kernels/shape.cu): fixed chunks, 8 strided row lanes per chunk, a
  // lane tree (4, 2, 1), then the chunk partials by the same scheme.
  constexpr int64_t kLanes = 8;
  auto chunk_sum = [](const T* src, int64_t r0, int64_t r1, int64_t ld, int64_t c) {
    T lane[kLanes];
    for (int64_t y = 0; y < kLanes; ++y) {
      lane[y] = T(0);
      for (int64_t r = r0 + y; r < r1; r += kLanes) lane[y] += src[r * ld + c];
    }
    for (int64_t h = kLanes / 2; h > 0; h >>= 1)
      for (int64_t y = 0; y < h; ++y) lane[y] += lane[y + h];
    return lane[0];
  };
  const int64_t work_n = column_sums_work(rows, cols);
  if (work_n == 0) {
    for (int64_t c = 0; c < cols; ++c) g[c] += chunk_sum(x, 0, rows, cols, c);
    return;
  }
  if (!work)
    throw std::invalid_argument("column_sums_add: no work array for " + std::to_string(rows) +
                                " rows");
  const int64_t chunks = work_n / cols, chunk_rows = (rows + chunks - 1) / chunks;
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t c = 0; c < cols; ++c)
      work[k * cols + c] =
          chunk_sum(x, k * chunk_rows, std::min(rows, (k + 1) * chunk_rows), cols, c);
  for (int64_t c = 0; c < cols; ++c) g[c] += chunk_sum(work, 0, chunks, cols, c);
}
template <class T>
void swap_leading(T* dst, const T* src, int64_t A, int64_t B, int64_t W, bool acc) {
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < W; ++j) {
        T* d = dst + (b * A + a) * W + j;
        const T v = src[(a * B + b) * W + j];
        *d = acc ? *d + v : v;
      }
}

// ---- reductions ----
int64_t reduce_scratch_size(int64_t n) {
  return n <= 0 ? 1 : (n + 4095) / 4096;
}
template <class T>
void reduce_loss(LossKind kind, const T* a, const T* b, int64_t n, double scale, T* out,
                 double* scratch) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case LossKind::Sum:
        s += double(a[i]);
        break;
      case LossKind::SquaredError: {
        const double d = double(a[i]) - double(b[i]);
        s += d * d;
        break;
      }
      case LossKind::AbsError:
        s += std::fabs(double(a[i]) - double(b[i]));
        break;
      default:
        s += double(std::abs(b[i] - a[i]) / (b[i] + T(1e-5)));
    }
  }
  scratch[0] = s;
  out[0] = T(scale * s);
}
template <class T>
void loss_backward(LossKind kind, const T* a, const T* b, const T* gy, T* ga, T* gb, int64_t n,
                   double mult) {
  const T c = T(double(gy[0]) * mult), eps = T(1e-5);
  for (int64_t i = 0; i < n; ++i) {
    if (kind == LossKind::Sum) {
      if (ga) ga[i] += c;
    } else if (kind == LossKind::SquaredError) {
      if (ga) ga[i] += c * (a[i] - b[i]);
      if (gb) gb[i] += -c * (a[i] - b[i]);
    } else if (kind == LossKind::AbsError) {
      const T g = c * sign_of(a[i] - b[i]);
      if (ga) ga[i] += g;
      if (gb) gb[i] -= g;
    } else {
      if (ga) ga[i] += c * sign_of(a[i] - b[i]) / (b[i] + eps);
      if (gb) {
        const T den = b[i] + eps, diff = b[i] - a[i];
        gb[i] += c * (sign_of(diff) / den - std::abs(diff) / (den * den));
      }
    }
  }
}

// ---- pairwise ranking loss (kernels/rank_loss.cu) ----
namespace {
double softplus_d(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}
double sigmoid_dev(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}
}  // namespace
template <class T>
void pairwise_logistic_forward(const T* s, const int64_t* pairs, int64_t n_pairs, double scale,
                               T* out, double* scratch) {
  double acc = 0;
  for (int64_t p = 0; p < n_pairs; ++p)
    acc += softplus_d(-(double(s[pairs[2 * p]]) - double(s[pairs[2 * p + 1]])));
  scratch[0] = acc;
  out[0] = T(scale * acc);
}
template <class T>
void pairwise_logistic_backward(const T* s, const int64_t* pairs, const int64_t* starts,
                                const int64_t* inc, const T* gy, T* gs, int64_t n, double mult) {
  const double c = double(gy[0]) * mult;
  for (int64_t k = 0; k < n; ++k) {
    double acc = 0;
    for (int64_t q = starts[k]; q < starts[k + 1]; ++q) {
      const int64_t e = inc[q];
      const int64_t p = (e > 0 ? e : -e) - 1;
      const double g = c * sigmoid_dev(-(double(s[pairs[2 * p]]) - double(s[pairs[2 * p + 1]])));
      acc += e > 0 ? g : -g;
    }
    gs[k] += T(acc);
  }
}

// ---- GEMM (row-major, as the cuBLAS wrapper) ----
void set_tf32(bool on) {
  g_tf32 = on;
}
bool tf32() {
  return g_tf32;
}
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T s = T(0);
      for (int64_t q = 0; q < k; ++q)
        s += (ta ? A[q * lda + i] : A[i * lda + q]) * (tb ? B[j * ldb + q] : B[q * ldb + j]);
      C[i * ldc + j] = accumulate ? C[i * ldc + j] + s : s;
    }
}

// ---- LSTM cell ----
template <class T>
void lstm_cell_forward(T* At, const T* bsum, const T* Cp, T* Ct, T* TCt, T* Yt, int64_t ldy,
                       int64_t B, int64_t H) {
  auto sig = [](T v) { return T(1) / (T(1) + std::exp(-v)); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      T* z = At + b * 4 * H;
      const T i = sig(z[j] + bsum[j]), f = sig(z[H + j] + bsum[H + j]);
      const T g = std::tanh(z[2 * H + j] + bsum[2 * H + j]),
              o = sig(z[3 * H + j] + bsum[3 * H + j]);
      z[j] = i;
      z[H + j] = f;
      z[2 * H + j] = g;
      z[3 * H + j] = o;
      const int64_t k = b * H + j;
      const T c = Cp ? f * Cp[k] + i * g : i * g;
      Ct[k] = c;
      TCt[k] = std::tanh(c);
      Yt[b * ldy + j] = o * TCt[k];
    }
}
template <class T>
void lstm_cell_backward(const T* At, const T* TCt, const T* Cp, const T* dYt, int64_t ldy, T* dh,
                        T* dc, T* dGt, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      const int64_t k = b * H + j;
      const T* z = At + b * 4 * H;
      T* g = dGt + b * 4 * H;
      const T i = z[j], f = z[H + j], gg = z[2 * H + j], o = z[3 * H + j], tc = TCt[k];
      const T dhv = dh[k] + dYt[b * ldy + j];
      dh[k] = dhv;
      const T dcv = dc[k] + dhv * o * (T(1) - tc * tc);
      g[3 * H + j] = dhv * tc * o * (T(1) - o);
      g[j] = dcv * gg * i * (T(1) - i);
      g[H + j] = Cp ? dcv * Cp[k] * f * (T(1) - f) : T(0);
      g[2 * H + j] = dcv * i * (T(1) - gg * gg);
      dc[k] = dcv * f;
    }
}

// ---- fused LSTM recurrence (kernels/lstm.cu): the same launch-shape decision for a nominal
// H100/H200 (132 multiprocessors, 227 KiB of shared memory per block), the same arithmetic order
// per (row, unit) as the kernels ----
namespace {
bool g_fused_recurrence = true;
}
void set_lstm_fused_recurrence(bool on) {
  g_fused_recurrence = on;
}
bool lstm_fused_recurrence() {
  return g_fused_recurrence;
}

template <class T>
LstmRecurrenceShape lstm_recurrence_shape(int64_t B, int64_t H) {
  if (!g_fused_recurrence) return LstmRecurrenceShape{};
  return lstm_recurrence_plan(B, H, sizeof(T), 132, 232448);  // a nominal H100/H200
}

template <class T>
void lstm_forward_recurrence(T* A, const T* bsum, const T* w_hh, T* C, T* TC, T* Y, int64_t ldy,
                             int64_t S, int64_t B, int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  if (lstm_recurrence_shape<T>(B, H).rows_per_block == 0)
    throw std::logic_error("lstm_forward_recurrence: does not fit (hidden " + std::to_string(H) +
                           ")");
  auto sig = [](T v) { return T(1) / (T(1) + std::exp(-v)); };
  const int64_t G4 = 4 * H;
  std::vector<T> hprev(size_t(B * H), T(0)), hnext(size_t(B * H)), c(size_t(B * H), T(0));
  for (int64_t st = 0; st < S; ++st) {
    const int64_t tt = reverse ? S - 1 - st : st;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        T* a = A + (tt * B + b) * G4;
        T zi = a[j] + bsum[j], zf = a[H + j] + bsum[H + j], zg = a[2 * H + j] + bsum[2 * H + j],
          zo = a[3 * H + j] + bsum[3 * H + j];
        if (st > 0)
          for (int64_t k = 0; k < H; ++k) {
            const T hv = hprev[size_t(b * H + k)];
            zi += hv * w_hh[j * H + k];
            zf += hv * w_hh[(H + j) * H + k];
            zg += hv * w_hh[(2 * H + j) * H + k];
            zo += hv * w_hh[(3 * H + j) * H + k];
          }
        const T ig = sig(zi), fg = sig(zf), gg = std::tanh(zg), og = sig(zo);
        a[j] = ig;
        a[H + j] = fg;
        a[2 * H + j] = gg;
        a[3 * H + j] = og;
        T& cc = c[size_t(b * H + j)];
        cc = st > 0 ? fg * cc + ig * gg : ig * gg;
        const T tc = std::tanh(cc);
        C[(tt * B + b) * H + j] = cc;
        TC[(tt * B + b) * H + j] = tc;
        Y[(tt * B + b) * ldy + j] = hnext[size_t(b * H + j)] = og * tc;
      }
    std::swap(hprev, hnext);
  }
}

template <class T>
void lstm_backward_recurrence(const T* A, const T* C, const T* TC, const T* dY, int64_t ldy,
                              const T* w_hh, const T* dh0, const T* dc0, T* dG, int64_t S,
                              int64_t B, int64_t H, bool reverse) {
  if (S <= 0 || B <= 0) return;
  if (lstm_recurrence_shape<T>(B, H).rows_per_block == 0)
    throw std::logic_error("lstm_backward_recurrence: does not fit (hidden " + std::to_string(H) +
                           ")");
  const int64_t G4 = 4 * H;
  std::vector<T> dh(dh0, dh0 + B * H), dc(dc0, dc0 + B * H);
  for (int64_t st = S - 1; st >= 0; --st) {
    const int64_t tt = reverse ? S - 1 - st : st, tp = reverse ? S - st : st - 1;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        const T* z = A + (tt * B + b) * G4;
        const T ig = z[j], fg = z[H + j], gg = z[2 * H + j], og = z[3 * H + j];
        const T tc = TC[(tt * B + b) * H + j];
        const T dhv = dh[size_t(b * H + j)] + dY[(tt * B + b) * ldy + j];
        const T dcv = dc[size_t(b * H + j)] + dhv * og * (T(1) - tc * tc);
        T* out = dG + (tt * B + b) * G4;
        out[j] = dcv * gg * ig * (T(1) - ig);
        out[H + j] = st > 0 ? dcv * C[(tp * B + b) * H + j] * fg * (T(1) - fg) : T(0);
        out[2 * H + j] = dcv * ig * (T(1) - gg * gg);
        out[3 * H + j] = dhv * tc * og * (T(1) - og);
        dc[size_t(b * H + j)] = dcv * fg;
      }
    if (st > 0)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          T acc = T(0);
          for (int64_t q = 0; q < G4; ++q) acc += dG[(tt * B + b) * G4 + q] * w_hh[q * H + j];
          dh[size_t(b * H + j)] = acc;
        }
  }
}

// ---- AdamW ----
template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  const bool l2 = !decoupled && wd != T(0);
  for (int k = 0; k < n_slots; ++k) {
    const AdamSlot<T>& s = slots[k];
    for (int64_t i = 0; i < s.n; ++i) {
      T p = s.value[i], gi = s.grad[i];
      if (decoupled) p = p * decay;
      if (l2) gi = std::fma(p, wd, gi);
      const T m = std::fma(gi, one_m_beta1, s.exp_avg[i] * beta1);
      const T v = std::fma(one_m_beta2 * gi, gi, s.exp_avg_sq[i] * beta2);
      const T denom = std::sqrt(v) / s.bias_c2_sqrt + eps;
      s.exp_avg[i] = m;
      s.exp_avg_sq[i] = v;
      s.value[i] = p + (s.neg_step_size * m) / denom;
    }
  }
}

// ---- gradient clipping (kernels/optim.cu): per-4096 chunk partials summed in order ----
template <class T>
double grad_sq_norm(const GradSlot<T>* slots, int n_slots) {
  double total = 0;
  for (int k = 0; k < n_slots; ++k)
    for (int64_t b = 0; b < slots[k].n; b += 4096) {
      double part = 0;
      for (int64_t i = b; i < std::min(slots[k].n, b + 4096); ++i)
        part += double(slots[k].grad[i]) * double(slots[k].grad[i]);
      total += part;
    }
  return total;
}
template <class T>
void scale_grads(const GradSlot<T>* slots, int n_slots, T c) {
  for (int k = 0; k < n_slots; ++k)
    for (int64_t i = 0; i < slots[k].n; ++i) slots[k].grad[i] *= c;
}
template <class T>
void zero_grads(const GradSlot<T>* slots, int n_slots) {
  for (int k = 0; k < n_slots; ++k) std::fill(slots[k].grad, slots[k].grad + slots[k].n, T(0));
}

#define LCM_INSTANTIATE(T)                                                                         \
  template void unary_forward<T>(Unary, const T*, T*, int64_t, T);                                 \
  template void unary_backward<T>(Unary, const T*, const T*, const T*, T*, int64_t, T);            \
  template void add<T>(const T*, const T*, T*, int64_t);                                           \
  template void mul<T>(const T*, const T*, T*, int64_t);                                           \
  template void accumulate<T>(T*, const T*, int64_t);                                              \
  template void accumulate_product<T>(T*, const T*, const T*, int64_t);                            \
  template void dropout_forward<T>(const T*, T*, uint8_t*, int64_t, uint64_t, uint64_t, double,    \
                                   T);                                                             \
  template void dropout_backward<T>(const T*, const uint8_t*, T*, int64_t, T);                     \
  template void copy_blocks<T>(T*, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, \
                               bool);                                                              \
  template void gather_rows<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t);  \
  template void scatter_add_rows<T>(T*, const T*, const int64_t*, const int64_t*, int64_t,         \
                                    int64_t, int64_t, int64_t);                                    \
  template void column_sums_add<T>(const T*, T*, int64_t, int64_t, T*);                            \
  template void swap_leading<T>(T*, const T*, int64_t, int64_t, int64_t, bool);                    \
  template void reduce_loss<T>(LossKind, const T*, const T*, int64_t, double, T*, double*);        \
  template void loss_backward<T>(LossKind, const T*, const T*, const T*, T*, T*, int64_t, double); \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*,        \
                        int64_t, T*, int64_t, bool);                                               \
  template void lstm_cell_forward<T>(T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,         \
                                     int64_t);                                                     \
  template LstmRecurrenceShape lstm_recurrence_shape<T>(int64_t, int64_t);                         \
  template void lstm_forward_recurrence<T>(T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,   \
                                           int64_t, int64_t, bool);                                \
  template void lstm_backward_recurrence<T>(const T*, const T*, const T*, const T*, int64_t,       \
                                            const T*, const T*, const T*, T*, int64_t, int64_t,    \
                                            int64_t, bool);                                        \
  template void lstm_cell_backward<T>(const T*, const T*, const T*, const T*, int64_t, T*, T*, T*, \
                                      int64_t, int64_t);                                           \
  template void adam_step<T>(const AdamSlot<T>*, int, bool, T, T, T, T, T, T, T);                  \
  template void pairwise_logistic_forward<T>(const T*, const int64_t*, int64_t, double, T*,        \
                                             double*);                                             \
  template void pairwise_logistic_backward<T>(const T*, const int64_t*, const int64_t*,            \
                                              const int64_t*, const T*, T*, int64_t, double);      \
  template double grad_sq_norm<T>(const GradSlot<T>*, int);                                        \
  template void scale_grads<T>(const GradSlot<T>*, int, T);                                        \
  template void zero_grads<T>(const GradSlot<T>*, int);
LCM_INSTANTIATE(float)
LCM_INSTANTIATE(double)
#undef LCM_INSTANTIATE

}  // namespace lcm::cuda
