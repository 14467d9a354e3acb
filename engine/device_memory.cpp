// Device memory of the engine (see device_memory.hpp): buffers, the device arena, tensor and
// parameter copies. Calls kernels/cuda_memory.hpp in a CUDA build; throws one clear error without.
#include "engine/device_memory.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#ifdef LCM_WITH_CUDA
#include "kernels/cuda_memory.hpp"
#endif

namespace lcm {

void throw_cuda_not_built(const char* what) {
  throw std::runtime_error(
      std::string(what) +
      ": this lcm build has no CUDA support (nvcc was not found at build time or "
      "-DLCM_CUDA=OFF); use training.device=cpu");
}

#ifdef LCM_WITH_CUDA
#define LCM_CUDA_OR_THROW(what, ...) __VA_ARGS__
#else
#define LCM_CUDA_OR_THROW(what, ...) throw_cuda_not_built(what)
#endif

// ---- DeviceBuffer ----
DeviceBuffer::DeviceBuffer(int device, size_t bytes) : bytes_(bytes), device_(device) {
  LCM_CUDA_OR_THROW(("cuda:" + std::to_string(device)).c_str(),
                    p_ = cuda::device_alloc(device, bytes));
}
DeviceBuffer::~DeviceBuffer() {
#ifdef LCM_WITH_CUDA
  cuda::device_free(p_);
#endif
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    device_ = o.device_;
  }
  return *this;
}

// ---- PinnedBuffer ----
PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  LCM_CUDA_OR_THROW("pinned host memory", p_ = cuda::pinned_alloc(bytes));
}
PinnedBuffer::~PinnedBuffer() {
#ifdef LCM_WITH_CUDA
  cuda::pinned_free(p_);
#endif
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    PinnedBuffer old(std::move(*this));
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

// ---- DeviceArena ----
DeviceArena::DeviceArena(int device, size_t first_chunk_bytes)
    : device_(device), first_chunk_(first_chunk_bytes) {
  LCM_CUDA_OR_THROW(("cuda:" + std::to_string(device)).c_str(), cuda::set_device(device));
}

void* DeviceArena::alloc_bytes(size_t bytes) {
  bytes = (bytes + 255) & ~size_t(255);
  if (bytes == 0) bytes = 256;
  while (cur_ < chunks_.size()) {
    Chunk& c = chunks_[cur_];
    if (c.used + bytes <= c.mem.bytes()) {
      void* p = static_cast<char*>(c.mem.get()) + c.used;
      c.used += bytes;
      live_ += bytes;
      peak_ = std::max(peak_, live_);
      return p;
    }
    ++cur_;
  }
  const size_t sz =
      std::max(bytes, chunks_.empty() ? first_chunk_ : chunks_.back().mem.bytes() * 2);
  Chunk c;
  try {
    c.mem = DeviceBuffer(device_, sz);
  } catch (const std::runtime_error&) {
    if (sz == bytes) throw;
    c.mem = DeviceBuffer(device_, bytes);  // the doubled chunk does not fit: ask for just this
  }
  c.used = bytes;
  chunks_.push_back(std::move(c));
  cur_ = chunks_.size() - 1;
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return chunks_.back().mem.get();
}

void DeviceArena::reset() {
  for (auto& c : chunks_) c.used = 0;
  cur_ = 0;
  live_ = 0;
}

size_t DeviceArena::capacity_bytes() const {
  size_t s = 0;
  for (auto& c : chunks_) s += c.mem.bytes();
  return s;
}

void DeviceArena::zero(void* p, size_t bytes) {
  device_zero(p, bytes);
}

// ---- device helpers ----
template <class T>
void device_upload(T* dst, const T* src, int64_t n) {
  LCM_CUDA_OR_THROW("device_upload", cuda::copy_to_device(dst, src, size_t(n) * sizeof(T)));
}
template <class T>
void device_download(T* dst, const T* src, int64_t n) {
  LCM_CUDA_OR_THROW("device_download", cuda::copy_to_host(dst, src, size_t(n) * sizeof(T)));
}
template <class T>
void device_fill(T* p, int64_t n, T v) {
  LCM_CUDA_OR_THROW("device_fill", cuda::fill(p, n, v));
}
template <class T>
void device_add_scalar(T* p, T v) {
  LCM_CUDA_OR_THROW("device_add_scalar", cuda::add_scalar(p, v));
}
void device_upload_bytes(void* dst, const void* src, size_t bytes) {
  LCM_CUDA_OR_THROW("device_upload", cuda::copy_to_device(dst, src, bytes));
}
void device_zero(void* p, size_t bytes) {
  LCM_CUDA_OR_THROW("device_zero", cuda::zero_device(p, bytes));
}
void device_synchronize() {
  LCM_CUDA_OR_THROW("device_synchronize", cuda::synchronize(nullptr));
}

template <class T>
std::vector<T> to_host(const Tensor<T>& t) {
  std::vector<T> out(size_t(t.numel()));
  if (t.device == Device::CPU)
    std::copy(t.data, t.data + t.numel(), out.begin());
  else
    device_download(out.data(), t.data, t.numel());
  return out;
}

namespace {
/// The device copies of one parameter: value and gradient in one allocation.
template <class T>
struct ParameterDeviceStorage {
  DeviceBuffer mem;
};
}  // namespace

template <class T>
void parameters_to_device(ParameterStore<T>& store, int device) {
  for (Parameter<T>& p : store.all()) {
    const int64_t n = p.numel();
    if (!p.device_storage || p.device_index != device) {
      auto st = std::make_shared<ParameterDeviceStorage<T>>();
      st->mem = DeviceBuffer(device, size_t(2 * n) * sizeof(T));
      p.device_value = static_cast<T*>(st->mem.get());
      p.device_grad = p.device_value + n;
      p.device_index = device;
      p.device_storage = st;
    }
    device_upload(p.device_value, p.value.data(), n);
    device_zero(p.device_grad, size_t(n) * sizeof(T));
  }
}

template <class T>
void parameters_to_host(ParameterStore<T>& store, bool grads) {
  for (Parameter<T>& p : store.all()) {
    if (!p.device_value) continue;
    device_download(p.value.data(), p.device_value, p.numel());
    if (grads) device_download(p.grad.data(), p.device_grad, p.numel());
  }
}

template <class T>
void zero_device_grads(ParameterStore<T>& store) {
  for (Parameter<T>& p : store.all())
    if (p.device_grad) device_zero(p.device_grad, size_t(p.numel()) * sizeof(T));
}

#define LCM_INSTANTIATE_DEVICE_MEMORY(T)                          \
  template void device_upload<T>(T*, const T*, int64_t);          \
  template void device_download<T>(T*, const T*, int64_t);        \
  template void device_fill<T>(T*, int64_t, T);                   \
  template void device_add_scalar<T>(T*, T);                      \
  template std::vector<T> to_host<T>(const Tensor<T>&);           \
  template void parameters_to_device<T>(ParameterStore<T>&, int); \
  template void parameters_to_host<T>(ParameterStore<T>&, bool);  \
  template void zero_device_grads<T>(ParameterStore<T>&);

LCM_INSTANTIATE_DEVICE_MEMORY(float)
LCM_INSTANTIATE_DEVICE_MEMORY(double)
#undef LCM_INSTANTIATE_DEVICE_MEMORY

}  // namespace lcm
