// lcm-serve: the cost model as the model process of an autoscheduler search. Speaks the Tiramisu
// LOOPer autoscheduler's protocol on stdin/stdout (3 lines per query, one number back), its older
// 2-line form, or batched JSON Lines; or serves many clients over a Unix-domain socket. Nothing
// but answers is ever written to stdout; diagnostics go to stderr. EOF, SIGTERM or SIGINT end it
// with exit code 0.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "config/cli.hpp"
#include "engine/bf16.hpp"
#include "serve/protocol.hpp"
#include "serve/scorer.hpp"
#include "serve/socket_server.hpp"
#include "tools/common/run_tool.hpp"
#include "train/predictor.hpp"

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop(int) {
  g_stop.store(true);
}

/// SIGTERM/SIGINT set the flag without SA_RESTART, so a blocked read returns EINTR and the stream
/// ends; SIGPIPE is ignored (a client that went away is a failed write, not a dead server).
void install_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
  return lcm::tools::run_tool("lcm-serve", [&] {
    std::string protocol_text = "looper", socket_path;
    std::string learning_text = "correction", load_adaptation, save_adaptation;
    std::string weights = "fp32";
    size_t cache_programs = 64, max_connections = 64;
    size_t batch_wait_us = 0;
    size_t max_line_mib = 64;
    size_t max_request_mib = lcm::serve::kDefaultMaxRequestBytes >> 20;
    size_t memo_kib = lcm::serve::kDefaultMemoBytes >> 10;
    bool quiet = false, socket_given = false;
    const lcm::config::Config c = lcm::config::load_config(
        argc, argv,
        "lcm-serve: the cost model as an autoscheduler's model process (docs/tools.md "
        "\"lcm-serve\").\n"
        "Usage: lcm-serve [--config FILE] eval.weights_path=CKPT [--protocol looper|legacy|jsonl] "
        "[--socket PATH]\n"
        "looper (default): per query 3 lines (program, untransformed schedule, candidate) on "
        "stdin, one predicted speedup per line on stdout; legacy: 2 lines (program, candidate); "
        "jsonl: {\"program\":{...},\"schedules\":[...]} per line -> {\"speedups\":[...]}. A query "
        "that cannot be scored is answered 0 with one line on stderr. EOF or SIGTERM: exit 0.",
        [&](CLI::App& app) {
          app.add_option("--protocol", protocol_text, "looper | legacy | jsonl (default looper)");
          app.add_option("--socket", socket_path,
                         "serve a Unix-domain socket at PATH instead of stdin/stdout: each "
                         "connection is one request stream of --protocol, all share one model")
              ->each([&](const std::string&) { socket_given = true; });
          app.add_option("--cache-programs", cache_programs,
                         "programs kept parsed and featurized, least recently used dropped "
                         "(default 64)")
              ->check(CLI::Range(size_t(1), size_t(1) << 20));
          app.add_option("--max-connections", max_connections,
                         "socket connections served at once; more wait (default 64)")
              ->check(CLI::Range(size_t(1), size_t(4096)));
          app.add_option("--batch-wait-us", batch_wait_us,
                         "with --socket: looper / legacy queries that connections ask within "
                         "this many µs are scored together (answers equal up to float "
                         "rounding); 0: each alone (default 0)")
              ->check(CLI::Range(size_t(0), size_t(1000000)));
          app.add_option("--max-line-mib", max_line_mib,
                         "longest request line in MiB; a longer one is dropped and answered as "
                         "an error (default 64)")
              ->check(CLI::Range(size_t(1), size_t(4096)));
          app.add_option("--max-request-memory", max_request_mib,
                         "the server's memory while it scores a request, in MiB: model, program "
                         "cache and the request, by its estimate before it allocates; larger "
                         "requests are split into forwards that fit, or answered as errors "
                         "request_too_large (default 1024)")
              ->check(CLI::Range(size_t(128), size_t(1) << 24));
          app.add_option("--memo-kib", memo_kib,
                         "each cached program's memo of computed rows, subtrees and outputs, in "
                         "KiB per ensemble member, counted in the cache's memory; a query reuses "
                         "what earlier queries computed from the same inputs (same answers); 0: "
                         "none (default 2048)")
              ->check(CLI::Range(size_t(0), size_t(1) << 22));
          app.add_option("--weights", weights,
                         "fp32 (default) | bf16: the weight matrices rounded to BF16 and read "
                         "as 2-byte copies by one-schedule queries, sums in FP32 (faster; "
                         "answers within BF16 rounding of fp32's; CPU only)");
          app.add_option("--learning", learning_text,
                         "what a jsonl observe learns: VARIANT[,key=value...], VARIANT none | "
                         "correction | finetune | both (default correction; docs/tools.md "
                         "\"Learning during search\")");
          app.add_option("--load-adaptation", load_adaptation,
                         "read the learned state from PATH at start (when the file exists)");
          app.add_option("--save-adaptation", save_adaptation,
                         "write the learned state to PATH (atomically) at exit");
          app.add_flag("-q,--quiet", quiet, "no start and end lines on stderr");
        });
    lcm::serve::Protocol protocol;
    try {
      protocol = lcm::serve::parse_protocol(protocol_text);
    } catch (const std::invalid_argument& e) {
      throw lcm::config::ConfigError(e.what());
    }
    if (socket_given && socket_path.empty())
      throw lcm::config::ConfigError("--socket: empty path (give the socket file's path)");
    if (c.eval.weights_path.empty())
      throw lcm::config::ConfigError("eval.weights_path is empty: lcm-serve needs a checkpoint");
    install_signals();
    lcm::serve::ScorerOptions so;
    so.cache_entries = cache_programs;
    so.max_request_bytes = max_request_mib << 20;
    so.memo_bytes = memo_kib << 10;
    so.bf16_weights = lcm::train::parse_weight_format(weights, "--weights");
    try {
      so.learning = lcm::serve::parse_learning_spec(learning_text, so.finetune);
    } catch (const std::invalid_argument& e) {
      throw lcm::config::ConfigError(std::string("--learning: ") + e.what());
    }
    lcm::serve::Scorer scorer(c, so);
    // which kernel reads the BF16 copies on this CPU (engine/bf16.hpp)
    const std::string weights_text =
        so.bf16_weights ? std::string(", weights bf16: ") + lcm::bf16_kernel() + " kernel" : "";
    if (!load_adaptation.empty() && access(load_adaptation.c_str(), F_OK) == 0) {
      try {
        scorer.load_adaptation(load_adaptation);
      } catch (const lcm::serve::QueryError& e) {
        throw lcm::config::ConfigError(std::string("--load-adaptation: ") + e.what());
      }
    }
    // The learned state at exit (after the last observation's fine-tuning has run).
    auto save_state = [&] {
      if (save_adaptation.empty()) return;
      scorer.wait_for_learning();
      scorer.save_adaptation(save_adaptation);
    };
    for (const std::string& n : scorer.predictor().notes())
      std::fprintf(stderr, "lcm-serve: %s\n", n.c_str());
    std::mutex log_mu;
    auto log = [&](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu);
      std::fprintf(stderr, "lcm-serve: %s\n", line.c_str());
    };
    lcm::serve::StreamLimits limits;
    limits.max_line_bytes = max_line_mib << 20;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    auto cache_text = [&] {
      const lcm::serve::CacheStats cs = scorer.cache_stats();
      return "program cache " + std::to_string(cs.hits) + " hits, " + std::to_string(cs.misses) +
             " misses, " + std::to_string(cs.evictions) + " evictions, " +
             std::to_string(cs.chunked) + " requests split, " + std::to_string(cs.refused) +
             " refused as too large; memo (programs held now) " +
             std::to_string(cs.memo_node_hits) + "/" +
             std::to_string(cs.memo_node_hits + cs.memo_node_misses) + " loop nodes and " +
             std::to_string(cs.memo_output_hits) + "/" +
             std::to_string(cs.memo_output_hits + cs.memo_output_misses) + " outputs found, " +
             std::to_string(cs.memo_clears) + " emptied";
    };

    if (!socket_path.empty()) {
      lcm::serve::SocketOptions so;
      so.max_connections = max_connections;
      so.stream = limits;
      so.batch_wait = std::chrono::microseconds(batch_wait_us);
      const lcm::serve::SocketStats s =
          lcm::serve::serve_socket(scorer, protocol, socket_path, g_stop, so, log, [&] {
            if (!quiet)
              log(std::string("listening on ") + socket_path + " (" +
                  lcm::serve::protocol_name(protocol) + ", " + c.eval.weights_path + ", " +
                  c.training.device.str() + weights_text + ")");
          });
      if (!quiet)
        log("stopped: " + std::to_string(s.connections) + " connections, " +
            std::to_string(s.queries) + " queries, " + std::to_string(s.errors) +
            " answered as errors, " +
            (batch_wait_us > 0 ? std::to_string(s.batches) + " batches, " : std::string()) +
            cache_text());
      save_state();
      return 0;
    }
    if (!quiet)
      log(std::string("ready (") + lcm::serve::protocol_name(protocol) + " on stdin/stdout, " +
          c.eval.weights_path + ", " + c.training.device.str() + weights_text + ")");
    const lcm::serve::StreamStats s = lcm::serve::serve_stream(scorer, protocol, STDIN_FILENO,
                                                               STDOUT_FILENO, g_stop, limits, log);
    if (!quiet) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%.1f µs per query scoring, %.1f s in all",
                    s.queries ? 1e6 * s.busy_seconds / double(s.queries) : 0.0, elapsed());
      log(std::string(s.ended_by_eof ? "end of input: " : "stopped: ") + std::to_string(s.queries) +
          " queries, " + std::to_string(s.errors) + " answered as errors, " + cache_text() + ", " +
          buf);
    }
    save_state();
    if (!s.io_error.empty()) {
      std::fprintf(stderr, "lcm-serve: error: %s\n", s.io_error.c_str());
      return 1;
    }
    return 0;
  });
}
