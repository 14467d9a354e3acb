// RecordSource (reader.hpp): the layout of a data file (JSON Lines, legacy `{name: record}`
// container, bare record) chosen from its first lines, then its records one by one — JSONL lines,
// or member values captured verbatim by RapidJSON's SAX reader — with the line-level skips.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <cstring>
#include <memory>
#include <utility>

#include "data/gzip_stream.hpp"
#include "data/reader.hpp"
#include "data/record_fields.hpp"
#include "data/schedule_lines.hpp"

namespace lcm::data {

bool is_record_key(const std::string& k) {
  static const char* const keys[] = {
      "program_name", "program_annotation", "schedules_list", "initial_execution_time",
      "filename",     "node_name",          "parameters",     "exploration_trace",
      "search_time",  "best_schedule"};
  for (const char* r : keys)
    if (k == r) return true;
  return false;
}

bool has_record_key(const rapidjson::Value& v) {
  if (!v.IsObject()) return false;
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m)
    if (is_record_key(std::string(m->name.GetString(), m->name.GetStringLength()))) return true;
  return false;
}

std::string sniff_program_name(const std::string& text) {
  size_t k = text.find("\"program_name\"");
  if (k == std::string::npos || k > 65536) return "";
  size_t q = text.find('"', text.find(':', k + 14) + 1);
  if (q == std::string::npos) return "";
  size_t e = text.find('"', q + 1);
  if (e == std::string::npos || e - q > 512) return "";
  return text.substr(q + 1, e - q - 1);
}

namespace {

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
  int64_t line_no = 0;          // JSONL: lines read so far
  std::string line;             // JSONL scratch (capacity reused)
  // JSONL, one schedule per line: the line read ahead past a group, delivered by the next call.
  std::string ahead;
  int64_t ahead_line = 0;
  bool has_ahead = false;
  LineSniff ahead_sniff;
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

  /// The next non-blank line into `dst` and its 1-based number into `no`; false at the end of
  /// the text, or after a partial last line of a cut or corrupt gzip (logged; then `done`).
  /// Lines over 1 GiB are logged (record_too_long) and passed over.
  bool read_record_line(std::string& dst, int64_t& no) {
    bool ended = false, overflow = false;
    while (in.read_line(line, ended, overflow)) {
      ++line_no;
      if (!ended && in.error() != Z_OK && line.find_first_not_of(" \t\r") != std::string::npos) {
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
      dst.swap(line);
      no = line_no;
      return true;
    }
    if (in.error() != Z_OK) log_stream_error(line_no + 1, "", "after the last complete line");
    done = true;
    return false;
  }

  /// One record: a whole-program line, or a group of consecutive one-schedule lines of one
  /// program_name (sniff_schedule_line), read with one line of lookahead.
  bool next_jsonl(RawRecord& out) {
    out.file = path;
    out.name_hint.clear();
    out.schedule_line = false;
    out.more_schedule_lines.clear();
    out.more_schedule_line_numbers.clear();
    LineSniff sn;
    if (has_ahead) {
      has_ahead = false;
      out.json.swap(ahead);
      out.line = ahead_line;
      sn = std::move(ahead_sniff);
    } else {
      if (!read_record_line(out.json, out.line)) return false;
      sn = sniff_schedule_line(out.json.data(), out.json.size());
    }
    if (!sn.single_schedule) return true;
    out.schedule_line = true;
    if (sn.name.empty()) return true;  // without a name, a line is a program of its own
    size_t bytes = out.json.size();
    while (read_record_line(ahead, ahead_line)) {
      LineSniff next = sniff_schedule_line(ahead.data(), ahead.size());
      // A malformed line of the same name (e.g. cut short) is one of the group's schedules:
      // merge_schedule_lines names it, and the group is not split around it.
      if ((next.single_schedule || next.malformed) && next.name == sn.name &&
          bytes + ahead.size() <= kMaxRecordBytes) {
        bytes += ahead.size();
        out.more_schedule_lines.emplace_back().swap(ahead);
        out.more_schedule_line_numbers.push_back(ahead_line);
        continue;
      }
      ahead_sniff = std::move(next);
      has_ahead = true;
      break;
    }
    return true;
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
      rapidjson::ParseResult r =
          reader.Parse<rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag>(in, kh);
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

RecordSource::RecordSource(const std::string& path, SkipLog& log) : impl_(new Impl) {
  impl_->path = path;
  impl_->log = &log;
  impl_->size = require_regular_data_file(path);
  // Magic bytes, read directly (zlib would silently read a plain file transparently).
  unsigned char m[2] = {0, 0};
  impl_->gzip = is_gzip_magic(m, read_file_head(path, m, sizeof m));
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
  if (m.done && !m.has_ahead) return false;
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

bool RecordSource::next_with_log(RawRecord& out, std::unique_ptr<SkipLog>& out_log,
                                 std::unique_ptr<SkipLog>& trailing) {
  out_log = std::make_unique<SkipLog>(false, 0);
  set_log(*out_log);
  if (next(out)) return true;
  trailing = std::move(out_log);
  return false;
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

}  // namespace lcm::data
