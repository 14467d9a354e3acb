// Batching of concurrent connections' queries (serve/query_batcher.hpp, lcm-serve --socket
// --batch-wait-us): threads asking interleaved schedules of several real programs (the valid
// sample, else the committed synthetic programs) through one QueryBatcher get the answers of a
// scorer asked one query at a time; a query whose program is broken fails alone; and
// over the socket, a client that sends a query and disconnects before its answer does not disturb
// the others of its batch. "The answers" means up to float rounding: a forward of several
// datapoints rounds some element-wise steps differently from one of one (about 1 in 4 answers
// differ in their last bits; the test bounds the relative difference by 1e-5).
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "serve/query_batcher.hpp"
#include "serve/scorer.hpp"
#include "serve/socket_server.hpp"
#include "support/gz_support.hpp"
#include "support/serve_queries.hpp"
#include "support/test_support.hpp"

using namespace lcm;

namespace {

struct Fixture {
  std::string dir, ckpt;
  std::vector<test::QueryProgram> programs;
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    x.dir = test::temp_dir("serve_batch");
    x.ckpt = x.dir + "/model.safetensors";
    test::write_random_checkpoint(x.ckpt);
    std::string src = test::shared_data("looperset-sample/valid.jsonl.gz");
    if (src.empty()) src = test::committed_data("synth_valid.jsonl.gz");
    for (const std::string& l : test::gz_lines(src)) {
      try {
        x.programs.push_back(test::query_program(l));
      } catch (const std::exception&) {
      }
      if (x.programs.size() == 6) break;
    }
    REQUIRE(x.programs.size() >= 2);
    return x;
  }();
  return f;
}

std::unique_ptr<serve::Scorer> make_scorer() {
  config::Config c;
  config::apply_overrides(c, {"eval.weights_path=" + fixture().ckpt, "training.threads=1"});
  return std::make_unique<serve::Scorer>(c, serve::ScorerOptions{});
}

/// One query of the interleaved workload: program p, schedule s.
struct Query {
  size_t p, s;
};

/// Thread t's queries: its share of every program's first schedules, programs interleaved.
std::vector<Query> queries_of(size_t t, size_t threads) {
  const Fixture& f = fixture();
  std::vector<Query> q;
  for (size_t s = t; s < 24; s += threads)
    for (size_t p = 0; p < f.programs.size(); ++p)
      if (s < f.programs[p].schedules.size()) q.push_back({(p + t) % f.programs.size(), s});
  return q;
}

int connect_socket(const std::string& path) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

bool send_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (w <= 0) return false;
    done += size_t(w);
  }
  return true;
}

std::string read_line(int fd) {
  std::string line;
  char c;
  while (recv(fd, &c, 1, 0) == 1) {
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

}  // namespace

TEST_CASE("batched queries of interleaved threads and programs get the one-at-a-time answers") {
  const Fixture& f = fixture();
  auto alone = make_scorer();
  auto shared = make_scorer();
  serve::QueryBatcher batcher(*shared, std::chrono::microseconds(3000));
  constexpr size_t kThreads = 8;
  std::vector<std::vector<serve::ScheduleScore>> got(kThreads);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (const Query& q : queries_of(t, kThreads)) {
        const test::QueryProgram& qp = f.programs[q.p];
        got[t].push_back(batcher.score(qp.program, qp.untransformed, qp.schedules[q.s]));
      }
    });
  for (auto& th : threads) th.join();
  int compared = 0, differ = 0;
  double worst = 0;  // largest relative difference
  for (size_t t = 0; t < kThreads; ++t) {
    const std::vector<Query> qs = queries_of(t, kThreads);
    REQUIRE(got[t].size() == qs.size());
    for (size_t i = 0; i < qs.size(); ++i) {
      const test::QueryProgram& qp = f.programs[qs[i].p];
      const serve::ScheduleScore want =
          alone->score(qp.program, qp.untransformed, {qp.schedules[qs[i].s]})[0];
      REQUIRE(want.reason == got[t][i].reason);
      differ += want.speedup != got[t][i].speedup ? 1 : 0;
      if (want.ok()) worst = std::max(worst, std::fabs(got[t][i].speedup / want.speedup - 1));
      ++compared;
    }
  }
  MESSAGE(compared << " queries in " << batcher.batches() << " batches; " << differ
                   << " differ in their last bits, largest relative difference " << worst);
  CHECK(compared > 0);
  // float rounding only (a forward of several datapoints rounds some element-wise steps
  // differently): 1e-5 is 100 float units, far below any difference between schedules
  CHECK(worst <= 1e-5);
  CHECK(batcher.queries() == compared);
  CHECK(batcher.batches() < batcher.queries());  // some queries were scored together
}

TEST_CASE("a query with a broken program fails alone in its batch") {
  const Fixture& f = fixture();
  auto shared = make_scorer();
  auto alone = make_scorer();
  serve::QueryBatcher batcher(*shared, std::chrono::microseconds(20000), 4);
  const test::QueryProgram& qp = f.programs[0];
  std::atomic<int> failed{0};
  std::vector<serve::ScheduleScore> ok(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      if (t == 3) {
        try {
          batcher.score("{\"not\": \"a program\"}", qp.untransformed, qp.schedules[0]);
        } catch (const std::exception&) {
          ++failed;
        }
        return;
      }
      ok[size_t(t)] = batcher.score(qp.program, qp.untransformed, qp.schedules[size_t(t)]);
    });
  for (auto& th : threads) th.join();
  CHECK(failed == 1);
  for (size_t t = 0; t < 3; ++t)
    CHECK(ok[t].speedup ==
          doctest::Approx(alone->score(qp.program, qp.untransformed, {qp.schedules[t]})[0].speedup)
              .epsilon(1e-5));
}

TEST_CASE("over the socket, a client leaving mid-batch does not disturb the others") {
  const Fixture& f = fixture();
  auto scorer = make_scorer();
  auto alone = make_scorer();
  const std::string path = f.dir + "/batch.sock";
  std::atomic<bool> stop{false};
  serve::SocketOptions o;
  o.batch_wait = std::chrono::microseconds(20000);
  serve::SocketStats stats;
  std::thread server([&] {
    stats = serve::serve_socket(*scorer, serve::Protocol::Looper, path, stop, o,
                                [](const std::string&) {});
  });
  const test::QueryProgram& qp = f.programs[0];
  auto query = [&](size_t s) {
    return qp.program + "\n" + qp.untransformed + "\n" + qp.schedules[s] + "\n";
  };
  std::vector<std::thread> clients;
  std::vector<std::string> answers(3);
  for (size_t c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      const int fd = connect_socket(path);
      REQUIRE(fd >= 0);
      if (c == 3) {  // asks, then leaves before its answer
        send_all(fd, query(3));
        close(fd);
        return;
      }
      for (int rep = 0; rep < 2; ++rep) {
        send_all(fd, query(c));
        answers[c] = read_line(fd);
      }
      close(fd);
    });
  for (auto& th : clients) th.join();
  stop = true;
  server.join();
  for (size_t c = 0; c < 3; ++c) {
    const double want = alone->score(qp.program, qp.untransformed, {qp.schedules[c]})[0].speedup;
    CHECK(std::strtod(answers[c].c_str(), nullptr) == doctest::Approx(want).epsilon(1e-8));
  }
  CHECK(stats.connections == 4);
  CHECK(stats.batches >= 1);
}
