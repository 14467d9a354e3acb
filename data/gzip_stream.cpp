// The byte stream of a data file (GzInput: zlib inflate of gzip members or plain pass-through,
// with every byte before a cut or corruption kept) and the input-format checks of reader.hpp
// (regular file, gzip magic bytes, other compression formats named).
#include "data/gzip_stream.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "data/reader.hpp"

namespace lcm::data {

namespace {
constexpr size_t kChunkBytes = size_t(1) << 20;  // uncompressed bytes per refill
constexpr size_t kRawBytes = size_t(1) << 18;    // file bytes per read
}  // namespace

bool is_gzip_magic(const unsigned char* m, size_t n) {
  return n >= 2 && m[0] == 0x1f && m[1] == 0x8b;
}

size_t read_file_head(const std::string& path, unsigned char* m, size_t n) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw DataError("cannot open data file " + path + ": " + std::strerror(errno));
  const size_t got = std::fread(m, 1, n, f);
  std::fclose(f);
  return got;
}

// ---------------------------------------------------------------------------------------------
// GzInput
// ---------------------------------------------------------------------------------------------
GzInput::~GzInput() {
  if (zinit_) inflateEnd(&zs_);
  if (f_) std::fclose(f_);
}

bool GzInput::open(const std::string& path, std::string& err) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) {
    err = errno ? std::strerror(errno) : "cannot open";
    return false;
  }
  buf_.resize(kChunkBytes);
  raw_.resize(kRawBytes);
  raw_len_ = std::fread(raw_.data(), 1, raw_.size(), f_);
  if (raw_len_ < raw_.size() && std::ferror(f_)) {
    err = std::strerror(errno);
    return false;
  }
  raw_total_ = int64_t(raw_len_);
  gzip_ = is_gzip_magic(reinterpret_cast<const unsigned char*>(raw_.data()), raw_len_);
  if (gzip_) {
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
      err = "zlib inflateInit2 failed";
      return false;
    }
    zinit_ = true;
    zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    zs_.avail_in = uInt(raw_len_);
  }
  return true;
}

bool GzInput::read_line(std::string& out, bool& ended, bool& overflow) {
  out.clear();
  ended = overflow = false;
  bool any = false;
  for (;;) {
    if (pos_ >= len_ && !refill()) break;
    any = true;
    const char* s = buf_.data() + pos_;
    size_t n = len_ - pos_;
    const void* nl = std::memchr(s, '\n', n);
    size_t take = nl ? size_t(static_cast<const char*>(nl) - s) : n;
    if (!overflow && out.size() + take <= kMaxRecordBytes)
      out.append(s, take);
    else
      overflow = true;
    pos_ += take;
    if (nl) {
      ++pos_;
      ended = true;
      break;
    }
  }
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return any;
}

void GzInput::flush_capture(size_t upto) {
  if (!cap_) return;
  size_t n = upto - cap_from_;
  if (!cap_overflow_ && cap_->size() + n <= kMaxRecordBytes)
    cap_->append(buf_.data() + cap_from_, n);
  else
    cap_overflow_ = true;
  cap_from_ = upto;
}

bool GzInput::refill() {
  if (eof_) return false;
  flush_capture(len_);
  line_here_upto(len_);
  base_ += int64_t(len_);
  pos_ = len_ = cap_from_ = line_scan_ = 0;
  if (stop_) {  // an error was met after the bytes already delivered: report it now
    eof_ = true;
    err_ = pending_err_;
    err_msg_ = pending_msg_;
    return false;
  }
  size_t n = gzip_ ? inflate_some() : read_plain();
  if (n == 0) {
    eof_ = true;
    err_ = pending_err_;
    err_msg_ = pending_msg_;
    return false;
  }
  len_ = n;
  return true;
}

size_t GzInput::read_plain() {
  size_t n = 0;
  if (raw_pos_ < raw_len_) {
    n = std::min(buf_.size(), raw_len_ - raw_pos_);
    std::memcpy(buf_.data(), raw_.data() + raw_pos_, n);
    raw_pos_ += n;
    return n;
  }
  n = std::fread(buf_.data(), 1, buf_.size(), f_);
  if (n == 0 && std::ferror(f_)) set_error(Z_ERRNO, std::strerror(errno));
  return n;
}

bool GzInput::read_raw() {
  if (raw_eof_) return false;
  size_t n = std::fread(raw_.data(), 1, raw_.size(), f_);
  if (n == 0) {
    raw_eof_ = true;
    if (std::ferror(f_)) set_error(Z_ERRNO, std::strerror(errno));
    return false;
  }
  raw_total_ += int64_t(n);
  zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
  zs_.avail_in = uInt(n);
  return true;
}

size_t GzInput::inflate_some() {
  zs_.next_out = reinterpret_cast<Bytef*>(buf_.data());
  zs_.avail_out = uInt(buf_.size());
  while (zs_.avail_out > 0 && !stop_) {
    if (zs_.avail_in == 0 && !read_raw()) {
      if (stop_) break;  // read error
      if (member_started_) set_error(Z_BUF_ERROR, "unexpected end of file (truncated gzip)");
      stop_ = true;
      break;
    }
    if (!member_started_) {  // a new member (the first, or one after Z_STREAM_END)
      inflateReset(&zs_);
      member_started_ = true;
    }
    int r = inflate(&zs_, Z_NO_FLUSH);
    if (r == Z_STREAM_END) {
      member_started_ = false;  // another member may follow (concatenated gzip)
    } else if (r == Z_BUF_ERROR) {
      if (zs_.avail_in != 0) break;  // no room in the output: deliver what we have
    } else if (r != Z_OK) {
      set_error(r == Z_MEM_ERROR ? Z_MEM_ERROR : Z_DATA_ERROR,
                zs_.msg ? zs_.msg : "corrupt compressed data");
    }
  }
  return buf_.size() - size_t(zs_.avail_out);
}

void GzInput::set_error(int code, const std::string& msg) {
  if (pending_err_ == Z_OK) {
    pending_err_ = code;
    pending_msg_ = msg;
  }
  stop_ = true;
}

void GzInput::line_here_upto(size_t upto) {
  if (line_scan_ < upto) lines_ += std::count(buf_.data() + line_scan_, buf_.data() + upto, '\n');
  line_scan_ = upto;
}

// ---------------------------------------------------------------------------------------------
// Input-format checks (reader.hpp)
// ---------------------------------------------------------------------------------------------
const char* unsupported_compression(const unsigned char* m, size_t n) {
  auto starts = [&](std::initializer_list<unsigned char> magic) {
    if (n < magic.size()) return false;
    size_t i = 0;
    for (unsigned char b : magic)
      if (m[i++] != b) return false;
    return true;
  };
  if (starts({0xFD, '7', 'z', 'X', 'Z', 0x00})) return "xz";
  if (starts({'B', 'Z', 'h'}) && n >= 4 && m[3] >= '1' && m[3] <= '9') return "bzip2";
  if (starts({0x28, 0xB5, 0x2F, 0xFD})) return "zstd";
  if (starts({0x04, 0x22, 0x4D, 0x18})) return "lz4";
  if (starts({'P', 'K', 0x03, 0x04})) return "zip";
  if (starts({'7', 'z', 0xBC, 0xAF, 0x27, 0x1C})) return "7z";
  return nullptr;
}

int64_t require_regular_data_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw DataError("cannot open data file " + path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw DataError(path + ": is a directory, not a data file");
  if (!S_ISREG(st.st_mode))
    throw DataError(path +
                    ": not a regular file (a pipe, device or socket); lcm reads data only "
                    "from regular files: it opens a file more than once (format detection, a "
                    "first-record check, the reading) and keys its cache on the file's size and "
                    "time; save the data to a file first");
  return int64_t(st.st_size);
}

void check_input_format(const std::string& path) {
  require_regular_data_file(path);
  unsigned char m[8] = {0};
  const size_t got = read_file_head(path, m, sizeof m);
  if (const char* kind = unsupported_compression(m, got))
    throw DataError(path + " is " + kind + "-compressed; lcm reads gzip or plain JSON/JSONL");
  // A name ending in .gz promises gzip: other bytes there (a plain file renamed, a damaged
  // download) are one error, not every line counted as malformed_json.
  const bool gz_name = path.size() >= 3 && path[path.size() - 3] == '.' &&
                       std::tolower((unsigned char)path[path.size() - 2]) == 'g' &&
                       std::tolower((unsigned char)path[path.size() - 1]) == 'z';
  if (gz_name && !is_gzip_magic(m, got))
    throw DataError(
        path + ": named .gz but is not gzip data (" +
        (got == 0 ? std::string("the file is empty") : std::string("no gzip magic bytes 1f 8b")) +
        "); compress it with gzip, or drop the .gz from the name if it is plain "
        "JSON/JSONL");
}

}  // namespace lcm::data
