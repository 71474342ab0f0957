#include "server.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::agent {
namespace {

constexpr int kLinesPerTurn = 64;  // fairness: requests handled per client per loop turn
constexpr std::size_t kReadChunk = 64 * 1024;

std::int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void send_and_forget(int fd, std::string_view line) {
  (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// sd_listen_fds(3), done by hand: the first passed descriptor is fd 3.
Result<std::optional<UniqueFd>> systemd_listener() {
  const char* pid_env = std::getenv("LISTEN_PID");
  const char* fds_env = std::getenv("LISTEN_FDS");
  if (pid_env == nullptr || fds_env == nullptr) return std::optional<UniqueFd>();
  char* end = nullptr;
  long pid = std::strtol(pid_env, &end, 10);
  bool for_us = end != pid_env && *end == '\0' && pid == static_cast<long>(getpid());
  long count = std::strtol(fds_env, &end, 10);
  bool count_ok = end != fds_env && *end == '\0';
  // Whatever happens, children must not see these.
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (!for_us) return std::optional<UniqueFd>();
  if (!count_ok || count < 1) {
    return fail(ErrorCode::kInvalidArgument, "socket activation: bad LISTEN_FDS");
  }
  constexpr int kFirst = 3;
  for (long i = 1; i < count; ++i) {
    log::warn("socket activation: ignoring extra descriptor " + std::to_string(kFirst + i));
  }
  int fd = kFirst;
  int type = 0, listening = 0, domain = 0;
  socklen_t len = sizeof(int);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
    return fail(ErrorCode::kInvalidArgument, "socket activation: fd 3 is not a stream socket");
  }
  len = sizeof(int);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) {
    return fail(ErrorCode::kInvalidArgument, "socket activation: fd 3 is not a unix socket");
  }
  len = sizeof(int);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) {
    return fail(ErrorCode::kInvalidArgument, "socket activation: fd 3 is not listening");
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return std::optional<UniqueFd>(UniqueFd(fd));
}

}  // namespace

Result<Listener> open_listener(const AgentConfig& config) {
  auto activated = systemd_listener();
  if (!activated) return fail(activated.error());
  if (*activated) {
    log::info("using the socket passed by systemd");
    return Listener{std::move(**activated), true, config.socket};
  }
  const std::string& path = config.socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return fail(ErrorCode::kInvalidArgument, "socket path too long: " + path);
  }
  // Bound under a temporary name, then renamed into place once it listens: a client never finds
  // the path before it accepts (between bind() and listen() a connect is refused), e.g. a
  // controller started with the agent. Without room for the suffix, bound in place.
  const std::string bound = path.size() + 4 < sizeof(addr.sun_path) ? path + ".new" : path;
  std::memcpy(addr.sun_path, bound.c_str(), bound.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fail(errno_error("socket", errno));

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return fail(ErrorCode::kAlreadyExists, path + " exists and is not a socket");
    }
    if (connect_unix(path)) {
      return fail(ErrorCode::kAlreadyExists, "another agent is listening on " + path);
    }
    ::unlink(path.c_str());  // stale socket of a dead agent
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!config.socket_group.empty()) {
    group* g = ::getgrnam(config.socket_group.c_str());
    if (g == nullptr) {
      return fail(ErrorCode::kNotFound,
                  "socket_group " + pvs::quoted(config.socket_group) + " does not exist");
    }
    gid = g->gr_gid;
  }
  if (bound != path) ::unlink(bound.c_str());  // left by an agent that died binding
  mode_t old = ::umask(0117);                  // the socket is born 0660, never wider
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::umask(old);
  if (rc != 0) return fail(errno_error("bind " + bound, err));
  auto undo = [&](const char* what) {
    int e = errno;
    ::unlink(bound.c_str());
    return fail(errno_error(std::string(what) + " " + bound, e));
  };
  if (gid != static_cast<gid_t>(-1) && ::chown(bound.c_str(), static_cast<uid_t>(-1), gid) != 0)
    return undo("chown");
  if (::chmod(bound.c_str(), 0660) != 0) return undo("chmod");
  if (::listen(fd.get(), 128) != 0) return undo("listen");
  if (bound != path && ::rename(bound.c_str(), path.c_str()) != 0) return undo("rename");
  log::info("listening on " + path);
  return Listener{std::move(fd), false, path};
}

Server::Server(Agent& agent, Listener listener) : agent_(agent), listener_(std::move(listener)) {}

Server::~Server() {
  if (!listener_.activated && listener_.fd) ::unlink(listener_.path.c_str());
}

void Server::stop() {
  stopping_ = true;
  if (wake_fd_) {
    std::uint64_t one = 1;
    (void)::write(wake_fd_.get(), &one, sizeof(one));
  }
}

bool Server::peer_allowed(int fd, const Peer& peer) const {
  const auto& config = agent_.config();
  if (std::find(config.allowed_uids.begin(), config.allowed_uids.end(), peer.uid) !=
      config.allowed_uids.end()) {
    return true;
  }
  // The resolver: admitted here, limited to its verbs by Agent::handle().
  if (std::find(config.resolver_uids.begin(), config.resolver_uids.end(), peer.uid) !=
      config.resolver_uids.end()) {
    return true;
  }
  if (config.allowed_gids.empty()) return false;
  auto gid_allowed = [&](gid_t gid) {
    return std::find(config.allowed_gids.begin(), config.allowed_gids.end(), gid) !=
           config.allowed_gids.end();
  };
  if (gid_allowed(peer.gid)) return true;
  std::vector<gid_t> groups(64);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
    if (errno != ERANGE) return false;
    groups.resize(len / sizeof(gid_t) + 1);
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
  }
  groups.resize(len / sizeof(gid_t));
  return std::any_of(groups.begin(), groups.end(), gid_allowed);
}

void Server::accept_clients() {
  const auto& config = agent_.config();
  while (true) {
    int raw = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) log::warn(errno_error("accept", errno).message);
      return;
    }
    UniqueFd fd(raw);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(raw, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      log::warn(errno_error("SO_PEERCRED", errno).message);
      continue;
    }
    Peer peer{cred.pid, cred.uid, cred.gid};
    if (!peer_allowed(raw, peer)) {
      log::warn("refused peer uid=" + std::to_string(peer.uid) + " gid=" +
                std::to_string(peer.gid) + " pid=" + std::to_string(peer.pid) + ": not authorized");
      send_and_forget(raw, "ERR 403 not authorized\n");
      continue;
    }
    if (clients_.size() >= config.max_clients) {
      log::warn("refused peer pid=" + std::to_string(peer.pid) + ": max_clients reached");
      send_and_forget(raw, "ERR 500 too many clients\n");
      continue;
    }
    Client c;
    c.peer = peer;
    c.last_activity_ms = mono_ms();
    c.events = EPOLLIN;
    epoll_event ev{};
    ev.events = c.events;
    ev.data.fd = raw;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &ev) != 0) {
      log::warn(errno_error("epoll_ctl", errno).message);
      continue;
    }
    c.fd = std::move(fd);
    clients_.emplace(raw, std::move(c));
    log::debug("client pid=" + std::to_string(peer.pid) + " uid=" + std::to_string(peer.uid) +
               " connected");
  }
}

void Server::read_client(Client& c) {
  char buf[kReadChunk];
  // Read only while there is room: one line of input beyond what is queued, and output
  // below the per-client bound. The rest waits in the kernel's socket buffer.
  while (!c.read_closed && !c.broken && c.in.size() - c.consumed <= proto::kMaxRequestLine + 1 &&
         pending_out(c) < agent_.config().max_pending_bytes) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.broken = true;
      return;
    }
    if (n == 0) {
      c.read_closed = true;
      return;
    }
    c.last_activity_ms = mono_ms();
    if (c.consumed > 0 && c.consumed == c.in.size()) {
      c.in.clear();
      c.consumed = 0;
    }
    c.in.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < sizeof(buf)) return;
  }
}

bool Server::process_client(Client& c, int budget) {
  while (budget > 0 && !c.broken) {
    if (pending_out(c) >= agent_.config().max_pending_bytes) break;
    std::size_t nl = c.in.find('\n', c.consumed);
    if (c.skipping) {
      if (nl == std::string::npos) {
        c.in.clear();
        c.consumed = 0;
        break;
      }
      c.consumed = nl + 1;
      c.skipping = false;
      continue;
    }
    if (nl == std::string::npos) {
      if (c.in.size() - c.consumed > proto::kMaxRequestLine) {
        c.out += proto::format_error(
            proto::ReplyCode::kTooLarge,
            "line longer than " + std::to_string(proto::kMaxRequestLine) + " bytes");
        c.out += '\n';
        c.in.clear();
        c.consumed = 0;
        c.skipping = true;
      }
      break;
    }
    std::string_view line(c.in.data() + c.consumed, nl - c.consumed);
    std::uint64_t changes = agent_.changes();
    std::string reply = agent_.handle(c.peer, line);
    if (agent_.changes() != changes && reply.starts_with("OK")) {
      c.unpersisted.emplace_back(c.out.size(), reply.size());
    }
    c.out += reply;
    c.out += '\n';
    c.consumed = nl + 1;
    --budget;
  }
  if (c.consumed == c.in.size()) {
    c.in.clear();
    c.consumed = 0;
  } else if (c.consumed > proto::kMaxRequestLine) {
    c.in.erase(0, c.consumed);
    c.consumed = 0;
  }
  return !c.skipping && c.in.find('\n', c.consumed) != std::string::npos;
}

void Server::flush_client(Client& c) {
  while (pending_out(c) > 0 && !c.broken) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_sent, pending_out(c), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.broken = true;
      break;
    }
    c.out_sent += static_cast<std::size_t>(n);
    c.last_activity_ms = mono_ms();
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent > (1u << 20)) {
    c.out.erase(0, c.out_sent);
    c.out_sent = 0;
  }
}

void Server::update_interest(Client& c) {
  std::uint32_t events = 0;
  if (!c.read_closed && c.in.size() - c.consumed <= proto::kMaxRequestLine + 1 &&
      pending_out(c) < agent_.config().max_pending_bytes) {
    events |= EPOLLIN;
  }
  if (pending_out(c) > 0) events |= EPOLLOUT;
  if (events == c.events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c.fd.get();
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.events = events;
}

void Server::persist_turn(const std::vector<int>& fds) {
  auto ok = agent_.persist();
  for (int fd : fds) {
    auto it = clients_.find(fd);
    if (it == clients_.end() || it->second.unpersisted.empty()) continue;
    Client& c = it->second;
    if (!ok) {
      std::string error = proto::format_error(
          proto::ReplyCode::kInternal,
          "change applied but not saved to the state file (" + ok.error().message + "): retry");
      std::string out;
      std::size_t from = 0;
      for (auto [offset, length] : c.unpersisted) {
        out.append(c.out, from, offset - from);
        out += error;
        from = offset + length;
      }
      out.append(c.out, from, std::string::npos);
      c.out = std::move(out);
    }
    c.unpersisted.clear();
  }
}

void Server::close_client(int fd) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  clients_.erase(fd);
}

Status Server::open_loop() {
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_.reset(signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!signal_fd_ || !wake_fd_ || !epoll_) {
    return fail(errno_error("setting up the event loop", errno));
  }
  for (int fd : {listener_.fd.get(), signal_fd_.get(), wake_fd_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return fail(errno_error("epoll_ctl", errno));
    }
  }
  return {};
}

void Server::read_signals() {
  signalfd_siginfo info{};
  while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo == SIGHUP) {
      log::info("SIGHUP ignored (restart the service to reload the configuration)");
    } else {
      log::info(std::string("received ") + strsignal(static_cast<int>(info.ssi_signo)) +
                ", shutting down");
      stopping_ = true;
    }
  }
}

void Server::finish_turn(const std::vector<int>& touched, std::vector<int>* ready) {
  // Group commit: the state file is written once per turn, before any reply of the turn
  // leaves, so an OK is never sent for a change that a crash could forget.
  persist_turn(touched);
  for (int fd : touched) {
    auto it = clients_.find(fd);
    if (it == clients_.end()) continue;
    Client& c = it->second;
    flush_client(c);
    bool more = c.in.find('\n', c.consumed) != std::string::npos;
    if (c.broken || (c.read_closed && pending_out(c) == 0 && !more)) {
      close_client(fd);
      std::erase(*ready, fd);
      continue;
    }
    if (more && std::find(ready->begin(), ready->end(), fd) == ready->end()) ready->push_back(fd);
    update_interest(c);
  }
}

void Server::periodic(std::int64_t now, std::vector<int>* ready) {
  const auto& config = agent_.config();
  agent_.set_client_count(clients_.size());
  agent_.tick();
  (void)agent_.persist();
  std::int64_t idle_limit = std::int64_t{config.idle_timeout_seconds} * 1000;
  std::vector<int> idle;
  for (auto& [fd, c] : clients_) {
    if (now - c.last_activity_ms > idle_limit) idle.push_back(fd);
  }
  for (int fd : idle) {
    log::info("closing idle client pid=" + std::to_string(clients_.at(fd).peer.pid));
    close_client(fd);
    std::erase(*ready, fd);
  }
}

void Server::drain_on_stop() {
  // Every request read so far has been answered and its change committed; push out what the
  // clients have not taken yet, briefly, then go.
  std::vector<int> all;
  for (const auto& [fd, c] : clients_) all.push_back(fd);
  persist_turn(all);
  std::int64_t deadline = mono_ms() + 1000;
  for (auto& [fd, c] : clients_) {
    while (pending_out(c) > 0 && !c.broken && mono_ms() < deadline) {
      flush_client(c);
      if (pending_out(c) > 0) ::usleep(1000);
    }
  }
  clients_.clear();
}

int Server::run() {
  if (auto ok = open_loop(); !ok) {
    log::error(ok.error().message);
    return 1;
  }
  const auto& config = agent_.config();
  std::int64_t next_tick = mono_ms() + config.drift_check_ms;
  std::vector<int> ready;  // clients with complete lines left over from the last turn
  std::vector<epoll_event> events(64);
  while (!stopping_) {
    std::int64_t now = mono_ms();
    int timeout =
        ready.empty() ? static_cast<int>(std::clamp<std::int64_t>(next_tick - now, 0, 1000)) : 0;
    int n = epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout);
    if (n < 0 && errno != EINTR) {
      log::error(errno_error("epoll_wait", errno).message);
      return 1;
    }
    std::vector<int> touched = std::move(ready);
    ready.clear();
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener_.fd.get()) {
        accept_clients();
      } else if (fd == signal_fd_.get()) {
        read_signals();
      } else if (fd == wake_fd_.get()) {
        std::uint64_t v;
        (void)::read(wake_fd_.get(), &v, sizeof(v));
      } else if (auto it = clients_.find(fd); it != clients_.end()) {
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
          read_client(it->second);
        }
        touched.push_back(fd);
      }
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int fd : touched) {
      auto it = clients_.find(fd);
      if (it == clients_.end()) continue;
      if (process_client(it->second, kLinesPerTurn)) ready.push_back(fd);
    }
    finish_turn(touched, &ready);
    now = mono_ms();
    if (now >= next_tick) {
      periodic(now, &ready);
      next_tick = now + config.drift_check_ms;
    }
    agent_.set_client_count(clients_.size());
  }
  drain_on_stop();
  log::info("stopped");
  return 0;
}

}  // namespace pvs::agent
