// liblcm's log callback (include/lcm/lcm.hpp set_log_callback, include/lcm/lcm.h
// lcm_set_log_callback): no call path of the library, its warning paths included, writes to the
// host's stderr (fd 2 is captured around every call), and its warnings and notes reach the
// callback the host sets (none by default), through the C++ and the C API. Also: a config file
// with an alias cycle is an Error, not a crashed host; an override given twice is an Error.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "engine/safetensors.hpp"
#include "lcm/lcm.h"
#include "lcm/lcm.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"
#include "train/run_state.hpp"

using lcm::test::contains;

namespace {

/// Redirects fd 2 to a file from construction to text().
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  /// What was written to fd 2 so far; fd 2 is the terminal again afterwards.
  std::string text() {
    restore();
    return lcm::test::slurp(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

/// The lines the C++ callback received.
struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  bool any(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& l : lines)
      if (contains(l, part)) return true;
    return false;
  }
};

struct Fixture {
  std::string dir, ckpt;
  std::vector<lcm::test::QueryProgram> programs;
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = lcm::test::temp_dir("liblcm");
    x.ckpt = x.dir + "/model.safetensors";
    lcm::test::write_random_checkpoint(x.ckpt);
    const std::vector<std::string> lines =
        lcm::test::gz_lines(lcm::test::committed_data("synth_valid.jsonl.gz"));
    REQUIRE(lines.size() >= 2);
    for (size_t i = 0; i < 2; ++i) x.programs.push_back(lcm::test::query_program(lines[i]));
    return x;
  }();
  return f;
}

/// Every kind of call of the C++ API, the failing ones included; returns the errors' reasons.
std::vector<std::string> exercise_cpp(const Fixture& f, const std::vector<std::string>& overrides) {
  std::vector<std::string> reasons;
  auto expect_error = [&](const auto& call) {
    try {
      call();
      reasons.push_back("(none)");
    } catch (const lcm::Error& e) {
      reasons.push_back(e.reason());
    }
  };
  lcm::PredictorOptions o;
  o.weights_path = f.ckpt;
  o.overrides = overrides;
  lcm::Predictor p(o);
  for (const auto& q : f.programs) {
    CHECK(p.predict(q.program, q.schedules, q.untransformed).size() == q.schedules.size());
    CHECK(p.score(q.program, {"{", "[]", q.schedules[0]}, q.untransformed).size() == 3);
  }
  expect_error([&] { p.predict("{", {"{}"}); });
  expect_error([&] { p.predict("{\"iterators\": 5}", {"{}"}); });
  expect_error([&] { p.predict(f.programs[0].program, {"{}"}, f.programs[0].program); });
  expect_error([&] { lcm::Predictor(f.dir + "/missing.safetensors"); });
  expect_error([&] { lcm::Predictor(f.dir); });
  lcm::PredictorOptions bad = o;
  bad.overrides = {"training.threads=100000"};
  expect_error([&] { lcm::Predictor{bad}; });
  bad.overrides = {"no.such_key=1"};
  expect_error([&] { lcm::Predictor{bad}; });
  bad.overrides = {"eval.weights_path=" + f.ckpt};  // given twice: the option and an override
  expect_error([&] { lcm::Predictor{bad}; });
  return reasons;
}

}  // namespace

TEST_CASE("liblcm never writes to stderr; its warnings and notes reach the log callback") {
  const Fixture& f = fixture();
  Lines got;
  lcm::set_log_callback([&](const std::string& line) {
    std::lock_guard<std::mutex> lock(got.mu);
    got.lines.push_back(line);
  });
  // more threads than the machine has: the oversubscription warning (once per process); model
  // sizes other than the checkpoint's: the sizes note
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  REQUIRE(hw + 1 <= 1024);
  StderrCapture cap(f.dir + "/stderr_cpp.txt");
  const std::vector<std::string> reasons = exercise_cpp(
      f, {"training.threads=" + std::to_string(hw + 1), "model.lstm_embedding_size=17"});
  const std::string err = cap.text();
  CHECK_MESSAGE(err.empty(), err);
  CHECK(got.any("threads requested but this machine has"));
  CHECK(got.any("model sizes taken from the checkpoint"));
  for (const std::string& l : got.lines) CHECK(!contains(l, "\n"));
  // every failing call failed, with its reason
  REQUIRE(reasons.size() == 8);
  CHECK(reasons[0] == "malformed_json");
  CHECK(reasons[1] == "bad_field");
  CHECK(reasons[2] == "not_a_schedule");
  for (const std::string& r : reasons) CHECK(r != "(none)");
  CHECK(reasons[7] == "config");

  // no callback (the default): the same calls, nothing anywhere
  lcm::set_log_callback(nullptr);
  const size_t before = got.lines.size();
  StderrCapture quiet(f.dir + "/stderr_none.txt");
  exercise_cpp(f, {"model.lstm_embedding_size=17"});
  const std::string err2 = quiet.text();
  CHECK_MESSAGE(err2.empty(), err2);
  CHECK(got.lines.size() == before);
}

namespace {

struct CLines {
  std::vector<std::string> lines;
};

void c_callback(const char* line, void* user) {
  static_cast<CLines*>(user)->lines.push_back(line);
}

}  // namespace

TEST_CASE("liblcm: a checkpoint's feature settings are used; a conflicting override is an Error") {
  const Fixture& f = fixture();
  // the fixture's weights, recorded as trained with data.shift_match=exact
  const std::string ck = f.dir + "/exact.safetensors";
  lcm::SafeTensorsFile s = lcm::read_safetensors(f.ckpt);
  REQUIRE(s.metadata.count("lcm.feature_config") == 0);
  lcm::config::Config trained;
  lcm::config::set_config_value(trained, "data.shift_match", "exact");
  s.metadata["lcm.feature_config"] = lcm::train::feature_config_json(trained);
  lcm::write_safetensors(ck, s);
  Lines got;
  lcm::set_log_callback([&](const std::string& line) {
    std::lock_guard<std::mutex> lock(got.mu);
    got.lines.push_back(line);
  });
  StderrCapture cap(f.dir + "/stderr_features.txt");
  lcm::PredictorOptions o;
  o.weights_path = ck;
  const lcm::Predictor adopted(o);
  CHECK(got.any("data.shift_match=exact as " + ck + " was trained with"));
  // its answers are those of the unrecorded weights told data.shift_match=exact
  lcm::PredictorOptions h;
  h.weights_path = f.ckpt;
  h.overrides = {"data.shift_match=exact"};
  const lcm::Predictor by_hand(h);
  for (const auto& q : f.programs)
    CHECK(adopted.predict(q.program, q.schedules, q.untransformed) ==
          by_hand.predict(q.program, q.schedules, q.untransformed));
  // another value, given: refused with the reason config, naming both
  o.overrides = {"data.shift_match=prefix"};
  std::string reason, what;
  try {
    lcm::Predictor{o};
  } catch (const lcm::Error& e) {
    reason = e.reason();
    what = e.what();
  }
  CHECK(reason == "config");
  CHECK(contains(what, "data.shift_match=prefix (command line) conflicts with " + ck));
  lcm::set_log_callback(nullptr);
  const std::string err = cap.text();
  CHECK_MESSAGE(err.empty(), err);
}

TEST_CASE("liblcm C API: lcm_set_log_callback gets the notes, stderr stays empty") {
  const Fixture& f = fixture();
  CLines got;
  lcm_set_log_callback(c_callback, &got);
  StderrCapture cap(f.dir + "/stderr_c.txt");
  char err[512] = "";
  const char* over[] = {"model.lstm_embedding_size=17"};
  lcm_predictor* p = lcm_predictor_open(f.ckpt.c_str(), over, 1, err, sizeof err);
  REQUIRE_MESSAGE(p != nullptr, err);
  const auto& q = f.programs[0];
  std::vector<const char*> s;
  for (const std::string& x : q.schedules) s.push_back(x.c_str());
  std::vector<double> out(s.size());
  CHECK(lcm_predictor_predict(p, q.program.c_str(), q.untransformed.c_str(), s.data(), s.size(),
                              out.data(), err, sizeof err) == 0);
  CHECK(lcm_predictor_predict(p, "{", nullptr, s.data(), 1, out.data(), err, sizeof err) == -1);
  CHECK(lcm_predictor_predict(nullptr, nullptr, nullptr, nullptr, 1, nullptr, err, sizeof err) ==
        -1);
  lcm_predictor_close(p);
  const char* dup[] = {"training.threads=1", "training.threads=2"};
  CHECK(lcm_predictor_open(f.ckpt.c_str(), dup, 2, err, sizeof err) == nullptr);
  CHECK(contains(err, "'1' and '2'"));
  CHECK(lcm_predictor_open((f.dir + "/missing.safetensors").c_str(), nullptr, 0, err, sizeof err) ==
        nullptr);
  const std::string text = cap.text();
  CHECK_MESSAGE(text.empty(), text);
  bool note = false;
  for (const std::string& l : got.lines) note = note || contains(l, "model sizes taken");
  CHECK(note);
  lcm_set_log_callback(nullptr, nullptr);
}

TEST_CASE("liblcm: a config file with an alias cycle or deep nesting is an Error, not a crash") {
  const Fixture& f = fixture();
  const std::vector<std::pair<std::string, std::string>> files = {
      {"cycle.yaml", "training: &t\n  x: *t\n"},
      {"deep.yaml", std::string(100000, '[') + "\n"},
      {"deep_block.yaml", [] {
         std::string t;
         for (int i = 0; i < 40; ++i) t += std::string(size_t(2 * i), ' ') + "a:\n";
         return t;
       }()}};
  StderrCapture cap(f.dir + "/stderr_yaml.txt");
  std::vector<std::string> messages;
  for (const auto& [name, text] : files) {
    const std::string path = f.dir + "/" + name;
    std::ofstream(path) << text;
    lcm::PredictorOptions o;
    o.weights_path = f.ckpt;
    o.config_file = path;
    try {
      lcm::Predictor p(o);
      messages.push_back("(opened)");
    } catch (const lcm::Error& e) {
      CHECK(e.reason() == "config");
      messages.push_back(e.what());
    }
  }
  const std::string err = cap.text();
  CHECK_MESSAGE(err.empty(), err);
  REQUIRE(messages.size() == 3);
  CHECK(contains(messages[0], f.dir + "/cycle.yaml line 2: alias *t"));
  CHECK(contains(messages[1], "nested deeper than"));
  CHECK(contains(messages[2], "nested deeper than"));
}

TEST_CASE("liblcm: info_json, ProgramFile and compute_metrics (the Python module's base)") {
  const Fixture& f = fixture();
  lcm::Predictor p(f.ckpt);
  const std::string& info = p.info_json();
  rapidjson::Document d;
  d.Parse(info.c_str());
  REQUIRE(!d.HasParseError());
  CHECK(d["ensemble_size"].GetInt() == 1);
  CHECK(d["parameters"].GetInt64() > 0);
  CHECK(d["model"].IsObject());
  CHECK(d["calibration"].IsNull());  // the random checkpoint has no map
  CHECK(std::string(d["weights_path"].GetString()) == f.ckpt);
  char err[256] = "";
  lcm_predictor* c = lcm_predictor_open(f.ckpt.c_str(), nullptr, 0, err, sizeof err);
  REQUIRE(c);
  CHECK(std::string(lcm_predictor_info(c)) == info);
  lcm_predictor_close(c);
  CHECK(lcm_predictor_info(nullptr) == nullptr);

  // the file's programs in the forms predict takes: the same answers as query_program's forms
  lcm::ProgramFile file(lcm::test::committed_data("synth_valid.jsonl.gz"));
  lcm::ProgramRecord r;
  REQUIRE(file.next(r));
  CHECK(r.name == f.programs[0].name);
  CHECK(r.schedule_jsons.size() == f.programs[0].schedules.size());
  CHECK(r.measured_speedups.size() == r.schedule_jsons.size());
  CHECK(r.measured_speedups[0] > 0);
  CHECK(p.predict(r.program_json, r.schedule_jsons, r.untransformed_json) ==
        p.predict(f.programs[0].program, f.programs[0].schedules, f.programs[0].untransformed));
  int64_t n = 1;
  while (file.next(r)) ++n;
  CHECK(n == 40);
  CHECK(file.skip_counts().empty());
  CHECK_THROWS_AS(lcm::ProgramFile(f.dir + "/missing.jsonl"), lcm::Error);

  // lcm-eval's metrics: a perfect ranking, and a size mismatch is an Error
  const lcm::MetricsSummary m =
      lcm::compute_metrics({"a", "a", "a", "b", "b"}, {1, 2, 3, 1, 2}, {1, 2, 3, 2, 1});
  REQUIRE(m.programs.size() == 2);
  CHECK(m.programs[0].spearman == doctest::Approx(1.0));
  CHECK(m.programs[1].spearman == doctest::Approx(-1.0));
  CHECK(m.n_datapoints == 5);
  CHECK(contains(lcm::metrics_table(m, true), "Spearman"));
  CHECK_THROWS_AS(lcm::compute_metrics({"a"}, {1, 2}, {1, 2}), lcm::Error);
}

namespace {

/// ln distance of two positive speedups.
double ln_gap(double a, double b) {
  return std::fabs(std::log(a) - std::log(b));
}

/// The indices of `v`, largest first (ties in order).
std::vector<size_t> order_of(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  return idx;
}

}  // namespace

TEST_CASE("liblcm observe: that program's answers move toward the measurement, no other's") {
  const Fixture& f = fixture();
  const auto& q0 = f.programs[0];
  const auto& q1 = f.programs[1];
  lcm::Predictor p(f.ckpt);
  const std::vector<double> base0 = p.predict(q0.program, q0.schedules, q0.untransformed);
  const std::vector<double> base1 = p.predict(q1.program, q1.schedules, q1.untransformed);
  // every schedule of the program, measured 3x above or below its prediction in turn
  const size_t n = std::min<size_t>(q0.schedules.size(), 12);
  REQUIRE(n >= 4);
  for (size_t i = 1; i < n; ++i) {
    p.reset_observations();
    const double factor = i % 2 ? 3.0 : 1.0 / 3.0;
    const double measured = base0[i] * factor;
    const double untransformed_ms = 10.0;
    const lcm::Observed o = p.observe(q0.program, q0.schedules[i], {untransformed_ms / measured},
                                      q0.untransformed, untransformed_ms);
    CHECK(o.measured_speedup == doctest::Approx(std::max(measured, 0.01)).epsilon(1e-9));
    CHECK(o.observations == 1);
    CHECK(o.scale > 0);
    const std::vector<double> after = p.predict(q0.program, q0.schedules, q0.untransformed);
    INFO("schedule " << i << ": predicted " << base0[i] << ", measured " << measured << ", now "
                     << after[i]);
    // toward the measurement, not past it
    CHECK(ln_gap(after[i], o.measured_speedup) < ln_gap(base0[i], o.measured_speedup));
    CHECK((after[i] > base0[i]) == (factor > 1));
    CHECK(after[i] == doctest::Approx(o.corrected_speedup).epsilon(1e-6));
    // a monotone map: the order of the program's schedules is the model's
    CHECK(order_of(after) == order_of(base0));
    // another program's answers are the model's, bit for bit
    CHECK(p.predict(q1.program, q1.schedules, q1.untransformed) == base1);
  }
  // reset restores the model's answers exactly
  CHECK(p.reset_observations(q0.program));
  CHECK(!p.reset_observations(q0.program));
  CHECK(p.predict(q0.program, q0.schedules, q0.untransformed) == base0);
}

TEST_CASE("liblcm observe: save, reset, load round-trip; the untransformed time; bad input") {
  const Fixture& f = fixture();
  const auto& q0 = f.programs[0];
  lcm::Predictor p(f.ckpt);
  const std::vector<double> base0 = p.predict(q0.program, q0.schedules, q0.untransformed);
  // no untransformed time yet: refused, and nothing learned
  try {
    p.observe(q0.program, q0.schedules[1], {1.0}, q0.untransformed);
    FAIL("observe without an untransformed time was accepted");
  } catch (const lcm::Error& e) {
    CHECK(e.reason() == "no_untransformed_time");
  }
  // observing the untransformed schedule records its time for the later observations
  const lcm::Observed u = p.observe(q0.program, q0.untransformed, {8.0, 9.0}, q0.untransformed);
  CHECK(u.untransformed);
  CHECK(u.measured_speedup == doctest::Approx(1.0));
  const lcm::Observed o = p.observe(q0.program, q0.schedules[1], {2.0, 4.0}, q0.untransformed);
  CHECK(o.measured_speedup == doctest::Approx(4.0));
  CHECK(o.observations == 2);
  const std::vector<double> adapted = p.predict(q0.program, q0.schedules, q0.untransformed);
  CHECK(adapted != base0);

  const std::string dir = lcm::test::temp_dir("liblcm_observe");
  const std::string file = dir + "/adaptation.json";
  p.save_adaptation(file);
  p.reset_observations();
  CHECK(p.predict(q0.program, q0.schedules, q0.untransformed) == base0);
  p.load_adaptation(file);
  CHECK(p.predict(q0.program, q0.schedules, q0.untransformed) == adapted);
  // a fresh predictor of the same checkpoint loads it too
  lcm::Predictor p2(f.ckpt);
  p2.load_adaptation(file);
  CHECK(p2.predict(q0.program, q0.schedules, q0.untransformed) == adapted);

  // bad input: a named reason, nothing learned
  auto reason_of = [&](const auto& call) {
    try {
      call();
    } catch (const lcm::Error& e) {
      return e.reason();
    }
    return std::string("(none)");
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(reason_of([&] { p.observe(q0.program, q0.schedules[1], {}, q0.untransformed, 1); }) ==
        "bad_execution_times");
  CHECK(reason_of([&] { p.observe(q0.program, q0.schedules[1], {-1}, q0.untransformed, 1); }) ==
        "bad_execution_times");
  CHECK(reason_of([&] { p.observe(q0.program, q0.schedules[1], {nan}, q0.untransformed, 1); }) ==
        "bad_execution_times");
  CHECK(reason_of([&] { p.observe(q0.program, q0.schedules[1], {1}, q0.untransformed, 0); }) ==
        "bad_untransformed_time");
  CHECK(reason_of([&] { p.observe(q0.program, "[]", {1}, q0.untransformed, 1); }) != "(none)");
  CHECK(reason_of([&] { p.observe("{", q0.schedules[1], {1}, "", 1); }) == "malformed_json");
  CHECK(p.predict(q0.program, q0.schedules, q0.untransformed) == adapted);
  {
    std::ofstream bad(dir + "/bad.json");
    bad << "{\"format\": \"something else\"}";
  }
  CHECK(reason_of([&] { p.load_adaptation(dir + "/bad.json"); }) == "bad_adaptation");
  CHECK(reason_of([&] { p.load_adaptation(dir + "/missing.json"); }) == "bad_adaptation");
  // a state learned with another checkpoint is refused
  const std::string other = dir + "/other.safetensors";
  lcm::test::write_random_checkpoint(other, 99);
  lcm::Predictor p3(other);
  CHECK(reason_of([&] { p3.load_adaptation(file); }) == "bad_adaptation");
  CHECK(p.predict(q0.program, q0.schedules, q0.untransformed) == adapted);

  // the C API
  char err[256] = "";
  lcm_predictor* c = lcm_predictor_open(f.ckpt.c_str(), nullptr, 0, err, sizeof err);
  REQUIRE(c);
  std::vector<const char*> s;
  for (const auto& x : q0.schedules) s.push_back(x.c_str());
  std::vector<double> v(s.size());
  REQUIRE(lcm_predictor_predict(c, q0.program.c_str(), q0.untransformed.c_str(), s.data(), s.size(),
                                v.data(), err, sizeof err) == 0);
  CHECK(v == base0);
  const double times[] = {2.0};
  double measured = 0;
  CHECK(lcm_predictor_observe(c, q0.program.c_str(), q0.untransformed.c_str(), s[1], times, 1, nan,
                              &measured, err, sizeof err) == -1);
  CHECK(contains(err, "no_untransformed_time"));
  CHECK(lcm_predictor_load_adaptation(c, file.c_str(), err, sizeof err) == 0);
  REQUIRE(lcm_predictor_predict(c, q0.program.c_str(), q0.untransformed.c_str(), s.data(), s.size(),
                                v.data(), err, sizeof err) == 0);
  CHECK(v == adapted);
  CHECK(lcm_predictor_observe(c, q0.program.c_str(), q0.untransformed.c_str(), s[2], times, 1, nan,
                              &measured, err, sizeof err) == 0);
  CHECK(measured == doctest::Approx(4.0));  // the loaded state's untransformed time, 8 ms
  CHECK(lcm_predictor_observe(c, q0.program.c_str(), nullptr, s[2], times, 0, 1.0, &measured, err,
                              sizeof err) == -1);
  CHECK(contains(err, "bad_execution_times"));
  CHECK(lcm_predictor_save_adaptation(c, (dir + "/c.json").c_str(), err, sizeof err) == 0);
  CHECK(lcm_predictor_reset_observations(c, q0.program.c_str()) == 1);
  CHECK(lcm_predictor_reset_observations(c, q0.program.c_str()) == 0);
  REQUIRE(lcm_predictor_predict(c, q0.program.c_str(), q0.untransformed.c_str(), s.data(), s.size(),
                                v.data(), err, sizeof err) == 0);
  CHECK(v == base0);
  CHECK(lcm_predictor_reset_observations(c, nullptr) == 1);
  CHECK(lcm_predictor_reset_observations(nullptr, nullptr) == -1);
  lcm_predictor_close(c);
}

TEST_CASE("liblcm finetune: per program, background equals synchronous, C API, bad spec") {
  const Fixture& f = fixture();
  const auto& q0 = f.programs[0];
  const auto& q1 = f.programs[1];
  lcm::PredictorOptions o;
  o.weights_path = f.ckpt;
  o.learning = "finetune,steps=20,lr=0.01,synchronous=1";
  lcm::Predictor sync(o);
  o.learning = "finetune,steps=20,lr=0.01";
  lcm::Predictor bg(o);
  const std::vector<double> base0 = sync.predict(q0.program, q0.schedules, q0.untransformed);
  const std::vector<double> base1 = sync.predict(q1.program, q1.schedules, q1.untransformed);
  REQUIRE(base0.size() >= 4);
  for (lcm::Predictor* p : {&sync, &bg})
    for (size_t i = 1; i < 4; ++i)
      p->observe(q0.program, q0.schedules[i], {10.0 / (base0[i] * (i % 2 ? 5.0 : 0.2))},
                 q0.untransformed, 10.0);
  bg.wait_for_learning();
  const std::vector<double> after = sync.predict(q0.program, q0.schedules, q0.untransformed);
  CHECK(after != base0);
  CHECK(bg.predict(q0.program, q0.schedules, q0.untransformed) == after);
  CHECK(sync.predict(q1.program, q1.schedules, q1.untransformed) == base1);
  CHECK(bg.predict(q1.program, q1.schedules, q1.untransformed) == base1);

  // the C API: open with a learning specification; a bad one is refused with its message
  char err[256] = "";
  CHECK(lcm_predictor_open_learning(f.ckpt.c_str(), nullptr, 0, "finetune,steps=-1", err,
                                    sizeof err) == nullptr);
  CHECK(contains(err, "steps"));
  lcm_predictor* c = lcm_predictor_open_learning(f.ckpt.c_str(), nullptr, 0,
                                                 "finetune,steps=20,lr=0.01", err, sizeof err);
  REQUIRE(c);
  std::vector<const char*> s;
  for (const auto& x : q0.schedules) s.push_back(x.c_str());
  double measured = 0;
  for (size_t i = 1; i < 4; ++i) {
    const double t = 10.0 / (base0[i] * (i % 2 ? 5.0 : 0.2));
    REQUIRE(lcm_predictor_observe(c, q0.program.c_str(), q0.untransformed.c_str(), s[i], &t, 1,
                                  10.0, &measured, err, sizeof err) == 0);
  }
  CHECK(lcm_predictor_wait_for_learning(c, err, sizeof err) == 0);
  std::vector<double> v(s.size());
  REQUIRE(lcm_predictor_predict(c, q0.program.c_str(), q0.untransformed.c_str(), s.data(), s.size(),
                                v.data(), err, sizeof err) == 0);
  CHECK(v == after);
  CHECK(lcm_predictor_wait_for_learning(nullptr, err, sizeof err) == -1);
  lcm_predictor_close(c);
}
