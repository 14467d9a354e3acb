// The parallel gzip writer of the synthetic generator (write_synth_file, synth.hpp): chunks of
// programs are generated and raw-deflated on worker threads, in order, and stitched into one
// gzip member (pigz-style: sync-flushed chunks, CRC-32 combined), written atomically.
#include <rapidjson/stringbuffer.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "data/ordered_pool.hpp"
#include "data/synth.hpp"
#include "data/synth_internal.hpp"
#include "util/atomic_file.hpp"

namespace lcm::data {
namespace {

/// One chunk of programs, deflated, with what the gzip trailer and SynthStats need.
struct Chunk {
  std::string deflated;
  uLong crc = 0;
  int64_t raw_bytes = 0;
  int64_t schedules = 0;
};

/// Raw-deflates `data` in one call (no header); a final chunk ends the stream, others end on a
/// byte boundary with a sync flush so that chunks can be concatenated (as pigz does).
std::string raw_deflate(const std::string& data, int level, bool last) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("synth: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&zs, uLong(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = uInt(data.size());
  size_t produced = 0;
  int flush = last ? Z_FINISH : Z_SYNC_FLUSH;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    zs.avail_out = uInt(out.size() - produced);
    int rc = deflate(&zs, flush);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      throw std::runtime_error("synth: deflate failed");
    }
    if ((last && rc == Z_STREAM_END) || (!last && zs.avail_in == 0 && zs.avail_out > 0)) break;
    out.resize(out.size() * 2);
  }
  deflateEnd(&zs);
  out.resize(produced);
  return out;
}

/// A raw deflate stream (no header) fed piece by piece; finish() ends it: a final chunk ends the
/// stream, others end on a byte boundary with a sync flush so that chunks can be concatenated (as
/// pigz does). At levels 1-9 zlib's output does not depend on how the input is split (Z_NO_FLUSH
/// waits for enough lookahead), so the bytes are those of one deflate call over the whole chunk
/// and only the compressed text is held. Level 0 (stored blocks, whose lengths follow the buffer
/// sizes) keeps the chunk's text and compresses it in one raw_deflate call at finish().
class Deflater {
 public:
  explicit Deflater(int level) : level_(level) {
    if (deflateInit2(&zs_, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("synth: deflateInit2 failed");
  }
  ~Deflater() { deflateEnd(&zs_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  /// Compresses `n` bytes of `data` (appended to out(); CRC-32 and size updated).
  void feed(const char* data, size_t n) {
    crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(data), n);
    raw_bytes_ += int64_t(n);
    if (level_ == 0) {
      stored_.append(data, n);
      return;
    }
    while (n > 0) {  // in pieces of at most 1 GiB (avail_in is 32-bit)
      const size_t piece = std::min<size_t>(n, size_t(1) << 30);
      run(data, piece, Z_NO_FLUSH);
      data += piece;
      n -= piece;
    }
  }
  /// Ends the chunk (Z_FINISH when `last`, else Z_SYNC_FLUSH).
  void finish(bool last) {
    if (level_ == 0)
      out_ = raw_deflate(stored_, 0, last);
    else
      run(nullptr, 0, last ? Z_FINISH : Z_SYNC_FLUSH);
  }

  std::string& out() { return out_; }
  uLong crc() const { return crc_; }
  int64_t raw_bytes() const { return raw_bytes_; }

 private:
  void run(const char* data, size_t n, int flush) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    zs_.avail_in = uInt(n);
    for (;;) {
      if (out_.size() - produced_ < 64 * 1024 || out_.size() - produced_ < n / 4 + 64)
        out_.resize(std::max<size_t>(out_.size() * 2, produced_ + n / 4 + 64 * 1024));
      zs_.next_out = reinterpret_cast<Bytef*>(&out_[produced_]);
      zs_.avail_out = uInt(std::min<size_t>(out_.size() - produced_, size_t(1) << 30));
      const uInt avail_out = zs_.avail_out;
      const int rc = deflate(&zs_, flush);
      produced_ += avail_out - zs_.avail_out;
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("synth: deflate failed");
      if (flush == Z_FINISH ? rc == Z_STREAM_END : (zs_.avail_in == 0 && zs_.avail_out > 0)) break;
    }
    if (flush != Z_NO_FLUSH) out_.resize(produced_);
  }

  int level_;
  z_stream zs_{};
  std::string stored_;  // level 0: the chunk's text until finish()
  std::string out_;
  size_t produced_ = 0;
  uLong crc_ = crc32_z(0L, Z_NULL, 0);
  int64_t raw_bytes_ = 0;
};

/// JSON text gathered before it is handed to the deflater (bytes; the memory of one program's
/// text does not grow with its schedule count).
constexpr size_t kDrainBytes = size_t(1) << 20;

}  // namespace

SynthStats write_synth_file(const std::string& path, const SynthOptions& opt,
                            const SynthTimeModel& tm) {
  synth_detail::check_options(opt);
  const int64_t per_chunk =
      opt.chunk_programs > 0 ? opt.chunk_programs
                             : std::max<int64_t>(1, 4096 / std::max(1, opt.schedules_per_program));
  const int64_t n_chunks = std::max<int64_t>(1, (opt.programs + per_chunk - 1) / per_chunk);
  int threads =
      opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::min<int64_t>(threads, n_chunks));
  const int64_t window = 2 * int64_t(threads) + 2;

  std::filesystem::path target(path);
  if (target.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec)
      throw std::runtime_error("synth: cannot create directory " + target.parent_path().string() +
                               ": " + ec.message());
  }
  require_regular_output(path);  // a link, FIFO or device at --out is never replaced
  // What a killed earlier write of this output left (this host's dead processes only).
  remove_stale_temps(target.has_parent_path() ? target.parent_path().string() : ".",
                     {target.filename().string()});
  const std::string tmp = temp_path_for(path);
  FILE* f = std::fopen(tmp.c_str(), "wbe");
  // Errors name `path`, the file asked for (never its temp file).
  if (!f)
    throw std::runtime_error("synth: cannot write " + path + ": " +
                             temp_create_reason(path, errno));

  SynthStats st;
  st.programs = opt.programs;
  static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0,
                                           0,    0,    0, 0, 3};  // gzip, mtime 0, unix
  bool io_ok = std::fwrite(header, 1, sizeof header, f) == sizeof header;
  uLong crc = crc32_z(0L, Z_NULL, 0);
  uint64_t total = 0;
  int64_t compressed = sizeof header;
  std::string error;
  int64_t next_chunk = 0;
  // Chunk k holds programs [k·per_chunk, (k+1)·per_chunk): generated, serialised and deflated on
  // a worker, appended here in chunk order, so the bytes do not depend on the thread count.
  auto make_chunk = [&](int64_t k) {
    Chunk ch;
    Deflater dz(opt.compression_level);
    rapidjson::StringBuffer sb;
    auto drain = [&](size_t at_least) {
      if (sb.GetSize() < at_least) return;
      dz.feed(sb.GetString(), sb.GetSize());
      sb.Clear();
    };
    Schedule s;
    int64_t lo = k * per_chunk, hi = std::min(opt.programs, lo + per_chunk);
    for (int64_t i = lo; i < hi; ++i) {
      // schedule by schedule: one program's schedules are never all in memory
      synth_detail::ProgramGenerator g(opt, i, tm);
      synth_detail::RecordJson json(sb, i, opt.seed);
      bool null_times = false;
      for (int si = 0; g.next(s, null_times); ++si) {
        if (si == 0) json.head(g.record());  // after schedule 0: initial_execution_time
        json.schedule(g.record(), s, null_times);
        ++ch.schedules;
        drain(kDrainBytes);
      }
      json.tail();
      sb.Put('\n');
    }
    drain(0);
    dz.finish(k == n_chunks - 1);
    ch.raw_bytes = dz.raw_bytes();
    ch.crc = dz.crc();
    ch.deflated = std::move(dz.out());
    return ch;
  };
  auto append_chunk = [&](Chunk&& ch) {
    io_ok =
        io_ok && std::fwrite(ch.deflated.data(), 1, ch.deflated.size(), f) == ch.deflated.size();
    crc = crc32_combine(crc, ch.crc, z_off_t(ch.raw_bytes));
    total += uint64_t(ch.raw_bytes);
    compressed += int64_t(ch.deflated.size());
    st.schedules += ch.schedules;
    if (!io_ok) throw std::runtime_error("write failed");
  };
  try {
    run_ordered<int64_t, Chunk>(
        threads, window,
        [&](int64_t& k) {
          if (next_chunk >= n_chunks) return false;
          k = next_chunk++;
          return true;
        },
        make_chunk, append_chunk);
  } catch (const std::exception& e) {  // a worker's error, a write failure, no threads
    error = e.what();
  }
  unsigned char trailer[8];
  for (int i = 0; i < 4; ++i) trailer[i] = static_cast<unsigned char>((crc >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i)
    trailer[4 + i] = static_cast<unsigned char>((total >> (8 * i)) & 0xff);
  io_ok = io_ok && error.empty() && std::fwrite(trailer, 1, 8, f) == 8;
  io_ok = io_ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  int saved_errno = errno;
  io_ok = (std::fclose(f) == 0) && io_ok;
  if (!io_ok || !error.empty()) {
    std::remove(tmp.c_str());
    throw std::runtime_error("synth: failed writing " + path + ": " +
                             (error.empty() ? std::string(std::strerror(saved_errno)) : error));
  }
  if (!output_refusal(path).empty()) {  // made a link, FIFO or device while it was written
    std::remove(tmp.c_str());
    require_regular_output(path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("synth: cannot write " + path + ": " + msg +
                             " (renaming its temp file over it)");
  }
  st.uncompressed_bytes = int64_t(total);
  st.compressed_bytes = compressed + 8;
  return st;
}

}  // namespace lcm::data
