// Binary cache of a prepared split: streamed, checksummed (CRC-32), atomically renamed writes and
// validated reads that explain, in one line, why a cache is not reused.
#include "data/cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "data/reader.hpp"
#include "data/skips.hpp"
#include "util/atomic_file.hpp"
#include "util/run_lock.hpp"

namespace lcm::data {

#if defined(__GLIBCXX__) && __SIZEOF_POINTER__ == 8
// A new ProgramFeatures member must be written and read below (and kCacheFormatVersion bumped);
// this assertion makes the build say so instead of silently dropping the member from the cache.
static_assert(sizeof(ProgramFeatures) == 472,
              "ProgramFeatures changed: update data/cache.cpp and bump kCacheFormatVersion");
static_assert(sizeof(TreeNode) == 56,
              "TreeNode changed: update data/cache.cpp and bump kCacheFormatVersion");
#endif
static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE-754 float/double expected");

namespace {

constexpr size_t kHeaderBytes = 40;

bool little_endian() {
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

// ---- writing ----

class Writer {
 public:
  explicit Writer(std::FILE* f) : f_(f) { buf_.reserve(1 << 20); }
  void bytes(const void* p, size_t n) {
    crc_ = crc32_z(crc_, static_cast<const Bytef*>(p), n);
    count_ += n;
    const char* c = static_cast<const char*>(p);
    if (buf_.size() + n > (1 << 20)) flush();
    if (n >= (1 << 20)) {
      put(c, n);
    } else {
      buf_.insert(buf_.end(), c, c + n);
    }
  }
  template <class T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable<T>::value, "pod");
    bytes(&v, sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    pod<uint64_t>(v.size());
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void flush() {
    if (!buf_.empty()) put(buf_.data(), buf_.size());
    buf_.clear();
  }
  uint32_t crc() const { return uint32_t(crc_); }
  uint64_t count() const { return count_; }
  void reset() {
    flush();
    crc_ = crc32_z(0L, Z_NULL, 0);
    count_ = 0;
  }

 private:
  void put(const char* p, size_t n) {
    if (std::fwrite(p, 1, n, f_) != n)
      throw std::runtime_error(std::string("write failed: ") + std::strerror(errno));
  }
  std::FILE* f_;
  std::vector<char> buf_;
  uLong crc_ = crc32_z(0L, Z_NULL, 0);
  uint64_t count_ = 0;
};

void write_key(Writer& w, const CacheKey& key) {
  w.pod<uint32_t>(uint32_t(key.values.size()));
  for (auto& [k, v] : key.values) {
    w.str(k);
    w.str(v);
  }
}

void write_counts(Writer& w, const SplitCounts& c) {
  w.pod<int64_t>(c.records_read);
  w.pod<int64_t>(c.programs_read);
  w.pod<int64_t>(c.programs_featurized);
  w.pod<int64_t>(c.schedules_read);
  w.pod<int64_t>(c.schedules_featurized);
  w.pod<int64_t>(c.skipped_records_counted);
  w.pod<double>(c.build_seconds);
  w.pod<uint64_t>(c.skips.size());
  for (auto& [k, v] : c.skips) {
    w.str(k);
    w.pod<int64_t>(v);
  }
  w.pod<uint64_t>(c.forms.size());
  for (auto& [k, v] : c.forms) {
    w.str(k);
    w.pod<int64_t>(v);
  }
  w.str(c.loop_level_base);
}

/// zlib-deflated `n` bytes at `p` (level 6).
std::vector<uint8_t> deflate_bytes(const void* p, size_t n) {
  uLongf out_n = compressBound(uLong(n));
  std::vector<uint8_t> out(static_cast<size_t>(out_n));
  if (compress2(out.data(), &out_n, static_cast<const Bytef*>(p), uLong(n), 6) != Z_OK)
    throw std::runtime_error("compressing a cache section failed");
  out.resize(size_t(out_n));
  return out;
}

/// Bytes of one schedule record: f32 speedup, i32 schedule index, f64 min time (ms), u32 end of
/// its descriptor, u32 end of its sched_str (both relative to the program's sections).
constexpr size_t kScheduleRecordBytes = 24;

void write_program(Writer& w, const ProgramFeatures& p) {
  const int64_t S = p.n_schedules();
  if (int64_t(p.descriptor_end.size()) != S || p.statics.n_comps != p.n_comps ||
      p.statics.n_loops != p.n_loops)
    throw std::runtime_error("program " + p.name + " carries no schedule descriptors");
  w.str(p.name);
  w.str(p.footprint);
  w.pod<uint64_t>(p.tree.nodes.size());
  for (auto& n : p.tree.nodes) {
    w.pod<int32_t>(n.loop_index);
    w.vec(n.comp_indices);
    w.vec(n.children);
  }
  w.vec(p.tree.roots);
  w.pod<int32_t>(p.n_comps);
  w.pod<int32_t>(p.n_loops);
  w.pod<double>(p.initial_time_ms);
  w.vec(p.statics.depth);
  w.vec(p.statics.domain_offset);
  w.vec(p.statics.domain);
  {  // comp_static [C,910] then expr [C,66,11], deflated: mostly zero padding
    std::vector<float> raw(p.comp_static);
    raw.insert(raw.end(), p.expr.begin(), p.expr.end());
    w.pod<uint64_t>(raw.size() * sizeof(float));
    w.vec(deflate_bytes(raw.data(), raw.size() * sizeof(float)));
  }
  std::string strs;
  w.pod<uint64_t>(uint64_t(S));
  for (int64_t s = 0; s < S; ++s) {
    strs += p.sched_str[size_t(s)];
    if (p.descriptor_end[size_t(s)] > UINT32_MAX || strs.size() > UINT32_MAX)
      throw std::runtime_error("program " + p.name + " has more than 4 GiB of schedules");
    unsigned char rec[kScheduleRecordBytes];
    const uint32_t dend = uint32_t(p.descriptor_end[size_t(s)]), send = uint32_t(strs.size());
    std::memcpy(rec, &p.speedup[size_t(s)], 4);
    std::memcpy(rec + 4, &p.schedule_index[size_t(s)], 4);
    std::memcpy(rec + 8, &p.min_time_ms[size_t(s)], 8);
    std::memcpy(rec + 16, &dend, 4);
    std::memcpy(rec + 20, &send, 4);
    w.bytes(rec, sizeof rec);
  }
  w.vec(p.descriptor_bytes);
  w.vec(p.identity_descriptor);
  w.pod<uint64_t>(strs.size());
  w.vec(deflate_bytes(strs.data(), strs.size()));
}

/// The body: counts, batching stats, groups, `n_programs` programs written by
/// `write_programs(w)`, batches.
template <class WritePrograms>
void write_body(Writer& w, const SplitCounts& counts, const BatchingStats& batching,
                const std::vector<FootprintGroup>& groups, uint64_t n_programs,
                WritePrograms&& write_programs, const std::vector<Batch>& batches) {
  write_counts(w, counts);
  w.pod<int64_t>(batching.groups_kept);
  w.pod<int64_t>(batching.groups_dropped);
  w.pod<int64_t>(batching.programs_dropped);
  w.pod<int64_t>(batching.datapoints_dropped);
  w.pod<uint64_t>(groups.size());
  for (auto& g : groups) {
    w.str(g.footprint);
    w.pod<int32_t>(g.n_comps);
    w.pod<int32_t>(g.n_loops);
    w.pod<int64_t>(g.n_programs);
    w.pod<int64_t>(g.n_datapoints);
  }
  w.pod<uint64_t>(n_programs);
  write_programs(w);
  w.pod<uint64_t>(batches.size());
  for (auto& b : batches) {
    w.pod<int32_t>(b.group);
    w.pod<uint64_t>(b.points.size());
    for (auto& r : b.points) {
      w.pod<int32_t>(r.program);
      w.pod<int32_t>(r.schedule);
    }
  }
}

void put_u32(unsigned char* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
void put_u64(unsigned char* p, uint64_t v) {
  std::memcpy(p, &v, 8);
}

// ---- reading ----

struct CorruptCache : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Bounds-checked reads from a mapped section of the file.
class Reader {
 public:
  Reader(const unsigned char* p, uint64_t limit) : p_(p), left_(limit) {}
  const unsigned char* take(size_t n) {
    if (n > left_) throw CorruptCache("corrupt (field runs past the end of its section)");
    const unsigned char* q = p_;
    p_ += n;
    left_ -= n;
    return q;
  }
  void bytes(void* p, size_t n) {
    if (n > 0) std::memcpy(p, take(n), n);
  }
  template <class T>
  T pod() {
    T v;
    bytes(&v, sizeof(T));
    return v;
  }
  uint64_t length(size_t elem) {
    uint64_t n = pod<uint64_t>();
    if (elem > 0 && n > left_ / elem) throw CorruptCache("corrupt (length larger than the file)");
    return n;
  }
  std::string str() {
    uint64_t n = length(1);
    std::string s(size_t(n), '\0');
    bytes(s.data(), size_t(n));
    return s;
  }
  template <class T>
  std::vector<T> vec() {
    uint64_t n = length(sizeof(T));
    std::vector<T> v(static_cast<size_t>(n));
    if (n) bytes(v.data(), size_t(n) * sizeof(T));
    return v;
  }
  uint64_t left() const { return left_; }
  const unsigned char* pos() const { return p_; }

 private:
  const unsigned char* p_;
  uint64_t left_;
};

/// Drops the whole pages inside [lo, hi) of a read-only file mapping from the resident set (clean
/// file pages: MADV_DONTNEED only unmaps them); returns the end of the last page dropped (lo when
/// none).
const unsigned char* drop_mapped_pages(const unsigned char* lo, const unsigned char* hi) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = (uintptr_t(lo) + page - 1) / page * page, b = uintptr_t(hi) / page * page;
  if (b <= a) return lo;
  ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  return reinterpret_cast<const unsigned char*>(b);
}

/// CRC-32 of `n` mapped bytes, read in 8 MiB pieces that are dropped from the process's
/// resident set once summed.
uint32_t mapped_crc(const unsigned char* p, uint64_t n) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  const uint64_t piece = uint64_t(8) << 20;
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t m = std::min(piece, n - off);
    crc = crc32_z(crc, p + off, size_t(m));
    drop_mapped_pages(p + off, p + off + m);
  }
  return uint32_t(crc);
}

/// `raw_n` bytes inflated from a deflated section; CorruptCache when it does not inflate to
/// exactly that many.
std::vector<unsigned char> inflate_section(const std::vector<uint8_t>& z, uint64_t raw_n,
                                           const std::string& what) {
  if (raw_n > (uint64_t(1) << 40)) throw CorruptCache("corrupt (" + what + " size)");
  std::vector<unsigned char> out(static_cast<size_t>(raw_n));
  uLongf n = uLongf(raw_n);
  if (uncompress(out.data(), &n, z.data(), uLong(z.size())) != Z_OK || n != raw_n)
    throw CorruptCache("corrupt (" + what + " does not inflate)");
  return out;
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw CorruptCache("corrupt (" + what + ")");
}

ProgramFeatures read_program(Reader& r, bool rows_in_memory, bool keep_sched_str) {
  ProgramFeatures p;
  p.name = r.str();
  p.footprint = r.str();
  uint64_t nn = r.length(20);  // a node takes at least 4 + 8 + 8 bytes
  p.tree.nodes.resize(size_t(nn));
  for (auto& n : p.tree.nodes) {
    n.loop_index = r.pod<int32_t>();
    n.comp_indices = r.vec<int>();
    n.children = r.vec<int>();
  }
  p.tree.roots = r.vec<int>();
  p.n_comps = r.pod<int32_t>();
  p.n_loops = r.pod<int32_t>();
  p.initial_time_ms = r.pod<double>();
  const int64_t C = p.n_comps, L = p.n_loops;
  expect(C >= 0 && L >= 0, "negative sizes in program " + p.name);
  p.statics.n_comps = p.n_comps;
  p.statics.n_loops = p.n_loops;
  p.statics.depth = r.vec<int32_t>();
  p.statics.domain_offset = r.vec<int64_t>();
  p.statics.domain = r.vec<double>();
  expect(int64_t(p.statics.depth.size()) == C && int64_t(p.statics.domain_offset.size()) == C + 1,
         "static part of " + p.name);
  {
    const uint64_t raw_n = r.pod<uint64_t>();
    const size_t n_static = size_t(C) * kCompVectorWidth,
                 n_expr = size_t(C) * kMaxExprLen * kExprNodeWidth;
    expect(raw_n == (n_static + n_expr) * sizeof(float), "static part size of " + p.name);
    const std::vector<unsigned char> raw =
        inflate_section(r.vec<uint8_t>(), raw_n, "static part of " + p.name);
    p.comp_static.resize(n_static);
    p.expr.resize(n_expr);
    if (n_static) std::memcpy(p.comp_static.data(), raw.data(), n_static * sizeof(float));
    if (n_expr)
      std::memcpy(p.expr.data(), raw.data() + n_static * sizeof(float), n_expr * sizeof(float));
  }
  const uint64_t S = r.length(kScheduleRecordBytes);
  const unsigned char* recs = r.take(size_t(S) * kScheduleRecordBytes);
  p.descriptor_bytes = r.vec<uint8_t>();
  p.identity_descriptor = r.vec<uint8_t>();
  if (p.has_identity()) {  // checked as every schedule's descriptor is
    std::vector<float> cs(size_t(C) * kScheduleColumns), lp(size_t(L) * kLoopVectorWidth);
    try {
      schedule_rows(p.statics, {p.identity_descriptor.data(), p.identity_descriptor.size()},
                    cs.data(), lp.data());
    } catch (const DataError& e) {
      throw CorruptCache(std::string("corrupt (") + e.what() +
                         " in the untransformed schedule of " + p.name + ")");
    }
  }
  const uint64_t str_n = r.pod<uint64_t>();
  std::vector<unsigned char> strs;
  if (keep_sched_str)
    strs = inflate_section(r.vec<uint8_t>(), str_n, "sched_str section of " + p.name);
  else
    r.take(size_t(r.length(1)));  // left deflated in the file, not read
  p.speedup.resize(size_t(S));
  p.schedule_index.resize(size_t(S));
  p.min_time_ms.resize(size_t(S));
  p.descriptor_end.resize(size_t(S));
  if (keep_sched_str) p.sched_str.resize(size_t(S));
  // a compact program is checked by rebuilding each schedule's rows into scratch
  std::vector<float> sched_tmp(rows_in_memory ? 0 : size_t(C) * kScheduleColumns),
      loops_tmp(rows_in_memory ? 0 : size_t(L) * kLoopVectorWidth);
  if (rows_in_memory) {
    p.comp_sched.resize(size_t(S) * size_t(C) * kScheduleColumns);
    p.loops.resize(size_t(S) * size_t(L) * kLoopVectorWidth);
  }
  uint32_t dprev = 0, sprev = 0;
  for (uint64_t s = 0; s < S; ++s) {
    const unsigned char* rec = recs + s * kScheduleRecordBytes;
    uint32_t dend, send;
    std::memcpy(&p.speedup[size_t(s)], rec, 4);
    std::memcpy(&p.schedule_index[size_t(s)], rec + 4, 4);
    std::memcpy(&p.min_time_ms[size_t(s)], rec + 8, 8);
    std::memcpy(&dend, rec + 16, 4);
    std::memcpy(&send, rec + 20, 4);
    expect(dend >= dprev && dend <= p.descriptor_bytes.size() && send >= sprev && send <= str_n,
           "schedule offsets of " + p.name);
    p.descriptor_end[size_t(s)] = dend;
    if (keep_sched_str)
      p.sched_str[size_t(s)].assign(reinterpret_cast<const char*>(strs.data()) + sprev,
                                    send - sprev);
    try {
      schedule_rows(p.statics, {p.descriptor_bytes.data() + dprev, size_t(dend - dprev)},
                    rows_in_memory ? p.comp_sched.data() + size_t(s) * size_t(C) * kScheduleColumns
                                   : sched_tmp.data(),
                    rows_in_memory ? p.loops.data() + size_t(s) * size_t(L) * kLoopVectorWidth
                                   : loops_tmp.data());
    } catch (const DataError& e) {
      throw CorruptCache(std::string("corrupt (") + e.what() + " in program " + p.name + ")");
    }
    dprev = dend;
    sprev = send;
  }
  expect(dprev == p.descriptor_bytes.size() && sprev == str_n, "schedule sections of " + p.name);
  for (int root : p.tree.roots)
    expect(root >= 0 && size_t(root) < p.tree.nodes.size(), "tree root of " + p.name);
  for (auto& n : p.tree.nodes)
    for (int ch : n.children)
      expect(ch >= 0 && size_t(ch) < p.tree.nodes.size(), "tree child of " + p.name);
  return p;
}

void read_body(Reader& r, SplitCounts& c, Dataset& ds, bool rows_in_memory, bool keep_sched_str,
               const std::function<void(const ProgramFeatures&)>* visit, int64_t& n_programs,
               int64_t& n_schedules) {
  c.records_read = r.pod<int64_t>();
  c.programs_read = r.pod<int64_t>();
  c.programs_featurized = r.pod<int64_t>();
  c.schedules_read = r.pod<int64_t>();
  c.schedules_featurized = r.pod<int64_t>();
  c.skipped_records_counted = r.pod<int64_t>();
  c.build_seconds = r.pod<double>();
  uint64_t nk = r.length(16);
  for (uint64_t i = 0; i < nk; ++i) {
    std::string k = r.str();
    c.skips[k] = r.pod<int64_t>();
  }
  const uint64_t nf = r.length(16);
  for (uint64_t i = 0; i < nf; ++i) {
    std::string k = r.str();
    c.forms[k] = r.pod<int64_t>();
  }
  c.loop_level_base = r.str();
  ds.batching.groups_kept = r.pod<int64_t>();
  ds.batching.groups_dropped = r.pod<int64_t>();
  ds.batching.programs_dropped = r.pod<int64_t>();
  ds.batching.datapoints_dropped = r.pod<int64_t>();
  uint64_t ng = r.length(32);
  ds.groups.resize(size_t(ng));
  for (auto& g : ds.groups) {
    g.footprint = r.str();
    g.n_comps = r.pod<int32_t>();
    g.n_loops = r.pod<int32_t>();
    g.n_programs = r.pod<int64_t>();
    g.n_datapoints = r.pod<int64_t>();
  }
  uint64_t np = r.length(64);
  // visited programs are not kept: their shapes are, for the batch checks (16 bytes a program)
  struct Shape {
    int64_t n_schedules;
    int32_t n_comps, n_loops;
  };
  std::vector<Shape> shapes;
  if (visit)
    shapes.reserve(size_t(np));
  else
    ds.programs.reserve(size_t(np));
  n_programs = int64_t(np);
  n_schedules = 0;
  // the programs are read once, in order: the pages behind the reader leave the resident set
  const unsigned char* released = r.pos();
  for (uint64_t i = 0; i < np; ++i) {
    ProgramFeatures p = read_program(r, rows_in_memory && !visit, keep_sched_str);
    n_schedules += p.n_schedules();
    if (visit) {
      shapes.push_back({p.n_schedules(), p.n_comps, p.n_loops});
      (*visit)(p);
    } else {
      ds.programs.push_back(std::move(p));
    }
    if (r.pos() - released >= (std::ptrdiff_t(8) << 20))
      released = drop_mapped_pages(released, r.pos());
  }
  auto shape_of = [&](size_t i) {
    if (visit) return shapes[i];
    const ProgramFeatures& p = ds.programs[i];
    return Shape{p.n_schedules(), p.n_comps, p.n_loops};
  };
  uint64_t nb = r.length(12);
  ds.batches.resize(size_t(nb));
  for (auto& b : ds.batches) {
    b.group = r.pod<int32_t>();
    expect(b.group >= -1 && (b.group < 0 || size_t(b.group) < ds.groups.size()),
           "batch group index");
    const FootprintGroup* g = b.group >= 0 ? &ds.groups[size_t(b.group)] : nullptr;
    uint64_t n = r.length(8);
    b.points.resize(size_t(n));
    for (auto& pt : b.points) {
      pt.program = r.pod<int32_t>();
      pt.schedule = r.pod<int32_t>();
      expect(pt.program >= 0 && uint64_t(pt.program) < np, "batch program index");
      const Shape p = shape_of(size_t(pt.program));
      expect(pt.schedule >= 0 && pt.schedule < p.n_schedules, "batch schedule index");
      expect(!g || (p.n_comps == g->n_comps && p.n_loops == g->n_loops),
             "batch program does not match its group");
    }
  }
  expect(r.left() == 0, "trailing bytes in body");
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

std::string describe_mismatch(const std::string& key, const std::string& cached,
                              const std::string& now) {
  if (key.rfind("source.", 0) == 0) {
    std::string what = key.substr(7);
    if (what == "mtime_ns") what = "mtime";
    if (what == "path") return "cache stale: source path changed (" + cached + " → " + now + ")";
    return "cache stale: source " + what + " changed";
  }
  return "config changed: " + key + " " + (cached.empty() ? "\"\"" : cached) + " → " +
         (now.empty() ? "\"\"" : now);
}

}  // namespace

SourceInfo source_info(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw DataError("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) require_regular_data_file(path);  // throws: a directory, a pipe
  SourceInfo s;
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  s.path = ec ? path : abs.lexically_normal().string();
  s.size = int64_t(st.st_size);
  s.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000LL + int64_t(st.st_mtim.tv_nsec);
  return s;
}

namespace {
// The temp file being written, for the SIGINT/SIGTERM handler (async-signal-safe: a fixed buffer
// and a flag; unlink and _exit only).
char g_temp_path[4096];
volatile sig_atomic_t g_temp_active = 0;

extern "C" void cache_signal_handler(int sig) {
  if (g_temp_active) ::unlink(g_temp_path);
  ::_exit(128 + sig);
}
}  // namespace

void register_cache_temp(const std::string& tmp_path) {
  g_temp_active = 0;
  size_t n = std::min(tmp_path.size(), sizeof g_temp_path - 1);
  std::memcpy(g_temp_path, tmp_path.data(), n);
  g_temp_path[n] = '\0';
  g_temp_active = n == tmp_path.size() ? 1 : 0;
}

void remove_registered_cache_temp() noexcept {
  if (g_temp_active) ::unlink(g_temp_path);
}

void unregister_cache_temp() {
  g_temp_active = 0;
}

void install_cache_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = cache_signal_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int remove_stale_cache_temps(const std::string& dir) {
  return remove_stale_temps(dir, {".lcmb"});
}

RunLock lock_cache(const std::string& path, double wait_s) {
  try {
    return RunLock::acquire(path + ".lock", "cache " + path,
                            wait_s > 0 ? "wait for it to finish writing the cache, or raise "
                                         "data.cache_lock_wait"
                                       : "wait for it to finish writing the cache",
                            true, wait_s);
  } catch (const RunLockError& e) {
    if (e.held) throw;
    throw std::runtime_error("cannot write cache " + path + ": " + temp_create_reason(path, e.err));
  }
}

namespace {
/// write_cache's procedure (lock unless `caller_holds_lock`, temp file, header, key, then the
/// body that `body(w)` writes, fsync, rename) for any body.
template <class Body>
int64_t write_cache_file(const std::string& path, const CacheKey& key, bool caller_holds_lock,
                         Body&& body) {
  if (!little_endian()) throw std::runtime_error("write_cache: big-endian hosts are not supported");
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  require_regular_output(path);  // a link, FIFO or device at the cache's path is never replaced
  remove_stale_cache_temps(p.has_parent_path() ? p.parent_path().string() : ".");
  // One writer per cache file: a second (another tool or run on the same base path) stops here.
  RunLock lock;
  if (!caller_holds_lock) lock = lock_cache(path, 0);
  const std::string tmp = temp_path_for(path);
  register_cache_temp(tmp);  // a SIGINT/SIGTERM from now on removes it
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wbe"));
  if (!f) {
    const int err = errno;
    unregister_cache_temp();
    throw std::runtime_error("cannot write cache " + path + ": " + temp_create_reason(path, err));
  }
  try {
    unsigned char header[kHeaderBytes] = {};
    if (std::fwrite(header, 1, kHeaderBytes, f.get()) != kHeaderBytes)
      throw std::runtime_error(std::string("write failed: ") + std::strerror(errno));
    Writer w(f.get());
    write_key(w, key);
    w.flush();
    const uint64_t key_bytes = w.count();
    const uint32_t key_crc = w.crc();
    w.reset();
    body(w);
    w.flush();
    const uint64_t body_bytes = w.count();
    const uint32_t body_crc = w.crc();
    std::memcpy(header, kCacheMagic, 8);
    put_u32(header + 8, kCacheFormatVersion);
    put_u32(header + 12, kFeatureLayoutVersion);
    put_u64(header + 16, key_bytes);
    put_u64(header + 24, body_bytes);
    put_u32(header + 32, key_crc);
    put_u32(header + 36, body_crc);
    if (std::fseek(f.get(), 0, SEEK_SET) != 0 ||
        std::fwrite(header, 1, kHeaderBytes, f.get()) != kHeaderBytes)
      throw std::runtime_error(std::string("write failed: ") + std::strerror(errno));
    if (std::fflush(f.get()) != 0 || ::fsync(::fileno(f.get())) != 0)
      throw std::runtime_error(std::string("flush failed: ") + std::strerror(errno));
    if (std::fclose(f.release()) != 0)
      throw std::runtime_error(std::string("close failed: ") + std::strerror(errno));
    require_regular_output(path);  // made a link, FIFO or device while it was written
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot rename to " + path + ": " + std::strerror(errno));
    unregister_cache_temp();
    return int64_t(kHeaderBytes + key_bytes + body_bytes);
  } catch (const std::exception& e) {
    f.reset();
    std::remove(tmp.c_str());
    unregister_cache_temp();
    throw std::runtime_error("cannot write cache " + path + ": " + e.what());
  }
}

}  // namespace

int64_t write_cache(const std::string& path, const CacheKey& key, const SplitCounts& counts,
                    const Dataset& ds, bool caller_holds_lock) {
  return write_cache_file(path, key, caller_holds_lock, [&](Writer& w) {
    write_body(
        w, counts, ds.batching, ds.groups, ds.programs.size(),
        [&](Writer& pw) {
          for (auto& p : ds.programs) write_program(pw, p);
        },
        ds.batches);
  });
}

struct ProgramSpill::Impl {
  std::FILE* f = nullptr;
  std::unique_ptr<Writer> w;
  std::string path;
  ~Impl() {
    if (f) std::fclose(f);
  }
};

ProgramSpill::ProgramSpill(const std::string& dir, const std::string& stem)
    : impl_(std::make_unique<Impl>()) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir.empty() ? "." : dir, ec);
  std::string templ = (dir.empty() ? std::string(".") : dir) + "/" + stem + ".spill.XXXXXX";
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("cannot create the spill file " + templ + ": " + std::strerror(errno));
  ::unlink(name.data());  // unnamed from now on: a killed run leaves nothing behind
  impl_->f = ::fdopen(fd, "w+b");
  if (!impl_->f) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot open the spill file " + templ + ": " + std::strerror(err));
  }
  impl_->path = templ;
  impl_->w = std::make_unique<Writer>(impl_->f);
}

ProgramSpill::~ProgramSpill() = default;

void ProgramSpill::add(const ProgramFeatures& p) {
  try {
    write_program(*impl_->w, p);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot write the spill file " + impl_->path + ": " + e.what());
  }
  ends_.push_back(impl_->w->count());
}

int64_t ProgramSpill::bytes() const {
  return int64_t(impl_->w->count());
}

namespace {
/// Reads the spill back in order and calls kept(bytes, n) with the record of each program that
/// plan.keep keeps, passing over the others.
template <class Kept>
void for_each_kept(const BatchPlan& plan, std::FILE* in, const std::vector<uint64_t>& ends,
                   const std::string& spill_path, Kept&& kept) {
  if (plan.keep.size() != ends.size())
    throw std::runtime_error("the batch plan holds " + std::to_string(plan.keep.size()) +
                             " programs, the spill " + std::to_string(ends.size()));
  if (std::fflush(in) != 0 || std::fseek(in, 0, SEEK_SET) != 0)
    throw std::runtime_error("cannot read back the spill file " + spill_path + ": " +
                             std::strerror(errno));
  std::vector<char> buf;
  uint64_t at = 0;  // read position in the spill
  for (size_t i = 0; i < plan.keep.size(); ++i) {
    const uint64_t end = ends[i];
    if (!plan.keep[i]) {  // a program of a dropped footprint group: passed over
      if (std::fseek(in, long(end), SEEK_SET) != 0)
        throw std::runtime_error("cannot read back the spill file " + spill_path + ": " +
                                 std::strerror(errno));
      at = end;
      continue;
    }
    buf.resize(size_t(end - at));
    if (!buf.empty() && std::fread(buf.data(), 1, buf.size(), in) != buf.size())
      throw std::runtime_error("the spill file " + spill_path + " is short");
    at = end;
    kept(buf.data(), buf.size());
    if (buf.capacity() > (size_t(64) << 20)) std::vector<char>().swap(buf);
  }
}

/// The name at the start of a spilled program record (u64 length + bytes).
std::string spilled_name(const char* p, size_t n) {
  uint64_t len = 0;
  if (n >= 8) std::memcpy(&len, p, 8);
  if (n < 8 || len > n - 8) throw std::runtime_error("a spilled program record without a name");
  return std::string(p + 8, size_t(len));
}
}  // namespace

int64_t write_cache_streamed(const std::string& path, const CacheKey& key,
                             const SplitCounts& counts, const BatchPlan& plan, ProgramSpill& spill,
                             const std::function<void(const std::string&)>& on_kept,
                             bool caller_holds_lock) {
  spill.impl_->w->flush();
  uint64_t n_kept = 0;
  for (char k : plan.keep) n_kept += k ? 1 : 0;
  return write_cache_file(path, key, caller_holds_lock, [&](Writer& w) {
    write_body(
        w, counts, plan.batching, plan.groups, n_kept,
        [&](Writer& pw) {
          for_each_kept(plan, spill.impl_->f, spill.ends_, spill.impl_->path,
                        [&](const char* p, size_t n) {
                          pw.bytes(p, n);
                          if (on_kept) on_kept(spilled_name(p, n));
                        });
        },
        plan.batches);
  });
}

void spilled_kept_names(const BatchPlan& plan, ProgramSpill& spill,
                        const std::function<void(const std::string&)>& on_kept) {
  spill.impl_->w->flush();
  for_each_kept(plan, spill.impl_->f, spill.ends_, spill.impl_->path,
                [&](const char* p, size_t n) { on_kept(spilled_name(p, n)); });
}

namespace {
/// A read-only mapping of a whole file (unmapped and closed on destruction).
struct MappedFile {
  int fd = -1;
  const unsigned char* data = nullptr;
  size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data) ::munmap(const_cast<unsigned char*>(data), size);
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

CacheLoad read_cache(const std::string& path, const CacheKey& expected, bool rows_in_memory,
                     bool keep_sched_str,
                     const std::function<void(const ProgramFeatures&)>* visit) {
  CacheLoad out;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    out.reason = kNoCacheFile;
    return out;
  }
  MappedFile m;
  m.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (m.fd < 0 || ::fstat(m.fd, &st) != 0) {
    out.reason = std::string("cache unreadable: ") + std::strerror(errno);
    return out;
  }
  m.size = size_t(st.st_size);
  if (m.size > 0) {
    void* addr = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, m.fd, 0);
    if (addr == MAP_FAILED) {
      out.reason = std::string("cache unreadable: ") + std::strerror(errno);
      return out;
    }
    m.data = static_cast<const unsigned char*>(addr);
  }
  const unsigned char* header = m.data;
  const size_t got = std::min(m.size, kHeaderBytes);
  if (got >= 8 && std::memcmp(header, kCacheMagic, 8) != 0) {
    out.reason = "not an lcm cache file (bad magic)";
    return out;
  }
  if (got < kHeaderBytes) {
    out.reason = "truncated";
    return out;
  }
  uint32_t format, layout, key_crc, body_crc;
  uint64_t key_bytes, body_bytes;
  std::memcpy(&format, header + 8, 4);
  std::memcpy(&layout, header + 12, 4);
  std::memcpy(&key_bytes, header + 16, 8);
  std::memcpy(&body_bytes, header + 24, 8);
  std::memcpy(&key_crc, header + 32, 4);
  std::memcpy(&body_crc, header + 36, 4);
  if (format != kCacheFormatVersion) {
    out.reason =
        "format version " + std::to_string(format) + " → " + std::to_string(kCacheFormatVersion);
    return out;
  }
  if (layout != kFeatureLayoutVersion) {
    out.reason = "feature layout version " + std::to_string(layout) + " → " +
                 std::to_string(kFeatureLayoutVersion);
    return out;
  }
  const uint64_t file_size = uint64_t(m.size);
  if (key_bytes > file_size || body_bytes > file_size ||
      kHeaderBytes + key_bytes + body_bytes > file_size) {
    out.reason = "truncated";
    return out;
  }
  if (kHeaderBytes + key_bytes + body_bytes < file_size) {
    out.reason = "corrupt (trailing bytes after the body)";
    return out;
  }
  const unsigned char* key_p = m.data + kHeaderBytes;
  const unsigned char* body_p = key_p + key_bytes;
  try {
    // Key: compare every value, in order, naming the first difference.
    CacheKey cached;
    {
      if (mapped_crc(key_p, key_bytes) != key_crc)
        throw CorruptCache("corrupt (key checksum mismatch)");
      Reader r(key_p, key_bytes);
      uint32_t n = r.pod<uint32_t>();
      for (uint32_t i = 0; i < n; ++i) {
        std::string k = r.str();
        std::string v = r.str();
        cached.add(k, v);
      }
      if (r.left() != 0) throw CorruptCache("corrupt (trailing bytes in key)");
    }
    std::map<std::string, std::string> cmap(cached.values.begin(), cached.values.end());
    for (auto& [k, v] : expected.values) {
      auto it = cmap.find(k);
      if (it == cmap.end()) {
        out.reason = "config changed: " + k + " absent → " + (v.empty() ? "\"\"" : v);
        return out;
      }
      if (it->second != v) {
        out.reason = describe_mismatch(k, it->second, v);
        return out;
      }
      cmap.erase(it);
    }
    if (!cmap.empty()) {
      out.reason = "config changed: " + cmap.begin()->first + " no longer recorded";
      return out;
    }
    if (mapped_crc(body_p, body_bytes) != body_crc)
      throw CorruptCache("corrupt (checksum mismatch)");
    Reader r(body_p, body_bytes);
    read_body(r, out.counts, out.dataset, rows_in_memory, keep_sched_str, visit, out.programs,
              out.schedules);
  } catch (const CorruptCache& e) {
    out.dataset = Dataset{};
    out.counts = SplitCounts{};
    out.reason = e.what();
    return out;
  } catch (const std::bad_alloc&) {
    out.dataset = Dataset{};
    out.counts = SplitCounts{};
    out.reason = "corrupt (allocation failed while reading)";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace lcm::data
