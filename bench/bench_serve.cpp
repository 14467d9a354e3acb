// Per-query latency of the cost model as an autoscheduler search asks it: lcm-serve on the
// LOOPer 3-line protocol (driven exactly as the Tiramisu autoscheduler drives its model process:
// pipes, fputs, fflush, fscanf), liblcm in-process, and jsonl requests of 100 schedules, for
// every schedule of the median and the largest program of a LOOPerSet file. Features included:
// every query carries its JSON and is parsed, featurized and scored. Warm = the program is in the
// program cache; cold = every query misses it (a cache of one program, queries alternating with
// another program); new = the program is cached but each schedule is asked for the first time
// (a search's new candidates: what the per-program memo of lcm-serve --memo-kib has not seen;
// warm rows ask the same schedules again, which the memo answers from its outputs; "liblcm 8 per
// call" asks new schedules 8 at a time, µs per schedule: the bound of batching 8 clients). A
// release-size model with random weights (latency does not depend on them).
//
// Usage: bench_serve [--data FILE.jsonl.gz] [--threads 1] [--min-queries 600] [--dir DIR]
//                    [--only looper|liblcm|jsonl] [--warm-only] [--no-new]   (a subset, e.g.
//                    for a profile: --no-new leaves out the new rows, which start processes)
//                    [--memo-kib N]   (each program's memo, lcm-serve --memo-kib; 0: none)
//                    [--weights fp32,bf16] [--reps R]   (each weight format, lcm-serve
//                    --weights, in turn, R times: A/B alternating in one run on a loaded machine)
//                    [--only socket]   (lcm-serve --socket with 1 and 8 clients asking the
//                    median program's new schedules, --batch-wait-us 0 and 50: queries/s)
// Prints one table row per (path, program, cache, weights, repetition): median and
// 90th-percentile µs per query and queries (or schedules) per second; with several formats or
// repetitions, then the median over repetitions of each row's median and its ratio to the first
// format's.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "data/reader.hpp"
#include "data/skips.hpp"
#include "lcm/lcm.hpp"
#include "support/model_process.hpp"
#include "support/serve_queries.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using lcm::test::QueryProgram;

struct Row {
  std::string path, program, cache, weights;
  int rep = 0;
  int comps = 0;
  size_t n = 0;
  double median_us = 0, p90_us = 0, per_s = 0;
};

Row summarize(std::string path, const QueryProgram& q, std::string cache, std::vector<double> us,
              double per_query_items = 1) {
  Row r;
  r.path = std::move(path);
  r.program = q.name;
  r.cache = std::move(cache);
  r.comps = q.n_comps;
  r.n = us.size();
  std::sort(us.begin(), us.end());
  r.median_us = us[us.size() / 2];
  r.p90_us = us[std::min(us.size() - 1, us.size() * 9 / 10)];
  double total = 0;
  for (double u : us) total += u;
  r.per_s = per_query_items * double(us.size()) / (total * 1e-6);
  return r;
}

double since_us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

/// A connection to lcm-serve --socket at `path` (retried while the server starts); -1: none.
int connect_socket(const std::string& path) {
  for (int attempt = 0; attempt < 400; ++attempt) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return -1;
}

/// Sends one looper query on `fd` and reads its answer line.
bool ask_socket(int fd, const QueryProgram& q, const std::string& schedule) {
  const std::string text = q.program + "\n" + q.untransformed + "\n" + schedule + "\n";
  for (size_t done = 0; done < text.size();) {
    const ssize_t w = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (w <= 0) return false;
    done += size_t(w);
  }
  char c;
  while (recv(fd, &c, 1, 0) == 1)
    if (c == '\n') return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "../shared/data/looperset-sample/valid.jsonl.gz", dir = "/tmp/lcm_bench_serve";
  int threads = 1;
  size_t min_queries = 600;
  std::string only;
  bool warm_only = false, no_new = false;
  std::string memo_kib;  // "": the tools' default
  std::vector<std::string> formats{"fp32"};
  int reps = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--warm-only" || a == "--no-new") {
      (a == "--no-new" ? no_new : warm_only) = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_serve: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--data") {
      data = v;
    } else if (a == "--threads") {
      threads = std::atoi(v.c_str());
    } else if (a == "--min-queries") {
      min_queries = size_t(std::atol(v.c_str()));
    } else if (a == "--dir") {
      dir = v;
    } else if (a == "--memo-kib") {
      memo_kib = v;
    } else if (a == "--weights") {
      formats.clear();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        formats.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--only" && (v == "looper" || v == "liblcm" || v == "jsonl" || v == "socket")) {
      only = v;
    } else {
      std::fprintf(stderr, "bench_serve: unknown option %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  std::filesystem::create_directories(dir);
  const std::string ckpt = dir + "/model.safetensors";
  lcm::test::write_random_checkpoint(ckpt);

  // the programs: median and largest by computation count (ties: more schedules)
  std::vector<QueryProgram> progs;
  {
    lcm::data::SkipLog log(false, 0);
    lcm::data::RecordSource src(data, log);
    lcm::data::RawRecord rec;
    while (src.next(rec)) {
      try {
        progs.push_back(lcm::test::query_program(rec.json));
      } catch (const std::exception&) {
      }
    }
  }
  if (progs.size() < 3) {
    std::fprintf(stderr, "bench_serve: %s holds fewer than 3 programs\n", data.c_str());
    return 1;
  }
  std::sort(progs.begin(), progs.end(), [](const QueryProgram& a, const QueryProgram& b) {
    return a.n_comps != b.n_comps ? a.n_comps < b.n_comps : a.schedules.size() < b.schedules.size();
  });
  const QueryProgram& median = progs[progs.size() / 2];
  const QueryProgram& largest = progs.back();
  const QueryProgram& other = progs[progs.size() / 4];  // the cold runs alternate with it
  std::printf(
      "bench_serve: %s, %zu programs; median program %s (C=%d, %zu schedules), largest "
      "%s (C=%d, %zu schedules); %d thread(s)\n",
      data.c_str(), progs.size(), median.name.c_str(), median.n_comps, median.schedules.size(),
      largest.name.c_str(), largest.n_comps, largest.schedules.size(), threads);
  const std::string serve = std::filesystem::path(argv[0]).parent_path().string() + "/lcm-serve";
  std::vector<std::string> base0{serve, "eval.weights_path=" + ckpt,
                                 "training.threads=" + std::to_string(threads), "-q"};
  if (!memo_kib.empty()) base0.insert(base0.end(), {"--memo-kib", memo_kib});
  std::printf("memo: %s KiB per program\n", memo_kib.empty() ? "default" : memo_kib.c_str());
  std::vector<Row> rows;

  for (int rep = 0; rep < reps; ++rep)
    for (const std::string& weights : formats) {
      std::vector<std::string> base = base0;
      base.insert(base.end(), {"--weights", weights});
      const size_t first_row = rows.size();
      for (const QueryProgram* q : {&median, &largest}) {
        const size_t rounds =
            std::max<size_t>(1, (min_queries + q->schedules.size() - 1) / q->schedules.size());
        const bool looper = only.empty() || only == "looper",  // "socket": only the block above
            lib = only.empty() || only == "liblcm", jsonl = only.empty() || only == "jsonl";
        if (only == "socket" && q == &median) {
          // lcm-serve --socket, N clients at once, each asking its share of the program's
          // schedules (each new to the server: a fresh process per configuration), with and
          // without --batch-wait-us; per_s = all clients' queries per second of wall time
          for (int clients : {1, 8})
            for (int wait : {0, 50}) {
              if (clients == 1 && wait > 0) continue;
              std::vector<std::string> a = base;
              const std::string sock = dir + "/bench.sock";
              a.insert(a.end(), {"--socket", sock, "--batch-wait-us", std::to_string(wait)});
              lcm::test::ModelProcess mp(a, dir + "/serve_socket_err.txt");
              std::vector<int> fds;
              for (int c = 0; c < clients; ++c) fds.push_back(connect_socket(sock));
              ask_socket(fds[0], *q, q->untransformed);  // the program into the cache
              std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
              const auto t0 = Clock::now();
              std::vector<std::thread> th;
              for (int c = 0; c < clients; ++c)
                th.emplace_back([&, c] {
                  for (size_t i = size_t(c); i < q->schedules.size(); i += size_t(clients)) {
                    const auto t1 = Clock::now();
                    ask_socket(fds[size_t(c)], *q, q->schedules[i]);
                    lat[size_t(c)].push_back(since_us(t1));
                  }
                });
              for (auto& t : th) t.join();
              const double wall_s = since_us(t0) * 1e-6;
              for (int fd : fds) close(fd);
              mp.signal(SIGTERM);
              mp.finish();
              std::vector<double> us;
              for (const auto& l : lat) us.insert(us.end(), l.begin(), l.end());
              Row r =
                  summarize("socket " + std::to_string(clients) + "c wait " + std::to_string(wait),
                            *q, "new", us);
              r.per_s = double(us.size()) / wall_s;
              rows.push_back(r);
            }
        }
        if (looper) {  // lcm-serve, warm: one pass to fill the cache, then `rounds` timed passes
          std::vector<std::string> a = base;
          lcm::test::ModelProcess mp(a, dir + "/serve_err.txt");
          for (const std::string& s : q->schedules) mp.ask({q->program, q->untransformed, s});
          std::vector<double> us;
          for (size_t r = 0; r < rounds; ++r)
            for (const std::string& s : q->schedules) {
              const auto t0 = Clock::now();
              mp.ask({q->program, q->untransformed, s});
              us.push_back(since_us(t0));
            }
          mp.finish();
          rows.push_back(summarize("lcm-serve looper", *q, "warm", us));
        }
        if (looper && !no_new) {  // lcm-serve, warm program, each schedule's first query (as in a
                                  // search, whose candidates are new): per round a new process,
                                  // warmed with the untransformed schedule, then one timed pass
          std::vector<double> us;
          for (size_t r = 0; r < rounds; ++r) {
            std::vector<std::string> a = base;
            lcm::test::ModelProcess mp(a, dir + "/serve_new_err.txt");
            mp.ask({q->program, q->untransformed, q->untransformed});
            for (const std::string& s : q->schedules) {
              const auto t0 = Clock::now();
              mp.ask({q->program, q->untransformed, s});
              us.push_back(since_us(t0));
            }
            mp.finish();
          }
          rows.push_back(summarize("lcm-serve looper", *q, "new", us));
        }
        if (looper && !warm_only) {  // lcm-serve, cold: a one-program cache and queries alternating
                                     // with another program
          std::vector<std::string> a = base;
          a.insert(a.end(), {"--cache-programs", "1"});
          lcm::test::ModelProcess mp(a, dir + "/serve_cold_err.txt");
          std::vector<double> us;
          for (size_t i = 0; i < std::min<size_t>(q->schedules.size() * rounds, 300); ++i) {
            const std::string& s = q->schedules[i % q->schedules.size()];
            mp.ask({other.program, other.untransformed, other.schedules[0]});
            const auto t0 = Clock::now();
            mp.ask({q->program, q->untransformed, s});
            us.push_back(since_us(t0));
          }
          mp.finish();
          rows.push_back(summarize("lcm-serve looper", *q, "cold", us));
        }
        if (lib) {  // liblcm, warm
          lcm::PredictorOptions o;
          o.weights_path = ckpt;
          o.overrides = {"training.threads=" + std::to_string(threads)};
          if (!memo_kib.empty()) o.memo_kib = size_t(std::atol(memo_kib.c_str()));
          o.weights = weights;
          lcm::Predictor p(o);
          p.predict(q->program, q->schedules, q->untransformed);
          std::vector<double> us;
          for (size_t r = 0; r < rounds; ++r)
            for (const std::string& s : q->schedules) {
              const auto t0 = Clock::now();
              p.predict(q->program, {s}, q->untransformed);
              us.push_back(since_us(t0));
            }
          rows.push_back(summarize("liblcm", *q, "warm", us));
        }
        if (lib && !no_new) {  // liblcm, warm program, each schedule's first query (a new Predictor
                               // per round)
          std::vector<double> us;
          for (size_t r = 0; r < rounds; ++r) {
            lcm::PredictorOptions o;
            o.weights_path = ckpt;
            o.overrides = {"training.threads=" + std::to_string(threads)};
            if (!memo_kib.empty()) o.memo_kib = size_t(std::atol(memo_kib.c_str()));
            o.weights = weights;
            lcm::Predictor p(o);
            p.predict(q->program, {q->untransformed}, q->untransformed);
            for (const std::string& s : q->schedules) {
              const auto t0 = Clock::now();
              p.predict(q->program, {s}, q->untransformed);
              us.push_back(since_us(t0));
            }
          }
          rows.push_back(summarize("liblcm", *q, "new", us));
        }
        if (lib && !no_new) {  // liblcm, new schedules 8 per call: what batching 8 clients' queries
                               // of one program into one forward could give at most (µs per
                               // schedule; no memo for several schedules: the whole forward)
          std::vector<double> us;
          for (size_t r = 0; r < rounds; ++r) {
            lcm::PredictorOptions o;
            o.weights_path = ckpt;
            o.overrides = {"training.threads=" + std::to_string(threads)};
            if (!memo_kib.empty()) o.memo_kib = size_t(std::atol(memo_kib.c_str()));
            o.weights = weights;
            lcm::Predictor p(o);
            p.predict(q->program, {q->untransformed}, q->untransformed);
            for (size_t b = 0; b + 8 <= q->schedules.size(); b += 8) {
              const std::vector<std::string> eight(q->schedules.begin() + long(b),
                                                   q->schedules.begin() + long(b + 8));
              const auto t0 = Clock::now();
              p.predict(q->program, eight, q->untransformed);
              us.push_back(since_us(t0) / 8);
            }
          }
          rows.push_back(summarize("liblcm 8 per call", *q, "new", us));
        }
        if (lib && !warm_only) {  // liblcm, cold: a one-program cache, alternating programs
          lcm::PredictorOptions o;
          o.weights_path = ckpt;
          o.overrides = {"training.threads=" + std::to_string(threads)};
          o.cache_programs = 1;
          if (!memo_kib.empty()) o.memo_kib = size_t(std::atol(memo_kib.c_str()));
          o.weights = weights;
          lcm::Predictor pc(o);
          std::vector<double> us;
          for (size_t i = 0; i < std::min<size_t>(q->schedules.size() * rounds, 300); ++i) {
            pc.predict(other.program, {other.schedules[0]}, other.untransformed);
            const auto t0 = Clock::now();
            pc.predict(q->program, {q->schedules[i % q->schedules.size()]}, q->untransformed);
            us.push_back(since_us(t0));
          }
          rows.push_back(summarize("liblcm", *q, "cold", us));
        }
        if (jsonl) {  // jsonl requests of 100 schedules through lcm-serve (the program's schedules,
                      // repeated)
          std::string req = "{\"program\":" + q->program +
                            ",\"untransformed\":" + q->untransformed + ",\"schedules\":[";
          for (size_t k = 0; k < 100; ++k)
            req += (k ? "," : "") + q->schedules[k % q->schedules.size()];
          req += "]}";
          std::vector<std::string> a = base;
          a.insert(a.end(), {"--protocol", "jsonl"});
          lcm::test::ModelProcess mp(a, dir + "/serve_jsonl_err.txt");
          // ask() reads one number: the answer line starts {"speedups":[v, ...; read the rest
          auto request = [&] {
            mp.write_raw(req + "\n");
            return mp.read_line();
          };
          request();
          std::vector<double> us;
          for (size_t r = 0; r < std::max<size_t>(5, min_queries / 100); ++r) {
            const auto t0 = Clock::now();
            request();
            us.push_back(since_us(t0));
          }
          mp.finish();
          rows.push_back(summarize("lcm-serve jsonl x100", *q, "warm", us, 100));
        }
      }
      for (size_t i = first_row; i < rows.size(); ++i) {
        rows[i].weights = weights;
        rows[i].rep = rep;
      }
    }
  std::printf("%-22s %-20s %4s %-5s %-5s %3s %6s %10s %10s %12s\n", "path", "program", "C", "cache",
              "wts", "rep", "n", "median µs", "p90 µs", "per second");
  for (const Row& r : rows)
    std::printf("%-22s %-20s %4d %-5s %-5s %3d %6zu %10.1f %10.1f %12.0f\n", r.path.c_str(),
                r.program.c_str(), r.comps, r.cache.c_str(), r.weights.c_str(), r.rep, r.n,
                r.median_us, r.p90_us, r.per_s);
  std::printf("(jsonl rows: µs per request of 100 schedules; per second = schedules/s)\n");
  if (reps > 1 || formats.size() > 1) {
    // per (path, program, cache, weights): the median over repetitions of the row medians, and
    // its ratio to the first format's (the same repetitions, alternating in time)
    auto key = [](const Row& r) { return r.path + "|" + r.program + "|" + r.cache; };
    auto med = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("\nmedians over %d repetition(s), formats alternating:\n", reps);
    std::printf("%-22s %-20s %-5s %-5s %10s %8s %12s\n", "path", "program", "cache", "wts",
                "median µs", "ratio", "per second");
    std::vector<std::string> seen;
    for (const Row& r : rows) {
      if (std::find(seen.begin(), seen.end(), key(r)) != seen.end()) continue;
      seen.push_back(key(r));
      double first = 0;
      for (const std::string& f : formats) {
        std::vector<double> v, per_s;
        for (const Row& x : rows)
          if (key(x) == key(r) && x.weights == f) {
            v.push_back(x.median_us);
            per_s.push_back(x.per_s);
          }
        if (v.empty()) continue;
        const double m = med(v);
        if (f == formats[0]) first = m;
        std::printf("%-22s %-20s %-5s %-5s %10.1f %8.3f %12.0f\n", r.path.c_str(),
                    r.program.c_str(), r.cache.c_str(), f.c_str(), m, first > 0 ? m / first : 0.0,
                    med(per_s));
      }
    }
  }
  return 0;
}
