// CUDA twin of Adam<T>::step (engine/optim.cpp): the Adam/AdamW update of every parameter in one
// kernel launch over a table of (parameter, chunk) pairs, with the CPU's fma rounding steps.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_ops.hpp"

namespace lcm::cuda {

namespace {

constexpr int64_t kChunk = 4096;  // elements per thread block

struct ChunkRef {
  int slot;
  int64_t begin;
};

__device__ inline float dev_sqrt(float v) { return sqrtf(v); }
__device__ inline double dev_sqrt(double v) { return sqrt(v); }

template <class T>
__global__ void adam_kernel(const AdamSlot<T>* slots, const ChunkRef* chunks, bool decoupled, T decay, T wd, T beta1,
                            T one_m_beta1, T beta2, T one_m_beta2, T eps) {
  const ChunkRef c = chunks[blockIdx.x];
  const AdamSlot<T> s = slots[c.slot];
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

}  // namespace

template <class T>
void adam_step(const AdamSlot<T>* slots, int n_slots, bool decoupled, T decay, T wd, T beta1, T one_m_beta1, T beta2,
               T one_m_beta2, T eps) {
  std::vector<ChunkRef> chunks;
  for (int k = 0; k < n_slots; ++k)
    for (int64_t b = 0; b < slots[k].n; b += kChunk) chunks.push_back(ChunkRef{k, b});
  if (chunks.empty()) return;
  const size_t slot_bytes = sizeof(AdamSlot<T>) * size_t(n_slots), chunk_bytes = sizeof(ChunkRef) * chunks.size();
  const size_t off = (slot_bytes + 15) & ~size_t(15);  // the chunk table starts 16-byte aligned
  void* table = nullptr;
  detail::check(cudaMalloc(&table, off + chunk_bytes), "adam_step: table");
  AdamSlot<T>* d_slots = static_cast<AdamSlot<T>*>(table);
  ChunkRef* d_chunks = reinterpret_cast<ChunkRef*>(static_cast<char*>(table) + off);
  try {
    detail::check(cudaMemcpy(d_slots, slots, slot_bytes, cudaMemcpyHostToDevice), "adam_step: slots");
    detail::check(cudaMemcpy(d_chunks, chunks.data(), chunk_bytes, cudaMemcpyHostToDevice), "adam_step: chunks");
    adam_kernel<<<unsigned(chunks.size()), 256>>>(d_slots, d_chunks, decoupled, decay, wd, beta1, one_m_beta1, beta2,
                                                  one_m_beta2, eps);
    detail::check_launch("adam_step");
  } catch (...) {
    cudaFree(table);
    throw;
  }
  cudaFree(table);  // implicitly waits for the kernel
}

template void adam_step<float>(const AdamSlot<float>*, int, bool, float, float, float, float, float, float, float);
template void adam_step<double>(const AdamSlot<double>*, int, bool, double, double, double, double, double, double,
                                double);

}  // namespace lcm::cuda
