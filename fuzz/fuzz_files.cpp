// libFuzzer target for the binary file loaders: the first input byte chooses the loader, the
// rest is the file.
//   byte % 3 == 0: parse_safetensors (weights, fixtures), then every tensor's conversion and a
//                  serialise → parse round trip of what was accepted;
//   byte % 3 == 1: read_cache of the .lcmb bytes as given (checksums as they are);
//   byte % 3 == 2: read_cache after the harness recomputed both CRC-32s of the header from the
//                  key and body sections, so that mutated bodies reach the body reader and its
//                  consistency checks instead of stopping at "checksum mismatch".
// For the cache, the expected key is the key section's own content when it is well formed, so
// the loader goes on to the body (a mismatching key is one early, simple return). A loader's
// documented failure (std::runtime_error from parse_safetensors, ok == false from read_cache) is
// expected; a crash, a sanitizer report, any other exception or a round trip that changes the
// tensors is a finding (docs/fuzzing.md).
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "data/cache.hpp"
#include "data/dataset.hpp"
#include "engine/safetensors.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace lcm::data;

constexpr size_t kCacheHeaderBytes = 40;  // data/cache.hpp's layout

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_files: %s\n", what);
  std::abort();
}

uint64_t get_u64(const std::string& b, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void put_u32(std::string& b, size_t at, uint32_t v) {
  std::memcpy(&b[at], &v, 4);
}

void fuzz_safetensors(const std::string& bytes) {
  lcm::SafeTensorsFile f;
  try {
    f = lcm::parse_safetensors(bytes);
  } catch (const std::runtime_error&) {
    return;  // the documented rejection
  }
  for (const auto& [name, t] : f.tensors) {
    if (t.numel() * lcm::safetensors_dtype_size(t.dtype) != int64_t(t.bytes.size()))
      finding("parse_safetensors accepted a tensor whose byte count does not match its shape");
    try {
      (void)t.to_double();
    } catch (const std::runtime_error&) {
      // F8 dtypes have no conversion (documented)
    }
  }
  std::string again;
  try {
    again = lcm::serialize_safetensors(f);
  } catch (const std::invalid_argument&) {
    return;  // e.g. an empty tensor name, which the writer refuses (documented)
  }
  lcm::SafeTensorsFile g = lcm::parse_safetensors(again, "<round trip>");
  if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size())
    finding("serialise -> parse changed the metadata or the tensor count");
  for (const auto& [name, t] : f.tensors) {
    const lcm::SafeTensor* u = g.find(name);
    if (!u || u->dtype != t.dtype || u->shape != t.shape || u->bytes != t.bytes)
      finding("serialise -> parse changed a tensor");
  }
}

// The key section's own values (u32 n, n × (u64 length + name, u64 length + value)), or an
// empty key when it is not well formed.
CacheKey key_of(const std::string& b) {
  CacheKey key;
  if (b.size() < kCacheHeaderBytes) return key;
  const uint64_t key_bytes = get_u64(b, 16);
  if (key_bytes > b.size() - kCacheHeaderBytes) return key;
  size_t at = kCacheHeaderBytes;
  const size_t end = kCacheHeaderBytes + size_t(key_bytes);
  auto str = [&](std::string& out) {
    if (end - at < 8) return false;
    const uint64_t n = get_u64(b, at);
    at += 8;
    if (n > end - at) return false;
    out.assign(b, at, size_t(n));
    at += size_t(n);
    return true;
  };
  if (end - at < 4) return key;
  uint32_t n = 0;
  std::memcpy(&n, b.data() + at, 4);
  at += 4;
  for (uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!str(k) || !str(v)) return CacheKey{};
    key.add(k, v);
  }
  return key;
}

// Recomputes the key and body CRC-32s of the header when both sections lie inside the file.
void fix_checksums(std::string& b) {
  if (b.size() < kCacheHeaderBytes) return;
  const uint64_t key_bytes = get_u64(b, 16), body_bytes = get_u64(b, 24);
  const uint64_t room = b.size() - kCacheHeaderBytes;
  if (key_bytes > room || body_bytes > room - key_bytes) return;
  const auto* p = reinterpret_cast<const Bytef*>(b.data()) + kCacheHeaderBytes;
  put_u32(b, 32, uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), p, size_t(key_bytes))));
  put_u32(b, 36, uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), p + key_bytes, size_t(body_bytes))));
}

void fuzz_cache(std::string bytes, bool fix) {
  if (fix) fix_checksums(bytes);
  const std::string path = lcm::fuzz::write_input(
      "split.lcmb", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  CacheLoad load = read_cache(path, key_of(bytes));  // never throws (documented)
  if (!load.ok) {
    if (load.reason.empty()) finding("read_cache refused a file without a reason");
    return;
  }
  // A cache that loads is used for training: every batch must materialise.
  (void)load.dataset.n_datapoints();
  for (int64_t b = 0; b < int64_t(load.dataset.batches.size()) && b < 4; ++b)
    (void)load.dataset.materialize(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      fuzz_safetensors(bytes);
      break;
    case 1:
      fuzz_cache(bytes, false);
      break;
    default:
      fuzz_cache(bytes, true);
      break;
  }
  return 0;
}
