// lcm-serve and liblcm against lcm-predict: a client that does what the Tiramisu autoscheduler
// does (pipe, fork, execv, the 3 query lines, fflush, fscanf "%f") for every schedule of real
// programs, the legacy and jsonl protocols, the socket with concurrent clients, the C and C++
// library; and malformed queries mid-stream, EOF, SIGTERM, a client leaving mid-request, an
// oversized line.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lcm/lcm.h"
#include "lcm/lcm.hpp"
#include "model/adaptation.hpp"
#include "model/cost_model.hpp"
#include "model/input_scaling.hpp"
#include "serve/protocol.hpp"
#include "support/cuda_support.hpp"
#include "support/gz_support.hpp"
#include "support/model_process.hpp"
#include "support/model_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"
#include "train/calibrate.hpp"
#include "train/checkpoint.hpp"
#include "util/fnv1a.hpp"

using namespace lcm;

namespace {

using test::json_text;
using test::QueryProgram;
std::string to_json(const rapidjson::Value& v) {
  return json_text(v);
}

/// The test's data: a checkpoint, an input file of a few programs, and lcm-predict's
/// predictions for every schedule of it (program → schedule index → speedup).
struct Fixture {
  std::string dir, ckpt, input, input_no_tree;
  std::vector<QueryProgram> programs;
  std::map<std::string, std::map<int, double>> predicted, predicted_no_tree;
};

std::map<std::string, std::map<int, double>> run_predict(const std::string& dir,
                                                         const std::string& ckpt,
                                                         const std::string& input,
                                                         const std::string& tag) {
  const std::string out = dir + "/pred_" + tag + ".jsonl";
  const test::RunResult r =
      test::run_tool(dir, "lcm-predict",
                     "eval.weights_path=" + ckpt + " eval.input_file=" + input +
                         " training.threads=1 --out " + out);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::map<std::string, std::map<int, double>> m;
  std::ifstream f(out);
  std::string line;
  while (std::getline(f, line)) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(line.c_str());
    REQUIRE(!d.HasParseError());
    m[d["program"].GetString()][d["schedule_index"].GetInt()] = d["predicted_speedup"].GetDouble();
  }
  return m;
}

/// A hand-made calibration map around the random checkpoint's raw outputs (ln speedups near 0).
model::Calibration test_calibration() {
  model::Calibration c;
  c.kind = "isotonic_mape";
  c.x = {-0.05, 0.0, 0.05};
  c.log_speedup = {-1.0, 0.5, 0.8};
  c.tail_slope = 2.0;
  return c;
}

const Fixture& fixture() {
  static Fixture f = [] {
    // a model process that died must fail a check, not kill the suite with SIGPIPE
    signal(SIGPIPE, SIG_IGN);
    Fixture x;
    x.dir = test::temp_dir("serve");
    x.ckpt = x.dir + "/model.safetensors";
    test::write_random_checkpoint(x.ckpt);
    // a calibration map, so that every comparison below also checks that lcm-serve and liblcm
    // apply it as lcm-predict does
    train::store_calibration(x.ckpt, test_calibration());
    // Real programs when ../shared is there, else lcm-synth programs of 32 schedules each, so
    // that the protocol cases ask about as many schedules (> 50) in every clone.
    const size_t n_programs = 6;
    data::SynthOptions synth;
    synth.programs = int64_t(n_programs);
    synth.schedules_per_program = 32;
    synth.seed = 5;
    synth.threads = 1;
    const std::string src = test::shared_or_synth("looperset-sample/valid.jsonl.gz", synth);
    std::vector<std::string> lines = test::gz_lines(src);
    REQUIRE(lines.size() >= n_programs);
    x.input = x.dir + "/programs.jsonl";
    x.input_no_tree = x.dir + "/programs_no_tree.jsonl";
    std::ofstream out(x.input), out2(x.input_no_tree);
    for (size_t i = 0; i < n_programs; ++i) {
      x.programs.push_back(test::query_program(lines[i]));
      rapidjson::Document d;
      d.Parse(lines[i].c_str());
      REQUIRE(d.IsObject());
      out << lines[i] << "\n";
      // the legacy protocol has no untransformed schedule: the loop tree of the iterators
      d["schedules_list"][0].RemoveMember("tree_structure");
      out2 << to_json(d) << "\n";
    }
    out.close();
    out2.close();
    x.predicted = run_predict(x.dir, x.ckpt, x.input, "tree");
    x.predicted_no_tree = run_predict(x.dir, x.ckpt, x.input_no_tree, "no_tree");
    return x;
  }();
  return f;
}

using test::ModelProcess;

std::vector<std::string> serve_argv(const std::string& protocol,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> a{test::bin_dir() + "/lcm-serve", "eval.weights_path=" + fixture().ckpt,
                             "training.threads=1", "--protocol", protocol};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

double rel_diff(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
}

/// Checks `got` (program p, schedule s) against lcm-predict; returns the relative difference.
/// A schedule lcm-predict dropped must be answered with the error value.
double check_answer(const std::map<std::string, std::map<int, double>>& want,
                    const std::string& program, int s, double got) {
  const auto pit = want.find(program);
  REQUIRE(pit != want.end());
  const auto it = pit->second.find(s);
  if (it == pit->second.end()) {
    CHECK_MESSAGE(got == serve::kErrorSpeedup, program << " schedule " << s);
    return 0;
  }
  const double d = rel_diff(got, it->second);
  CHECK_MESSAGE(d <= 1e-5, program << " schedule " << s << ": served " << got << ", lcm-predict "
                                   << it->second);
  return d;
}

std::string with_times(const std::string& schedule, double x) {
  rapidjson::Document d;
  d.Parse(schedule.c_str());
  rapidjson::Value times(rapidjson::kArrayType);
  times.PushBack(x, d.GetAllocator());
  d.AddMember("execution_times", times, d.GetAllocator());
  return to_json(d);
}

/// Connects to the Unix socket at `path` (retrying while the server starts); -1 on failure.
int connect_socket(const std::string& path) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

/// Sends `text` and reads `n` answer lines from socket `fd`.
std::vector<std::string> socket_exchange(int fd, const std::string& text, size_t n) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (w <= 0) break;
    done += size_t(w);
  }
  std::vector<std::string> lines;
  std::string buf;
  char chunk[4096];
  while (lines.size() < n) {
    const ssize_t r = recv(fd, chunk, sizeof chunk, 0);
    if (r <= 0) break;
    buf.append(chunk, size_t(r));
    size_t pos;
    while ((pos = buf.find('\n')) != std::string::npos) {
      lines.push_back(buf.substr(0, pos));
      buf.erase(0, pos + 1);
    }
  }
  return lines;
}

}  // namespace

TEST_CASE("lcm-serve looper protocol: every schedule as the autoscheduler asks, = lcm-predict") {
  const Fixture& f = fixture();
  const std::string err = f.dir + "/looper_err.txt";
  double worst = 0;
  size_t answered = 0;
  {
    ModelProcess mp(serve_argv("looper"), err);
    for (const QueryProgram& q : f.programs) {
      // first query: line 2 is the candidate's own text (the untransformed schedule)
      const double first = mp.ask({q.program, q.schedules[0], q.schedules[0]});
      worst = std::max(worst, check_answer(f.predicted, q.name, 0, first));
      // later queries: the untransformed schedule with the model's first answer as its time
      const std::string line2 = with_times(q.untransformed, first);
      for (size_t s = 1; s < q.schedules.size(); ++s) {
        const double v = mp.ask({q.program, line2, q.schedules[s]});
        worst = std::max(worst, check_answer(f.predicted, q.name, int(s), v));
        ++answered;
      }
    }
    CHECK(mp.finish() == 0);  // EOF ends it cleanly
  }
  MESSAGE("looper: " << answered << " queries, largest relative difference to lcm-predict "
                     << worst);
  CHECK(answered > 50);
  const std::string e = test::slurp(err);
  CHECK(test::contains(e, "end of input"));
  CHECK(!test::has_sanitizer_report(e));
}

TEST_CASE("lcm-serve legacy protocol (program, schedule) = lcm-predict on the iterators' tree") {
  const Fixture& f = fixture();
  ModelProcess mp(serve_argv("legacy"), f.dir + "/legacy_err.txt");
  double worst = 0;
  for (const QueryProgram& q : f.programs)
    for (size_t s = 0; s < q.schedules.size(); ++s)
      worst = std::max(worst, check_answer(f.predicted_no_tree, q.name, int(s),
                                           mp.ask({q.program, q.schedules[s]})));
  CHECK(mp.finish() == 0);
  MESSAGE("legacy: largest relative difference " << worst);
}

TEST_CASE("lcm-serve jsonl protocol: one batched request per program = lcm-predict") {
  const Fixture& f = fixture();
  const std::string req = f.dir + "/jsonl_requests.txt";
  {
    std::ofstream r(req);
    for (const QueryProgram& q : f.programs) {
      r << "{\"program\":" << q.program << ",\"untransformed\":" << q.untransformed
        << ",\"schedules\":[";
      for (size_t s = 0; s < q.schedules.size(); ++s) r << (s ? "," : "") << q.schedules[s];
      r << "]}\n";
    }
  }
  const test::RunResult rr = test::run_tool(
      f.dir, "lcm-serve",
      "eval.weights_path=" + f.ckpt + " training.threads=1 --protocol jsonl < " + req);
  REQUIRE_MESSAGE(rr.code == 0, rr.err);
  std::istringstream a(rr.out);
  std::string line;
  size_t p = 0;
  double worst = 0;
  while (std::getline(a, line)) {
    REQUIRE(p < f.programs.size());
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(line.c_str());
    REQUIRE_MESSAGE(d.HasMember("speedups"), line);
    const auto& v = d["speedups"].GetArray();
    REQUIRE(v.Size() == f.programs[p].schedules.size());
    for (rapidjson::SizeType s = 0; s < v.Size(); ++s)
      worst =
          std::max(worst, check_answer(f.predicted, f.programs[p].name, int(s), v[s].GetDouble()));
    ++p;
  }
  CHECK(p == f.programs.size());
  MESSAGE("jsonl: largest relative difference " << worst);

  // bad requests: an error object each, and the good request after them still answered
  const QueryProgram& q = f.programs[0];
  const std::string bad = f.dir + "/jsonl_bad.txt";
  {
    std::ofstream r(bad);
    r << "[1, 2]\n{\"schedules\": []}\n{\"program\": " << q.program << ", \"schedules\": ["
      << q.schedules[1] << ", 5]}\n{broken\n"
      << "{\"program\": " << q.program << ", \"untransformed\": " << q.untransformed
      << ", \"schedules\": [" << q.schedules[1] << "]}\n";
  }
  const test::RunResult rb = test::run_tool(
      f.dir, "lcm-serve",
      "eval.weights_path=" + f.ckpt + " training.threads=1 --protocol jsonl < " + bad);
  REQUIRE_MESSAGE(rb.code == 0, rb.err);
  std::vector<std::string> ans;
  std::istringstream in(rb.out);
  for (std::string l; std::getline(in, l);) ans.push_back(l);
  REQUIRE(ans.size() == 5);
  CHECK(test::contains(ans[0], "{\"error\":\"bad_request: expected a JSON object\"}"));
  CHECK(test::contains(ans[1], "{\"error\":\"bad_request: no \\\"program\\\" object\"}"));
  CHECK(test::contains(ans[2], "\"speedups\":["));
  CHECK(test::contains(ans[2], ",0.0],\"errors\":[{\"index\":1,\"reason\":"));
  CHECK(test::contains(ans[3], "{\"error\":\"malformed_json: "));
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(ans[4].c_str());
  REQUIRE(d.HasMember("speedups"));
  check_answer(f.predicted, q.name, 1, d["speedups"][0].GetDouble());
  CHECK(test::contains(rb.err, "5 queries, 4 answered as errors"));
}

TEST_CASE("lcm-serve: malformed and rejected queries mid-stream answer 0 and serving goes on") {
  const Fixture& f = fixture();
  const QueryProgram& q = f.programs[0];
  const std::string err = f.dir + "/bad_err.txt";
  ModelProcess mp(serve_argv("looper", {"--max-line-mib", "1"}), err);
  const double good = mp.ask({q.program, q.untransformed, q.schedules[1]});
  CHECK(check_answer(f.predicted, q.name, 1, good) <= 1e-5);
  // broken JSON in each line position
  CHECK(mp.ask({"{\"iterators\": [", q.untransformed, q.schedules[1]}) == 0);
  CHECK(mp.ask({q.program, "not json", q.schedules[1]}) == 0);
  CHECK(mp.ask({q.program, q.untransformed, "{\"comp00\": {"}) == 0);
  // a schedule the feature rules reject: five transformations of one computation
  {
    rapidjson::Document d;
    d.Parse(q.schedules[1].c_str());
    const std::string comp = d.MemberBegin()->name.GetString();
    std::string tl = "[";
    for (int i = 0; i < 5; ++i)
      tl += std::string(i ? "," : "") + "[1,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0]";
    tl += "]";
    const std::string bad = "{\"" + comp + "\":{\"transformations_list\":" + tl + "}}";
    CHECK(mp.ask({q.program, q.untransformed, bad}) == 0);
  }
  // a program deeper than 5 loops: one computation with 6 iterators
  {
    std::string its, names;
    for (int i = 0; i < 6; ++i) {
      const std::string n = "i" + std::to_string(i);
      its += std::string(i ? "," : "") + "\"" + n + "\":{\"lower_bound\":0,\"upper_bound\":4," +
             "\"parent_iterator\":" + (i ? "\"i" + std::to_string(i - 1) + "\"" : "null") +
             ",\"child_iterators\":[" + (i < 5 ? "\"i" + std::to_string(i + 1) + "\"" : "") +
             "],\"computations_list\":[" + (i == 5 ? "\"c\"" : "") + "]}";
      names += std::string(i ? "," : "") + "\"" + n + "\"";
    }
    const std::string deep =
        "{\"function_name\":\"deep\",\"memory_size\":\"1\",\"iterators\":{" + its +
        "},\"computations\":{\"c\":{\"absolute_order\":1,\"iterators\":[" + names +
        "],\"comp_is_reduction\":false,\"number_of_additions\":0,\"number_of_subtraction\":0,"
        "\"number_of_multiplication\":0,\"number_of_division\":0,\"write_access_relation\":"
        "\"{ c[i0,i1,i2,i3,i4,i5] -> b[i0] }\",\"write_buffer_id\":0,\"data_type\":\"float32\","
        "\"data_type_size\":4,\"accesses\":[],\"expression_representation\":{\"expr_type\":"
        "\"value\",\"children\":[]}}}}";
    CHECK(mp.ask({deep, "{}", "{}"}) == 0);
  }
  // unknown extra fields and a string memory_size are accepted (string bounds such as "i2 " are
  // in the real programs themselves)
  {
    rapidjson::Document d;
    d.Parse(q.program.c_str());
    d.AddMember("some_future_field", rapidjson::Value("x"), d.GetAllocator());
    // the autoscheduler writes memory_size as a string
    d.RemoveMember("memory_size");
    d.AddMember("memory_size", rapidjson::Value("1024"), d.GetAllocator());
    const double v = mp.ask({to_json(d), q.untransformed, q.schedules[1]});
    CHECK(rel_diff(v, good) <= 1e-6);
  }
  // a 2 MiB line over the 1 MiB limit, then a good query
  CHECK(mp.ask({std::string(2 << 20, 'x'), q.untransformed, q.schedules[1]}) == 0);
  CHECK(rel_diff(mp.ask({q.program, q.untransformed, q.schedules[1]}), good) <= 1e-6);
  CHECK(mp.finish() == 0);
  const std::string e = test::slurp(err);
  CHECK(test::contains(e, "query 2: program: malformed_json: "));
  CHECK(test::contains(e, " of the program\n"));
  CHECK(test::contains(e, "query 3: program: malformed_json: "));
  CHECK(test::contains(e, " of the untransformed schedule\n"));
  CHECK(test::contains(e, "query 4: candidate schedule: malformed_json"));
  CHECK(test::contains(e, "query 5: candidate schedule: transformations_gt_4"));
  CHECK(test::contains(e, "query 6: program: depth_gt_5"));
  CHECK(test::contains(e, "line_too_long"));
  CHECK(test::contains(e, "9 queries, 6 answered as errors"));
  CHECK(!test::has_sanitizer_report(e));
}

TEST_CASE("lcm-serve: lines out of step, a tree that misses computations, I/O and usage errors") {
  const Fixture& f = fixture();
  const QueryProgram& q = f.programs[0];
  const std::string err = f.dir + "/step_err.txt";
  {
    ModelProcess mp(serve_argv("looper"), err);
    CHECK(mp.ask({q.program, q.program, q.schedules[1]}) == 0);  // the program where line 2 goes
    CHECK(mp.ask({q.program, "", q.schedules[1]}) == 0);         // an empty line
    rapidjson::Document u;
    u.Parse(q.untransformed.c_str());
    REQUIRE(u.HasMember("tree_structure"));
    rapidjson::Value& roots = u["tree_structure"]["roots"];
    rapidjson::Value one(rapidjson::kObjectType);
    one.AddMember("loop_name", rapidjson::Value(roots[0]["loop_name"], u.GetAllocator()),
                  u.GetAllocator());
    one.AddMember("computations_list", rapidjson::Value(rapidjson::kArrayType), u.GetAllocator());
    one.AddMember("child_list", rapidjson::Value(rapidjson::kArrayType), u.GetAllocator());
    roots.Clear();
    roots.PushBack(one, u.GetAllocator());  // one empty loop: no computation placed
    CHECK(mp.ask({q.program, to_json(u), q.schedules[1]}) == 0);
    CHECK(check_answer(f.predicted, q.name, 1,
                       mp.ask({q.program, q.untransformed, q.schedules[1]})) <= 1e-5);
    CHECK(mp.finish() == 0);
  }
  const std::string e = test::slurp(err);
  CHECK(test::contains(e, "query 1: program: not_a_schedule: "));
  CHECK(test::contains(e, "query 2: empty_line: line 2 of the query is empty"));
  CHECK(test::contains(e,
                       "query 3: program: bad_tree: the loop tree (the untransformed "
                       "schedule's tree_structure) places no loop around"));
  CHECK(test::contains(e, "4 queries, 3 answered as errors"));

  // usage and I/O errors
  const std::string args = "eval.weights_path=" + f.ckpt + " training.threads=1";
  CHECK(test::run_tool(f.dir, "lcm-serve", args + " --socket ''").code == 2);
  const std::string one_query = f.dir + "/one_query.txt";
  {
    std::ofstream o(one_query);
    o << q.program << "\n" << q.untransformed << "\n" << q.schedules[1] << "\n";
  }
  if (access("/dev/full", W_OK) == 0) {
    const std::string full_err = f.dir + "/full_err.txt";
    const int rc = std::system(
        (test::bin_dir() + "/lcm-serve " + args + " < " + one_query + " > /dev/full 2> " + full_err)
            .c_str());
    CHECK(WEXITSTATUS(rc) == 1);
    CHECK(test::contains(test::slurp(full_err), "error: cannot write the answers: "));
  }
  const test::RunResult dir_in = test::run_tool(f.dir, "lcm-serve", args + " < " + f.dir);
  CHECK(dir_in.code == 1);
  CHECK(test::contains(dir_in.err, "cannot read the queries: "));

  // jsonl: too many schedules in one request; bytes that are not UTF-8 stay out of the answer
  const std::string big = f.dir + "/jsonl_big.txt";
  {
    std::ofstream o(big);
    o << "{\"program\":" << q.program << ",\"schedules\":[";
    for (size_t i = 0; i <= serve::kMaxRequestSchedules; ++i) o << (i ? "," : "") << "{}";
    o << "]}\n{\"program\":" << q.program << ",\"schedules\":[{\"comp00\":"
      << "{\"parallelized_dim\":\"zz\xff\"}}]}\n";
  }
  const test::RunResult jb =
      test::run_tool(f.dir, "lcm-serve", args + " --protocol jsonl < " + big);
  CHECK(jb.code == 0);
  CHECK(test::contains(jb.out, "{\"error\":\"too_many_schedules: 4097 schedules in one request"));
  CHECK(jb.out.find('\xff') == std::string::npos);
}

TEST_CASE("lcm-serve: SIGTERM and a partial query at EOF end it with exit 0") {
  const Fixture& f = fixture();
  const QueryProgram& q = f.programs[0];
  {
    ModelProcess mp(serve_argv("looper"), f.dir + "/term_err.txt");
    CHECK(mp.ask({q.program, q.untransformed, q.schedules[1]}) > 0);
    mp.signal(SIGTERM);
    CHECK(mp.wait_exit() == 0);
  }
  {
    ModelProcess mp(serve_argv("looper"), f.dir + "/partial_err.txt");
    mp.write_raw(q.program + "\n" + q.untransformed + "\n");  // two of three lines, then EOF
    CHECK(mp.finish() == 0);
  }
  {  // a 100 MB line under the default 64 MiB limit: dropped, answered 0, memory bounded
    ModelProcess mp(serve_argv("looper"), f.dir + "/huge_err.txt");
    CHECK(mp.ask({std::string(100'000'000, ' '), q.untransformed, q.schedules[1]}) == 0);
    CHECK(mp.ask({q.program, q.untransformed, q.schedules[1]}) > 0);
    CHECK(mp.finish() == 0);
  }
  for (const char* log : {"/term_err.txt", "/partial_err.txt", "/huge_err.txt"}) {
    const std::string e = test::slurp(f.dir + log);
    CHECK_MESSAGE(!test::has_sanitizer_report(e), e);
  }
  CHECK(test::contains(test::slurp(f.dir + "/huge_err.txt"), "query 1: line_too_long"));
}

TEST_CASE("lcm-serve --socket: concurrent clients, one leaving mid-request") {
  const Fixture& f = fixture();
  const std::string path = f.dir + "/serve.sock";
  ModelProcess server(serve_argv("looper", {"--socket", path}), f.dir + "/socket_err.txt");
  // a client that sends half a query and disconnects
  {
    const int fd = connect_socket(path);
    REQUIRE(fd >= 0);
    const std::string half = f.programs[0].program + "\n" + f.programs[0].untransformed;
    CHECK(send(fd, half.data(), half.size(), MSG_NOSIGNAL) == ssize_t(half.size()));
    close(fd);
  }
  std::vector<double> worst(f.programs.size(), 0);
  std::vector<size_t> answered(f.programs.size(), 0);
  std::vector<std::thread> clients;
  for (size_t p = 0; p < f.programs.size(); ++p)
    clients.emplace_back([&, p] {
      const QueryProgram& q = f.programs[p];
      const int fd = connect_socket(path);
      if (fd < 0) return;
      std::string text;
      for (size_t s = 0; s < q.schedules.size(); ++s)
        text += q.program + "\n" + q.untransformed + "\n" + q.schedules[s] + "\n";
      const std::vector<std::string> lines = socket_exchange(fd, text, q.schedules.size());
      close(fd);
      answered[p] = lines.size();
      for (size_t s = 0; s < lines.size(); ++s) {
        const double v = std::strtod(lines[s].c_str(), nullptr);
        const auto it = f.predicted.at(q.name).find(int(s));
        const double want = it == f.predicted.at(q.name).end() ? 0 : it->second;
        worst[p] = std::max(worst[p], want == 0 ? std::fabs(v) : rel_diff(v, want));
      }
    });
  for (auto& t : clients) t.join();
  for (size_t p = 0; p < f.programs.size(); ++p) {
    CHECK(answered[p] == f.programs[p].schedules.size());
    CHECK_MESSAGE(worst[p] <= 1e-5, f.programs[p].name);
  }
  server.signal(SIGTERM);
  CHECK(server.wait_exit() == 0);
  CHECK(access(path.c_str(), F_OK) != 0);  // the socket file is removed
  const std::string e = test::slurp(f.dir + "/socket_err.txt");
  CHECK(test::contains(e, "listening on"));
  CHECK(!test::has_sanitizer_report(e));
}

TEST_CASE("liblcm C++ and C APIs = lcm-predict, also from several threads") {
  const Fixture& f = fixture();
  lcm::Predictor p(f.ckpt);
  double worst = 0;
  for (const QueryProgram& q : f.programs) {
    const std::vector<double> v = p.predict(q.program, q.schedules, q.untransformed);
    REQUIRE(v.size() == q.schedules.size());
    for (size_t s = 0; s < v.size(); ++s)
      worst = std::max(worst, check_answer(f.predicted, q.name, int(s), v[s]));
  }
  MESSAGE("liblcm: largest relative difference " << worst);
  // concurrent calls on one Predictor
  std::vector<std::thread> ts;
  std::vector<int> bad(f.programs.size(), 0);
  for (size_t i = 0; i < f.programs.size(); ++i)
    ts.emplace_back([&, i] {
      const QueryProgram& q = f.programs[i];
      for (size_t s = 0; s < q.schedules.size(); ++s) {
        const double v = p.predict(q.program, {q.schedules[s]}, q.untransformed)[0];
        const auto it = f.predicted.at(q.name).find(int(s));
        if (it != f.predicted.at(q.name).end() && rel_diff(v, it->second) > 1e-5) ++bad[i];
      }
    });
  for (auto& t : ts) t.join();
  for (int b : bad) CHECK(b == 0);
  // a program that cannot be scored throws lcm::Error with its reason
  bool threw = false;
  try {
    p.predict("{\"iterators\": 5}", {"{}"});
  } catch (const lcm::Error& e) {
    threw = true;
    CHECK(e.reason() == "bad_field");
  }
  CHECK(threw);

  // the C API
  char err[256] = "";
  const char* over[] = {"training.threads=1"};
  lcm_predictor* c = lcm_predictor_open(f.ckpt.c_str(), over, 1, err, sizeof err);
  REQUIRE_MESSAGE(c != nullptr, err);
  const QueryProgram& q = f.programs[0];
  std::vector<const char*> sp;
  for (const std::string& s : q.schedules) sp.push_back(s.c_str());
  std::vector<double> out(sp.size(), -1);
  REQUIRE(lcm_predictor_predict(c, q.program.c_str(), q.untransformed.c_str(), sp.data(), sp.size(),
                                out.data(), err, sizeof err) == 0);
  for (size_t s = 0; s < out.size(); ++s) check_answer(f.predicted, q.name, int(s), out[s]);
  CHECK(lcm_predictor_predict(c, "{", nullptr, sp.data(), 1, out.data(), err, sizeof err) == -1);
  CHECK(test::contains(err, "malformed_json"));
  lcm_predictor_close(c);
  CHECK(lcm_predictor_open((f.dir + "/missing.safetensors").c_str(), nullptr, 0, err, sizeof err) ==
        nullptr);
  CHECK(test::contains(err, "missing.safetensors"));
  CHECK(std::string(lcm_version()) == lcm::library_version());
}

TEST_CASE("lcm-serve and liblcm with training.device=cuda:0 = lcm-predict on the CPU") {
  if (test::skipped_without_cuda("serving on a CUDA device")) return;
  const Fixture& f = fixture();
  // the weights on the device, the program rows computed there, every forward run there
  lcm::PredictorOptions o;
  o.weights_path = f.ckpt;
  o.overrides = {"training.device=cuda:0"};
  lcm::Predictor p(o);
  double worst = 0;
  for (const QueryProgram& q : f.programs) {
    const std::vector<double> v = p.predict(q.program, q.schedules, q.untransformed);
    for (size_t s = 0; s < v.size(); ++s)
      worst = std::max(worst, check_answer(f.predicted, q.name, int(s), v[s]));
  }
  MESSAGE("liblcm on cuda:0: largest relative difference to lcm-predict on the CPU " << worst);
  ModelProcess mp(serve_argv("looper", {"training.device=cuda:0"}), f.dir + "/cuda_err.txt");
  const QueryProgram& q = f.programs[0];
  for (size_t s = 0; s < q.schedules.size(); ++s)
    check_answer(f.predicted, q.name, int(s), mp.ask({q.program, q.untransformed, q.schedules[s]}));
  CHECK(mp.finish() == 0);
}

TEST_CASE("liblcm: cmake --install and find_package(lcm) build the example evaluator") {
  LCM_SKIP_UNDER_SANITIZER("an install and a CMake build of the example");
  const Fixture& f = fixture();
  const std::string build = std::string(LCM_BIN_DIR) + "/..";
  const std::string prefix = f.dir + "/prefix", ex = f.dir + "/example";
  const test::RunResult inst{std::system(("cmake --install " + build + " --prefix " + prefix +
                                          " > " + f.dir + "/install.txt 2>&1")
                                             .c_str()),
                             "", ""};
  REQUIRE_MESSAGE(inst.code == 0, test::slurp(f.dir + "/install.txt"));
  const std::string cfg = "cmake -S " + test::source_path("examples/tiramisu_evaluator") + " -B " +
                          ex + " -DCMAKE_PREFIX_PATH=" + prefix + " > " + f.dir +
                          "/example.txt 2>&1 && cmake --build " + ex + " >> " + f.dir +
                          "/example.txt 2>&1";
  REQUIRE_MESSAGE(std::system(cfg.c_str()) == 0, test::slurp(f.dir + "/example.txt"));
  // the example scores the looper queries of one program as lcm-serve does
  const QueryProgram& q = f.programs[0];
  const std::string queries = f.dir + "/example_queries.txt";
  {
    std::ofstream o(queries);
    for (const std::string& s : q.schedules)
      o << q.program << "\n" << q.untransformed << "\n" << s << "\n";
  }
  const std::string out = f.dir + "/example_out.txt";
  REQUIRE(std::system((ex + "/tiramisu_evaluator " + f.ckpt + " " + queries + " > " + out + " 2>" +
                       f.dir + "/example_err.txt")
                          .c_str()) == 0);
  std::ifstream in(out);
  double v;
  int s = 0;
  while (in >> v) check_answer(f.predicted, q.name, s++, v);
  CHECK(s == int(q.schedules.size()));
}

TEST_CASE("the checkpoint's calibration map is applied; eval.calibrated=false gives raw outputs") {
  const Fixture& f = fixture();
  const std::string out = f.dir + "/pred_raw.jsonl";
  const test::RunResult r =
      test::run_tool(f.dir, "lcm-predict",
                     "eval.weights_path=" + f.ckpt + " eval.input_file=" + f.input +
                         " eval.calibrated=false training.threads=1 --out " + out);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const model::Calibration cal = test_calibration();
  std::ifstream in(out);
  std::string line;
  int n = 0, changed = 0;
  while (std::getline(in, line)) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(line.c_str());
    REQUIRE(!d.HasParseError());
    const double raw = d["predicted_speedup"].GetDouble();
    const double want = cal.apply(std::log(raw));  // the model predicts ln speedup
    const double got = f.predicted.at(d["program"].GetString()).at(d["schedule_index"].GetInt());
    CHECK(rel_diff(got, want) <= 1e-9);
    changed += std::fabs(got - raw) > 1e-6 * raw;
    ++n;
  }
  CHECK(n > 0);
  CHECK(changed == n);
}

TEST_CASE("program keys are FNV-1a 64: the published test vectors") {
  // http://www.isthe.com/chongo/tech/comp/fnv/ (test vectors of FNV-1a 64)
  CHECK(lcm::fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(lcm::fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(lcm::fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  // pieces hash as their concatenation
  CHECK(lcm::fnv1a64("bar", 3, lcm::fnv1a64("foo", 3)) == lcm::fnv1a64("foobar", 6));
  CHECK(lcm::model::program_key("a") == "af63dc4c8601ec8c");
}

TEST_CASE("fit_correction: shrunk toward the identity, scale > 0, exact with many points") {
  using model::Observation;
  CHECK(model::fit_correction({}).observations == 0);
  CHECK(model::fit_correction({}).apply(1.2345) == 1.2345);
  // generated lines ln m = a + b ln p (b of both signs) and noise-free points
  uint64_t state = 7;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) / double(1ull << 53);
  };
  for (int trial = 0; trial < 50; ++trial) {
    const double a = 4 * uniform() - 2, b = 6 * uniform() - 3;
    const int n = 1 + int(uniform() * 300);
    std::vector<Observation> obs;
    for (int i = 0; i < n; ++i) {
      const double x = 4 * uniform() - 2;
      obs.push_back(Observation{x, a + b * x});
    }
    const model::Correction c = model::fit_correction(obs);
    // a weak prior, which 200 points outweigh
    const model::Correction weak = model::fit_correction(obs, model::CorrectionPrior{0.5, 2.0});
    INFO("a " << a << " b " << b << " n " << n << ": fitted " << c.offset << ", " << c.scale);
    CHECK(c.observations == n);
    CHECK(c.scale >= model::CorrectionPrior{}.min_scale);
    CHECK(c.scale <= model::CorrectionPrior{}.max_scale);
    CHECK(std::isfinite(c.offset));
    if (n >= 200 && b > 0.2) {
      CHECK(weak.offset == doctest::Approx(a).epsilon(0.05).scale(1));
      CHECK(weak.scale == doctest::Approx(b).epsilon(0.05).scale(1));
    }

    if (n == 1) {  // one point: the fitted value between the model's and the measurement
      const double fitted = c.offset + c.scale * obs[0].predicted_ln;
      CHECK((fitted - obs[0].predicted_ln) * (obs[0].measured_ln - fitted) >= 0);
    }
  }
}

TEST_CASE("lcm-serve jsonl observe and reset requests: learned per program, named errors") {
  const std::string dir = test::temp_dir("serve_observe");
  const std::string ckpt = dir + "/model.safetensors";
  test::write_random_checkpoint(ckpt);
  config::Config c;
  config::apply_overrides(c, {"eval.weights_path=" + ckpt, "training.threads=1"});
  serve::Scorer scorer(c);
  const std::vector<std::string> lines =
      test::gz_lines(test::committed_data("synth_valid.jsonl.gz"));
  const QueryProgram q0 = test::query_program(lines[0]), q1 = test::query_program(lines[1]);
  auto request = [](const QueryProgram& q, const std::string& extra) {
    std::string r = "{\"program\": " + q.program + ", \"untransformed\": " + q.untransformed;
    if (extra.empty()) {
      r += ", \"schedules\": [";
      for (size_t i = 0; i < q.schedules.size(); ++i) r += (i ? "," : "") + q.schedules[i];
      r += "]";
    }
    return r + extra + "}";
  };
  auto answer = [&](const std::string& line) {
    int64_t n = 0;
    bool had_error = false;
    std::string error;
    const std::string a = serve::answer_jsonl(scorer, line, n, had_error, error);
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(a.c_str());
    REQUIRE(!d.HasParseError());
    CHECK(had_error == d.HasMember("error"));
    return a;
  };
  auto speedups = [&](const QueryProgram& q) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(answer(request(q, "")).c_str());
    std::vector<double> v;
    for (const auto& x : d["speedups"].GetArray()) v.push_back(x.GetDouble());
    return v;
  };
  const std::vector<double> base0 = speedups(q0), base1 = speedups(q1);
  REQUIRE(base0.size() > 2);
  // measured 5x the prediction: the answer goes up, toward it
  const double measured = 5 * base0[1];
  const std::string obs =
      answer(request(q0, ", \"request\": \"observe\", \"schedule\": " + q0.schedules[1] +
                             ", \"execution_times\": [" + std::to_string(10.0 / measured) +
                             "], \"untransformed_time\": 10"));
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag>(obs.c_str());
  REQUIRE_MESSAGE(d.HasMember("observed"), obs);
  CHECK(d["observed"]["measured_speedup"].GetDouble() == doctest::Approx(measured).epsilon(1e-6));
  CHECK(d["observed"]["observations"].GetInt() == 1);
  const std::vector<double> after0 = speedups(q0);
  CHECK(after0[1] > base0[1]);
  CHECK(after0[1] < measured);
  CHECK(speedups(q1) == base1);
  // errors: named, and nothing learned
  const std::string schedule = ", \"schedule\": " + q0.schedules[1];
  for (const auto& [extra, reason] : std::vector<std::pair<std::string, std::string>>{
           {", \"request\": \"observe\"" + schedule + ", \"execution_times\": [-1]",
            "bad_execution_times"},
           {", \"request\": \"observe\"" + schedule + ", \"execution_times\": [1, \"x\"]",
            "bad_execution_times"},
           {", \"request\": \"observe\"" + schedule + ", \"execution_times\": []",
            "bad_execution_times"},
           {", \"request\": \"observe\"" + schedule + ", \"execution_times\": [1]",
            "no_untransformed_time"},
           {", \"request\": \"observe\"" + schedule +
                ", \"execution_times\": [1], \"untransformed_time\": -3",
            "bad_untransformed_time"},
           {", \"request\": \"observe\", \"execution_times\": [1]", "bad_request"},
           {", \"request\": \"observe\"" + schedule, "bad_request"},
           {", \"request\": \"learn\"", "bad_request"},
       }) {
    const std::string a = answer(request(q0, extra));
    CHECK_MESSAGE(test::contains(a, "\"error\":\"" + reason), a);
  }
  CHECK(speedups(q0) == after0);
  // reset of another program: nothing; of this one: the model's answers again
  CHECK(test::contains(answer(request(q1, ", \"request\": \"reset\"")), "\"reset\":false"));
  CHECK(test::contains(answer(request(q0, ", \"request\": \"reset\"")), "\"reset\":true"));
  CHECK(speedups(q0) == base0);
  CHECK(test::contains(answer("{\"request\": \"reset\"}"), "\"reset\":true"));
}

namespace {

/// A random checkpoint in a temporary folder `name`, a config that loads it on one thread, and
/// the first two programs of the committed synthetic valid slice.
struct LearnSetup {
  std::string dir, ckpt;
  config::Config c;
  QueryProgram q0, q1;
};

LearnSetup learn_setup(const std::string& name) {
  LearnSetup s;
  s.dir = test::temp_dir(name);
  s.ckpt = s.dir + "/model.safetensors";
  test::write_random_checkpoint(s.ckpt);
  config::apply_overrides(s.c, {"eval.weights_path=" + s.ckpt, "training.threads=1"});
  const std::vector<std::string> lines =
      test::gz_lines(test::committed_data("synth_valid.jsonl.gz"));
  s.q0 = test::query_program(lines[0]);
  s.q1 = test::query_program(lines[1]);
  return s;
}

/// The speedups of `s` (kErrorSpeedup for an unscored schedule).
std::vector<double> speedups_of(const std::vector<serve::ScheduleScore>& s) {
  std::vector<double> v;
  for (const auto& x : s) v.push_back(x.speedup);
  return v;
}

}  // namespace

TEST_CASE("Scorer finetune: per program, queries never wait for the worker, bounded state") {
  const LearnSetup ls = learn_setup("serve_finetune");
  const std::string& dir = ls.dir;
  const config::Config& c = ls.c;
  const QueryProgram &q0 = ls.q0, &q1 = ls.q1;
  serve::ScorerOptions o;
  o.learning = serve::Learning::Finetune;
  o.finetune = {};
  o.finetune.steps = 20;
  o.finetune.lr = 0.01;
  o.finetune.buffer = 3;
  o.finetune.max_programs = 1;
  serve::Scorer scorer(c, o);
  auto score = [&](serve::Scorer& s, const QueryProgram& q) {
    return speedups_of(s.score(q.program, q.untransformed, q.schedules));
  };
  const std::vector<double> base0 = score(scorer, q0), base1 = score(scorer, q1);
  REQUIRE(base0.size() > 5);

  // The worker is held after its steps, before it publishes: observe and score return (a
  // query that waited for it would never return here), with the checkpoint's answers.
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, release = false;
  scorer.set_learning_hook_for_test([&] {
    std::unique_lock<std::mutex> lock(mu);
    held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  const double measured = 8 * base0[1];
  scorer.observe(q0.program, q0.untransformed, q0.schedules[1], {10.0 / measured}, 10.0);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });  // the job's steps are done, its weights not published
  }
  CHECK(score(scorer, q0) == base0);
  CHECK(scorer.learning_stats().completed == 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  scorer.wait_for_learning();
  scorer.set_learning_hook_for_test({});
  CHECK(scorer.learning_stats().completed == 1);
  const std::vector<double> after = score(scorer, q0);
  INFO("predicted " << base0[1] << ", measured " << measured << ", now " << after[1]);
  CHECK(std::fabs(std::log(after[1] / measured)) < std::fabs(std::log(base0[1] / measured)));
  // another program: the checkpoint's answers, bit for bit
  CHECK(score(scorer, q1) == base1);

  // The cached per-program rows are the checkpoint's: a fresh Scorer with a cold cache, given
  // the saved state, answers the same (so the adapted program was not scored over stale rows).
  const std::string file = dir + "/state.json";
  scorer.save_adaptation(file);
  {
    serve::Scorer fresh(c, o);
    fresh.load_adaptation(file);
    CHECK(score(fresh, q0) == after);
    CHECK(score(fresh, q1) == base1);
  }

  // The replay buffer keeps the last `buffer` observations.
  for (size_t i = 2; i < 6; ++i)
    scorer.observe(q0.program, q0.untransformed, q0.schedules[i], {10.0 / base0[i]}, 10.0);
  scorer.wait_for_learning();
  {
    rapidjson::Document d;
    const std::string state = scorer.adaptation_json();
    d.Parse(state.c_str());
    REQUIRE(d["finetuned"].Size() == 1);
    const auto& p = d["finetuned"][0];
    CHECK(p["observations"].GetInt() == 5);
    REQUIRE(p["buffer"].Size() == 3);
    CHECK(std::string(p["buffer"][0][0].GetString()) == q0.schedules[3]);
    CHECK(std::string(p["buffer"][2][0].GetString()) == q0.schedules[5]);
    // head only: only the regression head's weights are stored
    for (const auto& w : p["weights"][0].GetObject())
      CHECK_MESSAGE(serve::head_parameter(w.name.GetString()), w.name.GetString());
    CHECK(p["weights"][0].MemberCount() > 0);
  }
  // At most max_programs = 1 adapted program: learning q1 drops q0's weights.
  scorer.observe(q1.program, q1.untransformed, q1.schedules[1], {10.0 / (3 * base1[1])}, 10.0);
  scorer.wait_for_learning();
  CHECK(scorer.learning_stats().programs == 1);
  CHECK(score(scorer, q0) == base0);
  CHECK(score(scorer, q1) != base1);
  CHECK(scorer.reset_observations(q1.program));
  CHECK(score(scorer, q1) == base1);

  // A bad specification is refused with its reason.
  serve::FinetuneOptions f;
  CHECK(serve::parse_learning_spec("both,steps=5,head_only=0", f) == serve::Learning::Both);
  CHECK(f.steps == 5);
  CHECK(!f.head_only);
  CHECK_THROWS_AS(serve::parse_learning_spec("finetune,steps=0", f), std::invalid_argument);
  CHECK_THROWS_AS(serve::parse_learning_spec("finetune,speed=3", f), std::invalid_argument);
  CHECK_THROWS_AS(serve::parse_learning_spec("learn", f), std::invalid_argument);
}

TEST_CASE("Scorer finetune of all weights: another program's answers stay bitwise") {
  const LearnSetup ls = learn_setup("serve_finetune_all");
  const QueryProgram &q0 = ls.q0, &q1 = ls.q1;
  serve::ScorerOptions o;
  o.learning = serve::Learning::Both;
  o.finetune.head_only = false;
  o.finetune.synchronous = true;
  o.finetune.steps = 5;
  o.finetune.lr = 0.01;
  serve::Scorer scorer(ls.c, o);
  const std::vector<double> base0 =
      speedups_of(scorer.score(q0.program, q0.untransformed, q0.schedules));
  const std::vector<double> base1 =
      speedups_of(scorer.score(q1.program, q1.untransformed, q1.schedules));
  const double measured = base0[2] / 6;
  const serve::Observed ob =
      scorer.observe(q0.program, q0.untransformed, q0.schedules[2], {10.0 / measured}, 10.0);
  CHECK(scorer.learning_stats().completed == 1);  // synchronous: done when observe returns
  const std::vector<double> after =
      speedups_of(scorer.score(q0.program, q0.untransformed, q0.schedules));
  CHECK(after[2] == doctest::Approx(ob.corrected_speedup).epsilon(1e-5));  // batch rounding
  CHECK(std::fabs(std::log(after[2] / measured)) < std::fabs(std::log(base0[2] / measured)));
  CHECK(speedups_of(scorer.score(q1.program, q1.untransformed, q1.schedules)) == base1);
  // all weights: parameters outside the head are stored too
  rapidjson::Document d;
  const std::string state = scorer.adaptation_json();
  d.Parse(state.c_str());
  bool trunk = false;
  for (const auto& w : d["finetuned"][0]["weights"][0].GetObject())
    trunk = trunk || !serve::head_parameter(w.name.GetString());
  CHECK(trunk);
}

TEST_CASE(
    "lcm-serve --learning, --save-adaptation, --load-adaptation: the state survives a restart") {
  const LearnSetup ls = learn_setup("serve_learning_flags");
  const std::string &dir = ls.dir, &ckpt = ls.ckpt;
  const QueryProgram& q0 = ls.q0;
  std::string head = "{\"program\": " + q0.program + ", \"untransformed\": " + q0.untransformed;
  std::string score = head + ", \"schedules\": [";
  for (size_t i = 0; i < q0.schedules.size(); ++i) score += (i ? "," : "") + q0.schedules[i];
  score += "]}\n";
  const std::string observe = head +
                              ", \"request\": \"observe\", \"schedule\": " + q0.schedules[1] +
                              ", \"execution_times\": [0.5], \"untransformed_time\": 10}\n";
  {
    std::ofstream(dir + "/score.jsonl") << score;
    std::ofstream(dir + "/observe.jsonl") << score << observe << score;
  }
  const std::string base = "eval.weights_path=" + ckpt + " training.threads=1 --protocol jsonl -q";
  const std::string args = base + " --learning finetune,steps=20,lr=0.01,synchronous=1";
  const std::string state = dir + "/state.json";
  const test::RunResult first = test::run_tool(
      dir, "lcm-serve", args + " --save-adaptation " + state + " < " + dir + "/observe.jsonl");
  REQUIRE_MESSAGE(first.code == 0, first.err);
  std::istringstream answers(first.out);
  std::string before, observed, after;
  std::getline(answers, before);
  std::getline(answers, observed);
  std::getline(answers, after);
  CHECK_MESSAGE(test::contains(observed, "\"observed\""), observed);
  CHECK(before != after);  // fine-tuned toward the measurement
  REQUIRE(test::slurp(state).find("\"finetuned\"") != std::string::npos);
  // a new server that loads the state answers as the first did after its observation
  const test::RunResult second = test::run_tool(
      dir, "lcm-serve", args + " --load-adaptation " + state + " < " + dir + "/score.jsonl");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.out == after + "\n");
  // without it, the checkpoint's answers
  const test::RunResult plain =
      test::run_tool(dir, "lcm-serve", args + " < " + dir + "/score.jsonl");
  CHECK(plain.out == before + "\n");
  // a bad specification or state file is a usage/config error, not a crash
  CHECK(test::run_tool(dir, "lcm-serve", base + " --learning finetune,steps=0 < /dev/null").code ==
        2);
  std::ofstream(dir + "/bad.json") << "{}";
  CHECK(test::run_tool(dir, "lcm-serve",
                       args + " --load-adaptation " + dir + "/bad.json" + " < /dev/null")
            .code != 0);
}
