// RecordSource (zlib input, container detection, JSONL line splitting, legacy member capture with
// RapidJSON's SAX reader) and parse_program (RapidJSON DOM → data::Program), see reader.hpp.
// Every malformed input ends as a counted, named SkipEvent or a Schedule::parse_problem.
#include "data/reader.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

namespace lcm::data {

namespace {

constexpr size_t kChunkBytes = size_t(1) << 20;      // zlib read size
constexpr size_t kMaxRecordBytes = size_t(1) << 30;  // RapidJSON offsets are 32-bit
constexpr int kMaxTreeDepth = 64;                    // recursion guards for malformed input
constexpr int kMaxExprDepth = 256;

// ---------------------------------------------------------------------------------------------
// zlib input stream (RapidJSON stream concept) with byte capture and line counting.
// ---------------------------------------------------------------------------------------------
class GzInput {
 public:
  typedef char Ch;

  ~GzInput() {
    if (zinit_) inflateEnd(&zs_);
    if (f_) std::fclose(f_);
  }

  /// Opens `path`; gzip (magic bytes 1f 8b, one or several members) is inflated with zlib's
  /// z_stream, any other file is passed through. False with `err` set when it cannot be opened.
  bool open(const std::string& path, std::string& err) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) {
      err = errno ? std::strerror(errno) : "cannot open";
      return false;
    }
    buf_.resize(kChunkBytes);
    raw_.resize(size_t(1) << 18);
    raw_len_ = std::fread(raw_.data(), 1, raw_.size(), f_);
    if (raw_len_ < raw_.size() && std::ferror(f_)) {
      err = std::strerror(errno);
      return false;
    }
    raw_total_ = int64_t(raw_len_);
    gzip_ = raw_len_ >= 2 && (unsigned char)raw_[0] == 0x1f && (unsigned char)raw_[1] == 0x8b;
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
  bool read_line(std::string& out, bool& ended, bool& overflow) {
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

  int64_t consumed() const { return base_ + int64_t(pos_); }
  /// Bytes of the file consumed so far (compressed bytes for gzip).
  int64_t raw_offset() const { return gzip_ ? raw_total_ - int64_t(zs_.avail_in) : consumed(); }
  /// zlib error seen at end of input: Z_OK, Z_BUF_ERROR (truncated gzip), Z_DATA_ERROR, Z_ERRNO...
  int error() const { return err_; }
  const std::string& error_message() const { return err_msg_; }

 private:
  void flush_capture(size_t upto) {
    if (!cap_) return;
    size_t n = upto - cap_from_;
    if (!cap_overflow_ && cap_->size() + n <= kMaxRecordBytes)
      cap_->append(buf_.data() + cap_from_, n);
    else
      cap_overflow_ = true;
    cap_from_ = upto;
  }

  bool refill() {
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

  /// Plain file: the buffered head, then fread.
  size_t read_plain() {
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

  /// Fills the raw input buffer when empty; false at end of file (or a read error, recorded).
  bool read_raw() {
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

  /// Inflates into buf_ until it is full, the input ends or an error occurs. Every byte decoded
  /// before an error is returned; the error is reported at the next refill (stop_).
  size_t inflate_some() {
    zs_.next_out = reinterpret_cast<Bytef*>(buf_.data());
    zs_.avail_out = uInt(buf_.size());
    while (zs_.avail_out > 0 && !stop_) {
      if (zs_.avail_in == 0 && !read_raw()) {
        if (stop_) break;  // read error
        if (member_started_)
          set_error(Z_BUF_ERROR, "unexpected end of file (truncated gzip)");
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

  void set_error(int code, const std::string& msg) {
    if (pending_err_ == Z_OK) {
      pending_err_ = code;
      pending_msg_ = msg;
    }
    stop_ = true;
  }
  void line_here_upto(size_t upto) {
    if (line_scan_ < upto) lines_ += std::count(buf_.data() + line_scan_, buf_.data() + upto, '\n');
    line_scan_ = upto;
  }

  std::FILE* f_ = nullptr;
  bool gzip_ = false;
  z_stream zs_;
  bool zinit_ = false;
  bool member_started_ = true;  // the first member starts at once (inflateInit2)
  std::vector<char> raw_;        // compressed (or plain) input read ahead
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

/// SAX handler that keeps only the last string value (used to read a member key).
struct KeyHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, KeyHandler> {
  std::string key;
  bool is_string = false;
  bool String(const char* s, rapidjson::SizeType n, bool) {
    key.assign(s, n);
    is_string = true;
    return true;
  }
  bool Default() { return true; }
};

/// Record-level field names: a top-level object starting with one of these is a program record.
bool is_record_key(const std::string& k) {
  static const char* const keys[] = {
      "program_name", "program_annotation", "schedules_list", "initial_execution_time",
      "filename",     "node_name",          "parameters",     "exploration_trace",
      "search_time",  "best_schedule"};
  for (const char* r : keys)
    if (k == r) return true;
  return false;
}

/// True when the object `v` has a record-level member (is_record_key).
bool has_record_key(const rapidjson::Value& v) {
  if (!v.IsObject()) return false;
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m)
    if (is_record_key(std::string(m->name.GetString(), m->name.GetStringLength()))) return true;
  return false;
}

/// Parses [b, e) as exactly one JSON value (surrounding whitespace allowed) into `d`; false when
/// the text is not one whole value (a syntax error, a value continued on later lines, two values).
bool parse_whole(const char* b, const char* e, rapidjson::Document& d) {
  d.Parse<rapidjson::kParseIterativeFlag>(b, size_t(e - b));
  return !d.HasParseError();
}

/// The last byte of [b, e) that is not a space, tab or '\r'; '\0' when there is none.
char last_non_blank(const char* b, const char* e) {
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) --e;
  return e > b ? e[-1] : '\0';
}

/// The first string key after the `{` at `p` when it is on the same line (or, with
/// `across_lines`, after any whitespace), else "".
std::string first_key_on_line(const char* p, const char* e, bool across_lines = false) {
  const char* q = p + 1;
  while (q < e && (*q == ' ' || *q == '\t' || (across_lines && (*q == '\r' || *q == '\n')))) ++q;
  if (q >= e || *q != '"') return "";
  const char* k = q + 1;
  while (k < e && *k != '"' && *k != '\\' && *k != '\n') ++k;
  if (k >= e || *k != '"') return "";
  return std::string(q + 1, k);
}

/// True when a line after the first one in the text [b, e) (b at the first line's first byte) is
/// one whole program record on its own: a JSON object with a record field (is_record_key), the
/// line being exactly that object, or a line starting with `{` and a record field that runs past
/// e (a long line not buffered whole); and the non-blank line before it does not end with ':'
/// (a legacy `"name":` line, whose record follows on the next line). Such a line means JSON
/// Lines whose first line(s) are bad. A legacy container's or a pretty-printed record's later
/// lines are members (`"name": {`), keys, or parts of objects (`{`, `{...},`, `{...}}`): none
/// matches.
bool later_line_is_record(const char* b, const char* e) {
  const char* nl = static_cast<const char*>(std::memchr(b, '\n', size_t(e - b)));
  if (!nl) return false;
  bool prev_colon = last_non_blank(b, nl) == ':';
  rapidjson::Document d;
  for (const char* p = nl + 1; p < e;) {
    const char* le = static_cast<const char*>(std::memchr(p, '\n', size_t(e - p)));
    const char* t = p;
    while (t < (le ? le : e) && (*t == ' ' || *t == '\t' || *t == '\r')) ++t;
    if (t == (le ? le : e)) {  // blank line
      if (!le) break;
      p = le + 1;
      continue;
    }
    if (*t == '{' && !prev_colon) {
      if (!le) return is_record_key(first_key_on_line(t, e));  // runs past the window
      if (parse_whole(t, le, d) && has_record_key(d)) return true;
    }
    if (!le) break;
    prev_colon = last_non_blank(t, le) == ':';
    p = le + 1;
  }
  return false;
}

/// `function_gramschmidt` from ".../function_gramschmidt_explored_schedules.json[.gz]".
std::string name_from_path(const std::string& path) {
  std::string b =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  for (const char* suf : {".gz", ".json", ".jsonl", "_explored_schedules"}) {
    size_t n = std::strlen(suf);
    if (b.size() > n && b.compare(b.size() - n, n, suf) == 0) b.resize(b.size() - n);
  }
  return b;
}

/// Best-effort program name from the start of a (possibly partial) JSONL record, for messages.
std::string sniff_program_name(const std::string& text) {
  size_t k = text.find("\"program_name\"");
  if (k == std::string::npos || k > 65536) return "";
  size_t q = text.find('"', text.find(':', k + 14) + 1);
  if (q == std::string::npos) return "";
  size_t e = text.find('"', q + 1);
  if (e == std::string::npos || e - q > 512) return "";
  return text.substr(q + 1, e - q - 1);
}

std::string zlib_reason(int err) {
  return err == Z_BUF_ERROR ? "truncated_gzip" : "corrupt_gzip";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RecordSource
// ---------------------------------------------------------------------------------------------
struct RecordSource::Impl {
  enum class Layout { Jsonl, Legacy, Bare };
  std::string path;
  SkipLog* log = nullptr;
  GzInput in;
  Layout layout = Layout::Jsonl;
  bool gzip = false;
  int64_t size = 0;
  bool done = false;
  bool first_member = true;  // legacy: no ',' expected before the first member
  bool error_logged = false;
  int64_t records_skipped = 0;  // records met but not delivered (partial, too long, malformed)
  int64_t line_no = 0;  // JSONL: lines read so far
  std::string line;     // JSONL scratch (capacity reused)
  std::string bare_name;
  rapidjson::Reader reader;

  void skip(const char* reason, int64_t line, const std::string& program,
            const std::string& detail) {
    SkipEvent e;
    e.level = "line";
    e.reason = reason;
    e.file = path;
    e.line = line;
    e.program = program;
    e.detail = detail;
    log->add(e);
  }

  /// Logs the zlib error once (truncation/corruption), naming the partial record if any.
  void log_stream_error(int64_t line, const std::string& program, const std::string& what) {
    if (error_logged) return;
    error_logged = true;
    skip(zlib_reason(in.error()).c_str(), line, program,
         in.error_message() + (what.empty() ? "" : "; " + what));
  }

  void detect() {
    // Peek at the first buffered bytes: BOM, whitespace, '{', whitespace, "key".
    if (!in.fill()) {
      // Empty (or unreadable-as-gzip) input: no records.
      if (in.error() != Z_OK) log_stream_error(1, "", "no data");
      done = true;
      return;
    }
    const char* w = in.window();
    size_t n = in.window_size(), i = 0;
    if (n >= 3 && (unsigned char)w[0] == 0xEF && (unsigned char)w[1] == 0xBB &&
        (unsigned char)w[2] == 0xBF) {
      i = 3;
      in.Take(), in.Take(), in.Take();  // consume the BOM
    }
    while (i < n && (w[i] == ' ' || w[i] == '\t' || w[i] == '\r' || w[i] == '\n')) ++i;
    if (i >= n || w[i] != '{') {
      layout = Layout::Jsonl;  // not an object: line-by-line, each bad line is reported
      return;
    }
    const char* first = w + i;
    const char* end = w + n;
    const char* nl = static_cast<const char*>(std::memchr(first, '\n', size_t(end - first)));
    const std::string key = first_key_on_line(first, nl ? nl : end);
    rapidjson::Document d;
    if (parse_whole(first, nl ? nl : end, d)) {
      // The first line is one whole JSON value. A legacy container on one line (or one
      // `{name: record}` per line) has a member whose value is a program record; a record is
      // JSON Lines; anything else (a header `{"note": ...}`, `{}`) is a bad first line of a
      // JSON Lines file: one counted skip, and the rest is read line by line.
      bool container = false;
      if (d.IsObject() && !has_record_key(d))
        for (auto m = d.MemberBegin(); m != d.MemberEnd() && !container; ++m)
          container = has_record_key(m->value);
      layout = container ? Layout::Legacy : Layout::Jsonl;
    } else if (is_record_key(key) && (!nl || last_non_blank(first, nl) == '}')) {
      // A record line longer than the buffered window (its end is not seen), or a malformed
      // one (it ends with '}' where a pretty-printed record's first line ends with ',' or '{').
      layout = Layout::Jsonl;
    } else if (later_line_is_record(first, end)) {
      // JSON Lines whose first lines are bad (cut, malformed, a header object): each becomes
      // one counted line skip of parse_program, the rest of the file is read line by line.
      layout = Layout::Jsonl;
    } else if (!is_record_key(first_key_on_line(first, end, true))) {
      // `{"name": {`, `{"name":`, `{` then `"name": {`: a legacy container.
      layout = Layout::Legacy;
    } else {
      // `{"program_name": ...` (or `{` then `"filename": ...`) continued on the next lines: a
      // bare (pretty-printed) record.
      layout = Layout::Bare;
      bare_name = name_from_path(path);
    }
    if (layout != Layout::Jsonl) {
      in.skip_ws();
      if (layout == Layout::Legacy) in.Take();  // the container's '{'
    }
  }

  bool next_jsonl(RawRecord& out) {
    bool ended = false, overflow = false;
    while (in.read_line(line, ended, overflow)) {
      ++line_no;
      if (!ended && in.error() != Z_OK &&
          line.find_first_not_of(" \t\r") != std::string::npos) {
        ++records_skipped;
        log_stream_error(
            line_no, sniff_program_name(line),
            "partial last record of " + std::to_string(line.size()) + " bytes dropped");
        done = true;
        return false;
      }
      if (overflow) {
        ++records_skipped;
        skip("record_too_long", line_no, sniff_program_name(line), "line longer than 1 GiB");
        continue;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
      out.json.swap(line);
      out.file = path;
      out.line = line_no;
      out.name_hint.clear();
      return true;
    }
    if (in.error() != Z_OK) log_stream_error(line_no + 1, "", "after the last complete line");
    done = true;
    return false;
  }

  /// Parses one JSON value from the stream, capturing its exact bytes in out.json.
  bool capture_value(RawRecord& out, const std::string& name) {
    int64_t line = in.line_here();
    in.begin_capture(&out.json);
    rapidjson::BaseReaderHandler<> null_handler;
    rapidjson::ParseResult r =
        reader.Parse<rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseNumbersAsStringsFlag |
                     rapidjson::kParseIterativeFlag>(in, null_handler);
    bool fits = in.end_capture();
    if (r.IsError()) {
      ++records_skipped;
      if (in.error() != Z_OK)
        log_stream_error(line, name, "partial record dropped");
      else
        skip("malformed_json", line, name,
             std::string(rapidjson::GetParseError_En(r.Code())) + " at byte " +
                 std::to_string(r.Offset()) + " of the file; rest of the file not read");
      done = true;
      return false;
    }
    if (!fits) {
      ++records_skipped;
      skip("record_too_long", line, name, "record longer than 1 GiB");
      return false;  // the stream is still in sync: continue with the next member
    }
    out.file = path;
    out.line = line;
    out.name_hint = name;
    return true;
  }

  bool next_legacy(RawRecord& out) {
    for (;;) {
      char c = in.skip_ws();
      if (c == '}') {
        in.Take();
        // Another container may follow (concatenated files, or one `{name: record}` per line).
        char after = in.skip_ws();
        if (after == '{') {
          in.Take();
          first_member = true;
          continue;
        }
        done = true;
        if (after != '\0')
          skip("malformed_json", in.line_here(), "", "content after the top-level object ignored");
        else if (in.error() != Z_OK)
          log_stream_error(in.line_here(), "", "after the last complete program");
        return false;
      }
      if (!first_member) {
        if (c != ',') return fail_syntax("expected ',' or '}' between programs");
        in.Take();
        c = in.skip_ws();
      }
      if (c != '"') return fail_syntax("expected a program name (string key)");
      KeyHandler kh;
      rapidjson::ParseResult r = reader.Parse<rapidjson::kParseStopWhenDoneFlag>(in, kh);
      if (r.IsError() || !kh.is_string) return fail_syntax("bad program name key");
      if (in.skip_ws() != ':')
        return fail_syntax("expected ':' after program name \"" + kh.key + "\"");
      in.Take();
      in.skip_ws();  // so that the record's line is that of its first byte
      first_member = false;
      if (capture_value(out, kh.key)) return true;
      if (done) return false;
    }
  }

  bool next_bare(RawRecord& out) {
    for (;;) {
      char c = in.skip_ws();
      if (c == '\0') {
        done = true;
        if (in.error() != Z_OK)
          log_stream_error(in.line_here(), "", "after the last complete record");
        return false;
      }
      if (capture_value(out, bare_name)) return true;
      if (done) return false;
    }
  }

  bool fail_syntax(const std::string& what) {
    ++records_skipped;  // the program (or the rest of the file) that could not be read
    if (in.Peek() == '\0' && in.error() != Z_OK)
      log_stream_error(in.line_here(), "", what);
    else if (in.Peek() == '\0')
      skip("malformed_json", in.line_here(), "", "unexpected end of file: " + what);
    else
      skip("malformed_json", in.line_here(), "",
           what + " at byte " + std::to_string(in.consumed()));
    done = true;
    return false;
  }
};

namespace {
// The expr_type values Tiramisu's generators write (data-format.md, verified on the sample and the
// raw files; "cast" per data-format.md). Anything else is garbage or a format this reader does
// not know: the program is skipped (program/unknown_expr_type) instead of encoded as "other".
constexpr const char* kKnownExprTypes[] = {"access", "value", "add",  "sub",   "mul", "div",
                                           "sqrt",   "max",   "min",  "minus", "cast"};
}  // namespace

bool is_known_expr_type(const std::string& type) {
  for (const char* t : kKnownExprTypes)
    if (type == t) return true;
  return false;
}

std::string known_expr_types_text() {
  std::string s;
  for (const char* t : kKnownExprTypes) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

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
    throw DataError(path + ": not a regular file (a pipe, device or socket); lcm reads data only "
                    "from regular files: it opens a file more than once (format detection, a "
                    "first-record check, the reading) and keys its cache on the file's size and "
                    "time; save the data to a file first");
  return int64_t(st.st_size);
}

void check_input_format(const std::string& path) {
  require_regular_data_file(path);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw DataError("cannot open data file " + path + ": " + std::strerror(errno));
  unsigned char m[8] = {0};
  const size_t got = std::fread(m, 1, sizeof m, f);
  std::fclose(f);
  if (const char* kind = unsupported_compression(m, got))
    throw DataError(path + " is " + kind + "-compressed; lcm reads gzip or plain JSON/JSONL");
  // A name ending in .gz promises gzip: other bytes there (a plain file renamed, a damaged
  // download) are one error, not every line counted as malformed_json.
  const bool gz_name = path.size() >= 3 && path[path.size() - 3] == '.' &&
                       std::tolower((unsigned char)path[path.size() - 2]) == 'g' &&
                       std::tolower((unsigned char)path[path.size() - 1]) == 'z';
  if (gz_name && !(got >= 2 && m[0] == 0x1f && m[1] == 0x8b))
    throw DataError(path + ": named .gz but is not gzip data (" +
                    (got == 0 ? std::string("the file is empty") : std::string("no gzip magic bytes 1f 8b")) +
                    "); compress it with gzip, or drop the .gz from the name if it is plain JSON/JSONL");
}

RecordSource::RecordSource(const std::string& path, SkipLog& log) : impl_(new Impl) {
  impl_->path = path;
  impl_->log = &log;
  impl_->size = require_regular_data_file(path);
  // Magic bytes, read directly (zlib would silently read a plain file transparently).
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    unsigned char m[2] = {0, 0};
    size_t got = std::fread(m, 1, 2, f);
    std::fclose(f);
    impl_->gzip = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
  } else {
    throw DataError("cannot open data file " + path + ": " + std::strerror(errno));
  }
  if (!impl_->gzip) check_input_format(path);  // xz, bzip2, zstd, ...: one clear error
  std::string err;
  if (!impl_->in.open(path, err)) throw DataError("cannot open data file " + path + ": " + err);
  impl_->detect();
  if (impl_->in.error() == Z_ERRNO)
    throw DataError("cannot read data file " + path + ": " + impl_->in.error_message());
}

RecordSource::~RecordSource() = default;

bool RecordSource::next(RawRecord& out) {
  Impl& m = *impl_;
  if (m.done) return false;
  switch (m.layout) {
    case Impl::Layout::Jsonl:
      return m.next_jsonl(out);
    case Impl::Layout::Legacy:
      return m.next_legacy(out);
    case Impl::Layout::Bare:
      return m.next_bare(out);
  }
  return false;
}

void RecordSource::set_log(SkipLog& log) {
  impl_->log = &log;
}

int64_t RecordSource::compressed_bytes_read() const {
  return impl_->gzip ? impl_->in.raw_offset() : impl_->in.consumed();
}
int64_t RecordSource::file_size() const {
  return impl_->size;
}
bool RecordSource::is_jsonl() const {
  return impl_->layout == Impl::Layout::Jsonl;
}
bool RecordSource::is_gzip() const {
  return impl_->gzip;
}
int64_t RecordSource::records_skipped() const {
  return impl_->records_skipped;
}
int64_t RecordSource::uncompressed_bytes_read() const {
  return impl_->in.consumed();
}

// ---------------------------------------------------------------------------------------------
// parse_program: DOM → Program
// ---------------------------------------------------------------------------------------------
namespace {

using rapidjson::Value;

/// A field problem: thrown inside the converters, caught at schedule or program level.
struct Problem {
  std::string reason;  // "bad_field", "bad_execution_times", ...
  std::string path;    // field path, grows as it propagates outwards
  std::string what;
};

[[noreturn]] void fail(const char* reason, const std::string& path, const std::string& what) {
  throw Problem{reason, path, what};
}

std::string indexed(const char* field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

std::string join_path(const std::string& outer, const std::string& inner) {
  if (inner.empty()) return outer;
  if (outer.empty()) return inner;
  if (inner[0] == '[') return outer + inner;
  return outer + "." + inner;
}

/// Runs f(); on a Problem prepends `prefix` (a string, or a callable returning one, evaluated only
/// on error) to its path and rethrows.
template <class P, class F>
void within(const P& prefix, F&& f) {
  try {
    f();
  } catch (Problem& p) {
    if constexpr (std::is_invocable_v<const P&>)
      p.path = join_path(prefix(), p.path);
    else
      p.path = join_path(std::string(prefix), p.path);
    throw;
  }
}

const char* type_name(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "?";
}

std::string show(const Value& v) {
  if (v.IsString()) {
    std::string s = v.GetString();
    if (s.size() > 40) s = s.substr(0, 40) + "...";
    return "\"" + s + "\"";
  }
  return type_name(v);
}

const Value* find(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}
const Value& require(const Value& obj, const char* key) {
  const Value* v = find(obj, key);
  if (!v) fail("bad_field", key, "missing");
  return *v;
}

/// Trimmed numeric-string parsers; false when the text is not entirely a number.
bool parse_int_text(const char* s, int64_t& out) {
  while (*s == ' ' || *s == '\t') ++s;
  if (!*s) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s, &end, 10);
  if (errno == 0 && end != s) {
    while (*end == ' ' || *end == '\t') ++end;
    if (!*end) {
      out = x;
      return true;
    }
  }
  char* e2 = nullptr;
  double d = std::strtod(s, &e2);  // "4.0" → 4
  if (e2 == s) return false;
  while (*e2 == ' ' || *e2 == '\t') ++e2;
  if (!*e2 && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
    out = int64_t(d);
    return true;
  }
  return false;
}
bool parse_double_text(const char* s, double& out) {
  while (*s == ' ' || *s == '\t') ++s;
  if (!*s) return false;
  char* end = nullptr;
  double d = std::strtod(s, &end);
  if (end == s) return false;
  while (*end == ' ' || *end == '\t') ++end;
  if (*end) return false;
  out = d;
  return true;
}

/// An integer, an integral double, or a numeric string ("4", " 30 ").
int64_t as_int(const Value& v, const char* field) {
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsNumber()) {
    double d = v.GetDouble();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return int64_t(d);
  } else if (v.IsString()) {
    int64_t x;
    if (parse_int_text(v.GetString(), x)) return x;
  }
  fail("bad_field", field, std::string("expected an integer, got ") + show(v));
}
int as_int32(const Value& v, const char* field) {
  int64_t x = as_int(v, field);
  if (x < INT32_MIN || x > INT32_MAX) fail("bad_field", field, "integer out of range");
  return int(x);
}
/// A number or a numeric string.
double as_double(const Value& v, const char* field, const char* reason = "bad_field") {
  if (v.IsNumber()) return v.GetDouble();
  double d;
  if (v.IsString() && parse_double_text(v.GetString(), d)) return d;
  fail(reason, field, std::string("expected a number, got ") + show(v));
}
bool as_bool(const Value& v, const char* field) {
  if (v.IsBool()) return v.GetBool();
  if (v.IsInt64() && (v.GetInt64() == 0 || v.GetInt64() == 1)) return v.GetInt64() == 1;
  if (v.IsString()) {
    if (!std::strcmp(v.GetString(), "true") || !std::strcmp(v.GetString(), "True")) return true;
    if (!std::strcmp(v.GetString(), "false") || !std::strcmp(v.GetString(), "False")) return false;
  }
  fail("bad_field", field, std::string("expected a boolean, got ") + show(v));
}
std::string as_string(const Value& v, const char* field) {
  if (!v.IsString()) fail("bad_field", field, std::string("expected a string, got ") + show(v));
  return std::string(v.GetString(), v.GetStringLength());
}
/// null → "", string → itself.
std::string as_name_or_empty(const Value& v, const char* field) {
  if (v.IsNull()) return std::string();
  return as_string(v, field);
}
/// A loop bound: integer → decimal text; string → as written (trimmed).
std::string as_bound(const Value& v, const char* field) {
  if (v.IsString()) {
    std::string s(v.GetString(), v.GetStringLength());
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    if (b == std::string::npos) fail("bad_field", field, "empty bound");
    return s.substr(b, e - b + 1);
  }
  if (v.IsNumber()) return std::to_string(as_int(v, field));
  fail("bad_field", field,
       std::string("expected an integer or an expression string, got ") + show(v));
}
/// An array of strings; null → empty.
std::vector<std::string> as_string_list(const Value& v, const char* field) {
  std::vector<std::string> out;
  if (v.IsNull()) return out;
  if (!v.IsArray())
    fail("bad_field", field, std::string("expected an array of names, got ") + show(v));
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    if (!v[i].IsString())
      fail("bad_field", std::string(field) + "[" + std::to_string(i) + "]",
           std::string("expected a string, got ") + show(v[i]));
    out.emplace_back(v[i].GetString(), v[i].GetStringLength());
  }
  return out;
}
std::vector<std::string> optional_string_list(const Value& obj, const char* key) {
  const Value* v = find(obj, key);
  return v ? as_string_list(*v, key) : std::vector<std::string>();
}
const Value& require_object(const Value& obj, const char* key) {
  const Value& v = require(obj, key);
  if (!v.IsObject()) fail("bad_field", key, std::string("expected an object, got ") + show(v));
  return v;
}
const Value& require_array(const Value& obj, const char* key) {
  const Value& v = require(obj, key);
  if (!v.IsArray()) fail("bad_field", key, std::string("expected an array, got ") + show(v));
  return v;
}

ExprNode parse_expr(const Value& v, int depth) {
  if (depth > kMaxExprDepth) fail("bad_field", "", "expression nested too deeply");
  if (!v.IsObject())
    fail("bad_field", "", std::string("expected an expression object, got ") + show(v));
  ExprNode n;
  n.type = as_string(require(v, "expr_type"), "expr_type");
  if (!is_known_expr_type(n.type))
    fail("unknown_expr_type", "expr_type",
         "unknown expression type \"" + (n.type.size() > 40 ? n.type.substr(0, 40) + "..." : n.type) +
             "\" (known: " + known_expr_types_text() + ")");
  if (const Value* ch = find(v, "children")) {
    if (!ch->IsNull()) {
      if (!ch->IsArray())
        fail("bad_field", "children", std::string("expected an array, got ") + show(*ch));
      n.children.reserve(ch->Size());
      for (rapidjson::SizeType i = 0; i < ch->Size(); ++i)
        within([&] { return indexed("children", i); },
               [&] { n.children.push_back(parse_expr((*ch)[i], depth + 1)); });
    }
  }
  return n;
}

Iterator parse_iterator(const std::string& name, const Value& v) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Iterator it;
  it.name = name;
  it.lower.text = as_bound(require(v, "lower_bound"), "lower_bound");
  it.upper.text = as_bound(require(v, "upper_bound"), "upper_bound");
  if (const Value* p = find(v, "parent_iterator"))
    it.parent = as_name_or_empty(*p, "parent_iterator");
  it.children = optional_string_list(v, "child_iterators");
  it.computations = optional_string_list(v, "computations_list");
  return it;
}

Access parse_access(const Value& v) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Access a;
  if (const Value* r = find(v, "access_is_reduction"))
    a.is_reduction = as_bool(*r, "access_is_reduction");
  a.buffer_id = as_int32(require(v, "buffer_id"), "buffer_id");
  const Value& m = require_array(v, "access_matrix");
  a.matrix.resize(m.Size());
  for (rapidjson::SizeType r = 0; r < m.Size(); ++r) {
    std::string rp = "access_matrix[" + std::to_string(r) + "]";
    if (!m[r].IsArray()) fail("bad_field", rp, std::string("expected an array, got ") + show(m[r]));
    a.matrix[r].reserve(m[r].Size());
    for (rapidjson::SizeType c = 0; c < m[r].Size(); ++c)
      a.matrix[r].push_back(as_int32(m[r][c], rp.c_str()));
  }
  return a;
}

/// One computation; sets has_order=false when absolute_order is absent.
Computation parse_computation(const std::string& name, const Value& v, bool& has_order) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  Computation c;
  c.name = name;
  const Value* ao = find(v, "absolute_order");
  has_order = ao && !ao->IsNull();
  if (has_order) c.absolute_order = as_int32(*ao, "absolute_order");
  c.iterators = as_string_list(require(v, "iterators"), "iterators");
  c.is_reduction = as_bool(require(v, "comp_is_reduction"), "comp_is_reduction");
  c.write_access_relation = as_string(require(v, "write_access_relation"), "write_access_relation");
  c.write_buffer_id = as_int32(require(v, "write_buffer_id"), "write_buffer_id");
  c.data_type = as_string(require(v, "data_type"), "data_type");
  const Value& acc = require(v, "accesses");
  if (!acc.IsNull()) {
    if (!acc.IsArray())
      fail("bad_field", "accesses", std::string("expected an array, got ") + show(acc));
    c.accesses.reserve(acc.Size());
    for (rapidjson::SizeType i = 0; i < acc.Size(); ++i)
      within([&] { return indexed("accesses", i); },
             [&] { c.accesses.push_back(parse_access(acc[i])); });
  }
  within("expression_representation",
         [&] { c.expression = parse_expr(require(v, "expression_representation"), 0); });
  return c;
}

LoopNode parse_loop_node(const Value& v, int depth) {
  if (depth > kMaxTreeDepth) fail("bad_field", "", "loop tree nested too deeply");
  if (!v.IsObject())
    fail("bad_field", "", std::string("expected a loop node object, got ") + show(v));
  LoopNode n;
  n.loop_name = as_string(require(v, "loop_name"), "loop_name");
  n.computations = optional_string_list(v, "computations_list");
  if (const Value* ch = find(v, "child_list")) {
    if (!ch->IsNull()) {
      if (!ch->IsArray())
        fail("bad_field", "child_list", std::string("expected an array, got ") + show(*ch));
      n.children.reserve(ch->Size());
      for (rapidjson::SizeType i = 0; i < ch->Size(); ++i)
        within([&] { return indexed("child_list", i); },
               [&] { n.children.push_back(parse_loop_node((*ch)[i], depth + 1)); });
    }
  }
  return n;
}

/// A null or empty value (Python falsiness used by the reference for "not applied").
bool is_empty_value(const Value& v) {
  return v.IsNull() || (v.IsArray() && v.Empty()) || (v.IsObject() && v.ObjectEmpty()) ||
         (v.IsString() && v.GetStringLength() == 0) || (v.IsBool() && !v.GetBool());
}

/// True when the member name `k` equals the literal `lit`.
template <size_t N>
bool key_is(const Value& k, const char (&lit)[N]) {
  return k.GetStringLength() == N - 1 && std::memcmp(k.GetString(), lit, N - 1) == 0;
}

void parse_tiling(const Value& t, CompSchedule& cs) {
  if (is_empty_value(t)) return;
  if (!t.IsObject())
    fail("bad_tiling", "tiling", std::string("expected an object, got ") + show(t));
  const Value* dims = find(t, "tiling_dims");
  const Value* facs = find(t, "tiling_factors");
  if (!dims || !facs || !dims->IsArray() || !facs->IsArray())
    fail("bad_tiling", "tiling", "needs the arrays tiling_dims and tiling_factors");
  within("tiling", [&] {
    cs.tiling_dims = as_string_list(*dims, "tiling_dims");
    cs.tiling_factors.reserve(facs->Size());
    for (rapidjson::SizeType i = 0; i < facs->Size(); ++i)
      cs.tiling_factors.push_back(as_int((*facs)[i], "tiling_factors"));
  });
  for (size_t i = 0; i < cs.tiling_factors.size(); ++i)
    if (cs.tiling_factors[i] <= 0)
      fail("bad_tile_factor", indexed("tiling.tiling_factors", i),
           "tiling factor " + std::to_string(cs.tiling_factors[i]) + " is not positive");
  if (cs.tiling_dims.size() != cs.tiling_factors.size())
    fail("bad_tiling", "tiling",
         std::to_string(cs.tiling_dims.size()) + " tiling_dims but " +
             std::to_string(cs.tiling_factors.size()) + " tiling_factors");
  if (const Value* d = find(t, "tiling_depth"); d && !d->IsNull()) {
    int64_t depth = as_int(*d, "tiling.tiling_depth");
    if (depth != int64_t(cs.tiling_dims.size()))
      fail("bad_tiling", "tiling",
           "tiling_depth " + std::to_string(depth) + " but " +
               std::to_string(cs.tiling_dims.size()) + " tiling_dims");
  }
}

void parse_shiftings(const Value& s, CompSchedule& cs) {
  if (s.IsNull()) return;
  if (!s.IsArray())
    fail("bad_field", "shiftings", std::string("expected an array, got ") + show(s));
  for (rapidjson::SizeType i = 0; i < s.Size(); ++i) {
    const Value& e = s[i];
    if (!e.IsArray() || e.Size() != 2 || !e[0].IsString())
      fail("bad_field", indexed("shiftings", i), "expected [iterator name, shift factor]");
    within([&] { return indexed("shiftings", i); },
           [&] { cs.shiftings.emplace_back(e[0].GetString(), as_int(e[1], "")); });
  }
}

void parse_transformations(const Value& tl, CompSchedule& cs) {
  if (tl.IsNull()) return;
  if (!tl.IsArray())
    fail("bad_transformation", "transformations_list",
         std::string("expected an array, got ") + show(tl));
  cs.transformations.resize(tl.Size());
  for (rapidjson::SizeType i = 0; i < tl.Size(); ++i) {
    const Value& t = tl[i];
    if (!t.IsArray() || t.Size() != 16)
      fail("bad_transformation", indexed("transformations_list", i),
           t.IsArray() ? "expected 16 integers, got " + std::to_string(t.Size())
                       : std::string("expected an array of 16 integers, got ") + show(t));
    for (rapidjson::SizeType k = 0; k < 16; ++k) {
      if (t[k].IsInt64()) {
        cs.transformations[i][k] = t[k].GetInt64();
        continue;
      }
      try {
        cs.transformations[i][k] = as_int(t[k], "");
      } catch (Problem&) {
        fail("bad_transformation", indexed("transformations_list", i),
             std::string("expected an integer, got ") + show(t[k]));
      }
    }
  }
}

void parse_comp_schedule(const Value& v, CompSchedule& cs) {
  if (!v.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(v));
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    const Value& k = m->name;
    const Value& x = m->value;
    if (key_is(k, "parallelized_dim")) {
      cs.parallelized_dim = as_name_or_empty(x, "parallelized_dim");
    } else if (key_is(k, "tiling")) {
      parse_tiling(x, cs);
    } else if (key_is(k, "unrolling_factor")) {
      if (!x.IsNull() && !(x.IsString() && x.GetStringLength() == 0))
        cs.unrolling_factor = as_int(x, "unrolling_factor");
      // 0 means "not unrolled" (the reference tests the factor's truthiness); below 0 is nonsense.
      if (cs.unrolling_factor < 0)
        fail("bad_unroll_factor", "unrolling_factor",
             "unrolling factor " + std::to_string(cs.unrolling_factor) + " is negative");
    } else if (key_is(k, "shiftings")) {
      parse_shiftings(x, cs);
    } else if (key_is(k, "transformations_list")) {
      parse_transformations(x, cs);
    }  // unknown fields are ignored
  }
}

void parse_fusions(const Value& f, Schedule& s) {
  if (f.IsNull()) return;
  if (!f.IsArray()) fail("bad_field", "fusions", std::string("expected an array, got ") + show(f));
  for (rapidjson::SizeType i = 0; i < f.Size(); ++i) {
    const Value& e = f[i];
    if (!e.IsArray() || e.Size() < 3 || !e[0].IsString() || !e[1].IsString())
      fail("bad_field", indexed("fusions", i), "expected [computation, computation, level]");
    Fusion fu;
    fu.comp_a = e[0].GetString();
    fu.comp_b = e[1].GetString();
    within([&] { return indexed("fusions", i); }, [&] { fu.level = as_int32(e[2], ""); });
    s.fusions.push_back(std::move(fu));
  }
}

void parse_tree(const Value& t, Schedule& s) {
  if (t.IsNull()) return;
  within("tree_structure", [&] {
    if (!t.IsObject()) fail("bad_field", "", std::string("expected an object, got ") + show(t));
    const Value& roots = require_array(t, "roots");
    LoopTree tree;
    tree.roots.reserve(roots.Size());
    for (rapidjson::SizeType i = 0; i < roots.Size(); ++i)
      within([&] { return indexed("roots", i); },
             [&] { tree.roots.push_back(parse_loop_node(roots[i], 0)); });
    s.tree = std::move(tree);
  });
}

void parse_times(const Value& et, Schedule& s) {
  if (et.IsNull()) return;
  if (!et.IsArray())
    fail("bad_execution_times", "execution_times",
         std::string("expected an array, got ") + show(et));
  s.execution_times.reserve(et.Size());
  for (rapidjson::SizeType i = 0; i < et.Size(); ++i) {
    const Value& t = et[i];
    s.execution_times.push_back(
        t.IsNumber() ? t.GetDouble() : as_double(t, "execution_times", "bad_execution_times"));
  }
}

/// One schedule. Problems are recorded in parse_problem, never thrown. `missing` counts
/// computations without an entry.
Schedule parse_schedule(const Value& v, const Program& p, int64_t& missing) {
  Schedule s;
  try {
    if (!v.IsObject())
      fail("bad_field", "", std::string("expected a schedule object, got ") + show(v));
    const size_t n_comps = p.computations.size();
    s.comps.resize(n_comps);
    size_t seen = 0;
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
      const Value& k = m->name;
      const Value& x = m->value;
      if (key_is(k, "execution_times")) {
        parse_times(x, s);
      } else if (key_is(k, "fusions")) {
        parse_fusions(x, s);
      } else if (key_is(k, "tree_structure")) {
        parse_tree(x, s);
      } else if (key_is(k, "sched_str")) {
        if (x.IsString()) s.sched_str.assign(x.GetString(), x.GetStringLength());
      } else {
        // A computation's entry (unknown keys are ignored).
        for (size_t c = 0; c < n_comps; ++c) {
          const std::string& name = p.computations[c].name;
          if (name.size() == k.GetStringLength() &&
              std::memcmp(name.data(), k.GetString(), name.size()) == 0) {
            if (!x.IsNull()) {
              within(name, [&] { parse_comp_schedule(x, s.comps[c]); });
              ++seen;
            }
            break;
          }
        }
      }
    }
    missing += int64_t(n_comps - std::min(seen, n_comps));
  } catch (Problem& pr) {
    s.parse_problem = pr.reason;
    s.parse_detail = (pr.path.empty() ? "" : pr.path + ": ") + pr.what;
  }
  return s;
}

/// Per-thread parse state reused across records: the mutable NUL-terminated copy needed by insitu
/// parsing and the DOM's memory (a pool whose first block grows to the largest record seen).
struct ParseScratch {
  std::vector<char> text;
  std::vector<char> pool;
  size_t want = 65536;  // pool size for the next record (largest DOM seen, +25%)
};
ParseScratch& scratch() {
  thread_local ParseScratch s;
  return s;
}

}  // namespace

std::optional<Program> parse_program(const RawRecord& rec, SkipLog& log) {
  auto skip = [&](const char* level, const std::string& reason, const std::string& program,
                  const std::string& detail) {
    SkipEvent e;
    e.level = level;
    e.reason = reason;
    e.file = rec.file;
    e.line = rec.line;
    e.program = program;
    e.detail = detail;
    log.add(e);
  };

  ParseScratch& sc = scratch();
  sc.text.assign(rec.json.begin(), rec.json.end());
  sc.text.push_back('\0');
  if (sc.pool.size() < sc.want) sc.pool.resize(sc.want);
  rapidjson::MemoryPoolAllocator<> pool(sc.pool.data(), sc.pool.size());
  rapidjson::Document doc(&pool);
  // The iterative parser: no recursion, so hostile nesting cannot overflow the stack (and it
  // measured faster than a depth pre-scan followed by the recursive parser).
  doc.ParseInsitu<rapidjson::kParseIterativeFlag>(sc.text.data());
  // Next time, one block large enough for a record like this one (fewer mallocs). The block
  // itself must not be touched while `pool` lives.
  if (pool.Size() > sc.want) sc.want = pool.Size() + pool.Size() / 4;
  if (doc.HasParseError()) {
    std::string name = rec.name_hint.empty() ? sniff_program_name(rec.json) : rec.name_hint;
    skip("line", "malformed_json", name,
         std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at byte " +
             std::to_string(doc.GetErrorOffset()) + " of the record");
    return std::nullopt;
  }
  if (!doc.IsObject()) {
    skip("line", "not_an_object", rec.name_hint, std::string("the record is ") + type_name(doc));
    return std::nullopt;
  }
  {
    // An object with no record field at all (e.g. a `{"note": ...}` header line of a JSONL file)
    // is not a program: one line skip, instead of a note plus missing_program_annotation.
    bool any_record_key = false;
    for (auto m = doc.MemberBegin(); m != doc.MemberEnd() && !any_record_key; ++m)
      any_record_key = is_record_key(std::string(m->name.GetString(), m->name.GetStringLength()));
    if (!any_record_key) {
      std::string first = doc.MemberCount() == 0
                              ? std::string("it is empty")
                              : "its first key is \"" +
                                    std::string(doc.MemberBegin()->name.GetString(),
                                                doc.MemberBegin()->name.GetStringLength()) +
                                    "\"";
      skip("line", "not_a_program_record", rec.name_hint,
           "an object without any program record field (program_annotation, schedules_list, "
           "program_name, ...); " + first);
      return std::nullopt;
    }
  }

  Program p;
  p.source_file = rec.file;
  p.source_line = rec.line;
  if (const Value* n = find(doc, "program_name"); n && n->IsString() && n->GetStringLength() > 0)
    p.name.assign(n->GetString(), n->GetStringLength());
  else if (!rec.name_hint.empty())
    p.name = rec.name_hint;
  else {
    p.name = rec.file + ":" + std::to_string(rec.line);
    skip("note", "missing_program_name", p.name,
         "no program_name field; named after its file and line");
  }

  const Value* ann = find(doc, "program_annotation");
  if (!ann || ann->IsNull()) {
    skip("program", "missing_program_annotation", p.name, "");
    return std::nullopt;
  }
  const Value* sl = find(doc, "schedules_list");
  if (!sl || sl->IsNull() || (sl->IsArray() && sl->Empty())) {
    skip("program", "empty_schedules_list", p.name,
         sl ? "schedules_list is empty" : "no schedules_list");
    return std::nullopt;
  }

  try {
    if (!ann->IsObject())
      fail("bad_field", "program_annotation", std::string("expected an object, got ") + show(*ann));
    if (!sl->IsArray())
      fail("bad_field", "schedules_list", std::string("expected an array, got ") + show(*sl));
    within("program_annotation", [&] {
      const Value& its = require_object(*ann, "iterators");
      p.iterators.reserve(its.MemberCount());
      for (auto m = its.MemberBegin(); m != its.MemberEnd(); ++m) {  // key order = loop index
        std::string name(m->name.GetString(), m->name.GetStringLength());
        if (p.iterator_index(name) >= 0)
          fail("bad_field", "iterators." + name, "duplicate iterator name");
        within([&] { return "iterators." + name; },
               [&] { p.iterators.push_back(parse_iterator(name, m->value)); });
      }
      const Value& comps = require_object(*ann, "computations");
      p.computations.reserve(comps.MemberCount());
      for (auto m = comps.MemberBegin(); m != comps.MemberEnd(); ++m) {
        std::string name(m->name.GetString(), m->name.GetStringLength());
        bool has_order = true;
        if (p.computation_index(name) >= 0)
          fail("bad_field", "computations." + name, "duplicate computation name");
        within([&] { return "computations." + name; },
               [&] { p.computations.push_back(parse_computation(name, m->value, has_order)); });
        if (!has_order) fail("missing_absolute_order", "computations." + name, "no absolute_order");
      }
    });
    std::stable_sort(p.computations.begin(), p.computations.end(),
                     [](const Computation& a, const Computation& b) {
                       return a.absolute_order < b.absolute_order;
                     });
    for (size_t i = 1; i < p.computations.size(); ++i)
      if (p.computations[i].absolute_order == p.computations[i - 1].absolute_order)
        fail("duplicate_absolute_order", "program_annotation.computations",
             p.computations[i - 1].name + " and " + p.computations[i].name +
                 " both have absolute_order " + std::to_string(p.computations[i].absolute_order));
    // Missing or null: NaN. featurize drops such a program ("bad_initial_time") unless it only
    // predicts (keep_unlabeled): a new program an autoscheduler asks about has no measurements.
    {
      const auto it = doc.FindMember("initial_execution_time");
      p.initial_execution_time = it == doc.MemberEnd() || it->value.IsNull()
                                     ? std::numeric_limits<double>::quiet_NaN()
                                     : as_double(it->value, "initial_execution_time");
    }
  } catch (Problem& pr) {
    skip("program", pr.reason, p.name, (pr.path.empty() ? "" : pr.path + ": ") + pr.what);
    return std::nullopt;
  }

  int64_t missing = 0, first_missing = -1;
  p.schedules.reserve(sl->Size());
  for (rapidjson::SizeType i = 0; i < sl->Size(); ++i) {
    int64_t before = missing;
    p.schedules.push_back(parse_schedule((*sl)[i], p, missing));
    if (missing > before && first_missing < 0) first_missing = i;
  }
  if (missing > 0)
    skip("note", "missing_comp_schedule", p.name,
         std::to_string(missing) + " computation entries missing (first in schedule " +
             std::to_string(first_missing) + "); default (untransformed) schedule used");
  return p;
}

std::vector<Program> read_all_programs(const std::string& path, SkipLog& log) {
  RecordSource src(path, log);
  std::vector<Program> out;
  RawRecord rec;
  while (src.next(rec))
    if (auto p = parse_program(rec, log)) out.push_back(std::move(*p));
  return out;
}

}  // namespace lcm::data
