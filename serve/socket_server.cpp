// lcm-serve's Unix-domain socket server (see socket_server.hpp).
#include "serve/socket_server.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "serve/query_batcher.hpp"

namespace lcm::serve {

namespace {

sockaddr_un socket_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a.sun_path))
    throw std::runtime_error("--socket " + path + ": a socket path must be 1 to " +
                             std::to_string(sizeof(a.sun_path) - 1) + " bytes long");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

/// Removes a socket file left by a server that died; refuses a live one or a non-socket.
void clear_stale_socket(const std::string& path, const sockaddr_un& a) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there
  if (!S_ISSOCK(st.st_mode))
    throw std::runtime_error("--socket " + path + ": exists and is not a socket (not replaced)");
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  const bool live = ::connect(probe, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  ::close(probe);
  if (live) throw std::runtime_error("--socket " + path + ": another server is listening there");
  ::unlink(path.c_str());
}

struct Connection {
  int fd = -1;
  int64_t number = 0;
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

SocketStats serve_socket(Scorer& scorer, Protocol protocol, const std::string& path,
                         const std::atomic<bool>& stop, const SocketOptions& options,
                         const std::function<void(const std::string&)>& log,
                         const std::function<void()>& on_ready) {
  const sockaddr_un addr = socket_address(path);
  clear_stale_socket(path, addr);
  const int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  if (::bind(lfd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(lfd);
    throw std::runtime_error("--socket " + path + ": cannot bind: " + std::strerror(err));
  }
  if (::listen(lfd, 128) != 0) {
    const int err = errno;
    ::close(lfd);
    ::unlink(path.c_str());
    throw std::runtime_error("--socket " + path + ": cannot listen: " + std::strerror(err));
  }
  if (on_ready) on_ready();

  SocketStats total;
  std::mutex total_mu;
  std::list<std::unique_ptr<Connection>> open;
  auto reap = [&](bool all) {
    for (auto it = open.begin(); it != open.end();) {
      if (all || (*it)->done.load()) {
        (*it)->thread.join();
        ::close((*it)->fd);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
  };
  const size_t cap = options.max_connections == 0 ? 1 : options.max_connections;
  std::unique_ptr<QueryBatcher> batcher;
  StreamLimits limits = options.stream;
  if (options.batch_wait.count() > 0) {
    batcher = std::make_unique<QueryBatcher>(scorer, options.batch_wait);
    limits.batcher = batcher.get();
  }
  while (!stop.load()) {
    reap(false);
    if (open.size() >= cap) {  // full: let the backlog wait until a connection ends
      ::poll(nullptr, 0, 20);
      continue;
    }
    pollfd p{lfd, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (r <= 0 || !(p.revents & POLLIN)) continue;  // timeout, EINTR: look at `stop` again
    const int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;  // the client gave up already, or EINTR
    auto c = std::make_unique<Connection>();
    c->fd = cfd;
    c->number = ++total.connections;
    Connection* cp = c.get();
    c->thread = std::thread([&, cp] {
      const std::string prefix = "connection " + std::to_string(cp->number) + ": ";
      const StreamStats s = serve_stream(scorer, protocol, cp->fd, cp->fd, stop, limits,
                                         [&](const std::string& line) { log(prefix + line); });
      {
        std::lock_guard<std::mutex> lock(total_mu);
        total.queries += s.queries;
        total.schedules += s.schedules;
        total.errors += s.errors;
      }
      cp->done.store(true);
    });
    open.push_back(std::move(c));
  }
  ::close(lfd);
  ::unlink(path.c_str());
  for (auto& c : open) ::shutdown(c->fd, SHUT_RD);  // blocked reads return: each stream ends
  reap(true);
  if (batcher) total.batches = batcher->batches();
  return total;
}

}  // namespace lcm::serve
