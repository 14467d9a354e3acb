// lcm-serve's request streams (see protocol.hpp).
#include "serve/protocol.hpp"

#include <poll.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "serve/query_batcher.hpp"
#include "util/json_parse.hpp"
#include "util/name_table.hpp"

namespace lcm::serve {

namespace {
constexpr NameRow<Protocol> kProtocolNames[] = {
    {Protocol::Looper, "looper"}, {Protocol::Legacy, "legacy"}, {Protocol::Jsonl, "jsonl"}};
}  // namespace

Protocol parse_protocol(const std::string& name) {
  Protocol p = Protocol::Looper;
  if (value_of(kProtocolNames, name, &p)) return p;
  throw std::invalid_argument("--protocol: expected looper, legacy or jsonl, got '" + name + "'");
}

const char* protocol_name(Protocol p) {
  return name_of(kProtocolNames, p, "?");
}

namespace {

/// Newline-delimited lines from a file descriptor, each at most `max` bytes; a trailing '\r' is
/// dropped (a client on Windows line ends).
class LineReader {
 public:
  enum class Status { Line, TooLong, End, Stopped };
  LineReader(int fd, size_t max, const std::atomic<bool>& stop) : fd_(fd), max_(max), stop_(stop) {}

  Status next(std::string& line) {
    bool discarding = false;  // inside a line longer than max_: read to its end, keep nothing
    for (;;) {
      const size_t from = std::max(start_, scanned_);  // [start_, scanned_) has no newline
      const void* nl = end_ > from ? std::memchr(buf_.data() + from, '\n', end_ - from) : nullptr;
      scanned_ = end_;
      if (nl) {
        const size_t pos = size_t(static_cast<const char*>(nl) - buf_.data());
        const size_t n = pos - start_;
        if (discarding || n > max_) {
          start_ = scanned_ = pos + 1;
          shrink();
          return Status::TooLong;
        }
        line.assign(buf_.data() + start_, n);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        start_ = pos + 1;
        scanned_ = start_;
        shrink();  // a long line's buffer is not kept while it is scored
        return Status::Line;
      }
      if (end_ - start_ > max_) {  // no newline within max_ bytes: drop what is held
        discarding = true;
        start_ = end_ = scanned_ = 0;
      }
      if (eof_) {
        if (end_ > start_ && !discarding) {  // a last line without its newline
          line.assign(buf_.data() + start_, end_ - start_);
          if (!line.empty() && line.back() == '\r') line.pop_back();
          start_ = end_;
          return Status::Line;
        }
        start_ = end_ = 0;
        return discarding ? Status::TooLong : Status::End;
      }
      // make room: move the partial line to the front, grow up to max_ + one chunk
      if (start_ > 0) {
        std::memmove(buf_.data(), buf_.data() + start_, end_ - start_);
        end_ -= start_;
        scanned_ -= start_;
        start_ = 0;
      }
      if (buf_.size() - end_ < kChunk) buf_.resize(std::max(buf_.size() * 2, end_ + kChunk));
      // Wait for input in slices of 100 ms, so that a stop request is seen even when the signal
      // went to another thread and the read was not interrupted.
      pollfd pfd{fd_, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 100);
      if (stop_.load()) return Status::Stopped;
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
      const ssize_t r = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
      if (r > 0) {
        end_ += size_t(r);
      } else if (r == 0) {
        eof_ = true;
      } else if (errno == EINTR) {
        if (stop_.load()) return Status::Stopped;
      } else {
        error_ = errno;  // a read error (EISDIR, ECONNRESET, ...): the stream is over
        return Status::Stopped;
      }
      if (stop_.load()) return Status::Stopped;
    }
  }

 private:
  static constexpr size_t kChunk = 64 << 10;
  /// After a very long line, give the memory back (the next lines are usually small): the
  /// buffer then holds only what was read after it (less than the line).
  void shrink() {
    if (buf_.size() > (size_t(4) << 20) && end_ - start_ < buf_.size() / 4) {
      std::vector<char> rest(buf_.begin() + long(start_), buf_.begin() + long(end_));
      rest.reserve(kChunk);
      buf_.swap(rest);
      end_ -= start_;
      scanned_ = 0;
      start_ = 0;
    }
  }

 public:
  /// errno of the read that failed, 0 when none did.
  int error() const { return error_; }

 private:
  int error_ = 0;
  int fd_;
  size_t max_;
  const std::atomic<bool>& stop_;
  std::vector<char> buf_;
  size_t start_ = 0, end_ = 0, scanned_ = 0;
  bool eof_ = false;
};

/// Writes all of `s` to `fd` (send without SIGPIPE on a socket, write on a pipe or file). False
/// when the reader is gone.
bool write_all(int fd, bool socket, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = socket ? ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL)
                             : ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;  // errno says why
    }
    done += size_t(w);
  }
  return true;
}

std::string speedup_line(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g\n", v);
  return buf;
}

std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

/// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by '?' and
/// control characters by ' ', so that the JSON answers stay valid UTF-8 whatever the query held.
std::string clean_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 2 && c < 0xc2) && !(n == 4 && c > 0xf4);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok && n == 3) {  // no overlong forms, no UTF-16 surrogates
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    }
    if (ok && n == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    if (n == 1 && (c < 0x20 || c == 0x7f))
      out += ' ';
    else
      out.append(s, i, n);
    i += n;
  }
  return out;
}

/// One stderr line: clean_text (no newline, no control character, valid UTF-8), cut at 2,000
/// bytes.
std::string one_line(const std::string& s) {
  std::string t = clean_text(s.size() > 2000 ? s.substr(0, 2000) : s);
  if (s.size() > 2000) t += " ...";
  return t;
}

std::string error_object(const std::string& raw) {
  const std::string text = clean_text(raw);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("error");
  w.String(text.c_str(), rapidjson::SizeType(text.size()));
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace

namespace {

/// The answer of a Jsonl "observe" or "reset" request `d` (the protocol's docstring).
std::string answer_learning(Scorer& scorer, const rapidjson::Document& d, const std::string& kind,
                            const std::function<std::string(const std::string&)>& fail) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  const auto prog = d.FindMember("program");
  const bool has_program = prog != d.MemberEnd() && !prog->value.IsNull();
  if (has_program && !prog->value.IsObject())
    return fail("bad_request: \"program\" is not an object");
  if (kind == "reset") {
    w.StartObject();
    w.Key("reset");
    if (has_program) {
      w.Bool(scorer.reset_observations(to_json(prog->value)));
    } else {
      scorer.reset_observations();
      w.Bool(true);
    }
    w.EndObject();
    return std::string(sb.GetString(), sb.GetSize());
  }
  if (!has_program) return fail("bad_request: no \"program\" object");
  const auto sc = d.FindMember("schedule");
  if (sc == d.MemberEnd() || !sc->value.IsObject())
    return fail("bad_request: an observe request needs a \"schedule\" object");
  const auto et = d.FindMember("execution_times");
  if (et == d.MemberEnd() || !et->value.IsArray())
    return fail("bad_request: an observe request needs an \"execution_times\" array (ms)");
  std::vector<double> times;
  for (const auto& t : et->value.GetArray()) {
    if (!t.IsNumber()) return fail("bad_execution_times: an execution time that is not a number");
    times.push_back(t.GetDouble());
  }
  double initial = std::numeric_limits<double>::quiet_NaN();
  if (const auto u = d.FindMember("untransformed_time"); u != d.MemberEnd() && !u->value.IsNull()) {
    if (!u->value.IsNumber()) return fail("bad_untransformed_time: not a number");
    initial = u->value.GetDouble();
  }
  std::string untransformed;
  if (const auto u = d.FindMember("untransformed"); u != d.MemberEnd() && !u->value.IsNull()) {
    if (!u->value.IsObject()) return fail("bad_request: \"untransformed\" is not an object");
    untransformed = to_json(u->value);
  }
  Observed o;
  try {
    o = scorer.observe(to_json(prog->value), untransformed, to_json(sc->value), times, initial);
  } catch (const QueryError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
  w.StartObject();
  w.Key("observed");
  w.StartObject();
  w.Key("measured_speedup");
  w.Double(o.measured_speedup);
  w.Key("predicted_speedup");
  w.Double(o.predicted_speedup);
  w.Key("corrected_speedup");
  w.Double(o.corrected_speedup);
  w.Key("offset");
  w.Double(o.correction.offset);
  w.Key("scale");
  w.Double(o.correction.scale);
  w.Key("observations");
  w.Int64(o.correction.observations);
  w.Key("untransformed");
  w.Bool(o.untransformed);
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace

std::string answer_jsonl(Scorer& scorer, const std::string& line, int64_t& schedules,
                         bool& had_error, std::string& error_text) {
  had_error = false;
  schedules = 0;
  auto fail = [&](const std::string& text) {
    had_error = true;
    error_text = text;
    return error_object(text);
  };
  // The request's text held while it is scored: the stream's buffer (≤ 1 line after a long one)
  // and the line, the schedules' and program's texts taken out of it (≤ 1 line); its DOM while
  // it is read.
  Reservation text, dom;
  try {
    const std::string what =
        "a request line of " + std::to_string((line.size() + (1 << 20) - 1) >> 20) + " MiB";
    text = scorer.reserve(3 * line.size(), what);
    dom = scorer.reserve(RequestMemory::json_bytes(line), what);
  } catch (const QueryError& e) {
    return fail(e.what());
  }
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
  if (d.HasParseError())
    return fail(std::string("malformed_json: ") + rapidjson::GetParseError_En(d.GetParseError()) +
                " at byte " + std::to_string(d.GetErrorOffset()));
  if (!d.IsObject()) return fail("bad_request: expected a JSON object");
  // a key given twice would be read one way here (the first) and another way elsewhere
  if (const std::string twice = json_duplicate_key(d); !twice.empty())
    return fail("duplicate_key: key \"" + twice + "\" appears twice in one object of the request");
  if (const auto rq = d.FindMember("request"); rq != d.MemberEnd()) {
    const std::string kind = rq->value.IsString() ? rq->value.GetString() : "";
    if (kind == "observe" || kind == "reset") return answer_learning(scorer, d, kind, fail);
    if (kind != "score")
      return fail("bad_request: \"request\" is \"score\" (the default), \"observe\" or \"reset\"");
  }
  const auto prog = d.FindMember("program");
  if (prog == d.MemberEnd() || !prog->value.IsObject())
    return fail("bad_request: no \"program\" object");
  const auto sl = d.FindMember("schedules");
  if (sl == d.MemberEnd() || !sl->value.IsArray())
    return fail("bad_request: no \"schedules\" array");
  std::string untransformed;
  if (const auto u = d.FindMember("untransformed"); u != d.MemberEnd() && !u->value.IsNull()) {
    if (!u->value.IsObject()) return fail("bad_request: \"untransformed\" is not an object");
    untransformed = to_json(u->value);
  }
  if (sl->value.Size() > kMaxRequestSchedules)
    return fail("too_many_schedules: " + std::to_string(sl->value.Size()) +
                " schedules in one request; at most " + std::to_string(kMaxRequestSchedules) +
                " (split the request: memory grows with the schedules of one forward)");
  std::vector<std::string> texts;
  texts.reserve(sl->value.Size());
  for (const auto& s : sl->value.GetArray()) texts.push_back(to_json(s));
  schedules = int64_t(texts.size());
  const std::string program = to_json(prog->value);
  rapidjson::Document().Swap(d);  // the DOM's memory back before the scoring
  dom.reset();
  std::vector<ScheduleScore> scores;
  try {
    scores = scorer.score(program, untransformed, texts);
  } catch (const QueryError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("speedups");
  w.StartArray();
  for (const ScheduleScore& s : scores) w.Double(s.speedup);
  w.EndArray();
  size_t bad = 0;
  for (const ScheduleScore& s : scores) bad += s.ok() ? 0 : 1;
  if (bad > 0) {
    had_error = true;
    w.Key("errors");
    w.StartArray();
    for (size_t i = 0; i < scores.size(); ++i) {
      if (scores[i].ok()) continue;
      if (error_text.empty())
        error_text =
            "schedule " + std::to_string(i) + ": " + scores[i].reason + ": " + scores[i].detail;
      w.StartObject();
      w.Key("index");
      w.Uint64(i);
      const std::string reason = clean_text(scores[i].reason),
                        detail = clean_text(scores[i].detail);
      w.Key("reason");
      w.String(reason.c_str(), rapidjson::SizeType(reason.size()));
      w.Key("detail");
      w.String(detail.c_str(), rapidjson::SizeType(detail.size()));
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

StreamStats serve_stream(Scorer& scorer, Protocol protocol, int in_fd, int out_fd,
                         const std::atomic<bool>& stop, const StreamLimits& limits,
                         const std::function<void(const std::string&)>& log) {
  StreamStats st;
  LineReader reader(in_fd, limits.max_line_bytes, stop);
  struct stat out_stat {};
  const bool out_is_socket = ::fstat(out_fd, &out_stat) == 0 && S_ISSOCK(out_stat.st_mode);
  const int lines_per_query = protocol == Protocol::Looper   ? 3
                              : protocol == Protocol::Legacy ? 2
                                                             : 1;
  std::vector<std::string> lines(static_cast<size_t>(lines_per_query));
  std::vector<bool> too_long(static_cast<size_t>(lines_per_query));
  std::vector<std::string> candidate(1);
  for (;;) {
    for (int k = 0; k < lines_per_query; ++k) {
      const LineReader::Status s = reader.next(lines[size_t(k)]);
      if (s == LineReader::Status::End) return st;
      if (s == LineReader::Status::Stopped) {
        st.ended_by_eof = false;
        if (reader.error() != 0 && reader.error() != ECONNRESET)
          st.io_error = std::string("cannot read the queries: ") + std::strerror(reader.error());
        return st;
      }
      too_long[size_t(k)] = s == LineReader::Status::TooLong;
      if (too_long[size_t(k)]) lines[size_t(k)].clear();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = st.queries + 1;
    std::string answer, error;
    if (protocol == Protocol::Jsonl) {
      int64_t scheds = 0;
      bool had_error = false;
      if (too_long[0]) {
        answer = error_object("line_too_long: a request line longer than " +
                              std::to_string(limits.max_line_bytes) + " bytes");
        had_error = true;
        error = "line_too_long";
      } else {
        answer = answer_jsonl(scorer, lines[0], scheds, had_error, error);
      }
      st.schedules += scheds;
      if (had_error) ++st.errors;
      answer += '\n';
    } else {
      double v = kErrorSpeedup;
      ++st.schedules;
      for (int k = 0; k < lines_per_query && error.empty(); ++k)
        if (too_long[size_t(k)])
          error = "line_too_long: line " + std::to_string(k + 1) + " of the query is longer than " +
                  std::to_string(limits.max_line_bytes) + " bytes";
        else if (lines[size_t(k)].find_first_not_of(" \t") == std::string::npos)
          error = "empty_line: line " + std::to_string(k + 1) + " of the query is empty (each " +
                  "query is exactly " + std::to_string(lines_per_query) +
                  " lines: are the lines out of step?)";
      if (error.empty()) {
        try {
          // the query's lines and the stream's buffer (≤ their size after long lines)
          size_t text = 0;
          for (const std::string& l : lines) text += 2 * l.size();
          const Reservation held = scorer.reserve(
              text, "a query of " + std::to_string((text / 2 + (1 << 20) - 1) >> 20) + " MiB");
          candidate[0].swap(lines[size_t(lines_per_query - 1)]);
          static const std::string kNoTree;  // legacy: the iterators' tree
          const std::string& untransformed = protocol == Protocol::Looper ? lines[1] : kNoTree;
          const std::vector<ScheduleScore> r =
              limits.batcher ? std::vector<ScheduleScore>{limits.batcher->score(
                                   lines[0], untransformed, candidate[0])}
                             : scorer.score(lines[0], untransformed, candidate);
          candidate[0].swap(lines[size_t(lines_per_query - 1)]);
          if (r[0].ok())
            v = r[0].speedup;
          else
            error = "candidate schedule: " + r[0].reason + ": " + r[0].detail;
        } catch (const QueryError& e) {
          error = std::string("program: ") + e.what();
        } catch (const std::exception& e) {
          error = std::string("error: ") + e.what();
        }
      }
      if (!error.empty()) ++st.errors;
      answer = speedup_line(v);
    }
    st.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!error.empty()) log("query " + std::to_string(n) + ": " + one_line(error));
    if (!write_all(out_fd, out_is_socket, answer)) {
      st.ended_by_eof = false;
      // the reader went away (EPIPE) is how a client may end; anything else is an error
      if (errno != EPIPE && errno != ECONNRESET)
        st.io_error = std::string("cannot write the answers: ") + std::strerror(errno);
      return st;
    }
    st.queries = n;
  }
}

}  // namespace lcm::serve
