#include "agent_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pvs::lifecycle {
namespace {

using Clock = std::chrono::steady_clock;

Status wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return fail(ErrorCode::kTimeout, "agent: no answer in time");
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return {};
    if (r < 0 && errno != EINTR) return fail(errno_error("agent: poll", errno));
  }
}

}  // namespace

Status AgentLink::connect_locked() {
  fd_.reset();
  buffer_.clear();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail(errno_error("agent: socket", errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path))
    return fail(ErrorCode::kInvalidArgument, "agent: socket path too long");
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
      errno != EINPROGRESS && errno != EAGAIN)
    return fail(ErrorCode::kUnavailable,
                "agent: cannot connect to " + socket_path_ + ": " + std::strerror(errno));
  fd_ = std::move(fd);
  ++connects_;
  auto reply = roundtrip_locked(proto::format_request(proto::HelloRequest{}));
  if (!reply) {
    fd_.reset();
    return fail(reply.error());
  }
  auto parsed = proto::parse_reply(*reply);
  if (!parsed || !parsed->ok) {
    fd_.reset();
    return fail(ErrorCode::kUnavailable, "agent: HELLO refused: " + *reply);
  }
  return {};
}

Result<std::string> AgentLink::roundtrip_locked(const std::string& line) {
  auto deadline = Clock::now() + timeout_;
  std::string out = line + "\n";
  std::size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(fd_.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (auto w = wait_fd(fd_.get(), POLLOUT, deadline); !w) return fail(w.error());
      continue;
    }
    return fail(ErrorCode::kUnavailable, std::string("agent: send: ") + std::strerror(errno));
  }
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return reply;
    }
    if (buffer_.size() > proto::kMaxReplyLine)
      return fail(ErrorCode::kTooLarge, "agent: reply line too long");
    char chunk[8192];
    ssize_t n = ::recv(fd_.get(), chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return fail(ErrorCode::kUnavailable, "agent: connection closed");
    if (errno == EAGAIN || errno == EINTR) {
      if (auto w = wait_fd(fd_.get(), POLLIN, deadline); !w) return fail(w.error());
      continue;
    }
    return fail(ErrorCode::kUnavailable, std::string("agent: recv: ") + std::strerror(errno));
  }
}

Result<std::string> AgentLink::call(const proto::Request& request) {
  std::lock_guard lock(mu_);
  std::string line = proto::format_request(request);
  Result<std::string> reply = fail(ErrorCode::kUnavailable, "agent: not connected");
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!fd_) {
      if (auto c = connect_locked(); !c) return fail(c.error());
    }
    reply = roundtrip_locked(line);
    if (reply) break;
    fd_.reset();  // the stream is out of step or dead: start over
    // Only a connection that died before answering is worth a second try; every request is
    // idempotent (ALLOW/REVOKE/SYNC/BIND/UNBIND), so resending is safe.
    if (reply.error().code != ErrorCode::kUnavailable) break;
  }
  if (!reply) return fail(reply.error());
  auto parsed = proto::parse_reply(*reply);
  if (!parsed) {
    fd_.reset();
    return fail(ErrorCode::kUnavailable, "agent: bad reply: " + parsed.error().message);
  }
  if (!parsed->ok) {
    Error e = proto::error_from_reply(*parsed);
    e.message = "agent: " + std::string(proto::verb_name(request)) + ": " + e.message;
    return fail(std::move(e));
  }
  return std::move(parsed->text);
}

Status AgentLink::ping() {
  auto r = call(proto::HelloRequest{});
  if (!r) return fail(r.error());
  return {};
}

std::uint64_t AgentLink::connects() const {
  std::lock_guard lock(mu_);
  return connects_;
}

Status AgentLink::allow(Ipv4Address address, std::uint32_t ttl_seconds) {
  auto r = call(proto::AllowRequest{proto::Grant{address, ttl_seconds}});
  if (!r) return fail(r.error());
  return {};
}

Status AgentLink::revoke(Ipv4Address address) {
  auto r = call(proto::RevokeRequest{address});
  if (!r) return fail(r.error());
  return {};
}

Result<std::uint64_t> AgentLink::sync(const std::vector<proto::Grant>& grants) {
  auto r = call(proto::SyncRequest{grants});
  if (!r) return fail(r.error());
  return proto::parse_count_payload(*r);
}

Result<std::vector<proto::Grant>> AgentLink::list() {
  auto r = call(proto::ListRequest{});
  if (!r) return fail(r.error());
  return proto::parse_list_payload(*r);
}

Status AgentLink::bind(const proto::Binding& binding) {
  auto r = call(proto::BindRequest{binding});
  if (!r) return fail(r.error());
  return {};
}

Status AgentLink::unbind(const std::string& port) {
  auto r = call(proto::UnbindRequest{port});
  if (!r) return fail(r.error());
  return {};
}

Result<std::vector<proto::Binding>> AgentLink::bindings() {
  auto r = call(proto::BindingsRequest{});
  if (!r) return fail(r.error());
  return proto::parse_bindings_payload(*r);
}

Result<proto::StatusFields> AgentLink::status() {
  auto r = call(proto::StatusRequest{});
  if (!r) return fail(r.error());
  return proto::parse_status_payload(*r);
}

}  // namespace pvs::lifecycle
