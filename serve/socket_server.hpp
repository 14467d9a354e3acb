// lcm-serve --socket: a Unix-domain stream socket where each connection is one request stream
// (serve_stream) of the chosen protocol, all sharing one Scorer (one model, one program cache).
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "serve/protocol.hpp"
#include "serve/scorer.hpp"

namespace lcm::serve {

/// Limits of the socket server.
struct SocketOptions {
  /// Connections served at once (one thread each). Further clients wait in the listen backlog
  /// until one closes; none is refused.
  size_t max_connections = 64;
  StreamLimits stream;
  /// > 0: the looper / legacy queries that connections ask within this wait are scored together
  /// (QueryBatcher; the same answers up to float rounding); 0: each alone, as it arrives.
  std::chrono::microseconds batch_wait{0};
};

/// Totals over every connection of a socket server.
struct SocketStats {
  int64_t connections = 0;
  int64_t batches = 0;  // with batch_wait: batches scored (queries / batches: their mean size)
  int64_t queries = 0;
  int64_t schedules = 0;
  int64_t errors = 0;
};

/// Creates the socket at `path` and serves until `stop` is set (checked every 100 ms): each
/// connection in its own thread, answers written as serve_stream writes them. An existing
/// socket file at `path` that nobody listens on (a server that died) is replaced; a live one,
/// or a file that is not a socket, is an error. On stop: no new connections, the open ones are
/// shut down for reading (each finishes the query it is scoring and answers it), every thread
/// is joined and the socket file removed. A client that disconnects mid-request ends only its
/// own stream. `log` receives serve_stream's lines prefixed with "connection N: ", and must be
/// thread-safe. Throws std::runtime_error naming the path when the socket cannot be created
/// (path longer than the 107 bytes sockaddr_un holds, a missing folder, a live server).
/// `on_ready` is called once the socket listens.
SocketStats serve_socket(Scorer& scorer, Protocol protocol, const std::string& path,
                         const std::atomic<bool>& stop, const SocketOptions& options,
                         const std::function<void(const std::string&)>& log,
                         const std::function<void()>& on_ready = {});

}  // namespace lcm::serve
