// RouteTable and the routed stream (routes.h).
#include "routes.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/unique_fd.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::lifecycle {
namespace {

std::string where(Ipv4Address address, std::uint16_t port) {
  return address.to_string() + ":" + std::to_string(port);
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

// Waits for `events` on `fd` until `deadline`: true when they came (or an error/hang-up).
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms_until(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the next call on the socket says what is wrong
  }
}

class RoutedStream final : public PortStream {
 public:
  RoutedStream(UniqueFd fd, std::unique_ptr<RouteTable::Lease> lease,
               std::shared_ptr<void> keep_alive, std::string where)
      : keep_alive_(std::move(keep_alive)),
        lease_(std::move(lease)),
        fd_(std::move(fd)),
        where_(std::move(where)) {}
  ~RoutedStream() override { close(); }  // then the lease ends (UNROUTE), then the socket

  Status write(std::string_view bytes, std::chrono::milliseconds timeout) override {
    lease_->keep();
    auto deadline = Clock::now() + timeout;
    while (!bytes.empty()) {
      if (closed_ || write_shut_) return ssh_fail(SshErrc::kClosed, "route: closed for writing");
      ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!wait_for(fd_.get(), POLLOUT, deadline))
          return ssh_fail(SshErrc::kTimeout, "route: the service on " + where_ + " does not read");
        continue;
      }
      return ssh_fail(SshErrc::kDisconnected,
                      "route: the service on " + where_ + " is gone: " + std::strerror(errno));
    }
    return {};
  }

  void shutdown_write() override {
    if (write_shut_.exchange(true) || closed_) return;
    ::shutdown(fd_.get(), SHUT_WR);
  }

  Result<std::size_t> read(char* buf, std::size_t n, std::chrono::milliseconds timeout) override {
    lease_->keep();
    auto deadline = Clock::now() + timeout;
    for (;;) {
      if (closed_) return ssh_fail(SshErrc::kClosed, "route: closed");
      ssize_t got = ::recv(fd_.get(), buf, n, MSG_DONTWAIT);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return ssh_fail(SshErrc::kDisconnected,
                        "route: the connection to " + where_ + " broke: " + std::strerror(errno));
      if (!wait_for(fd_.get(), POLLIN, deadline))
        return ssh_fail(SshErrc::kTimeout, "route: the service on " + where_ +
                                               " sent nothing within " +
                                               std::to_string(timeout.count()) + " ms");
    }
  }

  // Shuts the socket both ways (a reader or writer waiting in poll wakes up); the descriptor is
  // closed with the stream, never under another thread's call.
  void close() override {
    if (closed_.exchange(true)) return;
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

 private:
  std::shared_ptr<void> keep_alive_;  // the RouteTable's owner, outliving the lease
  std::unique_ptr<RouteTable::Lease> lease_;
  UniqueFd fd_;
  std::string where_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> write_shut_{false};
};

}  // namespace

RouteTable::Lease::Lease(RouteTable& table, Ipv4Address address, std::uint16_t port,
                         std::chrono::seconds life)
    : table_(table),
      address_(address),
      port_(port),
      life_(life),
      next_((Clock::now() + life / 2).time_since_epoch().count()) {}

RouteTable::Lease::~Lease() {
  table_.release({address_, port_});
}

void RouteTable::Lease::keep() {
  if (Clock::now().time_since_epoch().count() < next_.load(std::memory_order_relaxed)) return;
  next_ = table_.refresh({address_, port_}, life_).time_since_epoch().count();
}

Result<std::unique_ptr<RouteTable::Lease>> RouteTable::acquire(Ipv4Address address,
                                                               std::uint16_t port,
                                                               std::chrono::seconds life) {
  std::lock_guard lock(mu_);
  auto& e = entries_[{address, port}];
  // The first user asks; a later one asks again if half the element's life has passed (the
  // others may be idle), so that it lives at least half its life from this lease on.
  if (e.users == 0 || Clock::now() >= e.asked + life / 2) {
    auto life_s = static_cast<std::uint32_t>(life.count());
    if (auto ok = agent_.route(address, port, life_s); !ok) {
      if (e.users == 0) entries_.erase({address, port});
      return fail(ok.error());
    }
    e.asked = Clock::now();
  }
  ++e.users;
  return std::make_unique<Lease>(*this, address, port, life);
}

Clock::time_point RouteTable::refresh(const Key& key, std::chrono::seconds life) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return Clock::time_point::max();
  auto now = Clock::now();
  // Another user of the element may have asked already.
  if (now < it->second.asked + life / 2) return it->second.asked + life / 2;
  if (auto ok = agent_.route(key.first, key.second, static_cast<std::uint32_t>(life.count()));
      !ok) {
    log::warn("route " + where(key.first, key.second) + ": refresh: " + ok.error().message);
    return now + std::chrono::seconds(1);  // try again soon; the element may still live
  }
  it->second.asked = now;
  return now + life / 2;
}

void RouteTable::release(const Key& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || --it->second.users > 0) return;
  entries_.erase(it);
  if (auto ok = agent_.unroute(key.first, key.second); !ok)
    log::warn("route " + where(key.first, key.second) + ": " + ok.error().message +
              " (the element ends with its timeout)");
}

void RouteTable::forget(Ipv4Address address) {
  std::lock_guard lock(mu_);
  for (auto& [key, e] : entries_)
    if (key.first == address) e.asked = Clock::time_point::min();
}

std::size_t RouteTable::in_use() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

Result<std::unique_ptr<PortStream>> open_routed_stream(Ipv4Address address,
                                                       const RouteOptions& options,
                                                       std::unique_ptr<RouteTable::Lease> lease,
                                                       std::shared_ptr<void> keep_alive) {
  const std::string to = where(address, options.port);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd)
    return ssh_fail(SshErrc::kNetwork, std::string("route: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(options.port);
  sa.sin_addr.s_addr = htonl(address.to_uint());
  int err = 0;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      if (!wait_for(fd.get(), POLLOUT, Clock::now() + options.connect_timeout))
        return ssh_fail(SshErrc::kConnectTimeout,
                        "route: no connection to " + to + " within " +
                            std::to_string(options.connect_timeout.count()) + " ms");
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  if (err == ECONNREFUSED)
    return ssh_fail(SshErrc::kConnectRefused, "route: nothing accepts connections at " + to);
  if (err != 0)
    return ssh_fail(SshErrc::kNetwork, "route: connecting to " + to + ": " + std::strerror(err));
  return std::make_unique<RoutedStream>(std::move(fd), std::move(lease), std::move(keep_alive), to);
}

}  // namespace pvs::lifecycle
