// CUDA twin of Adam<T>::step and clip_grad_norm (engine/optim.cpp): the Adam/AdamW update of every
// parameter in one kernel launch over a table of (parameter, chunk) pairs, with the CPU's fma
// rounding steps; the global gradient 2-norm as a deterministic reduction and one scale kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"
#include "kernels/reduce.cuh"

namespace lcm::cuda {

namespace {

constexpr int64_t kChunk = 4096;  // elements per thread block

struct ChunkRef {
  int slot;
  int64_t begin;
};

__device__ inline float dev_sqrt(float v) {
  return sqrtf(v);
}
__device__ inline double dev_sqrt(double v) {
  return sqrt(v);
}

/// One kernel for adam_step and adam_step_from_device (the same arithmetic, so the same bits):
/// with `sc` the step scalars are read from it (adam_step_from_device's layout), else they are the
/// arguments and the slot's own.
template <class T>
__global__ void adam_kernel(const AdamSlot<T>* slots, const ChunkRef* chunks, bool decoupled,
                            T decay, T wd, T beta1, T one_m_beta1, T beta2, T one_m_beta2, T eps,
                            const T* sc) {
  const ChunkRef c = chunks[blockIdx.x];
  AdamSlot<T> s = slots[c.slot];
  if (sc) {
    decay = sc[0], wd = sc[1], beta1 = sc[2], one_m_beta1 = sc[3], beta2 = sc[4];
    one_m_beta2 = sc[5], eps = sc[6];
    s.neg_step_size = sc[7 + 2 * c.slot];
    s.bias_c2_sqrt = sc[8 + 2 * c.slot];
  }
  const int64_t end = c.begin + kChunk < s.n ? c.begin + kChunk : s.n;
  const bool l2 = !decoupled && wd != T(0);
  for (int64_t i = c.begin + threadIdx.x; i < end; i += blockDim.x) {
    T p = s.value[i];
    T gi = s.grad[i];
    if (decoupled) p = p * decay;
    if (l2) gi = fma(p, wd, gi);
    const T m = fma(gi, one_m_beta1, s.exp_avg[i] * beta1);
    const T v = fma(one_m_beta2 * gi, gi, s.exp_avg_sq[i] * beta2);
    const T denom = dev_sqrt(v) / s.bias_c2_sqrt + eps;
    s.exp_avg[i] = m;
    s.exp_avg_sq[i] = v;
    s.value[i] = p + (s.neg_step_size * m) / denom;
  }
}

constexpr int kNormThreads = detail::kReduceThreads;
using detail::block_tree_sum;

/// partial[b] = Σ g² over chunk b (fixed strided order per thread, then a fixed tree).
template <class T>
__global__ void grad_sq_partials_kernel(const GradSlot<T>* slots, const ChunkRef* chunks,
                                        double* partial) {
  __shared__ double sh[kNormThreads];
  const ChunkRef c = chunks[blockIdx.x];
  const GradSlot<T> s = slots[c.slot];
  const int64_t end = c.begin + kChunk < s.n ? c.begin + kChunk : s.n;
  double acc = 0;
  for (int64_t i = c.begin + threadIdx.x; i < end; i += kNormThreads) {
    const double g = double(s.grad[i]);
    acc += g * g;
  }
  sh[threadIdx.x] = acc;
  const double total = block_tree_sum(sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/// clip_grad_norm's scale from the squared norm `*sq_total` on the device: c = max_norm /
/// (√total + 1e-6) in double (engine/optim.cpp's formula); g ← g·T(c) only when c < 1.
template <class T>
__global__ void clip_scale_kernel(const GradSlot<T>* slots, const ChunkRef* chunks,
                                  const double* sq_total, double max_norm) {
  const double coef = max_norm / (sqrt(*sq_total) + 1e-6);
  if (!(coef < 1.0)) return;
  const T c = T(coef);
  const ChunkRef r = chunks[blockIdx.x];
  const GradSlot<T> s = slots[r.slot];
  const int64_t end = r.begin + kChunk < s.n ? r.begin + kChunk : s.n;
  for (int64_t i = r.begin + threadIdx.x; i < end; i += blockDim.x) s.grad[i] = s.grad[i] * c;
}

template <class T>
__global__ void scale_grads_kernel(const GradSlot<T>* slots, const ChunkRef* chunks, T c,
                                   bool zero) {
  const ChunkRef r = chunks[blockIdx.x];
  const GradSlot<T> s = slots[r.slot];
  const int64_t end = r.begin + kChunk < s.n ? r.begin + kChunk : s.n;
  for (int64_t i = r.begin + threadIdx.x; i < end; i += blockDim.x)
    s.grad[i] = zero ? T(0) : s.grad[i] * c;
}

/// Device memory for the per-call slot/chunk tables, kept between calls and grown on demand (per
/// device): a cudaMalloc + cudaFree per optimizer step would synchronise the device every step.
/// Reuse is safe because the tables are written by copies queued on the default stream, after
/// the kernels that read the previous tables.
void* table_memory(size_t bytes) {
  // During a graph capture: tables of the graph's own, which later calls cannot overwrite or free.
  if (detail::capturing()) return detail::capture_device_scratch(bytes);
  constexpr int kMaxDevices = 64;
  static void* mem[kMaxDevices] = {};
  static size_t cap[kMaxDevices] = {};
  int dev = 0;
  detail::check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices)
    throw std::runtime_error("optimizer tables: device index beyond 63");
  if (cap[dev] < bytes) {
    if (mem[dev]) cudaFree(mem[dev]);  // (waits for the kernels that read it)
    mem[dev] = nullptr;
    cap[dev] = 0;
    const size_t want = std::max(bytes, size_t(64) << 10);
    detail::check(cudaMalloc(&mem[dev], want), "optimizer tables");
    cap[dev] = want;
  }
  return mem[dev];
}

/// Pageable host → device copy queued on the default stream (staged: `src` may be reused on
/// return).
void upload(void* dst, const void* src, size_t bytes, const char* what) {
  detail::count_copy();
  detail::check(cudaMemcpyAsync(dst, detail::capture_upload_source(src, bytes), bytes,
                                cudaMemcpyHostToDevice, detail::stream()),
                what);
}

/// The slot table (`slot_bytes` at `slots`) and the chunk table (`chunk_bytes` at `chunks`) at
/// `dst` and dst + `chunk_off`: one upload of both (one launch instead of two per call).
void upload_tables(void* dst, const void* slots, size_t slot_bytes, size_t chunk_off,
                   const void* chunks, size_t chunk_bytes, const char* what) {
  std::vector<unsigned char> host(chunk_off + chunk_bytes, 0);
  std::memcpy(host.data(), slots, slot_bytes);
  std::memcpy(host.data() + chunk_off, chunks, chunk_bytes);
  upload(dst, host.data(), host.size(), what);
}

/// The slot and chunk tables of `slots` on the device (plus `extra_doubles` doubles after them),
/// in the shared table memory.
template <class T>
struct GradTable {
  GradSlot<T>* slots = nullptr;
  ChunkRef* chunks = nullptr;
  double* extra = nullptr;
  int64_t n_chunks = 0;
  GradTable(const GradSlot<T>* host_slots, int n_slots, int64_t extra_per_chunk,
            int64_t extra_fixed) {
    std::vector<ChunkRef> ch;
    for (int k = 0; k < n_slots; ++k)
      for (int64_t b = 0; b < host_slots[k].n; b += kChunk) ch.push_back(ChunkRef{k, b});
    n_chunks = int64_t(ch.size());
    if (ch.empty()) return;
    auto align = [](size_t v) { return (v + 15) & ~size_t(15); };
    const size_t slot_bytes = sizeof(GradSlot<T>) * size_t(n_slots),
                 chunk_bytes = sizeof(ChunkRef) * ch.size();
    const size_t extra_bytes = sizeof(double) * size_t(extra_per_chunk * n_chunks + extra_fixed);
    const size_t off_c = align(slot_bytes), off_e = off_c + align(chunk_bytes);
    void* mem = table_memory(off_e + extra_bytes + 16);
    slots = static_cast<GradSlot<T>*>(mem);
    chunks = reinterpret_cast<ChunkRef*>(static_cast<char*>(mem) + off_c);
    extra = reinterpret_cast<double*>(static_cast<char*>(mem) + off_e);
    upload_tables(mem, host_slots, slot_bytes, off_c, ch.data(), chunk_bytes, "gradient tables");
  }
};

}  // namespace

template <class T>
double grad_sq_norm(const GradSlot<T>* slots, int n_slots) {
  detail::forbid_in_capture("grad_sq_norm (reads the norm back)");
  GradTable<T> tab(slots, n_slots, 1, 1);  // extra: one partial per chunk, then the total
  if (tab.n_chunks == 0) return 0.0;
  double* partial = tab.extra;
  double* total = tab.extra + tab.n_chunks;
  grad_sq_partials_kernel<<<unsigned(tab.n_chunks), kNormThreads, 0, detail::stream()>>>(
      tab.slots, tab.chunks, partial);
  detail::check_launch("grad_sq_norm (partials)");
  detail::reduce_final_kernel<double>
      <<<1, kNormThreads, 0, detail::stream()>>>(partial, tab.n_chunks, 1.0, total);
  detail::check_launch("grad_sq_norm (final)");
  double h = 0;
  detail::count_copy();
  detail::check(cudaMemcpy(&h, total, sizeof(double), cudaMemcpyDeviceToHost),
                "grad_sq_norm: result");
  return h;
}

template <class T>
void scale_grads(const GradSlot<T>* slots, int n_slots, T c) {
  GradTable<T> tab(slots, n_slots, 0, 0);
  if (tab.n_chunks == 0) return;
  scale_grads_kernel<<<unsigned(tab.n_chunks), 256, 0, detail::stream()>>>(tab.slots, tab.chunks, c,
                                                                           false);
  detail::check_launch("scale_grads");
}

template <class T>
void clip_grads_on_device(const GradSlot<T>* slots, int n_slots, double max_norm) {
  GradTable<T> tab(slots, n_slots, 1, 1);  // extra: one partial per chunk, then the total
  if (tab.n_chunks == 0) return;
  double* partial = tab.extra;
  double* total = tab.extra + tab.n_chunks;
  grad_sq_partials_kernel<<<unsigned(tab.n_chunks), kNormThreads, 0, detail::stream()>>>(
      tab.slots, tab.chunks, partial);
  detail::check_launch("clip_grads_on_device (partials)");
  detail::reduce_final_kernel<double>
      <<<1, kNormThreads, 0, detail::stream()>>>(partial, tab.n_chunks, 1.0, total);
  detail::check_launch("clip_grads_on_device (final)");
  clip_scale_kernel<<<unsigned(tab.n_chunks), 256, 0, detail::stream()>>>(tab.slots, tab.chunks,
                                                                          total, max_norm);
  detail::check_launch("clip_grads_on_device (scale)");
}

template <class T>
void zero_grads(const GradSlot<T>* slots, int n_slots) {
  GradTable<T> tab(slots, n_slots, 0, 0);
  if (tab.n_chunks == 0) return;
  scale_grads_kernel<<<unsigned(tab.n_chunks), 256, 0, detail::stream()>>>(tab.slots, tab.chunks,
                                                                           T(0), true);
  detail::check_launch("zero_grads");
}

template double grad_sq_norm<float>(const GradSlot<float>*, int);
template double grad_sq_norm<double>(const GradSlot<double>*, int);
template void scale_grads<float>(const GradSlot<float>*, int, float);
template void scale_grads<double>(const GradSlot<double>*, int, double);
template void clip_grads_on_device<float>(const GradSlot<float>*, int, double);
template void clip_grads_on_device<double>(const GradSlot<double>*, int, double);
template void zero_grads<float>(const GradSlot<float>*, int);
template void zero_grads<double>(const GradSlot<double>*, int);

template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1,
               T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  std::vector<ChunkRef> chunks;
  for (int k = 0; k < n_slots; ++k)
    for (int64_t b = 0; b < slots[k].n; b += kChunk) chunks.push_back(ChunkRef{k, b});
  if (chunks.empty()) return;
  const size_t slot_bytes = sizeof(AdamSlot<T>) * size_t(n_slots),
               chunk_bytes = sizeof(ChunkRef) * chunks.size();
  const size_t off = (slot_bytes + 15) & ~size_t(15);  // the chunk table starts 16-byte aligned
  void* table = table_memory(off + chunk_bytes);
  AdamSlot<T>* d_slots = static_cast<AdamSlot<T>*>(table);
  ChunkRef* d_chunks = reinterpret_cast<ChunkRef*>(static_cast<char*>(table) + off);
  upload_tables(table, slots, slot_bytes, off, chunks.data(), chunk_bytes, "adam_step: tables");
  adam_kernel<<<unsigned(chunks.size()), 256, 0, detail::stream()>>>(
      d_slots, d_chunks, decoupled, decay, wd, beta1, one_m_beta1, beta2, one_m_beta2, eps,
      static_cast<const T*>(nullptr));
  detail::check_launch("adam_step");
}

template <class T>
void adam_step_from_device(const AdamSlot<T>* slots, int n_slots, bool decoupled,
                           const T* scalars) {
  std::vector<ChunkRef> chunks;
  for (int k = 0; k < n_slots; ++k)
    for (int64_t b = 0; b < slots[k].n; b += kChunk) chunks.push_back(ChunkRef{k, b});
  if (chunks.empty()) return;
  const size_t slot_bytes = sizeof(AdamSlot<T>) * size_t(n_slots),
               chunk_bytes = sizeof(ChunkRef) * chunks.size();
  const size_t off = (slot_bytes + 15) & ~size_t(15);
  void* table = table_memory(off + chunk_bytes);
  AdamSlot<T>* d_slots = static_cast<AdamSlot<T>*>(table);
  ChunkRef* d_chunks = reinterpret_cast<ChunkRef*>(static_cast<char*>(table) + off);
  upload_tables(table, slots, slot_bytes, off, chunks.data(), chunk_bytes,
                "adam_step_from_device: tables");
  adam_kernel<<<unsigned(chunks.size()), 256, 0, detail::stream()>>>(
      d_slots, d_chunks, decoupled, T(0), T(0), T(0), T(0), T(0), T(0), T(0), scalars);
  detail::check_launch("adam_step_from_device");
}

template void adam_step_from_device<float>(const AdamSlot<float>*, int, bool, const float*);
template void adam_step_from_device<double>(const AdamSlot<double>*, int, bool, const double*);

template void adam_step<float>(const AdamSlot<float>*, int, bool, float, float, float, float, float,
                               float, float);
template void adam_step<double>(const AdamSlot<double>*, int, bool, double, double, double, double,
                                double, double, double);

}  // namespace lcm::cuda
