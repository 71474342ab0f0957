// The resolver's event loop: UDP and TCP from the sandboxes, the shared agent connections and
// c-ares' sockets, all on one thread (#32), so a flood of queries costs slots, never threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>

#include "mono_clock.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"
#include "resolver.h"

namespace pvs::resolver {
namespace {

constexpr std::int64_t kTcpIdleMs = 10'000;
constexpr std::size_t kTcpMaxBuffered = 2 + 65535;
constexpr int kUdpBatch = 64;  // datagrams read per loop turn before the other sockets

sockaddr_in to_sockaddr(Ipv4Address address, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(address.to_uint());
  return sa;
}

}  // namespace

Resolver::~Resolver() {
  stop();
}

Status Resolver::open() {
  auto bind_socket = [&](int type) -> Result<UniqueFd> {
    UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return fail(errno_error("socket", errno));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::setsockopt(fd.get(), IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
    sockaddr_in sa = to_sockaddr(config_.listen, config_.port);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      return fail(errno_error(
          "bind " + config_.listen.to_string() + ":" + std::to_string(config_.port), errno));
    }
    socklen_t len = sizeof(sa);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    config_.port = ntohs(sa.sin_port);  // port 0: tcp binds what udp got
    if (type == SOCK_STREAM && ::listen(fd.get(), 128) != 0) {
      return fail(errno_error("listen", errno));
    }
    return fd;
  };
  auto udp = bind_socket(SOCK_DGRAM);
  if (!udp) return fail(udp.error());
  auto tcp = bind_socket(SOCK_STREAM);
  if (!tcp) return fail(tcp.error());
  udp_ = std::move(*udp);
  tcp_ = std::move(*tcp);
  return {};
}

Status Resolver::start() {
  auto upstream = Upstream::create(config_.upstreams, config_.upstream_timeout_ms);
  if (!upstream) return fail(upstream.error());
  upstream_ = std::move(*upstream);
  for (std::uint32_t i = 0; i < config_.agent_connections; ++i) {
    agents_.push_back(std::make_unique<AgentLink>(config_.agent_socket, 2000));
  }
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    return fail(ErrorCode::kUnavailable, std::string("event loop thread: ") + e.what());
  }
  return {};
}

void Resolver::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  tcp_clients_.clear();
  tcp_per_source_.clear();
  upstream_.reset();  // its pending callbacks are dropped (ARES_EDESTRUCTION)
  agents_.clear();
  jobs_.clear();
}

void Resolver::loop() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> client_ids;
  while (!stopping_) {
    while (!runnable_.empty()) {
      std::uint64_t id = runnable_.front();
      runnable_.pop_front();
      start_job(id);
    }
    std::int64_t now = mono_ms();
    fds.assign({pollfd{udp_.get(), POLLIN, 0}, pollfd{tcp_.get(), POLLIN, 0}});
    client_ids.clear();
    int timeout = first_lines_.empty() ? 100 : 0;  // stopping_ is seen within 100 ms
    for (auto& [id, c] : tcp_clients_) {
      short events = static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT));
      fds.push_back(pollfd{c->fd.get(), events, 0});
      client_ids.push_back(id);
      timeout = static_cast<int>(std::clamp<std::int64_t>(c->idle_deadline_ms - now, 0, timeout));
    }
    for (const auto& a : agents_) {
      a->add_pollfd(fds);
      if (int t = a->next_timeout_ms(now); t >= 0) timeout = std::min(timeout, t);
    }
    upstream_->add_pollfds(fds);
    if (int t = upstream_->next_timeout_ms(); t >= 0) timeout = std::min(timeout, t);
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      log::error("poll: " + errno_error("poll", errno).message);
      continue;
    }
    now = mono_ms();
    flush_log(now);
    if (fds[0].revents & POLLIN) read_udp();
    if (fds[1].revents & POLLIN) accept_tcp();
    for (std::size_t i = 0; i < client_ids.size(); ++i) {
      auto it = tcp_clients_.find(client_ids[i]);
      if (it == tcp_clients_.end()) continue;
      short revents = fds[2 + i].revents;
      if (revents & POLLOUT) write_tcp(*it->second);
      if (revents & (POLLIN | POLLERR | POLLHUP)) {
        read_tcp(client_ids[i]);
      } else if (it->second->idle_deadline_ms <= now) {
        close_tcp(client_ids[i]);
      }
    }
    for (const auto& a : agents_) a->process(fds, now);
    upstream_->process(fds);
  }
}

void Resolver::read_udp() {
  std::uint8_t buf[4096];
  for (int i = 0; i < kUdpBatch; ++i) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    ssize_t n = ::recvfrom(udp_.get(), buf, sizeof(buf), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return;
    Ipv4Address source(ntohl(from.sin_addr.s_addr));
    if (!config_.sandbox_cidr.contains(source)) {  // before any state is kept for it
      ++stats_.outsider;
      continue;
    }
    intake(source, {buf, static_cast<std::size_t>(n)}, 0, from);
  }
}

void Resolver::accept_tcp() {
  for (int i = 0; i < kUdpBatch; ++i) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    UniqueFd fd(::accept4(tcp_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                          SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;
    Ipv4Address source(ntohl(from.sin_addr.s_addr));
    // The cidr first, then the caps: an outsider never holds a slot.
    if (!config_.sandbox_cidr.contains(source)) {
      ++stats_.outsider;
      ++stats_.tcp_refused;
      continue;
    }
    std::uint32_t& mine = tcp_per_source_[source.to_uint()];
    if (tcp_clients_.size() >= config_.max_tcp_clients || mine >= config_.max_tcp_per_source) {
      if (mine == 0) tcp_per_source_.erase(source.to_uint());
      ++stats_.tcp_refused;
      continue;
    }
    ++mine;
    auto client = std::make_unique<TcpClient>();
    client->fd = std::move(fd);
    client->source = source;
    client->idle_deadline_ms = mono_ms() + kTcpIdleMs;
    tcp_clients_.emplace(next_id_++, std::move(client));
  }
}

void Resolver::close_tcp(std::uint64_t id) {
  auto it = tcp_clients_.find(id);
  if (it == tcp_clients_.end()) return;
  auto per = tcp_per_source_.find(it->second->source.to_uint());
  if (per != tcp_per_source_.end() && --per->second == 0) tcp_per_source_.erase(per);
  tcp_clients_.erase(it);  // replies still to come for it are dropped (send_reply)
}

void Resolver::read_tcp(std::uint64_t id) {
  TcpClient& c = *tcp_clients_.at(id);
  std::uint8_t buf[4096];
  while (true) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return close_tcp(id);
    c.in.insert(c.in.end(), buf, buf + n);
    if (c.in.size() > 4 * kTcpMaxBuffered) return close_tcp(id);
  }
  c.idle_deadline_ms = mono_ms() + kTcpIdleMs;
  std::size_t used = 0;
  std::vector<std::vector<std::uint8_t>> messages;
  while (c.in.size() - used >= 2) {
    std::size_t size = static_cast<std::size_t>(c.in[used] << 8 | c.in[used + 1]);
    if (c.in.size() - used < 2 + size) break;
    messages.emplace_back(c.in.begin() + static_cast<std::ptrdiff_t>(used + 2),
                          c.in.begin() + static_cast<std::ptrdiff_t>(used + 2 + size));
    used += 2 + size;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(used));
  Ipv4Address source = c.source;
  for (const auto& m : messages) intake(source, m, id, sockaddr_in{});
}

void Resolver::write_tcp(TcpClient& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // full (POLLOUT later) or broken (POLLERR/POLLHUP closes it)
    c.out.erase(c.out.begin(), c.out.begin() + n);
  }
}

void Resolver::send_reply(const Job& job, const std::vector<std::uint8_t>& reply) {
  if (job.tcp == 0) {
    ::sendto(udp_.get(), reply.data(), reply.size(), MSG_DONTWAIT,
             reinterpret_cast<const sockaddr*>(&job.from), sizeof(job.from));
    return;
  }
  auto it = tcp_clients_.find(job.tcp);
  if (it == tcp_clients_.end()) return;  // the client has gone
  TcpClient& c = *it->second;
  if (c.out.size() > 4 * kTcpMaxBuffered) return;  // a client that does not read
  c.out.push_back(static_cast<std::uint8_t>(reply.size() >> 8));
  c.out.push_back(static_cast<std::uint8_t>(reply.size()));
  c.out.insert(c.out.end(), reply.begin(), reply.end());
  write_tcp(c);
  c.idle_deadline_ms = mono_ms() + kTcpIdleMs;
}

}  // namespace pvs::resolver
