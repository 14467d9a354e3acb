// The byte stream under RecordSource (internal to data/): a data file's uncompressed text, gzip
// (zlib inflate, multi-member) or plain, as a RapidJSON input stream with byte capture, line
// splitting and line counting; plus the magic-byte checks of the input-format detection.
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lcm::data {

/// Longest record (one JSONL line or one captured JSON value) delivered, in bytes: RapidJSON's
/// offsets are 32-bit. Longer records are dropped by the stream and skipped by RecordSource.
constexpr size_t kMaxRecordBytes = size_t(1) << 30;

/// True when the first `n` bytes `m` of a file start with the gzip magic bytes 1f 8b.
bool is_gzip_magic(const unsigned char* m, size_t n);

/// Reads up to `n` bytes from the start of `path` into `m` and returns how many were read.
/// Throws DataError "cannot open data file <path>: <why>" when the file cannot be opened.
size_t read_file_head(const std::string& path, unsigned char* m, size_t n);

/// The uncompressed text of one data file as a RapidJSON input stream (Peek/Take/Tell), with
/// capture of the consumed bytes (begin_capture/end_capture), line reads (read_line) and the
/// 1-based line number of the read position. gzip (magic bytes 1f 8b, one or several members)
/// is inflated with zlib's z_stream in blocks of up to 1 MiB; any other file is passed through.
/// Every byte decoded before a truncation or corruption is delivered; the zlib error is then
/// reported by error() at the end of the input: Z_BUF_ERROR (truncated gzip), Z_DATA_ERROR
/// (bad deflate data, CRC or length trailer, trailing garbage), Z_MEM_ERROR, or Z_ERRNO (a read
/// error; error_message() says why). Single-threaded.
class GzInput {
 public:
  typedef char Ch;

  GzInput() = default;
  ~GzInput();
  GzInput(const GzInput&) = delete;
  GzInput& operator=(const GzInput&) = delete;

  /// Opens `path`; gzip (magic bytes 1f 8b, one or several members) is inflated with zlib's
  /// z_stream, any other file is passed through. False with `err` set when it cannot be opened.
  bool open(const std::string& path, std::string& err);

  // --- RapidJSON input stream concept ---
  Ch Peek() {
    if (pos_ < len_) return buf_[pos_];
    return refill() ? buf_[pos_] : '\0';
  }
  Ch Take() {
    Ch c = Peek();
    if (pos_ < len_) ++pos_;
    return c;
  }
  size_t Tell() const { return size_t(base_ + int64_t(pos_)); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }

  /// Starts copying every consumed byte into `dst` (cleared); stops at end_capture().
  void begin_capture(std::string* dst) {
    dst->clear();
    cap_ = dst;
    cap_from_ = pos_;
    cap_overflow_ = false;
  }
  /// Stops capturing; false when the capture exceeded kMaxRecordBytes (then `dst` is partial).
  bool end_capture() {
    flush_capture(pos_);
    cap_ = nullptr;
    return !cap_overflow_;
  }

  /// Reads one line (without '\n' / trailing '\r') into `out`. Returns false at end of input with
  /// nothing read. `ended` = the line ended with '\n'; `overflow` = it was longer than
  /// kMaxRecordBytes (content dropped).
  bool read_line(std::string& out, bool& ended, bool& overflow);

  /// 1-based line number of the current position (counts '\n' lazily, linear overall).
  int64_t line_here() {
    if (line_scan_ < pos_) {
      lines_ += std::count(buf_.data() + line_scan_, buf_.data() + pos_, '\n');
      line_scan_ = pos_;
    }
    return lines_ + 1;
  }

  /// Skips JSON whitespace; returns the next byte without consuming it ('\0' at end).
  Ch skip_ws() {
    for (;;) {
      Ch c = Peek();
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
        ++pos_;
      else
        return c;
    }
  }

  /// The bytes currently buffered after the read position (for container detection).
  const char* window() const { return buf_.data() + pos_; }
  size_t window_size() const { return len_ - pos_; }
  /// Makes sure at least some bytes are buffered; false at end of input.
  bool fill() { return pos_ < len_ || refill(); }

  /// Bytes of uncompressed text consumed so far.
  int64_t consumed() const { return base_ + int64_t(pos_); }
  /// Bytes of the file consumed so far (compressed bytes for gzip).
  int64_t raw_offset() const { return gzip_ ? raw_total_ - int64_t(zs_.avail_in) : consumed(); }
  /// zlib error seen at end of input: Z_OK, Z_BUF_ERROR (truncated gzip), Z_DATA_ERROR, Z_ERRNO...
  int error() const { return err_; }
  const std::string& error_message() const { return err_msg_; }

 private:
  void flush_capture(size_t upto);
  /// Moves to the next block of text; false at the end of the input (then error() is set).
  bool refill();
  /// Plain file: the buffered head, then fread.
  size_t read_plain();
  /// Fills the raw input buffer when empty; false at end of file (or a read error, recorded).
  bool read_raw();
  /// Inflates into buf_ until it is full, the input ends or an error occurs. Every byte decoded
  /// before an error is returned; the error is reported at the next refill (stop_).
  size_t inflate_some();
  void set_error(int code, const std::string& msg);
  void line_here_upto(size_t upto);

  std::FILE* f_ = nullptr;
  bool gzip_ = false;
  z_stream zs_;
  bool zinit_ = false;
  bool member_started_ = true;  // the first member starts at once (inflateInit2)
  std::vector<char> raw_;       // compressed (or plain) input read ahead
  size_t raw_len_ = 0, raw_pos_ = 0;
  int64_t raw_total_ = 0;  // file bytes read into raw_ so far
  bool raw_eof_ = false;
  bool stop_ = false;  // no more input: an error (pending_err_) or the end of the file
  int pending_err_ = Z_OK;
  std::string pending_msg_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  int64_t base_ = 0;  // uncompressed offset of buf_[0]
  bool eof_ = false;
  int err_ = Z_OK;
  std::string err_msg_;
  std::string* cap_ = nullptr;
  size_t cap_from_ = 0;
  bool cap_overflow_ = false;
  int64_t lines_ = 0;
  size_t line_scan_ = 0;
};

}  // namespace lcm::data
